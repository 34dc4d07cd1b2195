"""Separation of duties as a property of the registry (docs/authority.md, "Separation of
duties"): which pairs of acts the rules forbid, whichever of the two came first.

`no_self_waiver`: no signer of a waiver for build B signed an ingest of B's trials.
`no_self_review`: no signer of a review signed the ingest of the trial reviewed.
The recording commands refuse the second act of a pair (`waiver grant`, `trials ingest`,
`trials import`, `review resolve`), the gate treats a waiver of such a pair as refused,
and `verify` re-makes every refusal over the chain. Pure: callers read the acts.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

NO_SELF_WAIVER = "no_self_waiver"
NO_SELF_REVIEW = "no_self_review"


@dataclass(frozen=True)
class IngestAct:
    """A signed `trials.ingest` / `trials.import`: its audit seq, builds and signers."""

    seq: int
    builds: frozenset[str]
    signers: frozenset[str]


def shared_signers(mine: Iterable[str], theirs: Iterable[str]) -> list[str]:
    return sorted(set(mine) & set(theirs))


def self_waiver(
    waiver_signers: Iterable[str], build: str, ingests: Iterable[IngestAct]
) -> tuple[list[str], int] | None:
    """(principals who signed both, the ingest's seq) for the first ingest of `build`'s
    trials signed by a signer of the waiver; None when there is none."""
    signers = frozenset(waiver_signers)
    for ingest in sorted(ingests, key=lambda i: i.seq):
        if build in ingest.builds:
            both = shared_signers(signers, ingest.signers)
            if both:
                return both, ingest.seq
    return None


def self_waiver_reason(waiver_id: str, both: list[str], ingest_seq: int) -> str:
    return (
        f"{NO_SELF_WAIVER}: {', '.join(both)} signed {waiver_id} and the ingest of its "
        f"build's trials (audit seq {ingest_seq})"
    )


def self_reviews(reviews: Iterable[tuple[int, Iterable[str], Iterable[str]]]) -> frozenset[int]:
    """The audit seqs of the reviews that `no_self_review` refuses: of (review seq, the
    review's signer principals, the signer principals of the reviewed trial's ingest or
    import), those where some principal signed both. Which act came first does not matter."""
    return frozenset(seq for seq, mine, theirs in reviews if shared_signers(mine, theirs))
