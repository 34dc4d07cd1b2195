"""pytest plugin for `make mutate` (`-p tests.mutation_fast` in `[tool.mutmut]`).

Keeps mutation testing to fast tests: a test that runs the CLI or builds a registry
workspace is deselected. mutmut runs the tests that reach a mutated function once per
mutant, in a fresh process each time, so one workspace fixture would cost seconds per
mutant; the pure tests reach every rule directly.

A mutant of a module outside evalops/domain/ (the gate-input loaders, verify's decision
checks, the importers) runs only the tests of that module's own fast files (`FAST_TESTS`):
pure calls with hand-built inputs, or the demo registry of tests/fixtures read through plain
SQL. So does a mutant of the flat gate evaluator (`gate_compact`) or of the rules it shares
(`gate_rules`): verify's, the fast paths' and the integrity tests reach them through stored
decisions (30 s and more a mutant); their own pure tests (`GATE_TESTS`: the rule tests, the
differential against the frozen evaluator 3, a summary and exact sums worked out by hand,
the goldens) take seconds. Other files in the selection reach those modules too, but through
tests written for another purpose (some of them slow), so they neither add to nor take from
the module's score. The files written for these modules (`RESERVED`) run for their mutants
only: a domain mutant runs the tests it ran before they were added. The stats and clean runs
(which map tests to functions) keep every fast test. mutmut maps a function to the tests
during whose run it was called: a module- or session-scoped fixture that calls the module
runs during the first test only, so the others would never run for its mutants (the fast
files build what they read in each test).
"""

from __future__ import annotations

import os

import pytest

MUTANT = "MUTANT_UNDER_TEST"
"""Set by mutmut in each mutant's test process: the mutant's full name (`evalops.domain.gate.
x_evaluate__mutmut_3`); `stats`, `list_all_tests` or empty in its other runs."""

GATE_TESTS = frozenset(
    {
        "tests/domain/test_gate_evaluate.py",
        "tests/domain/test_gate_compact.py",
        "tests/domain/test_gate_compact_summary.py",
        "tests/domain/test_gate_compact_sums.py",
        "tests/domain/test_evaluator_goldens.py",
    }
)
"""The pure tests of the flat evaluator (`gate_compact`) and the rules it shares (`gate_rules`):
the rule tests written by hand over listed trials, each decided by the frozen evaluator 3 and
by evaluator 4 over the summaries, which must agree (tests/decide.py); the differential corpus
against evaluator 3; a task summary written out by hand; the exact sums against `Fraction`s;
the evaluator-3 goldens decided by the old evalops. The frozen evaluators import neither
module, so none of these expectations moves with a mutant."""

FAST_TESTS: dict[str, frozenset[str]] = {
    "evalops.services.gate.input_parts.": frozenset(
        {
            "tests/services/test_gate_input_parts.py",
            "tests/services/test_gate_input_parts_words.py",
        }
    ),
    "evalops.services.verify.decision_checks.": frozenset(
        {"tests/services/test_decision_checks_words.py"}
    ),
    "evalops.services.verify.gate_inputs.": frozenset(
        {"tests/services/test_verify_gate_inputs_words.py"}
    ),
    "evalops.importers.promptfoo.": frozenset({"tests/importers/test_promptfoo_words.py"}),
    "evalops.importers.inspect.": frozenset(
        {"tests/importers/test_inspect_words.py", "tests/importers/test_import_inspect_zip.py"}
    ),
    "evalops.domain.gate_compact.": GATE_TESTS,
    "evalops.domain.gate_rules.": GATE_TESTS
    | {"tests/domain/test_gate_rules.py", "tests/domain/test_gate_rules_ignored.py"},
}
"""Mutant name prefix -> the test files (paths from the repository root, as listed in
`[tool.mutmut] pytest_add_cli_args_test_selection`) whose tests are run for its mutants."""

RESERVED = frozenset(
    {
        "tests/services/test_gate_input_parts_words.py",
        "tests/services/test_decision_checks_words.py",
        "tests/services/test_verify_gate_inputs_words.py",
        "tests/importers/test_promptfoo_words.py",
        "tests/importers/test_inspect_words.py",
        "tests/domain/test_gate_compact_sums.py",
    }
)
"""Files of `FAST_TESTS` run for no other mutant (they reach domain functions too)."""

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


def runs(mutant: str, path: str) -> bool:
    """Does a test of the file `path` run for `mutant` (a mutant's full name, or what mutmut
    sets in its stats and clean runs)?"""
    for prefix, files in FAST_TESTS.items():
        if mutant.startswith(prefix):
            return path in files
    return path not in RESERVED or not mutant.startswith("evalops.")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mutant = os.environ.get(MUTANT, "")
    keep: list[pytest.Item] = []
    left_out: list[pytest.Item] = []
    for item in items:
        slow = set(getattr(item, "fixturenames", ())) & WORKSPACE_FIXTURES
        path = item.nodeid.split("::", 1)[0]
        (left_out if slow or not runs(mutant, path) else keep).append(item)
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = keep
