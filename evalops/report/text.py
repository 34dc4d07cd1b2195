"""Free text made safe to show: visible control characters, Markdown escapes, link checks.

Free text (titles, reasons, owners, evidence URIs, build names) is stored as given; these
functions decide how it is shown. HTML escaping itself is jinja2's autoescape; XML escaping
is the serializer's; what neither does is make control characters visible, which every
format needs (a newline must never start a Markdown line, and XML 1.0 cannot carry most C0
controls at all).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from evalops.domain.visible import escape_invisible, unicode_escape


def _picture(char: str) -> str:
    code = ord(char)
    if code <= 0x1F:
        return chr(0x2400 + code)  # U+2400 CONTROL PICTURES: NUL -> ␀, LF -> ␊, ...
    if code == 0x7F:
        return "\u2421"  # ␡
    return unicode_escape(char)


def visible(value: Any) -> str:
    """`value` as text with every unsafe character replaced by a visible marker.

    Control characters become U+2400 control pictures (a newline is `␊`); the other
    characters a reader cannot see or that move text (evalops.domain.visible: C1 controls,
    zero-width and bidirectional controls, U+2028/9, surrogates, noncharacters) become
    `\\u200b`-style escapes (escaped again by the output format, like any text).
    """
    text = value if isinstance(value, str) else str(value)
    return escape_invisible(text, _picture)


# What CommonMark or GitHub Flavored Markdown can read as markup anywhere in a line:
# emphasis and strikethrough, code, links and images (`[`), raw HTML and autolinks (`<`),
# entities (`&`), table cells (`|`), math (`$`), e-mail autolinks (`@`), and the backslash
# itself. A backslash escape makes each of them literal. Nothing else is escaped in the
# middle of text, so "p-value 0.125 > alpha" reads as written in the raw Markdown too.
_MD_ALWAYS = re.compile(r"([\\`*_\[\]<&|~$@])")
# URL autolinks (GFM): a scheme's `://` and a `www.` prefix.
_MD_SCHEME = re.compile(r":(?=/)")
_MD_WWW = re.compile(r"(?i)(?<=www)\.")
# What makes a block only at the start of a line: a heading, list item, block quote,
# setext underline or ordered-list number. The text may start a line (a list item's or
# table cell's first word), so its own start is escaped.
_MD_LINE_START = re.compile(r"^([ \t]*)([#+\-=>])")
_MD_ORDERED = re.compile(r"^([ \t]*\d{1,9})([.)])")
# Spaces at the text's edges are markup too: leading ones shift a list item's content
# column (un-nesting the sub-list under it) or start an indented code block, trailing
# ones end a line with a hard break. As character references they stay plain spaces.
_MD_EDGE_SPACES = re.compile(r"^ +| +$")


def md(value: Any) -> str:
    """Markdown-escape free text so it can never add lines, links, images or markup.

    The result is one line of literal text in any inline context (a paragraph, a list
    item, a table cell). Never use it inside raw HTML blocks: there Markdown escapes are
    not read.
    """
    text = _MD_ALWAYS.sub(r"\\\1", visible(value))
    text = _MD_WWW.sub(r"\\.", _MD_SCHEME.sub(r"\\:", text))
    text = _MD_LINE_START.sub(r"\1\\\2", text)
    text = _MD_ORDERED.sub(r"\1\\\2", text)
    return _MD_EDGE_SPACES.sub(lambda m: "&#32;" * len(m.group()), text)


_SAFE_URL = re.compile(r"^https?://[^\s\x00-\x1f\x7f-\x9f\"'<>\\^`{|}]+$", re.IGNORECASE)


def safe_url(value: Any) -> str | None:
    """`value` when it is an http(s) URL that is safe in an href, else None (shown as text)."""
    if not isinstance(value, str) or not _SAFE_URL.match(value):
        return None
    if any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp", "Cs", "Co") for c in value):
        return None
    return value


_ANCHOR_HASH = re.compile(r"sha256:[0-9a-f]{64}")


def anchor_token(anchor: Any) -> str | None:
    """`SEQ:sha256:HEX` of an audit anchor `{"seq", "hash"}`, or None unless well-formed.

    This is the token `evalops verify --anchors` finds in reports
    (`evalops-audit-head:(\\d+):(sha256:[0-9a-f]{64})`); anything else is never written as
    an anchor, so a damaged value can neither pose as one nor break out of a comment.
    """
    if not isinstance(anchor, dict):
        return None
    seq, hash_ = anchor.get("seq"), anchor.get("hash")
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 1:
        return None
    if not isinstance(hash_, str) or not _ANCHOR_HASH.fullmatch(hash_):
        return None
    return f"{seq}:{hash_}"
