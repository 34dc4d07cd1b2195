"""`--help` at any terminal width without breaking an identifier (docs/cli.md, "Help").

Click wraps help text with Python's TextWrapper, which breaks at hyphens: at 80 columns
`build-124` or `support-refund-in-order` could end one line and start the next, and an
example command wrapped like prose cannot be pasted. Here hyphens inside words are held
together while the text is wrapped, and each `Example:` paragraph is laid out as a shell
command: one line when it fits, else continued with ` \\` before an option, never inside
an argument.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

#: Stands in for a hyphen inside a word while click wraps (a private-use character, the
#: width of a hyphen, never in help text itself).
_HELD = "\ue000"
_INNER_HYPHEN = re.compile(r"(?<=\S)-")
#: Where an example may continue on the next line: before an option or `&&`, outside quotes.
_BREAK = re.compile(r""" (?=(?:--?[A-Za-z]|&&))(?=(?:[^"']|"[^"]*"|'[^']*')*$)""")
_EXAMPLE = "Example:"
_EXAMPLE_INDENT = "  "
_CONTINUED_INDENT = "      "


def _held(text: str) -> str:
    return _INNER_HYPHEN.sub(_HELD, text)


def click_module() -> Any:
    """The click typer runs on: its vendored copy (typer 0.2x), else click itself."""
    try:
        import typer._click as vendored
    except ImportError:
        import click

        return click
    return vendored


def _formatter_class(base: Any) -> Any:
    class HelpFormatter(base):  # type: ignore[misc]
        """Click's help formatter that never breaks a word at its hyphens and lays out
        examples as pasteable commands."""

        def write(self, string: str) -> None:
            super().write(string.replace(_HELD, "-"))

        def write_text(self, text: str) -> None:
            super().write_text("\n\n".join(self._paragraph(p) for p in text.split("\n\n")))

        def write_dl(
            self, rows: Sequence[tuple[str, str]], col_max: int = 30, col_spacing: int = 2
        ) -> None:
            super().write_dl([(_held(a), _held(b)) for a, b in rows], col_max, col_spacing)

        def _paragraph(self, paragraph: str) -> str:
            stripped = paragraph.strip()
            if not stripped.startswith(_EXAMPLE):
                return _held(paragraph)
            command = " ".join(stripped[len(_EXAMPLE) :].split())
            room = self.width - self.current_indent - len(_EXAMPLE_INDENT)
            lines = list(example_lines(command, room))
            # `\b` keeps click from rewrapping the block (click's own marker).
            return "\n".join(["\b", _EXAMPLE, *(_EXAMPLE_INDENT + line for line in lines)])

    return HelpFormatter


def example_lines(command: str, width: int) -> Iterator[str]:
    """`command` in lines of at most `width` (continued with ` \\`), split only before an
    option or `&&`; a part longer than the line stays whole."""
    parts = _BREAK.split(command)
    line = parts[0]
    indent = _CONTINUED_INDENT
    for part in parts[1:]:
        candidate = f"{line} {part}"
        # The continuation marker ` \` needs two columns after the last part.
        if len(candidate) + 2 > width:
            yield line + " \\"
            line = indent.removeprefix(_EXAMPLE_INDENT) + part
        else:
            line = candidate
    yield line


def use_in_help() -> None:
    """Every click context of this process formats help with the formatter above."""
    click = click_module()
    if not isinstance(getattr(click.Context, "formatter_class", None), type):
        return  # another click: its own formatting stands
    click.Context.formatter_class = _formatter_class(click.HelpFormatter)
