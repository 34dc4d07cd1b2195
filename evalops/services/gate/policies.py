"""Which gate policy and which suite policy govern a suite: the one home of that rule.

A suite names its policies (`gate_policy:`, `suite_policy:` in its declaration); one that
names none is governed by the only policy of that kind in force, and when several are in
force nobody guesses: exit 2, listing them. Adding a policy file can therefore never
silently replace the one that decides releases. The gate, `compare`, waivers, promotion,
retirement, the `trials import --dry-run` preview and the trial listings all ask here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlmodel import Session, col, select

from evalops.domain.gate_documents import PolicyName
from evalops.domain.policy_rules import read_policy
from evalops.errors import InputError
from evalops.services.gate.policy_choice import PolicyKind, choose_policy
from evalops.store import queries
from evalops.store.tables import PolicyRow, SuiteRow


@dataclass(frozen=True)
class AppliedPolicy:
    """A registered policy as a decision applies it."""

    kind: PolicyKind
    policy_id: str
    digest: str
    document: dict[str, Any]

    def named(self) -> PolicyName:
        """`{id, revision, digest}` as the gate's JSON and the reports name it. A policy file
        has no `revision` field: its digest is what identifies one definition of an id."""
        return {"id": self.policy_id, "revision": None, "digest": self.digest}


def named_in(inputs: Mapping[str, Any]) -> PolicyName:
    """The applied gate policy of a decision's inputs, as `AppliedPolicy.named` spells it
    (the inputs hold the policy's document and digest, so nothing stored needs to change)."""
    document = inputs.get("policy") or {}
    return {
        "id": document.get("id"),
        "revision": document.get("revision"),
        "digest": inputs.get("policy_digest"),
    }


def named_by_digest(session: Session, digest: str) -> PolicyName:
    """A stored decision's gate policy named from its registered row (every stored
    decision's policy is registered), without reading the decision's whole inputs."""
    row = session.exec(
        select(PolicyRow).where(PolicyRow.kind == "gate_policy", PolicyRow.policy_digest == digest)
    ).first()
    return {"id": row.policy_id if row else None, "revision": None, "digest": digest}


def _applied(kind: PolicyKind, row: PolicyRow) -> AppliedPolicy:
    return AppliedPolicy(kind, row.policy_id, row.policy_digest, json.loads(row.document))


def governing_policy(
    session: Session,
    kind: PolicyKind,
    suite: SuiteRow,
    cutoff: int | None = None,
    *,
    newest_when_several: bool = False,
) -> AppliedPolicy:
    """The policy of `kind` that governs `suite` as the registry stood at `cutoff`
    (the rule: evalops/services/gate/policy_choice.py `choose_policy`).

    `newest_when_several` is the rule stored decisions were made under before suites
    named their policies (the newest registered in force); only rebuilding such a decision
    (`verify`) asks for it, never a new decision.
    """
    named = getattr(queries.suite_spec(suite), kind)
    named_row = queries.in_force_row(session, kind, named, cutoff) if named is not None else None
    rows = {} if named is not None else queries.in_force_rows(session, kind, cutoff)
    row: PolicyRow = choose_policy(
        kind,
        (suite.suite_id, suite.file_path),
        (named, named_row),
        {policy_id: (r.id, r) for policy_id, r in rows.items()},
        newest_when_several=newest_when_several,
    )
    return _applied(kind, row)


def suite_policy_for(session: Session, suite: SuiteRow, cutoff: int | None = None) -> AppliedPolicy:
    """The suite policy promotion and retirement apply to `suite`."""
    return governing_policy(session, "suite_policy", suite, cutoff)


def gate_policy_for(session: Session, suite: SuiteRow, cutoff: int | None = None) -> AppliedPolicy:
    """The gate policy that decides `suite` (and judges its waivers)."""
    return governing_policy(session, "gate_policy", suite, cutoff)


def gate_policies_of_task(
    session: Session, task_id: str, cutoff: int | None = None
) -> list[AppliedPolicy]:
    """The gate policies that would judge `task_id`'s trials: the policy of every suite it is
    a member of, once per distinct definition (sorted by id, then digest).

    A task in no suite is judged by no gate yet; it is shown under the only gate policy in
    force, and under none when there are several (then no rerun stands in: fail closed,
    never a guess between policies).
    """
    found: dict[str, AppliedPolicy] = {}
    for suite_id in queries.suites_of_task(session, task_id, cutoff):
        suite = queries.suite_row(session, suite_id, cutoff)
        if suite is not None:
            policy = gate_policy_for(session, suite, cutoff)
            found.setdefault(policy.digest, policy)
    if not found:
        rows = queries.in_force_rows(session, "gate_policy", cutoff)
        if len(rows) == 1:
            policy = _applied("gate_policy", next(iter(rows.values())))
            found[policy.digest] = policy
    return sorted(found.values(), key=lambda p: (p.policy_id, p.digest))


def max_attempts(policy: AppliedPolicy | None) -> dict[str, int]:
    """A gate policy's rerun rule, read as the gate reads it (no policy: no rerun stands
    in)."""
    if policy is None:
        return {}
    return read_policy(policy.document).reruns.max_attempts_by_class


def registered_gate_policy(session: Session, ref: str, cutoff: int | None) -> AppliedPolicy:
    """A registered gate policy named by `--policy` (an id: the definition in force, else
    the newest registered; or a `sha256:` digest)."""
    if not ref.startswith("sha256:"):
        forced = queries.in_force_row(session, "gate_policy", ref, cutoff)
        if forced is not None:
            return _applied("gate_policy", forced)
    column = PolicyRow.policy_digest if ref.startswith("sha256:") else PolicyRow.policy_id
    row = session.exec(
        select(PolicyRow)
        .where(
            PolicyRow.kind == "gate_policy",
            column == ref,
            queries.upto(PolicyRow.audit_seq, cutoff),
        )
        .order_by(col(PolicyRow.id).desc())
    ).first()
    if row is None:
        raise InputError(
            f"no registered gate policy {ref!r} (give a registered id or digest, or a policy "
            "file with --dry-run)",
            field="--policy",
        )
    return _applied("gate_policy", row)
