"""Strict YAML/JSON loading (docs/formats.md).

YAML is read with the YAML 1.2 core schema and nothing more: `2026-09-06`, `on` and `yes`
stay strings, duplicate keys, non-string keys and tags other than the core ones are errors.
JSON is read with the standard library, refusing duplicate keys and NaN/Infinity. Both
produce the same plain JSON value plus a map from field path to line number, so that every
later error (pydantic's included) can name file, line and field.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import Any

from evalops.domain.canonical import MAX_SAFE_INTEGER
from evalops.errors import InputError
from evalops.registry.yaml_start import yaml

JsonPath = tuple[str | int, ...]

# Limits, so that no file can exhaust the machine (docs/formats.md).
MAX_ALIAS_NODES = 10_000
MAX_DEPTH = 64
MAX_SPEC_BYTES = 1024 * 1024

YAML_SUFFIXES = (".yaml", ".yml")
JSON_SUFFIXES = (".json",)
SPEC_SUFFIXES = YAML_SUFFIXES + JSON_SUFFIXES

_CORE = "tag:yaml.org,2002:"
_PLAIN = "tag:evalops:plain"  # an untagged plain scalar, resolved by the core schema below
_ALLOWED_TAGS = {_CORE + t for t in ("str", "int", "float", "bool", "null", "map", "seq")}
_CORE_STR, _CORE_SEQ, _CORE_MAP = _CORE + "str", _CORE + "seq", _CORE + "map"

# YAML 1.2.2 core schema, section 10.3.2.
_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_BOOL_TRUE = re.compile(r"^(?:true|True|TRUE)$")
_BOOL_FALSE = re.compile(r"^(?:false|False|FALSE)$")
_INT10 = re.compile(r"^[-+]?[0-9]+$")
_INT8 = re.compile(r"^0o[0-7]+$")
_INT16 = re.compile(r"^0x[0-9a-fA-F]+$")
_FLOAT = re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$")
_INF = re.compile(r"^[-+]?\.(?:inf|Inf|INF)$")
_NAN = re.compile(r"^\.(?:nan|NaN|NAN)$")


@dataclass
class Document:
    """A parsed file: its JSON value and the line of every field path (1-based).

    For JSON the line map is built only when an error needs it (`lines_from`), so reading
    valid records stays fast.
    """

    path: str
    value: Any
    _lines: dict[JsonPath, int] | None = field(default=None, repr=False)
    lines_from: str | None = field(default=None, repr=False)

    @property
    def lines(self) -> dict[JsonPath, int]:
        if self._lines is None:
            self._lines = _node_lines(self.lines_from)[0] if self.lines_from else {}
        return self._lines

    def line_of(self, loc: JsonPath) -> int:
        """The line of the deepest known prefix of `loc` (a missing field -> its parent)."""
        for end in range(len(loc), -1, -1):
            line = self.lines.get(tuple(loc[:end]))
            if line is not None:
                return line
        return 1


def format_path(loc: JsonPath) -> str:
    """`contract.trajectory.calls[1].tool` style, as users write it."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


class _CoreResolver(yaml.resolver.BaseResolver):
    """Marks untagged plain scalars for core-schema resolution; no YAML 1.1 guessing."""

    def resolve(self, kind: type, value: Any, implicit: tuple[bool, bool]) -> str:
        if kind is yaml.ScalarNode:
            if implicit[0]:
                return _PLAIN
            return _CORE + "str"
        if kind is yaml.SequenceNode:
            return _CORE + "seq"
        return _CORE + "map"


class _Composer(
    yaml.reader.Reader,
    yaml.scanner.Scanner,
    yaml.parser.Parser,
    yaml.composer.Composer,
    _CoreResolver,
):
    def __init__(self, stream: str) -> None:
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        yaml.composer.Composer.__init__(self)
        _CoreResolver.__init__(self)


def _check_number(value: int | float, where: JsonPath, path: str, line: int) -> None:
    if isinstance(value, bool):
        return
    if isinstance(value, int) and abs(value) > MAX_SAFE_INTEGER:
        raise InputError(f"integer {value} is beyond +-(2^53-1)", path, line, format_path(where))
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(f"number {value} is not finite", path, line, format_path(where))


