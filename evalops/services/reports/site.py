"""`evalops report site`: the static registry site, page by page (read-only).

Every page document is built from one read of the registry and rendered by
`evalops.report.site`; this module decides which pages exist, builds their documents and
writes them. Two promises shape it (docs/site.md):

- **Byte-identical re-runs.** The site is the registry as of its audit head, and nothing on
  it reads the wall clock: pages are dated by the head's time, and time-relative facts (a
  waiver's status, the waivers expiring within 7 days) are measured at that time too. A
  registry only ever appends, and every change appends an audit event, so the same head is
  the same registry, and the same bytes.
- **An unchanged re-run rewrites nothing, and is cheap.** A file is written only when its
  bytes differ (its mtime is kept otherwise). Every page is a function of the audit head,
  the renderer (evalops and its templates) and the suites chosen: a manifest in the site
  directory records, per page, that key and the digest of its bytes. A decision page whose
  key and bytes still match is not rendered again; the other pages are rendered again
  (and compared) only when one of them no longer matches.

Decision pages are built one at a time (stored document, render, write, drop), so memory
does not grow with the number of decisions; what the other pages need from every decision
(each task's passed/n and pass^k per build) is kept as small tuples.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from evalops import __version__
from evalops.domain.act_roles import membership_act
from evalops.domain.changes import TaskSide, flip
from evalops.domain.gate_documents import Anchor
from evalops.domain.retirement_reason import read_stored
from evalops.domain.timestamps import format_timestamp
from evalops.errors import InputError
from evalops.services.authority.acts import signers_of
from evalops.services.registry.definitions import share_definitions
from evalops.services.reports.audit import anchor, stored_document
from evalops.store import queries
from evalops.store.audit import chain_head
from evalops.store.engine import read_session
from evalops.store.tables import (
    Calibration,
    GateDecision,
    Incident,
    SuiteMembership,
    TaskRevision,
    Waiver,
)

SITE_SCHEMA = "evalops.site/v1"
MANIFEST = ".evalops-site.json"
EXPIRING_DAYS = 7
TREND_BUILDS = 20
"""Builds shown in a suite page's pass^k chart (every build is in the task pages' tables)."""

Progress = Callable[[int], None]


@dataclass
class SiteResult:
    directory: Path
    index: Path
    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    audit_head: Anchor | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "directory": str(self.directory),
            "index": str(self.index),
            "pages": len(self.written) + len(self.unchanged),
            "written": len(self.written),
            "unchanged": len(self.unchanged),
            "audit_head": self.audit_head,
        }


# --- writing -------------------------------------------------------------------------------


class Writer:
    """Writes pages under `root`, each only when its bytes differ from the file's."""

    def __init__(self, root: Path, result: SiteResult, on_page: Progress | None) -> None:
        self.root = root
        self.result = result
        self.on_page = on_page

    def put(self, relative: str, text: str) -> str:
        """Write `text` to `relative` unless the file already holds exactly these bytes;
        returns the sha256 of the bytes."""
        data = text.encode("utf-8")
        path = self.root / relative
        try:
            same = path.read_bytes() == data
        except OSError:  # none yet, or unreadable: written (or refused) below
            same = False
        if same:
            self.result.unchanged.append(relative)
        else:
            try:
                self._replace(path, data)
            except OSError as exc:
                # A full disk, a read-only directory: the user's to fix, not a bug. Pages
                # written so far stay, each whole.
                raise InputError(
                    f"cannot write the site: {exc.strerror or exc}", str(path), field="DIR"
                ) from None
            self.result.written.append(relative)
        self.tick()
        return "sha256:" + hashlib.sha256(data).hexdigest()

    @staticmethod
    def _replace(path: Path, data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Through a temporary file: a reader (a web server) never sees half a page.
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".html")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def keep(self, relative: str) -> None:
        self.result.unchanged.append(relative)
        self.tick()

    def tick(self) -> None:
        if self.on_page is not None:
            self.on_page(1)


def _file_digest(path: Path) -> str | None:
    try:
        return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
    except (FileNotFoundError, IsADirectoryError):
        return None


