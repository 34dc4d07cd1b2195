"""Golden decisions of the frozen gate evaluators: `tests/golden/evaluators/evaluator-N/`.

Two kinds of input -> result pairs, both decided by the evalops that had evaluator N as its
current one, never by today's code (tests/domain/test_evaluator_goldens.py replays them
with `domain.evaluators`):

- `GATE-*`: the decisions stored in the fixture databases (tests/fixtures/README.md), their
  inputs and results copied byte for byte from the `gate_decision` rows;
- `derived-*`: variations of those inputs (every regression method, waivers expired, not yet
  valid, revoked or out of scope, rerun limits, a missing required baseline, an empty suite)
  that the stored three never reach, decided by running that old evalops's own evaluator.

Regenerate (only to add cases; a changed result of an existing case is a broken replay):

    git worktree add --detach /tmp/evalops-v1 31e4046
    git worktree add --detach /tmp/evalops-v2 48386b9
    git worktree add --detach /tmp/evalops-v3 4977f2e
    python -m tests.golden_evaluators 1 /tmp/evalops-v1
    python -m tests.golden_evaluators 2 /tmp/evalops-v2
    python -m tests.golden_evaluators 3 /tmp/evalops-v3

The old checkout runs with this environment's libraries (as today's replay does).
"""

from __future__ import annotations

import copy
import hashlib
import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
GOLDEN = ROOT / "golden" / "evaluators"
# Evaluator -> the fixture database its stored decisions come from, and the commit that
# made them (tests/fixtures/README.md).
SOURCES = {
    1: ("registry-0001-demo.db", "31e4046"),
    2: ("registry-evaluator2-demo.db", "48386b9"),
    3: ("registry-evaluator3-demo.db", "4977f2e"),
}
METHODS = ("mcnemar", "sign-test", "paired-t", "paired-bootstrap")

# Runs in the old checkout: each inputs document on stdin's lines -> its canonical result.
_OLD_EVALUATOR = """
import json, sys
from evalops.domain.canonical import canonical_json
from evalops.domain.gate import evaluate
for line in sys.stdin:
    sys.stdout.write(canonical_json(evaluate(json.loads(line))).decode("utf-8") + "\\n")
"""


def stored(version: int) -> Iterator[tuple[str, str, str, str, str]]:
    """(gate id, inputs text, inputs digest, result text, result digest) of every decision
    stored in the fixture database of `version`."""
    name, _ = SOURCES[version]
    uri = f"file:{ROOT / 'fixtures' / name}?mode=ro&immutable=1"
    with sqlite3.connect(uri, uri=True) as db:
        yield from db.execute(
            "SELECT gate_id, inputs, inputs_digest, result, result_digest "
            "FROM gate_decision ORDER BY number"
        )


