"""The TypedDicts of the documents that cross layers say what the code writes, key for key.

`evalops/domain/gate_documents.py` (gate inputs, the decision, `gate check`'s output) and
`evalops/report/document.py` (the report document) give the documents types for mypy;
nothing at run time holds the code to them. These tests do: they collect the documents the
code produces for the demo registry (its stored decisions, decisions made again and under
other methods, evaluator 4, dry runs, refused waivers, reviews, the frozen evaluators'
stored decisions) and walk each against its type, recursively through every nested
TypedDict. Each document must carry every required key and no key its type does not name;
over the whole corpus, every key a type names must have been seen, so a key removed from
the code, added to it, or declared and never written fails here.
"""

from __future__ import annotations

import collections.abc
import json
import sqlite3
import types
import typing
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, Union, get_args, get_origin, get_type_hints

import pytest

from evalops.domain import gate_documents as gd
from evalops.report import document as rd

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LEGACY_DATABASES = (
    "registry-0001-demo.db",
    "registry-evaluator2-demo.db",
    "registry-evaluator3-demo.db",
)
SUITE = "regression/core"

# ------------------------------------------------------------------------- the checker


def _td_class(tp: Any) -> Any | None:
    """The TypedDict class of `tp` (a TypedDict or a subscripted generic one), else None."""
    cls = get_origin(tp) or tp
    return cls if typing.is_typeddict(cls) else None


def _substitute(tp: Any, mapping: dict[Any, Any]) -> Any:
    """`tp` with the type variables of a generic TypedDict replaced by its arguments."""
    if isinstance(tp, typing.TypeVar):
        return mapping[tp]
    args = get_args(tp)
    if not args or not mapping:
        return tp
    new = tuple(_substitute(a, mapping) for a in args)
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        return Union[new]  # noqa: UP007 (a runtime union of computed members)
    return origin[new if len(new) > 1 else new[0]]


def _fields(tp: Any) -> tuple[Any, dict[str, Any]]:
    """(class, key -> value type) of a TypedDict type, type variables substituted."""
    cls = _td_class(tp)
    mapping = dict(zip(getattr(cls, "__parameters__", ()), get_args(tp), strict=True))
    hints = get_type_hints(cls)
    return cls, {k: _substitute(v, mapping) for k, v in hints.items()}


Seen = dict[Any, set[str]]


def _scalar_problem(value: Any, tp: Any, path: str) -> list[str]:
    if tp is Any:
        return []
    if tp is type(None):
        return [] if value is None else [f"{path}: {value!r} is not null"]
    if tp is bool:
        ok = isinstance(value, bool)
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif tp is float:  # canonical JSON writes 1.0 as 1
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    elif tp is str:
        ok = isinstance(value, str)
    else:
        raise AssertionError(f"{path}: the checker does not know {tp!r}")
    return [] if ok else [f"{path}: {value!r} is not {tp.__name__}"]


def _union_problems(value: Any, tp: Any, path: str, seen: Seen) -> list[str]:
    members = list(get_args(tp))
    # The most specific TypedDict first: a report's refused waiver extends the decision's.
    members.sort(key=lambda m: -len(_td_class(m).__required_keys__) if _td_class(m) else 0)
    tried: list[str] = []
    for member in members:
        found: Seen = {}
        problems = problems_of(value, member, path, found)
        if not problems:
            for cls, keys in found.items():
                seen.setdefault(cls, set()).update(keys)
            return []
        tried += problems
    return [f"{path}: matches no member of {tp}: {tried[:6]}"]


def problems_of(value: Any, tp: Any, path: str, seen: Seen) -> list[str]:
    """Where `value` breaks `tp` (empty: it conforms). Keys of each TypedDict met are
    added to `seen`."""
    origin = get_origin(tp)
    if _td_class(tp) is not None:
        cls, fields = _fields(tp)
        if not isinstance(value, dict):
            return [f"{path}: {type(value).__name__}, not a {cls.__name__} object"]
        keys = set(value)
        problems = [f"{path}: {cls.__name__} lacks {k!r}" for k in cls.__required_keys__ - keys]
        problems += [f"{path}: {cls.__name__} has no key {k!r}" for k in keys - set(fields)]
        for key in sorted(keys & set(fields)):
            problems += problems_of(value[key], fields[key], f"{path}.{key}", seen)
        if not problems:
            seen.setdefault(cls, set()).update(keys)
        return problems
    if origin in (Union, types.UnionType):
        return _union_problems(value, tp, path, seen)
    # A `Sequence` of the document (rows a report may read back from disk) is written as
    # a JSON array, like a list: every element is checked all the same.
    if origin in (list, collections.abc.Sequence):
        if not isinstance(value, list):
            return [f"{path}: {type(value).__name__}, not a list"]
        (item,) = get_args(tp)
        return [p for i, v in enumerate(value) for p in problems_of(v, item, f"{path}[{i}]", seen)]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{path}: {type(value).__name__}, not an object"]
        _, item = get_args(tp)
        return [p for k, v in value.items() for p in problems_of(v, item, f"{path}.{k}", seen)]
    return _scalar_problem(value, tp, path)