# Control characters other than tab and newline (docs/formats.md); DEL and C1 too.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# A lone surrogate (U+D800 to U+DFFF): a regular expression, not a loop over characters in
# Python, as every string of every spec file is checked.
_SURROGATE = re.compile("[\ud800-\udfff]")


def _check_string(value: str, where: JsonPath, path: str, line: int) -> None:
    if value.isascii() and value.isprintable():
        return  # printable ASCII: no surrogate, no control character (the common case, in C)
    if _SURROGATE.search(value) is not None:
        raise InputError(
            "string holds a lone surrogate (not valid Unicode)", path, line, format_path(where)
        )
    found = _CONTROL.search(value)
    if found is not None:
        raise InputError(
            f"string holds the control character U+{ord(found.group()):04X} (only tab and "
            "newline are allowed)",
            path,
            line,
            format_path(where),
        )


# The first characters a null, bool, int or float of the core schema (or an infinity or NaN)
# can start with: any other plain scalar is a string, decided without a regular expression.
_NOT_ONLY_TEXT = frozenset("~nNtTfF+-.0123456789")


def _resolve_plain(text: str, where: JsonPath, path: str, line: int) -> Any:
    if text and text[0] not in _NOT_ONLY_TEXT:
        return text
    if _NULL.match(text):
        return None
    if _BOOL_TRUE.match(text):
        return True
    if _BOOL_FALSE.match(text):
        return False
    if _INT10.match(text):
        if len(text.lstrip("+-")) > 17:
            raise InputError(
                f"integer with {len(text.lstrip('+-'))} digits is beyond +-(2^53-1)",
                path,
                line,
                format_path(where),
            )
        return int(text, 10)
    if _INT8.match(text):
        return int(text[2:], 8)
    if _INT16.match(text):
        return int(text[2:], 16)
    if _FLOAT.match(text):
        return float(text)
    if _INF.match(text) or _NAN.match(text):
        raise InputError(f"number {text} is not finite", path, line, format_path(where))
    return text


_TAG_TYPES: dict[str, type | tuple[type, ...]] = {
    _CORE + "int": int,
    _CORE + "float": (int, float),
    _CORE + "bool": bool,
    _CORE + "null": type(None),
}


def _resolve_tagged(node: yaml.Node, where: JsonPath, path: str, line: int) -> Any:
    tag, text = node.tag, node.value
    if tag == _CORE + "str":
        return text
    value = _resolve_plain(text, where, path, line)
    expected = _TAG_TYPES[tag]
    ok = isinstance(value, expected) and not (tag != _CORE + "bool" and isinstance(value, bool))
    if not ok:
        raise InputError(
            f"value {text!r} does not match its tag {tag}", path, line, format_path(where)
        )
    return float(value) if tag == _CORE + "float" else value


