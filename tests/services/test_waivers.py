"""Waivers (docs/gate.md): owner-signed, build-scoped, expiring acceptance of a
non-critical failure.

`evalops waiver grant` is refused (exit 5, the rule named, the refusal audited, nothing
granted) for a critical or protected task, a forbidden state, a missing, naive, past or
too-far expiry, and a missing owner, reason or build. A waiver is valid at T iff
`granted_at <= T < expires_at` and it is not revoked at T, only for its build and task; the
gate lists applied, expired, unused and refused waivers. Results do not depend on the
process time zone. The CLI tests use the prepared registry of tests/services/test_gate.py; the pure
ones call `evalops.domain.waivers` and `evalops.domain.gate.evaluate` directly.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from evalops.domain.canonical import canonical_json
from evalops.domain.specs import GatePolicy
from evalops.domain.waivers import WaiverFact, WaiverRequest, covers, grant_refusals, validity_at
from tests.conftest import Cli
from tests.decide import evaluate
from tests.domain.test_gate_evaluate import (
    BUILD,
    CLASSES,
    FAILING,
    SUITE,
    make_inputs,
    task,
    waiver,
)
from tests.domain.test_gate_evaluate import gate_inputs as generated_gate_inputs
from tests.helpers import EXAMPLE_REGISTRY
from tests.services.test_gate import (
    BUILD_OF_CLASS,
    CRIT,
    MIXED,
    NONCRIT,
    QUALITY,
    base_workspace,
    copy_workspace,
    gate,
    sql,
    task_of,
    utc,
    verify_ok,
)

FORBIDDEN = (
    "hard_constraint_fail",
    "ambiguous_external_effect",
    "missing_required_evidence",
    "grader_invalid",
    "infrastructure_invalid",
)
FAIL_BUILD = BUILD_OF_CLASS["task_fail"]
POLICY_DOC: dict[str, Any] = yaml.safe_load(
    (EXAMPLE_REGISTRY / "policies" / "gate-policy.yaml").read_text(encoding="utf-8")
)
POLICY = GatePolicy.model_validate(POLICY_DOC)
MICRO = timedelta(microseconds=1)


# ------------------------------------------------------------------------ CLI helpers


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return base_workspace(tmp_path_factory)


@pytest.fixture
def ws(base: Path, tmp_path: Path) -> Path:
    return copy_workspace(base, tmp_path / "ws")


@pytest.fixture(scope="module")
def refusals_ws(base: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One copy for the refusal tests (a refusal only appends an audit event)."""
    return copy_workspace(base, tmp_path_factory.mktemp("refusals") / "ws")


def in_days(days: float) -> str:
    return utc((datetime.now(UTC) + timedelta(days=days)).replace(microsecond=0))


def grant_args(
    *,
    task_id: str = "noncrit-task",
    suite: str = NONCRIT,
    states: str = "task_fail",
    build: str | None = FAIL_BUILD,
    owner: str | None = "risk-owner@example.com",
    reason: str | None = "copy fix ships next sprint",
    expires: str | None = "",
) -> list[str]:
    args = ["waiver", "grant", "--task", task_id, "--suite", suite, "--states", states]
    for option, value in (("--build", build), ("--owner", owner), ("--reason", reason)):
        if value is not None:
            args += [option, value]
    if expires is not None:
        args += ["--expires", expires or in_days(14)]
    return args


def grant(cli: Cli, ws: Path, **kwargs: Any) -> dict[str, Any]:
    result = cli(*grant_args(**kwargs), "--json", cwd=ws)
    assert result.code == 0, result.stdout + result.stderr
    data: dict[str, Any] = result.json()
    return data


def waivers_listed(cli: Cli, ws: Path, *, all_: bool = True) -> list[dict[str, Any]]:
    result = cli("waiver", "list", *(["--all"] if all_ else []), "--json", cwd=ws)
    assert result.code == 0, result.stdout + result.stderr
    rows: list[dict[str, Any]] = result.json()
    return rows


def audit_kinds(ws: Path) -> list[tuple[str, str]]:
    return [(k, p) for k, p in sql(ws, "SELECT kind, payload FROM audit_event ORDER BY seq")]


def listed_somewhere(decision: dict[str, Any], waiver_id: str) -> bool:
    """A waiver appears in one of the decision's waiver lists (other than `refused`)."""
    return any(waiver_id in ids for key, ids in decision["waivers"].items() if key != "refused")


# ------------------------------------------------------------------------- CLI: grant


