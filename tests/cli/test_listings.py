"""Every list command pages honestly (`--limit`, `--all`, a footer) and
`trials list` filters by build, task, class and suite, limited and counted in SQL."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

from tests.conftest import Cli
from tests.helpers import sqlalchemy_reader
from tests.trial_factory import mini_case, record, write_jsonl

FAIL_RESULTS = [
    {"grader_id": "outcome", "grader_version": 1, "state": "task_fail", "score": 0.0},
    {"grader_id": "no-twice", "grader_version": 1, "state": "pass"},
]


@pytest.fixture
def sixty(synced: Path, cli: Cli) -> Path:
    """The mini registry with 60 trials: t-000..t-059, every fifth one a task_fail."""
    case = mini_case(synced)
    records = [
        record(
            case,
            trial_id=f"t-{i:03d}",
            trial_index=i,
            **({"grader_results": FAIL_RESULTS} if i % 5 == 0 else {}),
        )
        for i in range(60)
    ]
    path = write_jsonl(synced / "sixty.jsonl", records)
    assert cli("trials", "ingest", str(path), cwd=synced).code == 0
    return synced


def _ids(text: str) -> set[str]:
    return set(re.findall(r"t-\d{3}", text))


def test_trials_list_shows_50_with_a_footer_naming_the_total(sixty: Path, cli: Cli) -> None:
    result = cli("trials", "list", cwd=sixty)
    assert result.code == 0, result.stderr
    assert _ids(result.stdout) == {f"t-{i:03d}" for i in range(50)}
    assert "showing 50 of 60 trials (--limit N or --all for more)" in result.stderr


def test_trials_list_all_and_limit(sixty: Path, cli: Cli) -> None:
    everything = cli("trials", "list", "--all", cwd=sixty)
    assert len(_ids(everything.stdout)) == 60
    assert "showing 60 of 60 trials" in everything.stderr
    assert "for more" not in everything.stderr
    three = cli("trials", "list", "--limit", "3", cwd=sixty)
    assert _ids(three.stdout) == {"t-000", "t-001", "t-002"}
    assert "showing 3 of 60 trials" in three.stderr
    both = cli("trials", "list", "--limit", "3", "--all", cwd=sixty)
    assert both.code == 2
    assert "--limit" in both.stderr


def test_trials_list_json_is_complete_unless_limited(sixty: Path, cli: Cli) -> None:
    complete = cli("trials", "list", "--json", cwd=sixty)
    assert len(complete.json()) == 60
    assert complete.stderr == ""
    limited = cli("trials", "list", "--json", "--limit", "10", cwd=sixty)
    assert [r["trial_id"] for r in limited.json()] == [f"t-{i:03d}" for i in range(10)]
    assert "showing 10 of 60 trials" in limited.stderr


def test_trials_list_filters(sixty: Path, cli: Cli) -> None:
    failing = cli("trials", "list", "--class", "task_fail", "--limit", "5", "--json", cwd=sixty)
    assert [r["trial_id"] for r in failing.json()] == [f"t-{i:03d}" for i in range(0, 25, 5)]
    assert "showing 5 of 12 trials" in failing.stderr
    passing = cli("trials", "list", "--class", "task_pass", "--json", cwd=sixty).json()
    assert len(passing) == 48
    assert len(cli("trials", "list", "--build", "build-1", "--json", cwd=sixty).json()) == 60
    assert cli("trials", "list", "--build", "build-9", "--json", cwd=sixty).json() == []
    assert len(cli("trials", "list", "--task", "mini-task", "--json", cwd=sixty).json()) == 60
    assert cli("trials", "list", "--task", "other", "--json", cwd=sixty).json() == []
    unknown_class = cli("trials", "list", "--class", "task_passed", cwd=sixty)
    assert unknown_class.code == 2
    assert "task_pass" in unknown_class.stderr
    unknown_suite = cli("trials", "list", "--suite", "nope/none", cwd=sixty)
    assert unknown_suite.code == 2
    assert "nope/none" in unknown_suite.stderr


def test_a_limited_listing_counts_up_to_its_cap_and_says_more_than(
    sixty: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counting every match is the one part of a listing that grows with the registry, so a
    limited listing stops counting past the cap (or its limit, if larger) and says so."""
    from evalops.services.reads import trials as read_trials

    monkeypatch.setattr(read_trials, "COUNT_CAP", 20)
    two = cli("trials", "list", "--limit", "2", cwd=sixty)
    assert _ids(two.stdout) == {"t-000", "t-001"}
    assert "showing 2 of more than 20 trials (--limit N or --all for more)" in two.stderr
    # A limit above the cap counts up to the limit.
    thirty = cli("trials", "list", "--limit", "30", "--json", cwd=sixty)
    assert len(thirty.json()) == 30
    assert "showing 30 of more than 30 trials" in thirty.stderr
    assert "of more than 59 trials" in cli("trials", "list", "--limit", "59", cwd=sixty).stderr
    # Whenever every row is listed, and up to the cap itself, the count is exact.
    assert "showing 60 of 60 trials" in cli("trials", "list", "--all", cwd=sixty).stderr
    monkeypatch.setattr(read_trials, "COUNT_CAP", 60)
    assert "showing 2 of 60 trials" in cli("trials", "list", "--limit", "2", cwd=sixty).stderr
    monkeypatch.setattr(read_trials, "COUNT_CAP", 20)
    failing = cli("trials", "list", "--class", "task_fail", "--limit", "1", cwd=sixty)
    assert "showing 1 of 12 trials" in failing.stderr  # a class filter reads every row anyway
    monkeypatch.setattr(read_trials, "COUNT_CAP", 5)
    with sqlalchemy_reader(f"sqlite+pysqlite:///{sixty / '.evalops' / 'registry.db'}") as reader:
        for limit, counted in ((2, 6), (10, 11), (59, 60), (None, 60)):
            assert read_trials.list_trials(reader, read_trials.TrialFilter(), limit)[1] == counted


