"""Each suite names the policies that govern it, and every path applies the same one.

A release manager's registry holds `release-gate`; someone adds a looser `zzz-lax` and
syncs. Before suites named their policies the newest registered one silently decided every
release, the terminal never said which, and side paths (waivers, the import preview, trial
listings, the audit report's calibrations) each picked their own. Each test here meets one
of those as a user or an attacker would, on SQLite and PostgreSQL where the store is read.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import rfc8785
import yaml

from tests.conftest import Cli, pg_holding
from tests.helpers import EXAMPLE_REGISTRY, CliResult, commit_all, write_yaml
from tests.services.test_gate import (
    CALIBRATION_DISPUTED,
    CRIT,
    MODEL,
    NONCRIT,
    base_workspace,
    copy_workspace,
)

ENGINES = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
GATE_POLICY: dict[str, Any] = yaml.safe_load(
    (EXAMPLE_REGISTRY / "policies" / "gate-policy.yaml").read_text(encoding="utf-8")
)
SUITE_POLICY: dict[str, Any] = yaml.safe_load(
    (EXAMPLE_REGISTRY / "policies" / "suite-policy.yaml").read_text(encoding="utf-8")
)


def digest_of(document: dict[str, Any]) -> str:
    """A policy digest by its published recipe (sha256 of the JCS of the whole file)."""
    return "sha256:" + hashlib.sha256(rfc8785.dumps(document)).hexdigest()


RELEASE_GATE = {"id": "release-gate", "revision": None, "digest": digest_of(GATE_POLICY)}


@dataclass
class Reg:
    """A registry work tree and the database options that reach its store."""

    root: Path
    db: tuple[str, ...]

    def run(self, cli: Cli, *args: str) -> CliResult:
        return cli(*self.db, *args, cwd=self.root)

    def sync(self, cli: Cli, message: str) -> None:
        commit_all(self.root, message)
        done = self.run(cli, "sync")
        assert done.code == 0, done.stdout + done.stderr

    def decisions(self, cli: Cli) -> int:
        listed = self.run(cli, "gate", "list", "--all", "--json")
        assert listed.code == 0, listed.stdout
        return len(listed.json())


def on_engine(param: str, root: Path, cli: Cli, request: pytest.FixtureRequest) -> Reg:
    """`root` as is (SQLite), or its rows copied into a fresh PostgreSQL database."""
    if param == "sqlite":
        return Reg(root, ())
    url: str = request.getfixturevalue("pg_url")
    pg_holding(url, root)
    return Reg(root, ("--db", url))


@pytest.fixture(params=ENGINES)
def reg(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path,
    cli: Cli,
) -> Reg:  # fmt: skip
    """The gate tests' registry (release-gate alone in force, its suites naming none)."""
    root = copy_workspace(base_workspace(tmp_path_factory), tmp_path / "ws")
    return on_engine(request.param, root, cli, request)


def add_policy(
    root: Path, base: dict[str, Any], policy_id: str, edit: Callable[[dict[str, Any]], None]
) -> dict[str, Any]:
    doc = json.loads(json.dumps(base))
    doc["id"] = policy_id
    edit(doc)
    write_yaml(root / "registry" / "policies" / f"{policy_id}.yaml", doc)
    return doc


def looser(doc: dict[str, Any]) -> None:
    doc["waivers"]["max_duration_days"] = 365
    doc["reruns"]["max_attempts_by_class"] = {"infrastructure_invalid": 9, "grader_invalid": 9}


def add_lax_gate(root: Path) -> dict[str, Any]:
    return add_policy(root, GATE_POLICY, "zzz-lax", looser)


def suite_path(root: Path, suite_id: str) -> Path:
    return root / "registry" / "suites" / f"{suite_id.replace('/', '-')}.yaml"


def name_policies(root: Path, suite_id: str, **fields: str) -> None:
    path = suite_path(root, suite_id)
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    doc.update(fields)
    write_yaml(path, doc)


