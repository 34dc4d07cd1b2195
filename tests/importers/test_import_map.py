"""The import map (`import-map/v1`): strict like every spec, errors at file:line: field."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from evalops.domain.import_map import ScorerMap, value_key
from evalops.errors import InputError
from evalops.importers.common import grader_result
from evalops.registry.import_maps import load_import_map
from tests.helpers import EXAMPLE_REGISTRY

MAPS = sorted((EXAMPLE_REGISTRY / "imports").glob("*.yaml"))
INSPECT_MAP = EXAMPLE_REGISTRY / "imports" / "inspect-support.yaml"


@pytest.mark.parametrize("path", MAPS, ids=[p.name for p in MAPS])
def test_example_maps_are_valid(path: Path) -> None:
    loaded = load_import_map(path)
    assert loaded.spec.task_ids() == [
        "support-refund-in-order",
        "support-refund-policy-explanation",
        "support-reply-tone",
    ]


def test_the_maps_shown_in_the_tutorial_are_valid(tmp_path: Path) -> None:
    text = (EXAMPLE_REGISTRY.parent / "docs" / "tutorial.md").read_text(encoding="utf-8")
    maps = [b for b in re.findall(r"```yaml\n(.*?)```", text, re.S) if "import-map/v1" in b]
    assert {yaml.safe_load(b)["source"] for b in maps} == {"inspect", "promptfoo"}
    for i, block in enumerate(maps):
        path = tmp_path / f"readme-{i}.yaml"
        path.write_text(block, encoding="utf-8")
        assert load_import_map(path).spec.task_ids()


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "map.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def error_of(tmp_path: Path, text: str) -> InputError:
    with pytest.raises(InputError) as caught:
        load_import_map(write(tmp_path, text))
    return caught.value


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), start=1) if needle in line)


def test_a_typo_is_an_error_at_its_line(tmp_path: Path) -> None:
    text = INSPECT_MAP.read_text().replace("target_agent_id: support", "target_agent: support")
    error = error_of(tmp_path, text)
    assert (error.line, error.field) == (line_of(text, "target_agent: support"), "target_agent")
    assert "unknown field" in error.message


def test_an_invalid_regular_expression_is_refused_where_it_is(tmp_path: Path) -> None:
    text = INSPECT_MAP.read_text().replace('match: "(?i)connection', 'match: "(?i)(connection')
    error = error_of(tmp_path, text)
    assert error.field == "runtime.error_patterns[0].match"
    assert error.line == line_of(text, "(?i)(connection")


def test_two_scorers_for_one_grader_are_refused(tmp_path: Path) -> None:
    text = INSPECT_MAP.read_text().replace(
        "ticket_check: {grader_id: ticket-outcome", "ticket_check: {grader_id: refund-outcome"
    )
    error = error_of(tmp_path, text)
    assert error.field == "tasks.refund_agent.scorers.ticket_check.grader_id"
    assert "at most one result per grader" in error.message


def test_an_unknown_state_or_version_is_refused(tmp_path: Path) -> None:
    text = INSPECT_MAP.read_text().replace("values: {C: pass,", "values: {C: passed,")
    error = error_of(tmp_path, text)
    assert error.field == "tasks.refund_agent.scorers.effect_guard.values.C"
    text = INSPECT_MAP.read_text().replace(
        "spec_schema_version: import-map/v1", "spec_schema_version: import-map/v2"
    )
    assert error_of(tmp_path, text).field == "spec_schema_version"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda m: m.pop("execution"), "execution"),
        (lambda m: m.update(providers={"a": "candidate-b124"}), "providers"),
        (lambda m: m["tasks"]["refund_agent"].update(task="x"), "tasks.refund_agent"),
    ],
)
def test_an_inspect_map_has_an_execution_and_samples(tmp_path: Path, change, field: str) -> None:  # type: ignore[no-untyped-def]
    value = yaml.safe_load(INSPECT_MAP.read_text())
    change(value)
    error = error_of(tmp_path, json.dumps(value))
    assert error.field == field


def test_a_promptfoo_map_has_one_task_per_test(tmp_path: Path) -> None:
    value = yaml.safe_load((EXAMPLE_REGISTRY / "imports" / "promptfoo-support.yaml").read_text())
    value["tasks"]["refund policy explanation"]["task"] = "support-refund-in-order"
    error = error_of(tmp_path, json.dumps(value))
    assert error.field == "tasks.refund policy explanation.task"
    value["tasks"]["refund policy explanation"] = {"samples": {"1": "x"}}
    assert error_of(tmp_path, json.dumps(value)).field == "tasks.refund policy explanation"


def test_row_verdict_is_a_promptfoo_grader_no_scorer_maps_to(tmp_path: Path) -> None:
    value = yaml.safe_load((EXAMPLE_REGISTRY / "imports" / "promptfoo-support.yaml").read_text())
    # A scorer already stands for refund-outcome: one trial carries one result per grader.
    value["row_verdict"] = {"grader_id": "refund-outcome", "grader_version": 3}
    error = error_of(tmp_path, json.dumps(value))
    assert error.field.endswith(".scorers.refund_check.grader_id")
    assert "row_verdict" in error.message
    inspect = yaml.safe_load(INSPECT_MAP.read_text())
    inspect["row_verdict"] = {"grader_id": "reply-quality", "grader_version": 2}
    assert error_of(tmp_path, json.dumps(inspect)).field == "row_verdict"


# ------------------------------------------------------------------------ value keys


@given(st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1))
def test_an_integral_number_has_one_key_however_written(n: int) -> None:
    assert value_key(n) == value_key(float(n)) == str(n)


@pytest.mark.parametrize(
    ("value", "key"),
    [("C", "C"), (True, "true"), (False, "false"), (1, "1"), (1.0, "1"), (0.5, "0.5"),
     (float("nan"), None), (float("inf"), None), ([1], None), ({"a": 1}, None)],
)  # fmt: skip
def test_value_keys(value: object, key: str | None) -> None:
    assert value_key(value) == key


def scorer(values: dict[str, str]) -> ScorerMap:
    return ScorerMap.model_validate({"grader_id": "g", "grader_version": 1, "values": values})


def test_numeric_map_keys_match_numeric_values_however_written() -> None:
    s = scorer({"1.0": "task_pass", "0": "task_fail"})
    assert s.state_of(1) == s.state_of(1.0) == "task_pass"
    assert s.state_of(0.0) == "task_fail"
    assert s.state_of("1") == "task_pass"  # the text 1 is the key "1"
    assert s.state_of(True) is None  # true is not 1
    with pytest.raises(ValueError, match="same value"):
        scorer({"1": "task_pass", "1.0": "task_fail"})


def test_unmapped_and_nan_values_are_grader_invalid() -> None:
    s = scorer({"C": "task_pass"})
    assert grader_result(s, "C", "C") == (
        {"grader_id": "g", "grader_version": 1, "state": "task_pass"},
        "",
    )
    result, label = grader_result(s, "P", "P")
    assert (result["state"], result["reason"], label) == (
        "grader_invalid",
        "unmapped_value",
        "unmapped_value",
    )
    result, label = grader_result(s, math.nan, math.nan)
    assert (result["state"], result["reason"], label) == ("grader_invalid", "unscored", "unscored")
    assert "score" not in result
    # A number in [0, 1] is also the result's score; others are not scores.
    assert grader_result(scorer({"0.5": "task_fail"}), 0.5, 0.5)[0]["score"] == 0.5
    assert "score" not in grader_result(scorer({"7": "task_fail"}), 7, 7)[0]
