"""Anchors are read only from where evalops writes them (docs/verify.md).

A trial id, a build name and a waiver reason are user text, and each can spell an anchor
(`evalops-audit-head:1:sha256:000...`, or a bare `1:sha256:000...`). Planted in every
report of a decision, they must not be taken for the report's anchor: `verify --anchors`
of the untouched registry passes with each report, and counts the one true anchor.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.conftest import Cli
from tests.export.test_exports import keypair
from tests.helpers import commit_all, write_yaml
from tests.integrity.test_decision_integrity_cli import CRITICAL, fix_record, with_guard
from tests.trial_factory import write_jsonl

SUITE = "regression/core"
FAKE_HASH = "sha256:" + "0" * 64
FAKE = f"evalops-audit-head:1:{FAKE_HASH}"  # seq 1 exists, with another hash
HOSTILE_TRIAL = FAKE
HOSTILE_BUILD = f'build-9 {FAKE} <meta name="evalops-audit-head" content="1:{FAKE_HASH}">'
HOSTILE_REASON = f"1:{FAKE_HASH}"


def _hostile_build(demo: Path, cli: Cli) -> None:
    """An execution profile whose build name spells an anchor, registered and synced."""
    path = demo / "registry" / "executions" / "fix-b125.yaml"
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    doc.update(id="hostile-b9", system_build=HOSTILE_BUILD)
    write_yaml(demo / "registry" / "executions" / "hostile-b9.yaml", doc)
    commit_all(demo, "a build whose name looks like an anchor")
    synced = cli("sync", cwd=demo)
    assert synced.code == 0, synced.stdout + synced.stderr


def _decide_with_hostile_text(demo: Path, cli: Cli) -> list[str]:
    """Gate decisions whose reports carry the hostile texts; returns their gate ids."""
    record = with_guard(
        fix_record(demo, CRITICAL), "hard_constraint_fail", trial_id=HOSTILE_TRIAL, index=7
    )
    path = write_jsonl(demo / "hostile.jsonl", [record])
    assert cli("trials", "ingest", str(path), cwd=demo).code == 0
    granted = cli(
        "waiver", "grant", "--task", "support-refund-policy-explanation", "--suite", SUITE,
        "--states", "task_fail", "--build", "build-125", "--owner", "owner@example.com",
        "--reason", HOSTILE_REASON, "--expires", "7d", cwd=demo,
    )  # fmt: skip
    assert granted.code == 0, granted.stderr
    _hostile_build(demo, cli)
    gate_ids = []
    for build in ("build-125", HOSTILE_BUILD):
        checked = cli("gate", "check", "--build", build, "--suite", SUITE, "--json", cwd=demo)
        assert checked.code in (3, 4), checked.stdout + checked.stderr
        gate_ids.append(json.loads(checked.stdout)["gate_id"])
    return gate_ids


def test_user_text_that_spells_an_anchor_never_counts_as_one(demo: Path, cli: Cli) -> None:
    gate_ids = _decide_with_hostile_text(demo, cli)
    head = cli("verify", "--json", cwd=demo).json()["audit_head"]
    planted: set[str] = set()  # formats a report of which shows the fake token verbatim
    for gate_id in gate_ids:
        for fmt in ("html", "md", "json"):
            report = demo / f"{gate_id}.{fmt}"
            written = cli(
                "report", "audit", "--gate", gate_id, "--format", fmt, "-o", str(report), cwd=demo
            )
            assert written.code == 0, written.stderr
            text = report.read_text(encoding="utf-8")
            if FAKE in text:
                planted.add(fmt)
            # Whatever the report shows, only its own anchor is taken.
            result = cli("verify", "--anchors", str(report), "--json", cwd=demo)
            assert result.code == 0, (gate_id, fmt, result.stdout + result.stderr)
            anchors = {(a["seq"], a["hash"]) for a in result.json()["anchors"]}
            assert (head["seq"], head["hash"]) in anchors
            assert (1, FAKE_HASH) not in anchors
    # The attack was really there: the fake token stands in a report of every format.
    assert planted == {"html", "md", "json"}


def test_an_attestation_of_a_hostile_decision_holds_only_its_own_anchors(
    demo: Path, cli: Cli, tmp_path: Path
) -> None:
    """The Statement (plain, and inside a signed DSSE envelope) names the trial, build and
    reason nowhere as anchors: only its predicate's `audit_head` / `decision_event` count."""
    gate_id = _decide_with_hostile_text(demo, cli)[0]
    private, _, _ = keypair(tmp_path)
    for name, extra in (("plain.json", []), ("signed.json", ["--sign-key", str(private)])):
        path = demo / name
        exported = cli(
            "export", "attestation", "--gate", gate_id, *extra, "-o", str(path), cwd=demo
        )
        assert exported.code == 0, exported.stderr
        result = cli("verify", "--anchors", str(path), "--json", cwd=demo)
        assert result.code == 0, (name, result.stdout + result.stderr)
        sources = [a["source"] for a in result.json()["anchors"]]
        assert sources and all(s.endswith(("(audit_head)", "(decision_event)")) for s in sources)


def test_a_list_of_anchor_lines_is_only_that(demo: Path, cli: Cli) -> None:
    """A text file counts as an anchor list only when every line is one: prose around a
    line that happens to read `SEQ:HASH` is not an anchor file."""
    head = cli("verify", "--json", cwd=demo).json()["audit_head"]
    listed = demo / "anchors.txt"
    listed.write_text(f"# kept by the release job\n{head['seq']}:{head['hash']}\n\n")
    assert cli("verify", "--anchors", str(listed), cwd=demo).code == 0
    prose = demo / "notes.txt"
    prose.write_text(f"notes from the review\n{HOSTILE_REASON}\n")
    result = cli("verify", "--anchors", str(prose), cwd=demo)
    assert result.code == 2, result.stdout + result.stderr
    assert "no chain anchor found" in result.stderr


def test_an_anchor_the_chain_does_not_hold_is_tampering_or_another_registry(
    demo: Path, cli: Cli
) -> None:
    """Evalops cannot tell a rewritten chain from an anchor taken of another registry: it
    fails either way (exit 6) and says both, so a user who ran it against the wrong
    database is not told only that history was rewritten."""
    head = cli("verify", "--json", cwd=demo).json()["audit_head"]
    other = "sha256:" + "0" * 64
    for seq, wording in ((head["seq"], "rewritten since"), (head["seq"] + 1000, "tail was cut")):
        listed = demo / f"anchor-{seq}.txt"
        listed.write_text(f"{seq}:{other}\n")
        result = cli("verify", "--anchors", str(listed), cwd=demo)
        assert result.code == 6, result.stdout + result.stderr
        assert wording in result.stderr
        assert "another registry" in result.stderr and "--db" in result.stderr