def reachable(tp: Any, out: dict[Any, None] | None = None) -> dict[Any, None]:
    """Every TypedDict class named, at any depth, by the type `tp`."""
    out = {} if out is None else out
    cls = _td_class(tp)
    if cls is not None:
        first = cls not in out
        out[cls] = None
        if first or get_args(tp):
            for field in _fields(tp)[1].values():
                reachable(field, out)
        return out
    for arg in get_args(tp):
        reachable(arg, out)
    return out


class Corpus:
    """Documents checked against their types, and the keys each TypedDict was seen with."""

    def __init__(self) -> None:
        self.seen: Seen = {}
        self.roots: dict[Any, None] = {}
        self.count = 0

    def check(self, value: Any, tp: Any, where: str) -> None:
        problems = problems_of(value, tp, where, self.seen)
        assert not problems, "\n".join(problems[:20])
        self.roots[tp] = None
        self.count += 1

    def unseen(self) -> dict[str, list[str]]:
        """Per TypedDict reachable from the checked types: the keys it names and no
        document had."""
        classes: dict[Any, None] = {}
        for root in self.roots:
            reachable(root, classes)
        out = {}
        for cls in classes:
            missing = sorted(set(get_type_hints(cls)) - self.seen.get(cls, set()))
            if missing:
                out[cls.__name__] = missing
        return out


# ------------------------------------------------------------------------- the corpus


def _stored(db: Path) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    connection = sqlite3.connect(db)
    try:
        rows = connection.execute("SELECT gate_id, inputs, result FROM gate_decision").fetchall()
    finally:
        connection.close()
    for gate_id, inputs, result in rows:
        yield gate_id, json.loads(inputs), json.loads(result)


def _inputs_type(inputs: dict[str, Any]) -> Any:
    return gd.CompactInputs if inputs["evaluator"] >= 4 else gd.ListedInputs


def _add_stored(corpus: Corpus, db: Path) -> list[str]:
    gate_ids = []
    for gate_id, inputs, result in _stored(db):
        corpus.check(result, gd.DecisionDocument, f"{gate_id}.result")
        corpus.check(inputs, _inputs_type(inputs), f"{gate_id}.inputs")
        gate_ids.append(gate_id)
    return gate_ids


def _reviewed(engine: Any, demo: Path, now: Any) -> None:
    """A trial of the fixed build whose model judge abstained, ingested and then resolved
    by a human, so a decision and its report list a review (the demo queues none)."""
    from evalops.services.evidence.review import resolve, review_queue
    from tests.conftest import evalops_test_env, run_quietly

    source = demo / "registry" / "trials" / "fix-b125.jsonl"
    lines = source.read_text(encoding="utf-8").splitlines()
    record = next(
        r for r in map(json.loads, lines) if r["task_id"] == "support-refund-policy-explanation"
    )
    record["trial_id"] += "-abstained"
    record["attempt_id"] += "-abstained"
    record["trial_index"] = 7
    for result in record["grader_results"]:
        if result["grader_id"] == "reply-quality":
            result["state"] = "abstain"
            result.pop("score", None)
    path = demo / "abstained.jsonl"
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    with evalops_test_env():
        run_quietly(["trials", "ingest", str(path)], demo)
    (item,) = review_queue(engine)
    resolve(
        engine,
        item["trial_id"],
        grader_id=item["grader_id"],
        state="task_pass",
        reason="the reply cites the refund policy",
        actor="reviewer@example.com",
        now=now,
    )


