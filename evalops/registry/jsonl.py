"""JSON Lines input: one record per line, read as a stream, with exact line numbers."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, BinaryIO, cast

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
    stream: BinaryIO,
    name: str,
    on_bytes: Callable[[int], None] | None = None,
    *,
    compressed: str | None = None,
) -> Iterator[Line | InputError]:
    """Yield each line's bytes (without the newline) or the error that makes it unreadable.
    `compressed` (`gzip`, `zstd`) says the file on disk is compressed, for the fix a
    message suggests."""
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
            yield InputError(
                "line ends with CR LF; JSONL lines end with LF only: "
                + _crlf_fix(name, compressed),
                name,
                number,
            )
            continue
        if number == 1 and data.startswith(b"\xef\xbb\xbf"):
            yield InputError("file starts with a UTF-8 byte-order mark", name, number)
            continue
        if not data.strip():
            yield InputError(
                "empty line: remove it (JSONL holds one JSON object per line, no empty lines, "
                "not even at the end)",
                name,
                number,
            )
            continue
        if number == 1 and data.strip() in (b"{", b"["):
            # A pretty-printed document: every later line would be its own "invalid JSON".
            yield InputError(
                "line 1 opens a JSON document that spans several lines: trial files are "
                "JSON Lines, one record per line (compact it with `jq -c . FILE`)",
                name,
                number,
            )
            return
        yield Line(name, number, data)
    if number == 0:
        yield InputError("file holds no records", name, 1)


STDIN = "-"
"""The file name that means standard input (`evalops trials ingest -`)."""
STDIN_SHOWN = "<stdin>"
"""What errors call standard input."""


def _shell_name(name: str) -> str:
    """`name` as a shell word for a command to copy (`./-x.jsonl`, never an option), or
    `FILE` for standard input."""
    import shlex

    if name in (STDIN, STDIN_SHOWN):
        return "FILE"
    return shlex.quote(f"./{name}" if name.startswith("-") else name)


def _crlf_fix(name: str, compressed: str | None) -> str:
    """The command that converts a CR LF file: in place for plain text; a compressed file is
    decompressed, converted and compressed again (editing its bytes would corrupt it)."""
    shown = _shell_name(name)
    if compressed in ("gzip", "zstd"):
        suffix = ".gz" if compressed == "gzip" else ".zst"
        return (
            f"convert it with `{compressed} -dc {shown} | sed 's/\\r$//' | {compressed} > "
            f"converted.jsonl{suffix}`"
        )
    return f"convert the file with `dos2unix {shown}` or `sed -i 's/\\r$//' {shown}`"


_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


@dataclass
class Source:
    """An opened JSONL input: its lines, the name errors use, and how far it has been read."""

    stream: BinaryIO
    name: str
    compressed: str | None
    """`gzip` or `zstd` when the bytes were compressed (detected by magic number)."""
    raw: BinaryIO
    """The underlying file: its `tell()` counts the bytes consumed, compressed or not."""

    def consumed(self) -> int | None:
        """Bytes of the underlying file read so far (None for a pipe)."""
        try:
            return self.raw.tell() if self.raw.seekable() else None
        except OSError:
            return None


@contextmanager
def open_source(name: str) -> Iterator[Source]:
    """Open a JSONL file, `-` (standard input) or `/dev/stdin`; gzip and zstd content (by its
    magic number, whatever the suffix: `.jsonl.gz`, `.jsonl.zst`) is decompressed as it is
    read. Unreadable or undecodable input is an InputError naming the file."""
    import sys

    shown = STDIN_SHOWN if name == STDIN else name
    try:
        raw: BinaryIO = sys.stdin.buffer if name == STDIN else open(name, "rb")  # noqa: SIM115
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", name) from None
    try:
        head = _peek(raw, 4)
        if head.startswith(_GZIP_MAGIC):
            import gzip

            inner: Any = gzip.GzipFile(fileobj=raw, mode="rb")
            yield Source(cast(BinaryIO, _Decompressing(inner, shown, "gzip")), shown, "gzip", raw)
        elif head.startswith(_ZSTD_MAGIC):
            import io

            try:
                import zstandard
            except ImportError:
                raise InputError(
                    "zstd input needs the zstd extra: pip install '.[zstd]' in the evalops "
                    "checkout, or pip install 'zstandard>=0.22'",
                    shown,
                ) from None
            reader = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
            inner = io.BufferedReader(cast(Any, reader))
            yield Source(cast(BinaryIO, _Decompressing(inner, shown, "zstd")), shown, "zstd", raw)
        else:
            yield Source(raw, shown, None, raw)
    finally:
        if name != STDIN:
            raw.close()


class _Decompressing:
    """A decompressing reader whose failures (truncated or corrupt data) name the file."""

    def __init__(self, inner: Any, name: str, kind: str) -> None:
        self.inner = inner
        self.name = name
        self.kind = kind

    def readline(self, size: int = -1) -> bytes:
        return self._call(self.inner.readline, size)

    def read(self, size: int = -1) -> bytes:
        return self._call(self.inner.read, size)

    def _call(self, method: Callable[[int], bytes], size: int) -> bytes:
        try:
            return method(size)
        except Exception as exc:  # gzip: OSError, EOFError, zlib.error; zstd: ZstdError
            raise InputError(f"cannot decompress ({self.kind}): {exc}", self.name) from None


def count_lines(source: Source, chunk: int = 1024 * 1024) -> int:
    """The lines left in `source` (a last line without a newline counts), read in large
    blocks: counting is linear in the bytes, never a parse per line."""
    lines = 0
    last = b"\n"
    while block := source.stream.read(chunk):
        lines += block.count(b"\n")
        last = block[-1:]
    return lines + (0 if last == b"\n" else 1)


def _peek(raw: BinaryIO, n: int) -> bytes:
    """The first `n` bytes without consuming them (buffered files and stdin can peek)."""
    peek = getattr(raw, "peek", None)
    if peek is not None:
        data: bytes = peek(n)
        return data[:n]
    return b""
