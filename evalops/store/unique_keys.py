"""The unique keys the rules rely on, per table (a test pins them to the models).

A re-ingest is a counted no-op and a changed record an error because a trial id is unique
per content (`trial_id`, `record_digest`; ingest allows a second content only for an id
whose rows are all voided); a trial row is voided once; numbers and ids of incidents,
waivers, voids, estimates and decisions are never issued twice because theirs are; the chain cannot
hold two events of one hash. Kept as plain data so that `verify` on SQLite checks them
through `sqlite3` alone; a migration that adds or drops a unique key changes this list
with it.
"""

from __future__ import annotations

UNIQUE_KEYS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("audit_event", ("hash",)),
    ("calibration", ("calibration_id",)),
    ("execution_profile", ("execution_id", "document_digest")),
    ("estimate", ("estimate_id",)),
    ("estimate", ("number",)),
    ("gate_decision", ("gate_id",)),
    ("gate_decision", ("number",)),
    ("grader_config", ("grader_set_row_id", "grader_id")),
    ("grader_set", ("grader_set_id", "version", "document_digest")),
    ("incident", ("incident_id",)),
    ("incident", ("number",)),
    ("policy", ("kind", "policy_id", "document_digest")),
    ("signed_act", ("act_id",)),
    ("suite", ("suite_id", "document_digest")),
    ("sync_in_force", ("sync_run_id", "kind", "definition_id")),
    ("task_revision", ("task_id", "revision", "document_digest")),
    # A voided trial's id may be ingested again with new content: unique per content.
    ("trial", ("trial_id", "record_digest")),
    ("trial_void", ("number",)),
    ("trial_void", ("void_id",)),
    ("voided_trial", ("trial_row_id",)),
    ("waiver", ("number",)),
    ("waiver", ("waiver_id",)),
)
