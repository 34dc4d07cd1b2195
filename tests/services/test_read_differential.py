"""`trials list` and `calibration status`: the one reading, held to the rules' words.

The Reader (evalops/services/reads/trials.py, reads/calibration.py: plain SQL, stored
documents as views) is the only reading of these listings; the ORM versions that once
stood beside it are gone. Here it is held, on registries built by the CLI, to expectations
written from the listing's contract (docs/cli.md `trials list`, DESIGN 6.2), computed
independently of it (raw SQL on the file, brute force over the unfiltered listing):

- the unfiltered listing names every stored trial once, oldest first, with its task, index,
  rerun parent, build (its execution profile's) and class at ingest as stored;
- each filter keeps exactly the rows a brute-force pass over the unfiltered listing keeps
  (a task, a build, a current class, a suite's current pins by task and grader set digest),
  a limit keeps the first rows and counts them all; an unknown class or suite is an error
  naming its option;
- `calibration status` lists exactly the model grader configs a suite pins or that are in
  force, each with the suites pinning it, and the newest calibration of that config;
- sqlite3, a SQLAlchemy connection and PostgreSQL give the same documents.

The registries: the demo (reruns, a reconciliation, calibrations), then with a second gate
policy in force (a rerun of a task in no suite loses its policy) and with a suite naming no
policy while two are in force (an error); a blocking model grader's registry in four
states: calibrated, with human reviews, a reconciled effect and reruns; its calibration
invalidated; its config changed (the config in force `stale`, the pinned one invalidated);
recalibrated; the gate tests' registry (every class, reruns, many suites and builds).
"""

from __future__ import annotations

import json
import random
import shutil
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from evalops.domain.vocabulary import CANONICAL_PRECEDENCE
from evalops.errors import EvalopsError
from evalops.store.reader import Reader
from tests.conftest import Cli, pg_holding
from tests.helpers import (
    EXAMPLE_REGISTRY,
    commit_all,
    run_quiet,
    sqlalchemy_reader,
    sqlite3_reader,
)
from tests.services.test_calibration_cli import (
    EXEC_FILE as JUDGED_EXEC,
)
from tests.services.test_calibration_cli import (
    GRADERS_FILE as JUDGED_GRADERS,
)
from tests.services.test_calibration_cli import (
    JUDGE,
    REPLY_QUALITY,
    SUITE,
    TASK_ID,
    _change_prompt,
    change_judge,
    judged_seed,
    passing_results,
)
from tests.services.test_calibration_cli import (
    TASK_FILE as JUDGED_TASK,
)
from tests.services.test_gate import base_workspace, copy_workspace
from tests.trial_factory import eval_case, record, write_jsonl

DB = Path(".evalops") / "registry.db"
ACTOR = "differential@example.com"


def must(root: Path, *args: str) -> str:
    code, output = run_quiet(*args, cwd=root, actor=ACTOR)
    assert code == 0, (args, output)
    return output


# ------------------------------------------------------------------------- registries


def _demo(demo_master: Path, root: Path) -> Path:
    return Path(shutil.copytree(demo_master, root, symlinks=True))


def _second_gate_policy(root: Path) -> None:
    text = (root / "registry" / "policies" / "gate-policy.yaml").read_text(encoding="utf-8")
    second = text.replace("id: release-gate", "id: second-gate", 1)
    assert second != text
    (root / "registry" / "policies" / "second-gate.yaml").write_text(second, encoding="utf-8")
    commit_all(root, "a second gate policy")
    must(root, "sync")


def _suite_names_no_policy(root: Path) -> None:
    path = root / "registry" / "suites" / "regression-core.yaml"
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    kept = [line for line in lines if not line.startswith("gate_policy:")]
    assert len(kept) == len(lines) - 1
    path.write_text("".join(kept), encoding="utf-8")
    commit_all(root, "regression/core names no gate policy")
    must(root, "sync")


