"""Starter files: `evalops init --registry DIR` and `evalops new KIND ID`.

Each template is commented YAML that `evalops validate` accepts as written; the comments say
what every field means and what to change. Nothing here overwrites a file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from evalops.errors import InputError

# `evalops new KIND`: the kinds and the registry folder each is written to.
KINDS: dict[str, str] = {
    "task": "tasks",
    "grader-set": "graders",
    "execution": "executions",
    "suite": "suites",
    "policy": "policies",
    "authority": "policies",
}
POLICY_KINDS = ("gate", "suite")

_ID = re.compile(r"[a-z0-9][a-z0-9._/-]{0,127}")


@dataclass(frozen=True)
class Written:
    """One starter file: where it went and what it defines."""

    path: Path
    kind: str
    id: str


def check_id(value: str) -> str:
    if not _ID.fullmatch(value):
        raise InputError(
            f"invalid id {value!r}: use [a-z0-9][a-z0-9._/-]{{0,127}} (e.g. refund-once)",
            field="id",
        )
    return value


def file_name(definition_id: str) -> str:
    """`regression/core` -> `regression-core.yaml`: one file per id, no sub-folders."""
    return definition_id.replace("/", "-") + ".yaml"


def task_yaml(task_id: str, grader_set: str) -> str:
    return f"""\
# An eval task: one reproducible situation, graded the same way every time.
# Only spec_schema_version, contract and fixtures make up its task_digest; id, revision and
# meta are labels. Bump `revision` whenever contract or fixtures change.
spec_schema_version: eval-task/v1
id: {task_id}
revision: 1
meta:                                # labels: not in task_digest
  title: Describe what the agent must get right
  owner: you@example.com             # review_owner: who reviews this task
  risk: noncritical_regression       # critical | noncritical_regression | quality_signal
  protects: []                       # permissions, secrets, human_approval, external_effect,
                                     #   required_evidence; non-empty => risk: critical
  failure_owner: your-team           # who fixes a failure (needed for regression suites)
  # invariant: "state the rule this task guards" # or confirm an incident it reproduces
contract:
  goal: describe_the_goal
  environment:
    clock: "2026-01-01T00:00:00Z"    # a frozen clock: RFC 3339 with an offset
    network_policy: deny             # deny | allowlist | live
  success_state:                     # each key is checked by a blocking outcome grader
    task_done: true
  forbidden_effects:                 # each item is checked by a blocking hard-constraint grader
    - act_more_than_once
  # expected:                        # optional: a trajectory expectation (see docs/formats.md)
  # trials: {{count: 5, k: 3, passRule: all}}   # optional: repeated trials (default count 1)
fixtures:                            # in task_digest: canned tool responses
  onMiss: fail                       # fail closed: a call without a fixture fails the trial
  toolResponses: []                  # - {{tool: "crm:lookup", args: {{...}}, response: {{...}}}}
grader_set: {grader_set}
"""


def grader_set_yaml(grader_set_id: str) -> str:
    return f"""\
# A grader set: versioned graders in layers. grader_set_digest is this file without meta.
spec_schema_version: grader-set/v1
id: {grader_set_id}
version: 1                           # bump when any grader changes
graders:
  - id: outcome-check
    version: 1
    layer: outcome                   # outcome: may produce task_pass, task_fail
    type: deterministic              # deterministic | model | human
    produces: [task_pass, task_fail]
    blocking: true
    covers: [task_done]              # success_state keys this grader checks
  - id: effect-guard
    version: 1
    layer: hard_constraint           # hard_constraint: may produce pass, hard_constraint_fail
    type: deterministic
    produces: [pass, hard_constraint_fail]
    blocking: true
    covers: [act_more_than_once]     # forbidden_effects this grader checks
  # A model grader blocks only with a valid calibration; it needs `model:` and
  # `calibration_requirements:` (see docs/formats.md, "Grader sets").
