"""`evalops --help` lists commands by workflow group, and `verify --anchors` takes every file
a shell glob expands to."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import Cli

GROUPS = [
    "Registry commands:",
    "Lifecycle commands:",
    "Trials commands:",
    "Gate commands:",
    "Reports commands:",
    "Authority and integrity commands:",
]


def test_help_groups_commands_in_workflow_order(cli: Cli) -> None:
    out = cli("--help").stdout
    where = [out.index(g) for g in GROUPS]
    assert where == sorted(where), "groups in workflow order"
    ends = [*where[1:], len(out)]
    sections = dict(zip(GROUPS, [out[a:b] for a, b in zip(where, ends, strict=True)], strict=True))
    assert "\n  sync " in sections["Registry commands:"]
    assert "\n  promote " in sections["Lifecycle commands:"]
    assert "\n  trials " in sections["Trials commands:"]
    assert "\n  gate " in sections["Gate commands:"]
    assert "\n  report " in sections["Reports commands:"]
    assert "\n  verify " in sections["Authority and integrity commands:"]
    assert "\nCommands:" not in out, "no ungrouped alphabetical list"


def test_verify_anchors_reads_every_file_after_it(demo: Path, cli: Cli) -> None:
    reports = sorted((demo / "reports").glob("*.html"))
    assert len(reports) >= 2
    done = cli("verify", "--anchors", *map(str, reports), "--json", cwd=demo)
    assert done.code == 0, done.stdout + done.stderr
    assert len(done.json()["anchors"]) == len(reports)
    # A forged anchor in the last file of the glob is found: every file is read.
    forged = demo / "forged.txt"
    forged.write_text("1:sha256:" + "0" * 64 + "\n", encoding="utf-8")
    done = cli("verify", "--anchors", *map(str, reports), str(forged), cwd=demo)
    assert done.code == 6, done.stdout + done.stderr


def test_anchor_files_without_anchors_flag_are_a_usage_error(demo: Path, cli: Cli) -> None:
    done = cli("verify", "reports/audit-GATE-3.html", cwd=demo)
    assert done.code == 2
    assert "--anchors" in done.stderr


def test_sync_says_a_labels_only_change_keeps_the_digest(demo: Path, cli: Cli) -> None:
    from tests.helpers import commit_all

    task = demo / "registry" / "tasks" / "support-refund-in-order.yaml"
    before = cli("digest", str(task), "--json", cwd=demo).json()
    text = task.read_text(encoding="utf-8")
    title = next(line for line in text.splitlines() if line.strip().startswith("title:"))
    task.write_text(text.replace(title, title + " (reworded)"), encoding="utf-8")
    after = cli("digest", str(task), "--json", cwd=demo).json()
    assert before == after, "a title is a label: the task_digest stays"
    commit_all(demo, "reword a title")
    done = cli("sync", "registry", cwd=demo)
    assert done.code == 0, done.stdout + done.stderr
    assert "task support-refund-in-order: labels changed; same digest sha256:" in done.stdout
    assert "registered task support-refund-in-order" not in done.stdout


def test_the_first_authority_sync_says_acts_now_need_signatures(
    demo: Path, cli: Cli, tmp_path: Path
) -> None:
    import json

    from tests.helpers import commit_all
    from tests.sshkeys import make_key, public_key

    key = make_key(tmp_path, "alice")
    doc = {
        "spec_schema_version": "authority/v1",
        "id": "authority",
        "principals": [{"id": "alice", "keys": [public_key(key)]}],
        "roles": {"policy_owner": [{"principal": "alice"}]},
    }
    path = demo / "registry" / "policies" / "authority.yaml"
    path.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    commit_all(demo, "authority")
    done = cli("sync", "registry", cwd=demo)
    assert done.code == 0, done.stdout + done.stderr
    assert "authority in force from now on: acts need signatures" in done.stdout
    again = cli("sync", "registry", cwd=demo)
    assert "authority in force from now on" not in again.stdout


def test_retire_dry_run_shows_the_checklist_and_changes_nothing(demo: Path, cli: Cli) -> None:
    def state() -> tuple[Any, Any]:
        head = cli("verify", "--json", cwd=demo).json()["audit_head"]
        members = cli("suite", "show", "regression/core", "--json", cwd=demo).json()
        return head, members

    before = state()
    args = ["retire", "support-refund-in-order", "--from", "regression/core"]
    refused = cli(*args, "--reason", "obsolete", "--dry-run", cwd=demo)
    assert refused.code == 5, refused.stdout + refused.stderr
    assert "dry run: would be refused" in refused.stdout
    assert "[FAIL]" in refused.stdout
    approved = cli(
        *args, "--reason", "obsolete", "--approved-by", "risk@example.com", "--dry-run",
        "--json", cwd=demo,
    )  # fmt: skip
    document = approved.json()
    assert document["outcome"] == "dry_run" and document["requirements"]
    assert state() == before, "a dry run writes nothing, not even a refusal"