def _judged_trials(root: Path) -> None:
    """Passing, abstaining, failing, unscored, fixture-missing, crashed and timed-out trials,
    reruns, two ambiguous effects; a review of one abstention, a reconciliation of one
    effect."""
    case = eval_case(root / JUDGED_TASK, root / JUDGED_EXEC, root / JUDGED_GRADERS)

    def one(trial_id: str, index: int, results: list[dict[str, Any]], **extra: Any) -> Any:
        return record(
            case, trial_id=trial_id, task_id=TASK_ID, trial_index=index,
            grader_results=results, **extra,
        )  # fmt: skip

    evidence = [one(f"judged-pass-{i}", i, passing_results()) for i in range(2)]
    must(root, "trials", "ingest", str(write_jsonl(root / ".evalops" / "a.jsonl", evidence)))
    must(root, "promote", TASK_ID, "--to", SUITE)
    rest = [
        one("judged-abstain-0", 2, passing_results("abstain")),
        one("judged-abstain-1", 3, passing_results("abstain")),
        one("judged-fail", 4, passing_results("task_fail")),
        one("judged-timeout", 5, passing_results(), runtime="timeout"),
        one(
            "judged-timeout-rerun", 5, passing_results(),
            rerun={"parent_trial_id": "judged-timeout", "reason": "runner timed out"},
        ),
        one(
            "judged-fail-rerun", 4, passing_results(),
            rerun={"parent_trial_id": "judged-fail", "reason": "flaky?"},
        ),
        # No grader scored it (shown `-`), a fail-closed fixture miss, a crash.
        one("judged-unscored", 7, [{k: v for k, v in r.items() if k != "score"}
                                   for r in passing_results()]),
        one("judged-miss", 8, passing_results(), fixture_misses=2),
        one("judged-crash", 9, passing_results(), runtime="agent_error"),
        one(
            "judged-effect", 6, passing_results(),
            external_effects=[{"effect_key": "mail:1", "status": "requested"},
                              {"effect_key": "mail:2", "status": "unknown"}],
        ),
    ]  # fmt: skip
    must(root, "trials", "ingest", str(write_jsonl(root / ".evalops" / "b.jsonl", rest)))
    must(
        root, "review", "resolve", "judged-abstain-0", "--grader", JUDGE, "--state",
        "task_pass", "--reason", "the reply is right",
    )  # fmt: skip
    must(
        root, "trials", "reconcile", "judged-effect", "--effect", "mail:1", "--status",
        "not_committed", "--evidence", "receipt://mail/none-1",
    )  # fmt: skip


def _judged(seed: Path, root: Path, state: str) -> Path:
    root = Path(shutil.copytree(seed, root, symlinks=True))
    must(root, "calibration", "record", JUDGE, "--labels", str(REPLY_QUALITY))
    _judged_trials(root)
    if state == "reviewed":
        return root
    must(root, "calibration", "invalidate", JUDGE, "--reason", "label distribution shift")
    if state == "invalidated":
        return root
    change_judge(root, _change_prompt, "judge: new prompt")
    must(root, "sync")
    if state == "reconfigured":
        return root
    must(root, "calibration", "record", JUDGE, "--labels", str(REPLY_QUALITY))
    return root


SCENARIOS = [
    "demo",
    "demo-second-policy",
    "demo-unnamed-policy",
    "judged-reviewed",
    "judged-invalidated",
    "judged-reconfigured",
    "judged-recalibrated",
    "gate",
]


@pytest.fixture(scope="module")
def registry_of(
    tmp_path_factory: pytest.TempPathFactory, demo_master: Path
) -> Callable[[str], Path]:
    """Each scenario's registry, built on first use (then only read)."""
    built: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in built:
            root = tmp_path_factory.mktemp("differential") / name
            if name.startswith("demo"):
                _demo(demo_master, root)
                if name != "demo":
                    _second_gate_policy(root)
                if name == "demo-unnamed-policy":
                    _suite_names_no_policy(root)
            elif name.startswith("judged"):
                _judged(judged_seed(tmp_path_factory), root, name.removeprefix("judged-"))
            else:
                copy_workspace(base_workspace(tmp_path_factory), root)
            built[name] = root
        return built[name]

    return get


# ------------------------------------------------------------------------ the readings


