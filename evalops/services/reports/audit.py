"""The report document: one stored gate decision and everything a reader needs to follow it.

Reports and exports read stored decisions only: nothing here evaluates a gate or writes a
row. `audit_document` loads one `GateDecision` (its stored `result` and `inputs`, verbatim),
resolves what the decision only names (task titles and incidents, trial rows, waiver owners
and reasons, calibration state of every model grader for the pinned config, git provenance,
the suite's decision history, eval case digests) and anchors it to the audit chain: the
decision's own event and the chain head as of rendering. `assemble` is the pure part, so
renderers, exporters and benchmarks can build documents without a database; from one, it
lists the trials as `resolve`'s reader of them (`_StoredTrials`) reads them, a chunk at a
time, while the read session is open.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, cast

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from evalops import __version__
from evalops.domain import digests
from evalops.domain.calibration_validity import measured_against_required
from evalops.domain.canonical import digest, plain_number
from evalops.domain.changes import (
    sides_from_inputs,
)
from evalops.domain.classify import Classification, shown_score
from evalops.domain.gate_compact import EVALUATOR_COMPACT
from evalops.domain.gate_documents import (
    Anchor,
    AnyGateInputs,
    DecisionDocument,
    DecisionTask,
)
from evalops.domain.timestamps import format_timestamp
from evalops.report.document import (
    AuthorityAct,
    AuthorityFacts,
    CalibrationFact,
    Coverage,
    EffectCounts,
    EvalCaseDigests,
    FailureClasses,
    HistoryEntry,
    LayerCount,
    Provenance,
    ReportDocument,
    ReportRefused,
    ReportSummary,
    ReportTask,
    ReportTrial,
    ReportVoid,
    ReportWaiver,
    ReportWaivers,
    SyncView,
)
from evalops.report.rows import RowSpool, mapped
from evalops.services.gate.policies import named_in
from evalops.services.reads.voids import decision_void_entries
from evalops.services.registry.definitions import (
    SHARED_KEY,
    Definitions,
    rederive,
    session_definitions,
)
from evalops.services.reports.changes import (
    changes_since_baseline,
    decision_cutoff,
    decision_row,
    previous_decision,
    shared_sides,
)
from evalops.services.reports.drilldown import (
    add_rerun,
    calibration_states,
    drill_down,
    trial_details,
)
from evalops.services.verify.reads import carried_forward, rows_fully_covered_from
from evalops.store import queries
from evalops.store.audit import chain_head
from evalops.store.engine import read_session
from evalops.store.reader import ConnectionReader
from evalops.store.tables import (
    AuditEvent,
    Calibration,
    ExecutionProfileRow,
    GateDecision,
    Incident,
    IncidentEvent,
    IngestBatch,
    PolicyRow,
    Reconciliation,
    ReviewResult,
    SignedAct,
    SuiteRow,
    SyncRun,
    TaskRevision,
    Trial,
    VoidedTrial,
    Waiver,
    WaiverRevocation,
)

if TYPE_CHECKING:
    from evalops.services.gate.listed_trials import ListedTrial, ListedTrials

REPORT_SCHEMA = "evalops.audit-report/v1"
SUITE_CARD_SCHEMA = "evalops.suite-card/v1"
EFFECT_ORDER = {"block": 0, "hold": 1, "waived": 2, "pass": 3}
EFFICIENCY_KEYS = ("toolCallCount", "modelCallCount", "inputTokens", "outputTokens")
HISTORY_LIMIT = 50
HISTORY_KEY = "evalops.history_effects"
SIDES_KEPT = 4
"""Summarized decisions a shared read keeps (the registry site renders decisions in order,
and each page compares with the one before it): a few, so memory does not grow."""
_CHUNK = 500


def anchor(event: AuditEvent | None) -> Anchor | None:
    """`{"seq", "hash"}` of an audit event: what `evalops verify --anchors` checks."""
    return {"seq": event.seq, "hash": event.hash} if event is not None else None


def head_seq(session: Session) -> int:
    """The audit seq of the chain head (0 for an empty chain): "now" as a chain position."""
    event = chain_head(session)
    return event.seq if event is not None else 0


def head_token(head: Mapping[str, Any] | None) -> str | None:
    """`SEQ:sha256:HEX`, the spelling of an anchor inside HTML, Markdown and JUnit."""
    return f"{head['seq']}:{head['hash']}" if head else None


def audit_document(engine: Engine, gate_id: str, *, now: datetime) -> ReportDocument:
    """The report document of one stored decision (read-only)."""
    with read_session(engine) as session:
        row = decision_row(session, gate_id)
        return stored_document(session, row, now=now)


def stored_document(session: Session, row: GateDecision, *, now: datetime) -> ReportDocument:
    # A stored decision of any evaluator has the shape `DecisionDocument` describes.
    result = cast("DecisionDocument", json.loads(row.result))
    inputs = json.loads(row.inputs)
    resolved = resolve(
        session,
        result=result,
        inputs=inputs,
        upto=row.audit_seq,
        cutoff=decision_cutoff(inputs, row.audit_seq),
        authority_at=row.audit_seq,
    )
    resolved["history"] = decision_history(session, row.suite_id, up_to=row.number)
    resolved["previous_decision"] = previous_decision(
        session, inputs, before=row.number, build=row.build
    )
    sides = shared_sides(session)
    if sides is not None and int(inputs.get("evaluator", 1)) < EVALUATOR_COMPACT:
        # Summarized once: this page's changes, and the next page's "since" side (its
        # stored inputs are these very inputs, so the summary is the same).
        resolved["sides"] = sides_from_inputs(inputs, inputs.get("tasks", []))
        sides[row.gate_id] = resolved["sides"]
        while len(sides) > SIDES_KEPT:
            del sides[next(iter(sides))]
    document = assemble(
        result=result,
        inputs=inputs,
        resolved=resolved,
        decided_at=format_timestamp(row.at),
        decided_by=row.actor,
        inputs_digest=row.inputs_digest,
        result_digest=row.result_digest,
        audit_head=_remembered(_memo(session, "head"), None, lambda: anchor(chain_head(session))),
        decision_event=anchor(session.get(AuditEvent, row.audit_seq)),
        rendered_at=format_timestamp(now),
    )
    document["inputs"] = inputs  # verbatim, as stored
    return document


def unstored_document(
    engine: Engine, *, result: DecisionDocument, inputs: AnyGateInputs, now: datetime
) -> ReportDocument:
    """The report document of a decision that was evaluated but not stored (a dry run):
    resolved as of `now`, anchored to the chain head, with no decision event."""
    with read_session(engine) as session:
        resolved = resolve(
            session,
            result=result,
            inputs=inputs,
            upto=head_seq(session),
            cutoff=decision_cutoff(inputs, None),
        )
        resolved["history"] = decision_history(session, inputs["suite"]["id"])
        resolved["previous_decision"] = previous_decision(
            session, inputs, before=None, build=inputs["build"]
        )
        document = assemble(
            result=result,
            inputs=inputs,
            resolved=resolved,
            decided_at=None,
            decided_by=None,
            inputs_digest=digest(dict(inputs)),
            result_digest=digest(dict(result)),
            audit_head=anchor(chain_head(session)),
            decision_event=None,
            rendered_at=format_timestamp(now),
        )
        document["inputs"] = dict(inputs)
        return document


# --- resolution (reads the database) ---------------------------------------------------


def resolve(
    session: Session,
    *,
    result: DecisionDocument,
    inputs: Mapping[str, Any],
    upto: int,
    cutoff: int | None,
    authority_at: int | None = None,
) -> dict[str, Any]:
    """What the decision names, looked up as of audit seq `upto` (rows recorded later do
    not change what the decision saw; a later revocation is still shown, dated). Point in
    time is a position in the chain, never a comparison of the rows' own timestamps.
    Calibrations are those the gate selected, by the decision's own audit `cutoff`; the
    authority is the one in force at `authority_at` (the decision's event; None: now)."""
    defs = session_definitions(session)
    tasks = list(inputs.get("tasks", []))
    return {
        "tasks": _task_facts(session, defs, tasks, inputs["execution_digest"]),
        # Read as the report lists them (`assemble`), a chunk at a time.
        "trial_facts": _StoredTrials(session, defs, inputs, upto),
        "waivers": _waiver_facts(session, result.get("waivers") or {}, upto),
        "voids": decision_void_entries(
            ConnectionReader(session.connection()),
            str(inputs["execution_digest"]),
            [str(t["task_id"]) for t in tasks],
            upto if cutoff is None else cutoff,
        ),
        "calibration": (
            calibrations := calibration_facts(
                session,
                defs,
                tasks,
                cutoff,
                pass_class_exempt=int(inputs.get("evaluator", 1)) < 3,
            )
        ),
        "provenance": _provenance(session, inputs, upto),
        "coverage": _remembered(_memo(session, "coverage"), None, lambda: _coverage(session)),
        "authority": _authority_facts(
            session,
            result,
            authority_at,
            inputs,
            rests_on=_RestsOn(
                cutoff=upto if cutoff is None else cutoff,
                calibrations=[c["calibration_id"] for c in calibrations if c["calibration_id"]],
            ),
        ),
    }


@dataclass(frozen=True)
class _RestsOn:
    """What else a decision rests on that someone signed under an authority: the rows at or
    before `cutoff` (its pins' promotions, its build's ingests) and the calibrations used."""

    cutoff: int
    calibrations: list[str]


def _authority_facts(
    session: Session,
    result: DecisionDocument,
    cutoff: int | None,
    inputs: Mapping[str, Any],
    rests_on: _RestsOn | None = None,
) -> AuthorityFacts:
    """The authority in force at the decision's event (`cutoff`; None: now, for a decision
    not stored), and the signed acts it rests on: its waivers' grants and, under an
    authority, their revocations, its pins' promotions, its build's ingests and imports and
    the calibrations it used, with their signers, or unsigned (docs/authority.md)."""
    from evalops.services.authority.acts import authority_in_force, signers_of

    found = _remembered(
        _memo(session, "authority"), cutoff, lambda: authority_in_force(session, cutoff)
    )
    accounting: Mapping[str, Any] = result.get("waivers") or {}
    acts: list[AuthorityAct] = []
    for key in ("applied", "expired", "revoked"):
        for waiver_id in accounting.get(key, []):
            w = session.exec(select(Waiver).where(Waiver.waiver_id == waiver_id)).first()
            if w is not None:
                acts.append(
                    {
                        "act": "waiver.grant",
                        "subject": waiver_id,
                        "signers": signers_of(session, "waiver.grant", w.audit_seq),
                    }
                )
    if found is not None and rests_on is not None:
        acts += _signed_acts_beneath(session, inputs, accounting, rests_on)
    return {
        "id": found[0].id if found else None,
        "digest": found[1] if found else None,
        "acts": acts,
        "rules_changed_by": _remembered(
            _memo(session, "rules_changed_by"),
            (inputs.get("policy_digest"), inputs["suite"]["id"], cutoff),
            lambda: _rules_changed_by(session, inputs, cutoff),
        ),
    }


def _acts_at(session: Session, audit_seq: int) -> list[tuple[str, list[dict[str, str]]]]:
    """(kind, signers) of the acts recorded with the event `audit_seq`."""
    return [
        (str(row.kind), list(json.loads(row.signers)))
        for row in session.exec(select(SignedAct).where(SignedAct.audit_seq == audit_seq))
    ]


def _signed_acts_beneath(
    session: Session,
    inputs: Mapping[str, Any],
    accounting: Mapping[str, Any],
    rests_on: _RestsOn,
) -> list[AuthorityAct]:
    """The acts beneath a decision besides its waivers' grants: the revocations of its
    revoked waivers, the promotions that set its pins (one line per signer set, however many
    pins: a 10,000-task suite stays a few lines), the ingests and imports of its build's
    trials (one line per batch), and the calibrations it used."""
    acts: list[AuthorityAct] = []
    for waiver_id in accounting.get("revoked", []):
        revocation = session.exec(
            select(WaiverRevocation)
            .join(Waiver, col(Waiver.id) == col(WaiverRevocation.waiver_row_id))
            .where(Waiver.waiver_id == waiver_id)
        ).first()
        if revocation is not None:
            for kind, signers in _acts_at(session, revocation.audit_seq) or [("waiver.revoke", [])]:
                acts.append({"act": kind, "subject": waiver_id, "signers": signers})
    # Every promotion act read once (a 10,000-task suite: one query, not one per member).
    promoted = {
        int(row.audit_seq): list(json.loads(row.signers))
        for row in session.exec(select(SignedAct).where(SignedAct.kind == "suite.promote"))
    }
    members = queries.members(session, inputs["suite"]["id"], cutoff=rests_on.cutoff)
    for signers, task_ids in _by_signers(
        (promoted.get(m.added.audit_seq, []), m.task_id) for m in members
    ):
        subject = task_ids[0] if len(task_ids) == 1 else f"{len(task_ids):,} pins"
        acts.append({"act": "suite.promote", "subject": subject, "signers": signers})
    # The batches that stored the decision's own trials (its build, its member tasks, not
    # voided by then), one line per kind of act and set of signers: a build ingested a task
    # at a time stays a few lines.
    tasks = [str(t["task_id"]) for t in inputs.get("tasks", [])]
    batches = session.exec(
        select(IngestBatch.id, IngestBatch.audit_seq)
        .where(
            col(IngestBatch.id).in_(
                select(Trial.ingest_batch_id)
                .where(
                    Trial.execution_digest == inputs["execution_digest"],
                    col(Trial.task_id).in_(tasks),
                    col(Trial.audit_seq) <= rests_on.cutoff,
                    ~queries.voided(rests_on.cutoff),
                )
                .distinct()
            )
        )
        .order_by(col(IngestBatch.id))
    ).all()
    ingested = {
        int(row.audit_seq): (str(row.kind), list(json.loads(row.signers)))
        for row in session.exec(
            select(SignedAct).where(col(SignedAct.kind).in_(("trials.ingest", "trials.import")))
        )
    }
    by_act: dict[str, tuple[str, list[dict[str, str]], list[int]]] = {}
    for batch_id, batch_seq in batches:
        kind, signers = ingested.get(batch_seq, ("trials.ingest", []))
        key = json.dumps([kind, signers], sort_keys=True)
        by_act.setdefault(key, (kind, signers, []))[2].append(int(batch_id))
    for kind, signers, ids in by_act.values():
        subject = f"batch {ids[0]}" if len(ids) == 1 else f"{len(ids):,} batches"
        acts.append({"act": kind, "subject": subject, "signers": signers})
    acts += _evidence_acts(session, inputs["execution_digest"], tasks, rests_on.cutoff)
    for calibration_id in dict.fromkeys(rests_on.calibrations):
        calibration = session.exec(
            select(Calibration).where(Calibration.calibration_id == calibration_id)
        ).first()
        if calibration is not None:
            for kind, signers in _acts_at(session, calibration.audit_seq) or [
                ("calibration.record", [])
            ]:
                acts.append({"act": kind, "subject": calibration_id, "signers": signers})
    return acts


# The acts that changed what the decision's trials say (each a risk owner's or a
# reviewer's signed act under an authority): by the table whose rows they wrote.
_EVIDENCE_ACTS: tuple[tuple[Any, str, str, str], ...] = (
    (Reconciliation, "trials.reconcile", "reconciliation", "reconciliations"),
    (ReviewResult, "review.resolve", "review", "reviews"),
    (VoidedTrial, "trials.void", "void", "voids"),
)


def _evidence_acts(
    session: Session, execution_digest: str, tasks: list[str], cutoff: int
) -> list[AuthorityAct]:
    """The reconciliations, reviews and voids of the decision's build's trials of its member
    tasks, recorded by its cutoff: one line per kind of act and set of signers (a few lines
    however many trials), unsigned ones included."""
    ids = select(Trial.trial_id).where(
        Trial.execution_digest == execution_digest, col(Trial.task_id).in_(tasks)
    )
    out: list[AuthorityAct] = []
    for model, kind, one, several in _EVIDENCE_ACTS:
        seqs = sorted(
            int(seq)
            for seq in session.exec(
                select(model.audit_seq)
                .where(col(model.audit_seq) <= cutoff, col(model.trial_id).in_(ids))
                .distinct()
            )
        )
        signed = {
            int(row.audit_seq): list(json.loads(row.signers))
            for row in session.exec(
                select(SignedAct).where(SignedAct.kind == kind, col(SignedAct.audit_seq).in_(seqs))
            )
        }
        for signers, acts in _by_signers((signed.get(seq, []), seq) for seq in seqs):
            n = len(acts)
            out.append(
                {"act": kind, "subject": f"{n:,} {one if n == 1 else several}", "signers": signers}
            )
    return out


def _by_signers(
    items: Iterable[tuple[list[dict[str, str]], Any]],
) -> list[tuple[list[dict[str, str]], list[Any]]]:
    """(signers, what they signed) grouped by set of signers, in first-seen order: one
    line of the authority section per set, however many pins or trials."""
    grouped: dict[str, tuple[list[dict[str, str]], list[Any]]] = {}
    for signers, item in items:
        grouped.setdefault(json.dumps(signers, sort_keys=True), (signers, []))[1].append(item)
    return list(grouped.values())


def _rules_changed_by(
    session: Session, inputs: Mapping[str, Any], cutoff: int | None
) -> list[dict[str, Any]]:
    """Who last changed the decision's gate policy and its suite: the signer of the newest
    commit of the sync that registered the version in force (docs/authority.md); no
    signers when it came in unsigned (no authority in force then, or the bootstrap)."""
    policy = session.exec(
        select(PolicyRow)
        .where(PolicyRow.policy_digest == inputs.get("policy_digest"))
        .order_by(col(PolicyRow.id))
    ).first()
    suite_stmt = select(SuiteRow).where(SuiteRow.suite_id == inputs["suite"]["id"])
    if cutoff is not None:
        suite_stmt = suite_stmt.where(SuiteRow.audit_seq <= cutoff)
    suite = session.exec(suite_stmt.order_by(col(SuiteRow.id).desc())).first()
    out = []
    for kind, ident, row in (
        ("gate_policy", policy.policy_id if policy else None, policy),
        ("suite", inputs["suite"]["id"], suite),
    ):
        if row is None:
            continue
        run = session.get(SyncRun, row.sync_run_id)
        event = session.get(AuditEvent, run.audit_seq) if run is not None else None
        commits = json.loads(event.payload).get("rule_change_commits", []) if event else []
        newest = commits[0] if commits else None
        out.append(
            {
                "kind": kind,
                "id": ident,
                "at": format_timestamp(run.at) if run is not None else None,
                "commit": newest["commit"] if newest else (run.git_commit if run else None),
                "signers": (
                    [{"principal": newest["principal"], "fingerprint": newest["fingerprint"]}]
                    if newest
                    else []
                ),
            }
        )
    return out


def _coverage(session: Session) -> Coverage:
    """From which audit event on the rows are fully covered by their own events' digests,
    and which migrations carried older rows forward (checked only as far as their schema
    recorded them)."""
    carried = carried_forward(ConnectionReader(session.connection()))
    return {"rows_fully_covered_from": rows_fully_covered_from(carried), "carried_forward": carried}


EVALUATOR_TYPES = {"deterministic": "deterministic", "model": "llm_judge", "human": "human"}


def _score_grader(defs: Definitions, task: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(grader id, RFC 0244 evaluatorType) of the grader whose score is the trial score:
    `score_from`, else the first blocking outcome grader (docs/classification.md)."""
    spec = defs.task(task["task_id"], task["task_digest"])
    found = defs.grader_set(task["grader_set_digest"])
    if spec is None or found is None:
        return None, None
    graders = found[0].graders
    chosen = next((g for g in graders if g.id == spec.contract.score_from), None) or next(
        (g for g in graders if g.blocking and g.layer == "outcome"), None
    )
    if chosen is None:
        return None, None
    return chosen.id, EVALUATOR_TYPES.get(chosen.type)


def _task_revision(
    session: Session, task_id: str, task_digest: str, *, newest: bool
) -> TaskRevision | None:
    """The newest (or first) registration of a task revision; from the session's shared
    Definitions when a long read installed one (evidence.share_definitions)."""
    shared = session.info.get(SHARED_KEY)
    if isinstance(shared, Definitions):
        rows = [r for r in shared.task_rows(task_digest) if r.task_id == task_id]
        rows.sort(key=lambda r: r.id or 0)
        return (rows[-1] if newest else rows[0]) if rows else None
    return session.exec(
        select(TaskRevision)
        .where(TaskRevision.task_id == task_id, TaskRevision.task_digest == task_digest)
        .order_by(col(TaskRevision.id).desc() if newest else col(TaskRevision.id))
    ).first()


def _incident_links(session: Session) -> dict[str, list[int]]:
    links: dict[str, list[int]] = {}
    for event in session.exec(
        select(IncidentEvent).where(IncidentEvent.action == "link").order_by(col(IncidentEvent.id))
    ):
        if event.task_id:
            links.setdefault(event.task_id, []).append(event.incident_row_id)
    return links


def _task_facts(
    session: Session,
    defs: Definitions,
    tasks: Sequence[Mapping[str, Any]],
    execution_digest: str,
) -> dict[str, dict[str, Any]]:
    links: dict[str, list[int]] = _remembered(
        _memo(session, "incident_links"), None, lambda: _incident_links(session)
    )
    memo = _memo(session, "task_facts")
    out: dict[str, dict[str, Any]] = {}
    for t in tasks:
        # The same in every decision that pins the same revisions (in one snapshot), whatever
        # its build: kept once per revision, not once per decision's task, so a long read
        # (the registry site) holds as many as the registry has revisions.
        key = (t["task_id"], t["task_digest"], t["grader_set_digest"])
        if memo is None or key not in memo:
            found = _one_task_facts(session, defs, t, links)
            if memo is not None:
                memo[key] = found
        else:
            found = memo[key]
        out[t["task_id"]] = {
            **found,
            "eval_case_digest": digests.eval_case_digest(
                t["task_digest"], execution_digest, t["grader_set_digest"]
            ),
        }
    return out


def _one_task_facts(
    session: Session, defs: Definitions, t: Mapping[str, Any], links: Mapping[str, list[int]]
) -> dict[str, Any]:
    """The task's facts but its eval case digest (which names the build's execution)."""
    revision = _task_revision(session, t["task_id"], t["task_digest"], newest=True)
    meta = defs.spec_of(revision).meta if revision is not None else None
    incidents = []
    for row_id in dict.fromkeys(links.get(t["task_id"], [])):
        incident = session.get(Incident, row_id)
        if incident is None:
            continue
        last = session.exec(
            select(IncidentEvent)
            .where(IncidentEvent.incident_row_id == row_id)
            .order_by(col(IncidentEvent.id).desc())
        ).first()
        incidents.append(
            {
                "incident_id": incident.incident_id,
                "title": incident.title,
                "severity": incident.severity,
                "state": last.state if last else "open",
                "trace_uri": incident.trace_uri,
            }
        )
    score_grader, evaluator_type = _score_grader(defs, t)
    return {
        "score_grader": score_grader,
        "evaluator_type": evaluator_type,
        "title": meta.title if meta else None,
        "owner": meta.owner if meta else None,
        "failure_owner": meta.failure_owner if meta else None,
        "revision": revision.revision if revision else None,
        "task_digest": t["task_digest"],
        "grader_set_digest": t["grader_set_digest"],
        "incidents": incidents,
    }


def _chunks(items: Sequence[str]) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]


def _trial_rows(session: Session, ids: Sequence[str], cutoff: int | None) -> Iterable[Trial]:
    """The trials named, as the decision read them (the row of each id live at its
    `cutoff`: a voided id may have been ingested again since), a chunk at a time; each chunk
    leaves the session once read (an audit report of a large decision would otherwise hold
    every stored record)."""
    for chunk in _chunks(ids):
        trials = list(
            session.exec(
                select(Trial).where(
                    col(Trial.trial_id).in_(chunk),
                    queries.upto(Trial.audit_seq, cutoff),
                    ~queries.voided(cutoff),
                )
            )
        )
        yield from trials
        for trial in trials:
            session.expunge(trial)


def _explanation(current: Classification | None, stored_class: str) -> str:
    """Why the trial has its class, from the classifier's own reasons.

    Evidence added after the decision (a reconciliation, a review) can change the class;
    then the explanation says both, and the decision's class stands.
    """
    if current is None:
        return f"{stored_class} (its definitions are no longer registered)"
    reasons = "; ".join(current.reasons) or current.primary
    if current.primary == stored_class:
        return reasons
    return f"{stored_class} when decided; with evidence recorded since: {reasons}"


def _deciding_evaluator(
    defs: Definitions,
    trial: Trial,
    record: Mapping[str, Any],
    stored_class: str,
    current: Classification | None,
) -> str | None:
    """The RFC 0244 evaluatorType of what gave the trial its class, or None when no grader's
    verdict is among it (a pass, a runtime or effect class: the score grader's type stands).
    `llm_judge` only when model judges alone gave it: a deterministic grader or a check no
    grader makes (the trajectory, a fail-closed fixture miss) beside the judge reads
    `deterministic`, as the classifier's own `deciders` say."""
    if current is not None and current.primary == stored_class:
        kinds = [by for cls, by in current.deciders if cls == stored_class]
        if stored_class == "task_pass" or all(by is None for by in kinds):
            return None
        if any(by in (None, "deterministic") for by in kinds):
            return "deterministic"
        return EVALUATOR_TYPES.get(next(by for by in kinds if by is not None))
    # Evidence recorded since changed the class: the stored verdicts that gave it.
    found = defs.grader_set(trial.grader_set_digest)
    if found is None:
        return None
    verdicts = {r.get("grader_id"): r.get("state") for r in record.get("grader_results", [])}
    for grader in found[0].graders:
        if verdicts.get(grader.id) == stored_class != "task_pass":
            return EVALUATOR_TYPES.get(grader.type)
    return None


class TrialFacts(Protocol):
    """The decision's trials, each with its resolved facts, as `assemble` lists them."""

    def chunks(self, task_in: Mapping[str, Any]) -> Iterator[TrialChunk]:
        """One task's trial inputs (`task_in`: the task's input), in order, a chunk at a
        time, each with its trials' facts and drill-down details (by trial id)."""
        ...

    def layers(self) -> list[LayerCount]:
        """Grader verdicts other than a pass by layer, once every chunk has been read."""
        ...


TrialChunk: TypeAlias = tuple[
    Sequence[Mapping[str, Any]], Mapping[str, Mapping[str, Any]], Mapping[str, Mapping[str, Any]]
]
"""(trial inputs, facts by trial id, drill-down details by trial id)."""

_LAYER_ORDER = {"hard_constraint": 0, "outcome": 1, "trajectory_diagnosis": 2, "runtime": 3}


class _GivenTrialFacts:
    """Facts resolved beforehand (`resolved["trials"]`, `["details"]`, `["layers"]`), for a
    document assembled without a database; every trial listed in the inputs."""

    def __init__(self, resolved: Mapping[str, Any]) -> None:
        self.resolved = resolved

    def chunks(self, task_in: Mapping[str, Any]) -> Iterator[TrialChunk]:
        yield (
            task_in.get("trials", []),
            self.resolved.get("trials", {}),
            self.resolved.get("details", {}),
        )

    def layers(self) -> list[LayerCount]:
        return list(self.resolved.get("layers", []))


class _StoredTrials:
    """The decision's trials read from the registry a chunk at a time, each with its stored
    record's facts, so that no more than a chunk is held (the rows `assemble` makes of them
    go to a `RowSpool`). Evaluator 4 stores per-task summaries, not trials (docs/gate.md,
    "Evaluator 4"): its trials are read again with their rows, as evaluator 3 lists them
    (`ListedTrials`: the rows `verify` checks the summaries against); earlier evaluators'
    inputs list their trials, and their rows are read by id."""

    def __init__(
        self, session: Session, defs: Definitions, inputs: Mapping[str, Any], upto: int
    ) -> None:
        self.session = session
        self.defs = defs
        self.upto = upto
        self.inputs = inputs
        self.listed: ListedTrials | None = None
        if int(inputs.get("evaluator", 1)) >= EVALUATOR_COMPACT:
            from evalops.services.gate.listed_trials import ListedTrials

            self.listed = ListedTrials(session, inputs, _CHUNK)
        self.batches = _remembered(_memo(session, "batches"), None, lambda: _BatchFiles(session))
        self.counts: Counter[tuple[str, str]] = Counter()

    def chunks(self, task_in: Mapping[str, Any]) -> Iterator[TrialChunk]:
        if not task_in:
            return
        if self.listed is None:
            for start in range(0, len(trials := task_in.get("trials", [])), _CHUNK):
                chunk = trials[start : start + _CHUNK]
                yield self._with_facts(chunk, self._by_id(chunk))
            return
        listed: list[ListedTrial] = []
        for entry in self.listed(task_in):
            listed.append(entry)
            if len(listed) >= _CHUNK:
                yield self._with_facts([t for t, _ in listed], [row for _, row in listed])
                listed = []
        if listed:
            yield self._with_facts([t for t, _ in listed], [row for _, row in listed])

    def layers(self) -> list[LayerCount]:
        if self.listed is not None:
            self.listed.close()  # every task has been listed
        return [
            {"layer": layer, "state": state, "count": n}
            for (layer, state), n in sorted(
                self.counts.items(), key=lambda kv: (_LAYER_ORDER.get(kv[0][0], 9), kv[0])
            )
        ]

    def _by_id(self, chunk: Sequence[Mapping[str, Any]]) -> Iterable[Trial]:
        """The stored rows of the trials listed, read by id as the decision read them."""
        ids = [t["trial_id"] for t in chunk]
        return _trial_rows(self.session, ids, decision_cutoff(self.inputs, self.upto))

    def _with_facts(self, chunk: Sequence[Mapping[str, Any]], rows: Iterable[Trial]) -> TrialChunk:
        """Each trial's facts, and the drill-down details of those that did not pass, from
        their stored rows; their grader verdicts counted by layer."""
        defs, upto = self.defs, self.upto
        classes = {t["trial_id"]: t["classification"] for t in chunk}
        found: dict[str, dict[str, Any]] = {}
        details: dict[str, dict[str, Any]] = {}
        for trial in rows:
            trial_id = trial.trial_id
            record = json.loads(trial.record)
            _count_layers(self.counts, defs, trial, record)
            if classes[trial_id] != "task_pass":
                details[trial_id] = trial_details(
                    defs, trial, record, self.batches.of(trial.ingest_batch_id)
                )
            recon, reviews = defs.appended(trial_id)
            current = rederive(defs, trial, record)
            found[trial_id] = {
                "trial_index": trial.trial_index,
                "run_id": trial.run_id,
                "started_at": format_timestamp(trial.started_at),
                "completed_at": format_timestamp(trial.completed_at),
                "record_digest": trial.record_digest,
                "trace_uri": record.get("trace_uri"),
                "rerun_reason": trial.rerun_reason,
                "runtime_status": (record.get("runtime") or {}).get("status"),
                "explanation": _explanation(current, classes[trial_id]),
                "scored": current.scored if current else True,
                "evaluator_type": _deciding_evaluator(
                    defs, trial, record, classes[trial_id], current
                ),
                "reconciliations": [
                    {
                        "effect_key": r.effect_key,
                        "effect_index": r.effect_index,
                        "status": r.status,
                        "evidence_uri": r.evidence_uri,
                        "at": format_timestamp(r.at),
                        "actor": r.actor,
                    }
                    for r in recon
                    if r.audit_seq <= upto
                ],
                "reviews": [
                    {
                        "grader_id": r.grader_id,
                        "state": r.state,
                        "reason": r.reason,
                        "at": format_timestamp(r.at),
                        "actor": r.actor,
                    }
                    for r in reviews
                    if r.audit_seq <= upto
                ],
            }
        return chunk, found, details


class _BatchFiles:
    """The files each ingest batch read, looked up once per batch."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.known: dict[int, list[str]] = {}

    def of(self, batch_id: int) -> list[str]:
        if batch_id not in self.known:
            row = self.session.get(IngestBatch, batch_id)
            self.known[batch_id] = [str(f) for f in json.loads(row.files)] if row else []
        return self.known[batch_id]


def _count_layers(
    counts: Counter[tuple[str, str]], defs: Definitions, trial: Trial, record: dict[str, Any]
) -> None:
    """Add one trial's runtime failure and grader verdicts other than a pass."""
    found = defs.grader_set(trial.grader_set_digest)
    status = (record.get("runtime") or {}).get("status", "ok")
    if status != "ok":
        counts[("runtime", status)] += 1
    for result in record.get("grader_results", []):
        state = result.get("state")
        if state in ("task_pass", "pass"):
            continue
        grader = found[0].grader(result.get("grader_id", "")) if found else None
        counts[(grader.layer if grader else "unknown_grader", str(state))] += 1


def _refused_by_policy(session: Session, entry: Mapping[str, Any]) -> dict[str, Any]:
    """A granted waiver the decision's policy refused: its grant, and the refusal apart (the
    grant's `reason` is the owner's; `refusal` is why the policy in force refused it)."""
    w = session.exec(select(Waiver).where(Waiver.waiver_id == entry["waiver_id"])).first()
    return {
        **entry,
        "refusal": entry.get("refusal") or entry.get("reason"),
        "owner": w.owner if w else None,
        "reason": w.reason if w else None,
        "build": w.build if w else None,
        "expires": format_timestamp(w.expires_at) if w else None,
        "at": format_timestamp(w.granted_at) if w else None,
        "actor": w.granted_by if w else None,
    }


def _waiver_facts(session: Session, accounting: Mapping[str, Any], upto: int) -> dict[str, Any]:
    """Each waiver the decision names, with its row's facts; a revocation recorded after
    audit seq `upto` (the decision) is shown, marked as later: the decision did not see it."""
    from evalops.services.authority.acts import signers_of

    ids = [
        w for key in ("applied", "expired", "unused", "revoked") for w in accounting.get(key, [])
    ]
    out: dict[str, Any] = {}
    for waiver_id in ids:
        w = session.exec(select(Waiver).where(Waiver.waiver_id == waiver_id)).first()
        if w is None:
            continue
        revocation = session.exec(
            select(WaiverRevocation)
            .where(WaiverRevocation.waiver_row_id == w.id)
            .order_by(col(WaiverRevocation.revoked_at))
        ).first()
        out[waiver_id] = {
            "task_id": w.task_id,
            "build": w.build,
            "states": json.loads(w.states),
            "owner": w.owner,
            "reason": w.reason,
            "granted_at": format_timestamp(w.granted_at),
            "expires_at": format_timestamp(w.expires_at),
            "granted_by": w.granted_by,
            # Who signed it, beside who ran the command: under an authority the signer is
            # the risk owner who accepted the risk.
            "signers": signers_of(session, "waiver.grant", w.audit_seq),
            "revocation": (
                {
                    "revoked_at": format_timestamp(revocation.revoked_at),
                    "reason": revocation.reason,
                    "actor": revocation.actor,
                    "after_decision": revocation.audit_seq > upto,
                }
                if revocation
                else None
            ),
        }
    refused = []
    for entry in accounting.get("refused", []):
        if entry.get("waiver_id"):
            refused.append(_refused_by_policy(session, entry))
            continue
        event = session.get(AuditEvent, entry.get("seq")) if entry.get("seq") else None
        request = json.loads(event.payload).get("request", {}) if event else {}
        refused.append(
            {
                **entry,
                "owner": request.get("owner"),
                "reason": request.get("reason"),
                "build": request.get("build"),
                "expires": request.get("expires"),
                "actor": event.actor if event else None,
            }
        )
    return {"rows": out, "refused": refused}


def calibration_facts(
    session: Session,
    defs: Definitions,
    tasks: Sequence[Mapping[str, Any]],
    cutoff: int | None,
    *,
    pass_class_exempt: bool = False,
) -> list[CalibrationFact]:
    """Every model grader of every pinned grader set, judged for the pinned config by the
    very rule the gate applies (`queries.config_validity`): the newest calibration of
    exactly that config among the rows at or before `cutoff` (None: every row), under the
    rules of the decision's evaluator. A calibration recorded after an `--at` decision's
    cutoff is never shown as its own."""
    out: list[CalibrationFact] = []
    for grader_set_digest in dict.fromkeys(t["grader_set_digest"] for t in tasks):
        found = defs.grader_set(grader_set_digest)
        if found is None:
            continue
        spec, raw, set_id = found
        for grader, entry in zip(spec.graders, raw, strict=True):
            if grader.type != "model":
                continue
            config = digests.grader_config_digest(entry)
            validity = queries.config_validity(
                session, grader, config, cutoff, pass_class_exempt=pass_class_exempt
            )
            row = (
                session.exec(
                    select(Calibration).where(Calibration.calibration_id == validity.calibration_id)
                ).first()
                if validity.calibration_id
                else None
            )
            out.append(
                {
                    "grader_set_id": set_id,
                    "grader_set_digest": grader_set_digest,
                    "grader_id": grader.id,
                    "grader_version": grader.version,
                    "grader_config_digest": config,
                    "layer": grader.layer,
                    "blocking": grader.blocking,
                    "state": validity.state,
                    "reasons": list(validity.reasons),
                    "blockable_classes": sorted(validity.blockable_classes),
                    "calibration_id": validity.calibration_id,
                    "recorded_at": format_timestamp(row.at) if row else None,
                    "recorded_by": row.actor if row else None,
                    "measured": measured_against_required(
                        grader.calibration_requirements, json.loads(row.record)
                    )
                    if row
                    else None,
                }
            )
    return out


def _sync_view(run: SyncRun | None) -> SyncView | None:
    if run is None:
        return None
    assert run.id is not None  # a stored row
    return {
        "sync_run": run.id,
        "at": format_timestamp(run.at),
        "actor": run.actor,
        "git_commit": run.git_commit,
        "git_branch": run.git_branch,
        "git_remote": run.git_remote,
        "git_dirty": run.git_dirty,
    }


def _provenance(session: Session, inputs: Mapping[str, Any], upto: int) -> dict[str, Any]:
    """The registry's git provenance: every sync up to the decision, and where each input
    definition the decision names was registered from."""
    views = _memo(session, "sync_views")
    every = _memo(session, "sync_runs")
    if every is None:
        runs = session.exec(
            select(SyncRun).where(SyncRun.audit_seq <= upto).order_by(col(SyncRun.id))
        ).all()
    else:
        if not every:
            # Every sync run of the snapshot, read once; each decision takes its prefix.
            every.update(
                (r.id, (r.audit_seq, _sync_view(r)))
                for r in session.exec(select(SyncRun).order_by(col(SyncRun.id))).all()
            )
        runs = [view for seq, view in every.values() if seq <= upto]
    definitions: list[dict[str, Any]] = []

    def sync_of(run_id: int) -> dict[str, Any] | None:
        view: dict[str, Any] | None = _remembered(
            views, run_id, lambda: _sync_view(session.get(SyncRun, run_id))
        )
        return view

    def add(kind: str, ident: str, digest: str, row: Any) -> None:
        definitions.append(
            {
                "kind": kind,
                "id": ident,
                "digest": digest,
                "file_path": row.file_path if row else None,
                "sync": sync_of(row.sync_run_id) if row else None,
            }
        )

    policy = _remembered(
        _memo(session, "policy_rows"),
        inputs.get("policy_digest"),
        lambda: session.exec(
            select(PolicyRow)
            .where(PolicyRow.policy_digest == inputs.get("policy_digest"))
            .order_by(col(PolicyRow.id))
        ).first(),
    )
    add("gate_policy", policy.policy_id if policy else "?", inputs.get("policy_digest", ""), policy)
    execution = _remembered(
        _memo(session, "execution_rows"),
        inputs["execution_digest"],
        lambda: session.exec(
            select(ExecutionProfileRow)
            .where(ExecutionProfileRow.execution_digest == inputs["execution_digest"])
            .order_by(col(ExecutionProfileRow.id))
        ).first(),
    )
    add(
        "execution_profile",
        execution.execution_id if execution else "?",
        inputs["execution_digest"],
        execution,
    )
    suite_id = inputs["suite"]["id"]
    suite = _remembered(
        _memo(session, "newest_suite_rows"),
        suite_id,
        lambda: session.exec(
            select(SuiteRow).where(SuiteRow.suite_id == suite_id).order_by(col(SuiteRow.id).desc())
        ).first(),
    )
    add("suite", suite_id, suite.document_digest if suite else "", suite)
    for t in inputs.get("tasks", []):
        revision = _task_revision(session, t["task_id"], t["task_digest"], newest=False)
        add("task", t["task_id"], t["task_digest"], revision)
    syncs = [r if isinstance(r, dict) else _sync_view(r) for r in runs]
    return {
        "syncs": syncs,
        "in_force": syncs[-1] if syncs else None,
        "definitions": definitions,
    }


def decision_history(
    session: Session, suite_id: str, *, up_to: int | None = None, limit: int = HISTORY_LIMIT
) -> list[HistoryEntry]:
    """The suite's decisions, oldest first, up to and including decision number `up_to`."""
    stmt = select(
        GateDecision.gate_id,
        GateDecision.decision,
        GateDecision.build,
        GateDecision.evaluated_at,
    ).where(GateDecision.suite_id == suite_id)
    newest_first = col(GateDecision.number).desc()
    every = _memo(session, "suite_decisions")
    if every is not None:
        # A shared read lists the suite's decisions once (a few columns each), newest first.
        if suite_id not in every:
            numbers = select(GateDecision.number).where(GateDecision.suite_id == suite_id)
            every[suite_id] = list(
                zip(
                    session.exec(numbers.order_by(newest_first)).all(),
                    session.exec(stmt.order_by(newest_first)).all(),
                    strict=True,
                )
            )
        rows = [r for n, r in every[suite_id] if up_to is None or n <= up_to][:limit]
    else:
        if up_to is not None:
            stmt = stmt.where(GateDecision.number <= up_to)
        rows = list(session.exec(stmt.order_by(newest_first).limit(limit)).all())
    # Per-decision effect counts: read once per decision, and once per session when a long
    # read shares its lookups (the registry site renders every decision's history).
    known: dict[str, EffectCounts] = (
        session.info.setdefault(HISTORY_KEY, {}) if SHARED_KEY in session.info else {}
    )
    missing = [gate_id for gate_id, *_ in rows if gate_id not in known]
    for gate_id, text in (
        session.exec(
            select(GateDecision.gate_id, GateDecision.result).where(
                col(GateDecision.gate_id).in_(missing)
            )
        ).all()
        if missing
        else []
    ):
        effects = Counter(
            "waived" if t.get("waiver_id") else t.get("effect")
            for t in json.loads(text).get("tasks", [])
        )
        known[gate_id] = {
            "block": effects.get("block", 0),
            "hold": effects.get("hold", 0),
            "waived": effects.get("waived", 0),
            "pass": effects.get("pass", 0),
        }
    return [
        {
            "gate_id": gate_id,
            "decision": decision,
            "build": build,
            "evaluated_at": format_timestamp(evaluated_at),
            "tasks": known[gate_id].copy(),
        }
        for gate_id, decision, build, evaluated_at in reversed(rows)
    ]


def _memo(session: Session, name: str) -> dict[Any, Any] | None:
    """A lookup table that lives as long as a shared read (`share_definitions`: one snapshot
    whose rows cannot change under it), or None when the read shares nothing. What is kept
    is small and the same for every decision of the snapshot (sync runs, definition rows,
    the chain head), so N decisions read it once."""
    if SHARED_KEY not in session.info:
        return None
    found: dict[Any, Any] = session.info.setdefault(f"evalops.report.{name}", {})
    return found


def _remembered(memo: dict[Any, Any] | None, key: Any, compute: Callable[[], Any]) -> Any:
    if memo is None:
        return compute()
    if key not in memo:
        memo[key] = compute()
    return memo[key]


# --- assembly (pure) ---------------------------------------------------------------------


def ignored_by_reason(value: Any) -> dict[str, int]:
    """`ignoredTrials` as `{"<reason>": n}` whether stored as a count or already by reason."""
    if isinstance(value, Mapping):
        return {str(k): int(v) for k, v in value.items() if v}
    if isinstance(value, int | float) and value:
        return {"other_revision_or_grader_set": int(value)}
    return {}


def _first_results(task: DecisionTask) -> str:
    """Originals by their own class: evaluator 4 counts them, earlier ones list them."""
    listed = task.get("firstResultCounts")
    counts = (
        Counter({str(k): int(v) for k, v in listed.items()})
        if listed is not None
        else Counter((task.get("firstResults") or {}).values())
    )
    return ", ".join(
        f"{n} {cls}" for cls, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    )


def _effect_key(task: DecisionTask) -> str:
    return "waived" if task.get("waiver_id") else str(task.get("effect"))


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _efficiency_mean(tasks: Sequence[ReportTask], key: str) -> float | None:
    """The mean of one efficiency count over the tasks that have it."""
    values: list[float] = []
    for t in tasks:
        counts = t.get("efficiency")
        if isinstance(counts, Mapping):
            value = counts.get(key)
            if value is not None:
                values.append(float(value))
    return _mean(values)


def assemble(
    *,
    result: DecisionDocument,
    inputs: Mapping[str, Any],
    resolved: Mapping[str, Any],
    decided_at: str | None,
    decided_by: str | None,
    inputs_digest: str,
    result_digest: str,
    audit_head: Anchor | None,
    decision_event: Anchor | None,
    rendered_at: str,
) -> ReportDocument:
    """The report document: the stored decision and inputs verbatim, plus resolved facts
    arranged the way a reader follows them. Renderers and exporters read only this.

    In steps: one row per task (failures first) and per trial of the decision, each with
    its resolved facts; then the blocks a reader follows (summary, failure classes,
    waivers, efficiency, digests), each from those rows. The trial rows and drill-downs
    of a large decision are a `RowSpool` (`report/rows.py`), not lists."""
    waiver_rows: Mapping[str, Any] = resolved.get("waivers", {}).get("rows", {})
    tasks_in = {t["task_id"]: t for t in inputs.get("tasks", [])}
    tasks = [
        _decision_task(t, tasks_in.get(t["task_id"], {}), resolved, waiver_rows)
        for t in result.get("tasks", [])
    ]
    trials, failing, by_class, layers = _report_trials(
        result,
        tasks_in,
        resolved,
        {t["task_id"]: t["grader_set_digest"] for t in tasks},
    )
    tasks.sort(key=lambda t: (EFFECT_ORDER.get(t["outcome"], 9), t["task_id"]))
    waivers = _waiver_block(result, resolved, waiver_rows)
    efficiency = _efficiency(tasks)
    baseline = inputs.get("baseline") or {}
    no_provenance: Provenance = {"syncs": [], "in_force": None, "definitions": []}
    no_authority: AuthorityFacts = {"id": None, "digest": None, "acts": []}
    provenance: Provenance = resolved.get("provenance") or no_provenance
    authority: AuthorityFacts = resolved.get("authority") or no_authority
    return {
        "report": REPORT_SCHEMA,
        "evalops_version": __version__,
        "rendered_at": rendered_at,
        "gate_id": result["gate_id"],
        "decision": result["decision"],
        "build": result["build"],
        "suite": result["suite"],
        "suite_kind": (inputs.get("suite") or {}).get("kind"),
        "evaluated_at": result["evaluated_at"],
        "decided_at": decided_at,
        "decided_by": decided_by,
        "stored": decision_event is not None,
        "reasons": list(result.get("reasons", [])),
        "policy": named_in(inputs),
        "audit_head": audit_head.copy() if audit_head else None,
        "decision_event": decision_event.copy() if decision_event else None,
        "coverage": resolved.get("coverage"),
        "summary": _summary(result, tasks, trials),
        "tasks": tasks,
        "trialStats": result["trialStats"],
        "failure_classes": _failure_classes(by_class, layers),
        "trials": trials,
        "failing_trials": failing,
        "waivers": waivers,
        "voids": cast("list[ReportVoid]", list(resolved.get("voids", []))),
        "calibration": list(resolved.get("calibration", [])),
        "regression": result.get("regression"),
        "changes": changes_since_baseline(
            result, inputs, resolved.get("previous_decision"), resolved.get("sides")
        ),
        "efficiency": efficiency,
        "digests": {
            "suite_digest": result["suite_digest"],
            "policy_digest": result["policy_digest"],
            "execution_digest": result["execution_digest"],
            "baseline_execution_digest": baseline.get("execution_digest"),
            "inputs_digest": inputs_digest,
            "result_digest": result_digest,
            "eval_cases": _eval_cases(tasks),
        },
        "provenance": provenance,
        "authority": authority,
        "history": list(resolved.get("history", [])),
        # The anchor itself, not a file: a pull-request comment has no file to point at.
        "recompute": [
            f"evalops gate replay {result['gate_id']}",
            f"evalops verify --anchor {head_token(audit_head)}" if audit_head else "evalops verify",
        ],
        "decision_document": result.copy(),
        "inputs": dict(inputs),
    }


def _decision_task(
    t: DecisionTask,
    task_in: Mapping[str, Any],
    resolved: Mapping[str, Any],
    waiver_rows: Mapping[str, Any],
) -> ReportTask:
    """One task of the decision (`t`) with its resolved facts; its pins fall back on the
    decision's inputs (`task_in`)."""
    facts = resolved.get("tasks", {}).get(t["task_id"], {})
    waiver_id = t.get("waiver_id")
    waiver = waiver_rows.get(waiver_id) if waiver_id else None
    return {
        **t,
        "outcome": _effect_key(t),
        "title": facts.get("title"),
        "owner": facts.get("owner"),
        "failure_owner": facts.get("failure_owner"),
        "revision": facts.get("revision"),
        "task_digest": facts.get("task_digest", task_in.get("task_digest")),
        "grader_set_digest": facts.get("grader_set_digest", task_in.get("grader_set_digest")),
        "eval_case_digest": facts.get("eval_case_digest"),
        "incidents": facts.get("incidents", []),
        "first_result": _first_results(t),
        "score_grader": facts.get("score_grader"),
        "evaluator_type": facts.get("evaluator_type"),
        "ignored": ignored_by_reason(t.get("ignoredTrials")),
        "k": (task_in.get("plan") or {}).get("k"),
        "waiver": waiver,
    }


def _report_trials(
    result: DecisionDocument,
    tasks_in: Mapping[str, Mapping[str, Any]],
    resolved: Mapping[str, Any],
    grader_sets: Mapping[str, str],
) -> tuple[Sequence[ReportTrial], Sequence[dict[str, Any]], Counter[str], list[LayerCount]]:
    """The report's trials (task by task, in the decision's order), the drill-down of each
    that did not pass, the trials by class and the failing verdicts by layer, from one pass
    over the trials (`resolved["trial_facts"]`: read from the registry a chunk at a time;
    else the facts resolved beforehand). Rows past a few thousand go to disk (`RowSpool`),
    so a decision of any size is listed in bounded memory, and reads back the same."""
    facts: TrialFacts = resolved.get("trial_facts") or _GivenTrialFacts(resolved)
    task_facts: Mapping[str, Any] = resolved.get("tasks", {})
    rows: RowSpool[ReportTrial] = RowSpool()
    failing: RowSpool[tuple[ReportTrial, Mapping[str, Any]]] = RowSpool()
    children: dict[str, list[Mapping[str, Any]]] = {}
    by_class: Counter[str] = Counter()
    for t in result.get("tasks", []):
        for chunk, trial_facts, details in facts.chunks(tasks_in.get(t["task_id"], {})):
            for row in _decision_trials(t, chunk, task_facts.get(t["task_id"], {}), trial_facts):
                rows.append(row)
                by_class[row["classification"]] += 1
                add_rerun(children, row)
                if row["classification"] != "task_pass":
                    failing.append((row, details.get(row["trial_id"]) or {}))
    states = calibration_states(resolved.get("calibration", []))
    drills = mapped(
        failing.finished(),
        lambda entry: drill_down(entry[0], entry[1], states, grader_sets, children),
    )
    return rows.finished(), drills, by_class, facts.layers()


def _decision_trials(
    t: DecisionTask,
    trials: Iterable[Mapping[str, Any]],
    facts: Mapping[str, Any],
    trial_facts: Mapping[str, Any],
) -> list[ReportTrial]:
    """Trials of one task of the decision (`t`), as its inputs list them, each with its
    resolved facts (`facts`: the task's; `trial_facts`: by trial id)."""
    first = t.get("firstResults") or {}
    not_permitted = set(t.get("rerunsNotPermitted") or [])
    rows: list[ReportTrial] = []
    for trial in trials:
        fact = trial_facts.get(trial["trial_id"], {})
        rerun_not_permitted = trial["trial_id"] in not_permitted
        reconciliations = fact.get("reconciliations", [])
        reviews = fact.get("reviews", [])
        rows.append(
            {
                "trial_id": trial["trial_id"],
                "task_id": t["task_id"],
                "evaluator_type": fact.get("evaluator_type") or facts.get("evaluator_type"),
                "classification": trial["classification"],
                "score": trial.get("score"),
                "gating_score": trial.get("gating_score"),
                "shown_score": plain_number(
                    shown_score(
                        trial["classification"],
                        float(trial.get("gating_score") or 0.0),
                        scored=fact.get("scored", True),
                    )
                ),
                "parent_trial_id": trial.get("parent_trial_id"),
                # An original's own result is its first (evaluator 4 lists no ids).
                "first_result": (
                    trial["trial_id"] in first
                    if "firstResultCounts" not in t
                    else trial.get("parent_trial_id") is None
                ),
                "rerun_not_permitted": rerun_not_permitted,
                "fixture_misses": trial.get("fixture_misses", 0),
                "trial_index": fact.get("trial_index"),
                "run_id": fact.get("run_id"),
                "started_at": fact.get("started_at"),
                "completed_at": fact.get("completed_at"),
                "record_digest": fact.get("record_digest"),
                "trace_uri": fact.get("trace_uri"),
                "runtime_status": fact.get("runtime_status"),
                "rerun_reason": fact.get("rerun_reason"),
                "explanation": fact.get("explanation", trial["classification"]),
                "reconciliations": reconciliations,
                "reviews": reviews,
                "notable": bool(
                    trial["classification"] != "task_pass"
                    or trial.get("parent_trial_id")
                    or rerun_not_permitted
                    or reconciliations
                    or reviews
                ),
            }
        )
    return rows


def _summary(
    result: DecisionDocument, tasks: Sequence[ReportTask], trials: Sequence[ReportTrial]
) -> ReportSummary:
    """Tasks by outcome, trials, and the trials ignored (by reason)."""
    outcomes = Counter(t["outcome"] for t in tasks)
    return {
        "tasks": len(tasks),
        "block": outcomes.get("block", 0),
        "hold": outcomes.get("hold", 0),
        "waived": outcomes.get("waived", 0),
        "pass": outcomes.get("pass", 0),
        "trials": len(trials),
        "ignored_trials": ignored_by_reason(result.get("ignoredTrials")),
    }


def _failure_classes(by_class: Counter[str], layers: Sequence[LayerCount]) -> FailureClasses:
    """Trials by class (most frequent first) and the resolved failures by layer."""
    return {
        "by_class": [
            {"classification": c, "trials": n}
            for c, n in sorted(by_class.items(), key=lambda kv: (-kv[1], kv[0]))
        ],
        "by_layer": list(layers),
    }


def _waiver_block(
    result: DecisionDocument, resolved: Mapping[str, Any], waiver_rows: Mapping[str, Any]
) -> ReportWaivers:
    """The decision's waiver accounting, each waiver with its resolved row; the refused
    ones as resolved, else as the decision stored them."""
    accounting: Mapping[str, Any] = result.get("waivers") or {}

    def listed(key: str) -> list[ReportWaiver]:
        out: list[ReportWaiver] = []
        for waiver_id in accounting.get(key, []):
            row: ReportWaiver = {"waiver_id": waiver_id}
            facts = waiver_rows.get(waiver_id)
            if facts:
                row.update(facts)
            out.append(row)
        return out

    refused: list[ReportRefused] = list(
        resolved.get("waivers", {}).get("refused", accounting.get("refused", []))
    )
    return {
        "applied": listed("applied"),
        "expired": listed("expired"),
        "unused": listed("unused"),
        "revoked": listed("revoked"),
        "refused": refused,
    }


def _efficiency(tasks: Sequence[ReportTask]) -> dict[str, float | None]:
    """Per efficiency key, the mean over the tasks that report it (in the rows' order)."""
    return {key: _efficiency_mean(tasks, key) for key in EFFICIENCY_KEYS}


def _eval_cases(tasks: Sequence[ReportTask]) -> list[EvalCaseDigests]:
    """Each task's eval case and the pins it is the digest of, by task id."""
    return [
        {
            "task_id": t["task_id"],
            "eval_case_digest": t["eval_case_digest"],
            "task_digest": t["task_digest"],
            "grader_set_digest": t["grader_set_digest"],
        }
        for t in sorted(tasks, key=lambda t: t["task_id"])
    ]
