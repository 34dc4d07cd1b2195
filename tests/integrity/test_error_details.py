"""What a refusal shows of the input at fault: where in a line invalid JSON went wrong (the
column, counted from 1 as editors count), and the value a field of the wrong type held, cut
short and escaped, so a user fixes the line without opening it."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from evalops.errors import InputError
from evalops.registry.definitions import pydantic_error
from evalops.registry.load import Document, parse_json, parse_record

BAD_LINES = [
    '{"trial_id": "t-1", oops}',
    '{"trial_id": "t-1",, "x": 1}',
    '{"trial_id": "t-1" "x": 1}',
    '{"a": [1, 2,]}',
]


def _first_bad_column(text: str) -> int:
    """The column of the first character a JSON parser cannot take, by Python's own json
    module as the reference (evalops's parsers are the C parser with hooks, or its own
    fallback)."""
    import json

    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return exc.colno
    raise AssertionError("valid JSON")


@pytest.mark.parametrize("text", BAD_LINES)
@pytest.mark.parametrize("parse", [parse_record, lambda t, p: parse_json(t, p, spec=False)])
def test_invalid_json_names_its_column(text: str, parse: object) -> None:
    expected = _first_bad_column(text)
    # The column by hand for the first line: the `o` of `oops` is the 21st character.
    assert _first_bad_column(BAD_LINES[0]) == BAD_LINES[0].index("oops") + 1
    with pytest.raises(InputError) as caught:
        parse(text, "trials.jsonl")  # type: ignore[operator]
    assert f"invalid JSON at column {expected}: " in caught.value.message


class _Record(BaseModel):
    model_config = ConfigDict(strict=True)
    fixture_misses: int
    trial_id: str


def _error_for(value: dict[str, object]) -> str:
    try:
        _Record.model_validate(value)
    except ValidationError as exc:
        return pydantic_error(Document("trials.jsonl", value, {}), exc).message
    raise AssertionError("valid")


def test_a_value_of_the_wrong_type_is_shown() -> None:
    message = _error_for({"fixture_misses": "zero", "trial_id": "t-1"})
    assert message.endswith(", got 'zero'"), message


def test_a_long_value_is_cut_and_an_invisible_one_escaped() -> None:
    long = _error_for({"fixture_misses": "9" * 10_000, "trial_id": "t-1"})
    assert len(long) < 200 and long.endswith("…"), long
    hidden = _error_for({"fixture_misses": "1\u200b", "trial_id": "t-1"})
    assert "\\u200b" in hidden and "\u200b" not in hidden, hidden
