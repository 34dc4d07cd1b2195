"""Loading a gate decision's inputs: plain JSON, from the registry as it stood at one point.

Every read goes through an audit-seq cutoff: the rows a decision may see are those whose
audit event is at or before it. A live `gate check` sees everything up to the chain head;
`--at T` sees the registry as it stood at T; `verify` rebuilds a stored decision's inputs at
the seq it was made and compares them with what was stored.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

from sqlmodel import Session, col, func, select

from evalops.domain import audit_kinds, labels
from evalops.domain.canonical import plain_number
from evalops.domain.facts import StoredTaskHead
from evalops.domain.gate import EVALUATOR
from evalops.domain.gate_compact import EVALUATOR_COMPACT, CompactTrials
from evalops.domain.gate_documents import (
    AnyGateInputs,
    BaselineInput,
    CompactTaskInput,
    GateInputs,
    RefusedWaiverRequest,
    SyncRef,
    TaskHead,
    TaskInput,
    TaskT,
    TrialInput,
    WaiverFactDocument,
)
from evalops.domain.gate_rules import EFFICIENCY_KEYS
from evalops.domain.policy_rules import PolicyRules, read_policy
from evalops.domain.separation import NO_SELF_WAIVER, IngestAct
from evalops.domain.timestamps import format_timestamp
from evalops.errors import InputError
from evalops.services.authority.acts import INGEST_ACTS, authority_in_force
from evalops.services.gate.input_parts import (
    DEFAULT_SEED,
    GateRequest,
    SelfWaiver,
    baseline_block,
    choose_execution,
    efficiency_counts,
    ignored_as,
    is_refused_waiver_act,
    refused_by_authority,
    self_review_sql,
    self_reviews_of,
    self_waivers_of,
    trajectory_counts,
    without_self_waivers,
)
from evalops.services.gate.policies import (
    AppliedPolicy,
    gate_policy_for,
    governing_policy,
    registered_gate_policy,
)
from evalops.services.placeholders import refuse_placeholder
from evalops.services.registry.definitions import Definitions, StaleClassifications, rederive
from evalops.store import queries
from evalops.store.audit import registry_now
from evalops.store.engine import statement_rows
from evalops.store.queries import upto, voided
from evalops.store.tables import (
    AuditEvent,
    ExecutionProfileRow,
    GateDecision,
    PolicyRow,
    SignedAct,
    SuiteRow,
    SyncRun,
    TaskRevision,
    Trial,
    Waiver,
    WaiverRevocation,
)

LAST_LISTING = EVALUATOR_COMPACT - 1
"""The last evaluator whose inputs list every trial (3, frozen: its decisions replay)."""


def cutoff_at(session: Session, at: datetime | None) -> int:
    """The last audit seq recorded at or before `at` (None: the chain head); 0 if none.

    Times are compared as moments after reading, never as stored text in SQL: SQLite
    keeps timestamps as text, and a re-spelled one would sort elsewhere.
    """
    if at is None:
        return int(session.exec(select(func.max(AuditEvent.seq))).one() or 0)
    last = 0
    events = select(AuditEvent.seq, AuditEvent.at).order_by(col(AuditEvent.seq))
    for seq, recorded in session.exec(events.execution_options(yield_per=2000)):
        if recorded <= at:
            last = seq
    return last


# ------------------------------------------------------------------------- definitions


def applied_gate_policy(
    session: Session,
    suite: SuiteRow,
    ref: str | None,
    cutoff: int | None,
    *,
    dry_run: bool = False,
    rebuild: bool = False,
) -> AppliedPolicy:
    """The gate policy a decision on `suite` applies: the suite's own (`policies`).

    `--policy` (`ref`, an id or digest) naming another registered policy evaluates under
    it only in a dry run, which stores nothing. `rebuild` re-loads a stored decision the way
    it was made, under the rule of its day: `--policy` was then any registered policy, and
    with no suite naming one the newest in force applied.
    """
    if rebuild:
        if ref is not None:
            return registered_gate_policy(session, ref, cutoff)
        return governing_policy(session, "gate_policy", suite, cutoff, newest_when_several=True)
    if ref is None:
        return gate_policy_for(session, suite, cutoff)
    asked = registered_gate_policy(session, ref, cutoff)
    if dry_run:
        return asked
    own = gate_policy_for(session, suite, cutoff)
    if asked.digest != own.digest:
        raise InputError(
            f"{ref} is not the gate policy of suite {suite.suite_id} ({own.policy_id} "
            f"{own.digest}): a stored decision applies the suite's own policy; add --dry-run "
            "to evaluate under another without storing anything",
            field="--policy",
        )
    return own


def policy_from_file(session: Session, path: Path) -> tuple[dict[str, Any], str, bool]:
    """A policy file: its document, digest, and whether that digest is registered."""
    # Imported here: only `--policy FILE` reads a file (YAML included).
    from evalops.registry.definitions import load_definition

    definition = load_definition(path)
    if definition.kind != "gate_policy":
        raise InputError(f"{path} is a {definition.kind}, not a gate policy", field="--policy")
    known = session.exec(
        select(PolicyRow.id).where(
            PolicyRow.kind == "gate_policy", PolicyRow.policy_digest == definition.digest
        )
    ).first()
    return definition.value, definition.digest, known is not None


def _suite_not_in_force(session: Session, suite_id: str, cutoff: int | None) -> str:
    """Why a suite cannot be gated: never declared, or (with --at) not yet synced then."""
    from evalops.store.tables import SuiteRow

    first = session.exec(
        select(AuditEvent.at)
        .join(SuiteRow, SuiteRow.audit_seq == AuditEvent.seq)  # type: ignore[arg-type]
        .where(SuiteRow.suite_id == suite_id)
        .order_by(AuditEvent.seq)  # type: ignore[arg-type]
        .limit(1)
    ).first()
    if cutoff is not None and first is not None:
        return (
            f"suite {suite_id!r} was not yet in force at the --at time: it was first "
            f"synced at {format_timestamp(first)}"
        )
    from evalops.services.registry.unknown_ids import not_registered

    return not_registered(session, "suite", suite_id, cutoff, status="in force")


def execution_for(
    session: Session,
    build: str,
    execution_id: str | None,
    cutoff: int | None = None,
    *,
    field: str = "--build",
) -> ExecutionProfileRow:
    """The execution profile in force whose `system_build` is `build`; `field` is the
    option that named the build (`compare` names two, neither of them `--build`)."""
    forced: dict[str, ExecutionProfileRow] = queries.in_force_rows(
        session, "execution_profile", cutoff
    )
    try:
        return choose_execution(forced, build, execution_id, field)
    except InputError as error:
        elsewhere = _registered_off_the_tracked_line(session, build, forced, cutoff)
        if elsewhere is None:
            raise
        raise InputError(f"{error.message}; {elsewhere}", field=error.field) from None


def _registered_off_the_tracked_line(
    session: Session,
    build: str,
    forced: Mapping[str, ExecutionProfileRow],
    cutoff: int | None,
) -> str | None:
    """A profile of `build` registered by a sync that put nothing in force (a pull
    request's branch): where it came from and how to evaluate it without changing what is
    in force, instead of only "not in force"."""
    query = (
        select(ExecutionProfileRow, SyncRun)
        .join(SyncRun, SyncRun.id == ExecutionProfileRow.sync_run_id)  # type: ignore[arg-type]
        .where(ExecutionProfileRow.system_build == build)
        .order_by(col(ExecutionProfileRow.audit_seq).desc())
    )
    if cutoff is not None:
        query = query.where(col(ExecutionProfileRow.audit_seq) <= cutoff)
    for row, sync in session.exec(query):
        if row.execution_id in forced and forced[row.execution_id].system_build == build:
            continue
        commit = (sync.git_commit or "")[:12]
        origin = f"commit {commit}" if commit else "a work tree"
        if sync.git_branch:
            origin += f" on {sync.git_branch}"
        how = (
            f"evalops gate check --dry-run --definitions {commit} --build {build} ..."
            if commit
            else "commit it, then evalops gate check --dry-run --definitions REV"
        )
        return (
            f"build {build!r} is registered (execution profile {row.execution_id!r}, from "
            f"{origin}) but not in force: evaluate it under that commit's definitions with "
            f"`{how}`, or merge it into the tracked branch and sync"
        )
    return None


# ------------------------------------------------------------------------------ trials


_TRIAL_COLUMNS = (
    Trial.id,
    Trial.trial_id,
    Trial.parent_trial_id,
    Trial.classification,
    Trial.score,
    Trial.gating_score,
    Trial.trajectory,
    Trial.efficiency,
    Trial.task_id,
    Trial.task_digest,
    Trial.grader_set_digest,
    Trial.ingest_batch_id,
)


class _TrialRow(NamedTuple):
    """A row of `_TRIAL_COLUMNS` as the driver gives it, read by name."""

    id: int
    trial_id: str
    parent_trial_id: str | None
    classification: str
    score: float
    gating_score: float
    trajectory: str | None
    efficiency: str
    task_id: str
    task_digest: str
    grader_set_digest: str
    ingest_batch_id: int


def trial_input(
    session: Session,
    defs: Definitions,
    rederive_: StaleClassifications,
    row: Any,
    trial: Trial | None = None,
) -> TrialInput:
    """The trial's input of evaluator 3 from its row of `_TRIAL_COLUMNS` (or its `Trial`);
    its stored record is read (`trial`, when the caller has it) only where ingest did not
    count its fixture misses or its classification must be re-derived."""
    efficiency, misses = efficiency_counts(row.efficiency)
    out: TrialInput = {
        "trial_id": row.trial_id,
        "parent_trial_id": row.parent_trial_id,
        "classification": row.classification,
        "score": plain_number(row.score),
        "gating_score": plain_number(row.gating_score),
        # The RFC 0244 block (counts only): the per-call detail kept for reports is no
        # input of the gate, so a decision reads alike from rows stored before and after.
        "trajectory": trajectory_counts(row.trajectory),
        "efficiency": efficiency,
        # Read from the record below when ingest did not count them.
        "fixture_misses": 0 if misses is None else misses,
    }
    stale = rederive_.needed(row.trial_id, row.grader_set_digest, row.ingest_batch_id)
    if misses is None or stale:
        trial = trial if trial is not None else session.get(Trial, row.id)
        assert trial is not None
        if misses is None:
            out["fixture_misses"] = json.loads(trial.record).get("fixture_misses", 0)
        if stale:
            current = rederive(defs, trial)
            if current is not None:
                out["classification"] = current.primary
                out["score"] = plain_number(current.score)
                out["gating_score"] = plain_number(current.gating_score)
    return out


def _older_counts(session: Session, execution: ExecutionProfileRow, cutoff: int) -> dict[str, int]:
    """Per task: trials under an older digest of the same execution profile."""
    older = [
        d
        for d in session.exec(
            select(ExecutionProfileRow.execution_digest).where(
                ExecutionProfileRow.execution_id == execution.execution_id,
                upto(ExecutionProfileRow.audit_seq, cutoff),
            )
        ).all()
        if d != execution.execution_digest
    ]
    if not older:
        return {}
    rows = session.exec(
        select(Trial.task_id, func.count())
        .where(
            col(Trial.execution_digest).in_(older),
            upto(Trial.audit_seq, cutoff),
            ~voided(cutoff),
        )
        .group_by(col(Trial.task_id))
    ).all()
    return {task_id: int(n) for task_id, n in rows}


class _Revision(NamedTuple):
    """A registered task revision as the ratchet and the plan read it."""

    id: int
    revision: int
    task_digest: str
    document: str


def member_heads(defs: Definitions, members: list[queries.Member]) -> dict[str, TaskHead]:
    """Each member's ratcheted labels and trial plan (the parts of its input that are not
    trials), from its registered document; the candidate and the baseline share them.
    Read through views of the stored documents (`StoredTaskHead`), not the validated specs:
    each was validated at `sync`, and a 10,000-task suite spent most of this step in
    validation. The revisions are read as plain rows, four columns of each, and a document
    is parsed only when the ratchet or the plan reads it. What was read is let go after."""
    wanted = {m.task_id for m in members}
    revisions: dict[str, list[_Revision]] = {}
    # Text and integers, straight from the driver (`statement_rows`).
    rows = statement_rows(
        defs.session,
        select(  # type: ignore[call-overload]
            TaskRevision.id,
            TaskRevision.task_id,
            TaskRevision.revision,
            TaskRevision.task_digest,
            TaskRevision.document,
        )
        .where(upto(TaskRevision.audit_seq, defs.cutoff))
        .order_by(col(TaskRevision.id)),
        "gate_task_revisions",
    )
    for revision_id, task_id, revision, task_digest, document in rows:
        if task_id in wanted:
            revisions.setdefault(task_id, []).append(
                _Revision(revision_id, revision, task_digest, document)
            )
    parsed: dict[int, StoredTaskHead] = {}

    def head_of(revision: _Revision) -> StoredTaskHead:
        if revision.id not in parsed:
            parsed[revision.id] = StoredTaskHead.of(json.loads(revision.document))
        return parsed[revision.id]

    ratcheted = {
        m.task_id: labels.strictest_labels(
            revisions.get(m.task_id, []), m.added.task_revision_id, head_of
        )
        for m in members
    }
    out: dict[str, TaskHead] = {}
    for m in members:
        # The newest registered revision of the pinned digest (as `Definitions.task` reads it).
        pins = [r for r in revisions.get(m.task_id, []) if r.task_digest == m.task_digest]
        if not pins:
            raise InputError(
                f"suite member {m.task_id} pins task_digest {m.task_digest}, which is not "
                "registered: the database was changed outside evalops (run `evalops verify`)"
            )
        risk, protects = ratcheted[m.task_id]
        plan = head_of(pins[-1]).contract.trials
        out[m.task_id] = {
            "task_id": m.task_id,
            "risk": risk,
            "protects": protects,
            "task_digest": m.task_digest,
            "grader_set_digest": m.grader_set_digest,
            "plan": {
                "count": plan.count if plan else 1,
                "k": (plan.k or plan.count) if plan else 1,
                "passRule": plan.passRule if plan else "all",
                "passScore": plain_number(plan.passScore if plan else 1.0),
            },
        }
    defs.forget_specs()
    return out


def task_inputs(
    session: Session,
    defs: Definitions,
    members: list[queries.Member],
    execution: ExecutionProfileRow,
    cutoff: int,
    heads: dict[str, TaskHead],
) -> list[TaskInput]:
    """Every member's plan and ratcheted labels (`heads`, from `member_heads`), trials and
    ignored trials, from one indexed read of the build's trials (other builds' trials are
    never scanned). Each row becomes its trial input as it is read, so rows are never held
    beside the inputs."""
    older = _older_counts(session, execution, cutoff)
    rederive_ = StaleClassifications(session, defs)
    members_by_id = {m.task_id: m for m in members}
    trials: dict[str, list[TrialInput]] = {m.task_id: [] for m in members}
    ignored: dict[str, dict[str, int]] = {
        m.task_id: ({"older_execution_digest": older[m.task_id]} if older.get(m.task_id) else {})
        for m in members
    }
    # A Core read, not an ORM one: the ORM buffers every row before the first is seen.
    rows: Any = session.connection().execute(
        select(*_TRIAL_COLUMNS, voided(cutoff).label("voided"))  # type: ignore[call-overload]
        .where(
            Trial.execution_digest == execution.execution_digest,
            upto(Trial.audit_seq, cutoff),
        )
        .order_by(col(Trial.id))
    )
    for row in rows:
        m = members_by_id.get(row.task_id)
        if m is None:
            continue
        key = ignored_as(
            row.task_digest, row.grader_set_digest, m.task_digest, m.grader_set_digest, row.voided
        )
        if key is None:
            trials[m.task_id].append(trial_input(session, defs, rederive_, row))
            continue
        ignored[m.task_id][key] = ignored[m.task_id].get(key, 0) + 1
    return [
        {
            **heads[m.task_id],
            "trials": trials[m.task_id],
            "ignoredTrials": dict(sorted(ignored[m.task_id].items())),
        }
        for m in members
    ]


def _chained_ids(session: Session, execution: ExecutionProfileRow, cutoff: int) -> set[str]:
    """Every trial id a trial of the build names as its parent: the trials an evaluator-4
    summary keeps in full (reruns are few; the rest are counted)."""
    rows = session.connection().execute(
        select(Trial.parent_trial_id)
        .where(
            Trial.execution_digest == execution.execution_digest,
            col(Trial.parent_trial_id).is_not(None),
            upto(Trial.audit_seq, cutoff),
            ~voided(cutoff),
        )
        .distinct()
    )
    return {str(parent) for (parent,) in rows}


def compact_task_inputs(
    session: Session,
    defs: Definitions,
    members: list[queries.Member],
    execution: ExecutionProfileRow,
    cutoff: int,
    heads: dict[str, TaskHead],
) -> list[CompactTaskInput]:
    """`task_inputs` for evaluator 4: the same rows, read the same way, each trial's input
    added to its task's summary as it is read and let go (docs/gate.md, "Evaluator 4"), so
    memory follows the number of tasks and reruns, not of trials."""
    older = _older_counts(session, execution, cutoff)
    rederive_ = StaleClassifications(session, defs)
    chained = _chained_ids(session, execution, cutoff)
    members_by_id = {m.task_id: m for m in members}
    summaries = {m.task_id: CompactTrials(chained) for m in members}
    ignored: dict[str, dict[str, int]] = {
        m.task_id: ({"older_execution_digest": older[m.task_id]} if older.get(m.task_id) else {})
        for m in members
    }
    efficiencies = _Efficiencies()
    # Straight from the driver (`statement_rows`): the 13 columns are text, integers and
    # floats, as SQLAlchemy would give them, without its work per row.
    rows = statement_rows(
        session,
        select(*_TRIAL_COLUMNS, voided(cutoff).label("voided"))  # type: ignore[call-overload]
        .where(
            Trial.execution_digest == execution.execution_digest,
            upto(Trial.audit_seq, cutoff),
        )
        .order_by(col(Trial.id)),
        "gate_trials",
    )
    needed = rederive_.needed
    for row in rows:
        (_, trial_id, parent, cls, score, gating, trajectory, efficiency, task_id) = row[:9]
        m = members_by_id.get(task_id)
        if m is None:
            continue
        key = ignored_as(row[9], row[10], m.task_digest, m.grader_set_digest, row[12])
        if key is not None:
            ignored[task_id][key] = ignored[task_id].get(key, 0) + 1
            continue
        summary = summaries[task_id]
        counts, misses, complete = efficiencies.of(efficiency)
        if (
            misses is None
            or not complete
            or summary.is_chained(trial_id, parent)
            or needed(trial_id, row[10], row[11])
        ):
            # Reruns are kept whole, and a trial whose class is re-derived or whose misses
            # ingest did not count is read from its record: the full input.
            summary.add(trial_input(session, defs, rederive_, _TrialRow._make(row[:12])))
            continue
        # Anything else is what `trial_input` would make of it, by its parts: the
        # trajectory is parsed only for the task's last trial.
        summary.add_single(
            trial_id,
            cls,
            float(score),
            float(gating),
            counts,
            misses,
            trajectory,
            trajectory_counts,
        )
    return [
        {
            **heads[m.task_id],
            **summaries.pop(m.task_id).document(),
            "ignoredTrials": dict(sorted(ignored[m.task_id].items())),
        }
        for m in members
    ]


class _Efficiencies:
    """Stored efficiency texts, parsed once each (a build's trials share a few): the counts
    in `EFFICIENCY_KEYS` order (None when there are none), the fixture misses, and whether
    the counts name every key (else the trial takes the full input's path, and fails or
    not as it would there)."""

    def __init__(self) -> None:
        self._parsed: dict[str, tuple[tuple[float, ...] | None, int | None, bool]] = {}

    def of(self, text: str) -> tuple[tuple[float, ...] | None, int | None, bool]:
        found = self._parsed.get(text)
        if found is None:
            counts, misses = efficiency_counts(text)
            found = (None, misses, True) if not counts else (None, misses, False)
            if counts:
                try:
                    values = tuple(float(counts[k]) for k in EFFICIENCY_KEYS)
                except (KeyError, TypeError, ValueError):
                    pass
                else:
                    found = (values, misses, True)
            self._parsed[text] = found
        return found


# ----------------------------------------------------------------------------- waivers


def waiver_facts(session: Session, build: str, cutoff: int | None) -> list[WaiverFactDocument]:
    rows = session.exec(
        select(Waiver)
        .where(Waiver.build == build, upto(Waiver.audit_seq, cutoff))
        .order_by(col(Waiver.id))
    ).all()
    out: list[WaiverFactDocument] = []
    for w in rows:
        revoked = session.exec(
            select(WaiverRevocation)
            .where(
                WaiverRevocation.waiver_row_id == w.id,
                upto(WaiverRevocation.audit_seq, cutoff),
            )
            .order_by(col(WaiverRevocation.revoked_at))
        ).first()
        fact: WaiverFactDocument = {
            "waiver_id": w.waiver_id,
            "task_id": w.task_id,
            "suite_id": w.suite_id,
            "build": w.build,
            "states": json.loads(w.states),
            "granted_at": format_timestamp(w.granted_at),
            "expires_at": format_timestamp(w.expires_at),
            "revoked_at": format_timestamp(revoked.revoked_at) if revoked else None,
        }
        out.append(fact)
    return out


def _principals(signers: str) -> frozenset[str]:
    return frozenset(s["principal"] for s in json.loads(signers))


def self_reviews(session: Session, cutoff: int | None) -> frozenset[int]:
    """The audit seqs of the reviews the authority in force at `cutoff` refuses by
    `no_self_review`: the gate counts them as no human evidence."""
    from sqlalchemy import text

    found = authority_in_force(session, cutoff)
    if found is None:
        return frozenset()
    rows = session.connection().execute(text(self_review_sql(cutoff)), {"cutoff": cutoff})
    return self_reviews_of(found[0].separation_of_duties, [dict(r) for r in rows.mappings()])


def self_waivers(session: Session, build: str, cutoff: int | None) -> dict[str, SelfWaiver]:
    """The build's waivers the authority in force at `cutoff` refuses by `no_self_waiver`."""
    found = authority_in_force(session, cutoff)
    if found is None or NO_SELF_WAIVER not in found[0].separation_of_duties:
        return {}
    ingests = [
        IngestAct(
            a.audit_seq,
            frozenset(json.loads(a.scope).get("builds", [])),
            _principals(a.signers),
        )
        for a in session.exec(
            select(SignedAct)
            .where(col(SignedAct.kind).in_(INGEST_ACTS), upto(SignedAct.audit_seq, cutoff))
            .order_by(col(SignedAct.audit_seq))
        ).all()
    ]
    waivers = [
        (
            w.waiver_id,
            a.audit_seq,
            w.build,
            frozenset(s["principal"] for s in json.loads(a.signers)),
        )
        for w, a in session.exec(
            select(Waiver, SignedAct)
            .where(
                Waiver.build == build,
                upto(Waiver.audit_seq, cutoff),
                SignedAct.audit_seq == Waiver.audit_seq,
                SignedAct.kind == "waiver.grant",
            )
            .order_by(col(Waiver.id))
        ).all()
    ]
    return self_waivers_of(found[0].separation_of_duties, waivers, ingests)


def refused_waivers(
    session: Session, build: str, suite_id: str, cutoff: int | None
) -> list[RefusedWaiverRequest]:
    rows = session.exec(
        select(AuditEvent)
        .where(
            col(AuditEvent.kind).in_((audit_kinds.WAIVER_REFUSED, audit_kinds.AUTHORITY_REFUSED)),
            upto(AuditEvent.seq, cutoff),
        )
        .order_by(col(AuditEvent.seq))
    ).all()
    out: list[RefusedWaiverRequest] = []
    for row in rows:
        payload = json.loads(row.payload)
        if row.kind == audit_kinds.AUTHORITY_REFUSED:
            if is_refused_waiver_act(payload, build, suite_id):
                out.append(refused_by_authority(row.seq, format_timestamp(row.at), payload))
            continue
        request = payload.get("request", {})
        if request.get("build") == build and request.get("suite_id") == suite_id:
            out.append(
                {
                    "seq": row.seq,
                    "task_id": request.get("task_id"),
                    "states": request.get("states"),
                    "rules": [r["rule"] for r in payload.get("refusals", [])],
                    "at": format_timestamp(row.at),
                }
            )
    return out


# ---------------------------------------------------------------------------- baseline


def latest_pass_build(session: Session, suite_id: str, candidate: str, cutoff: int) -> str | None:
    """`--baseline auto`: the build of the latest stored pass for the suite, never the
    candidate itself (docs/formats.md)."""
    row = session.exec(
        select(GateDecision)
        .where(
            GateDecision.suite_id == suite_id,
            GateDecision.decision == "pass",
            GateDecision.build != candidate,
            upto(GateDecision.audit_seq, cutoff),
        )
        .order_by(col(GateDecision.id).desc())
    ).first()
    return row.build if row else None


TaskLoader = Callable[
    [Session, Definitions, list[queries.Member], ExecutionProfileRow, int, dict[str, TaskHead]],
    list[TaskT],
]
"""`task_inputs` (evaluators 2 and 3) or `compact_task_inputs` (evaluator 4)."""


def _baseline_block(
    session: Session,
    request: GateRequest,
    policy: PolicyRules,
    defs: Definitions,
    members: list[queries.Member],
    heads: dict[str, TaskHead],
    load: TaskLoader[TaskT],
) -> BaselineInput[TaskT] | None:
    def load_build(build: str) -> tuple[str, list[TaskT]]:
        base_exec = execution_for(session, build, None, request.cutoff, field="--baseline")
        tasks = load(session, defs, members, base_exec, request.cutoff, heads)
        return base_exec.execution_digest, tasks

    return baseline_block(
        request,
        policy.critical_regressions,
        lambda: latest_pass_build(session, request.suite_id, request.build, request.cutoff),
        load_build,
    )


# ------------------------------------------------------------------------------ inputs


def build_inputs(
    session: Session,
    request: GateRequest,
    *,
    policy_doc: dict[str, Any] | None = None,
    policy_digest: str | None = None,
    dry_run: bool = False,
    rebuild: bool = False,
    evaluator: int = EVALUATOR,
) -> AnyGateInputs:
    """The plain-JSON inputs of one decision (`policy_doc` only for a dry-run file;
    `dry_run` and `rebuild` as for `applied_gate_policy`).

    `evaluator` is the rules version they are for: a new decision's is the current one;
    `verify` rebuilds a stored decision's inputs for the version it was made with.
    Evaluator 4's tasks are summaries (`compact_task_inputs`), earlier ones' list every
    trial (`task_inputs`)."""
    if evaluator >= EVALUATOR_COMPACT:
        return _inputs(
            session,
            request,
            compact_task_inputs,
            policy_doc=policy_doc,
            policy_digest=policy_digest,
            dry_run=dry_run,
            rebuild=rebuild,
            evaluator=evaluator,
        )
    return listed_inputs(
        session,
        request,
        policy_doc=policy_doc,
        policy_digest=policy_digest,
        dry_run=dry_run,
        rebuild=rebuild,
        evaluator=evaluator,
    )


def listed_inputs(
    session: Session,
    request: GateRequest,
    *,
    policy_doc: dict[str, Any] | None = None,
    policy_digest: str | None = None,
    dry_run: bool = False,
    rebuild: bool = False,
    evaluator: int = LAST_LISTING,
) -> GateInputs[TaskInput]:
    """`build_inputs` for an evaluator that lists every trial (any before 4): what
    evaluator 3 reads (replayed and rebuilt for its stored decisions), and what a report
    lists."""
    if evaluator >= EVALUATOR_COMPACT:
        raise ValueError(f"evaluator {evaluator} does not list trials")
    return _inputs(
        session,
        request,
        task_inputs,
        policy_doc=policy_doc,
        policy_digest=policy_digest,
        dry_run=dry_run,
        rebuild=rebuild,
        evaluator=evaluator,
    )


def _inputs(
    session: Session,
    request: GateRequest,
    load: TaskLoader[TaskT],
    *,
    policy_doc: dict[str, Any] | None,
    policy_digest: str | None,
    dry_run: bool,
    rebuild: bool,
    evaluator: int,
) -> GateInputs[TaskT]:
    """`build_inputs` with its task loader chosen."""
    cutoff = request.cutoff
    suite = queries.suite_row(session, request.suite_id, cutoff)
    if suite is None:
        raise InputError(_suite_not_in_force(session, request.suite_id, cutoff), field="--suite")
    if policy_doc is None or policy_digest is None:
        applied = applied_gate_policy(
            session, suite, request.policy, cutoff, dry_run=dry_run, rebuild=rebuild
        )
        policy_doc, policy_digest = applied.document, applied.digest
    policy = read_policy(policy_doc)
    execution = execution_for(session, request.build, request.execution_id, cutoff)
    members = queries.members(session, request.suite_id, cutoff=cutoff)
    # The calibration rule changed with evaluator 3 (the pass class is never exempt).
    defs = Definitions(session, cutoff, pass_class_exempt=evaluator < 3)
    defs.refused_reviews = self_reviews(session, cutoff)
    heads = member_heads(defs, members)
    run = queries.latest_sync_run(session, cutoff)
    waivers, refused = without_self_waivers(
        waiver_facts(session, request.build, cutoff),
        refused_waivers(session, request.build, request.suite_id, cutoff),
        self_waivers(session, request.build, cutoff),
        request.suite_id,
    )
    return {
        "evaluator": evaluator,
        "request": request.as_dict(),
        "build": request.build,
        "suite": {
            "id": request.suite_id,
            "kind": suite.kind,
            "suite_digest": queries.current_suite_digest(session, suite, cutoff, members),
        },
        "sync": _sync_ref(run),
        "execution_id": execution.execution_id,
        "execution_digest": execution.execution_digest,
        "policy": policy_doc,
        "policy_digest": policy_digest,
        "evaluated_at": request.at,
        "tasks": load(session, defs, members, execution, cutoff, heads),
        "waivers": waivers,
        "refused_waivers": refused,
        "baseline": _baseline_block(session, request, policy, defs, members, heads, load),
    }


def _sync_ref(run: SyncRun | None) -> SyncRef | None:
    """The newest sync run a decision saw (a stored row: its id is set)."""
    if run is None:
        return None
    assert run.id is not None
    return {"sync_run": run.id, "git_commit": run.git_commit}


def request_for(
    session: Session,
    *,
    build: str,
    suite_id: str,
    at: datetime | None,
    now: datetime,
    execution_id: str | None = None,
    baseline: str | None = None,
    policy: str | None = None,
    method: str | None = None,
    alpha: float | None = None,
    seed: int = DEFAULT_SEED,
) -> GateRequest:
    """A request whose cutoff is the chain head now, or the last event at or before `at`.

    A live request is evaluated at the registry's present (`registry_now`: never before
    the newest event, whatever this clock says), so an act recorded by a writer whose clock
    is ahead is in force for it. A moment after that present names no state the registry
    has stood in: refused, or a decision would claim a future (a waiver expired, a
    revocation not yet made) as the registry's."""
    refuse_placeholder("--baseline", baseline, "a build with trials of the suite, or `auto`")
    present = registry_now(session, now)
    if at is not None and at > present:
        now_is = (
            f"now ({format_timestamp(present)})"
            if present <= now
            else f"the registry's present ({format_timestamp(present)}, its newest event's "
            f"time, later than this machine's clock {format_timestamp(now)})"
        )
        raise InputError(
            f"{format_timestamp(at)} is later than {now_is}: the registry has not stood there "
            "yet; give a moment in the past, or leave --at out for the registry as it stands",
            field="--at",
        )
    return GateRequest(
        build=build,
        suite_id=suite_id,
        at=format_timestamp(at or present),
        cutoff=cutoff_at(session, at),
        execution_id=execution_id,
        baseline=baseline,
        policy=policy,
        method=method,
        alpha=alpha,
        seed=seed,
    )
