"""The plain spec checker (evalops/domain/spec_check.py) decides as the pydantic models do.

`validate`, `digest` and `sync` accept a file the plain checker accepts without asking
pydantic, and ask pydantic (the reference, which names the problems) about everything else.
So the one property that matters is that the checker accepts exactly what the models accept;
here it is held to pydantic's own decision:

- its table, model by model, has the models' fields, required ones and defaults;
- on every valid spec file of the repository, the starters `evalops new` writes, the test
  suite's base files, and every malformed-spec fixture of
  tests/integrity/test_malformed_specs.py;
- on documents Hypothesis derives from those by deleting, adding and replacing fields
  (values drawn from every word list of the exported JSON Schemas, boundary numbers,
  strings, and other files' subtrees);

and what a user sees (`definition_from_document`: the definition's digest row, or every
error with its file, line, field and message) is what pydantic alone gives.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from evalops.domain import spec_check, specs
from evalops.domain.classes import CANONICAL_PRECEDENCE
from evalops.domain.limits import MAX_TOOL_CALLS
from evalops.domain.spec_check import REQUIRED, is_valid
from evalops.domain.spec_rules import MIN_FORBIDDEN_WAIVER_STATES
from evalops.errors import InputError
from evalops.registry.definitions import definition_from_document, pydantic_errors
from evalops.registry.load import Document, parse_text
from evalops.services.registry import scaffold
from tests.helpers import MINI_EXECUTION, MINI_GRADERS, MINI_JUDGE, MINI_TASK
from tests.integrity import test_malformed_specs as malformed

REPO = Path(__file__).resolve().parents[2]
SCHEMAS = REPO / "registry" / "schemas"
# The authority's models: not in the plain checker's table (the reference decides).
AUTHORITY_MODELS = {"AuthoritySpec", "Principal", "RoleGrant"}


def pydantic_accepts(value: Any) -> bool:
    """The reference: the model its spec_schema_version names validates it."""
    version = value.get("spec_schema_version") if isinstance(value, dict) else None
    model = specs.SPEC_MODELS.get(version) if isinstance(version, str) else None
    if model is None:
        return False
    try:
        model.model_validate(value)
    except ValidationError:
        return False
    return True


def _strict_models() -> set[str]:
    found: set[str] = set()
    stack: list[type] = [specs.Strict]
    while stack:
        sub: type
        for sub in stack.pop().__subclasses__():
            if sub.__module__ == specs.__name__:
                found.add(sub.__name__)
            stack.append(sub)
    return found


# --------------------------------------------------------------------------- the table


def test_the_table_covers_every_spec_model_but_the_authoritys() -> None:
    names = [model.name for model in spec_check.MODELS]
    assert len(names) == len(set(names))
    assert set(names) == _strict_models() - AUTHORITY_MODELS
    assert {v: m.name for v, m in spec_check.CHECKED.items()} == {
        v: m.__name__ for v, m in specs.SPEC_MODELS.items() if v != "authority/v1"
    }


@pytest.mark.parametrize("model", spec_check.MODELS, ids=lambda m: m.name)
def test_each_row_has_the_models_fields_required_ones_and_defaults(
    model: spec_check.Model,
) -> None:
    reference = getattr(specs, model.name)
    fields = reference.model_fields
    assert list(model.fields) == list(fields)
    assert all(info.alias is None for info in fields.values())  # names are the file's keys
    for name, info in fields.items():
        row = model.fields[name]
        if info.is_required():
            assert row.default is REQUIRED, name
        else:
            assert row.default == info.get_default(call_default_factory=True), name


# --------------------------------------------------------------------------- the corpus


def _load(text: str, name: str = "spec.yaml") -> Any:
    return parse_text(text, name).value


def _valid_corpus() -> list[tuple[str, Any]]:
    docs: list[tuple[str, Any]] = []
    for path in sorted((REPO / "registry").rglob("*")):
        if path.suffix in (".yaml", ".yml", ".json") and "schemas" not in path.parts:
            value = parse_text(path.read_text(encoding="utf-8"), path.name).value
            if isinstance(value, dict) and value.get("spec_schema_version") in specs.SPEC_MODELS:
                docs.append((str(path.relative_to(REPO)), value))
    starters = {
        "task": scaffold.task_yaml("first-task", "first-task-graders"),
        "grader-set": scaffold.grader_set_yaml("first-task-graders"),
        "execution": scaffold.execution_yaml("first-build"),
        "suite": scaffold.suite_yaml("regression/first", "gate-policy", "suite-policy"),
        "gate-policy": scaffold.gate_policy_yaml("gate-policy"),
        "suite-policy": scaffold.suite_policy_yaml("suite-policy"),
    }
    docs += [(f"starter {name}", _load(text)) for name, text in starters.items()]
    docs += [(f"base {name}", _load(text, path)) for name, (path, text) in malformed.BASES.items()]
    judge = {**MINI_GRADERS, "graders": [*MINI_GRADERS["graders"], MINI_JUDGE]}
    minis = {"task": MINI_TASK, "graders": MINI_GRADERS, "judge": judge}
    docs += [(f"helpers {n}", copy.deepcopy(v)) for n, v in minis.items()]
    docs.append(("helpers execution", copy.deepcopy(MINI_EXECUTION)))
    return docs


VALID = _valid_corpus()


def test_the_corpus_holds_every_kind_the_table_checks() -> None:
    kinds = {value["spec_schema_version"] for _, value in VALID}
    assert kinds >= set(spec_check.CHECKED)
    assert len(VALID) >= 40


@pytest.mark.parametrize(("name", "value"), VALID, ids=[name for name, _ in VALID])
def test_every_valid_file_is_accepted_by_both(name: str, value: Any) -> None:
    assert pydantic_accepts(value), name
    if value["spec_schema_version"] in spec_check.CHECKED:
        assert is_valid(value), name


def _malformed_documents() -> list[tuple[str, Document]]:
    """The malformed-spec fixtures the loader reads (the others never reach a model)."""
    out: list[tuple[str, Document]] = []
    for case in malformed.CASES:
        if isinstance(case.text, bytes):
            continue
        try:
            out.append((case.id, parse_text(case.text, case.path)))
        except InputError:
            continue
    return out


MALFORMED = _malformed_documents()


def test_most_malformed_fixtures_reach_the_models() -> None:
    assert len(MALFORMED) >= 40


def _what_a_user_sees(doc: Document) -> Any:
    try:
        definition = definition_from_document(doc)
    except InputError as exc:
        return [(e.file, e.line, e.field, e.message) for e in getattr(exc, "errors", [exc])]
    return definition.digest_row()


def _what_pydantic_says(doc: Document) -> Any:
    """The path every file took before the plain checker: pydantic, then the same
    formatting of its errors; the digest row from the file's value."""
    value = doc.value
    version = value.get("spec_schema_version") if isinstance(value, dict) else None
    if not isinstance(version, str) or version not in specs.SPEC_MODELS:
        return _what_a_user_sees(doc)  # refused before any model: not the checker's business
    try:
        specs.SPEC_MODELS[version].model_validate(value)
    except ValidationError as exc:
        return [(e.file, e.line, e.field, e.message) for e in pydantic_errors(doc, exc)]
    row = _what_a_user_sees(doc)
    assert isinstance(row, dict), row
    return row


