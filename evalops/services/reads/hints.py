"""What the `next:` lines of a held decision can fill in from the registry (plain SQL): the
graders whose verdict a trial awaits, and, under an authority, who may sign the waiver or
review they suggest (evalops/domain/next_steps.py `Hints`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from evalops.domain.authority import Scope, who_may_sign
from evalops.domain.next_steps import Hints, review_trials
from evalops.services.reads.authority import authority_at
from evalops.store.reader import Reader


def _awaited(reader: Reader, trial_id: str) -> list[str]:
    """The trial's graders that abstained and that no person has resolved yet."""
    record = reader.scalar("SELECT record FROM trial WHERE trial_id = :t", {"t": trial_id})
    if record is None:
        return []
    resolved = {
        str(r["grader_id"])
        for r in reader.rows(
            "SELECT grader_id FROM review_result WHERE trial_id = :t", {"t": trial_id}
        )
    }
    return sorted(
        {
            str(r.get("grader_id"))
            for r in json.loads(record).get("grader_results") or []
            if r.get("state") == "abstain" and r.get("grader_id") not in resolved
        }
    )


def _principals(text: Any) -> set[str]:
    return {str(s["principal"]) for s in json.loads(text)}


def _barred(
    reader: Reader, rules: Any, decision: Mapping[str, Any]
) -> tuple[set[str], dict[str, set[str]]]:
    """Who separation of duties bars: from waiving the build (`no_self_waiver`: signers of
    an ingest of its trials) and, by task, from reviewing its trial (`no_self_review`)."""
    waive: set[str] = set()
    if "no_self_waiver" in rules:
        for r in reader.rows(
            "SELECT scope, signers FROM signed_act WHERE kind IN ('trials.ingest', 'trials.import')"
        ):
            if str(decision["build"]) in json.loads(r["scope"]).get("builds", []):
                waive |= _principals(r["signers"])
    review: dict[str, set[str]] = {}
    if "no_self_review" in rules:
        for task in decision["tasks"]:
            for trial in review_trials({"tasks": [task]}):
                row = reader.first(
                    "SELECT a.signers FROM trial t JOIN signed_act a ON a.audit_seq = t.audit_seq "
                    "WHERE t.trial_id = :t",
                    {"t": trial},
                )
                if row is not None:
                    review.setdefault(str(task["task_id"]), set()).update(
                        _principals(row["signers"])
                    )
    return waive, review


def next_step_hints(reader: Reader, decision: Mapping[str, Any]) -> Hints:
    graders = {t: _awaited(reader, t) for t in review_trials(decision)}
    head = reader.scalar("SELECT max(seq) FROM audit_event")
    found = authority_at(reader, int(head)) if head is not None else None
    if found is None:
        return Hints(review_graders=graders)
    authority = found[0]
    suite = str(decision["suite"])

    held = [t for t in decision["tasks"] if t["effect"] == "hold"]
    no_waiver, no_review = _barred(reader, getattr(authority, "separation_of_duties", ()), decision)
    return Hints(
        signed=True,
        risk_owners={
            str(t["task_id"]): [
                p
                for p in who_may_sign(
                    authority, "waiver.grant", Scope(suite=suite, task=str(t["task_id"]))
                )
                if p not in no_waiver
            ]
            for t in held
        },
        reviewers={
            str(t["task_id"]): [
                p
                for p in who_may_sign(authority, "review.resolve", Scope(task=str(t["task_id"])))
                if p not in no_review.get(str(t["task_id"]), set())
            ]
            for t in held
        },
        review_graders=graders,
    )