class _Converter:
    def __init__(self, path: str) -> None:
        self.path = path
        self.lines: dict[JsonPath, int] = {}
        self._active: set[int] = set()
        self._seen: set[int] = set()
        self._aliased = 0
        self._alias_depth = 0

    def _limits(self, node: yaml.Node, where: JsonPath, line: int) -> bool:
        """Depth and alias-expansion limits; True when `node` is an alias re-expansion."""
        if len(where) > MAX_DEPTH:
            raise InputError(
                f"nested deeper than {MAX_DEPTH} levels", self.path, line, format_path(where)
            )
        alias = id(node) in self._seen
        self._seen.add(id(node))
        if alias or self._alias_depth:
            self._aliased += 1
            if self._aliased > MAX_ALIAS_NODES:
                raise InputError(
                    f"YAML aliases expand to more than {MAX_ALIAS_NODES} nodes",
                    self.path,
                    line,
                    format_path(where),
                )
        return alias

    def convert(self, node: yaml.Node, where: JsonPath, *, record: bool = True) -> Any:
        line = node.start_mark.line + 1
        alias = self._limits(node, where, line)
        self._alias_depth += alias
        try:
            return self._convert(node, where, line, record=record)
        finally:
            self._alias_depth -= alias

    def _convert(self, node: yaml.Node, where: JsonPath, line: int, *, record: bool) -> Any:
        if record:
            self.lines.setdefault(where, line)
        if node.tag not in _ALLOWED_TAGS and node.tag != _PLAIN:
            raise InputError(
                f"tag {node.tag!r} is not allowed (only the YAML core schema)",
                self.path,
                line,
                format_path(where),
            )
        if id(node) in self._active:
            raise InputError("recursive alias", self.path, line, format_path(where))
        if isinstance(node, yaml.ScalarNode):
            value: Any
            if node.tag == _PLAIN:
                value = _resolve_plain(node.value, where, self.path, line)
            else:
                value = _resolve_tagged(node, where, self.path, line)
            if isinstance(value, str):
                _check_string(value, where, self.path, line)
            elif isinstance(value, int | float):
                _check_number(value, where, self.path, line)
            return value
        self._active.add(id(node))
        try:
            if isinstance(node, yaml.SequenceNode):
                return [self.convert(item, (*where, i)) for i, item in enumerate(node.value)]
            assert isinstance(node, yaml.MappingNode)
            return self._mapping(node, where)
        finally:
            self._active.discard(id(node))

    def _mapping(self, node: yaml.MappingNode, where: JsonPath) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key_line = key_node.start_mark.line + 1
            key = self.convert(key_node, where, record=False)
            if not isinstance(key, str):
                raise InputError(
                    f"mapping key {key_node.value!r} is not a string (quote it)",
                    self.path,
                    key_line,
                    format_path(where),
                )
            if key in out:
                raise InputError(
                    f"duplicate key {key!r}", self.path, key_line, format_path((*where, key))
                )
            self.lines[(*where, key)] = key_line
            out[key] = self.convert(value_node, (*where, key))
        return out


# Flow collections this deep are refused before the (recursive, pure-Python) composer runs:
# it would spend seconds descending 10,000 levels only to fail. Far above MAX_DEPTH, so the
# composer's own check still names the nesting of anything a person writes.
FLOW_DEPTH_PRECHECK = 1000


_QUOTED_OR_COMMENT = re.compile(
    r'"(?:[^"\\]|\\.)*"|\'(?:[^\']|\'\')*\'|(?:^|(?<=[ \t]))#[^\n]*', re.MULTILINE
)
_BRACKET = re.compile(r"[\[\]{}]")


def _flow_depth_exceeds(text: str, limit: int) -> bool:
    """Whether `[`/`{` nest deeper than `limit` outside quoted scalars and comments."""
    if text.count("[") + text.count("{") <= limit:
        return False  # cannot nest that deep: the common case, decided at C speed
    depth = 0
    for match in _BRACKET.finditer(_QUOTED_OR_COMMENT.sub("", text)):
        depth = depth + 1 if match.group() in "[{" else max(depth - 1, 0)
        if depth > limit:
            return True
    return False


# --- the libyaml fast path --------------------------------------------------------------
#
# Why: speed. libyaml's C parser composes the same nodes as the pure-Python `_Composer`
# several times faster (the repository's 20 YAML files: 9 ms of CPU instead of 54), which
# `evalops validate` pays at every start (benchmarks/RESULTS.md, "P6 for validate");
# `_Converter` applies the same core schema and limits to them. The pure-Python path stays
# the reference: any error at all, and any text the two readers are known to read apart,
# is parsed again by it, so values, lines and messages never depend on which parser ran
# (docs/formats.md). The differences were found by the differential tests of
# tests/integrity/test_yaml_fast_path.py; `_fast_path_unsure` sends the ones visible in the
# text to the reference path, `_Libyaml.resolve` and `_compose_fast` the ones visible only
# once parsed.

# libyaml composes recursively in C, about 340 bytes of stack a level (not bounded by
# Python's recursion limit): text that could nest deeper than this (an upper bound counted
# by `_nesting_bound`, not the real depth) is left to the pure-Python composer. Anything
# past MAX_DEPTH is refused anyway; 500 levels take under 200 KB of stack.
FAST_NESTING_BOUND = 500

# Tabs (libyaml skips them between tokens where PyYAML refuses them), byte-order marks
# (libyaml skips one at the start of any line, PyYAML only at the start of the stream) and
# a comment right after a block scalar's header (`|#`, accepted by libyaml only). NEL, LS
# and PS, which both read as line breaks (no difference found), are rare enough to leave
# to the reference too, as line numbers are what the loader promises.
_FAST_UNSURE_CHARS = re.compile("[\t\x85\u2028\u2029\ufeff]")
_FAST_UNSURE_HEADER = re.compile(r"[|>][-+0-9]*#")