@pytest.mark.parametrize(("name", "doc"), MALFORMED, ids=[name for name, _ in MALFORMED])
def test_malformed_fixtures_decide_and_read_the_same(name: str, doc: Document) -> None:
    if isinstance(doc.value, dict):
        assert is_valid(doc.value) is pydantic_accepts(doc.value), name
    assert _what_a_user_sees(doc) == _what_pydantic_says(doc)


# --------------------------------------------------------------------------- Hypothesis


def _schema_words() -> list[Any]:
    """Every `enum` and `const` of the exported JSON Schemas (the models' word lists)."""
    words: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, item in node.items():
                if key == "enum":
                    words.update(w for w in item if isinstance(w, str))
                elif key == "const" and isinstance(item, str):
                    words.add(item)
                else:
                    walk(item)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    for path in sorted(SCHEMAS.glob("*.schema.json")):
        walk(json.loads(path.read_text(encoding="utf-8")))
    return sorted(words)


def _subtrees(value: Any) -> list[Any]:
    out = [value]
    if isinstance(value, dict):
        for item in value.values():
            out += _subtrees(item)
    elif isinstance(value, list):
        for item in value:
            out += _subtrees(item)
    return out


def _paths(value: Any, where: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [where]
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, (*where, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out += _paths(item, (*where, index))
    return out


WORDS = _schema_words()
SUBTREES = [tree for _, value in VALID for tree in _subtrees(value)]
KEYS = sorted({k for tree in SUBTREES if isinstance(tree, dict) for k in tree} | {"extra"})
CANONICAL = list(CANONICAL_PRECEDENCE)

# What the loader can produce: finite numbers within +-(2^53-1), strings without control
# characters; plus the edges of every bound the models declare.
SCALARS = st.one_of(
    st.sampled_from(WORDS),
    st.sampled_from([None, True, False, 0, 1, 2, 3, -1, 10**6, 0.0, 0.05, 0.5, 1.0, 1.5, -0.5]),
    st.sampled_from([-1.0, -1.5, 1e-9, 2.0, 10.0, 0.2, 0.3, 0.7]),
    st.sampled_from(["", "x", "Bad Id", "ok-id", "a/b", "a\n", "x" * 129, "x" * 257, "x" * 4097]),
    st.sampled_from(
        ["2026-09-06T00:00:00Z", "2026-09-06", "2026-09-06T00:00:00", "1969-12-31T23:59:59Z"]
    ),
    st.sampled_from(["sha256:" + "0" * 64, "sha256:00"]),
    st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(st.characters(min_codepoint=32, max_codepoint=0x2FF), max_size=12),
)
VALUES = st.one_of(
    SCALARS,
    st.sampled_from(SUBTREES),
    st.lists(SCALARS, max_size=4),
    st.lists(st.sampled_from(WORDS), max_size=4, unique=True),
    st.just(CANONICAL),
    st.just(list(reversed(CANONICAL))),
    st.dictionaries(st.sampled_from(KEYS + WORDS), SCALARS, max_size=3),
)


@st.composite
def mutated(draw: st.DrawFn) -> Any:
    """A valid document with one to three fields deleted, added or replaced."""
    _, base = draw(st.sampled_from(VALID))
    value = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(value)))
        if not path:
            continue
        parent: Any = value
        for step in path[:-1]:
            parent = parent[step]
        last = path[-1]
        operation = draw(st.sampled_from(["delete", "replace", "replace", "add"]))
        if operation == "delete":
            del parent[last]
        elif operation == "replace":
            parent[last] = copy.deepcopy(draw(VALUES))
        elif isinstance(parent, dict):
            parent[draw(st.sampled_from(KEYS + WORDS))] = copy.deepcopy(draw(VALUES))
        else:
            parent.append(copy.deepcopy(draw(VALUES)))
    return value


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_documents_decide_alike(value: Any) -> None:
    expected = pydantic_accepts(value)
    if value.get("spec_schema_version") == "authority/v1":
        expected = False  # not in the table: left to pydantic
    assert is_valid(value) is expected, value


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_documents_read_as_pydantic_alone_reads_them(value: Any) -> None:
    """Written to a YAML file, read back and defined: the same digest row, or the same
    errors at the same lines and fields, as pydantic alone gives."""
    text = yaml.safe_dump(value, sort_keys=False, allow_unicode=True)
    try:
        doc = parse_text(text, "registry/tasks/mutated.yaml")
    except InputError:
        return  # the loader refuses it first, whichever validates it
    assert _what_a_user_sees(doc) == _what_pydantic_says(doc)


