"""`trials list`, and the summary `trials show` starts from, through a `Reader`: plain SQL, no
SQLAlchemy, table or spec models on SQLite.

The one reading of a listed trial: its class re-derived from current evidence
(evalops/services/reads/definitions.py `rederive`), reruns that a gate policy governing the
task would not count flagged `rerun_not_permitted`. tests/services/test_read_differential.py
holds it to expectations written from the rules, under every filter and on every engine.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from evalops.domain.classes import CANONICAL_PRECEDENCE
from evalops.domain.classify import AMBIGUOUS_EFFECT_STATUSES, counted_gating_score
from evalops.domain.facts import rerun_limits
from evalops.domain.reruns import RERUN_NOT_PERMITTED, TrialNode, resolve_reruns
from evalops.errors import InputError
from evalops.services.gate.policy_choice import choose_policy
from evalops.services.reads.definitions import (
    TRIAL_COLUMNS,
    StoredDefinitions,
    rederive,
    settled_effects,
)
from evalops.services.reads.listings import (
    in_force_suite,
    stored_time,
    suite_members,
    unknown_suite,
)
from evalops.store.in_force_sql import LATEST_IN_FORCE_RUN_SQL
from evalops.store.reader import Reader

_LATEST_SYNC = LATEST_IN_FORCE_RUN_SQL

COUNT_CAP = 10_000
"""A limited listing counts the matching trials up to this many (or up to its limit, if
larger); past that its footer says "more than". Counting every row is the one part of a
listing that grows with the registry: at a million trials it cost more than listing fifty."""


def count_cap(limit: int) -> int:
    """Up to how many matching trials a listing of at most `limit` rows counts (a listing
    without a limit lists, and so counts, every one)."""
    return max(COUNT_CAP, limit)


@dataclass(frozen=True)
class TrialFilter:
    """What `trials list` keeps: a task, a build, a current class, a suite's pinned trials."""

    task: str | None = None
    build: str | None = None
    cls: str | None = None
    suite: str | None = None


def _gate_policies_in_force(reader: Reader) -> dict[str, dict[str, Any]]:
    """id -> the first registered row of every gate policy in force (`queries.in_force_rows`)."""
    out: dict[str, dict[str, Any]] = {}
    for row in reader.rows(
        "SELECT p.id, p.policy_id, p.policy_digest, p.document FROM policy AS p "
        "JOIN sync_in_force AS f ON f.kind = 'gate_policy' AND f.definition_id = p.policy_id "
        f"AND f.document_digest = p.document_digest AND f.sync_run_id = {_LATEST_SYNC} "
        "WHERE p.kind = 'gate_policy' ORDER BY p.id"
    ):
        out.setdefault(row["policy_id"], row)
    return dict(sorted(out.items()))


class _Policies:
    """The gate policies that would judge a task's trials (the rule of
    evalops/services/gate/policies.py `gate_policies_of_task`), as their rerun limits, each
    read once."""

    def __init__(self, reader: Reader) -> None:
        self.reader = reader
        self._in_force: dict[str, dict[str, Any]] | None = None
        self._limits: dict[str, list[dict[str, int]]] = {}

    def in_force(self) -> dict[str, dict[str, Any]]:
        if self._in_force is None:
            self._in_force = _gate_policies_in_force(self.reader)
        return self._in_force

    def _suites_of_task(self, task_id: str) -> list[str]:
        last: dict[str, str] = {}
        for row in self.reader.rows(
            "SELECT suite_id, action FROM suite_membership WHERE task_id = :task ORDER BY id",
            {"task": task_id},
        ):
            last[row["suite_id"]] = row["action"]
        return sorted(suite_id for suite_id, action in last.items() if action != "retired")

    def _governing(self, suite: dict[str, Any]) -> dict[str, Any]:
        named = json.loads(suite["document"]).get("gate_policy")
        rows = {} if named is not None else self.in_force()
        named_row = self.in_force().get(named) if named is not None else None
        chosen: dict[str, Any] = choose_policy(
            "gate_policy",
            (suite["suite_id"], suite["file_path"]),
            (named, named_row),
            {policy_id: (r["id"], r) for policy_id, r in rows.items()},
        )
        return chosen

    def limits(self, task_id: str) -> list[dict[str, int]]:
        if task_id not in self._limits:
            found: dict[str, dict[str, Any]] = {}
            for suite_id in self._suites_of_task(task_id):
                suite = in_force_suite(self.reader, suite_id)
                if suite is not None:
                    policy = self._governing(suite)
                    found.setdefault(policy["policy_digest"], policy)
            if not found and len(self.in_force()) == 1:
                only = next(iter(self.in_force().values()))
                found[only["policy_digest"]] = only
            ordered = sorted(found.values(), key=lambda p: (p["policy_id"], p["policy_digest"]))
            limits = [rerun_limits(json.loads(p["document"])) for p in ordered]
            # No policy governs the task: no rerun stands in (fail closed, never a guess).
            self._limits[task_id] = limits or [{}]
        return self._limits[task_id]