class _FastUnsure(Exception):
    """A construct libyaml and the reference reader read differently."""


_LibyamlComposer: Callable[[str], Any] | None = None
if yaml.__with_libyaml__:  # else the reference path reads everything
    from yaml._yaml import CParser

    class _Libyaml(CParser, _CoreResolver):
        """libyaml's composer (C) under the same core-schema resolver as `_Composer`."""

        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            _CoreResolver.__init__(self)

        def resolve(self, kind: type, value: Any, implicit: Any) -> str:
            # `_CoreResolver.resolve`, inlined: libyaml calls it for every node.
            if kind is yaml.ScalarNode:
                if implicit[0]:
                    return _PLAIN
                if not implicit[1]:
                    # Only an empty node tagged `!`: libyaml makes it a string, PyYAML null.
                    raise _FastUnsure
                return _CORE_STR
            return _CORE_SEQ if kind is yaml.SequenceNode else _CORE_MAP

    _LibyamlComposer = _Libyaml


def _fast_path_unsure(text: str) -> bool:
    """Whether `text` must take the reference path before libyaml even sees it."""
    if "\t" in text or ("#" in text and _FAST_UNSURE_HEADER.search(text) is not None):
        return True
    if not text.isascii() and _FAST_UNSURE_CHARS.search(text) is not None:
        return True
    return _nesting_bound(text) > FAST_NESTING_BOUND


def _nesting_bound(text: str) -> int:
    """An upper bound on how many collections of `text` can enclose one another, whatever
    libyaml makes of it.

    Every collection starts at its own indicator (`[`, `{`, `-`, `?`, or the `:` after a
    key), so their count bounds the depth. Where that is too coarse: nested block
    collections sit at strictly increasing columns (a sequence may share its mapping's),
    so at most two per column of the longest line, and flow collections (each `[` may
    hold one implicit single-pair mapping) come on top.
    """
    opens = text.count("[")
    braces = text.count("{")
    by_count = opens + braces + text.count("-") + text.count("?") + text.count(":")
    if by_count <= FAST_NESTING_BOUND:
        return by_count
    longest = max(map(len, text.split("\n")))
    return min(by_count, 2 * (longest + 1) + 2 * opens + braces)


def _compose_fast(text: str) -> yaml.Node | None:
    """The root node as libyaml composes it, or None: no libyaml, text left to the
    reference path, no document, or any error at all (the reference path names it)."""
    if _LibyamlComposer is None or _fast_path_unsure(text):
        return None
    try:
        root: yaml.Node | None = _LibyamlComposer(text).get_single_node()
    except Exception:
        return None
    if isinstance(root, yaml.ScalarNode):
        # libyaml ends the stream on a line of its own, so an empty document's null can be
        # a line lower. A scalar document is never a valid spec: not worth a finer rule.
        return None
    if root is not None and "?" in text and _plain_question_in_flow(root):
        return None
    return root


