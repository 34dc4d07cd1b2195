"""`verify`'s signed-acts stage: every stored act re-verified against the authority in
force at its event, read through a `Reader` (plain SQL on both engines).

On a SQLite registry it runs over the standard library's `sqlite3` and imports neither
SQLAlchemy nor the table or spec models (importing them costs more than checking the acts
of most registries): the authorities are read as views of their stored documents
(evalops/domain/stored_authority.py), judged by the same `SignatureJudge`. `verify` passes
it a reader over its own snapshot connection. evalops/services/authority/acts.py signs and
records acts; this module only reads them. tests/services/test_act_checks.py holds both
readers to one outcome, on every path.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import signal
import sys
import tempfile
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from evalops.domain import sshsig
from evalops.domain.authority import (
    META_FIELDS,
    AuthorityFacts,
    MalformedAct,
    Scope,
    SignatureJudge,
    Signer,
    read_act,
)
from evalops.domain.registry_identity import registry_id
from evalops.errors import EvalopsError, VerificationError
from evalops.services.reads.authority import authority_at

if TYPE_CHECKING:
    from concurrent.futures import Future

    from evalops.store.reader import Reader


#: At most this many parsed texts (scopes, signers lists) kept per authority by `verify`.
MEMO = 4096


@dataclass(frozen=True)
class _Governing:
    """The authority a sync put in force, from its seq on; with what `verify` works out
    once per authority, not once per act (its judge, the stored scopes and signers lists it
    has parsed: one run of `verify` only, each process its own)."""

    from_seq: int
    authority: AuthorityFacts | None
    digest: str | None
    judge: SignatureJudge | None
    registry_id: str | None = None
    """This database's registry id: every act names it (or predates registry ids)."""
    scopes: dict[str, Scope] = field(default_factory=dict)
    signers: dict[str, list[Signer]] = field(default_factory=dict)

    # Acts under one authority share a handful of scopes and signers lists: each distinct
    # text is parsed once (the lookup is by the exact text, so an edited one is parsed
    # anew), up to MEMO of them (ingests name their builds: their scopes may all differ).

    def scope(self, text: str) -> Scope:
        """The Scope of a signed_act row's `scope` column."""
        found = self.scopes.get(text)
        if found is None:
            found = Scope.of(json.loads(text))
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


def _authorities(reader: Reader) -> list[_Governing]:
    """The authority in force after each sync, in seq order (a handful of rows)."""
    out: list[_Governing] = []
    registry = registry_id_of(reader)
    runs = reader.rows(
        'SELECT r.audit_seq FROM "sync_run" AS r WHERE EXISTS (SELECT 1 FROM sync_in_force '
        "AS x WHERE x.sync_run_id = r.id) ORDER BY r.audit_seq"
    )
    for seq in (run["audit_seq"] for run in runs):
        found = authority_at(reader, seq)
        if found is None:
            out.append(_Governing(seq, None, None, None, registry))
        else:
            authority, digest, judge = found
            out.append(_Governing(seq, authority, digest, judge, registry))
    return out


def registry_id_of(reader: Reader) -> str | None:
    """The registry id (evalops/domain/registry_identity.py) from the first audit event."""
    first = reader.first('SELECT payload, hash FROM "audit_event" ORDER BY seq LIMIT 1')
    if first is None:
        return None
    try:
        payload = json.loads(first["payload"])
    except (TypeError, ValueError):
        payload = None  # the chain check names a damaged event
    return registry_id(payload if isinstance(payload, dict) else None, first["hash"])


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


def verify_signed_acts(reader: Reader) -> int:
    """Re-verify every stored act against the authority in force at its event (exit 6),
    in this process; returns how many acts were checked."""
    with signed_acts_check(reader, ActPool(workers=0)) as check:
        return check.finish()


@contextmanager
def signed_acts_check(reader: Reader, pool: ActPool | None = None) -> Iterator[SignedActsCheck]:
    """Start the signed-acts stage of `verify` now; `finish()` raises its first problem.

    On a pool, every act is read here and the workers start at once, so that the signature
    checks run while the caller goes through its other stages; inline, nothing is read until
    `finish()`. Leaving the block stops the workers and waits for them (an error, Ctrl-C).
    `reader` reads in the caller's snapshot (`verify`'s other stages read the same)."""
    pool = DEFAULT_POOL if pool is None else pool
    acts = int(reader.scalar('SELECT count(*) FROM "signed_act"'))
    workers = pool.workers_for(acts)
    check = (
        SignedActsCheck(reader, acts) if workers == 0 else _PooledCheck(reader, acts, workers, pool)
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

    def __init__(self, reader: Reader, acts: int) -> None:
        self.reader = reader
        self.acts = acts

    def finish(self) -> int:
        """How many acts were checked; VerificationError naming the first bad one."""
        governing = _authorities(self.reader)
        message = _first_problem(self.reader.tuples(_ACT_ROWS), governing)
        if message is not None:
            raise VerificationError(message)
        return self.acts

    def close(self) -> None:
        pass


class _PooledCheck(SignedActsCheck):
    """The acts read now into a spool file, their chunks checked by forked workers."""

    pooled = True

    def __init__(self, reader: Reader, acts: int, workers: int, pool: ActPool) -> None:
        from concurrent.futures import ProcessPoolExecutor
        from multiprocessing import get_context

        super().__init__(reader, acts)
        self.pool = pool
        self.governing = _authorities(reader)
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
            for row in reader.tuples(_ACT_ROWS):
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
        act = read_act(data, stored=True)
    except MalformedAct as exc:
        return str(exc)
    if act["authority_digest"] != authority_digest or digest != authority_digest:
        return f"signed under {act['authority_digest']}, but {digest} was in force at its event"
    # An act stored before registries had ids names none; one that names a registry must
    # name this one (an act of staging is not an act of production).
    if "registry_id" in act and act["registry_id"] != governing.registry_id:
        return f"an act of registry {act['registry_id']}, not of this one ({governing.registry_id})"
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
