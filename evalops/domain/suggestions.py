"""What an "unknown id" error says besides "unknown": what exists, and the id meant.

A bare "not registered" leaves people guessing between a typo, the wrong kind of id and a
file not synced yet. The message names a handful of the ids that exist (then "and N more"),
the close match when there is one, and the sync step only when no id comes close (then it
is the likely fix).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Sequence

#: Ids an error names before "and N more": enough to recognise the kind, one line still.
SHOWN_IDS = 5

#: The step when an id is missing from the registry and nothing comes close to it.
SYNC_HINT = "if you just added it, commit it and run `evalops sync`"


def some_of(ids: Sequence[str], shown: int = SHOWN_IDS) -> str:
    """`a, b, c`, `a, b, c, d, e and 3 more`, or `none`."""
    if not ids:
        return "none"
    head = ", ".join(ids[:shown])
    rest = len(ids) - shown
    return f"{head} and {rest:,} more" if rest > 0 else head


#: Ids compared in full for a close match: difflib costs about half a millisecond an id, and
#: an error message must not take seconds on a registry of 100,000 tasks.
MAX_COMPARED = 2_000
# get_close_matches' default: a ratio of at least 0.6, 2 * matches / (len(a) + len(b)), is
# impossible when the shorter id is under 3/7 of the longer one's length.
_CUTOFF = 0.6


def _comparable(given: str, ids: Sequence[str]) -> list[str]:
    """The ids a close match can be among: of a length that can reach the cutoff (exact);
    when still too many, those sharing the first character (a typo rarely starts there)."""
    n = len(given)
    sized = [i for i in ids if min(n, len(i)) * 2 >= _CUTOFF * (n + len(i))]
    if len(sized) > MAX_COMPARED:
        sized = [i for i in sized if i[:1] == given[:1]]
    return sized if len(sized) <= MAX_COMPARED else []


def close_match(given: str, ids: Sequence[str]) -> str | None:
    """The id most like `given` (a typo, another case), or None when none is close (or the
    registry is too large to compare them all without a noticeable wait)."""
    lowered = given.lower()
    by_case = [i for i in ids if i.lower() == lowered]
    if by_case:
        return by_case[0]
    found = difflib.get_close_matches(given, _comparable(given, ids), n=1, cutoff=_CUTOFF)
    return found[0] if found else None


def numbered_guess(given: str, prefix: str) -> str | None:
    """The numbered id `given` probably means (`2`, `gate-2`, `gate2` -> `GATE-2` for the
    prefix `GATE-`), or None when it has no number to go by or is already that id."""
    match = re.fullmatch(rf"(?:{re.escape(prefix.rstrip('-'))}-?)?0*(\d+)", given, re.I)
    if match is None:
        return None
    guess = f"{prefix}{match.group(1)}"
    return None if guess == given else guess


def unknown_id(
    noun: str,
    given: str,
    known: Sequence[str],
    *,
    status: str = "registered",
    nouns: str | None = None,
) -> str:
    """`task 'frist-task' is not registered; did you mean 'first-task'? (tasks registered:
    first-task, ...)`; with no close match, the ids and the sync step instead."""
    head = f"{noun} {given!r} is not {status}"
    listed = f"{nouns or noun + 's'} {status}: {some_of(known)}"
    match = close_match(given, known)
    if match is not None:
        return f"{head}; did you mean {match!r}? ({listed})"
    return f"{head}; {listed} ({SYNC_HINT})"


def unknown_numbered(
    noun: str, given: str, prefix: str, exists: Callable[[str], bool], listing: str
) -> str:
    """`unknown gate decision '2'; did you mean GATE-2?` when `exists(guess)` is true, else
    the command that lists them."""
    guess = numbered_guess(given, prefix)
    if guess is not None and exists(guess):
        return f"unknown {noun} {given!r}; did you mean {guess}?"
    return f"unknown {noun} {given!r} (list them with `{listing}`)"
