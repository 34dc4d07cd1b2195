"""The audit reports and suite card of the demo's final decision, byte for byte.

The demo runs with a pinned clock, so its database (digests, audit hashes, git commit) is
the same on every machine. A difference means the reports changed: if intended, run
`make golden-reports` and review the diff.
"""

from __future__ import annotations

from pathlib import Path

import html5lib
import pytest

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
