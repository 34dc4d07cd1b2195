"""Signed acts against the authority in force: sign, judge and store them.

A command that records a signed act (a waiver grant, a revocation, ...) calls `authorize`
inside its write transaction with the body it would store. Without an authority in force
the act is recorded as before, unsigned. With one, the act must be signed (docs/authority.md):
`--print-act` prints it and stores nothing; `--sign-with KEY` signs it here with
`ssh-keygen -Y sign`; `--act FILE --signature FILE...` brings signatures made elsewhere.
`verify` re-verifies the stored acts in evalops/services/verify/act_checks.py.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from evalops.domain import audit_kinds
from evalops.domain.authority import (
    MAX_ACT_BYTES,
    MAX_SIGNATURE_BYTES,
    NAMESPACE,
    Judgement,
    MalformedAct,
    Scope,
    act_bytes,
    compose,
    judge,
    read_act,
)
from evalops.domain.canonical import canonical_text
from evalops.domain.separation import NO_SELF_WAIVER, shared_signers
from evalops.domain.specs import AuthoritySpec
from evalops.domain.timestamps import format_timestamp, parse_timestamp
from evalops.errors import InputError, RefusedError
from evalops.store import queries
from evalops.store.audit import append_event
from evalops.store.engine import write_session
from evalops.store.tables import SignedAct, Waiver, WaiverRevocation


@dataclass(frozen=True)
class Signing:
    """How the act of one command is signed (none of these: unsigned)."""

    print_act: bool = False
    keys: tuple[Path, ...] = ()
    act_file: Path | None = None
    signature_files: tuple[Path, ...] = ()

    @property
    def given(self) -> bool:
        return self.print_act or bool(self.keys) or self.act_file is not None

    def check(self) -> None:
        """Options that cannot go together (exit 2)."""
        if self.print_act and (self.keys or self.act_file or self.signature_files):
            others = [
                name
                for name, given in (
                    ("--sign-with", self.keys),
                    ("--act", self.act_file),
                    ("--signature", self.signature_files),
                )
                if given
            ]
            raise InputError(
                f"--print-act prints the act to sign and stores nothing: not with "
                f"{' or '.join(others)}",
                field="--print-act",
            )
        if self.keys and (self.act_file or self.signature_files):
            raise InputError("--sign-with signs a new act: not with --act", field="--sign-with")
        if self.act_file is not None and not self.signature_files:
            raise InputError("--act needs at least one --signature FILE", field="--signature")
        if self.signature_files and self.act_file is None:
            raise InputError("--signature needs the --act FILE it signs", field="--act")

    def act_time(self) -> datetime | None:
        """The `signed_at` of a supplied act: relative options resolve against it."""
        if self.act_file is None:
            return None
        return parse_timestamp(_read_act_file(self.act_file)[1]["signed_at"])


#: No signing option given: the act is recorded unsigned when no authority is in force.
UNSIGNED = Signing()


class ActToSign(Exception):
    """`--print-act`: the act to sign, nothing stored."""

    def __init__(self, data: bytes) -> None:
        super().__init__("act to sign")
        self.data = data


@dataclass
class Authorized:
    """What `authorize` decided: unsigned (no authority), signed, or refused."""

    kind: str
    authority_digest: str | None = None
    data: bytes = b""
    act_id: str = ""
    signatures: list[bytes] = field(default_factory=list)
    judgement: Judgement = field(default_factory=Judgement)
    scope: Scope = field(default_factory=Scope)
    authority: AuthoritySpec | None = None
    body: dict[str, Any] = field(default_factory=dict)

    @property
    def signed(self) -> bool:
        return self.authority_digest is not None and self.judgement.ok

    @property
    def refused(self) -> bool:
        return not self.judgement.ok

    def payload(self) -> dict[str, Any]:
        """What the act's audit event says about it (its rows digest covers the rest)."""
        if not self.signed:
            return {}
        return {
            **self.body,
            "signed_act": {
                "act_id": self.act_id,
                "authority_digest": self.authority_digest,
                "signers": [s.as_dict() for s in self.judgement.signers],
            },
        }

    def add_row(self, session: Session, subject: str, seq: int) -> SignedAct | None:
        """The signed act's row, added to the session (None when unsigned)."""
        if not self.signed:
            return None
        assert self.authority_digest is not None
        row = SignedAct(
            act_id=self.act_id,
            kind=self.kind,
            subject=subject,
            act=self.data.decode("utf-8"),
            signatures=canonical_text([s.decode("ascii") for s in self.signatures]),
            signers=canonical_text([s.as_dict() for s in self.judgement.signers]),
            scope=canonical_text(self.scope.as_dict()),
            authority_digest=self.authority_digest,
            audit_seq=seq,
        )
        session.add(row)
        return row


def authority_in_force(
    session: Session, cutoff: int | None = None
) -> tuple[AuthoritySpec, str] | None:
    # At most one authority is in force (validate and sync refuse a second one).
    rows = queries.in_force_rows(session, "authority", cutoff)
    row = max(rows.values(), key=lambda r: r.id, default=None)
    if row is None:
        return None
    return AuthoritySpec.model_validate(json.loads(row.document)), row.policy_digest