def _read_manifest(root: Path) -> dict[str, Any]:
    try:
        data = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError, UnicodeDecodeError):
        return {}
    return data if isinstance(data, dict) and data.get("schema") == SITE_SCHEMA else {}


def _write_manifest(root: Path, manifest: Mapping[str, Any]) -> None:
    text = json.dumps(manifest, indent=1, sort_keys=True) + "\n"
    path = root / MANIFEST
    try:
        if path.read_text(encoding="utf-8") == text:
            return
    except (FileNotFoundError, UnicodeDecodeError):
        pass
    path.write_text(text, encoding="utf-8")


# --- reading -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Point:
    """One task in one decision: what the suite chart and the task page show."""

    gate_id: str
    build: str
    decision: str
    evaluated_at: str
    n: int | None
    passed_count: int | None
    pass_at_k: float | None
    pass_hat_k: float | None
    state: str | None
    outcome: str | None


@dataclass
class SuiteFacts:
    suite_id: str
    decisions: list[dict[str, Any]] = field(default_factory=list)
    points: dict[str, list[Point]] = field(default_factory=dict)


def _decision_rows(session: Session, suite_id: str) -> Iterator[GateDecision]:
    """The suite's decisions, oldest first, one row in memory at a time (a row holds the
    decision's stored inputs: all of them at once would be most of the database)."""
    ids = session.exec(
        select(GateDecision.id)
        .where(GateDecision.suite_id == suite_id)
        .order_by(col(GateDecision.number))
    ).all()
    for row_id in ids:
        row = session.get(GateDecision, row_id)
        if row is not None:
            yield row
            session.expunge(row)


def _points_of(row: GateDecision) -> list[tuple[str, Point]]:
    result = json.loads(row.result)
    evaluated = format_timestamp(row.evaluated_at)
    out = []
    for t in result.get("tasks", []):
        outcome = "waived" if t.get("waiver_id") else t.get("effect")
        out.append(
            (
                str(t["task_id"]),
                Point(
                    row.gate_id,
                    row.build,
                    row.decision,
                    evaluated,
                    t.get("n"),
                    t.get("passedCount"),
                    t.get("passAtK"),
                    t.get("passHatK"),
                    t.get("state"),
                    outcome,
                ),
            )
        )
    return out


def suite_facts(session: Session, suite_id: str) -> SuiteFacts:
    """Every decision of the suite, oldest first, and each task's point in each."""
    facts = SuiteFacts(suite_id)
    for row in _decision_rows(session, suite_id):
        facts.decisions.append(
            {
                "gate_id": row.gate_id,
                "number": row.number,
                "decision": row.decision,
                "build": row.build,
                "evaluated_at": format_timestamp(row.evaluated_at),
                "decided_by": row.actor,
            }
        )
        for task_id, point in _points_of(row):
            facts.points.setdefault(task_id, []).append(point)
    return facts


def _side(p: Point | None) -> TaskSide | None:
    if p is None or not p.n:
        return None
    return TaskSide(p.n, int(p.passed_count or 0), p.pass_hat_k, p.state == "task_pass")


def task_history(points: Sequence[Point]) -> list[dict[str, Any]]:
    """One row per decision, oldest first, with the flip against the latest decision (so
    far) of the build before its own. Builds are ordered by their first decision, as on
    every page: a build decided again later keeps its place, so a re-decision of build 41
    after build 42 compares with the build before 41, never with 42 (and a re-decision of
    the same build is not a change of build)."""
    rows = []
    last_of_build: dict[str, Point] = {}
    order: list[str] = []
    for p in points:
        if p.build not in order:
            order.append(p.build)
        place = order.index(p.build)
        base = last_of_build.get(order[place - 1]) if place > 0 else None
        side_b, side_c = _side(base), _side(p)
        rows.append(
            {
                "gate_id": p.gate_id,
                "build": p.build,
                "decision": p.decision,
                "evaluated_at": p.evaluated_at,
                "n": p.n,
                "passedCount": p.passed_count,
                "passAtK": p.pass_at_k,
                "passHatK": p.pass_hat_k,
                "state": p.state,
                "outcome": p.outcome,
                "since": base.build if base is not None else None,
                "flip": flip(side_b, side_c) if (side_b or side_c) and base else None,
            }
        )
        last_of_build[p.build] = p
    return rows


