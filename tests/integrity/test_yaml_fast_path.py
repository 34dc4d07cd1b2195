"""libyaml's fast path gives exactly what the pure-Python reference path gives.

`parse_yaml` (and `_node_lines`, the line map of JSON files) compose with libyaml's C
parser when they can and leave everything else to the pure-Python reader
(evalops/registry/load.py, docs/formats.md). Here every YAML file of the repository, the
starter registry, the YAML examples of the docs, every malformed and hostile spec case of
tests/integrity and generated texts are read both ways: the same Document (values with
their types, every line of `.lines`) or the same error (message, file, line, field), and
for JSON the same line maps. The rest proves the C composer never runs deeper than its
bound, that hostile nesting is refused as cheaply as before, and that without libyaml the
reference path reads everything alike.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import chain
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from evalops.errors import InputError
from evalops.registry import load, yaml_start
from evalops.services.registry.scaffold import (
    AUTHORITY_EXAMPLE,
    authority_yaml,
    starter_registry,
    write_authority_example,
)
from tests.helpers import REPO_ROOT
from tests.integrity.test_hostile_files import SPEC_CASES, assert_refused, measure
from tests.integrity.test_malformed_specs import BASES, CASES, CORE_SCHEMA_TASK

# PyYAML's wheels ship libyaml; in CI its absence is a failure (these tests then fail
# loudly), elsewhere a PyYAML built without it has only the reference path to compare.
pytestmark = pytest.mark.skipif(
    not yaml.__with_libyaml__ and os.environ.get("CI") != "true",
    reason="without libyaml the reference path is the only one: nothing to compare",
)


@contextmanager
def reference_only() -> Iterator[None]:
    """The loader as it reads without libyaml: every text through the pure-Python path."""
    saved = load._LibyamlComposer
    load._LibyamlComposer = None
    try:
        yield
    finally:
        load._LibyamlComposer = saved


def _typed(value: Any) -> Any:
    """`value` with every scalar's type spelled out (1, 1.0 and True differ; key order too)."""
    if isinstance(value, dict):
        return ("dict", [(k, _typed(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("list", [_typed(v) for v in value])
    return (type(value).__name__, repr(value))


def outcome(text: str, path: str = "spec.yaml") -> tuple[Any, ...]:
    """What `parse_yaml` makes of `text`: a Document, an InputError, or whatever else it
    raises today (the reference reader's own errors escape as they are)."""
    try:
        doc = load.parse_yaml(text, path)
    except InputError as exc:
        return ("refused", str(exc), exc.message, exc.file, exc.line, exc.field)
    except Exception as exc:
        return ("raised", type(exc).__name__, str(exc))
    return ("parsed", _typed(doc.value), sorted(doc.lines.items(), key=repr))


def assert_same(text: str, path: str = "spec.yaml") -> tuple[Any, ...]:
    fast = outcome(text, path)
    if load._compose_fast(text) is None:
        # libyaml declined the text, so `parse_yaml` just read it with the reference path:
        # a second reading would compare that path with itself (seconds on large JSON).
        return fast
    with reference_only():
        reference = outcome(text, path)
    assert fast == reference, text[:500]
    return fast


def assert_same_lines(text: str) -> None:
    fast = load._node_lines(text)
    if load._compose_fast(text) is None:
        return  # read by the reference path already, as in `assert_same`
    with reference_only():
        reference = load._node_lines(text)
    assert fast == reference, text[:500]


def _depth(root: yaml.Node) -> int:
    """How many collections of the text enclose one another: the C composer's recursion.

    In document order a node comes first where it is written; a later visit is an alias,
    which the composer does not descend into, so neither does this walk.
    """
    deepest, seen = 0, set()
    stack = [(root, 0)]
    while stack:
        node, depth = stack.pop()
        if id(node) in seen or isinstance(node, yaml.ScalarNode):
            continue
        seen.add(id(node))
        depth += 1
        deepest = max(deepest, depth)
        children = node.value if isinstance(node, yaml.SequenceNode) else [*chain(*node.value)]
        stack.extend((child, depth) for child in reversed(children))
    return deepest


def assert_bound_holds(text: str) -> None:
    """Whatever libyaml composes of `text` nests no deeper than the bound counted for it."""
    try:
        root = load._Libyaml(text).get_single_node()
    except Exception:
        return
    # Plain ints in the assertion: pytest would print the nodes, and an alias bomb's nodes
    # print for ever.
    depth = 0 if root is None else _depth(root)
    bound = load._nesting_bound(text)
    assert depth <= bound, text[:200]


# ------------------------------------------------------------------------ the corpus

_SKIP_DIRS = {".git", ".venv", "node_modules", "__pycache__", ".evalops", ".hypothesis"}


def _repository_files(suffixes: tuple[str, ...]) -> list[Path]:
    return sorted(
        p
        for p in REPO_ROOT.rglob("*")
        if p.suffix in suffixes
        and p.is_file()
        and not _SKIP_DIRS.intersection(p.relative_to(REPO_ROOT).parts)
    )


def _starter_texts(root: Path) -> dict[str, str]:
    """What `evalops init --registry` writes, and the authority `evalops new` writes."""
    written = [w.path for w in starter_registry(root)]
    example = write_authority_example(root)
    texts = {str(p.relative_to(root)): p.read_text(encoding="utf-8") for p in written}
    assert example is not None
    texts["authority.yaml.example"] = example.read_text(encoding="utf-8")
    texts["authority.yaml.example, uncommented"] = re.sub(
        r"^# ?", "", AUTHORITY_EXAMPLE.split("#\n", 1)[1], flags=re.M
    )
    texts["authority.yaml"] = authority_yaml("alice", "ssh-ed25519 AAAAC3Nz alice@laptop")
    return texts


_YAML_BLOCK = re.compile(r"^```ya?ml\n(.*?)^```", re.M | re.S)


def _docs_examples() -> dict[str, str]:
    out = {}
    for md in [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]:
        for i, block in enumerate(_YAML_BLOCK.findall(md.read_text(encoding="utf-8"))):
            out[f"{md.name} example {i}"] = block
    return out


def test_every_yaml_file_of_the_repository_reads_alike_and_takes_the_fast_path() -> None:
    files = _repository_files((".yaml", ".yml"))
    assert len(files) >= 20
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert_same(text, str(path))
        assert_bound_holds(text)
        # The files the speed is for must not fall back to the slow path.
        if "registry" in path.relative_to(REPO_ROOT).parts:
            assert load._compose_fast(text) is not None, path


def test_the_starter_registry_reads_alike_and_takes_the_fast_path(tmp_path: Path) -> None:
    for name, text in _starter_texts(tmp_path).items():
        assert_same(text, name)
        if not name.startswith("authority.yaml.example"):  # all comments: no document
            assert load._compose_fast(text) is not None, name


def test_the_yaml_examples_of_the_docs_read_alike() -> None:
    examples = _docs_examples()
    assert len(examples) >= 10
    for name, text in examples.items():
        assert_same(text, name)
        assert_bound_holds(text)


@pytest.mark.slow  # several CPU seconds: `make test` runs it, `make test-fast` not
def test_json_files_of_the_repository_give_the_same_line_maps() -> None:
    for path in _repository_files((".json",)):
        if path.stat().st_size > 64 * 1024:
            continue  # a recorded report (160 KB) costs seconds in the reference path
        text = path.read_text(encoding="utf-8")
        assert_same_lines(text)
        assert_same(text, str(path))  # JSON is YAML: the same reading both ways too


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_every_malformed_spec_case_reads_alike(case: Any) -> None:
    data = case.text if isinstance(case.text, bytes) else case.text.encode("utf-8")
    try:
        text = load.decode_text(data, case.path)
    except InputError:
        return  # refused before any parser runs
    if case.path.endswith(load.JSON_SUFFIXES):
        assert_same_lines(text)
    assert_same(text, case.path)
    assert_bound_holds(text)


def test_the_base_files_and_the_core_schema_examples_read_alike() -> None:
    for rel, text in [*BASES.values(), ("tasks/core.yaml", CORE_SCHEMA_TASK)]:
        if rel.endswith(load.JSON_SUFFIXES):
            assert_same_lines(text)
        result = assert_same(text, rel)
        assert result[0] == "parsed", result


@pytest.mark.parametrize("case", SPEC_CASES, ids=[c.id for c in SPEC_CASES])
def test_every_hostile_spec_case_reads_alike(case: Any) -> None:
    try:
        text = load.decode_text(case.content, case.name)
    except InputError:
        return
    if case.name.endswith(load.JSON_SUFFIXES):
        assert_same_lines(text)
        return
    assert_same(text, case.name)
    assert_bound_holds(text)


# Each of these was found by the differential search (exhaustive short texts, random
# mutations): libyaml alone reads it into a Document other than the reference's, or
# accepts what the reference refuses. Each must take the reference path.
DIVERGENCES = {
    "tab after a flow comma": "a: [x,\ty]\n",
    "tab after a colon": "a:\tb\n",
    "tab before a comment": "a: 1\t# c\n",
    "byte-order mark at the end": "a: 1\n\ufeff",
    "byte-order mark before a comment": "a: 1\n\ufeff# c\n",
    "comment right after a literal header": "a: |#c\n  x\n",
    "comment right after a folded header": "a: >-#c\n  x\n",
    "question mark in a flow scalar": "a: [x?y]\n",
    "question mark in a flow key": "a: {x?: 1}\n",
    "question mark in a tagged flow scalar": "a: [!!str x?y]\n",
    "empty node tagged ! in a flow sequence": "a: [! ]\n",
    "empty node tagged ! in a flow mapping": "a: {k: ! }\n",
    "empty node tagged ! in a block sequence": "- !\n- 1\n",
    "empty document without a final newline": "--- # nothing",
    "empty document after a NEL": "\x85---",
}


def _libyaml_alone(text: str) -> tuple[Any, ...]:
    """libyaml's composer under the core-schema resolver, without the fast path's guards."""

    class Unguarded(yaml.cyaml.CParser, load._CoreResolver):
        def __init__(self, stream: str) -> None:
            yaml.cyaml.CParser.__init__(self, stream)
            load._CoreResolver.__init__(self)

    try:
        root = Unguarded(text).get_single_node()
        assert root is not None
        doc = load._document(root, "spec.yaml")
    except Exception:
        return ("libyaml refuses it",)
    return ("parsed", _typed(doc.value), sorted(doc.lines.items(), key=repr))


@pytest.mark.parametrize("text", DIVERGENCES.values(), ids=DIVERGENCES.keys())
def test_known_divergences_take_the_reference_path(text: str) -> None:
    with reference_only():
        reference = outcome(text)
    alone = _libyaml_alone(text)
    assert alone[0] == "parsed" and alone != reference  # a real divergence
    assert load._compose_fast(text) is None
    assert assert_same(text) == reference


def test_a_lone_surrogate_and_a_non_printable_character_are_refused_with_their_line() -> None:
    """Characters the reader refuses before any token are an input error naming the
    character and its line, the same on both paths; never a Document."""
    for text, code in (("a: \ud800\n", "D800"), ("a: 1\nb: \x01\n", "0001"),
                       ("a: \ufffe\n", "FFFE"), ("# x\n\na: \x7f\n", "007F")):  # fmt: skip
        result = assert_same(text)
        assert result[0] == "refused", result
        assert f"U+{code}" in result[2] and result[4] == text.count("\n"), result


# ------------------------------------------------------------------ generated texts

_snippets = [
    "\t", "\x01", "\x7f", "\x85", "\u2028", "\u2029", "\ufeff", "\ufffe", "\ud800", "\x9f",
    "'", '"', "&a ", "*a", "&b ", "*b", "!!str ", "!!int ", "!!float ", "!!null ", "!!bool ",
    "!!binary ", "!custom ", "! ", "!", "? ", "?", ": ", ":", "- ", "-", "[", "]", "{", "}",
    ",", "#", " #", "---\n", "...\n", "%YAML 1.1\n", "%TAG !e! tag:e,2000:\n", "\\", "\\x41",
    "\\u00e9", "\\U0001F600", "\\ud800", "\\/", "\\N", "\\_", "\\t", "\\0", "\\e", "0o17",
    "0x1F", "1e400", ".nan", "-.inf", "9" * 25, "1_000", "+12", "1.", ".5", "|", ">-", "|2",
    "|#", "\n", " ", "\r\n", "\r", "a: 1\n", "a: 2\n", "<<: ", "é", "😀", "~", "null",
    "true", "on", "2026-09-06",
]  # fmt: skip

_scalar_texts = st.text(max_size=6) | st.sampled_from(_snippets)
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**64), 2**64)
    | st.floats(allow_nan=True, allow_infinity=True)
    | _scalar_texts
)
_values = st.recursive(
    _scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(_scalar_texts | st.integers(0, 3), children, max_size=4)
    ),
    max_leaves=16,
)
_dump_options = st.fixed_dictionaries(
    {
        "default_flow_style": st.sampled_from([False, True, None]),
        "allow_unicode": st.booleans(),
        "width": st.sampled_from([20, 80, 10_000]),
        "indent": st.sampled_from([2, 3, 4]),
    }
)
# (where, as a fraction of the text; what) insertions, and replacements of one character.
_mutations = st.lists(
    st.tuples(st.floats(0, 1), st.sampled_from(_snippets), st.booleans()), max_size=4
)


