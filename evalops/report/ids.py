"""Ids in HTML: where an id, build name, path or digest may wrap, and nowhere else.

A browser left to itself breaks a long id anywhere (`overflow-wrap: anywhere` squeezes a
table's columns to one letter: "revoca|tion", "task_|fail") or nowhere (the page scrolls
sideways on a phone). `ident` marks each place an id may wrap with `<wbr>`; the stylesheet
turns every other break inside `.id` off (templates/report.css).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from markupsafe import Markup, escape

from evalops.report.text import visible

# Where an id may wrap: after each run of its separators. Inside an id a browser breaks at
# <wbr> only (`.id` turns its own breaking off), never inside a word ("task_|fail").
_ID_SEPARATORS = re.compile(r"([/._:\-]+)")
_HEX_RUN = 16


def ident(value: Any, kind: str = "id") -> Markup:
    """An id, build name, path or command for HTML: escaped, in a `<span class="id">`,
    with `<wbr>` after each run of separators (`/ . - _ :`), so it wraps there and only
    there. A digest (`sha256:` + hex) may also wrap every 16 hex digits. `kind` "id nowrap":
    a short value that never wraps."""
    text = visible(value if value is not None else "")
    # Remembered for plain text only: a `Markup` equals, and hashes as, the plain text it
    # spells, but is not escaped again.
    plain = type(text) is str and type(kind) is str
    return _remembered(text, kind) if plain else _ident(text, kind)


def _ident(text: str, kind: str) -> Markup:
    if "nowrap" in kind.split():
        # A short value (a short digest, a class name) never wraps at all.
        return Markup(f'<span class="{escape(kind)}">{escape(text)}</span>')
    pieces = [p for p in _ID_SEPARATORS.split(text) if p]
    out: list[str] = []
    for piece in pieces:
        if _ID_SEPARATORS.fullmatch(piece) or len(piece) <= _HEX_RUN or not _is_hex(piece):
            out.append(str(escape(piece)))
        else:
            chunks = [piece[i : i + _HEX_RUN] for i in range(0, len(piece), _HEX_RUN)]
            out.append("<wbr>".join(chunks))
        if _ID_SEPARATORS.fullmatch(piece):
            out.append("<wbr>")
    body = "".join(out)
    if body.endswith("<wbr>"):
        body = body[: -len("<wbr>")]
    return Markup(f'<span class="{escape(kind)}">{body}</span>')


# A site's pages name the same tasks, builds and digests again and again.
_remembered = lru_cache(maxsize=8192)(_ident)


def _is_hex(text: str) -> bool:
    return all(c in "0123456789abcdef" for c in text)


_DIGEST_IN_TEXT = re.compile(r"sha256:[0-9a-f]{16,64}")


def prose(value: Any) -> Markup:
    """Free text for HTML, escaped, with every digest in it shown as an id (so a reason that
    names a config digest wraps between its hex groups, not anywhere in a word)."""
    text = visible(value if value is not None else "")
    out: list[str] = []
    at = 0
    for found in _DIGEST_IN_TEXT.finditer(text):
        out.append(str(escape(text[at : found.start()])))
        out.append(str(ident(found.group(0))))
        at = found.end()
    out.append(str(escape(text[at:])))
    return Markup("".join(out))
