"""The parts of loading a gate decision's inputs that read no database: the request a
decision records, and what a stored row becomes in the inputs. The loaders
(evalops/services/gate/inputs.py over the ORM, evalops/services/verify/gate_inputs.py over
plain SQL) share them, so the two cannot spell an input differently."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, TypeVar

from evalops.domain.gate_documents import (
    BaselineInput,
    GateRequestDocument,
    RefusedWaiverRequest,
    TrajectoryCounts,
    WaiverFactDocument,
)
from evalops.domain.separation import (
    NO_SELF_REVIEW,
    NO_SELF_WAIVER,
    IngestAct,
    self_reviews,
    self_waiver,
    self_waiver_reason,
)
from evalops.domain.suggestions import close_match, some_of, unknown_id
from evalops.domain.timestamps import parse_timestamp
from evalops.domain.trajectory import TrajectoryResult
from evalops.domain.voids import VOIDED
from evalops.errors import InputError

DEFAULT_SEED = 20261130


@dataclass(frozen=True)
class GateRequest:
    """What a user asked for; stored with the inputs so `verify` can rebuild them."""

    build: str
    suite_id: str
    at: str
    """RFC 3339 UTC: the evaluation time (`--at`, else now)."""
    cutoff: int
    """The last audit seq whose rows the decision reads."""
    execution_id: str | None = None
    baseline: str | None = None
    """As asked: a build, `auto`, or None."""
    policy: str | None = None
    """A registered gate policy's id or digest; None: the one in force."""
    method: str | None = None
    alpha: float | None = None
    seed: int = DEFAULT_SEED

    def as_dict(self) -> GateRequestDocument:
        return {
            "build": self.build,
            "suite": self.suite_id,
            "at": self.at,
            "cutoff": self.cutoff,
            "execution": self.execution_id,
            "baseline": self.baseline,
            "policy": self.policy,
            "method": self.method,
            "alpha": self.alpha,
            "seed": self.seed,
        }

    @classmethod
    def from_dict(cls, d: GateRequestDocument) -> GateRequest:
        return cls(
            build=d["build"],
            suite_id=d["suite"],
            at=d["at"],
            cutoff=int(d["cutoff"]),
            execution_id=d.get("execution"),
            baseline=d.get("baseline"),
            policy=d.get("policy"),
            method=d.get("method"),
            alpha=d.get("alpha"),
            seed=int(d.get("seed", DEFAULT_SEED)),
        )


def efficiency_counts(text: str) -> tuple[dict[str, Any], int | None]:
    """The stored efficiency counts, and the fixture misses when ingest recorded them."""
    counts: dict[str, Any] = json.loads(text)
    misses = counts.pop("fixtureMisses", None)
    return counts, misses


def trajectory_counts(trajectory: str | None) -> TrajectoryCounts | None:
    return TrajectoryResult.from_block(json.loads(trajectory)).block() if trajectory else None


def no_profile_for(forced: Mapping[str, Any], build: str, field: str) -> str:
    """No profile in force for `build`: a profile's id given for its build (they are
    often alike, `agent-v1` of build `build-1`), a typo, or a build not synced."""
    known = sorted({str(row.system_build) for row in forced.values()})
    head = f"no execution profile in force has system_build {build!r}"
    if not known:
        return f"{head}; builds in force: none (sync an execution profile first)"
    listed = f"builds in force: {some_of(known)}"
    if build in forced:
        meant = str(forced[build].system_build)
        shared = sum(1 for row in forced.values() if row.system_build == meant)
        pick = f" --execution {build}" if field == "--build" and shared > 1 else ""
        return (
            f"{head}; {build!r} is an execution profile id, whose build is {meant}: "
            f"pass {field} {meant}{pick} ({listed})"
        )
    match = close_match(build, known)
    if match is not None:
        return f"{head}; did you mean {match!r}? ({listed})"
    return f"{head}; {listed}"


def not_a_profile_of(
    forced: Mapping[str, Any], latest: Mapping[str, Any], build: str, execution_id: str
) -> str:
    """`--execution` names no profile of `build`: another build's, none in force, or a
    build's name given for a profile's id."""
    if execution_id in forced:
        return (
            f"execution profile {execution_id!r} in force is for build "
            f"{forced[execution_id].system_build}, not {build}"
        )
    own = sorted(latest)
    if any(row.system_build == execution_id for row in forced.values()):
        return (
            f"no execution profile {execution_id!r} is in force: {execution_id} is a build, "
            "and --execution takes a profile's id (execution profiles of build "
            f"{build} in force: {some_of(own)})"
        )
    return unknown_id(
        "execution profile",
        execution_id,
        own,
        status="in force",
        nouns=f"execution profiles of build {build}",
    )