def _dump(value: Any, options: dict[str, Any]) -> str:
    try:
        return yaml.safe_dump(value, sort_keys=False, **options)
    except Exception:  # a value the emitter refuses (a lone surrogate): its repr instead
        return f"v: {value!r}\n"


def _mutate(text: str, mutations: list[tuple[float, str, bool]]) -> str:
    for where, snippet, replace in mutations:
        at = min(int(where * len(text)), len(text))
        text = text[:at] + snippet + text[at + 1 if replace else at :]
    return text


@pytest.mark.slow  # several CPU seconds: `make test` runs it, `make test-fast` not
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_values, _dump_options, _mutations)
def test_generated_texts_read_alike(
    value: Any, options: dict[str, Any], mutations: list[tuple[float, str, bool]]
) -> None:
    text = _mutate(_dump(value, options), mutations)
    result = assert_same(text)
    event(f"{result[0]}, {'fast path' if load._compose_fast(text) else 'reference path'}")
    assert_bound_holds(text)


@pytest.mark.slow  # several CPU seconds: `make test` runs it, `make test-fast` not
@settings(max_examples=300, deadline=None)
@given(_values, st.sampled_from([None, 0, 2]), st.booleans())
def test_json_texts_give_the_same_line_maps(value: Any, indent: int | None, ascii: bool) -> None:
    """`_node_lines` reads what `json.loads` accepted (NaN, 1e400, escapes of surrogates
    and control characters, duplicate keys written by hand): the same maps both ways."""
    try:
        text = json.dumps(value, indent=indent, ensure_ascii=ascii)
    except (TypeError, ValueError):
        return
    assert_same_lines(text)
    if isinstance(value, dict) and value:
        key = json.dumps(str(next(iter(value))))
        assert_same_lines(text.replace("{", "{" + key + ": 1, ", 1))  # a duplicate key


