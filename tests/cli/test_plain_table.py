"""A table printed to a pipe is written line by line (`tables.plain_lines`) instead of laid
out by rich: its output is rich's, byte for byte (docs/cli.md, "Tables": piped output
has no width limit and is never changed). Rich itself is the reference: the same table is
printed once through `print_table` and once by a rich console of its own."""

from __future__ import annotations

import contextlib
import io
import string

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.table import Table
from rich.text import Text

from evalops.cli import tables
from evalops.cli.context import add_row, new_table


def _rich(table: Table) -> str:
    """What rich prints for `table` without a width limit or colour (a pipe), with
    evalops's settings: no markup, no emoji codes."""
    out = io.StringIO()
    Console(
        file=out,
        width=1_000_000,
        color_system=None,
        highlight=False,
        soft_wrap=True,
        markup=False,
        emoji=False,
    ).print(table)
    return out.getvalue()


def _printed(table: Table) -> str:
    """What `print_table` writes to a pipe."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        tables.print_table(table)
    return out.getvalue()


def _table(headers: list[str], rows: list[list[object]]) -> Table:
    table = new_table(*headers)
    for row in rows:
        add_row(table, *row)
    return table


ASCII_CELL = st.text(alphabet=string.printable[:95], min_size=1, max_size=14)
ODD_CELL = st.sampled_from(["", "é", "任务-1", "a\tb", "x\ny", "\u200bz", "  lead", "trail  ", "-"])


@settings(max_examples=80, deadline=None)
# Cells rich would read as emoji codes (":x:" is one) if evalops's console let it: it once
# did, and the line path printed them as written while rich drew a wider emoji.
@example(headers=["0"] * 8, cells=[["0"] * 7 + [":V:", "0"]], odd=None)
@example(headers=[":x:", "b"], cells=[[":smile:", "a:v:b"] + ["0"] * 7] * 30, odd=None)
@given(
    headers=st.lists(ASCII_CELL, min_size=1, max_size=9),
    cells=st.lists(st.lists(ASCII_CELL, min_size=9, max_size=9), min_size=1, max_size=60),
    odd=st.one_of(st.none(), st.tuples(st.integers(0, 59), st.integers(0, 8), ODD_CELL)),
)
def test_a_piped_table_is_rich_s_byte_for_byte(
    headers: list[str], cells: list[list[str]], odd: tuple[int, int, str] | None
) -> None:
    """Tables of up to 60 rows of printable ASCII, at most one other cell among them."""
    rows: list[list[object]] = [list(row[: len(headers)]) for row in cells]
    if odd is not None:
        at_row, at_column, cell = odd
        rows[at_row % len(rows)][at_column % len(headers)] = cell
    expected = _rich(_table(headers, rows))
    assert _printed(_table(headers, rows)) == expected
    lines = tables.plain_lines(_table(headers, rows))
    if lines is not None:
        assert "\n".join(lines) + "\n" == expected


@pytest.mark.parametrize("rows", [0, 1, 3, 60])
def test_a_plain_table_of_any_length_takes_the_line_path(
    rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rich never lays out a plain piped table, whatever its length (its layout cost 3 ms a
    table of one row): its console refuses to print one here, and the lines are still
    rich's own, printed by a console of this test's."""
    from rich.console import Console as RichConsole

    row: list[object] = ["task-00003", "critical", "task_fail", "block", 5, 4, "1.00"]
    headers = ["task", "risk", "state", "effect", "n", "passed", "pass@k"]
    expected = _rich(_table(headers, [row] * rows))

    def refused(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("rich laid out a plain piped table")

    monkeypatch.setattr(RichConsole, "print", refused)
    printed = _printed(_table(headers, [row] * rows))
    assert printed == expected
    lines = printed.splitlines()
    assert lines[0].startswith("┏━") and lines[-1].endswith("─┘")
    assert len(lines) == rows + 4


@pytest.mark.parametrize("cell", ["é", "任务", "a\tb"])
def test_cells_rich_lays_out_otherwise_are_left_to_rich(cell: str) -> None:
    table = new_table("a", "b")
    for _ in range(3):
        table.add_row("x", cell)
    assert tables.plain_lines(table) is None


@pytest.mark.parametrize("cell", ["", Text("block", style="bold red")])
def test_an_empty_or_painted_cell_takes_the_line_path(cell: str | Text) -> None:
    """An empty cell is blanks (`rerun of` of `trials list`); a painted cell is its plain
    word where there is no colour: the same characters as rich's."""
    table = new_table("a", "b")
    for _ in range(3):
        table.add_row("x", cell)
    lines = tables.plain_lines(table)
    assert lines is not None
    assert "\n".join(lines) + "\n" == _rich(table)


def test_a_titled_table_is_left_to_rich() -> None:
    table = new_table("a", title="t")
    for _ in range(3):
        table.add_row("x")
    assert tables.plain_lines(table) is None


@pytest.mark.parametrize("other", ["", " \N{LATIN SMALL LETTER E WITH ACUTE}"])
def test_emoji_codes_print_as_written(other: str) -> None:
    """A stored ":smile:" or ":x:" is text, shown as written (as a stored "[red]" is), in a
    table of printable ASCII (the line path), in one rich lays out (a cell beyond ASCII),
    and in a line printed alone."""
    table = new_table("id", "reason")
    for _ in range(3):
        add_row(table, "task:x:1", "fixed :smile: and :x:" + other)
    assert (tables.plain_lines(table) is None) == bool(other)
    printed = _printed(table)
    assert "task:x:1" in printed and "fixed :smile: and :x:" + other in printed
    assert "\N{CROSS MARK}" not in printed and "\N{SMILING FACE WITH SMILING EYES}" not in printed
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        from evalops.cli.context import console

        console().print("a reason: :thumbs_up: [red]done[/red]")
    assert out.getvalue() == "a reason: :thumbs_up: [red]done[/red]\n"
