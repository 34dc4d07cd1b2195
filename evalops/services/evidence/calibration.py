"""Calibration records of model graders: record, status, list, show, invalidate."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, func, select

from evalops.domain import audit_kinds
from evalops.domain.authority import Scope
from evalops.domain.calibration import ABSTAIN, LabelledItem, calibration_metrics, item_json
from evalops.domain.calibration_validity import Validity, holdout_shortfalls
from evalops.domain.canonical import canonical_text, digest
from evalops.domain.specs import Grader, Strict
from evalops.domain.vocabulary import NonEmptyStr, format_timestamp
from evalops.errors import InputError, InputErrors, RefusedError
from evalops.registry.definitions import pydantic_error
from evalops.registry.jsonl import Line, read_lines
from evalops.registry.load import Document, parse_json
from evalops.services.authority.acts import (
    UNSIGNED,
    Authorized,
    Signing,
    authorize,
    record_refusal,
    signers_of,
)
from evalops.store import queries
from evalops.store.audit import append_event, next_seq
from evalops.store.engine import read_session, write_session
from evalops.store.tables import (
    Calibration,
    CalibrationInvalidation,
)


class HumanLabel(Strict):
    """One annotator's label of an item."""

    annotator: NonEmptyStr
    """Who labelled it."""
    label: NonEmptyStr
    """A state the grader may produce."""


class LabelRecord(Strict):
    """One labelled item of a calibration set (JSONL)."""

    item_id: NonEmptyStr
    """Unique item id."""
    split: Literal["calibration", "holdout"]
    """Which split the item belongs to."""
    stratum: NonEmptyStr
    """Stratum of the sampling frame."""
    human_labels: list[HumanLabel] = Field(min_length=1)
    """Human labels, one per annotator."""
    model_label: NonEmptyStr
    """What the model grader said (or `abstain`)."""


def _parse_line(line: Line, grader: Grader) -> LabelledItem:
    try:
        text = line.data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"invalid UTF-8 at byte {exc.start}", line.file, line.number) from None
    try:
        value = parse_json(text, line.file, spec=False).value
    except InputError as exc:
        raise InputError(exc.message, line.file, line.number, exc.field) from None
    if not isinstance(value, dict):
        raise InputError("a labelled item must be a JSON object", line.file, line.number)
    try:
        rec = LabelRecord.model_validate(value)
    except ValidationError as exc:
        err = pydantic_error(Document(line.file, value, {}), exc)
        raise InputError(err.message, line.file, line.number, err.field) from None
    allowed = set(grader.produces)
    if rec.model_label not in allowed:
        raise InputError(
            f"model_label {rec.model_label!r} is not a state {grader.id} produces",
            line.file,
            line.number,
            "model_label",
        )
    annotators = [h.annotator for h in rec.human_labels]
    for i, h in enumerate(rec.human_labels):
        if h.label not in allowed - {ABSTAIN}:
            raise InputError(
                f"human label {h.label!r} is not a decided state {grader.id} produces",
                line.file,
                line.number,
                f"human_labels[{i}].label",
            )
        if annotators.count(h.annotator) > 1:
            raise InputError(
                f"annotator {h.annotator!r} labels this item twice",
                line.file,
                line.number,
                f"human_labels[{i}].annotator",
            )
    return LabelledItem(
        rec.item_id,
        rec.split,
        rec.stratum,
        tuple((h.annotator, h.label) for h in rec.human_labels),
        rec.model_label,
    )


def read_labels(path: Path, grader: Grader) -> list[LabelledItem]:
    """Every labelled item, or every problem (file:line, field) at once."""
    if not path.is_file():
        raise InputError("labels file not found", str(path))
    items: list[LabelledItem] = []
    errors: list[InputError] = []
    seen: dict[str, int] = {}
    counts: set[int] = set()
    with path.open("rb") as stream:
        for entry in read_lines(stream, str(path)):
            if isinstance(entry, InputError):
                errors.append(entry)
                continue
            try:
                item = _parse_line(entry, grader)
            except InputError as exc:
                errors.append(exc)
                continue
            if item.item_id in seen:
                errors.append(
                    InputError(
                        f"item_id {item.item_id!r} already appears on line {seen[item.item_id]}",
                        entry.file,
                        entry.number,
                        "item_id",
                    )
                )
                continue
            seen[item.item_id] = entry.number
            counts.add(len(item.human_labels))
            items.append(item)
    if not errors and len(counts) > 1:
        errors.append(
            InputError(
                f"items have different numbers of human labels ({sorted(counts)}); kappa needs "
                "the same annotators per item",
                str(path),
                1,
                "human_labels",
            )
        )
    if errors:
        raise InputErrors.of(errors)
    return items


