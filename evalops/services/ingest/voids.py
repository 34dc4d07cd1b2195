"""`evalops trials void` and `evalops void list`: trials ingested by mistake, left out from
the void on, never deleted or edited (docs/trials.md, "Voiding a mistaken record").

A void is one `trial_void` row (`VOID-n`: reason, who, when), one `voided_trial` row per
trial row it leaves out, and one `trials.void` audit event over them (with the signed act
under an authority). Every read of trials as of a seq (`queries.voided`, and the plain-SQL
loader of `verify`) leaves out the rows voided at or before it, so `--at` before the void,
replays and `verify` see the registry as it was.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, func, select

from evalops.domain import audit_kinds
from evalops.domain.authority import NO_SUITE, Scope
from evalops.domain.free_text import has_visible_text
from evalops.domain.gate import evaluate_stored
from evalops.domain.limits import MAX_FREE_TEXT_CHARS
from evalops.domain.timestamps import format_timestamp
from evalops.domain.voids import HARD_CLASSES, HARD_THRESHOLD, is_hard, void_line
from evalops.errors import InputError, RefusedError
from evalops.services.authority.acts import (
    UNSIGNED,
    Authorized,
    Signing,
    authority_in_force,
    authorize,
    record_refusal,
)
from evalops.services.gate.input_parts import GateRequest
from evalops.services.gate.inputs import build_inputs, request_for
from evalops.services.placeholders import refuse_placeholder
from evalops.services.registry.definitions import Definitions, rederive
from evalops.store import queries
from evalops.store.audit import append_event, next_seq
from evalops.store.engine import write_session
from evalops.store.tables import (
    GateDecision,
    IngestBatch,
    Trial,
    TrialVoid,
    VoidedTrial,
)

#: At most this many trial ids are written into the act itself; beyond, the act names the
#: trials by their count and the sha256 of their ids and record digests, as an ingest does.
ACT_IDS = 200


class _DryRun(Exception):
    """Leave the transaction that evaluated the void without committing it."""

    def __init__(self, result: dict[str, Any]) -> None:
        super().__init__("dry run")
        self.result = result


def _void_of(session: Session, trial: Trial) -> str | None:
    """The id of the void that left this trial row out (None: it is live)."""
    row = session.exec(
        select(TrialVoid.void_id)
        .join(VoidedTrial, col(VoidedTrial.void_row_id) == col(TrialVoid.id))
        .where(VoidedTrial.trial_row_id == trial.id)
    ).first()
    return None if row is None else str(row)


def live_trial(session: Session, trial_id: str) -> Trial:
    """The live row of `trial_id` (a voided id may have been ingested again): unknown and
    voided ids are input errors naming what to do."""
    rows = session.exec(
        select(Trial).where(Trial.trial_id == trial_id).order_by(col(Trial.id).desc())
    ).all()
    if not rows:
        raise InputError(f"unknown trial {trial_id!r} (list them with `evalops trials list`)")
    for row in rows:
        if _void_of(session, row) is None:
            return row
    raise InputError(
        f"trial {trial_id} was voided ({_void_of(session, rows[0])}): it is left out of every "
        "decision; ingest the corrected record to replace it: under the same trial_id, or "
        "under a new one if reconciliations or reviews were appended to the voided record"
    )


def _chosen(session: Session, trial_ids: list[str], batch: int | None) -> list[Trial]:
    """The live trial rows a void names: its ids, or every live trial of one ingest batch."""
    if batch is None:
        seen: dict[str, Trial] = {}
        for trial_id in trial_ids:
            if trial_id not in seen:
                seen[trial_id] = live_trial(session, trial_id)
        return sorted(seen.values(), key=lambda t: t.id or 0)
    if session.get(IngestBatch, batch) is None:
        last = session.exec(select(func.max(IngestBatch.id))).one()
        raise InputError(
            f"no ingest batch {batch} (batches 1 to {last or 0}; `evalops trials show TRIAL` "
            "names a trial's batch)",
            field="--batch",
        )
    rows = list(
        session.exec(
            select(Trial)
            .where(Trial.ingest_batch_id == batch, ~queries.voided(None))
            .order_by(col(Trial.id))
        ).all()
    )
    if not rows:
        raise InputError(f"every trial of ingest batch {batch} is already voided", field="--batch")
    return rows


def _orphans(session: Session, chosen: list[Trial]) -> None:
    """A void keeps rerun chains whole: a live rerun of a voided trial is voided with it."""
    ids = {t.trial_id for t in chosen}
    rows = {t.id for t in chosen}
    kids = [
        t
        for t in session.exec(
            select(Trial).where(col(Trial.parent_trial_id).in_(ids), ~queries.voided(None))
        ).all()
        if t.id not in rows
    ]
    if kids:
        names = " ".join(sorted({t.trial_id for t in kids}))
        raise InputError(
            f"{names} re-run{'s' if len(kids) == 1 else ''} a trial of this void and would be "
            f"left without its parent: void them together (`evalops trials void "
            f"{' '.join(sorted(ids))} {names} --reason REASON`)"
        )


def _current_classes(session: Session, chosen: list[Trial]) -> dict[int, str]:
    """Each trial's class now (re-derived from current evidence, as the gate reads it)."""
    defs = Definitions(session)
    out: dict[int, str] = {}
    for t in chosen:
        current = rederive(defs, t)
        assert t.id is not None
        out[t.id] = current.primary if current else t.classification
    return out


