"""What every list command shares: `--limit N`, `--all`, and the "showing N of M" footer.

Human output shows at most `DEFAULT_LIMIT` rows unless told otherwise, in a terminal or a
pipe alike (the same command prints the same rows wherever it runs), and always ends with a
footer on stderr. `--json` is complete unless `--limit N` is given: a script reading JSON gets
every row (the document stays a plain list) and a limited list says so on stderr.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

import typer

from evalops.cli.context import emit, say, settings
from evalops.errors import InputError

DEFAULT_LIMIT = 50

LimitOption = Annotated[
    int | None,
    typer.Option(
        "--limit",
        min=1,
        max=2**63 - 1,  # what a database counts rows in
        metavar="N",
        help=f"Show at most N rows (default {DEFAULT_LIMIT}; with --json every row unless "
        "--limit is given).",
    ),
]
AllOption = Annotated[bool, typer.Option("--all", help="Show every row (no limit).")]


def row_limit(ctx: typer.Context, limit: int | None, all_rows: bool) -> int | None:
    """The number of rows to show, or None for every row."""
    if all_rows and limit is not None:
        raise InputError("give --limit N or --all, not both", field="--limit")
    if all_rows:
        return None
    if limit is not None:
        return limit
    return None if settings(ctx).json else DEFAULT_LIMIT


@dataclass
class Page:
    """The rows shown and how many matched in all: with `counted_to`, a count that stopped
    there, so more than `counted_to` matched when `total` exceeds it."""

    rows: list[dict[str, Any]]
    total: int
    counted_to: int | None = None

    @property
    def more_than(self) -> int | None:
        """The count it stopped at, when it stopped before the end."""
        capped = self.counted_to is not None and self.total > self.counted_to
        return self.counted_to if capped else None

    @property
    def truncated(self) -> bool:
        return len(self.rows) < self.total


def page_of(rows: Sequence[dict[str, Any]], limit: int | None) -> Page:
    """A page cut from rows already in memory (small tables: suites, tasks, waivers...)."""
    shown = list(rows) if limit is None else list(rows[:limit])
    return Page(shown, len(rows))


def footer(page: Page, noun: str) -> str:
    """`showing 50 of 200,080 trials (--limit N or --all for more)`, or `of more than
    10,000 trials` when the count stopped there."""
    cap = page.more_than
    of = f"more than {cap:,}" if cap is not None else f"{page.total:,}"
    text = f"showing {len(page.rows):,} of {of} {noun}"
    if page.truncated:
        text += " (--limit N or --all for more)"
    return text


# What to do when a listing is empty, by the noun its footer uses.
EMPTY_HINTS = {
    "incidents": "record one with `evalops incident open --title TEXT --severity high "
    "--observed-at TIME`",
    "tasks": "add one with `evalops new task ID`, commit it and run `evalops sync`",
    "suites": "declare one with `evalops new suite ID`, commit it and run `evalops sync`",
    "gate decisions": "decide one with `evalops gate check --build B --suite S`",
    "waivers": "`--all` lists expired and revoked ones too",
    "trials": "ingest some with `evalops trials ingest FILE`",
    "trials waiting for review": "nothing awaits a human verdict",
    "calibration records": "record one with `evalops calibration record GRADER --labels FILE`",
    "model graders": "add a grader of type model to a grader set, commit it and run `evalops sync`",
}


def nothing(noun: str) -> str:
    """`no incidents; record one with ...`: what an empty listing prints instead of a table."""
    hint = EMPTY_HINTS.get(noun)
    return f"no {noun}" + (f"; {hint}" if hint else "")


def filtered(**given: str | None) -> str:
    """`--task refund --build b1`: the filters a listing was given, as typed."""
    return " ".join(
        f"--{name.replace('_', '-')} {value}" for name, value in given.items() if value is not None
    )


def no_match(noun: str, filters: str, unknown: Sequence[str] = ()) -> str | None:
    """What an empty filtered listing says: `no trials match --task refund; task 'refund'
    is not registered; ...` (None without filters: the listing's usual empty line)."""
    if not filters:
        return None
    return f"no {noun} match {filters}" + "".join(f"; {u}" for u in unknown)


def emit_page(
    ctx: typer.Context,
    page: Page,
    noun: str,
    human: Callable[[], None],
    *,
    empty: str | None = None,
) -> None:
    """The rows as JSON (a list) or the human rendering, then the footer on stderr.

    The footer is always printed after human output; after JSON only when rows were left
    out, so that a complete JSON listing stays quiet. An empty listing is one line of words
    saying what would fill it, not an empty table; a filtered one says `empty` instead
    (`no_match`: its filters and any naming nothing that exists), never how to add the
    first row.
    """
    if page.total == 0 and not settings(ctx).json:
        line = empty or nothing(noun)
        emit(ctx, page.rows, lambda: say(line))
        return
    emit(ctx, page.rows, human)
    if not settings(ctx).json or page.truncated:
        sys.stdout.flush()  # the table first, then the footer, on a shared terminal
        say(footer(page, noun), err=True)
