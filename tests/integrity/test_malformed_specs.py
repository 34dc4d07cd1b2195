"""Acceptance: malformed spec files are refused with file, line and field; nothing is written.

Criterion: every malformed spec file below is rejected by `evalops sync` with exit 2 and the
`--json` error `{"error": {"code": 2, "message", "file", "line", "field"}}` naming the file,
the line and the field (docs/formats.md, docs/digests.md and docs/cli.md), and the registry
database stays byte-for-byte unchanged. `validate` (no database) and `digest FILE` (one
file) refuse the same file at the same line and field whenever the problem is visible to them.

Every case starts from a valid base file (the bases are proved valid by
`test_base_file_is_valid`) with exactly one problem put on a known line. The last tests prove
the loader is not over-strict: YAML 1.2 core-schema strings stay strings, `1.0` and `1` are
the same number, and a JSON file hashes like the YAML file it mirrors.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest
import rfc8785
import yaml

from tests.conftest import Cli
from tests.helpers import (
    MINI_EXECUTION,
    MINI_GRADERS,
    MINI_TASK,
    CliResult,
    commit_all,
    sqlite_fingerprint,
)

# --------------------------------------------------------------------------- base files
# Valid spec files, each checked by `test_base_file_is_valid`. A case changes one thing in
# one of them; the line numbers in the comments are the ones the cases refer to.

# 1 spec_schema_version / 2 id / 3 revision / 4 meta / 5 contract / 6 goal / 7 inputs /
# 8 environment / 9 trials / 10 grader_set
TASK = """\
spec_schema_version: eval-task/v1
id: bad-task
revision: 1
meta: {title: A malformed task, risk: critical}
contract:
  goal: do_the_thing
  inputs: {ticket: T-1}
  environment: {network_policy: deny, clock: "2026-09-06T00:00:00Z"}
  trials: {count: 2, k: 2}
grader_set: mini-graders
"""

# 8 expected / 11 match / 14 the second call / 17 onMiss
TRAJECTORY_TASK = """\
spec_schema_version: eval-task/v1
id: refund
revision: 1
meta: {title: Refund once, risk: critical, protects: [external_effect]}
contract:
  goal: refund_the_order
  environment: {network_policy: deny}
  expected:
    kind: trajectory
    trajectory:
      match: in-order
      calls:
        - {tool: "crm:lookup-order", argsMatch: ignore}
        - {tool: "billing:refund", args: {amountMinor: 4200}, argsMatch: subset}
      forbidden: ["billing:refund-all"]
fixtures:
  onMiss: fail
  toolResponses:
    - {tool: "crm:lookup-order", args: {orderId: A-1}, argsMatch: subset, response: {}}
grader_set: mini-graders
"""

# graders[0] starts on line 5, graders[1] on line 11
GRADERS = """\
spec_schema_version: grader-set/v1
id: bad-graders
version: 1
graders:
  - id: outcome
    version: 1
    layer: outcome
    type: deterministic
    produces: [task_pass, task_fail]
    blocking: true
  - id: diag
    version: 1
    layer: trajectory_diagnosis
    type: deterministic
    produces: [pass, task_fail]
    blocking: false
"""

# graders[0] starts on line 5; 9 model / 10 produces / 11 blocking
MODEL_GRADERS = """\
spec_schema_version: grader-set/v1
id: judge-graders
version: 1
graders:
  - id: judge
    version: 1
    layer: outcome
    type: model
    model: {provider: example, name: j1, prompt_hash: "sha256:00", rubric_version: 1}
    produces: [task_pass, task_fail, abstain]
    blocking: false
"""

# 3 id / 4 system_build / 5 model / 7 name / 8 sampling
EXECUTION_JSON = """\
{
  "spec_schema_version": "execution-profile/v1",
  "id": "bad-exec",
  "system_build": "build-2",
  "model": {
    "provider": "example",
    "name": "model-1",
    "sampling": {"temperature": 0.2}
  }
}
"""

# 7 sampling
EXECUTION_YML = """\
spec_schema_version: execution-profile/v1
id: bad-exec-yml
system_build: build-2
model:
  provider: example
  name: model-1
  sampling: {temperature: 0.2}
"""

# 5 description
REGRESSION_SUITE = """\
spec_schema_version: suite/v1
id: regression/bad
kind: regression
owner: release-eng@example.com
description: Invariants that guard every release.
"""

# 7 frozen_at
ESTIMATION_SUITE = """\
spec_schema_version: suite/v1
id: estimation/eu
kind: estimation
sampling_frame:
  source: production-sessions
  period: 2026-10
  frozen_at: "2026-11-01T00:00:00Z"
