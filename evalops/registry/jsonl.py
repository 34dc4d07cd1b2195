"""JSON Lines input: one record per line, read as a stream, with exact line numbers."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

from evalops.errors import InputError

MAX_LINE_BYTES = 4 * 1024 * 1024


@dataclass
class Line:
    """One non-empty line of a JSONL file."""

    file: str
    number: int
    data: bytes
    label: str | None = None
    """Where in the file, for records that are not lines (an import's `sample/epoch`)."""


def read_lines(
    stream: BinaryIO, name: str, on_bytes: Callable[[int], None] | None = None
) -> Iterator[Line | InputError]:
    """Yield each line's bytes (without the newline) or the error that makes it unreadable."""
    number = 0
    while True:
        raw = stream.readline(MAX_LINE_BYTES + 2)
        if not raw:
            break
        number += 1
        if on_bytes:
            on_bytes(len(raw))
        data = raw[:-1] if raw.endswith(b"\n") else raw
        if len(data) > MAX_LINE_BYTES:
            rest = raw
            while rest and not rest.endswith(b"\n"):
                rest = stream.readline(1024 * 1024)
                if on_bytes:
                    on_bytes(len(rest))
            yield InputError(f"line is longer than {MAX_LINE_BYTES} bytes", name, number)
            continue
        if data.endswith(b"\r"):
            yield InputError("line ends with CR LF; JSONL lines end with LF only", name, number)
            continue
        if number == 1 and data.startswith(b"\xef\xbb\xbf"):
            yield InputError("file starts with a UTF-8 byte-order mark", name, number)
            continue
        if not data.strip():
            yield InputError("empty line (one JSON object per line)", name, number)
            continue
        yield Line(name, number, data)
    if number == 0:
        yield InputError("file holds no records", name, 1)