# --- page documents ------------------------------------------------------------------------


OPEN_INCIDENT = ("open", "confirmed", "reproduced")
"""Incident states with no regression task guarding them yet (section 7's lifecycle)."""


def _common(head: Mapping[str, Any] | None, as_of: str | None, page: str) -> dict[str, Any]:
    return {
        "site": SITE_SCHEMA,
        "page": page,
        "evalops_version": __version__,
        "audit_head": dict(head) if head else None,
        "as_of": as_of,
    }


def _suite_ids(session: Session, wanted: Sequence[str]) -> list[str]:
    from evalops.services.registry.suites import latest_suites

    known = [r.suite_id for r in latest_suites(session)]
    if not wanted:
        return known
    unknown = [s for s in wanted if s not in known]
    if unknown:
        from evalops.domain.suggestions import unknown_id

        raise InputError(unknown_id("suite", unknown[0], sorted(known)), field="--suite")
    return [s for s in known if s in set(wanted)]


def _trend(facts: SuiteFacts, members: Sequence[str]) -> dict[str, Any]:
    """pass^k of each member across the suite's last builds (the latest decision of each),
    builds ordered by their first decision."""
    latest: dict[str, dict[str, Any]] = {}
    for d in facts.decisions:
        latest[d["build"]] = d  # a later decision of a build keeps the build's place
    builds = list(latest.values())[-TREND_BUILDS:]
    shown = {b["gate_id"] for b in builds}
    series = []
    for task_id in members:
        by_gate = {p.gate_id: p for p in facts.points.get(task_id, []) if p.gate_id in shown}
        series.append(
            {
                "task_id": task_id,
                "points": [
                    {
                        "build": b["build"],
                        "gate_id": b["gate_id"],
                        "passHatK": by_gate[b["gate_id"]].pass_hat_k
                        if b["gate_id"] in by_gate
                        else None,
                        "state": by_gate[b["gate_id"]].state if b["gate_id"] in by_gate else None,
                    }
                    for b in builds
                ],
            }
        )
    return {
        "builds": [
            {"build": b["build"], "gate_id": b["gate_id"], "decision": b["decision"]}
            for b in builds
        ],
        "series": series,
    }


def _membership_history(session: Session, suite_id: str) -> list[dict[str, Any]]:
    rows = session.exec(
        select(SuiteMembership)
        .where(SuiteMembership.suite_id == suite_id)
        .order_by(col(SuiteMembership.id))
    ).all()
    return [
        {
            "task_id": r.task_id,
            "action": r.action,
            "task_digest": r.task_digest,
            "grader_set_digest": r.grader_set_digest,
            **(
                read_stored(r.reason).as_dict()
                if r.action == "retired"
                else {"kind": None, "reason": r.reason}
            ),
            "approved_by": r.approved_by,
            "replaced_by": r.replaced_by,
            "at": format_timestamp(r.at),
            "actor": r.actor,
            "signers": signers_of(session, membership_act(r.action), r.audit_seq),
        }
        for r in rows
    ]


def _members(session: Session, suite: Mapping[str, Any]) -> list[dict[str, Any]]:
    out = []
    for m in suite["members"]:
        revision = session.exec(
            select(TaskRevision)
            .where(
                TaskRevision.task_id == m["task_id"], TaskRevision.task_digest == m["task_digest"]
            )
            .order_by(col(TaskRevision.id).desc())
        ).first()
        meta = queries.task_spec(revision).meta if revision else None
        out.append(
            {
                **m,
                "title": meta.title if meta else None,
                "risk": meta.risk if meta else None,
                "owner": meta.owner if meta else None,
            }
        )
    return out


