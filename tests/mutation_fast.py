"""pytest plugin for `make mutate` (`-p tests.mutation_fast` in `[tool.mutmut]`).

Keeps mutation testing to the fast tests of the domain rules: a test that runs the CLI or
builds a registry workspace is deselected. mutmut runs the tests that reach a mutated
function once per mutant, in a fresh process each time, so one workspace fixture would cost
seconds per mutant; the pure tests reach every rule directly.
"""

from __future__ import annotations

import pytest

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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    keep: list[pytest.Item] = []
    slow: list[pytest.Item] = []
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        (slow if names & WORKSPACE_FIXTURES else keep).append(item)
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = keep
