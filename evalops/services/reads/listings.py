"""The everyday read commands' queries: plain SQL through a `Reader` (evalops/store/reader.py).

`gate list`, `gate show`, `incident list` and `waiver list` read a few rows and print them;
on a SQLite registry they run without SQLAlchemy, the table models or the spec models, so
that they cost little more than the CLI's start-up. The SQL reads the tables of
evalops/store/tables.py and gives the same documents as the ORM reads did (their `--json`
shapes are the contract's; docs/cli.md).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from evalops.domain.retirement_reason import read_stored
from evalops.domain.timestamps import format_timestamp
from evalops.errors import InputError
from evalops.store.in_force_sql import LATEST_IN_FORCE_RUN_SQL
from evalops.store.reader import Reader, registry_present, timestamp

INCIDENT_STATES = ("open", "confirmed", "reproduced", "promoted", "closed")


def stored_time(value: Any) -> str:
    """A stored timestamp in evalops's one spelling, whichever engine stored it."""
    return format_timestamp(timestamp(value))


def _head(reader: Reader) -> dict[str, Any] | None:
    head = reader.first("SELECT seq, hash FROM audit_event ORDER BY seq DESC LIMIT 1")
    return {"seq": head["seq"], "hash": head["hash"]} if head else None


# -- gate decisions ---------------------------------------------------------------------------


