"""Colour for the words a reader scans for: verdicts and effects (docs/cli.md, "Colour").

Only on a terminal: never in a pipe or a file, never with `NO_COLOR` set (no-color.org: any
non-empty value), never on a `TERM=dumb` terminal. The coloured words come from a fixed
vocabulary (pass, hold, block); stored text around them still goes through `shown`, so
colour never lets stored text write its own escape sequences.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

import typer

from evalops.cli.context import reader_gone, shown

if TYPE_CHECKING:
    from rich.text import Text

#: The style of each verdict and effect (rich style names and their SGR codes).
STYLES = {"pass": "bold green", "hold": "bold yellow", "block": "bold red"}
_SGR = {"bold green": "1;32", "bold yellow": "1;33", "bold red": "1;31"}


def colour_wanted(stream: Any = None) -> bool:
    """Whether `stream` (stdout by default) gets colour."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    stream = sys.stdout if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def painted(word: str, key: str | None = None) -> str:
    """`word` in the colour of verdict or effect `key` (default: `word` itself) when stdout
    wants colour; else `word` unchanged."""
    style = STYLES.get((key or word).strip().lower())
    if style is None or not colour_wanted():
        return word
    return f"\x1b[{_SGR[style]}m{word}\x1b[0m"


def painted_cell(word: str) -> str | Text:
    """A table cell holding a verdict or effect: coloured text on a terminal (rich then
    decides as its console does), the plain word elsewhere."""
    style = STYLES.get(word.lower())
    if style is None or not colour_wanted():
        return shown(word)
    from rich.text import Text

    return Text(shown(word), style=style)


def say_painted(word: str, rest: str = "", *, before: str = "", key: str | None = None) -> None:
    """One line: `before`, a verdict or effect word (coloured on a terminal), then `rest`;
    the text around the word is made safe by `shown`."""
    try:
        typer.echo(shown(before) + painted(shown(word), key) + shown(rest))
    except BrokenPipeError:
        reader_gone(sys.stdout)