"""


def execution_yaml(execution_id: str) -> str:
    # The build name defaults to the profile's id: two starters never share a build.
    return f"""\
# An execution profile: what is being evaluated. execution_digest is this file without id
# and meta; the gate finds a build's trials through system_build.
spec_schema_version: execution-profile/v1
id: {execution_id}
meta: {{title: Describe this build}}   # labels: not in execution_digest
system_build: {execution_id:<20} # the build name `evalops gate check --build` takes
model:
  provider: example-provider
  name: example-model
  # api_version: "2026-10-01"
  # sampling: {{temperature: 0.2, top_p: 1}}
# Optional, part of the digest when present: prompt, runner, tools, retry_policy, concurrency.
"""


STARTER_POLICIES = {"gate-policy/v1": "release-gate", "suite-policy/v1": "default-suite-policy"}


def suite_yaml(suite_id: str, gate_policy: str, suite_policy: str) -> str:
    return f"""\
# A suite declaration. Membership is not in this file: tasks enter with `evalops promote`
# and leave with `evalops retire`.
spec_schema_version: suite/v1
id: {suite_id}
kind: regression                     # incident_corpus | capability | estimation | regression
owner: you@example.com
description: Invariants that guard every release.
# The policies that govern this suite (part of its digest): the gate decides its releases
# under gate_policy, promotion and retirement follow suite_policy.
gate_policy: {gate_policy}
suite_policy: {suite_policy}
# kind: estimation also needs sampling_frame, population, weights and update_policy.
"""


def _policy_for_new_suite(root: Path, schema: str) -> str:
    """The policy a new suite names: the registry's only policy of that kind, else the
    starter's id when the registry has it (or none yet), else the first by id."""
    found = sorted(_existing_ids(root, "policies", schema))
    if len(found) == 1:
        return found[0]
    starter = STARTER_POLICIES[schema]
    return starter if starter in found or not found else found[0]


def gate_policy_yaml(policy_id: str) -> str:
    return f"""\
# Release-gate rules: pass / hold / block by risk and failure class. policy_digest is this
# whole file. decision_precedence may be omitted: it is always the canonical order.
spec_schema_version: gate-policy/v1
id: {policy_id}
unknown_or_missing_evidence: {{rule: block_until_resolved}}   # -> hold
hard_constraints: {{rule: any_confirmed_failure_blocks}}     # -> block
critical_regressions:
  rule: no_unapproved_regression_against_baseline
  baseline: optional                 # optional | required
  method: mcnemar                    # mcnemar | sign-test | paired-t | paired-bootstrap
  alpha: 0.05
reruns:
  preserve_all_trials: true
  # class -> attempts (the first included) a rerun chain may reach and still stand in
  max_attempts_by_class: {{infrastructure_invalid: 2}}
waivers:
  allowed_layers: [quality_signal, noncritical_regression]
  # forbidden_states defaults to the five states no waiver may ever cover; add more if needed.
  require: [owner, reason, build_scope, expires_at]
  max_duration_days: 30
"""


def suite_policy_yaml(policy_id: str) -> str:
    return f"""\
# What a task must show to enter each kind of suite, to be replaced and to be removed.
# Each rule is complete in itself; a rule left out refuses what it governs.
spec_schema_version: suite-policy/v1
id: {policy_id}
incident_corpus: {{accepts: [raw_failure, unresolved_failure], executable_required: false}}
capability_entry:
  requires: [reproducible_fixture, task_digest, minimum_grader_coverage, review_owner]
regression_entry:
  requires: [reproducible_fixture, task_digest, minimum_grader_coverage, review_owner,
             confirmed_failure_or_invariant, stable_success_state, calibrated_graders,
             versioned_fixture, grader_set_digest, failure_owner]
replacement: {{requires: [coverage_mapping, review]}}
removal: {{requires: [obsolete_reason, risk_owner_approval]}}
"""