@pytest.fixture
def statements() -> Iterator[list[str]]:
    """Every SQL statement `sqlite3` runs on a connection any engine opens while the test
    does: traced by the driver itself, so a statement is seen whether SQLAlchemy ran it or a
    reader ran it on the driver beneath SQLAlchemy's connection (evalops/store/reader.py)."""
    seen: list[str] = []

    def record_sql(statement: str) -> None:
        seen.append(" ".join(statement.split()).lower())

    def trace(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.set_trace_callback(record_sql)

    event.listen(Engine, "connect", trace)
    yield seen
    event.remove(Engine, "connect", trace)


def test_trials_list_limit_and_count_run_in_sql(
    sixty: Path, cli: Cli, statements: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reader path (`trials list`), read here through SQLAlchemy Core so that its SQL can
    be seen (the plain `sqlite3` path runs the same statements)."""
    from evalops.services.reads import trials as read_trials

    summarized: list[str] = []

    def counting(real: Any, id_of: Any) -> Any:
        def summary(defs: Any, trial: Any, *args: Any) -> dict[str, Any]:
            summarized.append(id_of(trial))
            result: dict[str, Any] = real(defs, trial, *args)
            return result

        return summary

    monkeypatch.setattr(
        read_trials, "_summary", counting(read_trials._summary, lambda t: t["trial_id"])
    )
    url = f"sqlite+pysqlite:///{sixty / '.evalops' / 'registry.db'}"
    result = cli("--db", url, "trials", "list", "--limit", "4", "--json", cwd=sixty)
    assert len(result.json()) == 4
    with sqlalchemy_reader(url) as reader:
        rows, total = read_trials.list_trials(reader, read_trials.TrialFilter(), 4)
    assert (rows, total) == (result.json(), 60)
    # Only the rows shown were read and summarized; the total came from a COUNT.
    assert summarized == ["t-000", "t-001", "t-002", "t-003"] * 2
    trial_selects = [s for s in statements if "from trial" in s and "select" in s]
    assert sum("count(" in s for s in trial_selects) == 2
    assert sum(" limit " in s for s in trial_selects) >= 2


LISTS = [
    ("trials", "list"),
    ("gate", "list"),
    ("task", "list"),
    ("suite", "list"),
    ("incident", "list"),
    ("calibration", "list"),
    ("review", "list"),
]


@pytest.mark.parametrize("command", LISTS, ids=" ".join)
def test_every_list_command_pages_with_a_footer(
    demo: Path, cli: Cli, command: tuple[str, ...]
) -> None:
    everything = cli(*command, "--json", cwd=demo)
    assert everything.code == 0, everything.stderr
    total = len(everything.json())
    one = cli(*command, "--limit", "1", "--json", cwd=demo)
    assert len(one.json()) == min(total, 1)
    assert all(row in everything.json() for row in one.json())
    if total > 1:
        assert re.search(rf"showing 1 of {total} .*--limit N or --all", one.stderr)
    human = cli(*command, "--all", cwd=demo)
    assert human.code == 0
    if total == 0:  # an empty listing is a line of words instead of a table and a footer
        assert human.stdout.startswith("no ") and human.stderr == ""
    else:
        assert re.search(rf"showing {total} of {total} ", human.stderr)


def test_gate_list_shows_the_newest_decisions(demo: Path, cli: Cli) -> None:
    everything = cli("gate", "list", "--json", cwd=demo).json()
    assert len(everything) >= 2
    newest = cli("gate", "list", "--limit", "1", "--json", cwd=demo).json()
    assert newest == everything[-1:]
    build = everything[0]["build"]
    only = cli("gate", "list", "--build", build, "--json", cwd=demo).json()
    assert only and {r["build"] for r in only} == {build}


def test_waiver_list_filters_and_limits(demo: Path, cli: Cli) -> None:
    every = cli("waiver", "list", "--all", "--json", cwd=demo).json()
    assert every
    first = every[0]
    by_build = cli("waiver", "list", "--all", "--build", first["build"], "--json", cwd=demo)
    assert first["waiver_id"] in {r["waiver_id"] for r in by_build.json()}
    assert cli("waiver", "list", "--all", "--task", "no-such-task", "--json", cwd=demo).json() == []
    human = cli("waiver", "list", "--all", cwd=demo)
    assert f"showing {len(every)} of {len(every)} waivers" in human.stderr


def test_trials_list_suite_filter_keeps_the_members_trials(demo: Path, cli: Cli) -> None:
    import sqlite3

    members = cli("suite", "show", "regression/core", "--json", cwd=demo).json()["members"]
    pins = {(m["task_digest"], m["grader_set_digest"]) for m in members}
    con = sqlite3.connect(demo / ".evalops" / "registry.db")
    try:
        rows = con.execute("SELECT trial_id, task_digest, grader_set_digest FROM trial").fetchall()
    finally:
        con.close()
    expected = {trial_id for trial_id, task, graders in rows if (task, graders) in pins}
    in_suite = cli("trials", "list", "--suite", "regression/core", "--json", cwd=demo).json()
    assert expected
    assert len(expected) < len(rows)
    assert {r["trial_id"] for r in in_suite} == expected


@pytest.mark.postgres
def test_trials_list_pages_on_postgresql(workspace: Path, cli: Cli, pg_url: str) -> None:
    assert cli("--db", pg_url, "init", cwd=workspace).code == 0
    assert cli("--db", pg_url, "sync", cwd=workspace).code == 0
    case = mini_case(workspace)
    records = [
        record(
            case,
            trial_id=f"t-{i:03d}",
            trial_index=i,
            **({"grader_results": FAIL_RESULTS} if i % 2 else {}),
        )
        for i in range(7)
    ]
    path = write_jsonl(workspace / "seven.jsonl", records)
    assert cli("--db", pg_url, "trials", "ingest", str(path), cwd=workspace).code == 0
    two = cli("--db", pg_url, "trials", "list", "--limit", "2", "--json", cwd=workspace)
    assert [r["trial_id"] for r in two.json()] == ["t-000", "t-001"]
    assert "showing 2 of 7 trials" in two.stderr
    failing = cli(
        "--db", pg_url, "trials", "list", "--class", "task_fail", "--build", "build-1",
        "--json", cwd=workspace,
    )  # fmt: skip
    assert [r["trial_id"] for r in failing.json()] == ["t-001", "t-003", "t-005"]
    decisions = cli("--db", pg_url, "gate", "list", "--limit", "1", cwd=workspace)
    assert decisions.code == 0
    # An empty listing is a line of words on stdout (no empty table, no "0 of 0" footer).
    assert decisions.stdout.startswith("no gate decisions; decide one with `evalops gate check")
    assert decisions.stdout.count("\n") == 1 and decisions.stderr == ""
