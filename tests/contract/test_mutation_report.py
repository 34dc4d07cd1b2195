"""`tools/mutation_report.py report` holds every module to the target (tests/MUTATION.md)."""

from __future__ import annotations

from tools.mutation_report import short_of_target


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
