"""Hostile free text entered through the CLI (docs/formats.md, "Free text").

Every payload of the corpus goes into the free-text fields a user can set on the demo
registry: incident title and trace URI, the acting user (`--actor`), waiver owner and
reason, incident closing reason, calibration invalidation reason. The same run with
harmless text of the same displayed width is the baseline. Then:
- terminal output holds no raw control character and exactly the baseline's lines;
- the `--junit` file of a gate decision parses as XML;
- the `--report` Markdown, rendered by a CommonMark parser, holds exactly the baseline's
  HTML elements (those the template writes), no active content and no injected link.
"""

from __future__ import annotations

import unicodedata
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pytest

from evalops.cli.context import shown
from tests.conftest import Cli
from tests.helpers import commit_all
from tests.integrity.test_report_xss import (
    PAYLOADS,
    assert_no_active_content,
    local,
    markdown_html,
    parse_fragment,
)

CORPUS = [
    *PAYLOADS,
    "\x1b[2J\x1b[H cleared screen",
    "\x1b]0;fake title\x07",
    "\x1b[1A\x1b[2Kerased previous line",
    "ok\rWVR-9 [valid] fake waiver overwriting the line",
    "ok\nWVR-9 [valid] fake waiver on its own line",
    "]]><injected/><![CDATA[",
    "\t tab \v vtab \f formfeed \b backspace",
]
POLICY_TASK = "support-refund-policy-explanation"
SUITE = "regression/core"
CONTROL_OK = {"\n"}


def _harmless(payload: str) -> str:
    """Plain text as wide on the terminal as the payload is once made visible."""
    return "h" * len(shown(payload))


def _populate(cli: Cli, demo: Path, texts: list[str]) -> list[str]:
    """Put each text into every free-text field; returns the terminal outputs."""
    outputs = []
    for n, value in enumerate(texts):
        opened = cli("--actor", value, "incident", "open", "--title", value, "--severity", "low",
                     "--observed-at", "2026-11-02T09:14:00Z", "--trace-uri",
                     f"trace://hostile/{n}/{value}", cwd=demo)  # fmt: skip
        assert opened.code == 0, (value, opened.stderr)
        incident = f"INC-{n + 2}"
        closed = cli("--actor", value, "incident", "close", incident, "--reason", value, cwd=demo)
        assert closed.code == 0, (value, closed.stderr)
        granted = cli("--actor", value, "waiver", "grant", "--task", POLICY_TASK, "--suite",
                      SUITE, "--states", "task_fail", "--build", "build-125", "--owner", value,
                      "--reason", value, "--expires", "7d", cwd=demo)  # fmt: skip
        assert granted.code == 0, (value, granted.stderr)
        outputs += [opened.stdout + opened.stderr, closed.stdout, granted.stdout]
    gate = cli("gate", "check", "--build", "build-125", "--suite", SUITE,
               "--junit", "gate.xml", "--report", "gate.md", cwd=demo)  # fmt: skip
    assert gate.code == 0, gate.stdout + gate.stderr
    outputs.append(gate.stdout + gate.stderr)
    for value in texts:
        invalidated = cli("--actor", value, "calibration", "invalidate", "reply-quality",
                          "--reason", value, cwd=demo)  # fmt: skip
        assert invalidated.code == 0, (value, invalidated.stderr)
        outputs.append(invalidated.stdout + invalidated.stderr)
    for args in (("incident", "list"), ("waiver", "list", "--all"),
                 *(("incident", "show", f"INC-{n + 2}") for n in range(len(texts))),
                 ("report", "audit", "--gate", "GATE-4", "--format", "md")):  # fmt: skip
        result = cli(*args, cwd=demo)
        assert result.code == 0, (args, result.stderr)
        outputs.append(result.stdout + result.stderr)
    return outputs


@pytest.fixture
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """A terminal wide enough that no table cell wraps, so lines can be counted."""
    monkeypatch.setenv("COLUMNS", "2000")


def test_the_corpus_is_large_and_covers_the_attacks() -> None:
    assert len(set(CORPUS)) == len(CORPUS) >= 30
    for needle in ("\x1b", "\r", "\n", "<script>", "]]>", "](", "# ", "|", "{{ 7*7 }}"):
        assert any(needle in p for p in CORPUS), needle