def _outcome(call: Callable[[], Any]) -> Any:
    """What a reading gave: its value, or the error it raised (type, message, location)."""
    try:
        return ("value", call())
    except EvalopsError as exc:
        return ("error", type(exc).__name__, exc.message, exc.file, exc.line, exc.field)


def filters(db: Path) -> list[tuple[dict[str, str], int | None]]:
    """Every single filter the registry's own values allow (and one unknown value of each),
    with and without a limit, and a fixed sample of combinations of them."""
    with closing(sqlite3.connect(db)) as conn:

        def values(sql: str) -> list[str]:
            return sorted({r[0] for r in conn.execute(sql)})

        tasks = values("SELECT task_id FROM trial")
        builds = values("SELECT system_build FROM execution_profile")
        suites = values("SELECT suite_id FROM suite_membership")
        suites += values("SELECT suite_id FROM suite")
    options: dict[str, list[str]] = {
        "task": [*tasks, "no-such-task"],
        "build": [*builds, "no-such-build"],
        "cls": [*CANONICAL_PRECEDENCE, "not-a-class"],
        "suite": [*sorted(set(suites)), "no/such-suite"],
    }
    out: list[tuple[dict[str, str], int | None]] = [({}, None), ({}, 1), ({}, 5)]
    for key, choices in options.items():
        for value in choices:
            out += [({key: value}, None), ({key: value}, 2)]
    rng = random.Random(20261201)
    for _ in range(30):
        keys = rng.sample(sorted(options), rng.randint(2, 4))
        picked = {k: rng.choice(options[k][:-1] or options[k]) for k in keys}
        out.append((picked, rng.choice([None, 1, 3])))
    return out


def reader_readings(reader: Reader, cases: list[tuple[dict[str, str], int | None]]) -> list[Any]:
    from evalops.services.reads.calibration import calibration_status
    from evalops.services.reads.trials import TrialFilter, list_trials

    out = [
        _outcome(lambda f=f, limit=limit: list_trials(reader, TrialFilter(**f), limit))
        for f, limit in cases
    ]
    out.append(_outcome(lambda: calibration_status(reader)))
    return out


# --------------------------------------------------------------- independent expectations


def _stored(db: Path) -> dict[str, dict[str, Any]]:
    """Every trial as the file stores it, by trial id, in insertion order."""
    with closing(sqlite3.connect(db)) as conn:
        conn.row_factory = sqlite3.Row
        builds = dict(conn.execute("SELECT execution_digest, system_build FROM execution_profile"))
        return {
            r["trial_id"]: {**dict(r), "build": builds.get(r["execution_digest"])}
            for r in conn.execute("SELECT * FROM trial ORDER BY id")
        }


def _latest_in_force(db: Path, kind: str) -> set[str]:
    with closing(sqlite3.connect(db)) as conn:
        return {
            r[0]
            for r in conn.execute(
                "SELECT definition_id FROM sync_in_force WHERE kind = ? AND sync_run_id = "
                "(SELECT max(id) FROM sync_run)",
                (kind,),
            )
        }


def _pins(db: Path, suite: str) -> set[tuple[str, str]]:
    """A suite's current pins, folded from its membership rows in order: each row but a
    retirement pins its task at a task and grader set digest, a retirement unpins it."""
    pins: dict[str, tuple[str, str]] = {}
    with closing(sqlite3.connect(db)) as conn:
        for task_id, action, task_digest, graders in conn.execute(
            "SELECT task_id, action, task_digest, grader_set_digest FROM suite_membership "
            "WHERE suite_id = ? ORDER BY id",
            (suite,),
        ):
            if action == "retired":
                pins.pop(task_id, None)
            else:
                pins[task_id] = (task_digest, graders)
    return set(pins.values())