def _suites(session: Session, chosen: list[Trial]) -> tuple[list[str], bool]:
    """Every suite a trial's task is a current member of (whose risk owners sign), and
    whether a trial's task is in none (then an unscoped risk owner signs for it too)."""
    found: set[str] = set()
    unsuited = False
    for task_id in sorted({t.task_id for t in chosen}):
        suites = queries.suites_of_task(session, task_id)
        unsuited = unsuited or not suites
        found.update(suites)
    return sorted(found), unsuited


def _trials_digest(chosen: list[Trial]) -> str:
    h = hashlib.sha256()
    for t in chosen:
        h.update(f"{t.trial_id}\n{t.record_digest}\n".encode())
    return "sha256:" + h.hexdigest()


def _body(chosen: list[Trial], hard: list[Trial], reason: str, batch: int | None) -> dict[str, Any]:
    """What the void stores, as its act names it (docs/authority.md)."""
    body: dict[str, Any] = {
        "reason": reason,
        "batch": batch,
        "trial_count": len(chosen),
        "trials_digest": _trials_digest(chosen),
        "hard": sorted(t.trial_id for t in hard),
    }
    if len(chosen) <= ACT_IDS:
        body["trial_ids"] = [t.trial_id for t in chosen]
    return body


def _check_reason(reason: str) -> None:
    if not reason:
        raise InputError("a void needs a reason: give --reason TEXT", field="--reason")
    refuse_placeholder("--reason", reason, "why the trials are a mistake")
    if not has_visible_text(reason):
        raise InputError("a void needs a reason with a visible character", field="--reason")
    if len(reason) > MAX_FREE_TEXT_CHARS:
        raise InputError(
            f"--reason is {len(reason)} characters, at most {MAX_FREE_TEXT_CHARS}", field="--reason"
        )


@dataclass(frozen=True)
class VoidRequest:
    """What `evalops trials void` asks for."""

    trial_ids: tuple[str, ...]
    batch: int | None
    reason: str
    confirm_hard_failure: bool = False
    dry_run: bool = False
    signing: Signing = UNSIGNED


def void_trials(
    engine: Engine, request: VoidRequest, *, actor: str, now: datetime
) -> dict[str, Any]:
    """Void the trials (exit 2 on bad input, 5 when refused); a dry run stores nothing and
    says what would change in the latest decision of each affected suite."""
    if bool(request.trial_ids) == (request.batch is not None):
        raise InputError("name the trials to void: TRIAL... or --batch BATCH (not both)")
    _check_reason(request.reason)
    try:
        with write_session(engine) as session:
            out = _Void(session, request, actor, now).run()
    except _DryRun as done:
        return done.result
    if "refused" in out:
        # Audited in the transaction just committed; nothing else was written.
        raise RefusedError(out["refused"])
    return out


