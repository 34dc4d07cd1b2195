"""A gate decision's inputs rebuilt through a `Reader` (plain SQL, no SQLAlchemy on SQLite).

`verify` rebuilds every stored decision's inputs from the registry as it stood at the
decision's cutoff and compares them with what was stored. On a SQLite registry it runs on
`sqlite3` alone, so this is `evalops/services/gate/inputs.py::build_inputs` for a stored
decision (`rebuild`) over the same rows, read with SQL both engines run: the same members,
pins, ratcheted labels, trial plans, re-derived classes, ignored trials, waivers, refused
waiver requests and baseline, in the same order. The stored documents are read as views
(evalops/domain/facts.py) and classes re-derived by the same pure `classify`
(evalops/services/reads/definitions.py). `tests/services/test_read_gate_inputs.py` holds both
loaders to the same bytes on every stored decision of a registry built to exercise them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

from evalops.domain.calibration_validity import validity_digest
from evalops.domain.canonical import plain_number
from evalops.domain.digests import suite_digest
from evalops.domain.facts import StoredTaskHead
from evalops.domain.gate_compact import EVALUATOR_COMPACT, CompactTrials
from evalops.domain.gate_documents import (
    AnyGateInputs,
    CompactTaskInput,
    GateInputs,
    RefusedWaiverRequest,
    SyncRef,
    TaskHead,
    TaskInput,
    TrialInput,
    WaiverFactDocument,
)
from evalops.domain.labels import strictest_labels
from evalops.domain.policy_rules import read_policy
from evalops.domain.separation import NO_SELF_WAIVER, IngestAct
from evalops.domain.timestamps import format_timestamp
from evalops.errors import InputError
from evalops.services.gate.input_parts import (
    GateRequest,
    SelfWaiver,
    baseline_block,
    choose_execution,
    efficiency_counts,
    ignored_as,
    is_refused_waiver_act,
    must_rederive,
    refused_by_authority,
    self_review_sql,
    self_reviews_of,
    self_waivers_of,
    trajectory_counts,
    without_self_waivers,
)
from evalops.services.gate.policy_choice import PolicyKind, choose_policy
from evalops.services.reads.authority import authority_at
from evalops.services.reads.definitions import StoredDefinitions, rederive
from evalops.store.in_force_sql import IN_FORCE_RUN_UPTO_SQL
from evalops.store.reader import Reader, has_table, timestamp

# kind -> (table, its id column), as `queries.DEFINITION_TABLES`
_DEFINITION_TABLES = {
    "task": ("task_revision", "task_id"),
    "execution_profile": ("execution_profile", "execution_id"),
    "grader_set": ("grader_set", "grader_set_id"),
    "suite": ("suite", "suite_id"),
    "suite_policy": ("policy", "policy_id"),
    "gate_policy": ("policy", "policy_id"),
    "authority": ("policy", "policy_id"),
}
_TRIAL_COLUMNS = (
    "id, trial_id, parent_trial_id, classification, score, gating_score, trajectory, "
    "efficiency, task_id, task_digest, grader_set_digest, ingest_batch_id"
)
# A trial row voided at or before the cutoff (`queries.voided`): left out from the void on.
# A database at a schema before voids (checked before its upgrade) has none.
_VOIDED = (
    "EXISTS (SELECT 1 FROM voided_trial v WHERE v.trial_row_id = trial.id "
    "AND v.audit_seq <= :cutoff)"
)
_NO_VOIDS = "(1 = 0)"


class Member(NamedTuple):
    """A suite member's current pin (`queries.Member`, the parts a decision reads)."""

    task_id: str
    task_digest: str
    grader_set_digest: str
    task_revision_id: int | None


class Revision(NamedTuple):
    """A registered task revision as the label ratchet reads it."""

    id: int
    revision: int
    document: str