def _plain_question_in_flow(root: yaml.Node) -> bool:
    """Whether a plain scalar in a flow collection holds `?`: PyYAML ends the scalar there
    (and reads a key, or fails), libyaml reads on."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen or not isinstance(node, yaml.nodes.CollectionNode):
            continue
        seen.add(id(node))
        items = node.value if isinstance(node, yaml.SequenceNode) else list(chain(*node.value))
        if node.flow_style and any(
            isinstance(n, yaml.ScalarNode) and n.style == "" and "?" in n.value for n in items
        ):
            return True
        stack.extend(items)
    return False


def parse_yaml(text: str, path: str) -> Document:
    """Parse one YAML document under the core schema.

    libyaml composes the nodes when it can (see `_compose_fast`); any error, and anything
    libyaml reads differently, is left to the pure-Python reference path, so that messages,
    lines and fields are the reference's byte for byte.
    """
    if _flow_depth_exceeds(text, FLOW_DEPTH_PRECHECK):
        raise InputError(f"YAML is nested deeper than {MAX_DEPTH} levels", path, 1)
    root = _compose_fast(text)
    if root is not None:
        try:
            if "*" not in text:  # no alias: every node is met once
                return _document_without_aliases(root, path)
            return _document(root, path)
        except Exception:
            pass  # the reference path below names the error
    return _parse_yaml_reference(text, path)


# The parser's words for the usual slips, and where to look: it reports where it noticed,
# often a line after the one to fix.
_YAML_HINTS = (
    ("mapping values are not allowed", "a ': ' inside an unquoted value (quote it) or a "
     "line indented deeper than its key: look at this line and the one above"),
    ("could not find expected ':'", "a key without its ':', often on the line above"),
    ("cannot start any token", "a tab or a reserved character (@, `) opens the value: YAML "
     "indents with spaces, and such a value needs quotes"),
    ("did not find expected key", "an item indented unlike its neighbours, on this line or "
     "the one above"),
)  # fmt: skip


def _yaml_hint(problem: str) -> str:
    hint = next((h for words, h in _YAML_HINTS if words in problem), None)
    return f"; likely {hint}" if hint else ""


def _parse_yaml_reference(text: str, path: str) -> Document:
    """The pure-Python reader: the reference for every value, line and error message."""
    try:
        loader = _Composer(text)  # the reader refuses characters YAML does not allow
    except yaml.reader.ReaderError as exc:
        raise InputError(
            f"invalid YAML: the character U+{exc.character:04X} is not allowed in YAML",
            path,
            text.count("\n", 0, max(exc.position, 0)) + 1,
        ) from None
    try:
        try:
            node = loader.get_single_node()
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            line = mark.line + 1 if mark is not None else None
            problem = exc.problem or exc.context or "invalid YAML"
            raise InputError(f"invalid YAML: {problem}{_yaml_hint(problem)}", path, line) from None
        except yaml.YAMLError as exc:
            raise InputError(f"invalid YAML: {exc}", path) from None
        except RecursionError:
            raise InputError(f"YAML is nested deeper than {MAX_DEPTH} levels", path, 1) from None
    finally:
        loader.dispose()
    if node is None:
        raise InputError("the file holds no document", path, 1)
    return _document(node, path)


def _document_without_aliases(root: yaml.Node, path: str) -> Document:
    """What `_document` gives for a tree without aliases (no node met twice), in one plain
    recursion (a start-up optimization: `validate` reads every file through it); anything
    it does not take as is, it raises on, and the reference path then names the problem."""
    lines: dict[JsonPath, int] = {}
    value = _tree(root, (), lines, path)
    return Document(path, value, lines)


def _tree(node: yaml.Node, where: JsonPath, lines: dict[JsonPath, int], path: str) -> Any:
    """`_Converter.convert` without the alias bookkeeping, the same values and lines."""
    line = node.start_mark.line + 1
    if len(where) > MAX_DEPTH:
        raise _FastUnsure
    lines.setdefault(where, line)
    kind = node.__class__  # libyaml makes exactly these three classes of node
    if kind is _ScalarNode:
        return _scalar(node, where, path, line)
    if node.tag not in _ALLOWED_TAGS:
        raise _FastUnsure
    if kind is _SequenceNode:
        return [_tree(item, (*where, i), lines, path) for i, item in enumerate(node.value)]
    if kind is not _MappingNode:
        raise _FastUnsure
    out: dict[str, Any] = {}
    for key_node, value_node in node.value:
        if key_node.__class__ is not _ScalarNode:
            raise _FastUnsure  # a collection as a key: never a string
        key = _scalar(key_node, where, path, key_node.start_mark.line + 1)
        if not isinstance(key, str) or key in out:
            raise _FastUnsure
        lines[(*where, key)] = key_node.start_mark.line + 1
        out[key] = _tree(value_node, (*where, key), lines, path)
    return out


def _scalar(node: yaml.Node, where: JsonPath, path: str, line: int) -> Any:
    """One scalar's value, checked as `_Converter._convert` checks it."""
    if node.tag == _PLAIN:
        value = _resolve_plain(node.value, where, path, line)
    elif node.tag in _ALLOWED_TAGS:
        value = _resolve_tagged(node, where, path, line)
    else:
        raise _FastUnsure
    if value.__class__ is str:
        _check_string(value, where, path, line)
    elif isinstance(value, int | float):
        _check_number(value, where, path, line)
    return value