def _flaky(
    facts: SuiteFacts, builds: Sequence[Mapping[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(flaky, failed a hard constraint) over the charted builds: the suite card's rule
    (`flaky_tasks`), so a task whose misses include a hard-constraint failure is never
    called flaky on one page and "not flaky" on the other."""
    from evalops.services.reports.suite_cards import flaky_tasks

    shown = {b["gate_id"] for b in builds}
    series = {
        task_id: [
            {
                "build": p.build,
                "passAtK": p.pass_at_k,
                "passHatK": p.pass_hat_k,
                "state": p.state,
            }
            for p in points
            if p.gate_id in shown
        ]
        for task_id, points in facts.points.items()
    }
    flaky, hard = flaky_tasks(series)
    return (
        sorted(flaky, key=lambda f: f["task_id"]),
        sorted(hard, key=lambda f: f["task_id"]),
    )


def suite_page(
    engine: Engine,
    session: Session,
    facts: SuiteFacts,
    base: Mapping[str, Any],
) -> dict[str, Any]:
    """What the suite card shows, from the facts already read (a suite card reads every
    decision's stored inputs, which for a long history is most of the database)."""
    from evalops.services.registry.definitions import Definitions
    from evalops.services.registry.suites import show_suite, suite_coverage
    from evalops.services.reports.audit import calibration_facts
    from evalops.services.reports.suite_cards import FLAKY_PASS_AT_K, FLAKY_PASS_HAT_K

    suite = show_suite(engine, facts.suite_id)
    coverage = suite_coverage(engine, facts.suite_id)
    members = _members(session, suite)
    trend = _trend(facts, [m["task_id"] for m in members])
    flaky, failed_hard = _flaky(facts, trend["builds"])
    card = {
        "kind": suite["kind"],
        "owner": suite["owner"],
        "description": suite["description"],
        "suite_digest": suite["suite_digest"],
        "members": members,
        "coverage": coverage["rows"],
        "coverage_gaps": coverage["gaps"],
        "calibration": calibration_facts(session, Definitions(session), suite["members"], None),
        "builds": trend["builds"],
        "flaky": flaky,
        "failed_hard_constraint": failed_hard,
        "flaky_rule": {"passAtK_at_least": FLAKY_PASS_AT_K, "passHatK_at_most": FLAKY_PASS_HAT_K},
    }
    if suite["kind"] == "estimation":
        from evalops.services.estimation.records import estimates_of_suite

        # Rates over builds with their intervals (docs/estimation.md).
        card["estimates"] = estimates_of_suite(session, facts.suite_id)
    return {
        **base,
        "card": card,
        "suite": facts.suite_id,
        "decisions": list(reversed(facts.decisions)),
        "trend": trend,
        "membership_history": _membership_history(session, facts.suite_id),
    }


def _incident_views(session: Session) -> list[dict[str, Any]]:
    from evalops.services.registry.incidents import view

    rows = session.exec(select(Incident).order_by(col(Incident.number))).all()
    return [view(session, r).as_dict(history=True) for r in rows]


def _graders_of(
    session: Session, revision: TaskRevision | None, cache: dict[str, list[dict[str, Any]]]
) -> list[dict[str, Any]]:
    """The graders of the grader set in force for the task (looked up once per set)."""
    if revision is None:
        return []
    if revision.grader_set_id not in cache:
        found = queries.grader_set_row(session, revision.grader_set_id)
        if found is None:
            cache[revision.grader_set_id] = []
            return []
        spec = queries.grader_set_spec(found)
        cache[revision.grader_set_id] = [
            {
                "grader_set_id": spec.id,
                "grader_set_version": spec.version,
                "grader_id": g.id,
                "version": g.version,
                "layer": g.layer,
                "type": g.type,
                "blocking": g.blocking,
            }
            for g in spec.graders
        ]
    return cache[revision.grader_set_id]


@dataclass
class _Lookups:
    """What the task pages and the index read, read once: the suites' facts and members,
    incidents, waivers, graders of each grader set."""

    facts: list[SuiteFacts]
    members: dict[str, list[queries.Member]]
    incidents: list[dict[str, Any]] = field(default_factory=list)
    waivers: list[dict[str, Any]] = field(default_factory=list)
    graders: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    tasks: list[dict[str, Any]] = field(default_factory=list)
    calibrations: list[dict[str, Any]] = field(default_factory=list)
    status: list[dict[str, Any]] = field(default_factory=list)
    voids: list[dict[str, Any]] = field(default_factory=list)


def _pins(session: Session, task_id: str, lookups: _Lookups) -> list[dict[str, Any]]:
    out = []
    for suite_id, members in lookups.members.items():
        for m in members:
            if m.task_id != task_id:
                continue
            revision = (
                session.get(TaskRevision, m.added.task_revision_id)
                if m.added.task_revision_id
                else None
            )
            out.append(
                {
                    "suite": suite_id,
                    "revision": revision.revision if revision else None,
                    "task_digest": m.task_digest,
                    "grader_set_digest": m.grader_set_digest,
                    "added_at": format_timestamp(m.added.at),
                    "added_by": m.added.actor,
                    "removed_at": format_timestamp(m.removed.at) if m.removed else None,
                }
            )
    return out


def task_page(
    session: Session, task_id: str, base: Mapping[str, Any], lookups: _Lookups
) -> dict[str, Any]:
    revision = queries.newest_task_row(session, task_id)
    meta = queries.task_spec(revision).meta if revision is not None else None
    return {
        **base,
        "task_id": task_id,
        "title": meta.title if meta else None,
        "owner": meta.owner if meta else None,
        "risk": revision.risk if revision else None,
        "revision": revision.revision if revision else None,
        "task_digest": revision.task_digest if revision else None,
        "history": [
            {"suite": f.suite_id, "rows": list(reversed(task_history(f.points[task_id])))}
            for f in lookups.facts
            if task_id in f.points
        ],
        "incidents": [
            {k: i[k] for k in ("incident_id", "title", "severity", "state")}
            for i in lookups.incidents
            if task_id in i["tasks"]
        ],
        "waivers": [
            {k: w[k] for k in ("waiver_id", "suite_id", "build", "states", "status", "expires_at")}
            for w in lookups.waivers
            if w["task_id"] == task_id
        ],
        "graders": _graders_of(session, revision, lookups.graders),
        "pins": _pins(session, task_id, lookups),
    }


def _waiver_views(session: Session, suites: Sequence[str], now: datetime) -> list[dict[str, Any]]:
    from evalops.services.gate.waivers import waiver_view

    rows = session.exec(select(Waiver).order_by(col(Waiver.number))).all()
    return [waiver_view(session, w, now) for w in rows if w.suite_id in suites]


def _calibration_views(session: Session) -> list[dict[str, Any]]:
    from evalops.services.evidence.calibration import calibration_view, validity_of
    from evalops.store.tables import CalibrationInvalidation

    out = []
    for row in session.exec(select(Calibration).order_by(col(Calibration.id))).all():
        view = calibration_view(row, validity_of(session, row))
        record = json.loads(row.record)
        view["measures"] = calibration_measures(record)
        view["metrics"] = flatten_metrics(record)
        view["signers"] = signers_of(session, "calibration.record", row.audit_seq)
        view["invalidations"] = [
            {"reason": i.reason, "at": format_timestamp(i.at), "actor": i.actor}
            for i in session.exec(
                select(CalibrationInvalidation).where(
                    CalibrationInvalidation.calibration_row_id == row.id
                )
            ).all()
        ]
        out.append(view)
    return out


def _shown(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list):
        return "[" + ", ".join(_shown(v) for v in value) + "]"
    return str(value)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def calibration_measures(record: Any) -> dict[str, Any]:
    """What a reader looks for in a calibration record, laid out (docs/site.md): the split
    sizes, kappa and abstentions on the holdout, precision and recall of each class with
    their intervals, the confusion of human majority labels (rows) and the grader's
    verdicts (columns), and how far the annotators agreed. A measure the record does not
    hold, or holds as undefined (one annotator's kappa), reads `–` (older records hold
    fewer); the flat table lists all it holds."""
    record = _mapping(record)
    counts, holdout = _mapping(record.get("counts")), _mapping(record.get("holdout"))
    agreement = _mapping(record.get("human_agreement"))
    confusion = _mapping(holdout.get("confusion"))
    verdicts = sorted({v for row in confusion.values() for v in _mapping(row)})
    return {
        "sizes": [
            ["calibration split", _shown(counts.get("calibration"))],
            ["holdout split", _shown(counts.get("holdout"))],
            ["holdout items with no majority label", _shown(holdout.get("no_majority"))],
            ["kappa against the majority label", _shown(holdout.get("kappa_vs_majority"))],
            ["abstention rate on the holdout", _shown(holdout.get("abstain_rate"))],
        ],
        "per_class": [
            {
                "class": name,
                "precision": _shown(m.get("precision")),
                "precision_ci": _shown(m.get("precision_ci")),
                "recall": _shown(m.get("recall")),
                "recall_ci": _shown(m.get("recall_ci")),
                "support": _shown(m.get("support")),
            }
            for name, m in ((k, _mapping(v)) for k, v in _mapping(holdout.get("per_class")).items())
        ],
        "confusion": {
            "verdicts": verdicts,
            "rows": [
                [label, *(_shown(_mapping(row).get(v, 0)) for v in verdicts)]
                for label, row in confusion.items()
            ],
        },
        "agreement": [
            [f"{name} ({agreement.get('method') or 'agreement'})", _shown(value)]
            for name, value in [
                ("overall", agreement.get("overall")),
                *_mapping(agreement.get("per_class")).items(),
            ]
        ]
        if agreement
        else [],
    }


def flatten_metrics(record: Any, prefix: str = "") -> list[list[str]]:
    """A calibration record's measures as (dotted key, value) rows, in the record's order:
    per-class precision and recall with their bounds, kappa, holdout size, confusion."""
    if not isinstance(record, Mapping):
        return [[prefix or "value", _shown(record)]]
    rows: list[list[str]] = []
    for key, value in record.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping) and value:
            rows += flatten_metrics(value, name)
        else:
            rows.append([name, _shown(value)])
    return rows


def _expiring(waivers: Sequence[Mapping[str, Any]], now: datetime) -> list[dict[str, Any]]:
    limit = format_timestamp(now + timedelta(days=EXPIRING_DAYS))
    return [dict(w) for w in waivers if w["status"] == "valid" and w["expires_at"] <= limit]


def _with_latest_estimate(session: Session, suite: Mapping[str, Any]) -> dict[str, Any]:
    """An estimation suite's index row names its latest estimate: such a suite is measured
    by estimates, and "no decision yet" alone would read as never run."""
    if suite.get("kind") != "estimation":
        return dict(suite)
    from evalops.services.estimation.records import estimates_of_suite

    found = estimates_of_suite(session, str(suite["suite"]))
    return {**suite, "latest_estimate": found[-1] if found else None}


def index_page(
    base: Mapping[str, Any],
    suites: Sequence[Mapping[str, Any]],
    lookups: _Lookups,
    now: datetime,
) -> dict[str, Any]:
    by_suite = {f.suite_id: f for f in lookups.facts}
    incidents, waivers = lookups.incidents, lookups.waivers
    return {
        **base,
        "suites": [
            {
                **s,
                "decisions": len(by_suite[s["suite"]].decisions),
                "latest": by_suite[s["suite"]].decisions[-1]
                if by_suite[s["suite"]].decisions
                else None,
            }
            for s in suites
        ],
        "incidents": [
            {k: i[k] for k in ("incident_id", "title", "severity", "state", "tasks")}
            for i in incidents
        ],
        # Open: no regression task guards it yet. A promoted incident has one (it stays
        # listed until closed, but is no longer open).
        "open_incidents": [i["incident_id"] for i in incidents if i["state"] in OPEN_INCIDENT],
        "promoted_incidents": [i["incident_id"] for i in incidents if i["state"] == "promoted"],
        "waivers": [
            {k: w[k] for k in ("waiver_id", "task_id", "suite_id", "build", "status", "expires_at")}
            for w in waivers
        ],
        "expiring": [w["waiver_id"] for w in _expiring(waivers, now)],
        "expiring_days": EXPIRING_DAYS,
        "expiring_before": format_timestamp(now + timedelta(days=EXPIRING_DAYS)),
        "calibrations": [
            {k: c[k] for k in ("calibration_id", "grader_id", "grader_version", "state")}
            for c in lookups.calibrations
        ],
        "calibration_problems": [dict(s) for s in lookups.status if s["state"] != "valid"],
        "model_grader_configs": len(lookups.status),
        "tasks": list(lookups.tasks),
        # Hard-failure voids first: what a reviewer of the record must look at.
        "voids": list(lookups.voids),
    }


# --- the site ------------------------------------------------------------------------------


def _renderer_fingerprint() -> str:
    """What decision pages are made with besides the registry: evalops and its templates."""
    from evalops.resources import templates_dir

    h = hashlib.sha256(__version__.encode("utf-8"))
    for path in sorted(templates_dir().iterdir()):
        if path.is_file():
            h.update(path.name.encode("utf-8") + b"\0" + path.read_bytes())
    return "sha256:" + h.hexdigest()


@dataclass
class _Context:
    engine: Engine
    session: Session
    writer: Writer
    head: Anchor | None
    as_of: str | None
    now: datetime
    cache_key: str
    old: dict[str, Any]
    new: dict[str, Any]


def _decision_pages(ctx: _Context, suite_ids: Sequence[str]) -> None:
    from evalops.report.site import decision_page, page_path

    session = ctx.session
    when = ctx.now  # the audit head's time: the same registry gives the same bytes
    # One snapshot, many decisions over the same tasks: look each definition up once.
    share_definitions(session)
    for suite_id in suite_ids:
        listed = session.exec(
            select(GateDecision.id, GateDecision.gate_id)
            .where(GateDecision.suite_id == suite_id)
            .order_by(col(GateDecision.number))
        ).all()
        for row_id, gate_id in listed:
            relative = page_path("decision", gate_id)
            known = ctx.old.get(relative)
            if (
                known is not None
                and known.get("key") == ctx.cache_key
                and _file_digest(ctx.writer.root / relative) == known.get("digest")
            ):
                ctx.writer.keep(relative)
                ctx.new[relative] = known
                continue
            row = session.get(GateDecision, row_id)
            assert row is not None  # listed in this very snapshot
            doc = stored_document(session, row, now=when)
            session.expunge(row)
            text = decision_page(doc, suite_id=suite_id)
            ctx.new[relative] = {"key": ctx.cache_key, "digest": ctx.writer.put(relative, text)}


def write_site(
    engine: Engine,
    directory: Path,
    *,
    suites: Sequence[str] = (),
    now: datetime,
    on_page: Progress | None = None,
) -> SiteResult:
    """Write the site of the registry (or of `suites`) under `directory`."""

    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(
            f"cannot write the site: {exc.strerror or exc}", str(directory), field="DIR"
        ) from None
    result = SiteResult(directory, directory / "index.html")
    writer = Writer(directory, result, on_page)
    with read_session(engine) as session:
        suite_ids = _suite_ids(session, suites)
        head_event = chain_head(session)
        head = anchor(head_event)
        result.audit_head = head
        as_of = format_timestamp(head_event.at) if head_event is not None else None
        # The registry's own time (docs/site.md); the clock only for an empty chain.
        now = head_event.at if head_event is not None else now
        cache_key = f"{head['hash'] if head else None}|{_renderer_fingerprint()}"
        manifest = _read_manifest(directory)
        ctx = _Context(
            engine,
            session,
            writer,
            head,
            as_of,
            now,
            cache_key,
            dict(manifest.get("pages", {})),
            {},
        )
        _decision_pages(ctx, suite_ids)
        _other_pages(ctx, suite_ids)
    _write_manifest(directory, {"schema": SITE_SCHEMA, "pages": ctx.new})
    return result


def _others_intact(ctx: _Context, key: str) -> bool:
    """Whether every page but the decisions' was written for this very key (audit head,
    renderer, suites) and still holds exactly those bytes: then none needs rendering."""
    others = {rel: e for rel, e in ctx.old.items() if not rel.startswith("decisions/")}
    return (
        "index.html" in others
        and all(e.get("key") == key for e in others.values())
        and all(_file_digest(ctx.writer.root / rel) == e.get("digest") for rel, e in others.items())
    )


def _other_pages(ctx: _Context, suite_ids: Sequence[str]) -> None:
    key = f"{ctx.cache_key}|{json.dumps(list(suite_ids))}"
    if _others_intact(ctx, key):
        for rel, entry in sorted(ctx.old.items()):
            if not rel.startswith("decisions/"):
                ctx.writer.keep(rel)
                ctx.new[rel] = entry
        return
    put = ctx.writer.put

    def write(relative: str, text: str) -> None:
        ctx.new[relative] = {"key": key, "digest": put(relative, text)}

    _render_others(ctx, suite_ids, write)


def _voids_upto(session: Session, head: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Every void up to the page's audit head, hard-failure voids first."""
    from evalops.services.reads.voids import list_voids
    from evalops.store.reader import ConnectionReader

    upto = int(head["seq"]) if head else 0
    return [
        {k: v[k] for k in ("void_id", "line", "hard_count", "trial_count", "at", "trials")}
        for v in list_voids(ConnectionReader(session.connection()))
        if v["audit_seq"] <= upto
    ]


def _render_others(
    ctx: _Context, suite_ids: Sequence[str], write: Callable[[str, str], None]
) -> None:
    from evalops.report import site as render
    from evalops.services.reads.calibration import calibration_status
    from evalops.services.registry.suites import list_suites
    from evalops.store.reader import engine_reader

    session, now = ctx.session, ctx.now
    facts = [suite_facts(session, s) for s in suite_ids]

    def base(page: str) -> dict[str, Any]:
        return _common(ctx.head, ctx.as_of, page)

    for f in facts:
        doc = suite_page(ctx.engine, session, f, base("suite"))
        write(render.page_path("suite", f.suite_id), render.render_page(doc))
    lookups = _Lookups(
        facts, {s: queries.members(session, s, include_removed=True) for s in suite_ids}
    )
    # Retired members too: a suite page lists them, and every page it links to is written.
    members = {m.task_id for ms in lookups.members.values() for m in ms}
    task_ids = sorted({t for f in facts for t in f.points} | members)
    lookups.incidents = _incident_views(session)
    if len(suite_ids) != len(_suite_ids(session, ())):
        lookups.incidents = [i for i in lookups.incidents if set(i["tasks"]) & set(task_ids)]
    lookups.waivers = _waiver_views(session, suite_ids, now)
    graders: set[str] = set()
    for task_id in task_ids:
        doc = task_page(session, task_id, base("task"), lookups)
        lookups.tasks.append({"task_id": task_id, "title": doc["title"], "risk": doc["risk"]})
        graders |= {g["grader_id"] for g in doc["graders"]}
        write(render.page_path("task", task_id), render.render_page(doc))
    for incident in lookups.incidents:
        doc = {**base("incident"), "incident": incident}
        write(render.page_path("incident", incident["incident_id"]), render.render_page(doc))
    for waiver in lookups.waivers:
        doc = {**base("waiver"), "waiver": waiver}
        write(render.page_path("waiver", waiver["waiver_id"]), render.render_page(doc))
    lookups.calibrations = [c for c in _calibration_views(session) if c["grader_id"] in graders]
    for calibration in lookups.calibrations:
        doc = {**base("calibration"), "calibration": calibration}
        write(
            render.page_path("calibration", calibration["calibration_id"]),
            render.render_page(doc),
        )
    with engine_reader(ctx.engine) as reader:
        status = calibration_status(reader)
    lookups.status = [
        s
        for s in status
        if s["grader_id"] in graders and (set(s["pinned_by"]) & set(suite_ids) or s["in_force"])
    ]
    chosen = [s for s in list_suites(ctx.engine) if s["suite"] in suite_ids]
    chosen = [_with_latest_estimate(session, s) for s in chosen]
    lookups.voids = _voids_upto(session, ctx.head)
    write(
        render.page_path("index", ""),
        render.render_page(index_page(base("index"), chosen, lookups, now)),
    )
