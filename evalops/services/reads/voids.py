"""Voids as read commands see them (`void list`, `gate show`, `trials list`): plain SQL
through a `Reader`, no SQLAlchemy on a SQLite file (ARCHITECTURE.md, "read commands").
`evalops/services/ingest/voids.py` records them."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from evalops.domain.voids import is_hard, void_line, who
from evalops.store.reader import Reader

_VOIDS = (
    "SELECT v.id, v.void_id, v.reason, v.batch, v.trial_count, v.hard_count, v.at, v.actor, "
    "v.audit_seq FROM trial_void v"
)


def _signers(reader: Reader, audit_seq: int) -> list[dict[str, str]]:
    row = reader.first(
        "SELECT signers FROM signed_act WHERE audit_seq = :seq AND kind = 'trials.void'",
        {"seq": audit_seq},
    )
    return [] if row is None else list(json.loads(row["signers"]))


def _view(reader: Reader, row: dict[str, Any]) -> dict[str, Any]:
    from evalops.services.reads.listings import stored_time

    out = {
        "void_id": row["void_id"],
        "reason": row["reason"],
        "batch": row["batch"],
        "trial_count": int(row["trial_count"]),
        "hard_count": int(row["hard_count"]),
        "at": stored_time(row["at"]),
        "actor": row["actor"],
        "signers": _signers(reader, int(row["audit_seq"])),
        "audit_seq": int(row["audit_seq"]),
    }
    out["line"] = void_line(out)
    return out


def list_voids(reader: Reader) -> list[dict[str, Any]]:
    """Every void, hard-failure voids first (they are what a reviewer must look at), then
    newest first."""
    voids = [_view(reader, r) for r in reader.rows(f"{_VOIDS} ORDER BY v.id DESC")]
    for v in voids:
        v["trials"] = [
            r["trial_id"]
            for r in reader.rows(
                "SELECT t.trial_id FROM voided_trial t JOIN trial_void v ON v.id = t.void_row_id "
                "WHERE v.void_id = :id ORDER BY t.id",
                {"id": v["void_id"]},
            )
        ]
    return sorted(voids, key=lambda v: v["hard_count"] == 0)


def void_of_trial_row(reader: Reader, trial_row_id: int) -> dict[str, Any] | None:
    """The void that left a trial row out, or None."""
    row = reader.first(
        f"{_VOIDS} JOIN voided_trial t ON t.void_row_id = v.id WHERE t.trial_row_id = :row",
        {"row": trial_row_id},
    )
    return None if row is None else _view(reader, row)


def voids_for(
    reader: Reader, execution_digests: Iterable[str], task_ids: Iterable[str], cutoff: int
) -> list[dict[str, Any]]:
    """The voids as of `cutoff` that left out trials of these executions and tasks (a
    decision's builds and members), each with how many of them: what a decision says it
    left out, by whom and why."""
    digests = sorted(set(execution_digests))
    wanted = set(task_ids)
    if not digests or not wanted:
        return []
    marks = ", ".join(f":d{i}" for i in range(len(digests)))
    counts: dict[int, int] = {}
    hard: dict[int, int] = {}
    for r in reader.rows(
        "SELECT vt.void_row_id, t.task_id, t.classification AS stored, vt.classification AS "
        "voided FROM voided_trial vt JOIN trial t ON t.id = vt.trial_row_id WHERE "
        f"vt.audit_seq <= :cutoff AND t.execution_digest IN ({marks})",
        {"cutoff": cutoff, **{f"d{i}": d for i, d in enumerate(digests)}},
    ):
        if r["task_id"] in wanted:
            void_row = int(r["void_row_id"])
            counts[void_row] = counts.get(void_row, 0) + 1
            # The void's own rule (its class when ingested, or when voided), for these
            # trials only: a hard failure of another build is not this decision's.
            hard[void_row] = hard.get(void_row, 0) + is_hard(r["stored"], r["voided"])
    out = []
    for void_row, n in sorted(counts.items()):
        row = reader.first(f"{_VOIDS} WHERE v.id = :id", {"id": void_row})
        if row is not None:
            view = _view(reader, row)
            view["trials_here"] = n
            view["hard_here"] = hard[void_row]
            view["line"] = void_line(view, n)
            out.append(view)
    return out


def void_entry(void: Mapping[str, Any]) -> dict[str, Any]:
    """A void as a decision lists it (`voids` of `gate check --json` and of the audit
    report, docs/json.md): who, why, and how many of the decision's trials it left out, and
    how many of those were hard failures."""
    return {
        "void_id": void["void_id"],
        "at": void["at"],
        "actor": void["actor"],
        "signers": list(void["signers"]),
        "by": who(void),
        "reason": void["reason"],
        "trials_left_out": int(void["trials_here"]),
        "hard_count": int(void["hard_here"]),
        "line": void["line"],
    }


def decision_void_entries(
    reader: Reader, execution_digest: str, task_ids: Iterable[str], cutoff: int
) -> list[dict[str, Any]]:
    """The voids recorded at or before `cutoff` that left out trials of this execution and
    these member tasks, hard-failure voids first (what a reviewer must look at), then in
    the order they were recorded."""
    found = [void_entry(v) for v in voids_for(reader, [execution_digest], task_ids, cutoff)]
    return sorted(found, key=lambda v: v["hard_count"] == 0)


def decision_voids(
    reader: Reader, decision: Mapping[str, Any], cutoff: int | None = None
) -> list[dict[str, Any]]:
    """The voids a decision left trials out for, hard-failure voids first, read as of the
    decision's cutoff: `cutoff` when given (a dry run's request), else a stored decision's
    (its request's, or its own event for one stored before requests were), else the audit
    head the decision reports."""
    tasks = [str(t["task_id"]) for t in decision.get("tasks") or []]
    if not tasks:
        return []
    if cutoff is None:
        row = reader.first(
            "SELECT inputs, audit_seq FROM gate_decision WHERE gate_id = :id",
            {"id": decision.get("gate_id")},
        )
        if row is not None:
            request = json.loads(row["inputs"]).get("request") or {}
            cutoff = int(request["cutoff"]) if "cutoff" in request else int(row["audit_seq"])
        else:
            cutoff = int((decision.get("audit_head") or {}).get("seq") or 0)
    return decision_void_entries(reader, str(decision["execution_digest"]), tasks, cutoff)