def _sha256(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _widened(inputs: dict[str, Any], *, baseline_passes: bool) -> dict[str, Any]:
    """Twelve tasks a side instead of three, so that every paired method, paired-bootstrap
    included, has pairs to test: copies of each task whose passing and failing trials take
    turns at passing, in the baseline too unless `baseline_passes` (then all pass there)."""
    out = copy.deepcopy(inputs)
    classes = ("task_pass", "task_fail", "task_pass", "agent_error")

    def copies(tasks: list[dict[str, Any]], shift: int, all_pass: bool) -> list[dict[str, Any]]:
        made = []
        for n in range(4):
            for task in tasks:
                twin = copy.deepcopy(task)
                twin["task_id"] = f"{task['task_id']}-{n}"
                for i, trial in enumerate(twin["trials"]):
                    trial["trial_id"] = f"{trial['trial_id']}-{n}"
                    if trial["parent_trial_id"] is not None:
                        trial["parent_trial_id"] = f"{trial['parent_trial_id']}-{n}"
                    if trial["classification"] in ("task_pass", "task_fail"):
                        cls = "task_pass" if all_pass else classes[(i + n + shift) % len(classes)]
                        score = 1.0 if cls == "task_pass" else (i + n) / 8
                        trial.update(classification=cls, score=score, gating_score=score)
                made.append(twin)
        return made

    out["tasks"] = copies(out["tasks"], 0, all_pass=False)
    out["baseline"]["tasks"] = copies(out["baseline"]["tasks"], 1, all_pass=baseline_passes)
    return out


def _lean(inputs: dict[str, Any]) -> dict[str, Any]:
    """The inputs without each trial's trajectory and efficiency facts, which the stored
    cases cover and which would make every derived case as large as they are."""
    out = copy.deepcopy(inputs)
    for tasks in (out["tasks"], (out.get("baseline") or {}).get("tasks", [])):
        for task in tasks:
            for trial in task["trials"]:
                trial.update(trajectory=None, efficiency=None)
    return out


def variants(name: str, stored_inputs: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Derived cases of one stored decision's inputs: (case name, inputs)."""
    inputs = _lean(stored_inputs)
    if inputs.get("baseline") is not None:  # GATE-1 of both demos
        yield from _baseline_variants(name, inputs)
    if inputs["waivers"]:  # GATE-3 of both demos
        yield from _waiver_variants(name, inputs)


def _changed(inputs: dict[str, Any], **top: Any) -> dict[str, Any]:
    out = copy.deepcopy(inputs)
    out.update(copy.deepcopy(top))
    return out


def _baseline_variants(name: str, inputs: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every paired method and two alphas, twelve-task sides, no baseline build (required or
    not), a required baseline without trials, rerun limits, risks, an empty suite."""
    for method in METHODS:
        for alpha in (0.05, 0.5):
            out = _changed(inputs)
            out["baseline"].update(method=method, alpha=alpha)
            yield f"{name}-{method}-alpha-{alpha}", out
        out = _changed(inputs)
        out["baseline"].update(method=method, alpha=0.05)
        yield f"{name}-wide-{method}", _widened(out, baseline_passes=True)
        if method == "paired-bootstrap":  # a p-value above its floor, from counted means
            yield f"{name}-wide-mixed-{method}", _widened(out, baseline_passes=False)
    for required in (False, True):
        out = _changed(inputs)
        out["baseline"].update(build=None, tasks=[], required=required)
        yield f"{name}-no-baseline-build-required-{str(required).lower()}", out
    out = _changed(inputs)
    out["baseline"].update(tasks=[], required=True)
    yield f"{name}-required-baseline-without-trials", out
    stored_limits = inputs["policy"]["reruns"]["max_attempts_by_class"]
    for case, limits in (
        ("none", {}),
        ("stored", stored_limits),  # infrastructure_invalid: 2, exactly one rerun
        ("raised", {"infrastructure_invalid": 3, "grader_invalid": 2}),
    ):
        out = _changed(inputs)
        out["policy"]["reruns"]["max_attempts_by_class"] = limits
        # The rerun's parent an invalid run: whether it stands in is the limit's call.
        for task in out["tasks"]:
            for trial in task["trials"]:
                if trial["classification"] == "hard_constraint_fail":
                    trial["classification"] = "infrastructure_invalid"
        yield f"{name}-rerun-of-invalid-limits-{case}", out
    out = _changed(inputs)
    for task in out["tasks"]:
        task["risk"] = "noncritical_regression"
    yield f"{name}-all-noncritical", out
    yield f"{name}-empty-suite", _changed(inputs, tasks=[], baseline=None)


def _waiver_variants(name: str, inputs: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The waiver expired, not yet valid, revoked (before or after the decision), for
    another build or another state; a refused waiver beside it; its task made critical."""
    waiver = inputs["waivers"][0]
    yield f"{name}-waiver-expired", _changed(inputs, evaluated_at=waiver["expires_at"])
    early = "2026-11-29T12:00:00.000000Z"
    yield f"{name}-waiver-not-yet-valid", _changed(inputs, evaluated_at=early)
    for case, edit in (
        ("revoked", {"revoked_at": inputs["evaluated_at"]}),
        ("revoked-later", {"revoked_at": "2026-12-01T12:00:00.000000Z"}),
        ("other-build", {"build": "build-999"}),
        ("other-state", {"states": ["agent_error"]}),
    ):
        yield f"{name}-waiver-{case}", _changed(inputs, waivers=[{**waiver, **edit}])
    refused = [{"waiver_id": "WVR-9", "refusals": ["critical_task"]}]
    yield f"{name}-with-refused-waiver", _changed(inputs, refused_waivers=refused)
    out = _changed(inputs)
    for task in out["tasks"]:
        if task["task_id"] == waiver["task_id"]:
            task["risk"] = "critical"
    yield f"{name}-waived-task-critical", out


def _old_results(old_tree: Path, documents: list[dict[str, Any]]) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", _OLD_EVALUATOR],
        input="".join(json.dumps(d) + "\n" for d in documents),
        env={"PYTHONPATH": str(old_tree), "PATH": "/usr/bin:/bin"},
        cwd=old_tree,  # `-c` puts the working directory first on sys.path
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.splitlines()


def write(version: int, old_tree: Path) -> None:
    folder = GOLDEN / f"evaluator-{version}"
    folder.mkdir(parents=True, exist_ok=True)
    database, commit = SOURCES[version]
    manifest: list[dict[str, Any]] = []
    derived: list[tuple[str, dict[str, Any]]] = []
    for gate_id, inputs, inputs_digest, result, result_digest in stored(version):
        assert _sha256(inputs) == inputs_digest and _sha256(result) == result_digest
        (folder / f"{gate_id}.inputs.json").write_text(inputs, encoding="utf-8")
        (folder / f"{gate_id}.result.json").write_text(result, encoding="utf-8")
        manifest.append(
            {
                "case": gate_id,
                "stored_in": f"tests/fixtures/{database}",
                "inputs_digest": inputs_digest,
                "result_digest": result_digest,
            }
        )
        derived += variants(f"derived-{gate_id}", json.loads(inputs))
    # The old evaluator must still decide its own stored decisions as it stored them.
    check = _old_results(old_tree, [json.loads(i) for _, i, _, _, _ in stored(version)])
    assert check == [r for _, _, _, r, _ in stored(version)], "not the evalops of this version"
    results = _old_results(old_tree, [d for _, d in derived])
    for (case, document), result in zip(derived, results, strict=True):
        inputs_text = json.dumps(document, sort_keys=True, separators=(",", ":"))
        (folder / f"{case}.inputs.json").write_text(inputs_text, encoding="utf-8")
        (folder / f"{case}.result.json").write_text(result, encoding="utf-8")
        manifest.append({"case": case, "decided_by_commit": commit})
    text = json.dumps({"evaluator": version, "cases": manifest}, indent=2) + "\n"
    (folder / "manifest.json").write_text(text, encoding="utf-8")
    print(f"evaluator {version}: {len(manifest)} cases in {folder.relative_to(ROOT.parent)}")


if __name__ == "__main__":
    write(int(sys.argv[1]), Path(sys.argv[2]))