def check(reg: Reg, cli: Cli, build: str, suite: str, *extra: str) -> CliResult:
    return reg.run(cli, "gate", "check", "--build", build, "--suite", suite, *extra, "--json")


# ------------------------------------------------------- item 1: the suite names its policy


def test_a_second_gate_policy_never_silently_decides_a_suite_that_names_none(
    reg: Reg, cli: Cli
) -> None:
    add_lax_gate(reg.root)
    reg.sync(cli, "an experimental, looser gate policy")
    before = reg.decisions(cli)
    for extra in ((), ("--dry-run",)):
        refused = check(reg, cli, "build-pass", CRIT, *extra)
        assert refused.code == 2, refused.stdout
        error = refused.json()["error"]
        assert error["message"].startswith(
            "suite regression/crit names no gate_policy and 2 are in force: release-gate, zzz-lax"
        )
        assert error["file"].endswith("regression-crit.yaml") and error["field"] == "gate_policy"
    assert reg.decisions(cli) == before


def test_the_gate_policy_a_suite_names_decides_and_is_named(reg: Reg, cli: Cli) -> None:
    lax = add_lax_gate(reg.root)  # registered after release-gate: the newest
    name_policies(reg.root, CRIT, gate_policy="release-gate")
    name_policies(reg.root, NONCRIT, gate_policy="zzz-lax")
    reg.sync(cli, "each suite names its gate policy")
    crit = check(reg, cli, "build-pass", CRIT)
    assert crit.code == 0, crit.stdout
    assert crit.json()["policy"] == RELEASE_GATE
    assert crit.json()["policy_digest"] == RELEASE_GATE["digest"]
    shown = reg.run(cli, "gate", "show", crit.json()["gate_id"], "--json")
    assert shown.json()["policy"] == RELEASE_GATE
    noncrit = check(reg, cli, "build-pass", NONCRIT)
    assert noncrit.json()["policy"] == {"id": "zzz-lax", "revision": None, "digest": digest_of(lax)}
    assert reg.run(cli, "verify").code == 0


def test_a_suite_naming_a_policy_not_in_force_is_refused(reg: Reg, cli: Cli) -> None:
    # registered by the gate tests' first sync, then deleted: withdrawn, not in force
    name_policies(reg.root, CRIT, gate_policy="release-gate-sign-test")
    reg.sync(cli, "names a withdrawn policy")
    refused = check(reg, cli, "build-pass", CRIT)
    assert refused.code == 2, refused.stdout
    message = refused.json()["error"]["message"]
    assert "release-gate-sign-test" in message and "not in force" in message


def test_another_registered_policy_than_the_suites_decides_only_a_dry_run(
    reg: Reg, cli: Cli
) -> None:
    lax = add_lax_gate(reg.root)
    name_policies(reg.root, CRIT, gate_policy="release-gate")
    reg.sync(cli, "the suite names release-gate")
    before = reg.decisions(cli)
    for ref in ("zzz-lax", digest_of(lax)):
        refused = check(reg, cli, "build-pass", CRIT, "--policy", ref)
        assert refused.code == 2, refused.stdout
        message = refused.json()["error"]["message"]
        assert "add --dry-run" in message and "release-gate" in message
    assert reg.decisions(cli) == before
    dry = check(reg, cli, "build-pass", CRIT, "--policy", "zzz-lax", "--dry-run")
    assert dry.code == 0, dry.stdout
    assert dry.json()["stored"] is False
    assert dry.json()["policy"] == {"id": "zzz-lax", "revision": None, "digest": digest_of(lax)}
    assert reg.decisions(cli) == before
    for own in ("release-gate", RELEASE_GATE["digest"]):
        stored = check(reg, cli, "build-pass", CRIT, "--policy", own)
        assert stored.code == 0, stored.stdout
        assert stored.json()["policy"] == RELEASE_GATE
    assert reg.decisions(cli) == before + 2


