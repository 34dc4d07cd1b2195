"""Flaky tasks on the suite card exclude hard-constraint failures (docs/verify.md).

A task is flaky in a build when pass@k >= 0.8 and pass^k <= 0.5: it passes sometimes, not
reliably. When its misses include a hard-constraint failure (a refund committed twice) that
is no noise: the task is listed apart as "failed a hard constraint".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evalops.services.reports.suite_cards import flaky_tasks
from tests.conftest import Cli


def point(build: str, at_k: float, hat_k: float, state: str) -> dict[str, Any]:
    return {
        "build": build,
        "gate_id": "G",
        "passAtK": at_k,
        "passHatK": hat_k,
        "n": 5,
        "state": state,
    }


def test_a_hard_constraint_miss_is_never_flaky() -> None:
    series = {
        "noisy": [point("b1", 1.0, 0.4, "task_fail"), point("b2", 1.0, 1.0, "task_pass")],
        "twice": [point("b1", 1.0, 0.4, "hard_constraint_fail")],
        "both": [point("b1", 0.9, 0.3, "hard_constraint_fail"), point("b2", 0.9, 0.5, "task_fail")],
        "steady": [point("b1", 0.5, 0.1, "task_fail")],  # rarely passes: not flaky either
    }
    flaky, hard = flaky_tasks(series)
    assert [(f["task_id"], f["builds"]) for f in flaky] == [("noisy", ["b1"]), ("both", ["b2"])]
    assert [(f["task_id"], f["builds"]) for f in hard] == [("twice", ["b1"]), ("both", ["b1"])]


def test_the_demo_refund_committed_twice_is_listed_apart(demo: Path, cli: Cli) -> None:
    out = cli("report", "suite", "regression/core", "--format", "json", cwd=demo)
    assert out.code == 0, out.stderr
    card = json.loads(out.stdout)
    gate = cli("report", "audit", "--gate", "GATE-1", "--format", "json", cwd=demo)
    (task,) = [
        t
        for t in json.loads(gate.stdout)["decision_document"]["tasks"]
        if t["task_id"] == "support-refund-in-order"
    ]
    # The stored decision: it passed in some trials, not reliably, and one was a hard failure.
    assert task["state"] == "hard_constraint_fail"
    assert task["passAtK"] >= 0.8 and task["passHatK"] <= 0.5
    assert "support-refund-in-order" not in [f["task_id"] for f in card["flaky"]]
    hard = {f["task_id"]: f["builds"] for f in card["failed_hard_constraint"]}
    assert hard["support-refund-in-order"] == ["build-124"]
    html = cli("report", "suite", "regression/core", "--format", "html", cwd=demo).stdout
    assert "Failed a hard constraint (not flaky)" in html