class _Void:
    """One void, in its write transaction: the trials, the rules, the rows."""

    def __init__(self, session: Session, request: VoidRequest, actor: str, now: datetime):
        self.session = session
        self.request = request
        self.actor = actor
        self.now = now
        self.chosen = _chosen(session, list(request.trial_ids), request.batch)
        _orphans(session, self.chosen)
        self.classes = _current_classes(session, self.chosen)
        self.hard = [t for t in self.chosen if is_hard(t.classification, self.classes[t.id or 0])]
        self.suites, self.unsuited = _suites(session, self.chosen)
        self.body = _body(self.chosen, self.hard, request.reason, request.batch)
        self.governed = authority_in_force(session) is not None

    def _unconfirmed(self) -> str | None:
        """Why a void of hard failures without an authority needs its confirmation."""
        if not self.hard or self.governed or self.request.confirm_hard_failure:
            return None
        n = len(self.hard)
        return (
            f"{n} of these trials {'is' if n == 1 else 'are'} {' or '.join(HARD_CLASSES)} "
            f"({', '.join(self.body['hard'])}): a void that hides a hard failure needs "
            f"--confirm-hard-failure (under an authority: two signers, threshold "
            f"{HARD_THRESHOLD})"
        )

    def _authorize(self) -> Authorized | None:
        if self.request.dry_run and not self.request.signing.given:
            return None
        # Tasks in no suite are part of the scope too, or a void would carry them past a
        # signer scoped to the suites of its other trials.
        touched = (*self.suites, NO_SUITE) if self.unsuited and self.suites else self.suites
        scope = Scope(suites=tuple(touched), threshold=HARD_THRESHOLD if self.hard else None)
        return authorize(
            self.session,
            kind="trials.void",
            body=self.body,
            scope=scope,
            signing=self.request.signing,
            now=self.now,
        )

    def run(self) -> dict[str, Any]:
        dry = self.request.dry_run
        refusal = self._unconfirmed()
        before = _latest_decisions(self.session, self.suites, self.now) if dry else {}
        if refusal is not None and not dry:
            append_event(
                self.session,
                at=self.now,
                actor=self.actor,
                kind=audit_kinds.VOID_REFUSED,
                subject=",".join(t.trial_id for t in self.chosen[:20]),
                payload={**self.body, "refusal": refusal},
            )
            return {"refused": f"void refused: {refusal}"}
        authorized = self._authorize()
        if authorized is not None and authorized.refused:
            if not dry:
                found = record_refusal(
                    self.session, authorized, subject="trials.void", actor=self.actor, now=self.now
                )
                return {"refused": f"trials.void refused: [{found['rule']}] {found['message']}"}
            refusal = authorized.judgement.refusal
            authorized = None
        view = self._store(authorized)
        if dry:
            after = _latest_decisions(self.session, self.suites, self.now)
            raise _DryRun(
                {
                    **view,
                    "void_id": None,
                    "dry_run": True,
                    "refusal": refusal,
                    "decisions": _changes(before, after),
                }
            )
        return {**view, "at": format_timestamp(self.now), "dry_run": False}

    def _store(self, authorized: Authorized | None) -> dict[str, Any]:
        """The void's rows and its audit event; what it says about itself."""
        session = self.session
        number = (session.exec(select(func.max(TrialVoid.number))).one() or 0) + 1
        void_id = f"VOID-{number}"
        seq = next_seq(session)
        head = TrialVoid(
            number=number,
            void_id=void_id,
            reason=self.request.reason,
            batch=self.request.batch,
            trial_count=len(self.chosen),
            hard_count=len(self.hard),
            at=self.now,
            actor=self.actor,
            audit_seq=seq,
        )
        session.add(head)
        session.flush()
        assert head.id is not None
        rows: list[Any] = [head]
        for t in self.chosen:
            assert t.id is not None
            row = VoidedTrial(
                void_row_id=head.id,
                trial_row_id=t.id,
                trial_id=t.trial_id,
                classification=self.classes[t.id],
                audit_seq=seq,
            )
            session.add(row)
            rows.append(row)
        act_row = authorized.add_row(session, void_id, seq) if authorized is not None else None
        if act_row is not None:
            rows.append(act_row)
        append_event(
            session,
            at=self.now,
            actor=self.actor,
            kind=audit_kinds.TRIALS_VOID,
            subject=void_id,
            payload={
                **self.body,
                "void_id": void_id,
                "suites": self.suites,
                **(authorized.payload() if authorized is not None else {}),
            },
            rows=rows,
        )
        signed = authorized is not None and authorized.signed
        view: dict[str, Any] = {
            "void_id": void_id,
            "actor": self.actor,
            "signers": [s.as_dict() for s in authorized.judgement.signers]
            if signed and authorized is not None
            else [],
            "trial_count": len(self.chosen),
            "hard_count": len(self.hard),
            "trials": [
                {
                    "trial_id": t.trial_id,
                    "task_id": t.task_id,
                    "classification": self.classes[t.id or 0],
                }
                for t in self.chosen
            ],
            "suites": self.suites,
            "reason": self.request.reason,
            "batch": self.request.batch,
        }
        view["line"] = void_line(view)
        return view