def test_gate_check_names_its_policy_in_its_first_lines(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, cli: Cli
) -> None:
    """A suite that names none is decided by the only gate policy in force, named."""
    ws = copy_workspace(base_workspace(tmp_path_factory), tmp_path / "ws")
    line = f"  gate policy release-gate (no revision: named by digest {RELEASE_GATE['digest']})"
    done = cli("gate", "check", "--build", "build-fail", "--suite", CRIT, cwd=ws)
    assert done.code == 4
    assert done.stdout.splitlines()[:2] == ["BLOCK: build-fail on regression/crit (GATE-1)", line]
    shown = cli("gate", "show", "GATE-1", cwd=ws)
    assert shown.stdout.splitlines()[1] == line


def test_every_report_names_the_applied_policy(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, cli: Cli
) -> None:
    ws = copy_workspace(base_workspace(tmp_path_factory), tmp_path / "ws")
    assert cli("gate", "check", "--build", "build-pass", "--suite", CRIT, cwd=ws).code == 0
    for fmt in ("json", "md", "html"):
        out = ws / f"report.{fmt}"
        done = cli("report", "audit", "--gate", "GATE-1", "--format", fmt, "-o", str(out), cwd=ws)
        assert done.code == 0, done.stdout + done.stderr
        text = out.read_text(encoding="utf-8")
        if fmt == "json":
            assert json.loads(text)["policy"] == RELEASE_GATE
            continue
        # under the verdict, before the first table of tasks: the policy's name and its
        # digest, shortened there to `sha256:` and 12 hex digits (the whole one is shown
        # further down, among the report's named digests)
        head = text[: text.index("<table" if fmt == "html" else "\n|")]
        if fmt == "html":  # as read: ids carry <wbr> where they may wrap
            head, text = (re.sub(r"<[^>]*>", "", t) for t in (head, text))
        digest = RELEASE_GATE["digest"]
        assert digest.startswith("sha256:") and len(digest) == len("sha256:") + 64
        name = "release-gate" if fmt == "html" else "`release-gate`"
        assert f"gate policy {name}" in head, fmt
        assert digest[: len("sha256:") + 12] in head, fmt
        assert digest in text, fmt


def closed_to_regression(doc: dict[str, Any]) -> None:
    del doc["regression_entry"]


def test_promotion_applies_the_suite_policy_its_suite_names(reg: Reg, cli: Cli) -> None:
    add_policy(reg.root, SUITE_POLICY, "zzz-closed", closed_to_regression)
    reg.sync(cli, "a second suite policy")
    ambiguous = reg.run(cli, "promote", "ten-task", "--to", CRIT, "--json")
    assert ambiguous.code == 2, ambiguous.stdout
    assert ambiguous.json()["error"]["message"].startswith(
        "suite regression/crit names no suite_policy and 2 are in force: "
        "default-suite-policy, zzz-closed"
    )
    name_policies(reg.root, CRIT, suite_policy="zzz-closed")
    reg.sync(cli, "the suite names the closed policy")
    assert reg.run(cli, "promote", "ten-task", "--to", CRIT).code == 5
    name_policies(reg.root, CRIT, suite_policy=SUITE_POLICY["id"])
    reg.sync(cli, "the suite names the default policy")
    promoted = reg.run(cli, "promote", "ten-task", "--to", CRIT)
    assert promoted.code == 0, promoted.stdout + promoted.stderr


def test_a_waiver_is_judged_by_the_gate_policy_its_suite_names(reg: Reg, cli: Cli) -> None:
    add_lax_gate(reg.root)  # allows 365 days; release-gate allows 30
    name_policies(reg.root, NONCRIT, gate_policy="release-gate")
    reg.sync(cli, "the suite names release-gate")
    expires = (datetime.now(UTC) + timedelta(days=60)).replace(microsecond=0)
    granted = reg.run(
        cli, "waiver", "grant", "--task", "noncrit-task", "--suite", NONCRIT,
        "--states", "task_fail", "--build", "build-fail", "--owner", "risk@example.com",
        "--reason", "accepted", "--expires", expires.strftime("%Y-%m-%dT%H:%M:%SZ"), "--json",
    )  # fmt: skip
    assert granted.code == 5, granted.stdout
    refusal = json.dumps(granted.json())
    assert "expires_at_too_far" in refusal and "max_duration_days (30)" in refusal