_keys = st.sampled_from(["a", "b", "k", "id", "x y", "0", "on"])
_nested = st.recursive(
    st.none() | st.integers(-3, 3) | st.sampled_from(["s", "1.5", "", "a b"]),
    lambda children: (
        st.lists(children, min_size=1, max_size=3)
        | st.dictionaries(_keys, children, min_size=1, max_size=3)
    ),
    max_leaves=40,
)


@settings(max_examples=300, deadline=None)
@given(_nested, _dump_options, st.sampled_from(["", "&x ", "!!map ", "- ", "? "]))
def test_valid_nested_documents_read_alike_and_within_the_bound(
    value: Any, options: dict[str, Any], prefix: str
) -> None:
    """Valid documents in every style (mostly on the fast path), nested as deep as the
    generator goes, with a prefix that makes a compact or explicit-key form."""
    text = _dump({"root": value, "ok": [1, 2.0, True, None]}, options)
    for candidate in (text, prefix + text.replace("\n", "\n" + " " * len(prefix))):
        result = assert_same(candidate)
        if candidate == text:
            assert result[0] == "parsed", result
        assert_bound_holds(candidate)


# ------------------------------------------------------------------- depth and crashes


def _indented_mappings(levels: int) -> str:
    return "".join(f"{'  ' * i}k{i}:\n" for i in range(levels)) + "  " * levels + "leaf: 1\n"