_ScalarNode, _SequenceNode, _MappingNode = yaml.ScalarNode, yaml.SequenceNode, yaml.MappingNode


def _document(root: yaml.Node, path: str) -> Document:
    converter = _Converter(path)
    try:
        value = converter.convert(root, ())
    except RecursionError:
        raise InputError(f"YAML is nested deeper than {MAX_DEPTH} levels", path, 1) from None
    return Document(path, value, converter.lines)


class _TooDeep(Exception):
    """Nodes nested deeper than the reference composer is sure to reach."""


def _node_lines(text: str) -> tuple[dict[JsonPath, int], dict[JsonPath, int]]:
    """Lines of every path, and of every repeated key, from YAML nodes without resolving values.

    JSON is YAML 1.2 flow syntax, so composing it gives positions even where the values
    themselves are invalid (NaN, 1e400, lone surrogates).
    """
    root = _compose_fast(text)
    if root is not None:
        # Past MAX_DEPTH + 1 levels the reference composer may run out of recursion and
        # give no lines at all; such text takes the reference path to give the same.
        try:
            return _lines_of(root, MAX_DEPTH + 1)
        except _TooDeep:
            pass
    try:
        loader = _Composer(text)  # the reader refuses some characters JSON allows
    except yaml.YAMLError:
        return {}, {}
    try:
        root = loader.get_single_node()
    except (yaml.YAMLError, RecursionError):
        return {}, {}
    finally:
        loader.dispose()
    return _lines_of(root, None)


def _lines_of(
    root: yaml.Node | None, max_depth: int | None
) -> tuple[dict[JsonPath, int], dict[JsonPath, int]]:
    lines: dict[JsonPath, int] = {}
    repeats: dict[JsonPath, int] = {}

    def walk(node: yaml.Node, where: JsonPath, depth: int) -> None:
        if max_depth is not None and depth > max_depth:
            raise _TooDeep
        lines.setdefault(where, node.start_mark.line + 1)
        if isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                walk(item, (*where, i), depth + 1)
        elif isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                path = (*where, str(key_node.value))
                if path in lines:
                    repeats.setdefault(path, key_node.start_mark.line + 1)
                else:
                    lines[path] = key_node.start_mark.line + 1
                walk(value_node, path, depth + 1)

    if root is not None:
        walk(root, (), 1)
    return lines, repeats