@pytest.mark.slow
def test_hostile_text_never_reaches_the_terminal_xml_or_markdown_raw(
    demo: Path, demo_master: Path, tmp_path: Path, cli: Cli, wide: None
) -> None:
    import shutil

    baseline_dir = Path(shutil.copytree(demo_master, tmp_path / "baseline", symlinks=True))
    hostile = _populate(cli, demo, CORPUS)
    harmless = _populate(cli, baseline_dir, [_harmless(p) for p in CORPUS])

    for out, base in zip(hostile, harmless, strict=True):
        raw = {c for c in out if unicodedata.category(c) == "Cc" and c not in CONTROL_OK}
        assert not raw, (sorted(raw), out[:500])
        assert out.count("\n") == base.count("\n"), out

    ET.fromstring((demo / "gate.xml").read_bytes())  # well-formed XML, or it raises
    ET.fromstring((baseline_dir / "gate.xml").read_bytes())

    rendered = parse_fragment(markdown_html((demo / "gate.md").read_text(encoding="utf-8")))
    expected = parse_fragment(markdown_html((baseline_dir / "gate.md").read_text(encoding="utf-8")))
    assert_no_active_content(rendered)

    def elements(tree: object) -> Counter[str]:
        return Counter(local(e.tag) for e in tree.iter() if isinstance(e.tag, str))  # type: ignore[attr-defined]

    # The template shows some free text in code spans; text holding backticks is shown
    # escaped outside them instead, so only code spans may differ in number.
    got, want = elements(rendered), elements(expected)
    assert set(got) <= set(want)
    assert {k: v for k, v in got.items() if k != "code"} == {
        k: v for k, v in want.items() if k != "code"
    }
    assert not rendered.findall(".//a") and not rendered.findall(".//h1")
    text = "".join(rendered.itertext())
    assert "<script>alert(1)</script>" in text  # shown, as text


def test_invisible_characters_are_shown_escaped_on_the_terminal_and_in_reports(
    demo: Path, cli: Cli, wide: None
) -> None:
    """A build name, an incident title and a waiver reason holding U+200B, U+2028, U+2029,
    U+061C and U+202E: every terminal line and every report shows each one as `\\u....`,
    so `build-125` + U+200B never reads as the real `build-125`; a trial id holding one
    is refused, the refusal showing it escaped."""
    import json

    from tests.integrity.test_report_xss import INVISIBLE, raw_invisible
    from tests.trial_factory import record

    build = "build-125\u200b"
    title = f"refund{INVISIBLE}title"
    # A look-alike of build-125's execution profile, committed and synced.
    profile = (demo / "registry/executions/fix-b125.yaml").read_text(encoding="utf-8")
    lookalike = profile.replace("id: fix-b125", "id: lookalike-b125").replace(
        "system_build: build-125", 'system_build: "build-125\\u200b"'
    )
    assert lookalike.count("lookalike") == 1 and "\\u200b" in lookalike
    (demo / "registry/executions/lookalike-b125.yaml").write_text(lookalike, encoding="utf-8")
    commit_all(demo, "a look-alike build")
    assert cli("sync", cwd=demo).code == 0
    outputs = [
        cli("--actor", f"mallory{INVISIBLE}", "incident", "open", "--title", title, "--severity",
            "low", "--observed-at", "2026-11-02T09:14:00Z", "--trace-uri", "trace://x", cwd=demo),
        cli("waiver", "grant", "--task", POLICY_TASK, "--suite", SUITE, "--states", "task_fail",
            "--build", build, "--owner", "o@example.com", "--reason", f"because{INVISIBLE}",
            "--expires", "7d", cwd=demo),
    ]  # fmt: skip
    assert [r.code for r in outputs] == [0, 0], [r.stderr for r in outputs]
    gate = cli("gate", "check", "--build", build, "--suite", SUITE, "--junit", "gate.xml",
               "--report", "gate.md", cwd=demo)  # fmt: skip
    assert gate.code in (0, 3, 4), gate.stderr
    gate_id = json.loads(cli("--json", "gate", "list", cwd=demo).stdout)[0]["gate_id"]
    for args in (("incident", "list"), ("incident", "show", "INC-2"), ("waiver", "list", "--all"),
                 ("gate", "list"), ("--json", "gate", "list"), ("gate", "explain", gate_id),
                 ("report", "audit", "--gate", gate_id, "--format", "html"),
                 ("report", "audit", "--gate", gate_id, "--format", "md")):  # fmt: skip
        outputs.append(cli(*args, cwd=demo))
    bad = record({"task_digest": "sha256:" + "0" * 64}, trial_id=f"t-1{INVISIBLE}")
    (demo / "bad.jsonl").write_text(json.dumps(bad, ensure_ascii=False) + "\n", encoding="utf-8")
    refused = cli("trials", "ingest", "bad.jsonl", cwd=demo)
    assert refused.code == 2
    outputs.append(refused)

    for result in (gate, *outputs):
        both = result.stdout + result.stderr
        assert not raw_invisible(both), (sorted(hex(ord(c)) for c in raw_invisible(both)), both)
    assert "build-125\\u200b" in gate.stdout + gate.stderr
    shown_title = "refund\\u200b\\u2028\\u2029\\u061c\\u202etitle"
    assert shown_title in outputs[3].stdout  # incident show
    assert "t-1\\u200b" in refused.stderr
    junit = (demo / "gate.xml").read_text(encoding="utf-8")
    assert not raw_invisible(junit)
    assert 'name="evalops.build" value="build-125\\u200b"' in junit
    md_report = (demo / "gate.md").read_text(encoding="utf-8")
    assert not raw_invisible(md_report)
    assert "build-125\\u200b" in "".join(parse_fragment(markdown_html(md_report)).itertext())