def _refused_waiver(engine: Any, inputs: dict[str, Any], now: Any) -> None:
    """A waiver request for a critical task: refused, and audited as refused."""
    from evalops.domain.vocabulary import format_timestamp
    from evalops.domain.waivers import WaiverRequest
    from evalops.services.gate.waivers import grant

    critical = next(t["task_id"] for t in inputs["tasks"] if t["risk"] == "critical")
    granted, _ = grant(
        engine,
        WaiverRequest(
            task_id=critical,
            suite_id=SUITE,
            states=("task_fail",),
            build=inputs["build"],
            owner="owner@example.com",
            reason="asked for anyway",
            expires=format_timestamp(now + timedelta(days=3)),
        ),
        actor="tester@example.com",
        now=now,
    )
    assert not granted


def _methods(corpus: Corpus, engine: Any, build: str, now: Any) -> None:
    """The paired verdict by every method, and with a baseline that is not found, by both
    evaluator of new decisions and by the frozen evaluator 3 (nothing stored)."""
    from evalops.domain.gate_compact import evaluate as evaluate_compact
    from evalops.domain.legacy.gate_v3 import evaluate as evaluate_v3
    from evalops.domain.regression import METHODS
    from evalops.services.gate.inputs import build_inputs, request_for
    from evalops.store.engine import read_session

    asks = [("auto", None), *(("build-123", m) for m in METHODS)]
    with read_session(engine) as session:
        for baseline, method in asks:
            request = request_for(
                session,
                build=build,
                suite_id=SUITE,
                at=None,
                now=now,
                baseline=baseline,
                method=method,
            )
            for evaluator, decide in ((3, evaluate_v3), (4, evaluate_compact)):
                inputs: Any = build_inputs(session, request, dry_run=True, evaluator=evaluator)
                inputs["gate_id"] = "compare"
                where = f"{baseline}/{method}/evaluator {evaluator}"
                corpus.check(inputs, _inputs_type(inputs), f"{where}.inputs")
                corpus.check(decide(inputs), gd.DecisionDocument, f"{where}.result")


def _bootstrap_verdict(corpus: Corpus) -> None:
    """A bootstrap that resamples needs ten paired tasks with some spread; the demo's
    suite has three, so the verdict is computed over a synthetic pairing (pure)."""
    from evalops.domain.gate_rules import with_baseline
    from evalops.domain.regression import METHODS, TaskOutcome, paired_verdict

    base = {f"t{i}": TaskOutcome(True, 0.9) for i in range(12)}
    cand = {f"t{i}": TaskOutcome(i % 3 != 0, 0.2 + 0.05 * i) for i in range(12)}
    verdict = paired_verdict(base, cand, method="paired-bootstrap", alpha=0.05, seed=7)
    assert "resamples" in verdict
    block = {"build": "build-123", "execution_digest": "sha256:" + "0" * 64}
    corpus.check(with_baseline(verdict, block), gd.RegressionVerdict, "bootstrap regression")  # type: ignore[arg-type]
    # `paired_verdict` itself, by every method, with ten or more pairs and with three.
    for method in METHODS:
        for pairs in (12, 3):
            shown = {k: v for k, v in cand.items() if int(k[1:]) < pairs}
            found = paired_verdict(base, shown, method=method, alpha=0.05, seed=7)
            corpus.check(found, gd.PairedVerdict, f"{method} over {pairs} pairs")


def _refused_by_policy(inputs: dict[str, Any]) -> dict[str, Any]:
    """Inputs whose policy forbids the states of the waivers granted: every one is refused
    by the policy in force."""
    policy = json.loads(json.dumps(inputs["policy"]))
    states = {s for w in inputs["waivers"] for s in w["states"]}
    policy["waivers"]["forbidden_states"] = sorted(
        {*policy["waivers"]["forbidden_states"], *states}
    )
    return {**inputs, "policy": policy, "gate_id": "dry-run"}


def _refused_by_authority(inputs: dict[str, Any]) -> dict[str, Any]:
    """Inputs as the loaders build them under an authority: every waiver refused by
    `no_self_waiver`, and a waiver act the authority refused at grant."""
    from evalops.services.gate.input_parts import (
        SelfWaiver,
        refused_by_authority,
        without_self_waivers,
    )

    found = {
        w["waiver_id"]: SelfWaiver(1, f"no_self_waiver: p signed {w['waiver_id']}")
        for w in inputs["waivers"]
    }
    act = {
        "act": "waiver.grant",
        "refusal": {"rule": "authority", "message": "not a risk owner"},
        "request": {"build": inputs["build"], "suite_id": SUITE, "task_id": "t", "states": []},
    }
    refused = [*inputs["refused_waivers"], refused_by_authority(2, inputs["evaluated_at"], act)]
    waivers, refused = without_self_waivers(inputs["waivers"], refused, found, SUITE)
    return {**inputs, "waivers": waivers, "refused_waivers": refused, "gate_id": "dry-run"}


