"""The frozen gate evaluators decide today as the evalops that made their decisions did.

`tests/golden/evaluators/evaluator-N/` holds input -> result pairs of each legacy evaluator
(tests/golden_evaluators.py says how they were made): the decisions stored in the fixture
databases, copied byte for byte, and variations of them decided by the old evalops itself,
never by today's code. Each is evaluated here, with no database, by the function
`domain.evaluators` lists for its version, and must give the stored bytes exactly: what
`gate replay`, `verify` and a signed attestation compare (ARCHITECTURE.md, "Add an evaluator
version").
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from evalops.domain import gate
from evalops.domain.canonical import canonical_json_document, canonical_json_reference
from evalops.domain.evaluators import EVALUATORS, evaluator_for, stored_version
from evalops.domain.gate import EVALUATOR, evaluate_stored
from evalops.domain.gate_compact import compact_inputs
from tests.domain.test_gate_evaluate import make_inputs, task

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "golden" / "evaluators"


def _cases() -> list[tuple[int, Path]]:
    return sorted(
        (int(folder.name.removeprefix("evaluator-")), path)
        for folder in GOLDEN.glob("evaluator-*")
        for path in folder.glob("*.inputs.json")
    )


CASES = _cases()
LEGACY = sorted(v for v in EVALUATORS if v < EVALUATOR)


def _manifest(version: int) -> list[dict[str, str]]:
    data = json.loads((GOLDEN / f"evaluator-{version}" / "manifest.json").read_bytes())
    assert data["evaluator"] == version
    cases: list[dict[str, str]] = data["cases"]
    return cases


@pytest.mark.parametrize(
    ("version", "inputs_path"), CASES, ids=[f"v{v}-{p.name[:-12]}" for v, p in CASES]
)
def test_each_golden_decision_replays_to_its_stored_bytes(version: int, inputs_path: Path) -> None:
    inputs = json.loads(inputs_path.read_bytes())
    expected = inputs_path.with_name(inputs_path.name.replace(".inputs.", ".result.")).read_bytes()
    assert stored_version(inputs) == version  # the inputs name their evaluator (1: unnamed)
    decided = EVALUATORS[version](inputs)
    assert canonical_json_document(decided) == expected
    assert canonical_json_reference(decided) == expected  # the slow, plain RFC 8785 encoder
    # and through the dispatch every replay goes through
    assert canonical_json_document(evaluate_stored(inputs)) == expected


@pytest.mark.parametrize("version", LEGACY)
def test_every_case_of_the_manifest_is_there_and_nothing_else(version: int) -> None:
    listed = {c["case"] for c in _manifest(version)}
    on_disk = {p.name[:-12] for v, p in CASES if v == version}
    assert listed == on_disk
    assert sum(1 for name in listed if name.startswith("GATE-")) >= 3
    assert sum(1 for name in listed if name.startswith("derived-")) >= 20


@pytest.mark.parametrize("version", LEGACY)
def test_the_stored_cases_are_the_fixture_rows_byte_for_byte(version: int) -> None:
    """Provenance: each stored case is a decision the old evalops wrote, unchanged since."""
    folder = GOLDEN / f"evaluator-{version}"
    stored = [c for c in _manifest(version) if c["case"].startswith("GATE-")]
    for case in stored:
        database = REPO / case["stored_in"]
        with sqlite3.connect(f"file:{database}?mode=ro&immutable=1", uri=True) as db:
            inputs, inputs_digest, result, result_digest = db.execute(
                "SELECT inputs, inputs_digest, result, result_digest FROM gate_decision "
                "WHERE gate_id = ?",
                (case["case"],),
            ).fetchone()
        for suffix, text, digest in (
            ("inputs", inputs, inputs_digest),
            ("result", result, result_digest),
        ):
            data = (folder / f"{case['case']}.{suffix}.json").read_bytes()
            assert data == text.encode("utf-8")
            assert (
                "sha256:" + hashlib.sha256(data).hexdigest() == digest == case[f"{suffix}_digest"]
            )


def test_every_legacy_evaluator_has_goldens() -> None:
    """A version frozen by a bump comes with its goldens (tests/golden_evaluators.py)."""
    assert LEGACY == [1, 2, 3]
    assert sorted({v for v, _ in CASES}) == LEGACY


def test_the_registry_names_each_version_and_refuses_an_unknown_one() -> None:
    assert sorted(EVALUATORS) == [1, 2, 3, 4]
    # The current version is `gate.evaluate` itself (behind the cast that types stored JSON):
    # the flat evaluator, over per-task summaries.
    assert EVALUATOR == 4
    listed = make_inputs([task("t-pass", "low"), task("t-fail", "high", ("task_fail",))])
    inputs = compact_inputs(listed)  # type: ignore[arg-type]
    assert evaluator_for(EVALUATOR)(inputs) == gate.evaluate(inputs)
    decided = evaluator_for(EVALUATOR)(inputs)
    assert sorted(t["task_id"] for t in decided["tasks"]) == ["t-fail", "t-pass"]
    assert decided["decision"] != "pass"  # a failing high-risk task never passes
    assert stored_version({}) == 1  # decisions made before inputs recorded a version
    with pytest.raises(ValueError, match="decision made by evaluator 5, unknown to this evalops"):
        evaluator_for(5)
    with pytest.raises(ValueError, match="evaluator None, unknown"):
        evaluate_stored({"evaluator": None})


def test_a_decision_of_the_current_evaluator_loads_no_frozen_one() -> None:
    code = (
        "import sys\n"
        "from evalops.domain.evaluators import evaluator_for\n"
        "from evalops.domain.gate import EVALUATOR\n"
        "evaluator_for(EVALUATOR)\n"
        "print(sorted(m for m in sys.modules if m.startswith('evalops.domain.legacy')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize(("one", "other"), [(1, 2), (2, 3)])
def test_two_frozen_evaluators_decide_some_golden_cases_differently(one: int, other: int) -> None:
    """The goldens tell the versions apart: evaluated by the other version, some of each
    version's cases give other bytes (so a dispatch that mixed them up would fail)."""
    differ = 0
    for version, path in CASES:
        if version not in (one, other):
            continue
        decide = EVALUATORS[one + other - version]
        expected = path.with_name(path.name.replace(".inputs.", ".result.")).read_bytes()
        inputs = json.loads(path.read_bytes())
        try:
            differ += canonical_json_document(decide(inputs)) != expected
        except (KeyError, TypeError, ValueError):
            differ += 1
    assert differ >= 4


V3_CASES = [path for version, path in CASES if version == 3]


@pytest.mark.parametrize("inputs_path", V3_CASES, ids=[p.name[:-12] for p in V3_CASES])
def test_the_flat_evaluator_decides_each_evaluator_3_golden_as_the_old_evalops_did(
    inputs_path: Path,
) -> None:
    """Every decision the evalops of evaluator 3 made (stored and derived), its trials
    summarized, is decided by the flat evaluator of new decisions as it was stored: the only
    difference is each task's first results counted by class instead of listed by trial
    (counted here from the stored list, not by the code under test)."""
    inputs = json.loads(inputs_path.read_bytes())
    stored = json.loads(
        inputs_path.with_name(inputs_path.name.replace(".inputs.", ".result.")).read_bytes()
    )
    for t in stored["tasks"]:
        counts: dict[str, int] = {}
        for cls in t.pop("firstResults").values():
            counts[cls] = counts.get(cls, 0) + 1
        t["firstResultCounts"] = dict(sorted(counts.items()))
    decided = gate.evaluate(compact_inputs(inputs))
    assert canonical_json_document(decided) == canonical_json_document(stored)
