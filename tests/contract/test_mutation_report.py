"""`tools/mutation_report.py report` holds every module to the target (tests/MUTATION.md)."""

from __future__ import annotations

import tomllib

from tests.mutation_fast import FAST_TESTS, RESERVED, runs
from tools.mutation_report import ROOT, short_of_target


def test_a_module_measured_whole_at_90_percent_meets_the_target() -> None:
    row = "| gate | 794 | 794 | 793 | 0 | 1 | 1 | 99.9% | 100.0% |"
    assert short_of_target("gate", row) == []
    assert short_of_target("act_roles", "| act_roles | 0 | 0 | 0 | 0 | 0 | 0 | - | - |") == []


def test_a_module_not_measured_whole_or_under_90_percent_does_not() -> None:
    assert short_of_target("x", "| x | not run yet | | | | | | | |") == ["x: not measured"]
    partial = "| y | 145 (117 not run yet) | 28 | 24 | 3 | 1 | 1 | 96.4% | 100.0% |"
    assert short_of_target("y", partial) == ["y: 117 of 145 mutants not run yet"]
    low = "| z | 100 | 100 | 89 | 0 | 11 | 0 | 89.0% | 89.0% |"
    assert short_of_target("z", low) == ["z: score 89.0%, under 90%"]


def test_each_fast_file_is_in_the_mutation_selection_and_exists() -> None:
    """A file of `FAST_TESTS` outside `[tool.mutmut]`'s selection would never run: its
    module's mutants would run no test at all and all survive."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    selection = set(config["tool"]["mutmut"]["pytest_add_cli_args_test_selection"])
    fast = set().union(*FAST_TESTS.values())
    assert fast <= selection, sorted(fast - selection)
    assert fast >= RESERVED
    assert all((ROOT / path).is_file() for path in fast)


def test_a_gate_mutant_runs_the_gate_s_pure_tests_only() -> None:
    compact = "evalops.domain.gate_compact.x_evaluate__mutmut_1"
    rules = "evalops.domain.gate_rules.x_task_effect__mutmut_1"
    for path in (
        "tests/domain/test_gate_evaluate.py",
        "tests/domain/test_gate_compact.py",
        "tests/domain/test_gate_compact_summary.py",
        "tests/domain/test_gate_compact_sums.py",
        "tests/domain/test_evaluator_goldens.py",
    ):
        assert runs(compact, path)
        assert runs(rules, path)
    assert runs(rules, "tests/domain/test_gate_rules.py")
    for slow in ("tests/services/test_verify.py", "tests/integrity/test_decision_integrity.py"):
        assert not runs(compact, slow)
        assert not runs(rules, slow)
    # Another domain module's mutant runs what it ran before the sums file was added; the
    # stats run (which maps tests to functions) runs everything.
    assert not runs(
        "evalops.domain.classify.x_classify__mutmut_1", "tests/domain/test_gate_compact_sums.py"
    )
    assert runs(
        "evalops.domain.gate.x_evaluate_stored__mutmut_1", "tests/domain/test_gate_evaluate.py"
    )
    assert runs("stats", "tests/domain/test_gate_compact_sums.py")