def read_bounded(path: Path, limit: int, what: str, option: str, size: str) -> bytes:
    """At most `limit` bytes of `path` (exit 2 beyond): /dev/zero or a huge file is refused
    after `limit` + 1 bytes, never read whole."""
    try:
        with path.open("rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise InputError(
            f"cannot read the {what}: {exc.strerror}", str(path), field=option
        ) from None
    if len(data) > limit:
        raise InputError(f"the {what} is larger than {size}", str(path), field=option)
    return data


def _read_act_file(path: Path) -> tuple[bytes, dict[str, Any]]:
    data = read_bounded(path, MAX_ACT_BYTES, "act", "--act", "1 MiB")
    try:
        return data, read_act(data)
    except MalformedAct as exc:
        raise InputError(str(exc), str(path), field="--act") from None


def _read_signature(path: Path) -> bytes:
    data = read_bounded(path, MAX_SIGNATURE_BYTES, "signature", "--signature", "64 KiB")
    # Imported here: cryptography is needed only where a signature is read.
    from evalops.domain import sshsig

    try:
        key = sshsig.parse_signature(data).public_key
        sshsig.identity(key)  # a key that cannot be loaded: a malformed file, not a refusal
    except (sshsig.MalformedSignature, sshsig.MalformedKey) as exc:
        raise InputError(
            f"malformed SSH signature: {exc}", str(path), field="--signature"
        ) from None
    return data


