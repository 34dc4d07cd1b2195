"""Signed acts against the authority in force: sign, judge, store, and re-verify.

A command that records a signed act (a waiver grant, a revocation, ...) calls `authorize`
inside its write transaction with the body it would store. Without an authority in force
the act is recorded as before, unsigned. With one, the act must be signed (docs/authority.md):
`--print-act` prints it and stores nothing; `--sign-with KEY` signs it here with
`ssh-keygen -Y sign`; `--act FILE --signature FILE...` brings signatures made elsewhere.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import uuid
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from evalops.domain import audit_kinds, sshsig
from evalops.domain.authority import (
    META_FIELDS,
    NAMESPACE,
    Judgement,
    MalformedAct,
    Scope,
    SignatureJudge,
    Signer,
    act_bytes,
    compose,
    judge,
    read_act,
)
from evalops.domain.canonical import canonical_text
from evalops.domain.specs import AuthoritySpec
from evalops.domain.vocabulary import format_timestamp, parse_timestamp
from evalops.errors import EvalopsError, InputError, RefusedError, VerificationError
from evalops.store import queries
from evalops.store.audit import append_event
from evalops.store.engine import raw_rows, write_session
from evalops.store.tables import SignedAct, SyncRun

if TYPE_CHECKING:
    from concurrent.futures import Future


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
            raise InputError("--print-act stores nothing: give it alone", field="--print-act")
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


def _read_act_file(path: Path) -> tuple[bytes, dict[str, Any]]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read the act: {exc.strerror}", str(path), field="--act") from None
    try:
        return data, read_act(data)
    except MalformedAct as exc:
        raise InputError(str(exc), str(path), field="--act") from None


def _read_signature(path: Path) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(
            f"cannot read the signature: {exc.strerror}", str(path), field="--signature"
        ) from None
    try:
        sshsig.parse_signature(data)
    except sshsig.MalformedSignature as exc:
        raise InputError(
            f"malformed SSH signature: {exc}", str(path), field="--signature"
        ) from None
    return data


def sign_with_key(key: Path, data: bytes) -> bytes:
    """`ssh-keygen -Y sign -n evalops -f KEY` over `data` (ssh-agent and hardware keys work:
    ssh-keygen finds them from the key file as it always does)."""
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


def record_refusal(
    session: Session, authorized: Authorized, *, subject: str, actor: str, now: datetime
) -> dict[str, Any]:
    """Audit a refused act (nothing else is written) and say why."""
    refusal = {"rule": authorized.judgement.rule, "message": authorized.judgement.refusal or ""}
    append_event(
        session,
        at=now,
        actor=actor,
        kind=audit_kinds.AUTHORITY_REFUSED,
        subject=subject,
        payload={
            "act": authorized.kind,
            "act_id": authorized.act_id or None,
            "authority_digest": authorized.authority_digest,
            "refusal": refusal,
        },
    )
    return refusal


def signers_of(session: Session, kind: str, audit_seq: int) -> list[dict[str, str]]:
    """The signers of the act recorded with the event `audit_seq` ([] when unsigned)."""
    row = session.exec(
        select(SignedAct).where(SignedAct.audit_seq == audit_seq, SignedAct.kind == kind)
    ).first()
    return [] if row is None else list(json.loads(row.signers))


#: At most this many parsed texts (scopes, signers lists) kept per authority by `verify`.
MEMO = 4096


@dataclass(frozen=True)
class _Governing:
    """The authority a sync put in force, from its seq on; with what `verify` works out
    once per authority, not once per act (its judge, the stored scopes and signers lists it
    has parsed: one run of `verify` only, each process its own)."""

    from_seq: int
    authority: AuthoritySpec | None
    digest: str | None
    judge: SignatureJudge | None
    scopes: dict[str, Scope] = field(default_factory=dict)
    signers: dict[str, list[Signer]] = field(default_factory=dict)

    # Acts under one authority share a handful of scopes and signers lists: each distinct
    # text is parsed once (the lookup is by the exact text, so an edited one is parsed
    # anew), up to MEMO of them (ingests name their builds: their scopes may all differ).

    def scope(self, text: str) -> Scope:
        """The Scope of a signed_act row's `scope` column."""
        found = self.scopes.get(text)
        if found is None:
            fields = json.loads(text)
            found = Scope(fields.get("suite"), fields.get("task"), tuple(fields.get("builds", ())))
            if len(self.scopes) < MEMO:
                self.scopes[text] = found
        return found

    def stored_signers(self, text: str) -> list[Signer]:
        """The Signers of a signed_act row's `signers` column."""
        found = self.signers.get(text)
        if found is None:
            found = [Signer(**s) for s in json.loads(text)]
            if len(self.signers) < MEMO:
                self.signers[text] = found
        return found


