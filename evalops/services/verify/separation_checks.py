"""`verify`'s separation-of-duties stage: every refusal `no_self_waiver` and `no_self_review`
would have made, re-made over the chain (exit 6), read through a `Reader` (plain SQL).

Each signed waiver, ingest, import and review is judged under the authority in force at its
event, against the acts recorded before it: a waiver whose signer had signed an ingest of
its build's trials; an ingest or import whose signer had signed a waiver of one of its
builds still valid then; a review whose signer had signed the ingest of the trial. The
recording commands refuse each of these (evalops/services/authority/acts.py); a pair in the
database means rows written around them. evalops/domain/separation.py states the rules.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from evalops.domain.separation import (
    NO_SELF_REVIEW,
    NO_SELF_WAIVER,
    IngestAct,
    self_waiver,
    shared_signers,
)
from evalops.services.gate.input_parts import reviewed_row
from evalops.services.reads.authority import authority_at
from evalops.store.reader import Reader, timestamp

_INGESTS = "('trials.ingest', 'trials.import')"


def _principals(text: Any) -> frozenset[str]:
    try:
        return frozenset(str(s["principal"]) for s in json.loads(text))
    except (TypeError, ValueError, KeyError):
        return frozenset()  # the signed-acts stage names a damaged signers list


def _builds(text: Any) -> frozenset[str]:
    try:
        found = json.loads(text).get("builds", [])
    except (TypeError, ValueError, AttributeError):
        return frozenset()
    return frozenset(str(b) for b in found) if isinstance(found, list) else frozenset()


class _Rules:
    """The separation rules of the authority in force at a seq (one read per sync run)."""

    def __init__(self, reader: Reader) -> None:
        self.reader = reader
        self.runs = [
            int(r["audit_seq"])
            for r in reader.rows('SELECT audit_seq FROM "sync_run" ORDER BY audit_seq')
        ]
        self.memo: dict[int, frozenset[str]] = {}

    def at(self, seq: int) -> frozenset[str]:
        run = max((r for r in self.runs if r <= seq), default=None)
        if run is None:
            return frozenset()
        if run not in self.memo:
            found = authority_at(self.reader, run)
            rules = getattr(found[0], "separation_of_duties", ()) if found else ()
            self.memo[run] = frozenset(str(r) for r in rules)
        return self.memo[run]


def separation_problem(reader: Reader) -> str | None:  # noqa: PLR0912  (three rules, one pass)
    """The first pair of acts a declared separation rule forbids, or None."""
    if not reader.scalar('SELECT count(*) FROM "signed_act"'):
        return None
    rules = _Rules(reader)
    ingests = [
        IngestAct(int(r["audit_seq"]), _builds(r["scope"]), _principals(r["signers"]))
        for r in reader.rows(
            f'SELECT audit_seq, scope, signers FROM "signed_act" WHERE kind IN {_INGESTS} '
            "ORDER BY audit_seq"
        )
    ]
    waivers = reader.rows(
        "SELECT a.audit_seq, a.signers, w.id, w.waiver_id, w.build, w.granted_at, w.expires_at "
        'FROM "signed_act" a JOIN "waiver" w ON w.audit_seq = a.audit_seq '
        "WHERE a.kind = 'waiver.grant' ORDER BY a.audit_seq"
    )
    revoked = {
        int(r["waiver_row_id"]): int(r["audit_seq"])
        for r in reader.rows(
            'SELECT waiver_row_id, min(audit_seq) AS audit_seq FROM "waiver_revocation" '
            "GROUP BY waiver_row_id"
        )
    }
    for w in waivers:
        seq = int(w["audit_seq"])
        if NO_SELF_WAIVER not in rules.at(seq):
            continue
        found = self_waiver(
            _principals(w["signers"]), w["build"], [i for i in ingests if i.seq < seq]
        )
        if found is not None:
            both, ingest_seq = found
            return (
                f"audit seq {seq}: waiver {w['waiver_id']} breaks {NO_SELF_WAIVER}: "
                f"{', '.join(both)} signed it and the ingest of build {w['build']}'s trials "
                f"(audit seq {ingest_seq})"
            )
    at = {
        int(r["seq"]): timestamp(r["at"])
        for r in reader.rows(
            f'SELECT e.seq, e.at FROM "audit_event" e JOIN "signed_act" a ON a.audit_seq = e.seq '
            f"WHERE a.kind IN {_INGESTS}"
        )
    }
    for ingest in ingests:
        if NO_SELF_WAIVER not in rules.at(ingest.seq) or ingest.seq not in at:
            continue
        when: datetime = at[ingest.seq]
        for w in waivers:
            seq = int(w["audit_seq"])
            if seq >= ingest.seq or w["build"] not in ingest.builds:
                continue
            if revoked.get(int(w["id"]), ingest.seq + 1) < ingest.seq:
                continue
            if not when < timestamp(w["expires_at"]):
                continue
            both = shared_signers(ingest.signers, _principals(w["signers"]))
            if both:
                return (
                    f"audit seq {ingest.seq}: an ingest breaks {NO_SELF_WAIVER}: "
                    f"{', '.join(both)} signed it and {w['waiver_id']}, valid then for "
                    f"{w['build']} (audit seq {seq})"
                )
    by_seq = {i.seq: i for i in ingests}
    for r in reader.rows(
        "SELECT a.audit_seq, a.signers, t.audit_seq AS trial_seq, t.trial_id "
        'FROM "signed_act" a JOIN "review_result" v ON v.audit_seq = a.audit_seq '
        f'JOIN "trial" t ON {reviewed_row("v")} '
        "WHERE a.kind = 'review.resolve' ORDER BY a.audit_seq"
    ):
        seq = int(r["audit_seq"])
        trial_ingest = by_seq.get(int(r["trial_seq"]))
        if trial_ingest is None or trial_ingest.seq >= seq or NO_SELF_REVIEW not in rules.at(seq):
            continue
        both = shared_signers(_principals(r["signers"]), trial_ingest.signers)
        if both:
            return (
                f"audit seq {seq}: the review of {r['trial_id']} breaks {NO_SELF_REVIEW}: "
                f"{', '.join(both)} signed it and the ingest of the trial (audit seq "
                f"{trial_ingest.seq})"
            )
    return None