def _walk(value: Any, where: JsonPath = ()) -> Iterator[tuple[JsonPath, Any]]:
    yield where, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _walk(v, (*where, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _walk(v, (*where, i))


def invalid_json(exc: json.JSONDecodeError, path: str) -> InputError:
    """Invalid JSON at its line and column (counted from 1, as editors count)."""
    return InputError(f"invalid JSON at column {exc.colno}: {exc.msg}", path, exc.lineno)


def parse_json(text: str, path: str, *, spec: bool = True) -> Document:
    """Parse one JSON document strictly: duplicate keys, NaN/Infinity, surrogates and
    nesting beyond the limit refused; control characters too in spec files (`spec`), only
    NUL in records (PostgreSQL cannot store it)."""
    repeated: list[tuple[int, str]] = []  # (id of the object, key) of every duplicate key

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                repeated.append((id(out), key))
            else:
                out[key] = value
        return out

    try:
        # NaN and Infinity parse to floats here and are refused with their path below;
        # over-long integers become markers, refused with their path too.
        value = json.loads(text, object_pairs_hook=pairs, parse_int=_parse_int)
    except json.JSONDecodeError as exc:
        raise invalid_json(exc, path) from None
    except RecursionError:
        raise InputError(f"JSON is nested deeper than {MAX_DEPTH} levels", path, 1) from None
    doc = Document(path, value, lines_from=text)
    duplicates = dict(repeated)
    try:
        _check_json(doc, value, text, duplicates, spec)
    except RecursionError:
        raise InputError(f"JSON is nested deeper than {MAX_DEPTH} levels", path, 1) from None
    return doc


class _LongInt(str):
    """An integer literal too long to be a JSON-safe number (kept as text to name it)."""


def _parse_int(text: str) -> int | _LongInt:
    # Beyond 2^53 anyway; also keeps Python's 4300-digit conversion limit out of reach.
    return _LongInt(text) if len(text.lstrip("-")) > 17 else int(text)


def _check_json(
    doc: Document, value: Any, text: str, duplicates: dict[int, str], spec: bool
) -> None:
    path = doc.path
    bad = _BAD_STRING
    for where, item in _walk(value):
        if len(where) > MAX_DEPTH:
            raise InputError(
                f"nested deeper than {MAX_DEPTH} levels",
                path,
                doc.line_of(where),
                format_path(where[: MAX_DEPTH + 1]),
            )
        if isinstance(item, _LongInt):
            raise InputError(
                f"integer with {len(item.lstrip('-'))} digits is beyond +-(2^53-1)",
                path,
                doc.line_of(where),
                format_path(where),
            )
        if isinstance(item, dict) and id(item) in duplicates:
            key = duplicates[id(item)]
            at = (*where, key)
            repeats = _node_lines(text)[1]
            raise InputError(
                f"duplicate key {key!r}", path, repeats.get(at, doc.line_of(at)), format_path(at)
            )
        if isinstance(item, str) and bad.search(item):
            _check_bad(item, where, path, doc.line_of(where), spec)
        elif isinstance(item, int | float) and not isinstance(item, bool) and not _number_ok(item):
            _check_number(item, where, path, doc.line_of(where))
        if isinstance(item, dict):
            for key in item:
                if bad.search(key):
                    _check_bad(key, where, path, doc.line_of((*where, key)), spec)


# Lone surrogates and control characters but tab and newline: refused in every string, of
# spec files and trial records alike (`_check_bad` says which).
_BAD_STRING = re.compile("[\ud800-\udfff\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _check_bad(value: str, where: JsonPath, path: str, line: int, spec: bool) -> None:
    if spec:
        _check_string(value, where, path, line)
    elif "\x00" in value:
        raise InputError("string holds a NUL character (U+0000)", path, line, format_path(where))
    else:
        _check_string(value, where, path, line)


def _number_ok(value: int | float) -> bool:
    if isinstance(value, int):
        return abs(value) <= MAX_SAFE_INTEGER
    return math.isfinite(value)


def decode_text(data: bytes, path: str) -> str:
    """Strict UTF-8 without a byte-order mark or a raw NUL byte."""
    if data.startswith(b"\xef\xbb\xbf"):
        raise InputError("file starts with a UTF-8 byte-order mark; save it without one", path, 1)
    nul = data.find(b"\x00")
    if nul >= 0:
        line = data.count(b"\n", 0, nul) + 1
        raise InputError(f"raw NUL byte at byte {nul}", path, line)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(f"invalid UTF-8 at byte {exc.start}", path, line) from None


def parse_text(text: str, path: str) -> Document:
    if path.endswith(JSON_SUFFIXES):
        return parse_json(text, path)
    return parse_yaml(text, path)


def load_document(path: Path, display: str | None = None) -> Document:
    """Read and parse a spec file; `display` is the name used in messages."""
    name = display or str(path)
    if not path.name.endswith(SPEC_SUFFIXES):
        raise InputError(f"unsupported file type {path.suffix!r} (use .yaml, .yml or .json)", name)
    try:
        _check_spec_size(path.stat().st_size, name)
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror}", name) from None
    return document_from_bytes(data, name)


def _check_spec_size(size: int, name: str) -> None:
    if size > MAX_SPEC_BYTES:
        raise InputError(f"file is {size} bytes; a spec file is at most 1 MiB", name, 1)


def document_from_bytes(data: bytes, name: str) -> Document:
    """Parse a spec file's content read from elsewhere (a commit's blob), under the same
    limits as a file read from disk."""
    _check_spec_size(len(data), name)
    return parse_text(decode_text(data, name), name)


# --- trial records: a fast path that falls back to parse_json for exact errors -----------

# What the fast path leaves to `parse_json`: the strict walk names a control character but
# tab and newline (an escape `\u001b`, `\b`, `\f`, `\r`; raw C1 and DEL) or a lone
# surrogate, and the reference canonicalizer sorts keys holding an astral character (by
# UTF-16 units).
_RECORD_SUSPECT = re.compile(
    r"\\u00[01][0-9a-fA-F]|\\u00[89][0-9a-fA-F]|\\u007[fF]|\\[bfr]|[\x7f-\x9f]"
    r"|\\u[dD][89a-fA-F]|[\U00010000-\U0010ffff]|[\ud800-\udfff]"
)


@dataclass
class ParsedRecord:
    """A trial record's value, and whether the C encoder gives its RFC 8785 form as is."""

    document: Document
    encoder_safe: bool


class _Irregular(Exception):
    """Something the fast path leaves to the strict parser (which names it precisely)."""


def _record_float(text: str) -> int | float:
    value = float(text)
    if value.is_integer():
        if abs(value) <= MAX_SAFE_INTEGER:
            return int(value)  # JCS writes an integral number without a fraction anyway
        # Beyond 2^53 the C encoder would write `9007199254740992.0`, JCS writes no fraction.
        raise _Irregular
    if math.isfinite(value) and 1e-4 <= abs(value) < 1e16:
        return value
    raise _Irregular  # needs the reference canonicalizer, or is not finite


def _record_int(text: str) -> int:
    if len(text) > 17 or (len(text) >= 16 and abs(int(text)) > MAX_SAFE_INTEGER):
        raise _Irregular
    return int(text)


def _record_constant(text: str) -> Any:
    raise _Irregular  # NaN, Infinity, -Infinity


def _record_object(items: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(items)
    if len(out) != len(items):
        raise _Irregular  # a duplicate key
    return out


def _depth_ok(value: Any) -> bool:
    """Nesting within MAX_DEPTH, iteratively (no recursion, no paths)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        children = list(item.values()) if isinstance(item, dict) else item
        if children and depth + 1 > MAX_DEPTH:
            return False  # a child (scalar or not) at a path longer than the limit
        stack.extend((v, depth + 1) for v in children if isinstance(v, dict | list))
    return True


#: The fast path's parser, built once (`json.loads` with hooks builds a decoder per call).
_RECORD_DECODER = json.JSONDecoder(
    object_pairs_hook=_record_object,
    parse_float=_record_float,
    parse_int=_record_int,
    parse_constant=_record_constant,
)


def regular_record_value(text: str) -> Any:
    """A record line's value when `parse_record`'s fast path takes it as is (the same hooks,
    the same suspects, the same depth limit: a value the C encoder gives the RFC 8785 form
    of), else None: anything irregular, including invalid JSON, is left to `parse_record`,
    which names it. For a check that only needs to know whether a line is one value (the
    no-op ingest's: is this record stored already?), without a Document or a message."""
    if text.startswith("\ufeff"):
        return None  # json.loads refuses a BOM with a message of its own
    if ("\\" in text or not text.isascii()) and _RECORD_SUSPECT.search(text) is not None:
        return None
    try:
        value = _RECORD_DECODER.decode(text)
    except (_Irregular, RecursionError, json.JSONDecodeError):
        return None
    containers = text.count("{") + text.count("[")
    if containers <= MAX_DEPTH or _depth_ok(value):
        return value
    return None


def parse_record(text: str, path: str) -> ParsedRecord:
    """Parse one JSONL trial record as strictly as `parse_json(spec=False)`, fast.

    The C parser's hooks see every number and object; anything irregular (a duplicate
    key, a long or unsafe number, NaN, a NUL or surrogate escape, deep nesting) sends the
    line to `parse_json`, which refuses it naming line and field. Integral floats become
    ints (their RFC 8785 form is the same), so the encoder can canonicalize the value.
    """
    # Cheap C-level tests first: most records hold no escape and no non-ASCII character.
    suspect = ("\\" in text or not text.isascii()) and _RECORD_SUSPECT.search(text) is not None
    if not suspect:
        try:
            value = json.loads(
                text,
                object_pairs_hook=_record_object,
                parse_float=_record_float,
                parse_int=_record_int,
                parse_constant=_record_constant,
            )
        except (_Irregular, RecursionError):
            pass
        except json.JSONDecodeError as exc:
            raise invalid_json(exc, path) from None
        else:
            containers = text.count("{") + text.count("[")
            if containers <= MAX_DEPTH or _depth_ok(value):
                return ParsedRecord(Document(path, value, lines_from=text), True)
    return ParsedRecord(parse_json(text, path, spec=False), False)
