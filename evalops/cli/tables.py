"""Printing a table in a terminal without ever cutting an identifier (docs/cli.md, "Tables").

Rich fits a table that is too wide by folding its widest cells, which breaks an id such as
`support-refund-policy-explanation` over two lines. Here a table is first made to fit by
leaving out what a reader needs least: columns that hold nothing (every cell `-`), then
digests shortened to their first hex digits (as git shortens a commit), then the rarely used
columns each command names, in its order. Identifier columns never wrap; prose columns
(a title, a reason) wrap between words. A table that still does not fit is printed as one
block per row, each value whole. Piped output has no width limit and is never changed:
`--json` and a pipe keep every column.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING

from evalops.cli.context import UNLIMITED_WIDTH, console, say
from evalops.domain.humanize import short_digest

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Column, Table

#: What a cell holds when there is nothing to show.
EMPTY_CELLS = frozenset({"", "-"})


def print_table(
    table: Table,
    *,
    drop: Sequence[str] = (),
    shorten: Sequence[str] = (),
    prose: Sequence[str] = (),
) -> None:
    """Print `table` fitted to the terminal. `drop`: columns that may be left out, least
    needed first; `shorten`: digest columns that may be shortened; `prose`: columns whose
    cells may wrap between words. Every other column is an identifier and never wraps."""
    out = console()
    if out.width >= UNLIMITED_WIDTH:
        # Without colour or a width limit (a pipe, a file, a CI log), a table rich would lay
        # out plainly is written line by line: rich's characters without its layout cost
        # (3 ms for one row, 14 ms for ten, where a line costs microseconds).
        lines = None if out.color_system else plain_lines(table)
        if lines is None:
            out.print(table)
        else:
            for line in lines:
                say(line)
        return
    every_column = [(c, list(c._cells)) for c in table.columns]
    changes = fit(table, out.width, drop=drop, shorten=shorten, prose=prose)
    if needed_width(table, prose) > out.width:
        # No table fits: every column and every cell whole, one block per row.
        table.columns[:] = [c for c, _ in every_column]
        for column, cells in every_column:
            column._cells[:] = cells
        _print_records(out, table)
        return
    out.print(table)
    notes = [
        f"{verb} {', '.join(names)}"
        for verb in ("left out", "shortened")
        if (names := [name for action, name in changes if action == verb])
    ]
    if notes:
        note = f"(to fit {out.width} columns: {'; '.join(notes)}; --json has every field)"
        # The note itself fits too: wrapped between words, never inside a column name.
        for line in textwrap.wrap(note, out.width, break_long_words=False, break_on_hyphens=False):
            say(line, err=True)


_PRINTABLE_ASCII = frozenset(chr(c) for c in range(0x20, 0x7F))


def plain_lines(table: Table) -> list[str] | None:
    """The lines rich prints for `table` at an unlimited width without colour (its default
    heavy-head box, a header row, each column as wide as its widest cell, one space of
    padding each side), for a table rich would lay out that way: no title, no footer, the
    default box and padding, every header and cell one line of printable ASCII (one
    character, one column) or empty. None for any other table: rich lays it out."""
    from rich import box

    if (
        table.title is not None
        or table.caption is not None
        or table.box is not box.HEAVY_HEAD
        or not table.show_header
        or table.show_footer
        or not table.show_edge
        or table.show_lines
        or table.padding != (0, 1, 0, 1)
        or not table.pad_edge
        or table.expand
        or table.width is not None
        or table.row_styles
        or any(row.style or row.end_section for row in table.rows)
    ):
        return None
    columns = []
    for column in table.columns:
        texts = [str(column.header), *(str(c) for c in column._cells)]
        if (
            column.justify != "left"
            or column.width is not None
            or column.max_width is not None
            or column.min_width is not None
            or column.ratio is not None
            or not all(_PRINTABLE_ASCII.issuperset(text) for text in texts)
        ):
            return None
        columns.append(texts)
    widths = [max(len(t) for t in texts) for texts in columns]
    rows = [
        [texts[i].ljust(w) for texts, w in zip(columns, widths, strict=True)]
        for i in range(len(table.rows) + 1)
    ]
    return [
        "┏" + "┳".join("━" * (w + 2) for w in widths) + "┓",
        "┃ " + " ┃ ".join(rows[0]) + " ┃",
        "┡" + "╇".join("━" * (w + 2) for w in widths) + "┩",
        *("│ " + " │ ".join(row) + " │" for row in rows[1:]),
        "└" + "┴".join("─" * (w + 2) for w in widths) + "┘",
    ]


def fit(
    table: Table,
    width: int,
    *,
    drop: Sequence[str] = (),
    shorten: Sequence[str] = (),
    prose: Sequence[str] = (),
) -> list[tuple[str, str]]:
    """Make `table` fit `width` in place, one step at a time; the steps taken, as
    (`left out` or `shortened`, column)."""
    _settle_columns(table, prose)
    steps: list[tuple[str, str]] = [("drop", n) for n in drop if _is_empty(table, n)]
    steps += [("shorten", n) for n in shorten]
    steps += [("drop", n) for n in drop if ("drop", n) not in steps]
    taken: list[tuple[str, str]] = []
    for action, name in steps:
        if needed_width(table, prose) <= width:
            break
        column = _column(table, name)
        if column is None:
            continue
        if action == "shorten":
            column._cells[:] = [short_digest(str(c)) for c in column._cells]
            column.min_width = _natural(column)
            taken.append(("shortened", name))
        else:
            table.columns.remove(column)
            taken.append(("left out", name))
    return taken


def needed_width(table: Table, prose: Sequence[str] = ()) -> int:
    """The narrowest the table can be without breaking a word: identifier columns at their
    widest cell, prose columns at their longest word, plus borders and padding."""
    widths = [_longest_word(c) if c.header in prose else _natural(c) for c in table.columns]
    return sum(widths) + 3 * len(widths) + 1


def _settle_columns(table: Table, prose: Sequence[str]) -> None:
    for column in table.columns:
        if column.header in prose:
            column.min_width = _longest_word(column)
        else:
            column.no_wrap = True
            column.min_width = _natural(column)


def _texts(column: Column) -> list[str]:
    return [str(column.header), *(str(c) for c in column._cells)]


def _natural(column: Column) -> int:
    from rich.cells import cell_len

    return max(cell_len(line) for text in _texts(column) for line in text.split("\n"))


def _longest_word(column: Column) -> int:
    from rich.cells import cell_len

    return max((cell_len(w) for text in _texts(column) for w in text.split()), default=1)


def _column(table: Table, name: str) -> Column | None:
    return next((c for c in table.columns if c.header == name), None)


def _is_empty(table: Table, name: str) -> bool:
    column = _column(table, name)
    return column is not None and all(str(c) in EMPTY_CELLS for c in column._cells)


def _print_records(out: Console, table: Table) -> None:
    """One block per row: the first cell on its own line, then `header value` pairs, each
    whole, wrapped between pairs (an id longer than the terminal is still never cut)."""
    if table.title:
        out.print(str(table.title), no_wrap=True, crop=False)
    first, *rest = table.columns
    for index, cell in enumerate(first._cells):
        out.print(str(cell), no_wrap=True, crop=False)
        pairs = [
            f"{c.header} {c._cells[index]}" for c in rest if str(c._cells[index]) not in EMPTY_CELLS
        ]
        for line in _wrap_pairs(pairs, out.width - 2):
            out.print("  " + line, no_wrap=True, crop=False)


def _wrap_pairs(pairs: list[str], width: int) -> list[str]:
    """Pairs joined by `; ` into lines of at most `width`; a pair longer than a line
    (a reason) wraps between its words, never inside one."""
    import textwrap

    lines: list[str] = []
    current = ""
    for pair in pairs:
        if len(pair) > width:
            if current:
                lines.append(current)
                current = ""
            lines += textwrap.wrap(pair, width, break_long_words=False, break_on_hyphens=False)
            continue
        candidate = f"{current}; {pair}" if current else pair
        if current and len(candidate) > width:
            lines.append(current)
            candidate = pair
        current = candidate
    if current:
        lines.append(current)
    return lines


_DIGEST = re.compile(r"\bsha256:[0-9a-f]{64}\b")


def digests_to_fit(line: str) -> str:
    """A line of prose holding digests, shortened as a table's digest column is (their
    first hex digits) when it would not fit the terminal; whole in a pipe or when it fits."""
    out = console()
    if out.width >= UNLIMITED_WIDTH or len(line) <= out.width:
        return line
    return _DIGEST.sub(lambda m: short_digest(m.group(0)), line)