def test_grant_output_list_and_audit(ws: Path, cli: Cli) -> None:
    expires = datetime.now(UTC).replace(microsecond=0) + timedelta(days=14)
    tokyo = expires.astimezone(timezone(timedelta(hours=9)))  # stored as the same UTC instant
    data = grant(cli, ws, expires=tokyo.isoformat())

    assert re.fullmatch(r"WVR-\d+", data["waiver_id"])
    assert data["task_id"] == "noncrit-task"
    assert data["build"] == FAIL_BUILD
    assert data["states"] == ["task_fail"]
    assert data["expires_at"].endswith("Z")
    assert data["expires_at"] == utc(expires)
    [listed] = waivers_listed(cli, ws, all_=False)
    assert listed["waiver_id"] == data["waiver_id"]
    assert listed["expires_at"] == data["expires_at"]
    kinds = [k for k, _ in audit_kinds(ws)]
    assert kinds[-1] == "waiver.grant"
    verify_ok(cli, ws)


def _rows_by_table(ws: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, read with SQL (not through evalops)."""
    con = sqlite3.connect(ws / ".evalops" / "registry.db")
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {t: con.execute(f'SELECT * FROM "{t}" ORDER BY rowid').fetchall() for t in tables}
    finally:
        con.close()


def _assert_refused(cli: Cli, ws: Path, args: list[str], rules: set[str]) -> list[str]:
    """Exit 5 naming the rules; nothing granted; the refusal is audited."""
    before_waivers = waivers_listed(cli, ws)
    before_events = audit_kinds(ws)
    before_rows = _rows_by_table(ws)

    result = cli(*args, "--json", cwd=ws)

    assert result.code == 5, result.stdout + result.stderr
    data = result.json()
    assert data["granted"] is False
    named = [r["rule"] for r in data["refusals"]]
    assert rules <= set(named), named
    for r in data["refusals"]:
        assert r["message"].strip()
    human = cli(*args, cwd=ws)
    assert human.code == 5
    for rule in rules:
        assert rule in human.stdout + human.stderr
    assert waivers_listed(cli, ws) == before_waivers
    new = audit_kinds(ws)[len(before_events) :]
    assert [k for k, _ in new] == ["waiver.refused", "waiver.refused"]
    for rule in rules:
        assert rule in new[0][1]
    # In the database: the two refusal events appended after the untouched chain, and not
    # one other row added, changed or removed in any table.
    after_rows = _rows_by_table(ws)
    events_before = before_rows.pop("audit_event")
    events_after = after_rows.pop("audit_event")
    assert events_after[: len(events_before)] == events_before
    assert len(events_after) == len(events_before) + 2
    assert after_rows == before_rows
    return named


def test_refused_for_a_critical_task_that_protects_something(refusals_ws: Path, cli: Cli) -> None:
    args = grant_args(task_id="crit-task", suite=CRIT)
    named = _assert_refused(cli, refusals_ws, args, {"critical_task", "protected_task"})
    assert set(named) == {"critical_task", "protected_task"}


def test_refused_for_a_critical_task(refusals_ws: Path, cli: Cli) -> None:
    args = grant_args(task_id="crit-plain", suite=MIXED)
    assert _assert_refused(cli, refusals_ws, args, {"critical_task"}) == ["critical_task"]


@pytest.mark.parametrize("state", FORBIDDEN)
def test_refused_for_each_forbidden_state(state: str, refusals_ws: Path, cli: Cli) -> None:
    args = grant_args(states=state)
    assert _assert_refused(cli, refusals_ws, args, {"forbidden_state"}) == ["forbidden_state"]


def test_refused_when_one_of_several_states_is_forbidden(refusals_ws: Path, cli: Cli) -> None:
    args = grant_args(states="task_fail,grader_invalid,agent_error")
    assert _assert_refused(cli, refusals_ws, args, {"forbidden_state"}) == ["forbidden_state"]


@pytest.mark.parametrize(
    ("expires", "rule"),
    [
        ("2026-12-15T00:00:00", "expires_at_naive"),
        ("2026-12-15 00:00:00", "expires_at_naive"),
        ("2020-01-01T00:00:00Z", "expires_at_past"),
        (None, "expires_at"),
        ("far", "expires_at_too_far"),
    ],
)
def test_refused_for_a_missing_naive_past_or_too_far_expiry(
    expires: str | None, rule: str, refusals_ws: Path, cli: Cli
) -> None:
    if expires == "far":
        expires = in_days(31)
    args = grant_args(expires=expires)
    assert _assert_refused(cli, refusals_ws, args, {rule}) == [rule]


@pytest.mark.parametrize(
    ("field", "rule"),
    [("owner", "owner"), ("reason", "reason"), ("build", "build_scope")],
)
@pytest.mark.parametrize("value", [None, "  "])
def test_refused_for_a_missing_owner_reason_or_build(
    field: str, rule: str, value: str | None, refusals_ws: Path, cli: Cli
) -> None:
    changes: dict[str, Any] = {field: value}
    args = grant_args(**changes)
    assert _assert_refused(cli, refusals_ws, args, {rule}) == [rule]


def test_refusals_keep_the_audit_chain_verifiable(refusals_ws: Path, cli: Cli) -> None:
    _assert_refused(cli, refusals_ws, grant_args(owner=None, reason=None), {"owner", "reason"})
    verify_ok(cli, refusals_ws)


def test_max_duration_is_exact_to_the_second(
    ws: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """max_duration_days 30: expiring exactly 30 days after the grant is within it (and stored
    as given); one second more is refused, storing no waiver."""
    # A pinned clock (a day ahead, so it never precedes an event already in the chain).
    granted_at = (datetime.now(UTC) + timedelta(days=1)).replace(microsecond=0)
    monkeypatch.setenv("EVALOPS_NOW", utc(granted_at))
    limit = granted_at + timedelta(days=30)

    beyond = _assert_refused(
        cli, ws, grant_args(expires=utc(limit + timedelta(seconds=1))), {"expires_at_too_far"}
    )
    assert beyond == ["expires_at_too_far"]

    data = grant(cli, ws, expires=utc(limit))
    times = _times(cli, ws, data["waiver_id"])
    assert times["granted_at"] == granted_at
    assert times["expires_at"] == limit
    con = sqlite3.connect(ws / ".evalops" / "registry.db")
    try:
        [(stored,)] = con.execute(
            "SELECT expires_at FROM waiver WHERE waiver_id = ?", (data["waiver_id"],)
        ).fetchall()
    finally:
        con.close()
    assert datetime.fromisoformat(stored).replace(tzinfo=UTC) == limit


def test_a_waiver_for_a_task_outside_the_suite_is_an_input_error(ws: Path, cli: Cli) -> None:
    result = cli(*grant_args(task_id="quality-task", suite=NONCRIT), "--json", cwd=ws)
    assert result.code == 2, result.stdout


# ---------------------------------------------------------------- CLI: time and scope


def _times(cli: Cli, ws: Path, waiver_id: str) -> dict[str, datetime]:
    [row] = [w for w in waivers_listed(cli, ws) if w["waiver_id"] == waiver_id]
    out = {}
    for key in ("granted_at", "expires_at", "revoked_at"):
        if row.get(key):
            out[key] = datetime.fromisoformat(row[key].replace("Z", "+00:00"))
    return out


def test_applies_at_expires_at_minus_one_microsecond_and_not_at_expires_at(
    ws: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    waiver_id = grant(cli, ws)["waiver_id"]
    times = _times(cli, ws, waiver_id)
    expires = times["expires_at"]

    # A moment still to come is the clock's, not --at's (which names states the registry
    # has stood in): checks run then.
    monkeypatch.setenv("EVALOPS_NOW", utc(expires - MICRO))
    before = gate(cli, ws, FAIL_BUILD, NONCRIT)
    assert before["decision"] == "pass"
    assert task_of(before, "noncrit-task")["waiver_id"] == waiver_id
    assert before["waivers"]["applied"] == [waiver_id]

    monkeypatch.setenv("EVALOPS_NOW", utc(expires))
    at = gate(cli, ws, FAIL_BUILD, NONCRIT)
    assert at["decision"] == "hold"
    assert task_of(at, "noncrit-task")["waiver_id"] is None
    assert at["waivers"]["applied"] == []
    assert at["waivers"]["expired"] == [waiver_id]

    granted = times["granted_at"]
    early = gate(cli, ws, FAIL_BUILD, NONCRIT, "--at", utc(granted - MICRO))
    assert early["decision"] == "hold"
    assert early["waivers"]["applied"] == []
    # --at T reads the registry as it stood at T (docs/formats.md): the grant came later.
    assert not listed_somewhere(early, waiver_id)
    assert gate(cli, ws, FAIL_BUILD, NONCRIT, "--at", utc(granted))["decision"] == "pass"


def test_a_revoked_waiver_stops_applying_from_its_revocation_time(ws: Path, cli: Cli) -> None:
    waiver_id = grant(cli, ws)["waiver_id"]
    assert gate(cli, ws, FAIL_BUILD, NONCRIT)["decision"] == "pass"

    result = cli("waiver", "revoke", waiver_id, "--reason", "fix did not ship", "--json", cwd=ws)
    assert result.code == 0, result.stdout + result.stderr
    revoked = _times(cli, ws, waiver_id)["revoked_at"]

    before = gate(cli, ws, FAIL_BUILD, NONCRIT, "--at", utc(revoked - MICRO))
    assert before["decision"] == "pass"
    assert before["waivers"]["applied"] == [waiver_id]
    at = gate(cli, ws, FAIL_BUILD, NONCRIT, "--at", utc(revoked))
    assert at["decision"] == "hold"
    assert at["waivers"]["applied"] == []
    assert listed_somewhere(at, waiver_id)  # not dropped silently
    now = gate(cli, ws, FAIL_BUILD, NONCRIT)
    assert now["decision"] == "hold"
    assert waivers_listed(cli, ws, all_=False) == []
    [row] = waivers_listed(cli, ws)
    assert row["status"] == "revoked"
    assert row["revocation_reason"] == "fix did not ship"
    kinds = [k for k, _ in audit_kinds(ws)]
    assert "waiver.revoke" in kinds
    verify_ok(cli, ws)


def test_the_decision_lists_applied_expired_unused_and_refused_waivers(
    ws: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    unused = grant(cli, ws, states="agent_error")["waiver_id"]  # the task state is task_fail
    applied = grant(cli, ws, states="task_fail,runtime_error")["waiver_id"]
    other_build = grant(cli, ws, build=BUILD_OF_CLASS["agent_error"])["waiver_id"]
    refused = cli(*grant_args(states="hard_constraint_fail"), "--json", cwd=ws)
    assert refused.code == 5

    data = gate(cli, ws, FAIL_BUILD, NONCRIT)
    assert data["decision"] == "pass"
    assert data["waivers"]["applied"] == [applied]
    assert data["waivers"]["unused"] == [unused]
    assert data["waivers"]["expired"] == []
    [entry] = data["waivers"]["refused"]
    assert entry["task_id"] == "noncrit-task"
    assert "forbidden_state" in json.dumps(entry)
    assert not listed_somewhere(data, other_build)

    monkeypatch.setenv("EVALOPS_NOW", in_days(20))
    later = gate(cli, ws, FAIL_BUILD, NONCRIT)
    assert later["decision"] == "hold"
    assert sorted(later["waivers"]["expired"]) == sorted([unused, applied])
    assert later["waivers"]["applied"] == []


def test_a_waiver_for_another_build_changes_nothing(ws: Path, cli: Cli) -> None:
    before = gate(cli, ws, FAIL_BUILD, NONCRIT)
    grant(cli, ws, build=BUILD_OF_CLASS["agent_error"])
    # A build no execution profile names is a usage error (exit 2), recorded nowhere.
    unknown = cli(*grant_args(build="build-nobody-has"), "--json", cwd=ws)
    assert unknown.code == 2, unknown.stdout
    assert unknown.json()["error"]["field"] == "--build"
    after = gate(cli, ws, FAIL_BUILD, NONCRIT)
    assert after["decision"] == before["decision"] == "hold"
    strip = ("gate_id", "evaluated_at", "audit_head", "decision_event")
    assert {k: v for k, v in after.items() if k not in strip} == {
        k: v for k, v in before.items() if k not in strip
    }


def test_a_waiver_for_another_task_changes_nothing(ws: Path, cli: Cli) -> None:
    grant(cli, ws, task_id="quality-task", suite=QUALITY)
    data = gate(cli, ws, FAIL_BUILD, NONCRIT)
    assert data["decision"] == "hold"
    assert task_of(data, "noncrit-task")["waiver_id"] is None


# --------------------------------------------------------------------- CLI: time zones


@contextlib.contextmanager
def process_time_zone(name: str) -> Iterator[None]:
    """Set the process time zone (TZ + tzset) and restore it afterwards."""
    saved = os.environ.get("TZ")
    os.environ["TZ"] = name
    time.tzset()
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = saved
        time.tzset()


TIME_ZONES = ("UTC", "Asia/Tokyo", "America/Los_Angeles")


def test_the_same_results_in_every_process_time_zone(
    base: Path, tmp_path: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    expires = (datetime.now(UTC) + timedelta(days=10)).replace(minute=0, second=0, microsecond=0)
    tokyo, los_angeles, india = (
        timezone(timedelta(hours=9)),
        timezone(timedelta(hours=-8)),
        timezone(timedelta(hours=5, minutes=30)),
    )
    outcomes: dict[str, Any] = {}
    for name in TIME_ZONES:
        ws = copy_workspace(base, tmp_path / name.replace("/", "-"))
        with process_time_zone(name):
            assert time.tzname[0] == {"UTC": "UTC", "Asia/Tokyo": "JST"}.get(name, "PST")
            granted = grant(cli, ws, expires=expires.astimezone(tokyo).isoformat())
            [listed] = waivers_listed(cli, ws)
            # The clock, spelled in other offsets, runs the checks at those moments.
            monkeypatch.setenv("EVALOPS_NOW", (expires - MICRO).astimezone(los_angeles).isoformat())
            just_before = gate(cli, ws, FAIL_BUILD, NONCRIT)
            monkeypatch.setenv("EVALOPS_NOW", expires.astimezone(india).isoformat())
            at_expiry = gate(cli, ws, FAIL_BUILD, NONCRIT)
            monkeypatch.delenv("EVALOPS_NOW")
            naive = cli(
                *grant_args(expires=expires.replace(tzinfo=None).isoformat()), "--json", cwd=ws
            )
        assert granted["expires_at"] == utc(expires)
        assert listed["expires_at"] == utc(expires)
        assert just_before["decision"] == "pass"
        assert just_before["waivers"]["applied"] == [granted["waiver_id"]]
        assert at_expiry["decision"] == "hold"
        assert at_expiry["waivers"]["expired"] == [granted["waiver_id"]]
        assert naive.code == 5
        assert [r["rule"] for r in naive.json()["refusals"]] == ["expires_at_naive"]
        outcomes[name] = {
            "granted": {k: v for k, v in granted.items() if k not in ("granted_at", "status")},
            "listed": {k: v for k, v in listed.items() if k not in ("granted_at", "status")},
            # Chain positions differ between workspaces; the decisions may not.
            "just_before": {k: v for k, v in just_before.items() if k not in ANCHORS},
            "at_expiry": {k: v for k, v in at_expiry.items() if k not in ANCHORS},
            "naive": naive.json()["refusals"],
        }
    reference = outcomes["UTC"]
    for name in TIME_ZONES:
        assert canonical_json(outcomes[name]) == canonical_json(reference), name


ANCHORS = ("audit_head", "decision_event")


# ------------------------------------------------------------- pure: grant_refusals

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
GOOD = WaiverRequest(
    task_id="t1",
    suite_id=SUITE,
    states=("task_fail",),
    build=BUILD,
    owner="risk-owner@example.com",
    reason="wording fix ships next sprint",
    expires="2026-12-15T00:00:00Z",
)


def rules_of(
    request: WaiverRequest,
    *,
    risk: str = "noncritical_regression",
    protects: tuple[str, ...] = (),
    policy: GatePolicy = POLICY,
    now: datetime = NOW,
) -> list[str]:
    return [
        r.rule
        for r in grant_refusals(request, risk=risk, protects=list(protects), policy=policy, now=now)
    ]


@pytest.mark.parametrize("risk", ["noncritical_regression", "quality_signal"])
@pytest.mark.parametrize(
    "states", [("task_fail",), ("agent_error",), ("runtime_error",), tuple(FAILING)]
)
def test_a_good_request_is_not_refused(risk: str, states: tuple[str, ...]) -> None:
    assert rules_of(replace(GOOD, states=states), risk=risk) == []


def test_a_critical_task_is_refused() -> None:
    assert rules_of(GOOD, risk="critical") == ["critical_task"]
    assert set(rules_of(GOOD, risk="critical", protects=("secrets",))) == {
        "critical_task",
        "protected_task",
    }


@pytest.mark.parametrize(
    "protects", ["permissions", "secrets", "human_approval", "external_effect", "required_evidence"]
)
def test_a_protected_task_is_refused(protects: str) -> None:
    """(A task file cannot protect anything without being critical; the rule stands alone.)"""
    assert rules_of(GOOD, protects=(protects,)) == ["protected_task"]


@pytest.mark.parametrize("state", FORBIDDEN)
def test_each_forbidden_state_is_refused(state: str) -> None:
    assert rules_of(replace(GOOD, states=(state,))) == ["forbidden_state"]
    assert rules_of(replace(GOOD, states=("task_fail", state))) == ["forbidden_state"]


def test_a_policy_may_forbid_more_states() -> None:
    doc = json.loads(json.dumps(POLICY_DOC))
    doc["waivers"]["forbidden_states"].append("agent_error")
    stricter = GatePolicy.model_validate(doc)
    assert rules_of(replace(GOOD, states=("agent_error",)), policy=stricter) == ["forbidden_state"]
    assert rules_of(GOOD, policy=stricter) == []


@pytest.mark.parametrize(
    ("field", "rule"),
    [("owner", "owner"), ("reason", "reason"), ("build", "build_scope"), ("expires", "expires_at")],
)
@pytest.mark.parametrize("value", [None, "", "   "])
def test_a_missing_field_is_refused(field: str, rule: str, value: str | None) -> None:
    changes: dict[str, Any] = {field: value}
    named = rules_of(replace(GOOD, **changes))
    assert len(named) == 1
    assert named[0].startswith(rule)


@pytest.mark.parametrize(
    ("expires", "rule"),
    [
        ("2026-12-15T00:00:00", "expires_at_naive"),
        ("2026-12-15T00:00:00.123456", "expires_at_naive"),
        ("2026-12-01T12:00:00Z", "expires_at_past"),  # == now: never valid
        ("2026-12-01T11:59:59.999999Z", "expires_at_past"),
        ("2026-12-01T20:59:59.999999+09:00", "expires_at_past"),
        ("2026-11-01T00:00:00Z", "expires_at_past"),
        ("2026-12-31T12:00:00.000001Z", "expires_at_too_far"),  # 30 days + 1 microsecond
        ("2026-12-31T21:00:00.000001+09:00", "expires_at_too_far"),
        ("2027-06-01T00:00:00Z", "expires_at_too_far"),
    ],
)
def test_a_naive_past_or_too_far_expiry_is_refused(expires: str, rule: str) -> None:
    assert rules_of(replace(GOOD, expires=expires)) == [rule]


@pytest.mark.parametrize(
    "expires",
    [
        "2026-12-01T12:00:00.000001Z",
        "2026-12-31T12:00:00Z",  # exactly max_duration_days
        "2026-12-31T21:00:00+09:00",
        "2026-12-31T04:00:00-08:00",
    ],
)
def test_an_expiry_within_max_duration_days_is_accepted(expires: str) -> None:
    assert rules_of(replace(GOOD, expires=expires)) == []


def test_no_states_or_a_non_failing_state_is_refused() -> None:
    assert rules_of(replace(GOOD, states=())) != []
    assert rules_of(replace(GOOD, states=("task_pass",))) != []
    assert rules_of(replace(GOOD, states=("pass",))) != []


# ------------------------------------------------------- pure: validity_at and covers

GRANTED = datetime(2026, 11, 25, tzinfo=UTC)
EXPIRES = datetime(2026, 12, 10, tzinfo=UTC)


def fact(revoked: datetime | None = None, **changes: Any) -> WaiverFact:
    base = WaiverFact(
        "WVR-1",
        "t1",
        SUITE,
        BUILD,
        ("task_fail",),
        utc(GRANTED),
        utc(EXPIRES),
        utc(revoked) if revoked else None,
    )
    return replace(base, **changes)


def test_validity_boundaries() -> None:
    w = fact()
    assert validity_at(w, GRANTED - MICRO) != "valid"
    assert validity_at(w, GRANTED) == "valid"
    assert validity_at(w, EXPIRES - MICRO) == "valid"
    assert validity_at(w, EXPIRES) == "expired"
    revoked_at = datetime(2026, 12, 1, tzinfo=UTC)
    r = fact(revoked_at)
    assert validity_at(r, revoked_at - MICRO) == "valid"
    assert validity_at(r, revoked_at) == "revoked"
    assert validity_at(r, EXPIRES + MICRO) != "valid"


MOMENTS = st.integers(min_value=-5, max_value=5).map(
    lambda d: GRANTED + timedelta(days=7) + d * timedelta(days=2)
) | st.sampled_from([GRANTED - MICRO, GRANTED, EXPIRES - MICRO, EXPIRES, EXPIRES + MICRO])


@settings(max_examples=300, deadline=None)
@given(at=MOMENTS, revoked=st.none() | MOMENTS, offset_hours=st.integers(-12, 14))
def test_valid_iff_granted_at_le_t_lt_expires_at_and_not_revoked(
    at: datetime, revoked: datetime | None, offset_hours: int
) -> None:
    local_at = at.astimezone(timezone(timedelta(hours=offset_hours)))
    expected = GRANTED <= at < EXPIRES and (revoked is None or at < revoked)
    assert (validity_at(fact(revoked), local_at) == "valid") is expected


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({}, True),
        ({"task_id": "t2"}, False),
        ({"build": "build-a"}, False),
        ({"suite_id": "regression/other"}, False),
        ({"states": ("agent_error",)}, False),
        ({"states": ("agent_error", "task_fail")}, True),
    ],
)
def test_covers_is_scoped_to_task_suite_build_and_states(
    changes: dict[str, Any], expected: bool
) -> None:
    w = fact(**changes)
    assert covers(w, task_id="t1", suite_id=SUITE, build=BUILD, failing=("task_fail",)) is expected


@pytest.mark.parametrize(
    ("states", "failing", "expected"),
    [
        (("agent_error",), ("agent_error", "task_fail"), False),
        (("task_fail",), ("agent_error", "task_fail"), False),
        (("agent_error", "task_fail"), ("agent_error", "task_fail"), True),
        (("agent_error", "runtime_error", "task_fail"), ("runtime_error",), True),
        (("task_fail",), (), False),
    ],
)
def test_covers_only_when_every_failing_class_is_named(
    states: tuple[str, ...], failing: tuple[str, ...], expected: bool
) -> None:
    """A waiver names the failures it accepts: one more failing class than it names (or
    none to accept at all) is not covered."""
    w = fact(states=states)
    assert covers(w, task_id="t1", suite_id=SUITE, build=BUILD, failing=failing) is expected


# --------------------------------------------------------- pure: generated decisions


@settings(max_examples=200, deadline=None)
@given(
    inputs=generated_gate_inputs(),
    other=st.lists(
        st.tuples(
            st.sampled_from(("t1", "t2", "t3")),
            st.lists(st.sampled_from(CLASSES[:-1]), min_size=1, max_size=3, unique=True),
            st.sampled_from(("build-a", "build-b2", "Build-B", "build-b ")),
        ),
        min_size=1,
        max_size=5,
    ),
)
def test_a_waiver_for_build_a_never_changes_any_decision_for_build_b(
    inputs: dict[str, Any], other: list[tuple[str, list[str], str]]
) -> None:
    """The same task, suite, states and times: only the build differs."""
    assert inputs["build"] == BUILD
    foreign = [
        waiver(
            f"WVR-A-{i}",
            task_id,
            states,
            build=build,
            granted_at="2026-11-01T00:00:00.000000Z",
            expires_at="2026-12-31T00:00:00.000000Z",
        )
        for i, (task_id, states, build) in enumerate(other)
    ]
    with_foreign = json.loads(json.dumps(inputs))
    with_foreign["waivers"] = foreign + with_foreign["waivers"] + foreign[:1]
    assert canonical_json(evaluate(with_foreign)) == canonical_json(evaluate(inputs))


def test_the_same_waiver_for_build_b_does_change_the_decision() -> None:
    """(The property above is not vacuous.)"""
    t = [task("t1", "noncritical_regression", ["task_fail"])]
    foreign = make_inputs(t, waivers=[waiver("WVR-1", "t1", build="build-a")])
    own = make_inputs(t, waivers=[waiver("WVR-1", "t1", build=BUILD)])
    assert evaluate(foreign)["decision"] == "hold"
    assert evaluate(own)["decision"] == "pass"


@settings(max_examples=200, deadline=None)
@given(
    cls=st.sampled_from(FAILING),
    revoked_day=st.integers(min_value=-3, max_value=20),
    at_day=st.integers(min_value=-3, max_value=20),
    microsecond=st.sampled_from([-1, 0, 1]),
)
def test_pure_a_revoked_waiver_stops_applying_from_its_revocation_time(
    cls: str, revoked_day: int, at_day: int, microsecond: int
) -> None:
    revoked = GRANTED + timedelta(days=revoked_day)
    at = revoked + timedelta(days=at_day - revoked_day) + microsecond * MICRO
    w = waiver(
        "WVR-1",
        "t1",
        [cls],
        granted_at=utc(GRANTED),
        expires_at=utc(EXPIRES),
        revoked_at=utc(revoked),
    )
    result = evaluate(make_inputs([task("t1", "quality_signal", [cls])], waivers=[w], at=utc(at)))
    applies = GRANTED <= at < EXPIRES and at < revoked
    assert (result["decision"] == "pass") is applies
    assert (result["waivers"]["applied"] == ["WVR-1"]) is applies
    if not applies:
        assert any("WVR-1" in ids for k, ids in result["waivers"].items() if k != "refused")


def _refusals(request: WaiverRequest, **kwargs: Any) -> list[tuple[str, str]]:
    kwargs.setdefault("risk", "noncritical_regression")
    kwargs.setdefault("protects", [])
    kwargs.setdefault("policy", POLICY)
    kwargs.setdefault("now", NOW)
    return [(r.rule, r.message) for r in grant_refusals(request, **kwargs)]


def test_each_refusal_says_what_was_wrong_with_what_was_asked() -> None:
    """What the user reads: the rule and a message naming the value at fault."""
    assert _refusals(GOOD, risk="critical", protects=["secrets", "permissions"]) == [
        ("critical_task", "task t1 is critical"),
        ("protected_task", "task t1 protects secrets, permissions"),
    ]
    assert _refusals(replace(GOOD, states=())) == [("states", "no states listed")]
    assert _refusals(replace(GOOD, states=("task_pass", "nope", "grader_invalid"))) == [
        ("unknown_state", "'task_pass' is not a failing class"),
        ("unknown_state", "'nope' is not a failing class"),
        ("forbidden_state", "grader_invalid is in waivers.forbidden_states"),
    ]
    assert _refusals(replace(GOOD, owner=None, reason=" ", build="")) == [
        ("owner", "owner is missing"),
        ("reason", "reason is missing"),
        ("build_scope", "build is missing (a waiver covers one build)"),
    ]
    assert _refusals(replace(GOOD, expires=None)) == [("expires_at", "expires_at is missing")]
    assert _refusals(replace(GOOD, expires="2026-11-01T00:00:00+01:00")) == [
        ("expires_at_past", "expires_at 2026-10-31T23:00:00.000000Z is not in the future")
    ]
    assert _refusals(replace(GOOD, expires="2027-01-01T00:00:00Z")) == [
        (
            "expires_at_too_far",
            "expires_at 2027-01-01T00:00:00.000000Z is more than max_duration_days (30) away",
        )
    ]
    [(rule, message)] = _refusals(replace(GOOD, expires="2026-12-15T00:00:00"))
    assert rule == "expires_at_naive" and "offset" in message
    [(rule, _)] = _refusals(replace(GOOD, expires="next tuesday"))
    assert rule == "expires_at"


def test_a_layer_the_policy_does_not_allow_is_refused_naming_the_allowed_ones() -> None:
    doc = json.loads(json.dumps(POLICY_DOC))
    doc["waivers"]["allowed_layers"] = ["quality_signal"]
    narrow = GatePolicy.model_validate(doc)
    assert _refusals(GOOD, policy=narrow) == [
        (
            "layer_not_allowed",
            "risk noncritical_regression is not in waivers.allowed_layers ['quality_signal']",
        )
    ]
    assert _refusals(GOOD, policy=narrow, risk="quality_signal") == []
    # A critical task is refused as critical, not a second time for its layer.
    assert [r for r, _ in _refusals(GOOD, policy=narrow, risk="critical")] == ["critical_task"]


def test_a_waiver_fact_round_trips_through_plain_json() -> None:
    fact = WaiverFact("WVR-1", "t1", SUITE, BUILD, ("task_fail", "agent_error"),
                      "2026-12-01T00:00:00.000000Z", "2026-12-15T00:00:00.000000Z",
                      "2026-12-05T00:00:00.000000Z")  # fmt: skip
    assert fact.as_dict() == {
        "waiver_id": "WVR-1",
        "task_id": "t1",
        "suite_id": SUITE,
        "build": BUILD,
        "states": ["task_fail", "agent_error"],
        "granted_at": "2026-12-01T00:00:00.000000Z",
        "expires_at": "2026-12-15T00:00:00.000000Z",
        "revoked_at": "2026-12-05T00:00:00.000000Z",
    }
    assert WaiverFact.from_dict(json.loads(json.dumps(fact.as_dict()))) == fact
    unrevoked = replace(fact, revoked_at=None)
    assert WaiverFact.from_dict({k: v for k, v in unrevoked.as_dict().items()
                                 if k != "revoked_at"}) == unrevoked  # fmt: skip


def test_validity_names_each_state_of_a_waiver_in_time() -> None:
    fact = WaiverFact("WVR-1", "t1", SUITE, BUILD, ("task_fail",),
                      "2026-12-01T00:00:00.000000Z", "2026-12-15T00:00:00.000000Z",
                      "2026-12-10T00:00:00.000000Z")  # fmt: skip
    at = datetime.fromisoformat
    assert validity_at(fact, at("2026-11-30T23:59:59.999999+00:00")) == "not_yet_valid"
    assert validity_at(fact, at("2026-12-01T00:00:00+00:00")) == "valid"
    assert validity_at(fact, at("2026-12-10T00:00:00+00:00")) == "revoked"
    unrevoked = replace(fact, revoked_at=None)
    assert validity_at(unrevoked, at("2026-12-14T23:59:59.999999+00:00")) == "valid"
    assert validity_at(unrevoked, at("2026-12-15T00:00:00+00:00")) == "expired"


# ------------------------------------------------- the policy in force, judged purely


def _policy_with(**waivers: Any) -> GatePolicy:
    doc = yaml.safe_load((EXAMPLE_REGISTRY / "policies" / "gate-policy.yaml").read_text())
    doc["waivers"].update(waivers)
    return GatePolicy.model_validate(doc)


def _fact(granted_at: str, expires_at: str) -> WaiverFact:
    return WaiverFact.from_dict(
        {
            "waiver_id": "WVR-1",
            "task_id": "t1",
            "suite_id": "regression/core",
            "build": "build-b",
            "states": ["task_fail"],
            "granted_at": granted_at,
            "expires_at": expires_at,
            "revoked_at": None,
        }
    )


def test_a_validity_of_exactly_max_duration_days_is_allowed() -> None:
    """docs/gate.md: refused when the validity from grant to expiry is *longer than*
    `max_duration_days`; exactly that long is allowed, a microsecond more is not."""
    from evalops.domain.waivers import Refusal, policy_refusals

    policy = _policy_with(max_duration_days=30)
    exact = _fact("2026-11-01T00:00:00.000000Z", "2026-12-01T00:00:00.000000Z")
    assert policy_refusals(exact, risk="quality_signal", policy=policy) == []
    longer = _fact("2026-11-01T00:00:00.000000Z", "2026-12-01T00:00:00.000001Z")
    assert policy_refusals(longer, risk="quality_signal", policy=policy) == [
        Refusal("expires_at_too_far", "valid for 30 days, more than max_duration_days (30)")
    ]
    two_days = _fact("2026-11-01T00:00:00.000000Z", "2026-11-03T00:00:00.000000Z")
    assert policy_refusals(
        two_days, risk="quality_signal", policy=_policy_with(max_duration_days=1)
    ) == [Refusal("expires_at_too_far", "valid for 2 days, more than max_duration_days (1)")]


def test_an_empty_allowed_layers_waives_nothing_in_words() -> None:
    """docs/gate.md: an empty or omitted `allowed_layers` waives nothing."""
    from evalops.domain.waivers import Refusal, policy_refusals

    fact = _fact("2026-11-01T00:00:00.000000Z", "2026-11-02T00:00:00.000000Z")
    assert policy_refusals(fact, risk="quality_signal", policy=_policy_with(allowed_layers=[])) == [
        Refusal(
            "layer_not_allowed",
            "waivers.allowed_layers is empty or omitted: the gate policy lets no layer be waived",
        )
    ]