def sign_with_key(key: Path, data: bytes) -> bytes:
    """`ssh-keygen -Y sign -n evalops -f KEY` over `data` (ssh-agent and hardware keys work:
    ssh-keygen finds them from the key file as it always does)."""
    if not key.exists() and not Path(f"{key}.pub").exists():
        # ssh-keygen would say "Couldn't load public key" of a private key path.
        raise InputError(
            "no such key file: give a private key made by ssh-keygen, or the public key of "
            "one ssh-agent holds",
            str(key),
            field="--sign-with",
        )
    if key.is_dir():
        # ssh-keygen would say "No such file or directory" of a directory that exists.
        raise InputError(
            "a directory, not a key file: give a private key made by ssh-keygen, or the "
            "public key of one ssh-agent holds",
            str(key),
            field="--sign-with",
        )
    try:
        done = subprocess.run(
            ["ssh-keygen", "-q", "-Y", "sign", "-n", NAMESPACE, "-f", str(key)],
            input=data,
            capture_output=True,
            check=False,
            timeout=300,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InputError(f"cannot run ssh-keygen: {exc}", str(key), field="--sign-with") from None
    if done.returncode != 0:
        why = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise InputError(
            f"ssh-keygen could not sign: {why[-1] if why else done.returncode}",
            str(key),
            field="--sign-with",
        )
    return done.stdout


def authorize(
    session: Session,
    *,
    kind: str,
    body: Mapping[str, Any],
    scope: Scope,
    signing: Signing,
    now: datetime,
) -> Authorized:
    """Judge the act `body` of `kind` against the authority in force (call in the write
    transaction). Raises ActToSign for --print-act and InputError for bad files."""
    found = authority_in_force(session)
    if found is None:
        if signing.given:
            raise InputError(
                "no authority is in force: there is nothing to sign this act against "
                "(sync a registry/policies/authority.yaml first)",
                field="--print-act" if signing.print_act else "--sign-with",
            )
        return Authorized(kind)
    authority, digest = found
    registry = queries.registry_id(session)
    assert registry is not None  # an authority in force was put there by a sync's event
    if signing.act_file is not None:
        data, _ = _read_act_file(signing.act_file)
        signatures = [_read_signature(p) for p in signing.signature_files]
    else:
        act = compose(
            kind,
            body,
            act_id=str(uuid.uuid4()),
            signed_at=format_timestamp(now),
            authority_digest=digest,
            registry_id=registry,
        )
        data = act_bytes(act)
        if signing.print_act:
            raise ActToSign(data)
        signatures = [sign_with_key(k, data) for k in signing.keys]
    out = Authorized(
        kind, digest, data, "", signatures, scope=scope, authority=authority, body=dict(body)
    )
    if not signatures:
        out.judgement = Judgement(
            refusal=f"{kind} is unsigned and authority {authority.id} ({digest}) is in force: "
            "sign it with --sign-with KEY, or --print-act then --act FILE --signature FILE"
        )
        return out
    out.act_id = read_act(data)["act_id"]
    out.judgement = judge(
        kind=kind,
        body=body,
        data=data,
        signatures=signatures,
        authority=authority,
        authority_digest=digest,
        scope=scope,
        now=now,
        registry_id=registry,
    )
    if out.judgement.ok:
        used = session.exec(select(SignedAct).where(SignedAct.act_id == out.act_id)).first()
        if used is not None:
            out.judgement = Judgement(
                refusal=f"act_id {out.act_id} was already used (audit seq {used.audit_seq}): "
                "an act is recorded once",
                rule="replay",
            )
    return out


class ActRefused(Exception):
    """A refused act whose command had already written rows: roll back, then audit apart."""

    def __init__(self, authorized: Authorized) -> None:
        super().__init__(authorized.judgement.refusal)
        self.authorized = authorized


def record_refusal_apart(
    engine: Engine, refused: ActRefused, *, subject: str, actor: str, now: datetime
) -> RefusedError:
    """Audit the refusal in its own transaction; the error for the caller to raise."""
    with write_session(engine) as session:
        refusal = record_refusal(session, refused.authorized, subject=subject, actor=actor, now=now)
    return RefusedError(
        f"{refused.authorized.kind} refused: [{refusal['rule']}] {refusal['message']}"
    )


INGEST_ACTS = ("trials.ingest", "trials.import")


def separation_refusal(
    session: Session, authorized: Authorized, rule: str, *, ingest_seqs: list[int] | None = None,
    build: str | None = None,
) -> None:  # fmt: skip
    """Refuse `authorized` (in place) when `rule` is declared and one of its signers also
    signed an ingest of what the act judges: the batches of `ingest_seqs`, or any batch
    holding trials of `build`."""
    if not authorized.signed or authorized.authority is None:
        return
    if rule not in authorized.authority.separation_of_duties:
        return
    stmt = select(SignedAct).where(col(SignedAct.kind).in_(INGEST_ACTS))
    if ingest_seqs is not None:
        stmt = stmt.where(col(SignedAct.audit_seq).in_(ingest_seqs))
    mine = {s.principal for s in authorized.judgement.signers}
    for ingest in session.exec(stmt).all():
        if build is not None and build not in json.loads(ingest.scope).get("builds", []):
            continue
        both = sorted(mine & {s["principal"] for s in json.loads(ingest.signers)})
        if both:
            authorized.judgement = Judgement(
                refusal=f"{rule}: {', '.join(both)} signed the ingest of these trials "
                f"(audit seq {ingest.audit_seq}) and may not sign this {authorized.kind}",
                rule=rule,
            )
            return


def ingest_separation_refusal(
    session: Session, authorized: Authorized, builds: tuple[str, ...], now: datetime
) -> None:
    """`no_self_waiver` from the ingest's side: refuse `authorized` (an ingest or import,
    in place) when one of its signers signed a waiver for one of `builds` that has not
    expired by `now` and is not revoked."""
    if not authorized.signed or authorized.authority is None or not builds:
        return
    if NO_SELF_WAIVER not in authorized.authority.separation_of_duties:
        return
    mine = {s.principal for s in authorized.judgement.signers}
    waivers = session.exec(
        select(Waiver).where(col(Waiver.build).in_(builds)).order_by(col(Waiver.id))
    ).all()
    for waiver in waivers:
        # Recorded is enough, whatever its grant time says: a clock behind the waiver's
        # must not let the pair in. Only an expired or revoked waiver no longer conflicts.
        if not now < waiver.expires_at:
            continue
        revoked = session.exec(
            select(WaiverRevocation).where(WaiverRevocation.waiver_row_id == waiver.id)
        ).first()
        if revoked is not None:
            continue
        both = shared_signers(mine, (s["principal"] for s in signers_of(
            session, "waiver.grant", waiver.audit_seq
        )))  # fmt: skip
        if both:
            authorized.judgement = Judgement(
                refusal=f"{NO_SELF_WAIVER}: {', '.join(both)} signed {waiver.waiver_id}, still "
                f"valid for {waiver.build} (audit seq {waiver.audit_seq}), and may not sign "
                f"the ingest of that build's trials",
                rule=NO_SELF_WAIVER,
            )
            return


def record_refusal(
    session: Session,
    authorized: Authorized,
    *,
    subject: str,
    actor: str,
    now: datetime,
    request: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Audit a refused act (nothing else is written) and say why. `request`: what the
    command was asked (a waiver's: the gate lists the refusal with the build's waivers)."""
    refusal = {"rule": authorized.judgement.rule, "message": authorized.judgement.refusal or ""}
    payload: dict[str, Any] = {
        "act": authorized.kind,
        "act_id": authorized.act_id or None,
        "authority_digest": authorized.authority_digest,
        "refusal": refusal,
    }
    if request is not None:
        payload["request"] = dict(request)
    append_event(
        session,
        at=now,
        actor=actor,
        kind=audit_kinds.AUTHORITY_REFUSED,
        subject=subject,
        payload=payload,
    )
    return refusal


def signers_of(session: Session, kind: str, audit_seq: int) -> list[dict[str, str]]:
    """The signers of the act recorded with the event `audit_seq` ([] when unsigned)."""
    row = session.exec(
        select(SignedAct).where(SignedAct.audit_seq == audit_seq, SignedAct.kind == kind)
    ).first()
    return [] if row is None else list(json.loads(row.signers))