# ------------------------------------------------------------------------------ dry run


def _latest_decisions(session: Session, suites: list[str], now: datetime) -> dict[str, Any]:
    """Each suite's latest stored decision, decided again now with what the registry holds
    (the same build, baseline and policy it asked for)."""
    out: dict[str, Any] = {}
    for suite_id in suites:
        row = session.exec(
            select(GateDecision)
            .where(GateDecision.suite_id == suite_id)
            .order_by(col(GateDecision.id).desc())
        ).first()
        if row is None:
            continue
        asked = GateRequest.from_dict(json.loads(row.inputs)["request"])
        try:
            request = request_for(
                session,
                build=asked.build,
                suite_id=suite_id,
                at=None,
                now=now,
                execution_id=asked.execution_id,
                baseline=asked.baseline,
                policy=asked.policy,
                method=asked.method,
                alpha=asked.alpha,
                seed=asked.seed,
            )
            inputs = build_inputs(session, request, dry_run=True)
            inputs["gate_id"] = "dry-run"
            result: Any = evaluate_stored(inputs)
        except InputError as exc:
            out[suite_id] = {"gate_id": row.gate_id, "build": row.build, "error": str(exc)}
            continue
        out[suite_id] = {
            "gate_id": row.gate_id,
            "build": row.build,
            "decision": result["decision"],
            "tasks": {
                t["task_id"]: {"state": t["state"], "effect": t["effect"], "n": t["n"]}
                for t in result["tasks"]
            },
        }
    return out


def _changes(before: dict[str, Any], after: dict[str, Any]) -> list[dict[str, Any]]:
    """Per suite: its latest decision now and with the void, and the tasks that change."""
    out = []
    for suite_id, now_ in before.items():
        then = after.get(suite_id, {})
        entry: dict[str, Any] = {
            "suite": suite_id,
            "latest": now_["gate_id"],
            "build": now_["build"],
            "decision": now_.get("decision"),
            "with_void": then.get("decision"),
        }
        if "error" in now_ or "error" in then:
            entry["error"] = now_.get("error") or then.get("error")
        tasks = []
        for task_id, was in (now_.get("tasks") or {}).items():
            will = (then.get("tasks") or {}).get(task_id)
            if will != was:
                tasks.append({"task_id": task_id, "now": was, "with_void": will})
        entry["tasks"] = tasks
        out.append(entry)
    return out