DEEP_BLOCKS = {
    "compact sequences, 100,000 levels on one line": "- " * 100_000 + "x\n",
    "compact explicit keys, 100,000 levels": "? " * 100_000 + "x\n",
    "sequences inside mappings, 1,400 levels": "".join("  " * i + "- a:\n" for i in range(700)),
    "indented mappings, 700 levels": _indented_mappings(700),
    "mixed block and flow": "- " * 30_000 + "[" * 900 + "]" * 900 + "\n",
}


@pytest.mark.parametrize("text", DEEP_BLOCKS.values(), ids=DEEP_BLOCKS.keys())
def test_deep_block_nesting_never_reaches_the_c_composer(text: str) -> None:
    assert len(text.encode()) <= load.MAX_SPEC_BYTES  # what a spec file may hold
    assert load._nesting_bound(text) > load.FAST_NESTING_BOUND
    assert load._compose_fast(text) is None
    result = assert_same(text)
    assert result[0] == "refused" and "nested deeper than 64 levels" in result[2], result


def test_the_nesting_bound_holds_up_to_the_limit() -> None:
    """Texts nested as deep as the bound lets through (and just past it) in every form the
    bound counts: the real depth never exceeds it."""
    n = load.FAST_NESTING_BOUND
    texts = [
        "- " * n + "x\n",
        "? " * n + "x\n",
        "[" * (n // 2) + "]" * (n // 2),
        "{a: " * (n // 2) + "}" * (n // 2),
        "[a: " * (n // 3) + "]" * (n // 3),
        "".join("  " * i + "- a:\n" for i in range(n // 4)),
        _indented_mappings(n // 2),
        "- " * (n // 2) + "[" * (n // 4) + "]" * (n // 4),
    ]
    for text in texts:
        assert_bound_holds(text)
        assert_bound_holds(text + "\n" + "- " * 10)


_STACK_PROBE = """
import sys, threading
from evalops.registry import load, yaml_start
results = []
def run():
    for text in TEXTS:
        assert load._compose_fast(text) is not None or load._nesting_bound(text) > BOUND
        try:
            load.parse_yaml(text, "deep.yaml")
        except Exception as exc:
            results.append(type(exc).__name__)
threading.stack_size(512 * 1024)
thread = threading.Thread(target=run)
thread.start()
thread.join()
print(",".join(results))
"""


def test_the_deepest_text_the_bound_lets_through_parses_in_a_small_thread_stack() -> None:
    """The C composer recurses on the C stack (about 340 bytes a level): at the bound it
    fits a 512 KiB thread stack, where a crash would kill the child (tested in one)."""
    n = load.FAST_NESTING_BOUND
    texts = ["- " * n + "x\n", "? " * n + "x\n", "{a: " * (n // 2) + "}" * (n // 2)]
    for text in texts:
        assert load._nesting_bound(text) <= n
    code = _STACK_PROBE.replace("TEXTS", repr(texts)).replace("BOUND", str(n))
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "InputError,InputError,InputError", done.stdout


def test_a_deep_block_nested_file_is_exit_2_cheaply(synced: Path) -> None:
    """A 1 MiB file of compact block sequences (500,000 levels on one line) is refused
    within the hostile-file budget (tests/integrity/test_hostile_files.py), by the
    reference path, without reaching the C composer."""
    name = "deep.yaml"
    text = "- " * (load.MAX_SPEC_BYTES // 2 - 2) + "x\n"
    assert len(text) <= load.MAX_SPEC_BYTES
    (synced / "registry" / "tasks" / name).write_text(text, encoding="utf-8")
    subprocess.run(["git", "add", "-A"], cwd=synced, check=True)
    subprocess.run(["git", "commit", "-qm", "deep"], cwd=synced, check=True)
    result = measure("--json", "validate", cwd=synced)
    assert_refused(result, name, 1, None)
    assert "nested deeper than 64 levels" in json.loads(result.stdout)["error"]["message"]


def test_the_c_path_runs_in_a_thread_while_another_parses() -> None:
    """The composer keeps no state between calls: two threads parse alike."""
    text = (REPO_ROOT / "registry" / "tasks" / "support-refund-in-order.yaml").read_text(
        encoding="utf-8"
    )
    expected = outcome(text)
    seen: list[tuple[Any, ...]] = []

    def run() -> None:
        seen.extend(outcome(text) for _ in range(20))

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == [expected] * 40


# ------------------------------------------------------------------- without libyaml

_WITHOUT_LIBYAML = """
import json, sys
sys.modules["yaml._yaml"] = None  # as if PyYAML were built without libyaml
import yaml
assert not yaml.__with_libyaml__
from evalops.registry import load, yaml_start
assert load._LibyamlComposer is None
from tests.integrity.test_yaml_fast_path import outcome
texts = json.load(open(sys.argv[1], encoding="utf-8"))
print(json.dumps([repr(outcome(text, name)) for name, text in texts]))
"""


def test_without_libyaml_the_reference_path_reads_everything_alike(tmp_path: Path) -> None:
    texts = [
        (str(p.relative_to(REPO_ROOT)), p.read_text(encoding="utf-8"))
        for p in _repository_files((".yaml", ".yml"))
    ]
    texts += [(c.path, c.text) for c in CASES if isinstance(c.text, str)]
    texts += list(DIVERGENCES.items())
    (tmp_path / "texts.json").write_text(json.dumps(texts), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_LIBYAML, str(tmp_path / "texts.json")],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    without = json.loads(done.stdout)
    assert without == [repr(outcome(text, name)) for name, text in texts]
    assert any(load._compose_fast(text) is not None for _, text in texts)  # not vacuous


def test_floats_and_integers_keep_their_types_on_the_fast_path() -> None:
    text = "a: 1\nb: 1.0\nc: true\nd: 0o17\ne: 0x1F\nf: 1e3\ng: -0.0\nh: ~\ni: '1'\n"
    assert load._compose_fast(text) is not None
    value = load.parse_yaml(text, "t.yaml").value
    assert [type(v).__name__ for v in value.values()] == [
        "int", "float", "bool", "int", "int", "float", "float", "NoneType", "str",
    ]  # fmt: skip
    assert value["d"] == 15 and value["e"] == 31 and math.copysign(1, value["g"]) == -1


def test_the_quick_non_printable_pattern_matches_pyyamls_exactly() -> None:
    """evalops/registry/yaml_start.py gives PyYAML's reader an equivalent of its
    NON_PRINTABLE pattern that compiles faster: every code point, one by one."""
    every = "".join(map(chr, range(0x110000)))
    theirs = re.compile(yaml_start.PYYAML_NON_PRINTABLE)
    ours = re.compile(yaml_start.NON_PRINTABLE)
    assert [m.start() for m in ours.finditer(every)] == [m.start() for m in theirs.finditer(every)]


def test_pyyaml_reads_with_the_quick_pattern_and_re_compile_is_restored() -> None:
    """In a fresh interpreter the loader's import of PyYAML takes the quick pattern (this
    fails when a PyYAML release changes its own: then update or drop yaml_start), and
    `re.compile` is the standard library's again afterwards."""
    script = (
        "import re, json\n"
        "compile_ = re.compile\n"
        "import evalops.registry.load\n"
        "import yaml.reader\n"
        "print(json.dumps([yaml.reader.Reader.NON_PRINTABLE.pattern, re.compile is compile_]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    assert json.loads(done.stdout) == [yaml_start.NON_PRINTABLE, True]