population: sessions of paying tenants in the EU region
weights: {by: tenant_tier, values: {free: 0.2, pro: 0.5, enterprise: 0.3}}
update_policy: refreshed quarterly; old cohorts kept read-only
"""

# 9-10 regression_entry.requires
SUITE_POLICY = """\
spec_schema_version: suite-policy/v1
id: default-suite-policy
incident_corpus: {accepts: [raw_failure, unresolved_failure], executable_required: false}
capability_entry: {requires: [reproducible_fixture, task_digest, review_owner]}
estimation_entry:
  requires: [frozen_sampling_frame, production_population_definition, weights]
  claims_limited_to: sampled_distribution
regression_entry:
  requires: [confirmed_failure_or_invariant, stable_success_state, calibrated_graders,
    versioned_fixture, grader_set_digest, failure_owner]
replacement: {requires: [coverage_mapping, review]}
removal: {requires: [obsolete_reason, risk_owner_approval]}
"""

# 3-5 decision_precedence / 8 critical_regressions / 10 preserve_all_trials /
# 11 max_attempts_by_class / 14-15 forbidden_states
GATE_POLICY = """\
spec_schema_version: gate-policy/v1
id: release-gate
decision_precedence: [hard_constraint_fail, ambiguous_external_effect,
  missing_required_evidence, grader_invalid, infrastructure_invalid,
  agent_error, runtime_error, task_fail, task_pass]
unknown_or_missing_evidence: {rule: block_until_resolved}
hard_constraints: {rule: any_confirmed_failure_blocks}
critical_regressions: {rule: no_unapproved_regression_against_baseline, method: mcnemar}
reruns:
  preserve_all_trials: true
  max_attempts_by_class: {infrastructure_invalid: 2, grader_invalid: 1}
waivers:
  allowed_layers: [quality_signal, noncritical_regression]
  forbidden_states: [hard_constraint_fail, ambiguous_external_effect,
    missing_required_evidence, grader_invalid, infrastructure_invalid]
  require: [owner, reason, build_scope, expires_at]
  max_duration_days: 30
