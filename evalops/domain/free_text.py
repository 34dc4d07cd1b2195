"""When does free text say something? A requirement that reads free text (an approver, an
invariant, an owner, a reason) is met only by a visible character.

Spaces of every kind (Unicode category Z*, line and paragraph separators included), control
and format characters (zero-width spaces and joiners, bidi marks, the BOM), marks with no
base, and the few letters that render as nothing (the Hangul fillers, the Braille blank) are
not: a string of them looks empty on every screen, so it must never stand for a person or
a reason.
"""

from __future__ import annotations

import unicodedata

# Code points outside the categories below that still render as blank space.
_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")
_INVISIBLE_CATEGORIES = frozenset({"Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co", "Cn", "Mn", "Me"})


def is_visible(char: str) -> bool:
    """Whether one character shows as something on screen."""
    return (
        not char.isspace()
        and char not in _BLANK_LETTERS
        and unicodedata.category(char) not in _INVISIBLE_CATEGORIES
    )


def has_visible_text(value: str | None) -> bool:
    """Whether `value` holds at least one visible character (None and "" do not)."""
    return value is not None and any(is_visible(c) for c in value)