_AUTHORITY_BODY = """\
# Who may sign which act (docs/authority.md). Once synced, waivers (grant and revoke) are
# refused (exit 5) unless signed with `--sign-with KEY` or `--act FILE --signature FILE`
# by a principal holding the role for the task's suite.
spec_schema_version: authority/v1
id: authority
principals:
  # Each principal: an id, an email for people, and OpenSSH public keys (the .pub line).
  - id: {principal}
    email: {principal}@example.com
    keys: ["{key}"]
roles:
  # Each grant: a principal, optionally scoped by suite and task id globs.
  risk_owner: [{{principal: {principal}}}]        # waiver grant / revoke, retire
  reviewer: [{{principal: {principal}}}]          # review resolve
  calibrator: [{{principal: {principal}}}]        # calibration record
  policy_owner: [{{principal: {principal}}}]      # changes to policies, suites, authority
  ingester: [{{principal: {principal}}}]          # trials ingest / import
thresholds: {{}}                                  # act -> distinct signers needed (default 1)
separation_of_duties: [no_self_waiver, no_self_review]
max_act_age_days: 7
"""

#: `init --registry` writes the authority commented out under a name sync ignores: an
#: authority needs real keys, and one in force refuses every unsigned act.
AUTHORITY_EXAMPLE = "\n".join(
    [
        "# DISABLED STARTER: evalops reads only *.yaml, *.yml and *.json files, so this one is",
        "# ignored. To put an authority in force: `evalops new authority --principal ID --key",
        "# ~/.ssh/id_ed25519.pub` (or fill this in, uncomment it and rename it authority.yaml),",
        "# then commit and `evalops sync`. See docs/authority.md.",
        "#",
        *(
            "# " + line if line else "#"
            for line in _AUTHORITY_BODY.format(
                principal="alice", key="ssh-ed25519 AAAA... alice@laptop"
            ).splitlines()
        ),
        "",
    ]
)


def authority_yaml(principal: str, key: str) -> str:
    return _AUTHORITY_BODY.format(principal=principal, key=key.replace('"', ""))


def new_authority(root: Path, principal: str, key_file: Path) -> list[Written]:
    """policies/authority.yaml naming one principal, its key and every role."""
    from evalops.domain.sshsig import MalformedKey, parse_public_key

    check_id(principal)
    try:
        key = parse_public_key(key_file.read_text(encoding="utf-8")).openssh
    except OSError as exc:
        raise InputError(
            f"cannot read the key: {exc.strerror}", str(key_file), field="--key"
        ) from None
    except MalformedKey as exc:
        raise InputError(
            f"not an OpenSSH public key: {exc}", str(key_file), field="--key"
        ) from None
    return [_write(root, "authority", "authority", authority_yaml(principal, key), "policies")]


def write_authority_example(root: Path) -> Path | None:
    """The disabled starter (None when an authority file or the example already exists)."""
    path = root / "policies" / "authority.yaml.example"
    if path.exists() or (root / "policies" / "authority.yaml").exists():
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(AUTHORITY_EXAMPLE, encoding="utf-8")
    return path