def list_decisions(
    reader: Reader,
    suite_id: str | None = None,
    *,
    build: str | None = None,
    limit: int | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """The newest `limit` stored decisions (every one for None), listed oldest first, and
    how many match in all (SQL `LIMIT` and `COUNT`)."""
    where: list[str] = ["1 = 1"]
    params: dict[str, Any] = {}
    if suite_id:
        where.append("suite_id = :suite")
        params["suite"] = suite_id
    if build:
        where.append("build = :build")
        params["build"] = build
    clause = " AND ".join(where)
    total = int(reader.scalar(f"SELECT count(*) AS n FROM gate_decision WHERE {clause}", params))
    sql = (
        "SELECT gate_id, decision, build, suite_id, evaluated_at, at, actor FROM gate_decision "
        f"WHERE {clause} ORDER BY id DESC"
    )
    if limit is not None:
        sql += " LIMIT :limit"
        params["limit"] = limit
    newest_first = reader.rows(sql, params)
    rows = [
        {
            "gate_id": r["gate_id"],
            "decision": r["decision"],
            "build": r["build"],
            "suite": r["suite_id"],
            "evaluated_at": stored_time(r["evaluated_at"]),
            "decided_at": stored_time(r["at"]),
            "actor": r["actor"],
        }
        for r in reversed(newest_first)
    ]
    return rows, total


def show_decision(reader: Reader, gate_id: str) -> dict[str, Any]:
    """A stored decision as recorded, with its policy's name, its audit event and the head."""
    row = reader.first(
        "SELECT result, policy_digest, at, actor, audit_seq FROM gate_decision "
        "WHERE gate_id = :gate_id",
        {"gate_id": gate_id},
    )
    if row is None:
        from evalops.domain.suggestions import unknown_numbered

        def exists(guess: str) -> bool:
            sql = "SELECT id FROM gate_decision WHERE gate_id = :gate_id"
            return reader.first(sql, {"gate_id": guess}) is not None

        raise InputError(
            unknown_numbered("gate decision", gate_id, "GATE-", exists, "evalops gate list")
        )
    policy_id = reader.scalar(
        "SELECT policy_id FROM policy WHERE kind = 'gate_policy' AND policy_digest = :digest "
        "ORDER BY id LIMIT 1",
        {"digest": row["policy_digest"]},
    )
    event_hash = reader.scalar(
        "SELECT hash FROM audit_event WHERE seq = :seq", {"seq": row["audit_seq"]}
    )
    result = json.loads(row["result"])
    return {
        **result,
        "waiver_signers": _waiver_signers(reader, result.get("waivers") or {}),
        "policy": {"id": policy_id, "revision": None, "digest": row["policy_digest"]},
        "decided_at": stored_time(row["at"]),
        "actor": row["actor"],
        "decision_event": {"seq": row["audit_seq"], "hash": event_hash},
        "audit_head": _head(reader),
    }


def _waiver_signers(reader: Reader, accounting: dict[str, Any]) -> dict[str, list[Any]]:
    """Who signed each waiver a decision names (applied, expired, unused, revoked): the
    principals and key fingerprints, [] for an unsigned one (docs/authority.md)."""
    out: dict[str, list[Any]] = {}
    for kind in ("applied", "expired", "unused", "revoked"):
        for waiver_id in accounting.get(kind) or []:
            seq = reader.scalar(
                "SELECT audit_seq FROM waiver WHERE waiver_id = :waiver_id ORDER BY id LIMIT 1",
                {"waiver_id": waiver_id},
            )
            if seq is not None and waiver_id not in out:
                out[waiver_id] = _signers(reader, "waiver.grant", seq)
    return out


# -- incidents --------------------------------------------------------------------------------


def list_incidents(reader: Reader, state: str | None = None) -> list[dict[str, Any]]:
    """Every incident in number order (of one state if given), as `incident list` shows it."""
    if state is not None and state not in INCIDENT_STATES:
        raise InputError(
            f"state {state!r} is not one of {', '.join(INCIDENT_STATES)}", field="--state"
        )
    incidents = reader.rows(
        "SELECT id, incident_id, title, severity, observed_at, trace_uri, description, "
        "opened_at, opened_by FROM incident ORDER BY number"
    )
    events: dict[int, list[dict[str, Any]]] = {}
    for event in reader.rows(
        "SELECT incident_row_id, state, task_id FROM incident_event ORDER BY id"
    ):
        events.setdefault(event["incident_row_id"], []).append(event)
    views = []
    for row in incidents:
        own = events.get(row["id"], [])
        views.append(
            {
                "incident_id": row["incident_id"],
                "state": own[-1]["state"] if own else "open",
                "title": row["title"],
                "severity": row["severity"],
                "observed_at": stored_time(row["observed_at"]),
                "trace_uri": row["trace_uri"],
                "description": row["description"],
                "tasks": list(dict.fromkeys(e["task_id"] for e in own if e["task_id"])),
                "opened_at": stored_time(row["opened_at"]),
                "opened_by": row["opened_by"],
            }
        )
    return [v for v in views if state is None or v["state"] == state]


# -- waivers ----------------------------------------------------------------------------------


def describe_signers(signers: list[dict[str, str]]) -> str:
    """`signed by alice (SHA256:...)` or `unsigned`, for people."""
    if not signers:
        return "unsigned"
    return "signed by " + ", ".join(f"{s['principal']} ({s['fingerprint']})" for s in signers)


def _signers(reader: Reader, kind: str, audit_seq: int) -> list[dict[str, str]]:
    """The signers of the act recorded with the event `audit_seq` ([] when unsigned)."""
    found = reader.scalar(
        "SELECT signers FROM signed_act WHERE audit_seq = :seq AND kind = :kind ORDER BY id "
        "LIMIT 1",
        {"seq": audit_seq, "kind": kind},
    )
    return [] if found is None else list(json.loads(found))


def list_waivers(
    reader: Reader,
    *,
    include_all: bool,
    now: datetime,
    build: str | None = None,
    task: str | None = None,
) -> list[dict[str, Any]]:
    """Waivers valid at the registry's present (`registry_present`: never before the newest
    event), every one with `include_all`, of one build or task if given."""
    from evalops.domain.waivers import WaiverFact, validity_at

    now = registry_present(reader, now)

    where: list[str] = ["1 = 1"]
    params: dict[str, Any] = {}
    if build is not None:
        where.append("build = :build")
        params["build"] = build
    if task is not None:
        where.append("task_id = :task")
        params["task"] = task
    waivers = reader.rows(
        "SELECT id, waiver_id, task_id, suite_id, build, states, owner, reason, granted_at, "
        f"expires_at, granted_by, audit_seq FROM waiver WHERE {' AND '.join(where)} ORDER BY id",
        params,
    )
    views = []
    for w in waivers:
        revoked = reader.first(
            "SELECT revoked_at, reason, audit_seq FROM waiver_revocation "
            "WHERE waiver_row_id = :id ORDER BY revoked_at LIMIT 1",
            {"id": w["id"]},
        )
        fact = WaiverFact(
            w["waiver_id"],
            w["task_id"],
            w["suite_id"],
            w["build"],
            tuple(json.loads(w["states"])),
            stored_time(w["granted_at"]),
            stored_time(w["expires_at"]),
            stored_time(revoked["revoked_at"]) if revoked else None,
        )
        views.append(
            {
                **fact.as_dict(),
                "owner": w["owner"],
                "reason": w["reason"],
                "granted_by": w["granted_by"],
                "status": validity_at(fact, now),
                "revocation_reason": revoked["reason"] if revoked else None,
                "signers": _signers(reader, "waiver.grant", w["audit_seq"]),
                "revocation_signers": (
                    _signers(reader, "waiver.revoke", revoked["audit_seq"]) if revoked else []
                ),
            }
        )
    return views if include_all else [v for v in views if v["status"] == "valid"]


# -- suites -----------------------------------------------------------------------------------


def in_force_suite(reader: Reader, suite_id: str) -> dict[str, Any] | None:
    """The suite declaration the latest sync holds (`queries.in_force_row` for suites)."""
    return reader.first(
        "SELECT s.suite_id, s.kind, s.document, s.file_path FROM suite AS s "
        "JOIN sync_in_force AS f ON f.kind = 'suite' AND f.definition_id = s.suite_id "
        "AND f.document_digest = s.document_digest "
        "WHERE s.suite_id = :suite AND f.sync_run_id = "
        f"{LATEST_IN_FORCE_RUN_SQL} "
        "ORDER BY s.id LIMIT 1",
        {"suite": suite_id},
    )


def unknown_suite(reader: Reader, suite_id: str) -> str:
    """`suite 'x' is not registered; ...` naming the suites in force (`not_registered`)."""
    from evalops.domain.suggestions import unknown_id

    known = [
        str(r["definition_id"])
        for r in reader.rows(
            "SELECT definition_id FROM sync_in_force WHERE kind = 'suite' AND sync_run_id = "
            f"{LATEST_IN_FORCE_RUN_SQL} ORDER BY definition_id",
            {},
        )
    ]
    return unknown_id("suite", suite_id, known)


def suite_members(
    reader: Reader, suite_id: str, *, include_removed: bool
) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """The membership rows folded into each task's current pin: (the row that set the pin,
    the row that retired it or None), by task id (`queries.members`)."""
    state: dict[str, tuple[dict[str, Any], dict[str, Any] | None]] = {}
    for row in reader.rows(
        "SELECT m.*, r.revision AS task_revision, p.subject AS promotion_subject "
        "FROM suite_membership AS m "
        "LEFT JOIN task_revision AS r ON r.id = m.task_revision_id "
        "LEFT JOIN promotion AS p ON p.id = m.promotion_id "
        "WHERE m.suite_id = :suite ORDER BY m.id",
        {"suite": suite_id},
    ):
        if row["action"] != "retired":
            state[row["task_id"]] = (row, None)
        elif row["task_id"] in state:
            state[row["task_id"]] = (state[row["task_id"]][0], row)
    folded = [state[task_id] for task_id in sorted(state)]
    return folded if include_removed else [m for m in folded if m[1] is None]


def _membership_view(
    reader: Reader, added: dict[str, Any], removed: dict[str, Any] | None
) -> dict[str, Any]:
    """One member's pin, who signed the promotion that set it and, when retired, the
    retirement (each `{principal, fingerprint}`; [] when unsigned)."""
    from evalops.domain.act_roles import membership_act

    promotion = added["promotion_id"]
    return {
        "task_id": added["task_id"],
        "revision": added["task_revision"],
        "task_digest": added["task_digest"],
        "grader_set_digest": added["grader_set_digest"],
        "action": added["action"],
        "added_at": stored_time(added["at"]),
        "added_by": added["actor"],
        "promotion": (
            {"id": promotion, "subject": added["promotion_subject"]}
            if promotion is not None
            else None
        ),
        "signers": _signers(reader, membership_act(added["action"]), added["audit_seq"]),
        "removed": (
            {
                "at": stored_time(removed["at"]),
                "by": removed["actor"],
                **read_stored(removed["reason"]).as_dict(),
                "approved_by": removed["approved_by"],
                "replaced_by": removed["replaced_by"],
                "signers": _signers(reader, "retire", removed["audit_seq"]),
            }
            if removed is not None
            else None
        ),
    }


def show_suite(reader: Reader, suite_id: str, *, include_removed: bool = False) -> dict[str, Any]:
    """A suite's declaration, current pins (and removed members), and how often it changed."""
    from evalops.domain.digests import suite_digest

    row = in_force_suite(reader, suite_id)
    if row is None:
        raise InputError(unknown_suite(reader, suite_id))
    declaration = json.loads(row["document"])
    shown = suite_members(reader, suite_id, include_removed=include_removed)
    current = [m for m in shown if m[1] is None]
    changes = reader.scalar(
        "SELECT count(*) AS n FROM suite_membership WHERE suite_id = :suite", {"suite": suite_id}
    )
    return {
        "suite": suite_id,
        "kind": row["kind"],
        "owner": declaration.get("owner"),
        "description": declaration.get("description"),
        "suite_digest": suite_digest(suite_id, row["kind"], [added for added, _ in current]),
        "members": [_membership_view(reader, added, removed) for added, removed in shown],
        "changes": int(changes),
    }


# A listing's filter -> the ids it may name: (noun, SQL of every id that exists).
_FILTER_IDS = {
    "task": ("task", "SELECT DISTINCT task_id AS id FROM task_revision ORDER BY task_id"),
    "build": (
        "build",
        "SELECT DISTINCT system_build AS id FROM execution_profile ORDER BY system_build",
    ),
    "suite": ("suite", "SELECT DISTINCT suite_id AS id FROM suite ORDER BY suite_id"),
}


def unknown_filters(reader: Reader, **given: str | None) -> list[str]:
    """For an empty listing: each filter naming nothing that exists (`task='refund'`), said
    as an unknown id is (what exists, the close match). A filter naming something that
    exists but matches nothing says nothing here: the listing is simply empty."""
    from evalops.domain.suggestions import unknown_id

    out: list[str] = []
    for name, value in given.items():
        if value is None or name not in _FILTER_IDS:
            continue
        noun, sql = _FILTER_IDS[name]
        known = [str(r["id"]) for r in reader.rows(sql, {})]
        if value not in known:
            out.append(unknown_id(noun, value, known))
    return out
