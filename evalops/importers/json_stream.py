"""Stream the members of one large JSON object, array elements one at a time.

Inspect's `.json` logs are one object whose `samples` array holds every transcript. Reading
it whole would make memory grow with the log, and ijson's C lexer refuses the `NaN` that
Inspect writes for unscored samples, so this reader decodes each top-level value (and each
element of the arrays asked for) with the standard library's C-accelerated `raw_decode`,
which accepts `NaN` and `Infinity` as Python's own encoder writes them. The buffer holds one
value at a time: memory is bounded by the largest sample, not by the log.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from typing import Any, BinaryIO

CHUNK = 1 << 20
# A single value larger than this is refused rather than buffered without bound.
MAX_VALUE = 1 << 30
_WS = " \t\n\r"


class DuplicateKeyError(ValueError):
    """An object names one key twice: readers disagree on which value wins, so it is refused."""


def unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """`object_pairs_hook` refusing duplicate keys (Python keeps the last, others the first)."""
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKeyError(f"duplicate key {key!r} in one object")
            seen.add(key)
    return value


_DECODER = json.JSONDecoder(object_pairs_hook=unique_object)


def loads_unique(text: str | bytes) -> Any:
    """`json.loads` that refuses duplicate keys anywhere (NaN and Infinity are read)."""
    return json.loads(text, object_pairs_hook=unique_object)


class JsonStreamError(ValueError):
    """The stream is not valid JSON of the expected shape (or ends early)."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(f"{message} (at character {offset})")
        self.offset = offset


class _Buffer:
    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.text = ""
        self.pos = 0
        self.base = 0  # characters consumed before `text`
        self.eof = False

    @property
    def offset(self) -> int:
        return self.base + self.pos

    def fill(self, at_least: int = CHUNK) -> bool:
        """Read more; False at end of file."""
        if self.eof:
            return False
        if self.pos > len(self.text) // 2:
            self.base += self.pos
            self.text = self.text[self.pos :]
            self.pos = 0
        raw = self.stream.read(max(at_least, CHUNK))
        try:
            self.text += self.decoder.decode(raw, final=not raw)
        except UnicodeDecodeError as exc:
            raise JsonStreamError(f"invalid UTF-8: {exc.reason}", self.offset) from None
        if not raw:
            self.eof = True
        return True

    def skip_ws(self) -> None:
        while True:
            while self.pos < len(self.text) and self.text[self.pos] in _WS:
                self.pos += 1
            if self.pos < len(self.text) or not self.fill():
                return

    def peek(self) -> str:
        self.skip_ws()
        if self.pos >= len(self.text):
            raise JsonStreamError("the file ends early (truncated?)", self.offset)
        return self.text[self.pos]

    def expect(self, char: str) -> None:
        found = self.peek()
        if found != char:
            raise JsonStreamError(f"expected {char!r}, found {found!r}", self.offset)
        self.pos += 1

    def value(self) -> Any:
        """Decode the next complete JSON value, reading as much as it takes."""
        self.skip_ws()
        while True:
            try:
                value, end = _DECODER.raw_decode(self.text, self.pos)
            except DuplicateKeyError as exc:
                raise JsonStreamError(str(exc), self.offset) from None
            except RecursionError:
                # Python's decoder recurses per level: a hostile nesting is the file's
                # problem, named with its place, not a crash.
                raise JsonStreamError(
                    "a value is nested too deeply to read (thousands of levels)", self.offset
                ) from None
            except json.JSONDecodeError as exc:
                if self.eof or not self._maybe_incomplete(exc):
                    raise JsonStreamError(f"invalid JSON: {exc.msg}", self.base + exc.pos) from None
            else:
                # A number or literal that ends the buffer may continue in the next chunk.
                if end < len(self.text) or self.eof:
                    self.pos = end
                    return value
            if len(self.text) - self.pos > MAX_VALUE:
                raise JsonStreamError("a single value is larger than 1 GiB", self.offset)
            self.fill(len(self.text) - self.pos)

    def _maybe_incomplete(self, exc: json.JSONDecodeError) -> bool:
        # The decoder stops where the text runs out, or at a string it never saw closed;
        # anything else, well before the end of what was read, is a real syntax error.
        return exc.msg.startswith("Unterminated string") or exc.pos >= len(self.text) - 16


def iter_object(
    stream: BinaryIO,
    arrays: frozenset[str],
    objects: frozenset[str] = frozenset(),
    inner_arrays: frozenset[str] = frozenset(),
) -> Iterator[tuple[str, Any]]:
    """Yield `(key, value)` for each member of the top-level object, in file order.

    For a key in `arrays` the value is an iterator over the array's elements; for a key in
    `objects`, an iterator over that object's members, those in `inner_arrays` streamed as
    arrays. Either must be consumed before the next member is read. A key named twice in
    one object is an error (readers disagree on which value wins).
    """
    buf = _Buffer(stream)
    yield from _members(buf, arrays, objects, inner_arrays)
    buf.skip_ws()
    if buf.pos < len(buf.text):
        # A second document (two logs concatenated) would otherwise be dropped unseen.
        raise JsonStreamError(
            "content follows the end of the JSON document (two documents in one file?)",
            buf.offset,
        )


def _members(
    buf: _Buffer,
    arrays: frozenset[str],
    objects: frozenset[str] = frozenset(),
    inner_arrays: frozenset[str] = frozenset(),
) -> Iterator[tuple[str, Any]]:
    buf.expect("{")
    if buf.peek() == "}":
        buf.pos += 1
        return
    seen: set[str] = set()
    while True:
        key = buf.value()
        if not isinstance(key, str):
            raise JsonStreamError("expected a member name", buf.offset)
        if key in seen:
            raise JsonStreamError(f"duplicate key {key!r} in one object", buf.offset)
        seen.add(key)
        buf.expect(":")
        streamed: Iterator[Any] | None = None
        if key in arrays and buf.peek() == "[":
            streamed = _elements(buf)
        elif key in objects and buf.peek() == "{":
            streamed = _members(buf, inner_arrays)
        if streamed is not None:
            yield key, streamed
            for _ in streamed:  # whatever the consumer left unread
                pass
        else:
            yield key, buf.value()
        separator = buf.peek()
        buf.pos += 1
        if separator == "}":
            return
        if separator != ",":
            raise JsonStreamError(f"expected ',' or '}}', found {separator!r}", buf.offset)


def _elements(buf: _Buffer) -> Iterator[Any]:
    buf.expect("[")
    if buf.peek() == "]":
        buf.pos += 1
        return
    while True:
        yield buf.value()
        separator = buf.peek()
        buf.pos += 1
        if separator == "]":
            return
        if separator != ",":
            raise JsonStreamError(f"expected ',' or ']', found {separator!r}", buf.offset)