# --------------------------------------------------------------------------- field by field

# The edges of every bound and length the models declare, every type, and the words.
EDGES: list[Any] = [
    None, True, False, 0, 1, 2, 3, 5, -1, 10**6, 2**53 - 1,
    0.0, -0.0, 1e-300, 0.05, 0.2, 0.3, 0.5, 0.7, 0.9999999999, 1.0, 1.0000000001, 1.5, 2.0,
    -0.5, -1.0, -1.0000000001, -2.0, 1e300,
    "", "x", "X", "Bad Id", "ok-id", "a/b", "a.b_c-d", "-a", "a\n", "x" * 128, "x" * 129,
    "x" * 256, "x" * 257, "x" * 4096, "x" * 4097,
    "2026-09-06T00:00:00Z", "2026-09-06T00:00:00+02:00", "2026-09-06", "2026-09-06T00:00:00",
    "1969-12-31T23:59:59Z", "sha256:" + "0" * 64, "sha256:00",
    [], {}, [None], [1], ["x"], [""], ["x", "x"], {"x": 1}, {"x": ""}, {"": "x"}, {"x": None},
]  # fmt: skip


def _edges() -> list[Any]:
    words = _schema_words()
    pool = [*EDGES, *words]
    pool += [[w] for w in words] + [[w, w] for w in words]
    pool += [{w: 1} for w in words] + [{w: 2} for w in words] + [{"x": v} for v in EDGES]
    pool += [list(CANONICAL_PRECEDENCE), list(reversed(CANONICAL_PRECEDENCE))]
    pool.append(list(MIN_FORBIDDEN_WAIVER_STATES)[1:])
    # The longest trajectory a task may expect, and one call more.
    pool += [[{"tool": "t"}] * MAX_TOOL_CALLS, [{"tool": "t"}] * (MAX_TOOL_CALLS + 1)]
    seen: set[str] = set()
    for tree in (t for _, value in VALID for t in _subtrees(value)):
        key = json.dumps(tree, sort_keys=True)
        if isinstance(tree, dict | list) and len(key) < 2000 and key not in seen:
            seen.add(key)
            pool.append(tree)
    return pool


