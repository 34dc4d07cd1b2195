"""Changes since the baseline on SQLite and PostgreSQL: which decision is "previous", and the
flips of every kind (a build with fewer tasks gives `missing`, then `new`).

Expected flips come from the rule in words applied to each build's decision (a task counts
in a build when it has trials there; passing is the task's state `task_pass`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Cli
from tests.report.test_report_changes import expected_flip
from tests.services.test_gate import (
    MANY,
    SQLITE,
    base_workspace,
    copy_workspace,
    populate,
    write_registry,
)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def engine_ws(
    request: pytest.FixtureRequest, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, str]:
    if request.param == "sqlite":
        return copy_workspace(base_workspace(tmp_path_factory), tmp_path / "ws"), SQLITE
    url: str = request.getfixturevalue("pg_url")
    root = tmp_path / "ws"
    root.mkdir()
    write_registry(root)
    populate(root, db=url)
    return root, url


def check(cli: Cli, ws: Path, url: str, build: str, *extra: str) -> dict[str, Any]:
    out = cli("--db", url, "--json", "gate", "check", "--build", build, "--suite", MANY, *extra,
              cwd=ws)  # fmt: skip
    assert out.code in (0, 3, 4), out.stderr
    data: dict[str, Any] = json.loads(out.stdout)
    return data


def changes(cli: Cli, ws: Path, url: str, gate_id: str) -> dict[str, Any]:
    out = cli("--db", url, "report", "audit", "--gate", gate_id, "--format", "json", cwd=ws)
    assert out.code == 0, out.stderr
    data: dict[str, Any] = json.loads(out.stdout)["changes"]
    return data


def present(decision: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["task_id"]: t for t in decision["tasks"] if t["n"]}


def expected(base: dict[str, Any], cand: dict[str, Any]) -> list[tuple[str, str]]:
    b, c = present(base), present(cand)
    rows = [(expected_flip(b.get(t), c.get(t)), t) for t in b.keys() | c.keys()]
    return sorted(rows, key=lambda ft: (ft[0] != "regressed", ft[1]))


def flips(ch: dict[str, Any]) -> list[tuple[str, str]]:
    return [(r["flip"], r["task_id"]) for r in ch["tasks"]]


def test_previous_decision_and_every_flip_kind(engine_ws: tuple[Path, str], cli: Cli) -> None:
    ws, url = engine_ws
    partial = check(cli, ws, url, "build-partial")
    first = changes(cli, ws, url, partial["gate_id"])
    assert first["baseline_build"] is None and first["tasks"] == []  # nothing before it

    full = check(cli, ws, url, "build-pass")
    again = check(cli, ws, url, "build-pass")  # the same build: never its own baseline
    for decision in (full, again):
        ch = changes(cli, ws, url, decision["gate_id"])
        assert (ch["source"], ch["baseline_gate_id"]) == ("previous_decision", partial["gate_id"])
        assert flips(ch) == expected(partial, decision)
        assert {f for f, _ in flips(ch)} >= {"new"}

    back = check(cli, ws, url, "build-partial")  # fewer tasks than the build before it
    ch = changes(cli, ws, url, back["gate_id"])
    assert ch["baseline_gate_id"] == again["gate_id"]
    assert flips(ch) == expected(again, back)
    assert {f for f, _ in flips(ch)} >= {"missing"}

    fail = check(cli, ws, url, "build-many-fail", "--baseline", "build-pass")
    ch = changes(cli, ws, url, fail["gate_id"])
    assert (ch["source"], ch["baseline_build"]) == ("baseline", "build-pass")
    assert flips(ch) == expected(again, fail)
    assert [f for f, _ in flips(ch)].count("regressed") == (
        fail["regression"]["discordant"]["baselineOnlyPassed"]
    )


def test_evaluator_4_decides_replays_and_verifies_on_both_engines(
    engine_ws: tuple[Path, str], cli: Cli
) -> None:
    """The streaming loader of evaluator 4 (a DISTINCT read of parent ids, then the build's
    rows) on both engines: the frozen evaluator 3 over the same trials listed decides the
    same at the same moment, a rerun chain kept in full, and the stored decision replays
    and verifies."""
    from sqlmodel import select

    from evalops.store.engine import make_engine, read_session
    from evalops.store.tables import GateDecision
    from tests.conftest import compact_differences

    ws, url = engine_ws
    ten = "regression/ten"
    out = cli("--db", url, "--json", "gate", "check", "--build", "build-ten-rerun",
              "--suite", ten, cwd=ws)  # fmt: skip
    assert out.code in (0, 3, 4), out.stderr
    four = json.loads(out.stdout)
    # The CLI ran in `ws`; this process reads the same database wherever it runs.
    engine = make_engine(url if url != SQLITE else f"sqlite:///{ws / '.evalops' / 'registry.db'}")
    try:
        with read_session(engine) as session:
            row = session.exec(
                select(GateDecision).where(GateDecision.gate_id == four["gate_id"])
            ).one()
            assert json.loads(row.inputs)["evaluator"] == 4
            assert compact_differences(session, row) == []
    finally:
        engine.dispose()
    assert four["tasks"][0]["rerunCount"] == 1
    replay = cli("--db", url, "gate", "replay", four["gate_id"], cwd=ws)
    assert replay.code == 0, replay.stdout + replay.stderr
    verified = cli("--db", url, "verify", cwd=ws)
    assert verified.code == 0, verified.stderr