def _authorities(session: Session) -> list[_Governing]:
    """The authority in force after each sync, in seq order (a handful of rows)."""
    out: list[_Governing] = []
    runs = session.exec(select(SyncRun.audit_seq).order_by(col(SyncRun.audit_seq))).all()
    for seq in runs:
        found = authority_in_force(session, seq)
        if found is None:
            out.append(_Governing(seq, None, None, None))
        else:
            out.append(_Governing(seq, found[0], found[1], SignatureJudge(found[0])))
    return out


#: At fewer signed acts than this, `verify` checks them in its own process: starting a
#: pool would cost more than it saves.
POOL_FROM = 2000
#: Acts per task of a worker: large enough that passing a task costs little next to its
#: signature checks, small enough that the last tasks leave no core idle for long.
CHUNK = 500
#: The columns of one act and its event, in `_act_problem`'s order (a LEFT JOIN: an act
#: whose event is gone still comes, with no event columns). Ties of audit_seq go by id, so
#: that "the first bad act" is the same act whichever process checks it.
_ACT_ROWS = (
    "SELECT a.audit_seq, a.act_id, a.kind, a.act, a.signatures, a.signers, a.scope, "
    "a.authority_digest, e.seq, e.kind, e.subject, e.payload "
    'FROM "signed_act" a LEFT OUTER JOIN "audit_event" e ON e.seq = a.audit_seq '
    "ORDER BY a.audit_seq, a.id"
)
ActRow = tuple[Any, ...]


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity, as `taskset` or a container sets it)."""
    if sys.platform == "linux":
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


@dataclass(frozen=True)
class ActPool:
    """How `verify` spreads the signature checks of the signed acts over processes.

    `workers` None: one per usable CPU but the one `verify` itself runs on, none on a single
    CPU. With workers, the parent still reads every row (one connection, one snapshot) and
    hands the workers chunks of `chunk` acts; once its own stages are done it checks, itself,
    the chunks no worker has started (`parent_checks`), so no core idles while one is left.
    """

    workers: int | None = None
    from_acts: int = POOL_FROM
    chunk: int = CHUNK
    parent_checks: bool = True

    def workers_for(self, acts: int) -> int:
        """How many worker processes check `acts` acts (0: the parent checks them inline)."""
        # Workers are forked (they inherit the authorities without pickling them): Linux.
        if acts == 0 or acts < self.from_acts or sys.platform != "linux":
            return 0
        if self.workers is not None:
            return max(self.workers, 0)
        # The parent's own stages are the longest serial work: a worker per CPU would take
        # CPU time from it (3 processes on 2 cores ended later than 2 did).
        return usable_cpus() - 1


#: What `verify` uses when not told otherwise (tests force the pool on small registries).
DEFAULT_POOL = ActPool()


def verify_signed_acts(session: Session) -> int:
    """Re-verify every stored act against the authority in force at its event (exit 6),
    in this process; returns how many acts were checked."""
    with signed_acts_check(session, ActPool(workers=0)) as check:
        return check.finish()


@contextmanager
def signed_acts_check(session: Session, pool: ActPool | None = None) -> Iterator[SignedActsCheck]:
    """Start the signed-acts stage of `verify` now; `finish()` raises its first problem.

    On a pool, every act is read here and the workers start at once, so that the signature
    checks run while the caller goes through its other stages; inline, nothing is read until
    `finish()`. Leaving the block stops the workers and waits for them (an error, Ctrl-C)."""
    pool = DEFAULT_POOL if pool is None else pool
    acts = sum(
        count for (count,) in raw_rows(session, 'SELECT count(*) FROM "signed_act"', "evalops_acts")
    )
    workers = pool.workers_for(acts)
    check = (
        SignedActsCheck(session, acts)
        if workers == 0
        else _PooledCheck(session, acts, workers, pool)
    )
    try:
        yield check
    finally:
        check.close()


class SignedActsCheck:
    """Every stored act checked in this process, in audit seq order, when `finish` runs.

    One streamed join of acts and their events; the authorities (one per sync) are read
    once, so the cost per act is its signature checks."""

    pooled = False

    def __init__(self, session: Session, acts: int) -> None:
        self.session = session
        self.acts = acts

    def finish(self) -> int:
        """How many acts were checked; VerificationError naming the first bad one."""
        governing = _authorities(self.session)
        message = _first_problem(raw_rows(self.session, _ACT_ROWS, "evalops_acts"), governing)
        if message is not None:
            raise VerificationError(message)
        return self.acts

    def close(self) -> None:
        pass


class _PooledCheck(SignedActsCheck):
    """The acts read now into a spool file, their chunks checked by forked workers."""

    pooled = True

    def __init__(self, session: Session, acts: int, workers: int, pool: ActPool) -> None:
        from concurrent.futures import ProcessPoolExecutor
        from multiprocessing import get_context

        super().__init__(session, acts)
        self.pool = pool
        self.governing = _authorities(session)
        self.spool = _Spool()
        self.tasks: list[tuple[Future[str | None], int, int]] = []
        self.done = False
        self.executor = ProcessPoolExecutor(
            workers,
            mp_context=get_context("fork"),
            initializer=_start_worker,
            initargs=(self.governing, self.spool.fileno(), os.getpid()),
        )
        try:
            chunk: list[ActRow] = []
            for row in raw_rows(session, _ACT_ROWS, "evalops_acts"):
                chunk.append(row)
                if len(chunk) >= pool.chunk:
                    self._submit(chunk)
                    chunk = []
            if chunk:
                self._submit(chunk)
        except BaseException:
            self.close()
            raise

    def _submit(self, chunk: list[ActRow]) -> None:
        offset, size = self.spool.add(chunk)
        self.tasks.append((self.executor.submit(_check_chunk, offset, size), offset, size))

    def finish(self) -> int:
        """The chunks' results in audit seq order: the first problem is that of the lowest
        seq, whichever chunk finished first."""
        from concurrent.futures.process import BrokenProcessPool

        mine = self._check_the_last_chunks() if self.pool.parent_checks else {}
        for number, (future, _, _) in enumerate(self.tasks):
            if number in mine:
                message = mine[number]
            else:
                try:
                    message = future.result()
                except BrokenProcessPool as exc:
                    raise EvalopsError(
                        f"a process checking signatures stopped before it was done ({exc})"
                    ) from None
            if message is not None:
                raise VerificationError(message)
        return self.acts

    def _check_the_last_chunks(self) -> dict[int, str | None]:
        """Check here, from the last one back, the chunks no worker has started, while the
        workers go on from the front; the first chunk a worker holds ends it (workers take
        them in order, so every chunk before it is theirs)."""
        mine: dict[int, str | None] = {}
        for number in range(len(self.tasks) - 1, -1, -1):
            future, offset, size = self.tasks[number]
            if not future.cancel():
                break
            mine[number] = _first_problem(self.spool.read(offset, size), self.governing)
        return mine

    def close(self) -> None:
        if self.done:
            return
        self.done = True
        # Chunks no worker has started are dropped; a running one takes a fraction of a
        # second. Waiting reaps every worker: no process outlives verify.
        try:
            self.executor.shutdown(wait=True, cancel_futures=True)
        finally:
            self.spool.close()


class _Spool:
    """Chunks of act rows pickled into an unlinked temporary file, which forked workers read
    by offset: the parent's memory stays flat however many acts there are (rows waiting in a
    pipe would all be held in the parent)."""

    def __init__(self) -> None:
        self.file = tempfile.TemporaryFile()  # noqa: SIM115  (closed by close())
        self.end = 0

    def fileno(self) -> int:
        return self.file.fileno()

    def add(self, rows: list[ActRow]) -> tuple[int, int]:
        buffer = io.BytesIO()
        pickler = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
        # No memo: rows of strings and ints refer to nothing twice that matters, and
        # memoizing every string took most of the pickling time (and half the unpickling).
        pickler.fast = True
        pickler.dump(rows)
        data = buffer.getbuffer()
        offset = self.end
        written = 0
        while written < len(data):
            written += os.pwrite(self.fileno(), data[written:], offset + written)
        self.end += len(data)
        return offset, len(data)

    def read(self, offset: int, size: int) -> list[ActRow]:
        return _read_chunk(self.fileno(), offset, size)

    def close(self) -> None:
        self.file.close()


def _read_chunk(fd: int, offset: int, size: int) -> list[ActRow]:
    parts: list[bytes] = []
    done = 0
    while done < size:
        part = os.pread(fd, size - done, offset + done)
        if not part:
            raise OSError(f"the spool of signed acts ends at {offset + done}, not {offset + size}")
        parts.append(part)
        done += len(part)
    rows: list[ActRow] = pickle.loads(b"".join(parts))
    return rows


#: A worker's state, set once by `_start_worker`: the authorities and the spool's fd.
_WORKER: dict[str, Any] = {}


def _start_worker(governing: list[_Governing], spool: int, parent: int) -> None:
    """A forked worker's initializer."""
    # Ctrl-C reaches the whole process group: the parent alone decides, and stops the pool.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # A parent killed outright (SIGKILL, a CI timeout's SIGTERM) cannot stop its workers,
    # which would wait for tasks forever: the kernel ends them with it (PR_SET_PDEATHSIG).
    if sys.platform == "linux":
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGTERM)
    if os.getppid() != parent:  # it died before the line above took hold
        os._exit(1)
    _WORKER.update(governing=governing, spool=spool)


