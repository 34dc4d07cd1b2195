"""The audit chain's hash recipe, recomputed independently of evalops.

docs/verify.md gives the recipe anyone can recompute with `hashlib` and `rfc8785`:

    hash = sha256(canonical_json({"prev": prev_hash, "event": {seq, at, actor, kind,
                                  subject, payload_digest}}))

with the genesis `prev` = "sha256:" + 64 zeros. These tests implement it here from those
words (never through `evalops.domain.canonical`) and hold the stored chain to it; a chain whose
hashes did not cover `prev` would let someone rewrite a middle event and keep the head.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalops.domain.audit_chain import ChainEvent, event_hash, first_chain_problem
from tests.audit_recipe import (
    EVENT_FIELDS,
    GENESIS,
    recipe_hash,
    recomputed_head,
    stored_at,
)
from tests.conftest import Cli

# ------------------------------------------------------------------------ pure recipe

text = st.text(max_size=12)
events = st.fixed_dictionaries(
    {
        "seq": st.integers(1, 2**53 - 1),
        "at": text,
        "actor": text,
        "kind": text,
        "subject": text,
        "payload_digest": text,
    }
)
hashes = st.just(GENESIS) | st.text("0123456789abcdef", min_size=64, max_size=64).map(
    lambda h: "sha256:" + h
)


@settings(max_examples=200, deadline=None)
@given(hashes, events)
def test_event_hash_is_the_documented_recipe(prev: str, event: dict[str, Any]) -> None:
    assert event_hash(prev, **event) == recipe_hash(prev, event)


def test_the_hash_covers_prev_and_every_field() -> None:
    event: dict[str, Any] = {
        "seq": 3,
        "at": "2026-11-30T12:00:00.000000Z",
        "actor": "a",
        "kind": "k",
        "subject": "s",
        "payload_digest": "sha256:" + "1" * 64,
    }
    base = event_hash(GENESIS, **event)
    assert event_hash("sha256:" + "f" * 64, **event) != base
    for name in EVENT_FIELDS:
        changed = {**event, name: event[name] + 1 if name == "seq" else event[name] + "x"}
        assert event_hash(GENESIS, **changed) != base, name


def chain_of(n: int) -> list[ChainEvent]:
    """A well-formed chain of `n` events, hashed with the recipe."""
    out: list[ChainEvent] = []
    prev = GENESIS
    for seq in range(1, n + 1):
        fields: dict[str, Any] = {
            "seq": seq,
            "at": f"2026-11-30T12:00:0{seq}.000000Z",
            "actor": "a@example.com",
            "kind": "sync.task",
            "subject": f"task:t{seq}@1",
            "payload_digest": "sha256:" + f"{seq:x}" * 64,
        }
        h = recipe_hash(prev, fields)
        out.append(ChainEvent(prev_hash=prev, hash=h, **fields))
        prev = h
    return out


def test_a_well_formed_chain_has_no_problem() -> None:
    assert first_chain_problem(chain_of(4)) is None
    assert first_chain_problem([]) is None


def test_the_first_event_must_link_to_the_genesis_hash() -> None:
    first, *rest = chain_of(3)
    forged = ChainEvent(**{**first.__dict__, "prev_hash": "sha256:" + "e" * 64})
    assert first_chain_problem([forged, *rest]) == "audit seq 1: prev_hash does not link to seq 0"


def test_a_missing_event_is_named_by_the_seq_expected() -> None:
    a, _, c, d = chain_of(4)
    assert first_chain_problem([a, c, d]) == "audit seq 2: missing (next stored seq is 3)"
    assert first_chain_problem([c, d]) == "audit seq 1: missing (next stored seq is 3)"


def test_a_rehashed_middle_event_breaks_the_next_link() -> None:
    a, b, c = chain_of(3)
    fields = {k: getattr(b, k) for k in EVENT_FIELDS}
    fields["actor"] = "mallory@example.com"
    forged = ChainEvent(prev_hash=b.prev_hash, hash=recipe_hash(b.prev_hash, fields), **fields)
    assert first_chain_problem([a, forged, c]) == "audit seq 3: prev_hash does not link to seq 2"


def test_an_edited_field_is_a_hash_mismatch_naming_both_hashes() -> None:
    a, b, c = chain_of(3)
    edited = ChainEvent(**{**c.__dict__, "subject": "task:other@1"})
    problem = first_chain_problem([a, b, edited])
    fields = {k: getattr(edited, k) for k in EVENT_FIELDS}
    assert problem == (
        f"audit seq 3: hash mismatch (stored {c.hash}, recomputed {recipe_hash(b.hash, fields)})"
    )


# -------------------------------------------------------------------- the stored chain


def test_the_stored_chain_recomputes_from_the_recipe(synced: Path, cli: Cli) -> None:
    seq, head = recomputed_head(synced / ".evalops" / "registry.db")
    result = cli("verify", "--json", cwd=synced)
    assert result.code == 0, result.stderr
    assert result.json()["audit_head"] == {"seq": seq, "hash": head}


def _rewrite_middle_event(db: Path, seq: int) -> None:
    """What someone with write access and evalops's own code does: edit one event's actor,
    re-hash it, and re-hash every later event so the chain links again."""
    con = sqlite3.connect(db)
    try:
        con.execute("UPDATE audit_event SET actor = 'mallory@example.com' WHERE seq = ?", (seq,))
        rows = con.execute(
            "SELECT seq, at, actor, kind, subject, payload_digest, prev_hash FROM audit_event"
            " WHERE seq >= ? ORDER BY seq",
            (seq,),
        ).fetchall()
        prev = rows[0][6]
        for s, at, actor, kind, subject, payload_digest, _ in rows:
            new = event_hash(prev, seq=s, at=stored_at(at), actor=actor, kind=kind,
                             subject=subject, payload_digest=payload_digest)  # fmt: skip
            con.execute("UPDATE audit_event SET prev_hash = ?, hash = ? WHERE seq = ?",
                        (prev, new, s))  # fmt: skip
            prev = new
        con.commit()
    finally:
        con.close()


@pytest.mark.tampers
def test_a_rewritten_middle_event_fails_the_anchor(synced: Path, cli: Cli) -> None:
    before = cli("verify", "--json", cwd=synced)
    assert before.code == 0, before.stderr
    head = before.json()["audit_head"]
    assert head["seq"] >= 3  # seq 2 is a middle event
    _rewrite_middle_event(synced / ".evalops" / "registry.db", 2)

    anchored = cli("verify", "--anchor", f"{head['seq']}:{head['hash']}", cwd=synced)

    assert anchored.code == 6, anchored.stdout + anchored.stderr
    assert str(head["seq"]) in anchored.stderr
    assert "Traceback" not in anchored.stderr


def test_the_audit_head_verify_prints_is_an_anchor_and_a_bad_one_says_where_to_look(
    synced: Path, cli: Cli
) -> None:
    done = cli("verify", cwd=synced)
    assert done.code == 0, done.stderr
    (line,) = [x for x in done.stdout.splitlines() if x.strip().startswith("audit head ")]
    printed = line.split()[2]
    assert cli("verify", "--anchor", printed, cwd=synced).code == 0
    bad = cli("verify", "--anchor", printed.replace("sha256:", ""), cwd=synced)
    assert bad.code == 2, bad.stdout + bad.stderr
    assert "the `audit head` line of `evalops verify`" in bad.stderr, bad.stderr
    assert "`audit_head`'s seq and hash under --json" in bad.stderr, bad.stderr


@pytest.mark.postgres
@pytest.mark.tampers
def test_a_rewritten_middle_event_fails_the_anchor_on_postgresql(
    workspace: Path, cli: Cli, pg_url: str
) -> None:
    import psycopg

    from evalops.domain.vocabulary import format_timestamp

    assert cli("--db", pg_url, "init", cwd=workspace).code == 0
    assert cli("--db", pg_url, "sync", cwd=workspace).code == 0
    before = cli("--db", pg_url, "verify", "--json", cwd=workspace)
    assert before.code == 0, before.stderr
    head = before.json()["audit_head"]
    assert head["seq"] >= 3
    with psycopg.connect(pg_url.replace("+psycopg", ""), autocommit=True) as conn:
        conn.execute("UPDATE audit_event SET actor = 'mallory@example.com' WHERE seq = 2")
        rows = conn.execute(
            "SELECT seq, at, actor, kind, subject, payload_digest, prev_hash FROM audit_event"
            " WHERE seq >= 2 ORDER BY seq"
        ).fetchall()
        prev = rows[0][6]
        for seq, at, actor, kind, subject, payload_digest, _ in rows:
            new = event_hash(prev, seq=seq, at=format_timestamp(at), actor=actor, kind=kind,
                             subject=subject, payload_digest=payload_digest)  # fmt: skip
            conn.execute(
                "UPDATE audit_event SET prev_hash = %s, hash = %s WHERE seq = %s", (prev, new, seq)
            )
            prev = new

    anchored = cli("--db", pg_url, "verify", "--anchor", f"{head['seq']}:{head['hash']}",
                   cwd=workspace)  # fmt: skip

    assert anchored.code == 6, anchored.stdout + anchored.stderr
    assert str(head["seq"]) in anchored.stderr