def _samples() -> dict[str, list[dict[str, Any]]]:
    """For each model of the table, the corpus's subtrees it accepts (and `{}` when the
    model has no required field)."""
    found: dict[str, list[dict[str, Any]]] = {m.name: [] for m in spec_check.MODELS}
    trees = [t for _, value in VALID for t in _subtrees(value) if isinstance(t, dict)]
    for model in spec_check.MODELS:
        reference = getattr(specs, model.name)
        for tree in [{}, *trees]:
            try:
                reference.model_validate(tree)
            except ValidationError:
                continue
            if tree not in found[model.name]:
                found[model.name].append(tree)
    return found


SAMPLES = _samples()


def test_every_model_has_a_valid_sample() -> None:
    assert [name for name, trees in SAMPLES.items() if not trees] == []


@pytest.mark.parametrize("model", spec_check.MODELS, ids=lambda m: m.name)
def test_each_field_replaced_by_every_edge_decides_alike(model: spec_check.Model) -> None:
    """Every field of a valid sample (at most three samples a model) set to every edge
    value, and deleted: the row and the pydantic model accept the same."""
    reference = getattr(specs, model.name)
    pool = _edges()
    for sample in SAMPLES[model.name][:3]:
        for field in model.fields:
            variants = [{k: v for k, v in sample.items() if k != field}]
            variants += [{**sample, field: value} for value in pool]
            for variant in variants:
                try:
                    reference.model_validate(variant)
                    expected = True
                except ValidationError:
                    expected = False
                assert model(variant) is expected, (field, variant)