def _check_chunk(offset: int, size: int) -> str | None:
    """In a worker: the first problem of one chunk of acts, or None."""
    rows = _read_chunk(_WORKER["spool"], offset, size)
    return _first_problem(rows, _WORKER["governing"])


def _first_problem(rows: Iterable[ActRow], governing: list[_Governing]) -> str | None:
    """The message of the first bad act of `rows` (in their order), or None."""
    starts = [g.from_seq for g in governing]
    for row in rows:
        audit_seq, act_id, event_seq, event_kind, event_subject = (
            row[0], row[1], row[8], row[9], row[10]
        )  # fmt: skip
        at = bisect_right(starts, audit_seq) - 1
        problem = _act_problem(row, governing[at] if at >= 0 else None)
        if problem is not None:
            where = f"audit seq {audit_seq}"
            if event_seq is not None:
                where += f" ({event_kind} {event_subject})"
            return f"{where}: signed act {act_id}: {problem}"
    return None


def _act_problem(row: ActRow, governing: _Governing | None) -> str | None:
    """What is wrong with one stored act (a row of `_ACT_ROWS`), or None. It runs in the
    pool's workers too: it reads nothing but its arguments, and writes only the parse memos
    of `governing` (each process its own copy)."""
    (
        _, act_id, kind, text, signatures, signers, stored_scope, authority_digest,
        event_seq, _, _, event_payload,
    ) = row  # fmt: skip
    if event_seq is None:
        return "its audit event does not exist"
    if governing is None or governing.authority is None:
        return "no authority was in force at its event"
    digest, signature_judge = governing.digest, governing.judge
    assert signature_judge is not None
    data = text.encode("utf-8")
    try:
        act = read_act(data)
    except MalformedAct as exc:
        return str(exc)
    if act["authority_digest"] != authority_digest or digest != authority_digest:
        return f"signed under {act['authority_digest']}, but {digest} was in force at its event"
    if act["act"] != kind or act["act_id"] != act_id:
        return "the stored act is not the act this row names"
    payload = json.loads(event_payload)
    for name, value in act.items():
        if name not in META_FIELDS and payload.get(name) != value:
            return f"the act's {name} is not what its event recorded"
    scope = governing.scope(stored_scope)
    try:
        judgement = signature_judge.check(
            kind, data, [s.encode("ascii") for s in json.loads(signatures)], scope
        )
    except sshsig.MalformedSignature as exc:
        return f"a stored signature is malformed: {exc}"
    if not judgement.ok:
        return judgement.refusal
    if governing.stored_signers(signers) != judgement.signers:
        return "the stored signers are not those of its signatures"
    return None