def expected_listing(
    db: Path, full: list[dict[str, Any]], where: dict[str, str], limit: int | None
) -> Any:
    """What `trials list` must give for `where` and `limit`, by brute force over `full` (the
    unfiltered listing), in the shape `_outcome` gives."""
    if "cls" in where and where["cls"] not in CANONICAL_PRECEDENCE:
        return ("error", "--class")
    if "suite" in where and where["suite"] not in _latest_in_force(db, "suite"):
        return ("error", "--suite")
    stored = _stored(db)
    pins = _pins(db, where["suite"]) if "suite" in where else set()
    kept = [
        row
        for row in full
        if row["task_id"] == where.get("task", row["task_id"])
        and row["build"] == where.get("build", row["build"])
        and row["classification"] == where.get("cls", row["classification"])
        and (
            "suite" not in where
            or (
                stored[row["trial_id"]]["task_digest"],
                stored[row["trial_id"]]["grader_set_digest"],
            )
            in pins
        )
    ]
    return ("value", (kept if limit is None else kept[:limit], len(kept)))


def check_full_listing(db: Path, full: list[dict[str, Any]]) -> None:
    """The unfiltered listing against the stored rows, field by field where the listing
    shows what is stored (the class now is re-derived: the scenario tests below pin it)."""
    stored = _stored(db)
    assert [r["trial_id"] for r in full] == list(stored)
    for row in full:
        trial = stored[row["trial_id"]]
        assert (row["task_id"], row["trial_index"], row["parent_trial_id"], row["build"]) == (
            trial["task_id"], trial["trial_index"], trial["parent_trial_id"], trial["build"],
        )  # fmt: skip
        assert row["classification_at_ingest"] == trial["classification"]
        assert row["classification"] in CANONICAL_PRECEDENCE
        if row["parent_trial_id"] is None:
            assert "rerun_not_permitted" not in row["secondary_labels"]


def expected_status_keys(db: Path) -> dict[str, tuple[str, bool, list[str], str | None]]:
    """Config digest -> (grader id, in force, suites pinning it, its newest calibration):
    every model grader config a current pin holds (the grader sets' documents read here,
    digested by the digest recipe, DESIGN 4) or that is its grader's newest registered."""
    from evalops.domain.digests import grader_config_digest

    configs: dict[str, dict[str, Any]] = {}
    with closing(sqlite3.connect(db)) as conn:
        suites = [r[0] for r in conn.execute("SELECT DISTINCT suite_id FROM suite_membership")]
        for suite in sorted(suites):
            for _, graders in _pins(db, suite):
                row = conn.execute(
                    "SELECT document FROM grader_set WHERE grader_set_digest = ? "
                    "ORDER BY id LIMIT 1",
                    (graders,),
                ).fetchone()
                if row is None:
                    continue
                for grader in json.loads(row[0])["graders"]:
                    if grader.get("type") == "model":
                        entry = configs.setdefault(
                            grader_config_digest(grader),
                            {"id": grader["id"], "in_force": False, "pinned_by": set()},
                        )
                        entry["pinned_by"].add(suite)
        for (grader_id,) in conn.execute(
            "SELECT DISTINCT grader_id FROM grader_config WHERE type = 'model'"
        ).fetchall():
            (newest,) = conn.execute(
                "SELECT grader_config_digest FROM grader_config WHERE grader_id = ? "
                "ORDER BY id DESC LIMIT 1",
                (grader_id,),
            ).fetchone()
            entry = configs.setdefault(
                newest, {"id": grader_id, "in_force": False, "pinned_by": set()}
            )
            entry["in_force"] = True
        newest_calibration = dict(
            conn.execute(
                "SELECT grader_config_digest, calibration_id FROM calibration ORDER BY id"
            ).fetchall()
        )
    return {
        digest: (e["id"], e["in_force"], sorted(e["pinned_by"]), newest_calibration.get(digest))
        for digest, e in configs.items()
    }