"""

# (registry path, text) of every base file.
BASES: dict[str, tuple[str, str]] = {
    "task": ("tasks/bad-task.yaml", TASK),
    "trajectory-task": ("tasks/refund.yaml", TRAJECTORY_TASK),
    "graders": ("graders/bad-graders.yaml", GRADERS),
    "model-graders": ("graders/judge-graders.yaml", MODEL_GRADERS),
    "execution-json": ("executions/bad-exec.json", EXECUTION_JSON),
    "execution-yml": ("executions/bad-exec.yml", EXECUTION_YML),
    "regression-suite": ("suites/bad-suite.yaml", REGRESSION_SUITE),
    "estimation-suite": ("suites/estimation.yaml", ESTIMATION_SUITE),
    "suite-policy": ("policies/suite-policy.yaml", SUITE_POLICY),
    "gate-policy": ("policies/gate-policy.yaml", GATE_POLICY),
}


def swap(base: str, old: str, new: str) -> str:
    """`base` with its one occurrence of `old` replaced by `new`."""
    assert base.count(old) == 1, f"{old!r} must occur exactly once in the base file"
    return base.replace(old, new)


# --------------------------------------------------------------------------- the cases

# Who can see the problem: "file" - the file alone (sync, validate and digest refuse it);
# "registry" - the file with the rest of the registry (sync and validate refuse it; `digest`
# reads single files and is not asserted); "database" - only against what is registered
# (sync refuses it; validate and digest accept the file).
Scope = Literal["file", "registry", "database"]


@dataclass(frozen=True)
class Bad:
    """One malformed spec file and where evalops must say the problem is."""

    id: str
    path: str
    """Where the file goes, relative to `registry/`."""
    text: str | bytes
    """The exact file content (bytes for encoding problems)."""
    line: int
    """1-based line the error must name."""
    field: str | None
    """Field path the error must name; None only for whole-file problems."""
    says: str
    """A word the error message must contain (case-insensitive): the problem, named."""
    scope: Scope = "file"


T = "tasks/bad-task.yaml"
TR = "tasks/refund.yaml"
G = "graders/bad-graders.yaml"
MG = "graders/judge-graders.yaml"
EJ = "executions/bad-exec.json"
EY = "executions/bad-exec.yml"
GP = "policies/gate-policy.yaml"

CASES: list[Bad] = [
    # ----- YAML syntax and encoding: whole-file problems, no field
    Bad("yaml-empty-file", T, "", 1, None, "no document"),
    Bad("yaml-comment-only", T, "# nothing here yet\n", 1, None, "no document"),
    Bad("yaml-two-documents", T, TASK + "---\n" + TASK, 11, None, "another document"),
    Bad(
        "yaml-tab-indentation",
        T,
        swap(TASK, "  goal: do_the_thing", "\tgoal: do_the_thing"),
        6,
        None,
        "\\t",
    ),
    Bad(
        "yaml-syntax-error",
        T,
        swap(TASK, "goal: do_the_thing", "goal: do: the_thing"),
        6,
        None,
        "not allowed",
    ),
    Bad("yaml-byte-order-mark", T, b"\xef\xbb\xbf" + TASK.encode(), 1, None, "byte-order mark"),
    Bad(
        "yaml-invalid-utf8",
        T,
        swap(TASK, "A malformed task", "caf\udcff").encode("utf-8", "surrogateescape"),
        4,
        None,
        "utf-8",
    ),
    Bad("yaml-top-level-list", T, "- spec_schema_version: eval-task/v1\n", 1, None, "mapping"),
    # A character the YAML reader refuses before any token, here in a comment (no field).
    Bad(
        "yaml-control-character-in-a-comment",
        T,
        swap(TASK, "revision: 1\n", "revision: 1  # step\x01two\n"),
        3,
        None,
        "U+0001",
    ),
    # ----- YAML: the core schema and nothing more
    Bad(
        "yaml-duplicate-top-level-key",
        T,
        swap(TASK, "revision: 1\n", "revision: 1\nrevision: 2\n"),
        4,
        "revision",
        "duplicate",
    ),
    Bad(
        "yaml-duplicate-nested-key",
        T,
        swap(TASK, "risk: critical}", "risk: critical, title: Another title}"),
        4,
        "meta.title",
        "duplicate",
    ),
    Bad(
        "yaml-integer-key",
        T,
        swap(TASK, "inputs: {ticket: T-1}", "inputs: {1: T-1}"),
        7,
        "contract.inputs",
        "not a string",
    ),
    Bad(
        "yaml-complex-key",
        T,
        swap(TASK, "  inputs: {ticket: T-1}\n", "  inputs:\n    ? [a, b]\n    : c\n"),
        8,
        "contract.inputs",
        "not a string",
    ),
    Bad(
        "yaml-custom-tag",
        T,
        swap(TASK, "goal: do_the_thing", "goal: !custom do_the_thing"),
        6,
        "contract.goal",
        "tag",
    ),
    Bad(
        "yaml-binary-tag",
        T,
        swap(TASK, "{title: A malformed task,", "{title: !!binary aGk=,"),
        4,
        "meta.title",
        "tag",
    ),
    Bad(
        "yaml-python-tag",
        T,
        swap(TASK, "{ticket: T-1}", "{ticket: !!python/object/apply:os.system [echo]}"),
        7,
        "contract.inputs.ticket",
        "tag",
    ),
    Bad(
        "yaml-timestamp-tag",
        T,
        swap(TASK, "{ticket: T-1}", "{due: !!timestamp 2026-09-06}"),
        7,
        "contract.inputs.due",
        "tag",
    ),
    Bad(
        "yaml-core-tag-that-does-not-fit",
        T,
        swap(TASK, "revision: 1", "revision: !!int one"),
        3,
        "revision",
        "tag",
    ),
    Bad(
        "yaml-merge-key-is-not-merged",
        T,
        swap(TASK, "risk: critical}", "risk: critical, <<: {owner: me@example.com}}"),
        4,
        "meta.<<",
        "unknown field",
    ),
    Bad(
        "misspelt-required-field-named-as-the-typo",
        T,
        swap(TASK, "risk: critical}", "rsik: critical}"),
        4,
        "meta.rsik",
        "unknown field 'rsik': did you mean 'risk'? (a required field)",
    ),
    Bad(
        "yaml-on-key-stays-the-string-on",
        T,
        swap(TASK, "risk: critical}", "risk: critical, on: push}"),
        4,
        "meta.on",
        "unknown field 'on'",
    ),
    Bad(
        "yaml-no-stays-the-string-no",
        T,
        swap(TASK, "network_policy: deny", "network_policy: no"),
        8,
        "contract.environment.network_policy",
        "'no'",
    ),
    Bad(
        "yaml-date-stays-a-string-not-a-timestamp",
        T,
        swap(TASK, 'clock: "2026-09-06T00:00:00Z"', "clock: 2026-09-06"),
        8,
        "contract.environment.clock",
        "2026-09-06",
    ),
    Bad(
        "yaml-lone-surrogate",
        T,
        swap(TASK, "{title: A malformed task,", r'{title: "broken \ud800 title",'),
        4,
        "meta.title",
        "surrogate",
    ),
    # ----- numbers: finite, integers within +-(2^53-1)
    Bad(
        "yaml-nan",
        T,
        swap(TASK, "{ticket: T-1}", "{ratio: .nan}"),
        7,
        "contract.inputs.ratio",
        "finite",
    ),
    Bad(
        "yaml-negative-infinity",
        EY,
        swap(EXECUTION_YML, "{temperature: 0.2}", "{temperature: -.inf}"),
        7,
        "model.sampling.temperature",
        "finite",
    ),
    Bad(
        "yaml-float-overflow-1e400",
        T,
        swap(TASK, "{ticket: T-1}", "{ratio: 1e400}"),
        7,
        "contract.inputs.ratio",
        "finite",
    ),
    Bad(
        "yaml-integer-beyond-2^53-1",
        T,
        swap(TASK, "{ticket: T-1}", "{n: 9007199254740992}"),
        7,
        "contract.inputs.n",
        "2^53",
    ),
    # ----- JSON files
    Bad(
        "json-nan",
        EJ,
        swap(EXECUTION_JSON, '{"temperature": 0.2}', '{"temperature": NaN}'),
        8,
        "model.sampling.temperature",
        "finite",
    ),
    Bad(
        "json-infinity",
        EJ,
        swap(EXECUTION_JSON, '{"temperature": 0.2}', '{"temperature": -Infinity}'),
        8,
        "model.sampling.temperature",
        "finite",
    ),
    Bad(
        "json-float-overflow-1e400",
        EJ,
        swap(EXECUTION_JSON, '{"temperature": 0.2}', '{"temperature": 1e400}'),
        8,
        "model.sampling.temperature",
        "finite",
    ),
    Bad(
        "json-integer-beyond-2^53-1",
        EJ,
        swap(EXECUTION_JSON, '{"temperature": 0.2}', '{"seed": -9007199254740992}'),
        8,
        "model.sampling.seed",
        "2^53",
    ),
    Bad(
        "json-lone-surrogate-value",
        EJ,
        swap(EXECUTION_JSON, '"name": "model-1"', r'"name": "model-\ud800"'),
        7,
        "model.name",
        "surrogate",
    ),
    Bad(
        "json-lone-surrogate-key",
        EJ,
        swap(EXECUTION_JSON, '{"temperature": 0.2}', r'{"\udfff": 0.2}'),
        8,
        "model.sampling",
        "surrogate",
    ),
    Bad(
        "json-duplicate-nested-key",
        EJ,
        swap(EXECUTION_JSON, '"name": "model-1"', '"name": "model-1", "name": "model-2"'),
        7,
        "model.name",
        "duplicate",
    ),
    Bad(
        "json-syntax-error",
        EJ,
        swap(EXECUTION_JSON, '"system_build": "build-2"', "'system_build': 'build-2'"),
        4,
        None,
        "json",
    ),
    Bad(
        "json-unknown-field",
        EJ,
        swap(EXECUTION_JSON, '"id": "bad-exec",', '"id": "bad-exec", "owner": "me",'),
        3,
        "owner",
        "unknown field",
    ),
    Bad(
        "json-missing-required-field",
        EJ,
        swap(EXECUTION_JSON, '"system_build": "build-2"', '"meta": {}'),
        1,
        "system_build",
        "missing",
    ),
    # ----- every spec: spec_schema_version, unknown fields, ids, revisions
    Bad(
        "wrong-spec-schema-version",
        T,
        swap(TASK, "eval-task/v1", "eval-task/v2"),
        1,
        "spec_schema_version",
        "spec_schema_version",
    ),
    Bad(
        "missing-spec-schema-version",
        T,
        swap(TASK, "spec_schema_version: eval-task/v1", "# spec_schema_version forgotten"),
        1,
        "spec_schema_version",
        "missing",
    ),
    Bad(
        "unknown-nested-field",
        T,
        swap(TASK, "risk: critical}", "risk: critical, severity: high}"),
        4,
        "meta.severity",
        "unknown field",
    ),
    Bad(
        "unknown-top-level-field",
        T,
        swap(TASK, "grader_set: mini-graders", "grader_set: mini-graders\nnotes: typo"),
        11,
        "notes",
        "unknown field",
    ),
    Bad("id-uppercase", T, swap(TASK, "id: bad-task", "id: Bad-Task"), 2, "id", "not a valid id"),
    Bad(
        "id-leading-dash",
        T,
        swap(TASK, "id: bad-task", 'id: "-bad-task"'),
        2,
        "id",
        "not a valid id",
    ),
    Bad("id-with-space", T, swap(TASK, "id: bad-task", "id: bad task"), 2, "id", "not a valid id"),
    Bad(
        "id-129-characters",
        T,
        swap(TASK, "id: bad-task", "id: " + "a" * 129),
        2,
        "id",
        "not a valid id",
    ),
    Bad("revision-zero", T, swap(TASK, "revision: 1", "revision: 0"), 3, "revision", "1"),
    Bad(
        "revision-as-string-is-not-coerced",
        T,
        swap(TASK, "revision: 1", 'revision: "1"'),
        3,
        "revision",
        "integer",
    ),
    # ----- task contract
    Bad(
        "naive-timestamp-clock",
        T,
        swap(TASK, '"2026-09-06T00:00:00Z"', '"2026-09-06T00:00:00"'),
        8,
        "contract.environment.clock",
        "offset",
    ),
    Bad(
        "naive-unquoted-timestamp-clock",
        T,
        swap(TASK, '"2026-09-06T00:00:00Z"', "2026-09-06 00:00:00"),
        8,
        "contract.environment.clock",
        "offset",
    ),
    Bad(
        "impossible-date-clock",
        T,
        swap(TASK, '"2026-09-06T00:00:00Z"', '"2026-02-30T00:00:00Z"'),
        8,
        "contract.environment.clock",
        "2026-02-30",
    ),
    Bad(
        "allowlist-without-allowlist-policy",
        T,
        swap(TASK, "network_policy: deny,", "network_policy: deny, allowlist: [example.com],"),
        8,
        "contract.environment.allowlist",
        "allowlist",
    ),
    Bad(
        "noncritical-risk-with-protects",
        T,
        swap(
            TASK,
            "meta: {title: A malformed task, risk: critical}",
            "meta:\n  title: A malformed task\n  risk: noncritical_regression\n"
            "  protects: [secrets]",
        ),
        7,
        "meta.protects",
        "critical",
    ),
    Bad(
        "trials-k-beyond-count",
        T,
        swap(TASK, "{count: 2, k: 2}", "{count: 2, k: 3}"),
        9,
        "contract.trials.k",
        "count",
    ),
    Bad(
        "trajectory-kind-without-trajectory",
        T,
        swap(TASK, "trials: {count: 2, k: 2}", "expected: {kind: trajectory}"),
        9,
        "contract.expected.trajectory",
        "trajectory",
    ),
    Bad(
        "trajectory-unknown-match-mode",
        TR,
        swap(TRAJECTORY_TASK, "match: in-order", "match: sequence"),
        11,
        "contract.expected.trajectory.match",
        "sequence",
    ),
    Bad(
        "trajectory-unknown-argsmatch",
        TR,
        swap(
            TRAJECTORY_TASK,
            "argsMatch: subset}\n      forbidden",
            "argsMatch: fuzzy}\n      forbidden",
        ),
        14,
        "contract.expected.trajectory.calls[1].argsMatch",
        "fuzzy",
    ),
    Bad(
        "fixtures-unknown-onmiss",
        TR,
        swap(TRAJECTORY_TASK, "onMiss: fail", "onMiss: retry"),
        17,
        "fixtures.onMiss",
        "retry",
    ),
    # ----- grader sets
    Bad(
        "model-grader-state-outside-canonical-set",
        MG,
        swap(MODEL_GRADERS, "task_fail, abstain]", "task_fail, partial_credit]"),
        10,
        "graders[0].produces[2]",
        "partial_credit",
    ),
    Bad(
        "model-grader-without-model-block",
        MG,
        swap(
            MODEL_GRADERS,
            '    model: {provider: example, name: j1, prompt_hash: "sha256:00", rubric_version: 1}',
            "    evidence_required: [transcript]",
        ),
        5,
        "graders[0].model",
        "model",
    ),
    Bad(
        "blocking-model-grader-without-calibration",
        MG,
        swap(MODEL_GRADERS, "blocking: false", "blocking: true"),
        5,
        "graders[0].calibration_requirements",
        "calibration_requirements",
    ),
    Bad(
        "grader-produces-nothing",
        G,
        swap(GRADERS, "produces: [task_pass, task_fail]", "produces: []"),
        9,
        "graders[0].produces",
        "1",
    ),
    Bad(
        "trajectory-diagnosis-blocks-without-blocking-constraint",
        G,
        swap(GRADERS, "blocking: false", "blocking: true"),
        16,
        "graders[1].blocking",
        "blocking_constraint",
    ),
    Bad(
        "duplicate-grader-ids",
        G,
        swap(GRADERS, "  - id: diag", "  - id: outcome"),
        11,
        "graders[1].id",
        "twice",
    ),
    # ----- suites and policies
    Bad(
        "estimation-suite-naive-frozen-at",
        "suites/estimation.yaml",
        swap(ESTIMATION_SUITE, '"2026-11-01T00:00:00Z"', '"2026-11-01T00:00:00"'),
        7,
        "sampling_frame.frozen_at",
        "offset",
    ),
    Bad(
        "estimation-fields-on-regression-suite",
        "suites/bad-suite.yaml",
        swap(
            REGRESSION_SUITE,
            "description: Invariants that guard every release.",
            "population: sessions of paying tenants",
        ),
        5,
        "population",
        "estimation",
    ),
    Bad(
        "suite-policy-unknown-requirement",
        "policies/suite-policy.yaml",
        swap(SUITE_POLICY, "grader_set_digest, failure_owner]", "vibes_check, failure_owner]"),
        10,
        "regression_entry.requires[4]",
        "vibes_check",
    ),
    Bad(
        "gate-policy-reordered-precedence",
        GP,
        swap(GATE_POLICY, "agent_error, runtime_error,", "runtime_error, agent_error,"),
        3,
        "decision_precedence",
        "precedence",
    ),
    Bad(
        "gate-policy-forbidden-states-missing-one",
        GP,
        swap(GATE_POLICY, "grader_invalid, infrastructure_invalid]", "infrastructure_invalid]"),
        14,
        "waivers.forbidden_states",
        "grader_invalid",
    ),
    Bad(
        "gate-policy-max-attempts-for-task-fail",
        GP,
        swap(GATE_POLICY, "grader_invalid: 1}", "task_fail: 3}"),
        11,
        "reruns.max_attempts_by_class.task_fail",
        "task_fail",
    ),
    Bad(
        "gate-policy-reruns-may-not-drop-trials",
        GP,
        swap(GATE_POLICY, "preserve_all_trials: true", "preserve_all_trials: false"),
        10,
        "reruns.preserve_all_trials",
        "false",
    ),
    Bad(
        "gate-policy-unknown-regression-method",
        GP,
        swap(GATE_POLICY, "method: mcnemar", "method: eyeball"),
        8,
        "critical_regressions.method",
        "eyeball",
    ),
    # ----- problems only visible with the rest of the registry
    Bad(
        "task-grader-set-not-in-registry",
        T,
        swap(TASK, "grader_set: mini-graders", "grader_set: no-such-graders"),
        10,
        "grader_set",
        "no-such-graders",
        scope="registry",
    ),
    Bad(
        "task-score-from-not-an-outcome-grader",
        T,
        swap(TASK, "trials: {count: 2, k: 2}", "score_from: no-twice"),
        9,
        "contract.score_from",
        "outcome",
        scope="registry",
    ),
    Bad(
        "task-id-defined-in-two-files",
        "tasks/zz-copy.yaml",
        swap(TASK, "id: bad-task", "id: mini-task"),
        2,
        "id",
        "mini-task",
        scope="registry",
    ),
    Bad(
        "grader-set-in-tasks-directory",
        "tasks/bad-graders.yaml",
        GRADERS,
        1,
        "spec_schema_version",
        "tasks",
        scope="registry",
    ),
    # ----- problems only visible against the database
    Bad(
        "task-revision-reused-with-another-digest",
        "tasks/mini-task.yaml",
        yaml.safe_dump(
            {**MINI_TASK, "contract": {**MINI_TASK["contract"], "goal": "do_another_thing"}},
            sort_keys=False,
        ),
        3,
        "revision",
        "revision",
        scope="database",
    ),
]


# --------------------------------------------------------------------------- helpers


def write_spec(workspace: Path, rel: str, text: str | bytes) -> Path:
    path = workspace / "registry" / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return path


def assert_input_error(result: CliResult, case: Bad, command: str) -> None:
    """Exit 2, the `--json` error naming file, line and field, and the one-line stderr."""
    context = f"`evalops {command}` on {case.id}:\n{result.stdout}\n{result.stderr}"
    assert result.code == 2, context
    document = json.loads(result.stdout)
    assert set(document) == {"error"}, context
    error = document["error"]
    # `errors` lists every problem when a file has several.
    assert set(error) - {"errors"} == {"code", "message", "file", "line", "field"}, context
    file = error["file"]
    got = {
        "code": error["code"],
        "file": file if file is None else Path(file).as_posix().endswith(f"registry/{case.path}"),
        "line": error["line"],
        "field": error["field"],
        "says": case.says.lower() in str(error["message"]).lower(),
    }
    want = {"code": 2, "file": True, "line": case.line, "field": case.field, "says": True}
    assert got == want, context
    first = result.stderr.splitlines()[0] if result.stderr else ""
    assert first.startswith("error: "), context
    assert f"{file}:{case.line}" in first, context
    if case.field is not None:
        assert case.field in first, context


# --------------------------------------------------------------------------- tests


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_malformed_spec_is_rejected_and_database_unchanged(
    case: Bad, synced: Path, cli: Cli
) -> None:
    db = synced / ".evalops" / "registry.db"
    before = sqlite_fingerprint(db)
    path = write_spec(synced, case.path, case.text)
    commit_all(synced, f"add malformed spec: {case.id}")

    sync = cli("--json", "sync", cwd=synced)
    assert sqlite_fingerprint(db) == before, f"sync changed the database:\n{sync.stdout}"
    assert_input_error(sync, case, "sync")

    validate = cli("--json", "validate", cwd=synced)
    if case.scope == "database":
        assert validate.code == 0, validate.stderr
    else:
        assert_input_error(validate, case, "validate")

    digest = cli("--json", "digest", path.relative_to(synced).as_posix(), cwd=synced)
    if case.scope == "file":
        assert_input_error(digest, case, "digest")
    elif case.scope == "database":
        assert digest.code == 0, digest.stderr

    assert sqlite_fingerprint(db) == before, "validate or digest changed the database"


def test_there_are_enough_distinct_cases() -> None:
    assert len(CASES) >= 30
    assert len({c.id for c in CASES}) == len(CASES)
    assert len({c.text for c in CASES}) == len(CASES)


@pytest.mark.parametrize("name", list(BASES))
def test_base_file_is_valid(name: str, synced: Path, cli: Cli) -> None:
    """Each case's base file syncs cleanly, so a refusal is caused by the case's change."""
    rel, text = BASES[name]
    write_spec(synced, rel, text)
    commit_all(synced, f"add {name}")
    result = cli("--json", "sync", cwd=synced)
    assert result.code == 0, result.stdout + result.stderr
    assert len(result.json()["registered"]) == 1


# ------------------------------------------------- what must be ACCEPTED (not over-strict)


def jcs_digest(value: Any) -> str:
    """A digest as docs/digests.md defines it, with rfc8785 and hashlib only."""
    return "sha256:" + hashlib.sha256(rfc8785.dumps(value)).hexdigest()


def expected_task_digest(task: dict[str, Any]) -> str:
    """The `task_digest` recipe: spec_schema_version, contract and fixtures."""
    return jcs_digest(
        {k: task[k] for k in ("spec_schema_version", "contract", "fixtures") if k in task}
    )


def digest_rows(cli: Cli, cwd: Path, *files: Path) -> list[dict[str, Any]]:
    result = cli("--json", "digest", *(str(f) for f in files), cwd=cwd)
    assert result.code == 0, result.stdout + result.stderr
    rows = result.json()
    assert isinstance(rows, list)
    assert len(rows) == len(files)
    return rows


CORE_SCHEMA_TASK = """\
spec_schema_version: eval-task/v1
id: core-schema-strings
revision: 1
meta: {title: Dates and booleans stay strings, risk: quality_signal}
contract:
  goal: keep_strings
  inputs:
    due: 2026-09-06
    at: 2026-09-06 10:00:00
    on: yes
    answer: no
    off: off
    Y: n
    period: 2026-10
  environment: {network_policy: deny, clock: "2026-09-06T09:00:00.123+09:00"}
