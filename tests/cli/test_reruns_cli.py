"""Reruns at the CLI: stored, linked, labelled when they may not stand in
(docs/classification.md)."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.conftest import Cli
from tests.helpers import EXAMPLE_REGISTRY, commit_all
from tests.trial_factory import mini_case, record, write_jsonl

HARD_FAIL = [
    {"grader_id": "outcome", "grader_version": 1, "state": "task_pass", "score": 1.0},
    {"grader_id": "no-twice", "grader_version": 1, "state": "hard_constraint_fail"},
]


def test_rerun_labels(synced: Path, cli: Cli) -> None:
    shutil.copytree(EXAMPLE_REGISTRY / "policies", synced / "registry" / "policies")
    commit_all(synced, "policies")
    assert cli("sync", cwd=synced).code == 0
    case = mini_case(synced)
    rerun = {"parent_trial_id": "hard", "reason": "flaky?"}
    infra_rerun = {"parent_trial_id": "infra", "reason": "runner timeout"}
    records = [
        record(case, trial_id="hard", grader_results=HARD_FAIL),
        record(case, trial_id="hard-again", rerun=rerun),
        record(case, trial_id="infra", trial_index=1, runtime="timeout"),
        record(case, trial_id="infra-again", trial_index=1, rerun=infra_rerun),
    ]
    path = write_jsonl(synced / "t.jsonl", records)
    assert cli("trials", "ingest", str(path), cwd=synced).code == 0

    hard_again = cli("trials", "show", "hard-again", "--json", cwd=synced).json()
    assert hard_again["classification"] == "task_pass"
    assert "rerun_not_permitted" in hard_again["secondary_labels"]
    assert hard_again["rerun_chain"] == ["hard", "hard-again"]

    infra_again = cli("trials", "show", "infra-again", "--json", cwd=synced).json()
    assert "rerun_not_permitted" not in infra_again["secondary_labels"]

    hard = cli("trials", "show", "hard", "--json", cwd=synced).json()
    assert hard["classification"] == "hard_constraint_fail"
    listed = {r["trial_id"]: r for r in cli("trials", "list", "--json", cwd=synced).json()}
    assert set(listed) == {"hard", "hard-again", "infra", "infra-again"}
