"""A spec file parsed again in one process (kept by `document_from_bytes`) gives what the
first parse gave: the same value and lines for the same name and bytes, a private copy each
time, and a new parse whenever the bytes or the name differ; errors are raised every time."""

from __future__ import annotations

import pytest

from evalops.errors import InputError
from evalops.registry.load import document_from_bytes

YAML = b"id: t1\nweights:\n  - 1\n  - 2.5\nname: 'x'\n"
EXPECTED = {"id": "t1", "weights": [1, 2.5], "name": "x"}
EXPECTED_LINES = {
    (): 1,
    ("id",): 1,
    ("weights",): 2,
    ("weights", 0): 3,
    ("weights", 1): 4,
    ("name",): 5,
}


def test_the_same_bytes_give_the_same_document_as_a_private_copy() -> None:
    first = document_from_bytes(YAML, "specs/kept.yaml")
    assert first.value == EXPECTED
    assert first.lines == EXPECTED_LINES
    first.value["weights"].append(99)
    first.value["id"] = "changed"
    first.lines[("id",)] = 40
    for _ in range(2):
        again = document_from_bytes(YAML, "specs/kept.yaml")
        assert again.path == "specs/kept.yaml"
        assert again.value == EXPECTED
        assert type(again.value["weights"][0]) is int
        assert type(again.value["weights"][1]) is float
        assert again.lines == EXPECTED_LINES
        again.value["weights"].clear()
        again.lines.clear()


def test_other_bytes_under_the_same_name_are_parsed_again() -> None:
    assert document_from_bytes(b"id: a\n", "specs/same.yaml").value == {"id": "a"}
    assert document_from_bytes(b"id: b\n", "specs/same.yaml").value == {"id": "b"}
    assert document_from_bytes(b"id: a\n", "specs/same.yaml").value == {"id": "a"}


def test_the_same_bytes_under_another_name_are_read_as_that_name() -> None:
    assert document_from_bytes(b"id: a\n", "specs/one.yaml").value == {"id": "a"}
    other = document_from_bytes(b"id: a\n", "specs/two.yaml")
    assert other.path == "specs/two.yaml"
    with pytest.raises(InputError) as refused:
        document_from_bytes(b"id: a\n", "specs/one.json")  # YAML is not JSON
    assert refused.value.file == "specs/one.json"


def test_a_json_document_kept_still_names_its_lines() -> None:
    data = b'{\n  "id": "j",\n  "list": [\n    1\n  ]\n}\n'
    for _ in range(2):
        doc = document_from_bytes(data, "specs/kept.json")
        assert doc.value == {"id": "j", "list": [1]}
        assert doc.line_of(("list", 0)) == 4
        assert doc.line_of(("id",)) == 2


def test_an_invalid_file_is_refused_every_time() -> None:
    data = b"id: a\nid: b\n"
    for _ in range(2):
        with pytest.raises(InputError) as refused:
            document_from_bytes(data, "specs/dup.yaml")
        assert "duplicate key 'id'" in str(refused.value)
        assert refused.value.line == 2
