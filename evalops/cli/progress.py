"""Progress of long work on stderr: a bar in a terminal, plain periodic lines elsewhere.

`--progress auto` (the default) draws a rich bar when stderr is a terminal and prints a plain
line every `EVALOPS_PROGRESS_INTERVAL` seconds (default 10) when it is not, so that a long
ingest in CI shows it is alive; `bar` and `plain` force one of the two, `none` prints nothing.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any, Literal

import typer

from evalops.cli.context import console, settings, shown
from evalops.domain.humanize import plural, quantity
from evalops.errors import InputError

ProgressMode = Literal["auto", "bar", "plain", "none"]
Unit = Literal["bytes", "records"]
MODES: tuple[ProgressMode, ...] = ("auto", "bar", "plain", "none")
INTERVAL_ENV = "EVALOPS_PROGRESS_INTERVAL"
DEFAULT_INTERVAL = 10.0

ProgressOption = Annotated[
    str | None,
    typer.Option(
        "--progress",
        metavar="auto|bar|plain|none",
        help="Progress on stderr: a bar in a terminal, plain lines every "
        f"{INTERVAL_ENV} seconds (default {DEFAULT_INTERVAL:g}) otherwise (auto), or "
        "forced bar, plain, or none.",
    ),
]


def progress_mode(ctx: typer.Context, option: str | None) -> ProgressMode:
    """The command's `--progress`, else the global one; `auto` resolved against stderr."""
    chosen = option if option is not None else settings(ctx).progress
    if chosen not in MODES:
        raise InputError(f"must be one of {', '.join(MODES)}", field="--progress")
    if chosen == "auto":
        return "bar" if sys.stderr.isatty() else "plain"
    return chosen


def _size(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1000
    return f"{n:,.1f} GB"  # pragma: no cover


def _interval() -> float:
    raw = os.environ.get(INTERVAL_ENV)
    if not raw:
        return DEFAULT_INTERVAL
    try:
        value = float(raw)
    except ValueError:
        raise InputError(
            f"{INTERVAL_ENV} must be a number of seconds", field=INTERVAL_ENV
        ) from None
    return max(value, 0.0)


class PlainProgress:
    """Prints `ingesting: 12,000 lines, 3.2 MB of 9.6 MB (33%), 20s` (bytes) or
    `importing: 1,200 records, 20s` (records) every interval."""

    def __init__(self, label: str, total: int | None, interval: float, unit: Unit) -> None:
        self.label = label
        self.total = total
        self.interval = interval
        self.unit = unit
        self.started = time.monotonic()
        self.last = self.started
        self.done = 0
        self.calls = 0
        self.printed = 0

    def line(self) -> str:
        elapsed = time.monotonic() - self.started
        if self.unit == "records":
            text = f"{self.label}: {plural(self.done, 'record')}"
        else:
            text = f"{self.label}: {self.calls:,} lines, {_size(self.done)}"
            if self.total:
                text += f" of {_size(self.total)} ({min(100, 100 * self.done // self.total)}%)"
        return f"{text}, {quantity(round(elapsed))}s"

    def __call__(self, n: int) -> None:
        self.done += n
        self.calls += 1
        now = time.monotonic()
        if now - self.last >= self.interval:
            self.last = now
            self.printed += 1
            sys.stderr.write(self.line() + "\n")
            sys.stderr.flush()


@contextmanager
def progress(
    mode: ProgressMode, label: str, total: int | None, unit: Unit = "bytes"
) -> Iterator[Callable[[int], None] | None]:
    """A callback taking how much was done (bytes or records), or None for `none`."""
    if mode == "none":
        yield None
        return
    if mode == "plain":
        # Quiet for work shorter than one interval; then a line per interval and a last one.
        plain = PlainProgress(label, total, _interval(), unit)
        yield plain
        if plain.printed:
            sys.stderr.write(f"{plain.line()} (done)\n")
        return
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    # The console prints user text with markup off, so the columns must not rely on markup:
    # a markup string would show as `[progress.description]` verbatim.
    columns: list[Any] = [
        TextColumn("{task.description}", style="progress.description", markup=False),
        BarColumn(),
    ]
    if unit == "bytes":
        # Each callback call is one line (one record): show both, records first.
        columns += [TextColumn("{task.fields[lines]:,} records", markup=False), DownloadColumn()]
    else:
        columns.append(MofNCompleteColumn())
    columns.append(TimeRemainingColumn() if total else TimeElapsedColumn())
    with Progress(*columns, console=console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=total, lines=0)
        lines = 0

        def advance(n: int) -> None:
            nonlocal lines
            lines += 1
            bar.update(task, advance=n, lines=lines)

        yield advance


@contextmanager
def stages(mode: ProgressMode, label: str) -> Iterator[Callable[[str], None] | None]:
    """A callback taking the name of each stage of long work as it starts.

    `plain` prints `verifying: trials (42s)` for a stage that starts at least an interval
    after the last line printed (quiet for short work); `bar` shows a spinner with the stage.
    """
    if mode == "none":
        yield None
        return
    if mode == "plain":
        interval = _interval()
        started = last = time.monotonic()

        def plain(name: str) -> None:
            nonlocal last
            now = time.monotonic()
            if now - last >= interval:
                last = now
                seconds = quantity(round(now - started))
                sys.stderr.write(shown(f"{label}: {name} ({seconds}s)") + "\n")
                sys.stderr.flush()

        yield plain
        return
    with console(stderr=True).status(label) as status:
        yield lambda name: status.update(shown(f"{label}: {name}"))
