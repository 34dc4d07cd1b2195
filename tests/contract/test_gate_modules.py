"""The gate's domain modules form no import circle and share their rules by public names.

`domain.gate` (the entry: `EVALUATOR`, `evaluate`, `evaluate_stored`), `domain.evaluators`
(every version's functions), `domain.gate_compact` (the evaluator of new decisions) and
`domain.gate_rules` (the rules that do not depend on how trials are held) import one
another in one direction only, function-level imports included (grimp, the graph
import-linter checks), and none imports a private (`_x`) name of another module of evalops.
"""

from __future__ import annotations

import ast
from itertools import permutations
from pathlib import Path

import grimp
import pytest

DOMAIN = Path(__file__).resolve().parents[2] / "evalops" / "domain"
GATE_MODULES = ("gate", "evaluators", "gate_compact", "gate_rules")


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("evalops")


@pytest.mark.parametrize(("one", "other"), list(permutations(GATE_MODULES, 2)))
def test_no_import_circle_between_the_gate_modules(
    graph: grimp.ImportGraph, one: str, other: str
) -> None:
    a, b = f"evalops.domain.{one}", f"evalops.domain.{other}"
    assert not (graph.chain_exists(a, b) and graph.chain_exists(b, a)), (
        graph.find_shortest_chain(a, b),
        graph.find_shortest_chain(b, a),
    )


@pytest.mark.parametrize("name", GATE_MODULES)
def test_the_gate_modules_import_no_private_name(name: str) -> None:
    tree = ast.parse((DOMAIN / f"{name}.py").read_text(encoding="utf-8"))
    private = [
        f"{node.module}.{alias.name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("evalops")
        for alias in node.names
        if alias.name.startswith("_")
    ]
    assert private == []


def test_the_check_fails_on_a_circle() -> None:
    """The circle this file guards against, as it stood (gate <-> evaluators), is seen."""
    circle = grimp.ImportGraph()
    for module in ("x.gate", "x.evaluators", "x.gate_compact"):
        circle.add_module(module)
    circle.add_import(importer="x.gate", imported="x.evaluators")
    circle.add_import(importer="x.evaluators", imported="x.gate")
    assert circle.chain_exists("x.gate", "x.evaluators")
    assert circle.chain_exists("x.evaluators", "x.gate")