class _Reruns:
    """Which reruns may not stand in, per eval case, under the gate policies the gate applies
    to the task's suites: a rerun that any of them would not count is flagged."""

    def __init__(self, reader: Reader, defs: StoredDefinitions) -> None:
        self.reader = reader
        self.defs = defs
        self.policies = _Policies(reader)
        self.cache: dict[tuple[str, str, str], frozenset[str]] = {}

    def not_permitted(self, trial: dict[str, Any]) -> bool:
        if trial["parent_trial_id"] is None:
            return False
        key = (trial["task_digest"], trial["grader_set_digest"], trial["execution_digest"])
        if key not in self.cache:
            nodes = []
            for t in self.reader.rows(
                f"SELECT {TRIAL_COLUMNS} FROM trial WHERE task_digest = :task "
                "AND grader_set_digest = :graders AND execution_digest = :execution "
                f"AND {LIVE} ORDER BY id",
                {"task": key[0], "graders": key[1], "execution": key[2]},
            ):
                current = rederive(self.defs, t)
                cls = current.primary if current else t["classification"]
                nodes.append(TrialNode(t["trial_id"], t["parent_trial_id"], cls))
            self.cache[key] = frozenset().union(
                *(
                    resolve_reruns(nodes, limits).not_permitted
                    for limits in self.policies.limits(trial["task_id"])
                )
            )
        return trial["trial_id"] in self.cache[key]


LIVE = "NOT EXISTS (SELECT 1 FROM voided_trial v WHERE v.trial_row_id = trial.id)"
"""A trial row no void left out (listings read the registry at its head)."""

VOIDED_ROW = "trial.id IN (SELECT v.trial_row_id FROM voided_trial v)"
"""A trial row a void left out, written to be read from the voided rows (few) by their
ids, never by asking every trial whether it is voided: counted beside a listing of 50, the
question took 0.1 s at 1,000,000 trials (benchmarks/RESULTS.md, P5)."""


def voided_count(reader: Reader, where: TrialFilter) -> int:
    """How many trials the listing's filters (but the class) match that a void left out:
    a listing says so rather than leave them silently out."""
    builds = {
        r["execution_digest"]: r["system_build"]
        for r in reader.rows("SELECT execution_digest, system_build FROM execution_profile")
    }
    clause, params = _filters(reader, builds, where)
    clause = clause.replace(LIVE, VOIDED_ROW, 1)
    return int(reader.scalar(f"SELECT count(*) FROM trial WHERE {clause}", params))


def _summary(
    defs: StoredDefinitions, trial: dict[str, Any], builds: dict[str, str], reruns: _Reruns
) -> dict[str, Any]:
    """One listed trial (`trials list`, and the head of `trials show`)."""
    current = rederive(defs, trial)
    labels = list(current.secondary_labels) if current else json.loads(trial["secondary_labels"])
    if reruns.not_permitted(trial):
        labels.append(RERUN_NOT_PERMITTED)
    primary = current.primary if current else trial["classification"]
    return {
        "trial_id": trial["trial_id"],
        "task_id": trial["task_id"],
        "build": builds.get(trial["execution_digest"]),
        "trial_index": trial["trial_index"],
        "classification": primary,
        "classification_at_ingest": trial["classification"],
        "secondary_labels": labels,
        "score": current.score if current else trial["score"],
        "gating_score": counted_gating_score(
            primary, current.gating_score if current else trial["gating_score"]
        ),
        "scored": current.scored if current else True,
        "parent_trial_id": trial["parent_trial_id"],
        "completed_at": stored_time(trial["completed_at"]),
    }


def _filters(
    reader: Reader, builds: dict[str, str], wanted: TrialFilter
) -> tuple[str, dict[str, Any]]:
    """The WHERE clause of the listing (all but the class) and its parameters."""
    task, build, suite = wanted.task, wanted.build, wanted.suite
    where: list[str] = [LIVE]
    params: dict[str, Any] = {}
    if task:
        where.append("task_id = :task")
        params["task"] = task
    if build:
        digests = [d for d, b in builds.items() if b == build]
        names = [f"build_{i}" for i in range(len(digests))]
        params.update(zip(names, digests, strict=True))
        where.append(
            f"execution_digest IN ({', '.join(':' + n for n in names)})" if names else "1 = 0"
        )
    if suite:
        if in_force_suite(reader, suite) is None:
            raise InputError(unknown_suite(reader, suite), field="--suite")
        pins = []
        for i, (added, _) in enumerate(suite_members(reader, suite, include_removed=False)):
            pins.append(f"(task_digest = :pin_task_{i} AND grader_set_digest = :pin_graders_{i})")
            params[f"pin_task_{i}"] = added["task_digest"]
            params[f"pin_graders_{i}"] = added["grader_set_digest"]
        where.append(f"({' OR '.join(pins)})" if pins else "1 = 0")
    return " AND ".join(where), params


