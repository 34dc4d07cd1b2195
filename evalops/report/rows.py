"""Rows of a report that may be too many to hold: the trials of a large decision.

An audit report lists every trial its decision read (the trials table, the drill-down,
`trials` in the JSON). `RowSpool` takes them one at a time and keeps the first ones in
memory; past `MEMORY_ROWS` it writes them to an anonymous temporary file, a batch at a
time, and reads them back whenever it is iterated. So building and rendering a report of a
decision of any size holds a bounded number of rows (docs/gate.md, "Evaluator 4"), and
the rows read back are equal to the ones written, so no report changes by a byte. A
decision with fewer rows never touches the disk, and its document holds plain lists.
"""

from __future__ import annotations

import os
import pickle
import tempfile
import weakref
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import IO, Any, Generic, TypeGuard, TypeVar, overload

T = TypeVar("T")
U = TypeVar("U")

MEMORY_ROWS = 1_000
"""Rows a spool holds in memory before it writes the rest to disk."""
_BATCH = 500
"""Rows pickled together (their repeated keys are written once per batch)."""


class RowSpool(Sequence[T], Generic[T]):
    """An append-only sequence whose rows past the first `memory_rows` live on disk.

    Rows are pickled to a file only this process holds (`tempfile.TemporaryFile`), so what
    is read back is exactly what was appended. Iterating reads the file again each time;
    indexing past the rows in memory reads up to the index."""

    def __init__(self, memory_rows: int | None = None) -> None:
        self._limit = MEMORY_ROWS if memory_rows is None else memory_rows
        self._head: list[T] = []
        self._pending: list[T] = []
        self._file: IO[bytes] | None = None
        # Where each pickled batch starts in the file, and its size (8 bytes each a batch).
        self._offsets = array("q")
        self._sizes = array("q")
        self._length = 0
        self._closed = False
        self._views: dict[str, Selected[T]] = {}

    def append(self, row: T) -> None:
        if self._closed:
            raise ValueError("rows are appended before the spool is read")
        self._length += 1
        if len(self._head) < self._limit:
            self._head.append(row)
            return
        self._pending.append(row)
        if len(self._pending) >= _BATCH:
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        if self._file is None:
            # Open as long as the spool is (closed, and so deleted, when it is let go).
            self._file = tempfile.TemporaryFile(prefix="evalops-rows-")  # noqa: SIM115
            weakref.finalize(self, self._file.close)
        data = pickle.dumps(self._pending, protocol=pickle.HIGHEST_PROTOCOL)
        self._file.seek(0, os.SEEK_END)
        self._offsets.append(self._file.tell())
        self._sizes.append(len(data))
        self._file.write(data)
        self._pending = []

    @property
    def spilled(self) -> bool:
        """Whether some rows live on disk."""
        return self._length > len(self._head)

    def finished(self) -> Sequence[T]:
        """The rows once every one is appended: a plain list when they all fit in memory."""
        self._flush()
        self._closed = True
        return self if self.spilled else self._head

    def __len__(self) -> int:
        return self._length

    def __iter__(self) -> Iterator[T]:
        self._flush()
        self._closed = True
        yield from self._head
        for offset, size in zip(self._offsets, self._sizes, strict=True):
            # Each batch is sought and read whole before any row is yielded, so that
            # iterations in progress at once each read their own batches.
            assert self._file is not None
            self._file.seek(offset)
            batch: list[T] = pickle.loads(self._file.read(size))  # only what this spool wrote
            yield from batch

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> list[T]: ...
    def __getitem__(self, index: int | slice) -> T | list[T]:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._length)
            if step != 1 or start >= stop:
                return list(self)[index] if step != 1 else []
            out: list[T] = []
            for i, row in enumerate(self):
                if i >= stop:
                    break
                if i >= start:
                    out.append(row)
            return out
        i = index + self._length if index < 0 else index
        if not 0 <= i < self._length:
            raise IndexError("row index out of range")
        if i < len(self._head):
            return self._head[i]
        for j, row in enumerate(self):
            if j == i:
                return row
        raise IndexError("row index out of range")  # pragma: no cover - length counts rows

    def __bool__(self) -> bool:
        return self._length > 0

    def __repr__(self) -> str:
        return f"<RowSpool of {self._length} rows, {len(self._head)} in memory>"

    def where(self, key: str) -> Selected[T]:
        """The rows whose `key` is truthy (one view per key, so its length is counted once)."""
        if key not in self._views:
            self._views[key] = Selected(self, key)
        return self._views[key]


class Selected(Sequence[T], Generic[T]):
    """The rows of a sequence whose `key` is truthy, in order, read as they are needed:
    `len()` counts them once; a slice from the start reads only as far as it needs."""

    def __init__(self, rows: Iterable[T], key: str) -> None:
        self._rows = rows
        self._key = key
        self._length: int | None = None

    def _selected(self) -> Iterator[T]:
        for row in self._rows:
            if _field(row, self._key):
                yield row

    def __iter__(self) -> Iterator[T]:
        return self._selected()

    def __len__(self) -> int:
        if self._length is None:
            self._length = sum(1 for _ in self._selected())
        return self._length

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> list[T]: ...
    def __getitem__(self, index: int | slice) -> T | list[T]:
        if isinstance(index, slice) and index.step in (None, 1) and (index.start or 0) >= 0:
            stop = index.stop
            if stop is not None and stop >= 0:
                out: list[T] = []
                for i, row in enumerate(self._selected()):
                    if i >= stop:
                        break
                    if i >= (index.start or 0):
                        out.append(row)
                return out
        return list(self._selected())[index]

    def __bool__(self) -> bool:
        return next(self._selected(), None) is not None


def _field(row: Any, key: str) -> Any:
    return row.get(key) if isinstance(row, Mapping) else getattr(row, key, None)


def selected(rows: Iterable[Any], key: str) -> Sequence[Any]:
    """The rows whose `key` is truthy: a list for rows in memory, a view of a spool."""
    if isinstance(rows, RowSpool):
        return rows.where(key)
    return [row for row in rows if _field(row, key)]


def mapped(rows: Sequence[T], fn: Callable[[T], U]) -> Sequence[U]:
    """`fn` of each row, computed as the rows are read (a list for rows in memory)."""
    if isinstance(rows, RowSpool):
        return Mapped(rows, fn)
    return [fn(row) for row in rows]


class Mapped(Sequence[U], Generic[T, U]):
    """`fn` of each row of a spool, computed each time the rows are read."""

    def __init__(self, rows: RowSpool[T], fn: Callable[[T], U]) -> None:
        self._rows = rows
        self._fn = fn

    def __len__(self) -> int:
        return len(self._rows)

    def __iter__(self) -> Iterator[U]:
        return map(self._fn, self._rows)

    @overload
    def __getitem__(self, index: int) -> U: ...
    @overload
    def __getitem__(self, index: slice) -> list[U]: ...
    def __getitem__(self, index: int | slice) -> U | list[U]:
        if isinstance(index, slice):
            return [self._fn(row) for row in self._rows[index]]
        return self._fn(self._rows[index])

    def __bool__(self) -> bool:
        return bool(self._rows)


def is_spooled(value: Any) -> TypeGuard[Sequence[Any]]:
    """Whether `value` is rows read from disk (a JSON writer streams them as a list)."""
    return isinstance(value, RowSpool | Mapped | Selected)
