"""`evalops --help` lists commands by workflow group, and `verify --anchors` takes every file
a shell glob expands to."""

from __future__ import annotations

from pathlib import Path

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