def _listed_report(corpus: Corpus, copy: Path, now: Any) -> None:
    """The report of a stored evaluator-3 decision (its tasks list `firstResults`), from
    the registry the evalops of evaluator 3 made."""
    import shutil

    from evalops.services.reports.audit import audit_document
    from evalops.store.engine import make_engine
    from evalops.store.migrate import upgrade

    shutil.copyfile(FIXTURES / "registry-evaluator3-demo.db", copy)
    engine = make_engine(f"sqlite:///{copy}")
    try:
        # The fixture is at the schema of its day; a report is made by today's evalops,
        # after `db upgrade` (which keeps every stored decision as it was).
        upgrade(f"sqlite:///{copy}", engine)
        doc = audit_document(engine, "GATE-3", now=now)
        corpus.check(doc, rd.ReportDocument, "report of an evaluator-3 decision")
    finally:
        engine.dispose()


def _voided(engine: Any, now: Any) -> None:
    """A voided trial, as the next decision's report lists its void."""
    from evalops.services.gate.check import check
    from evalops.services.ingest.voids import VoidRequest, void_trials

    void = VoidRequest(("trial-b124-support-refund-in-order-0",), None, "wrong build")
    void_trials(engine, void, actor="t", now=now)
    check(engine, build="build-124", suite_id=SUITE, at=None, actor="t", now=now)