@dataclass(frozen=True)
class GraderRef:
    grader: Grader
    config_digest: str


def _grader(session: Session, ref: str, config: str | None = None) -> GraderRef:
    """The config a calibration is for: `--config`, else the grader's config in force."""
    grader_id, _, version = ref.partition("@")
    if config is not None:
        found = queries.grader_config(session, config)
        if found is None or found[0].id != grader_id:
            raise InputError(
                f"{config} is not a registered config of grader {grader_id}", field="--config"
            )
    else:
        found = queries.newest_grader_config(session, grader_id)
        if found is None:
            from evalops.domain.suggestions import unknown_id
            from evalops.services.registry.unknown_ids import known_grader_ids

            raise InputError(unknown_id("grader", grader_id, known_grader_ids(session)))
    grader, config_digest = found
    if grader.type != "model":
        raise InputError(f"grader {grader_id} is {grader.type}; only model graders calibrate")
    if version and version != str(grader.version):
        raise InputError(
            f"grader {grader_id} is at version {grader.version}, not {version}; calibrate "
            "the registered version (or name its config with --config)"
        )
    return GraderRef(grader, config_digest)


def validity_of(session: Session, row: Calibration) -> Validity:
    """The state of one calibration: its config's validity if it is that config's newest."""
    found = queries.grader_config(session, row.grader_config_digest)
    assert found is not None
    newest = queries.calibration_of_config(session, row.grader_config_digest)
    if newest is not None and newest.calibration_id != row.calibration_id:
        return Validity("stale", (f"superseded by {newest.calibration_id} for this config",))
    return queries.config_validity(session, found[0], row.grader_config_digest)


def calibration_view(row: Calibration, validity: Validity | None) -> dict[str, Any]:
    metrics = json.loads(row.record)
    return {
        "calibration_id": row.calibration_id,
        "grader_id": row.grader_id,
        "grader_version": row.grader_version,
        "grader_config_digest": row.grader_config_digest,
        "state": validity.state if validity else None,
        "reasons": list(validity.reasons) if validity else [],
        "blockable_classes": sorted(validity.blockable_classes) if validity else [],
        "label_set_digest": row.label_set_digest,
        "calibration_split_digest": row.calibration_split_digest,
        "holdout_split_digest": row.holdout_split_digest,
        "annotation_guide_version": row.annotation_guide_version,
        "sampling_frame": row.sampling_frame,
        "annotator_count": row.annotator_count,
        "recorded_at": format_timestamp(row.at),
        "recorded_by": row.actor,
        **metrics,
    }


def _fleiss_needs_equal_raters(items: list[LabelledItem], labels: Path) -> None:
    """With three or more annotators, agreement is Fleiss' kappa, which needs every item
    labelled by the same number (at least 2) of them: a file that is not is refused
    naming an item, not computed into a crash."""
    if len({a for item in items for a, _ in item.human_labels}) <= 2:
        return
    rule = (
        "with 3 or more annotators every item needs labels from the same number, at least "
        "2, of them (human agreement is Fleiss' kappa)"
    )
    few = next((i for i in items if len(i.human_labels) < 2), None)
    if few is not None:
        said = f"item {few.item_id!r} has {len(few.human_labels)} human label(s): {rule}"
    else:
        first = items[0]
        odd = next((i for i in items if len(i.human_labels) != len(first.human_labels)), None)
        if odd is None:
            return
        said = (
            f"item {odd.item_id!r} has {len(odd.human_labels)} human labels and item "
            f"{first.item_id!r} {len(first.human_labels)}: {rule}"
        )
    raise InputError(said, str(labels), field="human_labels")