def check_against_expectations(
    db: Path, readings: list[Any], cases: list[tuple[dict[str, str], int | None]]
) -> None:
    first = readings[cases.index(({}, None))]
    if first[0] == "error":
        # A suite naming no gate policy while two are in force: no policy judges its reruns,
        # and the listing says so rather than guess (every listing that reaches a rerun).
        assert "names no gate_policy and 2 are in force" in first[2], first
        suite = first[2].split()[1]
        with closing(sqlite3.connect(db)) as conn:
            governed = {
                r[0]
                for r in conn.execute(
                    "SELECT task_id FROM suite_membership WHERE suite_id = ?", (suite,)
                )
            }
        for got in readings[:-1]:
            if got[0] == "value":  # it showed no rerun of a task of that suite
                assert not [
                    r for r in got[1][0] if r["parent_trial_id"] and r["task_id"] in governed
                ]
            else:
                assert got[2] == first[2] or got[-1] in ("--class", "--suite"), got
    else:
        full, total = first[1]
        assert total == len(full)
        check_full_listing(db, full)
        for (where, limit), got in zip(cases, readings, strict=False):
            want = expected_listing(db, full, where, limit)
            if want[0] == "error":
                assert got[0] == "error" and got[-1] == want[1], (where, got)
            else:
                assert got == want, (where, limit, _first_difference([got], [want], [where]))
    kind, status = readings[-1]
    assert kind == "value", readings[-1]
    keys = {
        r["grader_config_digest"]: (
            r["grader_id"], r["in_force"], r["pinned_by"], r["calibration_id"],
        )
        for r in status
    }  # fmt: skip
    assert len(keys) == len(status)
    assert keys == expected_status_keys(db)


def _first_difference(a: list[Any], b: list[Any], cases: list[Any]) -> str:
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        if x != y:
            what = cases[i] if i < len(cases) else "calibration status"
            shown = [json.dumps(v, default=str)[:2000] for v in (x, y)]
            return f"{what}:\n{shown[0]}\n!=\n{shown[1]}"
    return ""


@pytest.mark.slow
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_reading_meets_its_expectations_on_sqlite(
    scenario: str, registry_of: Callable[[str], Path]
) -> None:
    db = registry_of(scenario) / DB
    cases = filters(db)
    with sqlite3_reader(db) as reader:
        plain = reader_readings(reader, cases)
    with sqlalchemy_reader(f"sqlite+pysqlite:///{db}") as reader:
        core = reader_readings(reader, cases)
    assert core == plain, _first_difference(core, plain, cases)
    check_against_expectations(db, plain, cases)


# --------------------------------------------------- the scenarios hold what they claim


def _listing(db: Path, **where: str) -> list[dict[str, Any]]:
    from evalops.services.reads.trials import TrialFilter, list_trials

    with sqlite3_reader(db) as reader:
        rows, total = list_trials(reader, TrialFilter(**where))
    assert len(rows) == total
    return rows


def _status(db: Path) -> list[dict[str, Any]]:
    from evalops.services.reads.calibration import calibration_status

    with sqlite3_reader(db) as reader:
        return calibration_status(reader)


def _judge_status(db: Path) -> list[dict[str, Any]]:
    """The judge's configs (the registry's other model grader, triage, is never calibrated)."""
    rows = _status(db)
    assert {r["state"] for r in rows if r["grader_id"] != JUDGE} == {"missing"}
    return [r for r in rows if r["grader_id"] == JUDGE]


def _count(db: Path, table: str) -> int:
    with closing(sqlite3.connect(db)) as conn:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


@pytest.mark.slow
def test_the_judged_registry_has_reviews_reconciliations_and_reruns(
    registry_of: Callable[[str], Path],
) -> None:
    db = registry_of("judged-reviewed") / DB
    assert _count(db, "review_result") == 1
    assert _count(db, "reconciliation") == 1
    rows = {r["trial_id"]: r for r in _listing(db)}
    # The reviewed abstention passes; the other still waits for a person.
    assert rows["judged-abstain-0"]["classification"] == "task_pass"
    assert rows["judged-abstain-1"]["classification"] == "missing_required_evidence"
    assert "awaiting_review" in rows["judged-abstain-1"]["secondary_labels"]
    # One of two ambiguous effects settled: still ambiguous, for the other one.
    assert rows["judged-effect"]["classification"] == "ambiguous_external_effect"
    assert (rows["judged-unscored"]["scored"], rows["judged-unscored"]["score"]) == (False, 1.0)
    assert rows["judged-miss"]["classification"] == "task_fail"
    assert rows["judged-crash"]["classification"] == "agent_error"
    # release-gate lets a timed-out trial be rerun once, never a failed one.
    assert "rerun_not_permitted" not in rows["judged-timeout-rerun"]["secondary_labels"]
    assert "rerun_not_permitted" in rows["judged-fail-rerun"]["secondary_labels"]
    (judge,) = _judge_status(db)
    assert (judge["state"], judge["in_force"], judge["pinned_by"]) == ("valid", True, [SUITE])


