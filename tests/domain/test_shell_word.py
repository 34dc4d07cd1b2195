"""Suggested commands paste as they are shown (docs/cli.md): `shell_word` quotes a value so
that bash, given the shown text, reads back exactly the value. The reference is bash itself."""

from __future__ import annotations

import subprocess

from hypothesis import given, settings
from hypothesis import strategies as st

from evalops.domain.visible import escape_invisible, shell_word

HOSTILE = [
    "refund:\u202eA-1",  # a bidi override in an effect key
    "build-125\u200b",  # a zero-width space
    "it's",
    "back\\slash\u2028line",
    "esc\x1b[31m",
    "tag\U000e0041",
    "plain",
    "",
]


def _bash_reads(words: list[str], locale: str = "C.UTF-8") -> list[str]:
    """What bash makes of the shown words under `locale`: each printed NUL-terminated."""
    shown = " ".join(escape_invisible(w) for w in words)
    done = subprocess.run(
        ["bash", "-c", f"printf '%s\\0' {shown}"],
        capture_output=True,
        check=True,
        env={"PATH": "/usr/bin:/bin", "LC_ALL": locale},
    )
    return done.stdout.decode("utf-8", "surrogateescape").split("\0")[:-1]


def test_hostile_values_paste_back_as_themselves_in_every_locale() -> None:
    """Under LC_ALL=C (a container without a locale) bash leaves `\\u202e` as text; the
    UTF-8 bytes read back alike whatever the locale."""
    quoted = [shell_word(v) for v in HOSTILE]
    for locale in ("C.UTF-8", "C", "POSIX"):
        assert _bash_reads(quoted, locale) == HOSTILE, locale
    # What is shown holds no invisible character: the terminal shows it as it is.
    for q in quoted:
        assert escape_invisible(q) == q


@given(
    st.lists(
        st.text(
            st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"),
            max_size=12,
        ),
        min_size=1,
        max_size=4,
    )
)
@settings(max_examples=60, deadline=None)
def test_any_text_pastes_back_as_itself(values: list[str]) -> None:
    assert _bash_reads([shell_word(v) for v in values]) == values