def record_calibration(
    engine: Engine,
    grader_ref: str,
    labels: Path,
    *,
    config: str | None = None,
    annotation_guide: str | None,
    sampling_frame: str | None,
    actor: str,
    now: datetime,
    signing: Signing = UNSIGNED,
    require_valid: bool = False,
) -> dict[str, Any]:
    """Record a calibration; with an authority in force, a calibrator's signed act whose
    body is the whole stored record (docs/authority.md). `require_valid`: a calibration that
    would not be valid is not stored (exit 5, the refusal audited)."""
    with read_session(engine) as session:
        ref = _grader(session, grader_ref, config)
    items = read_labels(labels, ref.grader)
    if not items:
        raise InputError("the labels file holds no items", str(labels), 1)
    _fleiss_needs_equal_raters(items, labels)
    metrics = calibration_metrics(items)
    ordered = sorted(items, key=lambda i: i.item_id)
    by_split = {
        split: digest([item_json(i) for i in ordered if i.split == split])
        for split in ("calibration", "holdout")
    }
    try:
        view, refusal = _record(
            engine, ref, metrics, by_split, ordered, labels_meta=(annotation_guide, sampling_frame),
            actor=actor, now=now, signing=signing, require_valid=require_valid,
        )  # fmt: skip
    except _NotValid as not_valid:
        with write_session(engine) as session:
            append_event(
                session,
                at=now,
                actor=actor,
                kind=audit_kinds.CALIBRATION_REFUSED,
                subject=ref.grader.id,
                payload={
                    "grader_id": ref.grader.id,
                    "grader_version": ref.grader.version,
                    "grader_config_digest": ref.config_digest,
                    "state": not_valid.view["state"],
                    "reasons": not_valid.view["reasons"],
                },
            )
        raise RefusedError(
            f"calibration of {ref.grader.id} not stored (--require-valid): it would be "
            f"{not_valid.view['state']}: {'; '.join(not_valid.view['reasons'])}"
        ) from None
    if refusal is not None:
        raise RefusedError(f"calibration refused: [{refusal['rule']}] {refusal['message']}")
    view["shortfalls"] = holdout_shortfalls(ref.grader, metrics)
    return view


class _NotValid(Exception):
    """`--require-valid`: the calibration stored in the transaction is not valid (roll back)."""

    def __init__(self, view: dict[str, Any]) -> None:
        super().__init__("not valid")
        self.view = view