def _write(root: Path, kind: str, definition_id: str, text: str, folder: str) -> Written:
    path = root / folder / file_name(definition_id)
    if path.exists():
        raise InputError("file already exists: nothing was written", str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return Written(path, kind, definition_id)


_TOP_ID = re.compile(r"""^id:\s*["']?([^"'\s#]+)""", re.M)
_JSON_ID = re.compile(r'"id"\s*:\s*"([^"]+)"')


def _existing_ids(root: Path, folder: str, schema: str | None = None) -> set[str]:
    """The ids the files of `root/folder` define (read loosely: validate reads them
    strictly), so a starter never duplicates an id kept under another file name; with
    `schema`, only files that declare that `spec_schema_version`."""
    ids: set[str] = set()
    if not (root / folder).is_dir():
        return ids
    for path in (root / folder).rglob("*"):
        if path.suffix not in (".yaml", ".yml", ".json") or not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if schema is not None and schema not in text:
            continue
        found = (_JSON_ID if path.suffix == ".json" else _TOP_ID).search(text)
        ids.add(found.group(1) if found else path.stem)
    return ids


def new_definition(
    root: Path, kind: str, definition_id: str, *, grader_set: str | None = None,
    policy_kind: str = "gate",
) -> list[Written]:  # fmt: skip
    """Write the starter file of one definition into registry `root`; a new task whose
    grader set has no file yet gets a starter grader set too, so the registry validates."""
    if kind not in KINDS:
        raise InputError(f"unknown kind {kind!r}: one of {', '.join(KINDS)}", field="kind")
    check_id(definition_id)
    if kind == "task":
        graders = check_id(grader_set or f"{definition_id}-graders")
        written = [_write(root, "task", definition_id, task_yaml(definition_id, graders), "tasks")]
        if graders not in _existing_ids(root, "graders"):
            written.append(_write(root, "grader_set", graders, grader_set_yaml(graders), "graders"))
        return written
    if kind == "grader-set":
        return [
            _write(root, "grader_set", definition_id, grader_set_yaml(definition_id), "graders")
        ]
    if kind == "execution":
        return [
            _write(root, "execution_profile", definition_id, execution_yaml(definition_id),
                   "executions")
        ]  # fmt: skip
    if kind == "suite":
        text = suite_yaml(
            definition_id,
            _policy_for_new_suite(root, "gate-policy/v1"),
            _policy_for_new_suite(root, "suite-policy/v1"),
        )
        return [_write(root, "suite", definition_id, text, "suites")]
    if kind == "authority":
        raise InputError("an authority needs a principal and a key: use new_authority")
    if policy_kind not in POLICY_KINDS:
        raise InputError(f"unknown policy kind {policy_kind!r}: gate or suite", field="--kind")
    if policy_kind == "gate":
        return [
            _write(root, "gate_policy", definition_id, gate_policy_yaml(definition_id), "policies")
        ]
    return [
        _write(root, "suite_policy", definition_id, suite_policy_yaml(definition_id), "policies")
    ]


def starter_registry(root: Path) -> list[Written]:
    """A complete starter registry in `root`: a task with its grader set, an execution
    profile, a regression suite, a gate policy and a suite policy. Refuses (exit 2, nothing
    written) when `root` already holds any of those files."""
    plan = [
        ("tasks", "first-task"),
        ("graders", "first-task-graders"),
        ("executions", "dev-build"),
        ("suites", "regression/main"),
        ("policies", "release-gate"),
        ("policies", "default-suite-policy"),
    ]
    taken = [root / folder / file_name(i) for folder, i in plan]
    clash = [str(p) for p in taken if p.exists()]
    if clash:
        # Most often a clone of a registry that already exists: it needs a database only.
        raise InputError(
            "file already exists: nothing was written; for a registry that exists (a fresh "
            "clone), plain `evalops init` creates just the database (or `evalops init "
            f"--registry {root} --database-only`)",
            clash[0],
        )
    present = sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else []
    if present:
        # One's own registry, the starters renamed or deleted: writing them again would add
        # a second gate policy and a second suite policy beside its own.
        raise InputError(
            f"{root} already holds a registry ({len(present)} files, such as {present[0]}): "
            f"nothing was written; init --registry would write "
            f"{', '.join(str(p) for p in taken)}. For a registry that exists, plain "
            f"`evalops init` creates just the database (or `evalops init --registry {root} "
            "--database-only`)",
            str(root),
            field="--registry",
        )
    written = new_definition(root, "task", "first-task")
    written += new_definition(root, "execution", "dev-build")
    written += new_definition(root, "suite", "regression/main")
    written += new_definition(root, "policy", "release-gate", policy_kind="gate")
    written += new_definition(root, "policy", "default-suite-policy", policy_kind="suite")
    return written