def evaluated_at(request: GateRequest) -> datetime:
    return parse_timestamp(request.at)


class RegressionRuleFacts(Protocol):
    """The parts of a gate policy's `critical_regressions` rule the baseline block reads."""

    @property
    def baseline(self) -> str: ...
    @property
    def method(self) -> str: ...
    @property
    def alpha(self) -> float: ...


def baseline_block(
    request: GateRequest,
    rule: RegressionRuleFacts,
    latest_pass: Callable[[], str | None],
    load_build: Callable[[str], tuple[str, Any]],
) -> BaselineInput[Any] | None:
    """A decision's `baseline` input: the build asked for (`auto`: the build of the latest
    stored pass, `latest_pass`), the paired test's settings, and that build's execution
    digest and tasks (`load_build`); None when no baseline is asked or required."""
    baseline = request.baseline
    note = None
    if baseline == "auto":
        baseline = latest_pass()
        if baseline is None:
            note = (
                f"--baseline auto: no stored pass decision for {request.suite_id} on a build "
                f"other than {request.build}"
            )
    if baseline is None and rule.baseline != "required" and note is None:
        return None
    block: BaselineInput[Any] = {
        "build": baseline,
        "asked": request.baseline,
        "note": note,
        "required": rule.baseline == "required",
        "method": request.method or rule.method,
        "alpha": request.alpha if request.alpha is not None else rule.alpha,
        "seed": request.seed,
    }
    if baseline is not None:
        if baseline == request.build:
            raise InputError(
                f"the baseline {baseline} is the candidate build itself", field="--baseline"
            )
        block["execution_digest"], block["tasks"] = load_build(baseline)
    return block


class ProfileRow(Protocol):
    """An execution profile in force, as choosing one for a build reads it."""

    @property
    def system_build(self) -> str: ...


Profile = TypeVar("Profile", bound=ProfileRow)


def choose_execution(
    forced: Mapping[str, Profile], build: str, execution_id: str | None, field: str
) -> Profile:
    """The execution profile in force (`forced`: id -> row) whose `system_build` is `build`,
    or `--execution`'s; `field` is the option that named the build (`compare` names two,
    neither of them `--build`)."""
    latest = {eid: row for eid, row in forced.items() if row.system_build == build}
    if execution_id is not None and execution_id in latest:
        return latest[execution_id]
    if execution_id is not None and (execution_id in forced or latest):
        raise InputError(not_a_profile_of(forced, latest, build, execution_id), field="--execution")
    if not latest:
        raise InputError(no_profile_for(forced, build, field), field=field)
    if len(latest) > 1:
        ids = ", ".join(sorted(latest))
        several = f"several execution profiles have system_build {build}: {ids}"
        if field != "--build":
            # --execution picks the profile of --build only.
            raise InputError(
                f"{several}; {field} needs a build with one execution profile in force",
                field=field,
            )
        raise InputError(f"{several}; pick one with --execution", field="--execution")
    return next(iter(latest.values()))


def ignored_as(
    trial_task_digest: str,
    trial_grader_set_digest: str,
    task_digest: str,
    grader_set_digest: str,
    voided: Any = False,
) -> str | None:
    """Why a member's trial of the build is not evidence for its pin (the `ignoredTrials`
    key it is counted under), or None when it is. A trial voided as of the decision's
    cutoff (`voided`: true, 1 or the engine's spelling of it) is left out first of all,
    whatever it pins."""
    if voided:
        return VOIDED
    if trial_task_digest != task_digest:
        return "other_task_revision"
    if trial_grader_set_digest != grader_set_digest:
        return "other_grader_set_version"
    return None


def must_rederive(
    appended: bool,
    recorded: Mapping[str, str] | None,
    grader_set_digest: str,
    current_validity: Callable[[], str],
) -> bool:
    """Must a trial's stored class be re-derived? Yes when a reconciliation or a review was
    appended to it, when its ingest batch recorded no calibration state for its grader set,
    or when that state (`recorded`, grader set digest -> validity digest) differs from the
    current one; else re-deriving would give the stored class (same record, definitions,
    trajectory and validity)."""
    if appended:
        return True
    if recorded is None or grader_set_digest not in recorded:
        return True
    return recorded[grader_set_digest] != current_validity()


# ------------------------------------------------------------------- separation of duties


@dataclass(frozen=True)
class SelfWaiver:
    """A waiver the authority in force refuses by `no_self_waiver` (its signer signed an
    ingest of its build's trials): the loaders list it under `refused`, never as a waiver."""

    seq: int
    reason: str