class GateReads:
    """The registry as it stood at one audit seq (`cutoff`), read through `reader`."""

    def __init__(self, reader: Reader, cutoff: int) -> None:
        self.reader = reader
        self.cutoff = cutoff
        self._run_read = False
        self._run: dict[str, Any] | None = None
        self.voided = _VOIDED if has_table(reader, "voided_trial") else _NO_VOIDS

    def rows(self, sql: str, **params: Any) -> list[dict[str, Any]]:
        return self.reader.rows(sql, {"cutoff": self.cutoff, **params})

    def first(self, sql: str, **params: Any) -> dict[str, Any] | None:
        return self.reader.first(sql, {"cutoff": self.cutoff, **params})

    # ------------------------------------------------------------- definitions in force

    def sync_run(self) -> dict[str, Any] | None:
        """The sync whose commit's definitions are in force (`queries.latest_sync_run`)."""
        if not self._run_read:
            self._run = self.first(IN_FORCE_RUN_UPTO_SQL)
            self._run_read = True
        return self._run

    def in_force_rows(self, kind: str) -> dict[str, dict[str, Any]]:
        """id -> the first row registered with the digest in force (`queries.in_force_rows`)."""
        run = self.sync_run()
        if run is None:
            return {}
        table, id_column = _DEFINITION_TABLES[kind]
        only_kind = " WHERE t.kind = :kind" if table == "policy" else ""
        out: dict[str, dict[str, Any]] = {}
        for row in self.rows(
            f"SELECT t.* FROM {table} t JOIN sync_in_force f ON f.sync_run_id = :run "
            f"AND f.kind = :kind AND f.definition_id = t.{id_column} "
            f"AND f.document_digest = t.document_digest{only_kind} ORDER BY t.id",
            run=run["id"],
            kind=kind,
        ):
            out.setdefault(row[id_column], row)
        return dict(sorted(out.items()))

    def in_force_row(self, kind: str, definition_id: str) -> dict[str, Any] | None:
        """The registered row of `kind` `definition_id` in force (`queries.in_force_row`)."""
        run = self.sync_run()
        if run is None:
            return None
        forced = self.first(
            "SELECT document_digest FROM sync_in_force WHERE sync_run_id = :run "
            "AND kind = :kind AND definition_id = :id",
            run=run["id"],
            kind=kind,
            id=definition_id,
        )
        if forced is None:
            return None
        table, id_column = _DEFINITION_TABLES[kind]
        only_kind = " AND kind = :kind" if table == "policy" else ""
        return self.first(
            f"SELECT * FROM {table} WHERE {id_column} = :id AND document_digest = :digest"
            f"{only_kind} ORDER BY id LIMIT 1",
            id=definition_id,
            digest=forced["document_digest"],
            kind=kind,
        )

    def members(self, suite_id: str) -> list[Member]:
        """The append-only membership rows folded into each current pin (`queries.members`)."""
        state: dict[str, Member | None] = {}
        for row in self.rows(
            "SELECT task_id, action, task_digest, grader_set_digest, task_revision_id "
            "FROM suite_membership WHERE suite_id = :suite AND audit_seq <= :cutoff ORDER BY id",
            suite=suite_id,
        ):
            if row["action"] == "retired":
                if row["task_id"] in state:
                    state[row["task_id"]] = None
            else:
                state[row["task_id"]] = Member(
                    row["task_id"],
                    row["task_digest"],
                    row["grader_set_digest"],
                    row["task_revision_id"],
                )
        return sorted((m for m in state.values() if m is not None), key=lambda m: m.task_id)

    # ------------------------------------------------------------------------ policies

    def governing_policy(self, suite: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        """(digest, document) of the gate policy a stored decision applied, under the rule
        of its day (`gate_inputs.applied_gate_policy` with `rebuild`)."""
        kind: PolicyKind = "gate_policy"
        named = json.loads(suite["document"]).get(kind)
        named_row = self.in_force_row(kind, named) if named is not None else None
        rows = {} if named is not None else self.in_force_rows(kind)
        row = choose_policy(
            kind,
            (suite["suite_id"], suite["file_path"]),
            (named, named_row),
            {policy_id: (r["id"], r) for policy_id, r in rows.items()},
            newest_when_several=True,
        )
        return row["policy_digest"], json.loads(row["document"])

    def registered_gate_policy(self, ref: str) -> tuple[str, dict[str, Any]]:
        """A registered gate policy named by `--policy` (`policies.registered_gate_policy`)."""
        if not ref.startswith("sha256:"):
            forced = self.in_force_row("gate_policy", ref)
            if forced is not None:
                return forced["policy_digest"], json.loads(forced["document"])
        column = "policy_digest" if ref.startswith("sha256:") else "policy_id"
        row = self.first(
            f"SELECT policy_digest, document FROM policy WHERE kind = 'gate_policy' "
            f"AND {column} = :ref AND audit_seq <= :cutoff ORDER BY id DESC LIMIT 1",
            ref=ref,
        )
        if row is None:
            raise InputError(
                f"no registered gate policy {ref!r} (give a registered id or digest, or a "
                "policy file with --dry-run)",
                field="--policy",
            )
        return row["policy_digest"], json.loads(row["document"])

    # ---------------------------------------------------------------------- executions

    def execution_for(
        self, build: str, execution_id: str | None, *, field: str = "--build"
    ) -> dict[str, Any]:
        """The execution profile in force whose `system_build` is `build`
        (`gate_inputs.execution_for`, with its messages)."""
        forced = {k: _Attrs(v) for k, v in self.in_force_rows("execution_profile").items()}
        return choose_execution(forced, build, execution_id, field).row

    def older_counts(self, execution: Mapping[str, Any]) -> dict[str, int]:
        """Per task: trials under an older digest of the same execution profile."""
        older = [
            r["execution_digest"]
            for r in self.rows(
                "SELECT execution_digest FROM execution_profile WHERE execution_id = :id "
                "AND audit_seq <= :cutoff",
                id=execution["execution_id"],
            )
            if r["execution_digest"] != execution["execution_digest"]
        ]
        if not older:
            return {}
        marks = ", ".join(f":d{i}" for i in range(len(older)))
        rows = self.rows(
            f"SELECT task_id, COUNT(*) AS n FROM trial WHERE execution_digest IN ({marks}) "
            f"AND audit_seq <= :cutoff AND NOT {self.voided} GROUP BY task_id",
            **{f"d{i}": d for i, d in enumerate(older)},
        )
        return {r["task_id"]: int(r["n"]) for r in rows}

    # -------------------------------------------------------------------------- trials

    def build_trials(self, execution_digest: str) -> Iterator[dict[str, Any]]:
        """The build's trials up to the cutoff, by row id, streamed."""
        return self.reader.each(
            f"SELECT {_TRIAL_COLUMNS}, {self.voided} AS voided FROM trial "
            "WHERE execution_digest = :execution AND audit_seq <= :cutoff ORDER BY id",
            {"execution": execution_digest, "cutoff": self.cutoff},
        )

    def chained_ids(self, execution_digest: str) -> set[str]:
        """Every trial id a trial of the build names as its parent."""
        return {
            str(r["parent_trial_id"])
            for r in self.rows(
                "SELECT DISTINCT parent_trial_id FROM trial WHERE execution_digest = :execution "
                "AND parent_trial_id IS NOT NULL AND audit_seq <= :cutoff "
                f"AND NOT {self.voided}",
                execution=execution_digest,
            )
        }

    # ------------------------------------------------------------------------- waivers

    def waiver_facts(self, build: str) -> list[WaiverFactDocument]:
        out: list[WaiverFactDocument] = []
        for w in self.rows(
            "SELECT id, waiver_id, task_id, suite_id, build, states, granted_at, expires_at "
            "FROM waiver WHERE build = :build AND audit_seq <= :cutoff ORDER BY id",
            build=build,
        ):
            revoked = self.first(
                "SELECT revoked_at FROM waiver_revocation WHERE waiver_row_id = :id "
                "AND audit_seq <= :cutoff ORDER BY revoked_at LIMIT 1",
                id=w["id"],
            )
            out.append(
                {
                    "waiver_id": w["waiver_id"],
                    "task_id": w["task_id"],
                    "suite_id": w["suite_id"],
                    "build": w["build"],
                    "states": json.loads(w["states"]),
                    "granted_at": format_timestamp(timestamp(w["granted_at"])),
                    "expires_at": format_timestamp(timestamp(w["expires_at"])),
                    "revoked_at": (
                        format_timestamp(timestamp(revoked["revoked_at"])) if revoked else None
                    ),
                }
            )
        return out

    def self_reviews(self) -> frozenset[int]:
        """The audit seqs of the reviews the authority in force at the cutoff refuses by
        `no_self_review` (`self_reviews` of evalops/services/gate/inputs.py)."""
        found = authority_at(self.reader, self.cutoff)
        rules = getattr(found[0], "separation_of_duties", ()) if found else ()
        # Without the rule nothing is read: a registry of a schema before signed acts
        # (`db upgrade`'s checks rebuild its decisions too) has no signed_act table.
        if not rules or not has_table(self.reader, "signed_act"):
            return frozenset()
        return self_reviews_of(rules, self.rows(self_review_sql(self.cutoff)))

    def self_waivers(self, build: str) -> dict[str, SelfWaiver]:
        """The build's waivers the authority in force at the cutoff refuses by
        `no_self_waiver` (`self_waivers` of evalops/services/gate/inputs.py)."""
        found = authority_at(self.reader, self.cutoff)
        rules = getattr(found[0], "separation_of_duties", ()) if found else ()
        if NO_SELF_WAIVER not in rules:
            return {}
        ingests = [
            IngestAct(
                int(a["audit_seq"]),
                frozenset(json.loads(a["scope"]).get("builds", [])),
                frozenset(s["principal"] for s in json.loads(a["signers"])),
            )
            for a in self.rows(
                "SELECT audit_seq, scope, signers FROM signed_act WHERE kind IN "
                "('trials.ingest', 'trials.import') AND audit_seq <= :cutoff ORDER BY audit_seq"
            )
        ]
        waivers = [
            (
                str(w["waiver_id"]),
                int(w["audit_seq"]),
                str(w["build"]),
                frozenset(s["principal"] for s in json.loads(w["signers"])),
            )
            for w in self.rows(
                "SELECT w.waiver_id, a.audit_seq, w.build, a.signers FROM waiver w "
                "JOIN signed_act a ON a.audit_seq = w.audit_seq AND a.kind = 'waiver.grant' "
                "WHERE w.build = :build AND w.audit_seq <= :cutoff ORDER BY w.id",
                build=build,
            )
        ]
        return self_waivers_of(rules, waivers, ingests)

    def refused_waivers(self, build: str, suite_id: str) -> list[RefusedWaiverRequest]:
        out: list[RefusedWaiverRequest] = []
        for row in self.rows(
            "SELECT seq, kind, at, payload FROM audit_event WHERE kind IN "
            "('waiver.refused', 'authority.refused') AND seq <= :cutoff ORDER BY seq"
        ):
            payload = json.loads(row["payload"])
            if row["kind"] == "authority.refused":
                if is_refused_waiver_act(payload, build, suite_id):
                    at = format_timestamp(timestamp(row["at"]))
                    out.append(refused_by_authority(row["seq"], at, payload))
                continue
            request = payload.get("request", {})
            if request.get("build") == build and request.get("suite_id") == suite_id:
                out.append(
                    {
                        "seq": row["seq"],
                        "task_id": request.get("task_id"),
                        "states": request.get("states"),
                        "rules": [r["rule"] for r in payload.get("refusals", [])],
                        "at": format_timestamp(timestamp(row["at"])),
                    }
                )
        return out

    def latest_pass_build(self, suite_id: str, candidate: str) -> str | None:
        row = self.first(
            "SELECT build FROM gate_decision WHERE suite_id = :suite AND decision = 'pass' "
            "AND build != :candidate AND audit_seq <= :cutoff ORDER BY id DESC LIMIT 1",
            suite=suite_id,
            candidate=candidate,
        )
        return None if row is None else str(row["build"])


class _Attrs:
    """A row read as attributes (what the shared message helpers read)."""

    def __init__(self, row: dict[str, Any]) -> None:
        self.row = row
        self.system_build = row["system_build"]


class StaleClassifications:
    """`definitions.StaleClassifications` over a reader: which trials' stored classes must be
    re-derived (an appended reconciliation or review, or a calibration state other than the
    one recorded at ingest)."""

    def __init__(self, reads: GateReads, defs: StoredDefinitions) -> None:
        self.reads = reads
        self.defs = defs
        self.batches: dict[int, dict[str, str] | None] = {}
        self.current: dict[str, str] = {}

    def _batch(self, batch_id: int) -> dict[str, str] | None:
        if batch_id not in self.batches:
            row = self.reads.reader.first(
                "SELECT e.payload FROM audit_event e JOIN ingest_batch b ON b.audit_seq = e.seq "
                "WHERE b.id = :batch",
                {"batch": batch_id},
            )
            self.batches[batch_id] = json.loads(row["payload"]).get("validity") if row else None
        return self.batches[batch_id]

    def needed(self, trial_id: str, grader_set_digest: str, batch_id: int) -> bool:
        reconciliations, reviews = self.defs.appended(trial_id)

        def current() -> str:
            if grader_set_digest not in self.current:
                validity = self.defs.validity(grader_set_digest)
                self.current[grader_set_digest] = validity_digest(validity)
            return self.current[grader_set_digest]

        appended = bool(reconciliations or reviews)
        recorded = None if appended else self._batch(batch_id)
        return must_rederive(appended, recorded, grader_set_digest, current)


class _Loader:
    """One decision's task inputs: the members' heads, then each build's trials."""

    def __init__(self, reads: GateReads, defs: StoredDefinitions, members: list[Member]) -> None:
        self.reads = reads
        self.defs = defs
        self.members = members
        self.stale = StaleClassifications(reads, defs)
        self.heads = self._heads()

    def _heads(self) -> dict[str, TaskHead]:
        """`gate_inputs.member_heads`: ratcheted labels and the pinned revision's plan."""
        wanted = {m.task_id for m in self.members}
        revisions: dict[str, list[Revision]] = {}
        pinned: dict[tuple[str, str], Revision] = {}
        for row in self.reads.rows(
            "SELECT id, task_id, task_digest, revision, document FROM task_revision "
            "WHERE audit_seq <= :cutoff ORDER BY id"
        ):
            if row["task_id"] in wanted:
                rev = Revision(row["id"], row["revision"], row["document"])
                revisions.setdefault(row["task_id"], []).append(rev)
                pinned[(row["task_id"], row["task_digest"])] = rev
        views: dict[int, StoredTaskHead] = {}

        def head_of(rev: Revision) -> StoredTaskHead:
            if rev.id not in views:
                views[rev.id] = StoredTaskHead.of(json.loads(rev.document))
            return views[rev.id]

        out: dict[str, TaskHead] = {}
        for m in self.members:
            found = pinned.get((m.task_id, m.task_digest))
            if found is None:
                raise InputError(
                    f"suite member {m.task_id} pins task_digest {m.task_digest}, which is not "
                    "registered: the database was changed outside evalops (run `evalops verify`)"
                )
            risk, protects = strictest_labels(
                revisions.get(m.task_id, []), m.task_revision_id, head_of
            )
            plan = head_of(found).contract.trials
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
        return out

    def trial_input(self, row: Mapping[str, Any]) -> TrialInput:
        """`services/gate/inputs.py` `trial_input`: the stored class, unless current evidence says
        otherwise."""
        efficiency, misses = efficiency_counts(row["efficiency"])
        out: TrialInput = {
            "trial_id": row["trial_id"],
            "parent_trial_id": row["parent_trial_id"],
            "classification": row["classification"],
            "score": plain_number(row["score"]),
            "gating_score": plain_number(row["gating_score"]),
            "trajectory": trajectory_counts(row["trajectory"]),
            "efficiency": efficiency,
            "fixture_misses": 0 if misses is None else misses,
        }
        stale = self.stale.needed(row["trial_id"], row["grader_set_digest"], row["ingest_batch_id"])
        if misses is None or stale:
            record = self.reads.reader.scalar(
                "SELECT record FROM trial WHERE id = :id", {"id": row["id"]}
            )
            if misses is None:
                out["fixture_misses"] = json.loads(record).get("fixture_misses", 0)
            if stale:
                current = rederive(self.defs, {**row, "record": record})
                if current is not None:
                    out["classification"] = current.primary
                    out["score"] = plain_number(current.score)
                    out["gating_score"] = plain_number(current.gating_score)
        return out

    def _scan(
        self, execution: Mapping[str, Any], keep: Callable[[str, TrialInput], None]
    ) -> dict[str, dict[str, int]]:
        """Each pinned trial of the build to `keep`, the rest counted as ignored."""
        older = self.reads.older_counts(execution)
        by_id = {m.task_id: m for m in self.members}
        ignored: dict[str, dict[str, int]] = {
            m.task_id: (
                {"older_execution_digest": older[m.task_id]} if older.get(m.task_id) else {}
            )
            for m in self.members
        }
        for row in self.reads.build_trials(execution["execution_digest"]):
            m = by_id.get(row["task_id"])
            if m is None:
                continue
            key = ignored_as(
                row["task_digest"],
                row["grader_set_digest"],
                m.task_digest,
                m.grader_set_digest,
                row["voided"],
            )
            if key is None:
                keep(m.task_id, self.trial_input(row))
                continue
            ignored[m.task_id][key] = ignored[m.task_id].get(key, 0) + 1
        return ignored

    def listed(self, execution: Mapping[str, Any]) -> list[TaskInput]:
        """`gate_inputs.task_inputs`: every trial listed."""
        trials: dict[str, list[TrialInput]] = {m.task_id: [] for m in self.members}
        ignored = self._scan(execution, lambda task_id, t: trials[task_id].append(t))
        return [
            {
                **self.heads[m.task_id],
                "trials": trials[m.task_id],
                "ignoredTrials": dict(sorted(ignored[m.task_id].items())),
            }
            for m in self.members
        ]

    def compact(self, execution: Mapping[str, Any]) -> list[CompactTaskInput]:
        """`gate_inputs.compact_task_inputs`: per-task summaries (evaluator 4)."""
        chained = self.reads.chained_ids(execution["execution_digest"])
        summaries = {m.task_id: CompactTrials(chained) for m in self.members}
        ignored = self._scan(execution, lambda task_id, t: summaries[task_id].add(t))
        return [
            {
                **self.heads[m.task_id],
                **summaries.pop(m.task_id).document(),
                "ignoredTrials": dict(sorted(ignored[m.task_id].items())),
            }
            for m in self.members
        ]


def rebuilt_inputs(reader: Reader, request: GateRequest, evaluator: int) -> AnyGateInputs:
    """A stored decision's inputs, rebuilt as the registry stood at its cutoff under the
    rules it was made with (`gate_inputs.build_inputs(..., rebuild=True)`)."""
    reads = GateReads(reader, request.cutoff)
    suite = reads.in_force_row("suite", request.suite_id)
    if suite is None:
        raise InputError(
            f"suite {request.suite_id!r} was not in force at the decision's cutoff",
            field="--suite",
        )
    if request.policy is not None:
        policy_digest, policy_doc = reads.registered_gate_policy(request.policy)
    else:
        policy_digest, policy_doc = reads.governing_policy(suite)
    rule = read_policy(policy_doc).critical_regressions
    execution = reads.execution_for(request.build, request.execution_id)
    members = reads.members(request.suite_id)
    # The calibration rule changed with evaluator 3 (the pass class is never exempt).
    defs = StoredDefinitions(reader, request.cutoff, pass_class_exempt=evaluator < 3)
    defs.refused_reviews = reads.self_reviews()
    loader = _Loader(reads, defs, members)
    load: Callable[[Mapping[str, Any]], Any] = (
        loader.compact if evaluator >= EVALUATOR_COMPACT else loader.listed
    )
    run = reads.sync_run()
    sync: SyncRef | None = (
        None if run is None else {"sync_run": run["id"], "git_commit": run["git_commit"]}
    )
    pins = [
        {
            "task_id": m.task_id,
            "task_digest": m.task_digest,
            "grader_set_digest": m.grader_set_digest,
        }
        for m in members
    ]
    waivers, refused = without_self_waivers(
        reads.waiver_facts(request.build),
        reads.refused_waivers(request.build, request.suite_id),
        reads.self_waivers(request.build),
        request.suite_id,
    )
    inputs: GateInputs[Any] = {
        "evaluator": evaluator,
        "request": request.as_dict(),
        "build": request.build,
        "suite": {
            "id": request.suite_id,
            "kind": suite["kind"],
            "suite_digest": suite_digest(request.suite_id, suite["kind"], pins),
        },
        "sync": sync,
        "execution_id": execution["execution_id"],
        "execution_digest": execution["execution_digest"],
        "policy": policy_doc,
        "policy_digest": policy_digest,
        "evaluated_at": request.at,
        "tasks": load(execution),
        "waivers": waivers,
        "refused_waivers": refused,
        "baseline": None,
    }

    def load_build(build: str) -> tuple[str, Any]:
        base = reads.execution_for(build, None, field="--baseline")
        return base["execution_digest"], load(base)

    inputs["baseline"] = baseline_block(
        request,
        rule,
        lambda: reads.latest_pass_build(request.suite_id, request.build),
        load_build,
    )
    return inputs
