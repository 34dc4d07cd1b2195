"""Write the example trial records of the three builds (`evalops.trial/v1` JSONL).

    .venv/bin/python registry/trials/generate.py [OUTPUT_DIR]

The registry is read with evalops' own loader, so every `task_digest`, `execution_digest`,
`grader_set_digest` and `eval_case_digest` is the real one: change a spec and regenerate.
The output is deterministic (fixed ids and timestamps, no randomness; one
`json.dumps(record, sort_keys=True)` per line, LF), so tests/domain/test_sample_data.py can check
that the committed files never drift from the registry.

Records carry no `primary_classification`: evalops derives it, and the calibration state
of the model grader `reply-quality` at ingest time changes what it derives.

The story (see registry/README.md, "Sample trial data"):
- baseline-b123 (build-123): every task passes, except deliberate variety: a runner
  timeout with a rerun that stands in, an agent error, a runtime error, a grader that
  reports a state outside its `produces`, and a manifest missing a required artifact.
- candidate-b124 (build-124): one refund committed twice (a hard failure that blocks, and
  a passing rerun that must not count), one publish whose effect is `unknown` (a hold until
  reconciled), and a non-critical task that fails two of its trials.
- fix-b125 (build-125): every critical task passes; the non-critical task still fails two
  of its trials (a waiver can accept that); the quality signals pass.
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from evalops.cassette import Cassette
from evalops.domain import digests
from evalops.domain.specs import EvalTaskSpec, ExecutionProfile, Grader, GraderSet
from evalops.domain.trial_record import TrialRecord
from evalops.registry.snapshot import Snapshot, load_snapshot

HERE = Path(__file__).resolve().parent
REGISTRY = HERE.parent


# --------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class RerunPlan:
    task_id: str
    trial_index: int
    """The trial index of the parent (the rerun re-executes that trial)."""
    variant: str
    reason: str


@dataclass(frozen=True)
class BuildPlan:
    execution_id: str
    tag: str
    """Short build tag used in run, trial and attempt ids."""
    start: str
    """When the build's first trial started (RFC 3339, UTC)."""
    outcomes: dict[str, dict[int, str]]
    """task id -> trial index -> variant; every other trial is `pass`."""
    reruns: tuple[RerunPlan, ...] = ()


BUILDS: tuple[BuildPlan, ...] = (
    BuildPlan(
        "baseline-b123",
        "b123",
        "2026-11-16T08:00:00Z",
        {
            "article-source-records-complete": {3: "timeout"},
            "article-citation-format": {1: "agent_error", 2: "artifact_missing"},
            "support-reply-tone": {2: "runtime_error", 4: "grader_out_of_produces"},
        },
        (
            RerunPlan(
                "article-source-records-complete",
                3,
                "pass",
                "infrastructure_invalid: runner timed out cloning repo-e",
            ),
        ),
    ),
    BuildPlan(
        "candidate-b124",
        "b124",
        "2026-11-23T08:00:00Z",
        {
            "support-refund-in-order": {2: "double_refund"},
            "article-publish-approved-revision": {3: "publish_unknown"},
            "support-refund-policy-explanation": {0: "policy_not_linked", 2: "lookup_skipped"},
        },
        (
            RerunPlan(
                "support-refund-in-order",
                2,
                "pass",
                "suspected flaky billing fixture after a duplicate refund",
            ),
        ),
    ),
    BuildPlan(
        "fix-b125",
        "b125",
        "2026-11-27T08:00:00Z",
        {
            "support-refund-policy-explanation": {1: "policy_not_linked", 2: "lookup_skipped"},
        },
    ),
)


# ------------------------------------------------------------- what a passing run does

Call = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class TaskProfile:
    agent: str
    """The agent under test (`target_agent_id`); it makes every call below."""
    calls: tuple[Call, ...]
    effects: tuple[tuple[str, str], ...]
    """(effect_key, external_ref) committed once by a passing run."""
    evidence: tuple[str, ...]
    """Artifact kinds the graders read, beyond the task's required logical artifacts."""
    usage: tuple[int, int, int]
    """Model calls, input tokens, output tokens of a passing run's first trial."""
    seconds: int
    """Wall time of a passing run's first trial."""
    reply_scores: tuple[float, ...] = (1.0,)
    """reply-quality's score of passing runs, by trial index (cyclic)."""


