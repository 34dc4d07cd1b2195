"""Audit event kinds are `noun.verb`, refusals `noun.refused` (ARCHITECTURE.md, "Audit
event kinds"), and every kind appended comes from `evalops/domain/audit_kinds.py`.

A stored kind is inside its event's hash, so the older kinds that break the pattern are
kept and listed in `FROZEN_KINDS`; a new kind must follow it. The source is read (every
`append_event` call, every comparison with `AuditEvent.kind`), so a kind written as a
string or an f-string, or one the module does not list, fails here.
"""

from __future__ import annotations

import ast
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalops.domain import audit_kinds
from evalops.domain.audit_kinds import ALL_KINDS, FROZEN_KINDS, follows_pattern
from tests.contract.import_map import parsed_file

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "evalops"
FIXTURES = ROOT / "tests" / "fixtures"


def _modules() -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(SOURCE.rglob("*.py")):
        yield path, parsed_file(path)


def _names_the_module(node: ast.AST) -> bool:
    """Whether the expression reads `audit_kinds.<something>` (a constant, a family's
    mapping or its function)."""
    return any(
        isinstance(n, ast.Attribute)
        and isinstance(n.value, ast.Name)
        and n.value.id == "audit_kinds"
        for n in ast.walk(node)
    )


def _assigned(function: ast.AST, name: str) -> list[ast.expr]:
    return [
        n.value
        for n in ast.walk(function)
        if isinstance(n, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)
    ]


def _kind_arguments() -> Iterator[tuple[str, ast.AST, ast.expr]]:
    """(where, enclosing function, expression) of every `kind=` given to `append_event`."""
    for path, tree in _modules():
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef):
                continue
            for call in ast.walk(function):
                if not isinstance(call, ast.Call) or not ast.unparse(call.func).endswith(
                    "append_event"
                ):
                    continue
                (kind,) = [k.value for k in call.keywords if k.arg == "kind"]
                yield f"{path.relative_to(ROOT)}:{call.lineno}", function, kind


def test_every_appended_kind_comes_from_the_module() -> None:
    found = list(_kind_arguments())
    assert len(found) >= 20, "the scan found the append_event calls"
    wrong = []
    for where, function, kind in found:
        sources = _assigned(function, kind.id) if isinstance(kind, ast.Name) else [kind]
        if not sources or not all(_names_the_module(s) for s in sources):
            wrong.append(f"{where}: kind={ast.unparse(kind)}")
    assert wrong == [], "name the kind from evalops.domain.audit_kinds"


def test_no_kind_is_compared_as_a_string() -> None:
    """Readers of stored events name the kinds from the module too."""
    wrong = []
    for path, tree in _modules():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Compare):
                continue
            sides = [node.left, *node.comparators]
            if any("AuditEvent.kind" in ast.unparse(s) for s in sides) and any(
                isinstance(s, ast.Constant) and isinstance(s.value, str) for s in sides
            ):
                wrong.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    assert wrong == []


def test_every_kind_follows_the_pattern_or_is_a_frozen_older_one() -> None:
    assert sorted(k for k in ALL_KINDS if not follows_pattern(k) and k not in FROZEN_KINDS) == []


def test_the_frozen_list_holds_only_listed_kinds_that_break_the_pattern() -> None:
    """It documents the exceptions; a kind that follows the pattern has no place in it."""
    assert FROZEN_KINDS <= ALL_KINDS
    assert [k for k in sorted(FROZEN_KINDS) if follows_pattern(k)] == []
    kept_today = {"trials.reconcile_refused"}
    assert FROZEN_KINDS.issubset(kept_today)  # the list may only shrink


@pytest.mark.parametrize(
    "kind",
    [
        "suite",
        "retire",
        "gate",
        "waiver_refused",
        "Waiver.grant",
        "waiver-grant",
        "waiver.grant.v2",
        ".grant",
        "waiver.",
        "waiver..grant",
        "gate.decision ",
        "trials.reconcile_refused",
        "waiver.refused_by_policy",
        "refused.waiver",
    ],
)
def test_the_pattern_refuses(kind: str) -> None:
    assert not follows_pattern(kind)


@pytest.mark.parametrize(
    "kind", ["waiver.grant", "trials.ingest", "gate.decision", "sync.in_force", "waiver.refused"]
)
def test_the_pattern_accepts(kind: str) -> None:
    assert follows_pattern(kind)


def test_all_kinds_is_every_constant_of_the_module() -> None:
    constants = {
        value
        for name, value in vars(audit_kinds).items()
        if name.isupper() and isinstance(value, str) and not name.startswith("_")
    }
    families = {*audit_kinds.SYNC_DEFINITION.values(), *audit_kinds.INCIDENT_ACTION.values()}
    assert constants | families == ALL_KINDS


def test_the_families_cover_every_definition_kind_and_incident_action() -> None:
    from evalops.registry.definitions import _DIGEST_FIELD

    # Every definition kind has an identity digest (docs/digests.md); sync registers each.
    assert set(audit_kinds.SYNC_DEFINITION) == set(_DIGEST_FIELD)
    actions = set()
    for _, tree in _modules():
        for call in ast.walk(tree):
            if isinstance(call, ast.Call) and ast.unparse(call.func).split(".")[-1] in (
                "move",
                "IncidentEvent",
            ):
                actions |= {
                    k.value.value
                    for k in call.keywords
                    if k.arg == "action" and isinstance(k.value, ast.Constant)
                }
    assert actions == set(audit_kinds.INCIDENT_ACTION)


def _stored_kinds(db: Path) -> set[str]:
    connection = sqlite3.connect(db)
    try:
        return {kind for (kind,) in connection.execute("SELECT DISTINCT kind FROM audit_event")}
    finally:
        connection.close()


def test_every_kind_the_demo_and_older_databases_hold_is_listed(demo_master: Path) -> None:
    stored = _stored_kinds(demo_master / ".evalops" / "registry.db")
    for db in sorted(FIXTURES.glob("*.db")):
        stored |= _stored_kinds(db)
    assert len(stored) >= 15
    assert sorted(stored - ALL_KINDS) == []
