"""The audit reports and suite card of the demo's final decision, byte for byte.

The demo runs with a pinned clock, so its database (digests, audit hashes, git commit) is
the same on every machine. A difference means the reports changed: if intended, run
`make golden-reports` and review the diff.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import html5lib
import pytest

from tests.audit_recipe import recomputed_head
from tests.golden_reports import GOLDEN, render_all

NAMES = sorted(p.name for p in GOLDEN.glob("*"))


def test_every_golden_file_is_rendered() -> None:
    assert NAMES == [
        "audit-GATE-3.html",
        "audit-GATE-3.json",
        "audit-GATE-3.md",
        "suite-card.html",
        "suite-card.md",
    ]


@pytest.fixture(scope="module")
def rendered(demo_master: Path) -> dict[str, str]:
    return render_all(demo_master)


@pytest.mark.parametrize("name", NAMES)
def test_report_matches_its_golden_file(rendered: dict[str, str], name: str) -> None:
    expected = (GOLDEN / name).read_text(encoding="utf-8")
    assert rendered[name] == expected, f"{name} changed; if intended: make golden-reports"


@pytest.mark.parametrize("name", [n for n in NAMES if n.endswith(".html")])
def test_golden_html_has_no_parse_error(name: str) -> None:
    parser = html5lib.HTMLParser(strict=True)
    parser.parse((GOLDEN / name).read_text(encoding="utf-8"))
    assert parser.errors == []


HEAD_TOKEN = re.compile(r"evalops-audit-head:(\d+):(sha256:[0-9a-f]{64})")


@pytest.mark.parametrize("name", NAMES)
def test_golden_audit_head_is_the_chain_recomputed_from_the_recipe(
    demo_master: Path, name: str
) -> None:
    """The head pinned in each golden file is not just a snapshot: walking the demo's stored
    chain with docs/verify.md's recipe (hashlib + rfc8785) arrives at it."""
    seq, head = recomputed_head(demo_master / ".evalops" / "registry.db")
    text = (GOLDEN / name).read_text(encoding="utf-8")
    if name.endswith(".json"):
        pinned = json.loads(text)["audit_head"]
        anchors = {(pinned["seq"], pinned["hash"])}
    else:
        # As a reader copies the shown token: <wbr> only marks where it may wrap.
        shown = text.replace("<wbr>", "")
        anchors = {(int(s), h) for s, h in HEAD_TOKEN.findall(shown)}
    assert anchors == {(seq, head)}