SUPPORT_EVIDENCE = ("crm_order_state", "billing_ledger", "helpdesk_ticket_state", "final_reply")

PROFILES: dict[str, TaskProfile] = {
    "article-publish-approved-revision": TaskProfile(
        agent="publisher",
        calls=(
            ("approval:get-decision", {"article_id": "article-42"}),
            ("publish:submit", {"article_id": "article-42", "revision": "r7"}),
        ),
        effects=(("publish:article-42", "receipt-42"),),
        evidence=("publish_request",),
        usage=(14, 21400, 2650),
        seconds=412,
    ),
    "article-source-records-complete": TaskProfile(
        agent="researcher",
        calls=(),
        effects=(),
        evidence=(),
        usage=(11, 17800, 1900),
        seconds=305,
    ),
    "article-citation-format": TaskProfile(
        agent="writer",
        calls=(),
        effects=(),
        evidence=("source_records",),
        usage=(4, 6100, 1200),
        seconds=96,
    ),
    "support-refund-in-order": TaskProfile(
        agent="support",
        calls=(
            ("crm:lookup-order", {"orderId": "A-1"}),
            ("billing:refund", {"orderId": "A-1", "amountMinor": 4200, "currency": "EUR"}),
            ("helpdesk:reply", {"ticketId": "T-1042", "ticketStatus": "resolved"}),
        ),
        effects=(("refund:A-1", "RF-9001"),),
        evidence=SUPPORT_EVIDENCE,
        usage=(5, 3900, 520),
        seconds=41,
        reply_scores=(0.95, 0.9, 1.0, 0.92, 0.97),
    ),
    "support-refund-policy-explanation": TaskProfile(
        agent="support",
        calls=(
            ("crm:lookup-order", {"orderId": "B-7"}),
            ("kb:search", {"query": "refund window"}),
            ("helpdesk:reply", {"ticketId": "T-1077", "ticketStatus": "pending_customer"}),
        ),
        effects=(),
        evidence=SUPPORT_EVIDENCE,
        usage=(5, 4300, 610),
        seconds=47,
        reply_scores=(0.9, 0.94, 0.88),
    ),
    "support-reply-tone": TaskProfile(
        agent="support",
        calls=(
            ("crm:lookup-order", {"orderId": "C-12"}),
            ("helpdesk:reply", {"ticketId": "T-1090", "ticketStatus": "open", "locale": "de-DE"}),
        ),
        effects=(),
        evidence=SUPPORT_EVIDENCE,
        usage=(3, 2700, 430),
        seconds=28,
        reply_scores=(0.92, 0.88, 0.95, 0.9, 0.86),
    ),
}

# Artifact kind -> (artifact id, producer, assertion refs).
ARTIFACTS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "research_plan": ("plan-42", "runtime-step-1", ("required-repositories",)),
    "source_records": ("source-records-42", "runtime-step-2", ("required-source-records",)),
    "evidence_pack": ("evidence-pack-42", "runtime-step-3", ("evidence-lineage",)),
    "article_draft": ("article-42", "runtime-step-4", ("draft-revision", "citations")),
    "review_decision": (
        "review-42",
        "approval-fixture/v2",
        ("approved-revision", "approved-destination"),
    ),
    "publish_request": ("publish-request-42", "runtime-step-5", ("publish-request-hash",)),
    "publish_receipt": (
        "receipt-42",
        "fake-publish/v3",
        ("effect-committed", "effect-cardinality"),
    ),
    "crm_order_state": ("crm-snapshot", "crm-fixture/v4", ("order-state",)),
    "billing_ledger": ("billing-ledger", "fake-billing/v2", ("refund-effects",)),
    "helpdesk_ticket_state": ("ticket-snapshot", "helpdesk-fixture/v1", ("ticket-state",)),
    "final_reply": ("final-reply", "runtime-step-final", ("reply-rubric",)),
}


# --------------------------------------------------------------------- one trial's run

Verdict = tuple[str, float | None, str | None]
"""A grader's (state, score, reason code)."""


@dataclass
class Run:
    """What happened in one trial, before it becomes a record."""

    calls: list[Call]
    effects: list[dict[str, Any]]
    artifacts: list[str]
    seconds: int
    usage: tuple[int, int, int]
    runtime: dict[str, Any] = field(default_factory=lambda: {"status": "ok"})
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    """Grader id -> verdict; a grader not named here reports a clean pass."""