def list_trials(
    reader: Reader, where: TrialFilter, limit: int | None = None
) -> tuple[list[dict[str, Any]], int]:
    """The first `limit` matching trials (every one for None), oldest first, and how many
    match in all, counted up to `count_cap(limit)` + 1.

    Without `cls` the limit and the count are SQL (`LIMIT`, `COUNT`), the count stopping
    past `count_cap(limit)`: listing 50 trials costs the same at 10k and at 1M stored
    trials. A trial's current class is re-derived from current evidence, so `cls` re-derives
    every trial the other filters leave. `suite` keeps the trials of the suite's current
    members at their pinned task and grader set digests (the trials the gate counts).
    """
    cls = where.cls
    if cls is not None and cls not in CANONICAL_PRECEDENCE:
        raise InputError(
            f"unknown class {cls!r}; one of: {', '.join(CANONICAL_PRECEDENCE)}", field="--class"
        )
    builds = _builds(reader)
    clause, params = _filters(reader, builds, where)
    defs = StoredDefinitions(reader)
    reruns = _Reruns(reader, defs)
    sql = f"SELECT {TRIAL_COLUMNS} FROM trial WHERE {clause} ORDER BY id"
    if cls is None:
        if limit is None:
            rows = [_summary(defs, t, builds, reruns) for t in reader.rows(sql, params)]
            return rows, len(rows)
        counted = f"SELECT id FROM trial WHERE {clause} LIMIT :cap"
        cap = {**params, "cap": count_cap(limit) + 1}
        total = int(reader.scalar(f"SELECT count(*) AS n FROM ({counted}) AS matching", cap))
        sql += " LIMIT :limit"
        params = {**params, "limit": limit}
        return [_summary(defs, t, builds, reruns) for t in reader.rows(sql, params)], total
    out: list[dict[str, Any]] = []
    total = 0
    for trial in reader.each(sql, params):
        current = rederive(defs, trial)
        if (current.primary if current else trial["classification"]) != cls:
            continue
        total += 1
        if limit is None or len(out) < limit:
            out.append(_summary(defs, trial, builds, reruns))
    return out, total


def trial_summary(
    reader: Reader, trial_id: str, *, row_id: int | None = None
) -> dict[str, Any] | None:
    """One trial as `list_trials` lists it (None for an unknown id): what `trials show`
    prints first. `row_id` names the row (a voided id may have been ingested again); else
    the id's live row, else its newest."""
    if row_id is not None:
        trial = reader.first(
            f"SELECT {TRIAL_COLUMNS} FROM trial WHERE id = :row AND trial_id = :trial_id",
            {"row": row_id, "trial_id": trial_id},
        )
    else:
        trial = reader.first(
            f"SELECT {TRIAL_COLUMNS} FROM trial WHERE trial_id = :trial_id "
            f"ORDER BY CASE WHEN {LIVE} THEN 0 ELSE 1 END, id DESC LIMIT 1",
            {"trial_id": trial_id},
        )
    if trial is None:
        return None
    defs = StoredDefinitions(reader)
    return _summary(defs, trial, _builds(reader), _Reruns(reader, defs))


def _builds(reader: Reader) -> dict[str, str]:
    return {
        r["execution_digest"]: r["system_build"]
        for r in reader.rows(
            "SELECT execution_digest, system_build FROM execution_profile ORDER BY id"
        )
    }


def open_effects(reader: Reader, trial_ids: list[str]) -> dict[str, list[str]]:
    """Trial id -> the keys of its effects still `requested` or `unknown` and not settled by
    a reconciliation, one per position (the same rule as `classify.effective_effect_statuses`).
    An unknown trial is left out: the gate's `next:` line then keeps its placeholder."""
    out: dict[str, list[str]] = {}
    for trial_id in dict.fromkeys(trial_ids):
        record = reader.scalar(
            f"SELECT record FROM trial WHERE trial_id = :trial_id AND {LIVE} "
            "ORDER BY id DESC LIMIT 1",
            {"trial_id": trial_id},
        )
        if record is None:
            continue
        settled = settled_effects(
            reader.rows(
                "SELECT effect_index, status FROM reconciliation WHERE trial_id = :trial_id "
                "ORDER BY id",
                {"trial_id": trial_id},
            )
        )
        out[trial_id] = [
            str(effect["effect_key"])
            for i, effect in enumerate(json.loads(record).get("external_effects") or [])
            if effect.get("status") in AMBIGUOUS_EFFECT_STATUSES and i not in settled
        ]
    return out
