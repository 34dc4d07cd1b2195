"""`evalops trajectory grade` as a CI check (docs/classification.md and docs/cli.md).

An unmatched trajectory fails the check: exit 4, the contract's failing-decision code
(documented in the README's exit-code table), and `--json` carries the reasons next to the
RFC 0244 block. A matched one exits 0 with no reasons. No database is needed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalops.errors import EXIT_BLOCK, EXIT_UNMATCHED
from tests.conftest import Cli
from tests.helpers import REPO_ROOT

EXPECTED = {
    "match": "in-order",
    "calls": [
        {"tool": "crm:lookup-order", "argsMatch": "ignore"},
        {"tool": "billing:refund", "args": {"amountMinor": 4200}, "argsMatch": "subset"},
    ],
    "forbidden": ["billing:refund-all"],
}
GOOD_CALLS = [
    {"tool": "crm:lookup-order", "args": {"orderId": "A-1"}, "agent_id": "support"},
    {"tool": "billing:refund", "args": {"amountMinor": 4200, "orderId": "A-1"}},
]
BAD_CALLS = [
    {"tool": "crm:lookup-order", "args": {"orderId": "A-1"}},
    {"tool": "billing:refund-all", "args": {}},
]
BLOCK_KEYS = {"mode", "matched", "expectedCount", "observedCount", "matchedCount", "forbiddenCount"}


def files(tmp_path: Path, calls: list[dict[str, Any]]) -> list[str]:
    expected = tmp_path / "expected.json"
    expected.write_text(json.dumps(EXPECTED), encoding="utf-8")
    observed = tmp_path / "calls.json"
    observed.write_text(json.dumps(calls), encoding="utf-8")
    return ["trajectory", "grade", "--expected", str(expected), "--calls", str(observed)]


def test_unmatched_exits_4_and_json_gives_the_reasons(tmp_path: Path, cli: Cli) -> None:
    result = cli(*files(tmp_path, BAD_CALLS), "--json")

    assert result.code == EXIT_UNMATCHED == EXIT_BLOCK == 4, result.stdout + result.stderr
    data = result.json()
    assert set(data) >= BLOCK_KEYS
    assert data["matched"] is False
    assert data["forbiddenCount"] == 1
    assert data["reasons"] == [
        "expected a call to billing:refund with arguments including amountMinor, but no "
        "observed call matched",
        "1 call to forbidden tools: billing:refund-all",
    ]


def test_unmatched_in_human_output_exits_4_too(tmp_path: Path, cli: Cli) -> None:
    result = cli(*files(tmp_path, BAD_CALLS))

    assert result.code == 4
    assert result.stdout.startswith("trajectory NOT matched (in-order): 1 of 2 expected calls")
    assert "  - 1 call to forbidden tools: billing:refund-all" in result.stdout


def test_matched_exits_0_with_no_reasons(tmp_path: Path, cli: Cli) -> None:
    result = cli(*files(tmp_path, GOOD_CALLS), "--json")

    assert result.code == 0, result.stdout + result.stderr
    data = result.json()
    assert data["matched"] is True
    assert data["matchedCount"] == 2
    assert data["reasons"] == []


@pytest.mark.parametrize("bad", ["not json", '{"not": "a list"}'])
def test_bad_calls_stay_a_usage_error(tmp_path: Path, cli: Cli, bad: str) -> None:
    """Exit 2 (bad input) stays distinct from 4 (graded, not matched)."""
    args = files(tmp_path, GOOD_CALLS)
    (tmp_path / "calls.json").write_text(bad, encoding="utf-8")

    assert cli(*args).code == 2


@pytest.mark.parametrize(
    ("page", "heading"), [("README.md", "## Exit codes"), ("docs/cli.md", "## Exit codes")]
)
def test_the_readme_and_the_reference_document_the_exit_code(page: str, heading: str) -> None:
    text = (REPO_ROOT / page).read_text(encoding="utf-8")
    section = text.split(heading, 1)[1].split("\n## ", 1)[0]
    row = next(line for line in section.splitlines() if line.startswith("| 4 |"))
    assert "trajectory grade" in row and "not matched" in row