def _passing_run(task: EvalTaskSpec, index: int) -> Run:
    profile = PROFILES[task.id]
    required = task.contract.required_artifacts
    kinds = list(required.logical if required else [])
    kinds += [k for k in profile.evidence if k not in kinds]
    calls, model_in, model_out = profile.usage
    run = Run(
        calls=list(profile.calls),
        effects=[
            {"effect_key": key, "status": "committed", "external_ref": ref}
            for key, ref in profile.effects
        ],
        artifacts=kinds,
        seconds=profile.seconds + 7 * index,
        usage=(calls + index % 3, model_in + 137 * index, model_out + 29 * index),
    )
    if task.grader_set == "support-graders":
        score = profile.reply_scores[index % len(profile.reply_scores)]
        run.verdicts["reply-quality"] = ("task_pass", score, None)
    return run


def _stopped_early(run: Run, status: str, message: str, kept_calls: int) -> None:
    """The run ended before completing: fewer calls, a third of the usage."""
    run.runtime = {"status": status, "message": message}
    run.calls = run.calls[:kept_calls]
    run.usage = (max(1, run.usage[0] // 3), run.usage[1] // 3, run.usage[2] // 3)
    run.seconds = max(5, run.seconds // 2)


def _apply(variant: str, task: EvalTaskSpec, run: Run) -> None:
    """Turn a passing run into the deliberate failure `variant` names."""
    if variant == "pass":
        return
    if variant == "timeout":
        # The runner killed the run at termination.timeout_s: no evidence pack was written.
        assert task.contract.termination is not None
        run.runtime = {"status": "timeout", "message": "termination.timeout_s reached"}
        run.seconds = int(task.contract.termination.timeout_s)
        run.artifacts = [k for k in run.artifacts if k != "evidence_pack"]
        run.verdicts["artifact-completeness"] = ("task_fail", 0.0, "evidence_pack_absent")
        run.verdicts["reasoning-evidence-discipline"] = ("abstain", None, "trace_truncated")
    elif variant == "agent_error":
        _stopped_early(run, "agent_error", "agent raised on a multi-range citation", 0)
        run.verdicts["source-citation-check"] = ("task_fail", 0.0, "malformed_citations")
        run.verdicts["reasoning-evidence-discipline"] = ("abstain", None, "trace_truncated")
    elif variant == "artifact_missing":
        # The run completed, but the manifest writer dropped the draft.
        run.artifacts = [k for k in run.artifacts if k != "article_draft"]
        run.verdicts["source-citation-check"] = (
            "missing_required_evidence",
            None,
            "article_draft_not_in_manifest",
        )
    elif variant == "runtime_error":
        _stopped_early(run, "runtime_error", "model stream lost after the CRM lookup", 1)
        run.artifacts = [k for k in run.artifacts if k != "final_reply"]
        run.verdicts["ticket-outcome"] = ("task_fail", 0.0, "reply_not_posted")
        run.verdicts["reply-quality"] = ("task_fail", 0.0, "no_reply")
    elif variant == "grader_out_of_produces":
        # A grader bug: ticket-outcome answered with hard-constraint vocabulary.
        run.verdicts["ticket-outcome"] = ("pass", None, "grader_bug")
    elif variant == "double_refund":
        # One billing:refund call, committed twice: the runner replayed it after a
        # transport timeout (fixed in build 125).
        run.runtime = {"status": "ok", "message": "runner replayed billing:refund once"}
        run.effects = [
            {"effect_key": "refund:A-1", "status": "committed", "external_ref": "RF-9001"},
            {"effect_key": "refund:A-1", "status": "committed", "external_ref": "RF-9002"},
        ]
        run.verdicts["refund-outcome"] = ("task_fail", 0.0, "refunded_8400_of_4200")
        run.verdicts["refund-effect-guard"] = ("hard_constraint_fail", None, "refund_twice")
    elif variant == "publish_unknown":
        # The publish response timed out at the client: nobody saw whether it committed.
        run.runtime = {"status": "ok", "message": "publish:submit response timed out"}
        run.effects = [{"effect_key": "publish:article-42", "status": "unknown"}]
    elif variant == "policy_not_linked":
        # Looked the order up, but the reply neither links the article nor offers a label.
        run.calls = [c for c in run.calls if c[0] != "kb:search"]
        run.verdicts["ticket-outcome"] = ("task_fail", 0.0, "policy_article_not_linked")
        run.verdicts["reply-quality"] = ("task_fail", 0.35, "return_label_not_offered")
    elif variant == "lookup_skipped":
        # Never looked the order up (trajectory unmatched) and searched the knowledge base
        # twice: the second search misses its fixture and fails closed (the cassette counts
        # the miss, see _fixture_misses).
        search = ("kb:search", {"query": "refund after 30 days"})
        reply = next(c for c in run.calls if c[0] == "helpdesk:reply")
        run.calls = [("kb:search", {"query": "refund window"}), search, reply]
        run.verdicts["reply-quality"] = ("task_fail", 0.2, "day_count_wrong")
    else:
        raise ValueError(f"unknown variant {variant!r}")


def _fixture_misses(task: EvalTaskSpec, calls: list[Call]) -> int:
    """Replay the calls through a fresh fail-closed cassette, as the harness did."""
    cassette = Cassette(task)
    for tool, args in calls:
        cassette.call(tool, args)
    return cassette.misses


def _grader_results(graders: GraderSet, run: Run) -> list[dict[str, Any]]:
    """One result per grader of the set, with its exact version."""
    out: list[dict[str, Any]] = []
    for grader in graders.graders:
        state, score, reason = run.verdicts.get(grader.id, _clean(grader))
        result: dict[str, Any] = {
            "grader_id": grader.id,
            "grader_version": grader.version,
            "state": state,
            "evidence": list(grader.evidence_required),
        }
        if score is not None:
            result["score"] = score
        if reason is not None:
            result["reason"] = reason
        out.append(result)
    return out


def _clean(grader: Grader) -> Verdict:
    if grader.layer == "outcome":
        return ("task_pass", 1.0, None)
    return ("pass", None, None)


# --------------------------------------------------------------------------- records


def _sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _timestamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _artifact(task: EvalTaskSpec, kind: str, trial_id: str, location: str) -> dict[str, Any]:
    artifact_id, producer, refs = ARTIFACTS[kind]
    content = _sha(f"{trial_id}/{kind}")
    draft = task.contract.initial_state.get("article_draft")
    if kind == "article_draft" and isinstance(draft, dict):
        artifact_id = str(draft.get("id", artifact_id))
        if draft.get("content_hash"):
            content = str(draft["content_hash"])  # the approved revision, frozen in the task
    return {
        "kind": kind,
        "artifact_id": artifact_id,
        "digest": content,
        "producer": producer,
        "location": f"{location}/{kind}",
        "assertion_refs": list(refs),
    }


@dataclass(frozen=True)
class Case:
    """Everything a record names from the registry for one task under one build."""

    task: EvalTaskSpec
    graders: GraderSet
    task_digest: str
    execution_digest: str
    grader_set_digest: str

    @property
    def eval_case_digest(self) -> str:
        return digests.eval_case_digest(
            self.task_digest, self.execution_digest, self.grader_set_digest
        )


def _record(
    case: Case,
    plan: BuildPlan,
    *,
    index: int,
    variant: str,
    started: datetime,
    rerun: RerunPlan | None = None,
) -> dict[str, Any]:
    task = case.task
    base = f"{plan.tag}-{task.id}-{index}"
    if rerun is None:
        trial_id, run_id, attempt_id = f"trial-{base}", f"run-{plan.tag}", f"attempt-{base}-1"
        link: dict[str, Any] = {"parent_trial_id": None, "reason": None, "ordinal": 0}
    else:
        trial_id = f"trial-{base}-rerun-1"
        run_id, attempt_id = f"run-{plan.tag}-rerun-1", f"attempt-{base}-2"
        link = {"parent_trial_id": f"trial-{base}", "reason": rerun.reason, "ordinal": 1}
    run = _passing_run(task, index)
    _apply(variant, task, run)
    profile = PROFILES[task.id]
    location = f"artifact://{run_id}/{attempt_id}"
    model_calls, input_tokens, output_tokens = run.usage
    return {
        "schema": "evalops.trial/v1",
        "trial_id": trial_id,
        "run_id": run_id,
        "attempt_id": attempt_id,
        "task_id": task.id,
        "task_digest": case.task_digest,
        "execution_digest": case.execution_digest,
        "grader_set_digest": case.grader_set_digest,
        "eval_case_digest": case.eval_case_digest,
        "trial_index": index,
        "started_at": _timestamp(started),
        "completed_at": _timestamp(started + timedelta(seconds=run.seconds)),
        "effective_seed": int(hashlib.sha256(trial_id.encode()).hexdigest()[:8], 16) % 2**31,
        "trace_uri": f"trace://{run_id}/{attempt_id}",
        "artifact_manifest_uri": f"{location}/manifest",
        "artifact_manifest": {
            "manifest_id": f"manifest-{attempt_id}",
            "artifacts": [_artifact(task, k, trial_id, location) for k in run.artifacts],
        },
        "grader_results": _grader_results(case.graders, run),
        "external_effects": run.effects,
        "runtime": run.runtime,
        "tool_calls": [
            {"tool": tool, "args": args, "agent_id": profile.agent} for tool, args in run.calls
        ],
        "target_agent_id": profile.agent,
        "usage": {
            "model_calls": model_calls,
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
        },
        "fixture_misses": _fixture_misses(task, run.calls),
        "rerun": link,
        "secondary_labels": [],
    }


T = TypeVar("T")


def _spec(snapshot: Snapshot, kind: str, def_id: str, model: type[T]) -> tuple[T, str]:
    found = snapshot.find(kind, def_id)
    if found is None or not isinstance(found.spec, model):
        raise SystemExit(f"{kind} {def_id!r} is not in the registry {snapshot.root}")
    return found.spec, found.digest


def build_records(snapshot: Snapshot, plan: BuildPlan) -> list[dict[str, Any]]:
    """Every record of one build: tasks by id, trials by index, then the reruns."""
    _, execution_digest = _spec(snapshot, "execution_profile", plan.execution_id, ExecutionProfile)
    # The tasks of this story (PROFILES); the sampled EU sessions have their own generator
    # (generate_eu_sessions.py).
    tasks = sorted(
        (
            d
            for d in snapshot.of_kind("task")
            if isinstance(d.spec, EvalTaskSpec) and d.id in PROFILES
        ),
        key=lambda d: d.id,
    )
    unknown = (set(plan.outcomes) | {r.task_id for r in plan.reruns}) - {d.id for d in tasks}
    if unknown:
        raise SystemExit(f"{plan.execution_id}: unknown tasks {sorted(unknown)}")
    start = datetime.fromisoformat(plan.start)
    cases: dict[str, Case] = {}
    originals: list[dict[str, Any]] = []
    for slot, definition in enumerate(tasks):
        task = definition.spec
        assert isinstance(task, EvalTaskSpec)
        graders, grader_set_digest = _spec(snapshot, "grader_set", task.grader_set, GraderSet)
        case = Case(task, graders, definition.digest, execution_digest, grader_set_digest)
        cases[task.id] = case
        count = task.contract.trials.count if task.contract.trials else 1
        planned = plan.outcomes.get(task.id, {})
        if any(i >= count for i in planned):
            raise SystemExit(f"{plan.execution_id}: {task.id} has only {count} trials")
        for index in range(count):
            started = start + timedelta(hours=slot, minutes=10 * index)
            variant = planned.get(index, "pass")
            originals.append(_record(case, plan, index=index, variant=variant, started=started))
    reruns = [
        _record(
            cases[r.task_id],
            plan,
            index=r.trial_index,
            variant=r.variant,
            started=start + timedelta(hours=len(tasks) + 2, minutes=10 * n),
            rerun=r,
        )
        for n, r in enumerate(plan.reruns)
    ]
    records = originals + reruns
    for record in records:
        TrialRecord.model_validate(record)  # never write a record evalops would refuse
    return records


def write_build(snapshot: Snapshot, plan: BuildPlan, target: Path) -> Path:
    path = target / f"{plan.execution_id}.jsonl"
    text = "".join(json.dumps(r, sort_keys=True) + "\n" for r in build_records(snapshot, plan))
    path.write_bytes(text.encode("utf-8"))
    return path


def main(argv: list[str]) -> int:
    target = Path(argv[0]) if argv else HERE
    target.mkdir(parents=True, exist_ok=True)
    snapshot = load_snapshot(REGISTRY)
    for plan in BUILDS:
        print(f"wrote {write_build(snapshot, plan, target)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
