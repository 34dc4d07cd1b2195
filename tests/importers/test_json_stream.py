"""The streaming reader of Inspect's `.json` logs: the same values as `json.loads`, any chunking."""

from __future__ import annotations

import io
import json
import math
from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalops.importers import json_stream
from evalops.importers.json_stream import JsonStreamError, iter_object

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)
documents = st.dictionaries(
    st.sampled_from(["version", "eval", "samples", "reductions", "é", 'k"ey']), values, max_size=5
)


def read(text: str, chunk: int) -> dict[str, Any]:
    """Stream `text` in chunks of `chunk` bytes, collecting each array as a list."""
    out: dict[str, Any] = {}
    with mock.patch.object(json_stream, "CHUNK", chunk):
        arrays = frozenset({"samples", "reductions"})
        for key, value in iter_object(io.BytesIO(text.encode()), arrays):
            out[key] = list(value) if isinstance(value, Iterator) else value
    return out


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


@settings(max_examples=200, deadline=None)
@given(documents, st.sampled_from([1, 2, 3, 7, 64, 1 << 20]), st.sampled_from([None, 1, 2]))
def test_streaming_equals_loading_whole(
    doc: dict[str, Any], chunk: int, indent: int | None
) -> None:
    # Python writes NaN and Infinity as Inspect's logs hold them; json.loads reads them back.
    text = json.dumps(doc, indent=indent, ensure_ascii=False)
    assert same(read(text, chunk), json.loads(text))


@given(documents.filter(bool), st.sampled_from([1, 5, 1 << 20]))
@settings(max_examples=100, deadline=None)
def test_every_truncation_is_an_error(doc: dict[str, Any], chunk: int) -> None:
    text = json.dumps(doc)
    for cut in range(len(text)):
        with pytest.raises(JsonStreamError):
            read(text[:cut], chunk)


@given(
    documents,
    st.sampled_from(["{}", "x", "[1]", '"s"', "0", "}"]),
    st.sampled_from([1, 5, 1 << 20]),
)
@settings(max_examples=100, deadline=None)
def test_anything_after_the_document_is_an_error(
    doc: dict[str, Any], after: str, chunk: int
) -> None:
    """Two logs concatenated, or a stray byte: json.loads refuses them ("Extra data"), and
    so does the stream, rather than stopping at the first document's end. Whitespace after
    the document is no content."""
    text = json.dumps(doc)
    with pytest.raises(json.JSONDecodeError):
        json.loads(text + "\n" + after)
    with pytest.raises(JsonStreamError, match="content follows the end of the JSON document"):
        read(text + "\n" + after, chunk)
    assert same(read(text + " \n\t\r\n", chunk), json.loads(text))


def test_array_elements_are_yielded_one_at_a_time() -> None:
    text = json.dumps({"eval": {"task": "t"}, "samples": [{"id": i} for i in range(5)], "after": 1})
    with mock.patch.object(json_stream, "CHUNK", 4):
        members = iter_object(io.BytesIO(text.encode()), frozenset({"samples"}))
        assert next(members) == ("eval", {"task": "t"})
        key, samples = next(members)
        assert key == "samples"
        assert next(samples) == {"id": 0}  # nothing after the first element was decoded
        assert list(samples) == [{"id": i} for i in range(1, 5)]
        assert next(members) == ("after", 1)


def test_a_syntax_error_mid_stream_is_reported_where_it_is() -> None:
    text = '{"samples": [{"id": 1}, {"id": 2,, "x": 3}, {"id": 4}]}' + " " * 5000
    with pytest.raises(JsonStreamError, match="invalid JSON") as caught:
        read(text, 8)
    assert caught.value.offset < 40


def test_a_value_nested_beyond_what_python_reads_is_an_error_with_its_place() -> None:
    """Hostile nesting (a sample's metadata thousands of levels deep) is the file's problem,
    named with where it is, never a RecursionError out of the decoder."""
    deep = '{"x":' * 5000 + "{}" + "}" * 5000
    text = '{"version": 2, "samples": [{"id": 1}, ' + deep + "]}"
    with pytest.raises(JsonStreamError) as raised:
        read(text, 1 << 16)
    assert "nested too deeply" in str(raised.value)
    assert raised.value.offset == text.index(deep)