def without_self_waivers(
    waivers: list[WaiverFactDocument],
    refused: list[RefusedWaiverRequest],
    found: Mapping[str, SelfWaiver],
    suite_id: str,
) -> tuple[list[WaiverFactDocument], list[RefusedWaiverRequest]]:
    """(the waivers the gate may apply, every refusal it lists): the self-waivers of the
    suite join the refusals (after those made at grant, by waiver id), never the waivers."""
    kept = [w for w in waivers if w["waiver_id"] not in found]
    more: list[RefusedWaiverRequest] = [
        {
            "seq": found[w["waiver_id"]].seq,
            "task_id": w["task_id"],
            "states": list(w["states"]),
            "rules": [NO_SELF_WAIVER],
            "at": w["granted_at"],
            "waiver_id": w["waiver_id"],
            "refusal": found[w["waiver_id"]].reason,
        }
        for w in sorted(waivers, key=lambda w: w["waiver_id"])
        if w["waiver_id"] in found and w["suite_id"] == suite_id
    ]
    return kept, refused + more


def self_waivers_of(
    rules: Collection[str],
    waivers: list[tuple[str, int, str, frozenset[str]]],
    ingests: list[IngestAct],
) -> dict[str, SelfWaiver]:
    """`no_self_waiver` over the acts up to a decision's cutoff: `waivers` as (waiver id,
    audit seq, build, signer principals), `ingests` the signed ingests and imports."""
    if NO_SELF_WAIVER not in rules:
        return {}
    out: dict[str, SelfWaiver] = {}
    for waiver_id, seq, build, signers in waivers:
        hit = self_waiver(signers, build, ingests)
        if hit is not None:
            out[waiver_id] = SelfWaiver(seq, self_waiver_reason(waiver_id, *hit))
    return out


def reviewed_row(review: str) -> str:
    """SQL joining trial `t` to the row review `review` (an alias of review_result) was made
    for: the newest row of its trial id stored before the review. A voided trial's id may
    be ingested again with new content, by someone else; a review is of the live trial of
    its time (`review resolve` refuses a voided one), never of the voided row before it."""
    return (
        f"t.trial_id = {review}.trial_id AND t.audit_seq = (SELECT max(p.audit_seq) FROM "
        f"trial p WHERE p.trial_id = {review}.trial_id AND p.audit_seq < {review}.audit_seq)"
    )


def self_review_sql(cutoff: int | None) -> str:
    """Each signed review with the signers of the reviewed trial's ingest or import (both
    loaders read it; `:cutoff` is bound when given): review_seq, review_signers,
    ingest_signers."""
    where = "" if cutoff is None else " WHERE r.audit_seq <= :cutoff"
    return (
        "SELECT r.audit_seq AS review_seq, rs.signers AS review_signers, "
        "i.signers AS ingest_signers FROM review_result r "
        "JOIN signed_act rs ON rs.audit_seq = r.audit_seq AND rs.kind = 'review.resolve' "
        f"JOIN trial t ON {reviewed_row('r')} "
        "JOIN signed_act i ON i.audit_seq = t.audit_seq "
        "AND i.kind IN ('trials.ingest', 'trials.import')" + where
    )


def self_reviews_of(rules: Collection[str], rows: Sequence[Mapping[str, Any]]) -> frozenset[int]:
    """`no_self_review` over the rows of `self_review_sql`: the audit seqs of the reviews
    the gate does not count as human evidence (a signer of the review signed the ingest
    of the trial it reviewed, whichever came first)."""
    if NO_SELF_REVIEW not in rules:
        return frozenset()

    def principals(signers: str) -> list[str]:
        return [s["principal"] for s in json.loads(signers)]

    return self_reviews(
        (int(r["review_seq"]), principals(r["review_signers"]), principals(r["ingest_signers"]))
        for r in rows
    )


def refused_by_authority(seq: int, at: str, payload: Mapping[str, Any]) -> RefusedWaiverRequest:
    """A waiver act the authority refused (its `authority.refused` event), as the gate lists
    it beside the requests the policy refused at grant."""
    request = payload.get("request", {})
    refusal = payload.get("refusal", {})
    return {
        "seq": seq,
        "task_id": request.get("task_id"),
        "states": request.get("states"),
        "rules": [str(refusal.get("rule", "authority"))],
        "at": at,
        "refusal": f"refused by the authority: {refusal.get('message', '')}",
    }


def is_refused_waiver_act(payload: Mapping[str, Any], build: str, suite_id: str) -> bool:
    """Is this `authority.refused` payload a waiver grant for `build` in `suite_id`? (Events
    recorded before refusals named their request are not: they cannot be placed.)"""
    request = payload.get("request")
    return (
        payload.get("act") == "waiver.grant"
        and isinstance(request, dict)
        and request.get("build") == build
        and request.get("suite_id") == suite_id
    )