def _record(
    engine: Engine,
    ref: Any,
    metrics: dict[str, Any],
    by_split: dict[str, str],
    ordered: list[Any],
    *,
    labels_meta: tuple[str | None, str | None],
    actor: str,
    now: datetime,
    signing: Signing,
    require_valid: bool,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The calibration stored (its view), or the authority's refusal audited."""
    annotation_guide, sampling_frame = labels_meta
    view: dict[str, Any] = {}
    with write_session(engine) as session:
        number = (session.exec(select(func.count()).select_from(Calibration)).one() or 0) + 1
        calibration_id = f"CAL-{number}"
        record = {
            "grader_id": ref.grader.id,
            "grader_version": ref.grader.version,
            "grader_config_digest": ref.config_digest,
            "label_set_digest": digest([item_json(i) for i in ordered]),
            "calibration_split_digest": by_split["calibration"],
            "holdout_split_digest": by_split["holdout"],
            "annotation_guide_version": annotation_guide,
            "sampling_frame": sampling_frame,
            "annotator_count": metrics["human_agreement"]["annotators"],
            **metrics,
        }
        authorized = authorize(
            session,
            kind="calibration.record",
            body=record,
            scope=Scope(),
            signing=signing,
            now=now,
        )
        refusal = None
        if authorized.refused:
            refusal = record_refusal(
                session, authorized, subject=ref.grader.id, actor=actor, now=now
            )
        else:
            view = _store(
                session, record, metrics, authorized, calibration_id, actor=actor, now=now
            )
            if require_valid and view["state"] != "valid":
                raise _NotValid(view)
    return view, refusal


def _store(
    session: Session,
    record: dict[str, Any],
    metrics: dict[str, Any],
    authorized: Authorized,
    calibration_id: str,
    *,
    actor: str,
    now: datetime,
) -> dict[str, Any]:
    """The calibration row and its event (with the signed act, when there is one)."""
    row = Calibration(
        calibration_id=calibration_id,
        grader_id=record["grader_id"],
        grader_version=record["grader_version"],
        grader_config_digest=record["grader_config_digest"],
        label_set_digest=record["label_set_digest"],
        calibration_split_digest=record["calibration_split_digest"],
        holdout_split_digest=record["holdout_split_digest"],
        annotation_guide_version=record["annotation_guide_version"],
        sampling_frame=record["sampling_frame"],
        annotator_count=record["annotator_count"],
        record=canonical_text(metrics),
        record_digest=digest(record),
        at=now,
        actor=actor,
        audit_seq=next_seq(session),
    )
    session.add(row)
    act_row = authorized.add_row(session, calibration_id, row.audit_seq)
    append_event(
        session,
        at=now,
        actor=actor,
        kind=audit_kinds.CALIBRATION_RECORD,
        subject=calibration_id,
        payload={**record, **authorized.payload()},
        rows=[row] if act_row is None else [row, act_row],
    )
    return calibration_view(row, validity_of(session, row))


def list_calibrations(engine: Engine) -> list[dict[str, Any]]:
    """Every calibration record, oldest first, with its state now: the validity the gate
    gives its config (valid, failing...) when it is that config's newest, else stale."""
    with read_session(engine) as session:
        rows = session.exec(select(Calibration).order_by(col(Calibration.id))).all()
        return [
            {
                "calibration_id": r.calibration_id,
                "grader_id": r.grader_id,
                "grader_version": r.grader_version,
                "grader_config_digest": r.grader_config_digest,
                "state": validity_of(session, r).state,
                "label_set_digest": r.label_set_digest,
                "recorded_at": format_timestamp(r.at),
                "recorded_by": r.actor,
                "signers": signers_of(session, "calibration.record", r.audit_seq),
                "invalidated": _invalidation(session, r),
            }
            for r in rows
        ]


def _invalidation(session: Session, row: Calibration) -> dict[str, Any] | None:
    """The newest invalidation of a calibration: when, by whom, why and who signed it (a
    stale record must not read as if its recorder had withdrawn it)."""
    found = session.exec(
        select(CalibrationInvalidation)
        .where(CalibrationInvalidation.calibration_row_id == row.id)
        .order_by(col(CalibrationInvalidation.id).desc())
    ).first()
    if found is None:
        return None
    return {
        "at": format_timestamp(found.at),
        "by": found.actor,
        "reason": found.reason,
        "signers": signers_of(session, "calibration.invalidate", found.audit_seq),
    }


def _row(session: Session, calibration_id: str) -> Calibration:
    row = session.exec(
        select(Calibration).where(Calibration.calibration_id == calibration_id)
    ).first()
    if row is None:
        raise InputError(f"unknown calibration {calibration_id!r}")
    return row


def show(engine: Engine, calibration_id: str) -> dict[str, Any]:
    with read_session(engine) as session:
        row = _row(session, calibration_id)
        validity = validity_of(session, row)
        invalidations = session.exec(
            select(CalibrationInvalidation).where(
                CalibrationInvalidation.calibration_row_id == row.id
            )
        ).all()
        return {
            **calibration_view(row, validity),
            "invalidations": [
                {"reason": i.reason, "at": format_timestamp(i.at), "actor": i.actor}
                for i in invalidations
            ],
        }


def invalidate(
    engine: Engine,
    grader_id: str,
    *,
    reason: str,
    actor: str,
    now: datetime,
    signing: Signing = UNSIGNED,
) -> dict[str, Any]:
    """Withdraw a grader's current calibration (e.g. label distribution shift); with an
    authority in force, a calibrator's signed act naming the calibration and the reason."""
    if not reason.strip():
        raise InputError("invalidating a calibration needs a reason", field="--reason")
    refusal = None
    with write_session(engine) as session:
        found = queries.newest_grader_config(session, grader_id)
        row = (
            session.exec(
                select(Calibration)
                .where(Calibration.grader_config_digest == found[1])
                .order_by(col(Calibration.id).desc())
            ).first()
            if found is not None
            else None
        )
        if found is None:
            from evalops.domain.suggestions import unknown_id
            from evalops.services.registry.unknown_ids import known_grader_ids

            raise InputError(unknown_id("grader", grader_id, known_grader_ids(session)))
        if row is None:
            raise InputError(
                f"grader {grader_id!r} has no calibration of its config in force to invalidate"
            )
        assert row.id is not None
        body = {
            "grader_id": grader_id,
            "calibration_id": row.calibration_id,
            "grader_config_digest": found[1],
            "reason": reason,
        }
        authorized = authorize(
            session,
            kind="calibration.invalidate",
            body=body,
            scope=Scope(),
            signing=signing,
            now=now,
        )
        if authorized.refused:
            refusal = record_refusal(session, authorized, subject=grader_id, actor=actor, now=now)
        else:
            invalidation = CalibrationInvalidation(
                calibration_row_id=row.id,
                reason=reason,
                at=now,
                actor=actor,
                audit_seq=next_seq(session),
            )
            session.add(invalidation)
            act_row = authorized.add_row(session, row.calibration_id, invalidation.audit_seq)
            append_event(
                session,
                at=now,
                actor=actor,
                kind=audit_kinds.CALIBRATION_INVALIDATE,
                subject=row.calibration_id,
                payload={"grader_id": grader_id, "reason": reason, **authorized.payload()},
                rows=[invalidation] if act_row is None else [invalidation, act_row],
            )
            view = calibration_view(row, validity_of(session, row))
    if refusal is not None:
        raise RefusedError(
            f"calibration invalidation refused: [{refusal['rule']}] {refusal['message']}"
        )
    return view