@pytest.mark.slow
def test_the_judged_registry_after_invalidation_and_a_config_change(
    registry_of: Callable[[str], Path],
) -> None:
    invalidated = registry_of("judged-invalidated") / DB
    assert _count(invalidated, "calibration_invalidation") == 1
    (judge,) = _judge_status(invalidated)
    assert judge["state"] == "stale"
    assert any("label distribution shift" in r for r in judge["reasons"])
    classes = {r["classification"] for r in _listing(invalidated, task=TASK_ID)}
    assert "grader_invalid" in classes

    reconfigured = _judge_status(registry_of("judged-reconfigured") / DB)
    assert len(reconfigured) == 2
    in_force = next(r for r in reconfigured if r["in_force"])
    pinned = next(r for r in reconfigured if not r["in_force"])
    assert in_force["state"] == "stale"
    assert "CAL-1 calibrated an earlier config" in in_force["reasons"][0]
    assert (pinned["pinned_by"], pinned["state"]) == ([SUITE], "stale")

    recalibrated = _judge_status(registry_of("judged-recalibrated") / DB)
    assert [r["state"] for r in recalibrated if r["in_force"]] == ["valid"]


@pytest.mark.slow
def test_a_second_gate_policy_changes_a_rerun_label_and_an_unnamed_one_is_an_error(
    registry_of: Callable[[str], Path],
) -> None:
    from evalops.services.reads.trials import TrialFilter, list_trials

    rerun = "trial-b123-article-source-records-complete-3-rerun-1"  # its task is in no suite
    demo = {r["trial_id"]: r for r in _listing(registry_of("demo") / DB)}
    assert "rerun_not_permitted" not in demo[rerun]["secondary_labels"]
    second = {r["trial_id"]: r for r in _listing(registry_of("demo-second-policy") / DB)}
    # Two gate policies in force: a task in no suite has no policy, so no rerun stands in.
    assert "rerun_not_permitted" in second[rerun]["secondary_labels"]
    with (
        sqlite3_reader(registry_of("demo-unnamed-policy") / DB) as reader,
        pytest.raises(EvalopsError, match="names no gate_policy and 2 are in force"),
    ):
        list_trials(reader, TrialFilter())


# --------------------------------------------------------------------------- PostgreSQL


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.parametrize(
    "scenario", ["demo-second-policy", "judged-reviewed", "judged-reconfigured", "gate"]
)
def test_the_reading_is_the_same_on_postgresql(
    scenario: str, registry_of: Callable[[str], Path], cli: Cli, request: pytest.FixtureRequest
) -> None:
    root = registry_of(scenario)
    url: str = request.getfixturevalue("pg_url")
    pg_holding(url, root)
    cases = filters(root / DB)
    with sqlalchemy_reader(url) as reader:
        core = reader_readings(reader, cases)
    # What PostgreSQL gives is what SQLite gives (timestamps, floats, order), and so meets
    # the same expectations.
    with sqlite3_reader(root / DB) as reader:
        plain = reader_readings(reader, cases)
    assert core == plain, _first_difference(core, plain, cases)
    check_against_expectations(root / DB, core, cases)


def test_the_example_registry_is_the_demo_s() -> None:
    """The demo scenarios edit files the example registry ships."""
    assert (EXAMPLE_REGISTRY / "policies" / "gate-policy.yaml").is_file()
    assert "\ngate_policy: release-gate" in (
        EXAMPLE_REGISTRY / "suites" / "regression-core.yaml"
    ).read_text(encoding="utf-8")
