"""Kind and free-text reason share the retirement row's one `reason` column: what is stored
reads back as what was given, for every kind and for texts that look like stored values."""

from __future__ import annotations

import itertools

from evalops.domain.retirement_reason import RetirementReason, read_stored

KINDS = ("obsolete", "unsupported", "replaced")
TEXTS = (
    "obsolete",
    "unsupported",
    "replaced",
    "replaced: by new-task",
    "obsolete:",
    ": leading separator",
    "plain words",
    "unsupported:no space",
    "x" * 4096,
)


def test_every_kind_and_text_round_trips_through_the_stored_column() -> None:
    seen: dict[str | None, tuple[str, str]] = {}
    for kind, text in itertools.product(KINDS, TEXTS):
        stored = RetirementReason(kind, text).stored()
        assert read_stored(stored) == RetirementReason(kind, text), (kind, text, stored)
        assert seen.setdefault(stored, (kind, text)) == (kind, text), stored  # injective


def test_the_old_words_are_stored_and_signed_as_they_always_were() -> None:
    for word in KINDS:
        why = RetirementReason(word, word)
        assert why.stored() == word
        assert why.act_fields() == {"reason": word}
        assert read_stored(word) == why


def test_a_row_of_unknown_form_reads_as_text_without_a_kind() -> None:
    assert read_stored("retired by hand") == RetirementReason(None, "retired by hand")
    assert read_stored("stale: gone") == RetirementReason(None, "stale: gone")
    assert read_stored(None) == RetirementReason(None, None)
