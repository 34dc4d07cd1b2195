"""pytest plugin for `make mutate` (`-p tests.mutation_fast` in `[tool.mutmut]`).

Keeps mutation testing to the fast tests of the domain rules: a test that runs the CLI or
builds a registry workspace is deselected. mutmut runs the tests that reach a mutated
function once per mutant, in a fresh process each time, so one workspace fixture would cost
seconds per mutant; the pure tests reach every rule directly.
"""

from __future__ import annotations

import os

import pytest

WORKSPACE_TESTS = "EVALOPS_MUTATE_WORKSPACE_TESTS"
"""Set by tools/mutation_report.py when a run measures a module outside evalops/domain/ (the
gate-input loaders, the importers): their tests run the CLI on a workspace, so those tests are
kept for that run's mutants of such modules (and for mutmut's own stats and clean runs, which
map tests to functions), never for a domain mutant."""
DOMAIN = "evalops.domain."

WORKSPACE_FIXTURES = frozenset(
    {
        "cli",
        "workspace",
        "workspace_master",
        "synced",
        "synced_master",
        "demo",
        "demo_master",
        "base",
        "ws",
        "reg_ws",
        "refusals_ws",
        "populated",
    }
)


def _keeps_workspace_tests() -> bool:
    if os.environ.get(WORKSPACE_TESTS) != "1":
        return False
    return not os.environ.get("MUTANT_UNDER_TEST", "").startswith(DOMAIN)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _keeps_workspace_tests():
        return
    keep: list[pytest.Item] = []
    slow: list[pytest.Item] = []
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        (slow if names & WORKSPACE_FIXTURES else keep).append(item)
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = keep