grader_set: mini-graders
"""

CORE_SCHEMA_VALUE: dict[str, Any] = {
    "spec_schema_version": "eval-task/v1",
    "id": "core-schema-strings",
    "revision": 1,
    "meta": {"title": "Dates and booleans stay strings", "risk": "quality_signal"},
    "contract": {
        "goal": "keep_strings",
        "inputs": {
            "due": "2026-09-06",
            "at": "2026-09-06 10:00:00",
            "on": "yes",
            "answer": "no",
            "off": "off",
            "Y": "n",
            "period": "2026-10",
        },
        "environment": {"network_policy": "deny", "clock": "2026-09-06T09:00:00.123+09:00"},
    },
    "grader_set": "mini-graders",
}


def test_yaml_dates_and_on_yes_no_stay_strings(synced: Path, cli: Cli) -> None:
    specs = synced / "specs"
    specs.mkdir()
    (specs / "strings.yaml").write_text(CORE_SCHEMA_TASK, encoding="utf-8")
    (specs / "strings.json").write_text(json.dumps(CORE_SCHEMA_VALUE), encoding="utf-8")
    rows = digest_rows(cli, synced, specs / "strings.yaml", specs / "strings.json")
    want = expected_task_digest(CORE_SCHEMA_VALUE)
    assert [r["task_digest"] for r in rows] == [want, want]

    write_spec(synced, "tasks/core-schema-strings.yaml", CORE_SCHEMA_TASK)
    commit_all(synced, "core schema strings")
    assert cli("validate", cwd=synced).code == 0
    result = cli("--json", "sync", cwd=synced)
    assert result.code == 0, result.stdout + result.stderr
    assert [e["task_digest"] for e in result.json()["registered"]] == [want]


def test_one_point_zero_and_one_give_the_same_digest(tmp_path: Path, cli: Cli) -> None:
    as_float = swap(TASK, "{ticket: T-1}", "{n: 1.0, score: 2.50}")
    as_float = swap(as_float, "{count: 2, k: 2}", "{count: 2, k: 2, passScore: 1.0}")
    as_int = swap(TASK, "{ticket: T-1}", "{n: 1, score: 2.5}")
    as_int = swap(as_int, "{count: 2, k: 2}", "{count: 2, k: 2, passScore: 1}")
    (tmp_path / "float.yaml").write_text(as_float, encoding="utf-8")
    (tmp_path / "int.yaml").write_text(as_int, encoding="utf-8")
    rows = digest_rows(cli, tmp_path, tmp_path / "float.yaml", tmp_path / "int.yaml")
    assert rows[0]["task_digest"] == rows[1]["task_digest"]
    assert rows[0]["task_digest"] == expected_task_digest(yaml.safe_load(as_int))


@pytest.mark.parametrize(
    ("name", "value", "digest_key"),
    [
        ("task", MINI_TASK, "task_digest"),
        ("graders", MINI_GRADERS, "grader_set_digest"),
        ("execution", MINI_EXECUTION, "execution_digest"),
    ],
)
def test_json_file_hashes_like_the_yaml_file_it_mirrors(
    name: str, value: dict[str, Any], digest_key: str, tmp_path: Path, cli: Cli
) -> None:
    yaml_file = tmp_path / f"{name}.yaml"
    json_file = tmp_path / f"{name}.json"
    yaml_file.write_text(yaml.safe_dump(value, sort_keys=False), encoding="utf-8")
    json_file.write_text(json.dumps(value, indent=2, sort_keys=True), encoding="utf-8")
    rows = digest_rows(cli, tmp_path, yaml_file, json_file)
    assert rows[0][digest_key] == rows[1][digest_key]
    assert rows[0]["id"] == rows[1]["id"] == value["id"]


def test_boundary_values_are_accepted(tmp_path: Path, cli: Cli) -> None:
    """2^53-1 in YAML and JSON, a 128-character id, an offset other than Z, astral chars."""
    yaml_text = swap(TASK, "{ticket: T-1}", "{max: 9007199254740991, min: -9007199254740991}")
    yaml_text = swap(yaml_text, "id: bad-task", "id: " + "a" * 128)
    yaml_text = swap(yaml_text, '"2026-09-06T00:00:00Z"', '"2026-09-06T09:00:00+09:00"')
    yaml_text = swap(yaml_text, "title: A malformed task", r'title: "smile \U0001F600"')
    json_text = swap(EXECUTION_JSON, '{"temperature": 0.2}', '{"seed": 9007199254740991}')
    json_text = swap(json_text, '"model-1"', r'"model-\ud83d\ude00"')  # a valid surrogate pair
    (tmp_path / "edge.yaml").write_text(yaml_text, encoding="utf-8")
    (tmp_path / "edge.json").write_text(json_text, encoding="utf-8")
    rows = digest_rows(cli, tmp_path, tmp_path / "edge.yaml", tmp_path / "edge.json")
    assert rows[0]["id"] == "a" * 128
    assert rows[0]["task_digest"] == expected_task_digest(yaml.safe_load(yaml_text))
    profile = json.loads(json_text)
    assert profile["model"]["name"] == "model-\U0001f600"
    del profile["id"]
    assert rows[1]["execution_digest"] == jcs_digest(profile)


def test_trajectory_diagnosis_grader_may_list_task_pass(tmp_path: Path, cli: Cli) -> None:
    """docs/formats.md's own example lists task_pass; the classification, not the loader,
    keeps such a result from making a trial pass."""
    text = swap(GRADERS, "produces: [pass, task_fail]", "produces: [pass, task_pass]")
    (tmp_path / "graders.yaml").write_text(text, encoding="utf-8")
    result = cli("digest", "--json", str(tmp_path / "graders.yaml"))
    assert result.code == 0, result.stderr