@pytest.fixture(scope="module")
def corpus(demo_master: Path, tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    import shutil

    from evalops.domain.gate import evaluate
    from evalops.domain.vocabulary import parse_timestamp
    from evalops.report.audit import render_audit
    from evalops.services.gate.check import check, dry_run_check
    from evalops.services.gate.waivers import revoke
    from evalops.services.reports.audit import audit_document, unstored_document
    from evalops.store.engine import make_engine
    from tests.conftest import PINNED_NOW

    corpus = Corpus()
    now = parse_timestamp(PINNED_NOW)
    # The frozen evaluators' stored decisions are read through the same types.
    for name in LEGACY_DATABASES:
        for gate_id, inputs, result in _stored(FIXTURES / name):
            corpus.check(result, gd.DecisionDocument, f"{name}:{gate_id}.result")
            if inputs.get("evaluator") in (2, 3):
                corpus.check(inputs, gd.ListedInputs, f"{name}:{gate_id}.inputs")
    _listed_report(corpus, tmp_path_factory.mktemp("evaluator-3") / "registry.db", now)
    # A private copy of the demo: more decisions are stored in it.
    demo = tmp_path_factory.mktemp("document-types") / "demo"
    shutil.copytree(demo_master, demo, symlinks=True)
    db = demo / ".evalops" / "registry.db"
    engine = make_engine(f"sqlite:///{db}")
    try:
        last = list(_stored(db))[-1]
        _reviewed(engine, demo, now)
        _refused_waiver(engine, last[1], now)
        build = last[1]["build"]
        # Both builds the demo decided: the candidate's trials include a rerun chain (kept
        # whole in its task's summary) and a reconciled effect.
        for decided in (build, "build-124"):
            output = check(engine, build=decided, suite_id=SUITE, at=None, actor="t", now=now)
            corpus.check(output, gd.StoredOutput, f"check {decided}")
        unstored = []
        output, inputs = dry_run_check(engine, build=build, suite_id=SUITE, at=None, now=now)
        corpus.check(output, gd.DryRunOutput, "dry run")
        corpus.check(inputs, _inputs_type(dict(inputs)), "dry-run inputs")
        unstored.append((output, inputs))
        refusing = _refused_by_policy(dict(unstored[0][1]))
        unstored.append((evaluate(refusing), refusing))  # type: ignore[arg-type]
        by_authority = _refused_by_authority(dict(unstored[0][1]))
        corpus.check(by_authority, _inputs_type(by_authority), "inputs under an authority")
        unstored.append((evaluate(by_authority), by_authority))  # type: ignore[arg-type]
        _methods(corpus, engine, build, now)
        _bootstrap_verdict(corpus)
        # A revoked waiver, as the next decision's report shows it.
        revoke(engine, "WVR-1", reason="the fix shipped", actor="t", now=now)
        check(engine, build=build, suite_id=SUITE, at=None, actor="t", now=now)
        _voided(engine, now)
        for gate_id in _add_stored(corpus, db):
            doc = audit_document(engine, gate_id, now=now)
            corpus.check(doc, rd.ReportDocument, f"report {gate_id}")
            # What a report file holds is the document itself.
            corpus.check(json.loads(render_audit(doc, "json")), rd.ReportDocument, gate_id)
        for result, inputs in unstored:
            doc = unstored_document(engine, result=result, inputs=inputs, now=now)
            corpus.check(doc, rd.ReportDocument, f"unstored report of {result['gate_id']}")
    finally:
        engine.dispose()
    return corpus


# ------------------------------------------------------------------------------- tests


def test_every_document_the_code_writes_has_the_keys_of_its_type(corpus: Corpus) -> None:
    """Every document of the corpus conformed as it was added (the fixture asserts it)."""
    assert corpus.count > 40
    assert {gd.DecisionDocument, gd.ListedInputs, gd.CompactInputs, rd.ReportDocument} <= set(
        corpus.roots
    )


def test_every_key_a_type_names_is_written_by_the_code(corpus: Corpus) -> None:
    """Over the corpus, each TypedDict reachable from the checked types was seen with every
    key it declares: a declared key the code never writes would fail here."""
    unseen = corpus.unseen()
    assert not unseen, json.dumps(unseen, indent=1)


def test_the_types_reach_every_nested_document(corpus: Corpus) -> None:
    """The walk went into the nested parts, not only the top level."""
    nested = {
        gd.TaskInput,
        gd.CompactTaskInput,
        gd.CompactSingle,
        gd.ChainedTrial,
        gd.TrialInput,
        gd.BaselineInput,
        gd.WaiverFactDocument,
        gd.RefusedWaiverRequest,
        gd.RefusedByPolicy,
        gd.DecisionTask,
        gd.RegressionVerdict,
        gd.WaiverAccounting,
        gd.TrialStats,
        rd.ReportTask,
        rd.ReportTrial,
        rd.ReviewFact,
        rd.ReconciliationFact,
        rd.ReportRefusedAtGrant,
        rd.ReportRefusedByPolicy,
        rd.Changes,
        rd.Provenance,
        rd.HistoryEntry,
        rd.ReportVoid,
    }
    assert nested <= set(corpus.seen), nested - set(corpus.seen)


# -------------------------------------------------------------- the checker is strict


def test_the_checker_finds_a_missing_an_extra_and_a_mistyped_key() -> None:
    trial = {
        "trial_id": "t.0",
        "parent_trial_id": None,
        "classification": "task_pass",
        "score": 1,
        "gating_score": 1.0,
        "trajectory": None,
        "efficiency": {"toolCallCount": 3},
        "fixture_misses": 0,
    }
    assert problems_of(trial, gd.TrialInput, "t", {}) == []
    assert problems_of({**trial, "extra": 1}, gd.TrialInput, "t", {}) == [
        "t: TrialInput has no key 'extra'"
    ]
    missing = {k: v for k, v in trial.items() if k != "score"}
    assert problems_of(missing, gd.TrialInput, "t", {}) == ["t: TrialInput lacks 'score'"]
    assert problems_of({**trial, "fixture_misses": "0"}, gd.TrialInput, "t", {}) == [
        "t.fixture_misses: '0' is not int"
    ]
    # Nested, through a list of a generic TypedDict's type argument.
    task = {
        "task_id": "a",
        "risk": "critical",
        "protects": [],
        "task_digest": "d",
        "grader_set_digest": "g",
        "plan": {"count": 1, "k": 1, "passRule": "all", "passScore": 1},
        "ignoredTrials": {},
        "trials": [missing],
    }
    baseline = {
        "build": "b",
        "asked": None,
        "note": None,
        "required": False,
        "method": "mcnemar",
        "alpha": 0.05,
        "seed": 1,
        "tasks": [task],
    }
    found = problems_of(baseline, gd.BaselineInput[gd.TaskInput], "b", {})
    assert found == ["b.tasks[0].trials[0]: TrialInput lacks 'score'"]
    # A summarized task is not a listed one.
    assert problems_of(baseline, gd.BaselineInput[gd.CompactTaskInput], "b", {})
