"""Which characters must never be shown raw, and how they are spelled instead.

Stored text is kept as given; wherever it is shown (the terminal, HTML, Markdown, JUnit,
text reports) a character that a reader cannot see, or that moves what they see, is
written as a visible escape, so `build-125` followed by a zero-width space never reads as
`build-125`, and a line separator never starts a line. One rule for every output:

- controls (Unicode category Cc: C0, DEL, C1);
- format characters (Cf): zero-width spaces and joiners, the soft hyphen, the byte-order
  mark, tag characters, and every bidirectional control (U+061C, U+200E/F, U+202A-E,
  U+2066-9), which can reorder what is read;
- line and paragraph separators (Zl, Zp: U+2028, U+2029);
- lone surrogates (Cs: not encodable) and noncharacters (parse errors in HTML).

Pure and cheap: printable ASCII is never looked at character by character.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from functools import lru_cache

INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})

# Everything outside printable ASCII is a candidate; the category decides.
_CANDIDATE = re.compile(r"[^\x20-\x7e]")


@lru_cache(maxsize=4096)
def is_invisible(char: str) -> bool:
    """Whether `char` must be escaped wherever text is shown."""
    code = ord(char)
    if 0xFDD0 <= code <= 0xFDEF or (code & 0xFFFE) == 0xFFFE:
        return True  # a noncharacter
    return unicodedata.category(char) in INVISIBLE_CATEGORIES


def unicode_escape(char: str) -> str:
    """`\\u200b` (or `\\U000e0001` beyond the BMP): the spelling the contract shows."""
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def escape_invisible(text: str, spell: Callable[[str], str] = unicode_escape) -> str:
    """`text` with every invisible character replaced by `spell(char)`."""
    if text.isascii() and text.isprintable():
        return text

    def replace(match: re.Match[str]) -> str:
        char = match.group()
        return spell(char) if is_invisible(char) else char

    return _CANDIDATE.sub(replace, text)


def utf8_bytes_escape(char: str) -> str:
    """`\\xe2\\x80\\xae`: the character's UTF-8 bytes, as bash's `$'...'` reads them in every
    locale (its `\\u` escapes depend on the locale: under LC_ALL=C they stay text)."""
    return "".join(f"\\x{b:02x}" for b in char.encode("utf-8", "surrogatepass"))


def shell_word(value: str) -> str:
    """`value` as one shell word that pastes back as exactly `value` once shown: POSIX
    quoting (`shlex.quote`), or bash's `$'...'` with every invisible character spelled as
    its UTF-8 bytes when it holds one (shown raw it would be escaped into text that reads
    back as a backslash and letters, naming another value)."""
    import shlex

    if not any(is_invisible(c) for c in _CANDIDATE.findall(value)):
        return shlex.quote(value)
    body = value.replace("\\", "\\\\").replace("'", "\\'")
    return "$'" + escape_invisible(body, utf8_bytes_escape) + "'"