def test_a_decision_stored_under_the_newest_policy_rule_still_verifies(
    reg: Reg, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Decisions stored before suites named policies took the newest in force; they
    replay and verify as they were made."""
    from evalops.services.gate import inputs as gate_inputs
    from evalops.services.gate.policies import governing_policy

    add_lax_gate(reg.root)
    reg.sync(cli, "two gate policies, the suite names none")
    with monkeypatch.context() as patch:
        patch.setattr(
            gate_inputs,
            "gate_policy_for",
            lambda session, suite, cutoff=None: governing_policy(
                session, "gate_policy", suite, cutoff, newest_when_several=True
            ),
        )
        old = check(reg, cli, "build-pass", CRIT)
    assert old.code == 0, old.stdout
    assert old.json()["policy"]["id"] == "zzz-lax"
    replayed = reg.run(cli, "gate", "replay", old.json()["gate_id"], "--json")
    assert replayed.json()["identical"] is True
    verified = reg.run(cli, "verify")
    assert verified.code == 0, verified.stdout + verified.stderr


# ---------------------------------------- item 9: one home per rule, called by every path


def test_the_report_of_an_at_decision_shows_the_calibration_the_gate_used(
    reg: Reg, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    listed = reg.run(cli, "calibration", "list", "--json")
    first = [c["calibration_id"] for c in listed.json()]
    assert len(first) == 1  # recorded when the registry was prepared
    start = datetime.now(UTC).replace(microsecond=0)
    stamp = "%Y-%m-%dT%H:%M:%SZ"
    monkeypatch.setenv("EVALOPS_NOW", (start + timedelta(hours=1)).strftime(stamp))
    later = reg.run(
        cli, "calibration", "record", "reply-quality", "--labels", str(CALIBRATION_DISPUTED),
        "--annotation-guide", "support-reply-guide/v2", "--json",
    )  # fmt: skip
    assert later.code == 0, later.stdout
    assert later.json()["calibration_id"] not in first
    monkeypatch.setenv("EVALOPS_NOW", (start + timedelta(hours=2)).strftime(stamp))
    at = (start + timedelta(minutes=30)).strftime(stamp)
    decided = check(reg, cli, "build-model", MODEL, "--at", at)
    assert decided.json()["decision"] == "pass", decided.stdout  # under the first calibration
    out = reg.root / "report.json"
    done = reg.run(
        cli, "report", "audit", "--gate", decided.json()["gate_id"], "--format", "json",
        "-o", str(out),
    )  # fmt: skip
    assert done.code == 0, done.stdout + done.stderr
    shown = {c["grader_id"]: c for c in json.loads(out.read_text())["calibration"]}
    assert shown["reply-quality"]["calibration_id"] == first[0]
    assert shown["reply-quality"]["state"] == "valid"
    now = check(reg, cli, "build-model", MODEL)  # without --at: the later calibration holds
    assert now.json()["decision"] == "hold"
    reg.run(
        cli, "report", "audit", "--gate", now.json()["gate_id"], "--format", "json",
        "-o", str(out),
    )  # fmt: skip
    shown = {c["grader_id"]: c for c in json.loads(out.read_text())["calibration"]}
    assert shown["reply-quality"]["calibration_id"] == later.json()["calibration_id"]


def stricter_reruns(doc: dict[str, Any]) -> None:
    doc["reruns"]["max_attempts_by_class"] = {"infrastructure_invalid": 1}


@pytest.fixture(params=ENGINES)
def imports(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path,
    cli: Cli,
) -> Reg:  # fmt: skip
    """The importer tests' registry (the demo plus capability/support, which names no
    policy) with a second gate policy synced: no rerun stands in for a rate limit."""
    from tests.import_support import import_base

    root = copy_workspace(import_base(tmp_path_factory), tmp_path / "ws")
    reg = on_engine(request.param, root, cli, request)
    add_policy(root, GATE_POLICY, "zzz-strict", stricter_reruns)
    reg.sync(cli, "a second gate policy")
    return reg


def preview(reg: Reg, cli: Cli, logs: dict[str, Path]) -> CliResult:
    return reg.run(
        cli, "trials", "import", "inspect", str(logs["eval"]), "--map", "maps/inspect.yaml",
        "--dry-run", "--json",
    )  # fmt: skip


EXPLANATION = "support-refund-policy-explanation"
"""Sample A-2: epoch 2 is rate limited (infrastructure_invalid), its retry passes, every
other epoch of five passes. Under release-gate (2 attempts for infrastructure_invalid) the
retry stands in: 5 of 5 pass; under zzz-strict (1 attempt) it does not: 4 of 5."""


def test_the_import_preview_counts_reruns_as_the_suites_gate_policy_allows(
    imports: Reg, cli: Cli, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from tests.import_support import SUPPORT_SUITE, inspect_logs

    logs = inspect_logs(tmp_path_factory)
    ambiguous = preview(imports, cli, logs)
    assert ambiguous.code == 2, ambiguous.stdout
    assert ambiguous.json()["error"]["message"].startswith(
        "suite capability/support names no gate_policy and 2 are in force: release-gate, zzz-strict"
    )
    name_policies(imports.root, SUPPORT_SUITE, gate_policy="release-gate")
    imports.sync(cli, "capability/support names release-gate")
    data = preview(imports, cli, logs).json()
    row = next(t for t in data["tasks"] if t["task_id"] == EXPLANATION)
    assert (row["trials"], row["n"], row["passedCount"]) == (6, 5, 5)
    assert row["gate_policy"] == RELEASE_GATE
    human = imports.run(
        cli, "trials", "import", "inspect", str(logs["eval"]), "--map", "maps/inspect.yaml",
        "--dry-run",
    )  # fmt: skip
    assert "gate policy of each task's suites allows: release-gate (" in human.stdout
    for suite in (SUPPORT_SUITE, "regression/core"):
        name_policies(imports.root, suite, gate_policy="zzz-strict")
    imports.sync(cli, "both suites name zzz-strict")
    row = next(
        t for t in preview(imports, cli, logs).json()["tasks"] if t["task_id"] == EXPLANATION
    )
    assert (row["n"], row["passedCount"], row["gate_policy"]["id"]) == (5, 4, "zzz-strict")


def test_trial_listings_flag_reruns_as_the_suites_gate_policy_allows(
    imports: Reg, cli: Cli, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from tests.import_support import INSPECT_BUILD, SUPPORT_SUITE, inspect_logs

    logs = inspect_logs(tmp_path_factory)
    name_policies(imports.root, SUPPORT_SUITE, gate_policy="release-gate")
    imports.sync(cli, "capability/support names release-gate")
    done = imports.run(
        cli, "trials", "import", "inspect", str(logs["eval"]), "--map", "maps/inspect.yaml"
    )
    assert done.code == 0, done.stdout + done.stderr

    def retry_labels() -> list[str]:
        listed = imports.run(
            cli, "trials", "list", "--build", INSPECT_BUILD, "--task", EXPLANATION, "--json"
        )
        assert listed.code == 0, listed.stdout
        retries = [t for t in listed.json() if t["parent_trial_id"] is not None]
        assert len(retries) == 1
        labels: list[str] = retries[0]["secondary_labels"]
        return labels

    assert "rerun_not_permitted" not in retry_labels()
    for suite in (SUPPORT_SUITE, "regression/core"):
        name_policies(imports.root, suite, gate_policy="zzz-strict")
    imports.sync(cli, "both suites name zzz-strict")
    assert "rerun_not_permitted" in retry_labels()
