"""Hostile text in every free-text field never becomes markup in any report or export.

Two attacks: (1) on the report document, every string value is replaced by a payload (and,
for comparison, by a harmless word), then rendered: the HTML has no script, no event
handler, no non-http(s) link and the same elements as the harmless rendering apart from
links; the Markdown, rendered by a CommonMark parser, holds exactly the elements of the
harmless rendering and the same number of lines. (2) end to end: payloads entered through
the CLI (incident title, waiver owner and reason, refused waiver, evidence URI) reach the
reports and exports of a new decision, escaped.
"""

from __future__ import annotations

import copy
import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import html5lib
import pytest
from markdown_it import MarkdownIt

from tests.conftest import Cli

PAYLOADS = [
    "<script>alert(1)</script>",
    '"><script>alert(1)</script>',
    "'><img src=x onerror=alert(1)>",
    "<img src=x onerror=alert(1)>",
    "<svg onload=alert(1)>",
    "<svg><script>alert(1)</script></svg>",
    '<svg><a xlink:href="javascript:alert(1)"><text>x</text></a></svg>',
    '<a href="javascript:alert(1)">click</a>',
    "javascript:alert(1)",
    "JaVaScRiPt:alert(document.domain)",
    " javascript:alert(1)",
    "data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==",
    "vbscript:msgbox(1)",
    "{{ 7*7 }}",
    "{% for x in range(3) %}x{% endfor %}",
    "[click](javascript:alert(1))",
    "![img](https://evil.example/x.png)",
    "<https://evil.example/autolink>",
    "[ref]: javascript:alert(1)",
    "# heading",
    "| a | b |\n|---|---|\n| c | d |",
    "line one\nline two\r\n# injected heading\n\n- item",
    "<!-- comment --> <details open><summary>x</summary></details>",
    '<iframe src="https://evil.example"></iframe>',
    "' onmouseover='alert(1)",
    '" onfocus="alert(1)" autofocus="',
    "<style>body{display:none}</style>",
    '<base href="https://evil.example/">',
    '<meta http-equiv="refresh" content="0;url=https://evil.example">',
    "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &#106;avascript:",
    "`code` ``` fenced ```",
    "**bold** _em_ ~~strike~~ $x^2$",
    "> quote\n1. one\n* star",
    "user@evil.example www.evil.example",
    "\u202eevil\u202c \u2066isolate\u2069 \u2028sep",
    "\x00\x07\x1b[31mred\x1b[0m\x7f\x85",
    '<math><mtext><table><mglyph><style><img src=x onerror="alert(1)">',
    "https://evil.example/ok?a=1&b=2",
]
assert len(PAYLOADS) >= 25
HARMLESS = "plain"
HTTP_URL = "https://example.com/harmless"


def strings_replaced(value: Any, make: Callable[[int], str], counter: Iterator[int]) -> Any:
    """A copy of `value` with every string replaced by `make(i)` (i counts strings)."""
    if isinstance(value, str):
        return make(next(counter))
    if isinstance(value, dict):
        return {k: strings_replaced(v, make, counter) for k, v in value.items()}
    if isinstance(value, list):
        return [strings_replaced(v, make, counter) for v in value]
    return value


def hostile(doc: dict[str, Any], offset: int) -> dict[str, Any]:
    import itertools

    return strings_replaced(
        doc, lambda i: PAYLOADS[(i + offset) % len(PAYLOADS)], itertools.count()
    )


def harmless(doc: dict[str, Any], offset: int) -> dict[str, Any]:
    """The same document with each payload replaced by a harmless word, except that a
    payload which is itself a plain http(s) URL stays one (it may become a link)."""
    import itertools

    def make(i: int) -> str:
        payload = PAYLOADS[(i + offset) % len(PAYLOADS)]
        return HTTP_URL if payload.startswith("https://evil.example/ok") else HARMLESS

    return strings_replaced(doc, make, itertools.count())


def parse_html(text: str) -> Any:
    return html5lib.HTMLParser(strict=True, namespaceHTMLElements=False).parse(text)


def parse_fragment(text: str) -> Any:
    return html5lib.HTMLParser(strict=True, namespaceHTMLElements=False).parseFragment(text)


def markdown_html(text: str) -> str:
    return MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(text)


def local(tag: Any) -> str:
    return str(tag).rsplit("}", 1)[-1].lower()


def assert_no_active_content(tree: Any, relative: re.Pattern[str] | None = None) -> None:
    """No active element, handler or non-http(s) link; with `relative`, links that match it
    (the registry site's own pages) are allowed too."""
    for element in tree.iter():
        if not isinstance(element.tag, str):
            continue
        name = local(element.tag)
        assert name not in ("script", "iframe", "object", "embed", "img", "base", "form"), name
        if name == "meta":
            assert (element.get("http-equiv") or "").lower() in ("", "content-security-policy")
        for attribute, value in element.attrib.items():
            attr = local(attribute)
            assert not attr.startswith("on"), (name, attr, value)
            if relative is not None and attr == "href" and relative.fullmatch(value):
                continue
            if attr in ("href", "src", "action", "formaction", "srcdoc", "xlink:href"):
                assert urlsplit(value.strip()).scheme.lower() in ("http", "https"), value


def element_sequence(tree: Any, skip: tuple[str, ...] = ()) -> list[tuple[str, tuple[str, ...]]]:
    """Each element with its attribute names, in document order. `<wbr>` (where an id may
    wrap: as many as its separators) is left out, once checked to be evalops' own: empty,
    without attributes, directly inside a `span.id` (an injected one would be text)."""
    for parent in tree.iter():
        for child in parent:
            if isinstance(child.tag, str) and local(child.tag) == "wbr":
                assert not child.attrib and not child.text, child.attrib
                assert local(parent.tag) == "span" and "id" in parent.get("class", "").split()
    skip = (*skip, "wbr")
    return [
        (local(e.tag), tuple(sorted(local(a) for a in e.attrib if local(a) not in ("href", "rel"))))
        for e in tree.iter()
        if isinstance(e.tag, str) and local(e.tag) not in skip
    ]


@pytest.fixture(scope="module")
def documents(demo_master: Path) -> list[dict[str, Any]]:
    """The real report documents of the demo's three decisions (read-only)."""
    from evalops.domain.vocabulary import parse_timestamp
    from evalops.services.reports.audit import audit_document
    from evalops.services.reports.suite_cards import suite_card_document
    from evalops.store.engine import make_engine

    engine = make_engine(f"sqlite:///{demo_master / '.evalops' / 'registry.db'}")
    now = parse_timestamp("2026-11-30T12:00:00Z")
    try:
        docs = [audit_document(engine, g, now=now) for g in ("GATE-1", "GATE-2", "GATE-3")]
        docs.append(suite_card_document(engine, "regression/core", now=now))
    finally:
        engine.dispose()
    return docs


OFFSETS = [0, 7, 13, 29]


@pytest.mark.parametrize("offset", OFFSETS)
def test_html_never_carries_injected_markup(documents: list[dict[str, Any]], offset: int) -> None:
    from evalops.report.audit import html
    from evalops.report.suite_card import render_suite_card

    for doc in documents:
        render = html if "gate_id" in doc else (lambda d: render_suite_card(d, "html"))
        bad, good = render(hostile(doc, offset)), render(harmless(doc, offset))
        tree = parse_html(bad)  # strict: no parse error, whatever the text
        assert_no_active_content(tree)
        assert len(tree.findall(".//style")) == 1
        assert element_sequence(tree, skip=("a",)) == element_sequence(
            parse_html(good), skip=("a",)
        )
        if "gate_id" in doc:
            text = "".join(tree.find(".//body").itertext())
            assert "{{ 7*7 }}" in text


@pytest.mark.parametrize("offset", OFFSETS)
def test_markdown_never_carries_injected_markup(
    documents: list[dict[str, Any]], offset: int
) -> None:
    from evalops.report.audit import markdown
    from evalops.report.suite_card import render_suite_card

    for doc in documents:
        render = markdown if "gate_id" in doc else (lambda d: render_suite_card(d, "md"))
        bad, good = render(hostile(doc, offset)), render(harmless(doc, offset))
        assert bad.count("\n") == good.count("\n"), "free text added lines"
        bad_tree = parse_fragment(markdown_html(bad))
        assert_no_active_content(bad_tree)
        # Plain ids and digests are written as code spans, hostile text as escaped text:
        # apart from that choice, the elements are exactly the template's.
        assert element_sequence(bad_tree, skip=("code",)) == element_sequence(
            parse_fragment(markdown_html(good)), skip=("code",)
        )
        for code in bad_tree.iter("code"):
            assert not set(code.text or "") & set("`<>[]()!|\n"), code.text
        assert not bad_tree.findall(".//a")
        # GitHub also links bare URLs and e-mail addresses: their ':' and '@' are escaped.
        # Outside code spans (never linked), where the template's own "pass@k" is the same.
        bare = re.compile(r"[A-Za-z]://|[A-Za-z0-9]@|www\.")
        outside = re.compile(r"`[^`\n]*`")
        assert len(bare.findall(outside.sub("", bad))) == len(bare.findall(outside.sub("", good)))
        assert "evil.example" not in "".join(
            a.get("href", "") for a in bad_tree.iter() if isinstance(a.tag, str)
        )


@pytest.mark.parametrize("offset", OFFSETS)
def test_xml_and_json_exports_stay_well_formed(
    documents: list[dict[str, Any]], offset: int
) -> None:
    import junitparser

    from evalops.export.attestation import statement
    from evalops.export.junit import junit_xml
    from evalops.export.otel import otlp_json

    for doc in documents[:3]:
        bad = hostile(doc, offset)
        # Keep the fields an exporter needs as identifiers parseable.
        bad["digests"]["execution_digest"] = doc["digests"]["execution_digest"]
        bad["evaluated_at"] = doc["evaluated_at"]
        for trial, original in zip(bad["trials"], doc["trials"], strict=True):
            trial["completed_at"] = original["completed_at"]
        text = junit_xml(bad)
        root = ET.fromstring(text.encode("utf-8"))
        assert local(root.tag) == "testsuites"
        assert {local(e.tag) for e in root.iter()} <= {
            "testsuites",
            "testsuite",
            "properties",
            "property",
            "testcase",
            "failure",
            "error",
            "skipped",
            "system-out",
            "system-err",
        }
        junitparser.JUnitXml.fromstring(text)
        assert all(json.loads(line) for line in otlp_json(bad).splitlines())
        json.dumps(statement(bad))


def test_template_syntax_in_data_is_shown_literally(documents: list[dict[str, Any]]) -> None:
    from evalops.report.audit import html, markdown

    doc = copy.deepcopy(documents[2])
    doc["reasons"] = ["{{ 7*7 }} {% raw %}{{ config }}"]
    tree = parse_html(html(doc))
    reasons = [li.text for ul in tree.iter("ul") if ul.get("class") == "reasons" for li in ul]
    assert reasons[0] == "{{ 7*7 }} {% raw %}{{ config }}"
    rendered = "".join(parse_fragment(markdown_html(markdown(doc))).itertext())
    assert "{{ 7*7 }} {% raw %}{{ config }}" in rendered


def test_payloads_entered_through_the_cli_reach_the_reports_escaped(
    demo: Path, cli: Cli, tmp_path: Path
) -> None:
    title = "<script>alert('incident')</script> [x](javascript:alert(1))"
    owner = '"><img src=x onerror=alert(1)>@example.com'
    reason = "# {{ 7*7 }}\n| pipe | <svg onload=alert(1)>"
    opened = cli(
        "--json",
        "incident",
        "open",
        "--title",
        title,
        "--severity",
        "low",
        "--observed-at",
        "2026-11-02T09:14:00Z",
        "--trace-uri",
        "javascript:alert(document.cookie)",
        cwd=demo,
    )
    assert opened.code == 0, opened.stderr
    incident = opened.json()["incident_id"]
    assert (
        cli("incident", "link", incident, "--task", "support-refund-in-order", cwd=demo).code == 0
    )
    waiver = [
        "waiver",
        "grant",
        "--suite",
        "regression/core",
        "--states",
        "task_fail",
        "--build",
        "build-125",
        "--owner",
        owner,
        "--reason",
        reason,
        "--expires",
        "7d",
    ]
    assert cli(*waiver, "--task", "support-refund-policy-explanation", cwd=demo).code == 0
    # Refused (a critical task): the refusal, with its owner and reason, is in the report too.
    assert cli(*waiver, "--task", "support-refund-in-order", cwd=demo).code == 5
    gate = cli(
        "--json", "gate", "check", "--build", "build-125", "--suite", "regression/core", cwd=demo
    )
    assert gate.code == 0, gate.stderr
    gate_id = gate.json()["gate_id"]
    doc = json.loads(cli("report", "audit", "--gate", gate_id, "--format", "json", cwd=demo).stdout)
    assert any(i["title"] == title for t in doc["tasks"] for i in t["incidents"])
    assert any(w.get("reason") == reason for w in doc["waivers"]["unused"])
    assert any(w.get("reason") == reason for w in doc["waivers"]["refused"])
    html = cli("report", "audit", "--gate", gate_id, "--format", "html", cwd=demo).stdout
    tree = parse_html(html)
    assert_no_active_content(tree)
    body = "".join(tree.find(".//body").itertext())
    assert "<script>alert('incident')</script>" in body
    assert "# {{ 7*7 }}␊| pipe | <svg onload=alert(1)>" in body
    assert "javascript:alert(document.cookie)" in body
    md = cli("report", "audit", "--gate", gate_id, "--format", "md", cwd=demo).stdout
    md_tree = parse_fragment(markdown_html(md))
    assert_no_active_content(md_tree)
    assert not md_tree.findall(".//a") and not md_tree.findall(".//h1")
    md_text = "".join(md_tree.itertext())
    assert owner in md_text and "# {{ 7*7 }}␊| pipe | <svg onload=alert(1)>" in md_text
    junit = cli("export", "junit", "--gate", gate_id, cwd=demo).stdout
    ET.fromstring(junit.encode("utf-8"))


# --- the registry site (docs/site.md) --------------------------------------------------------

SITE_LINK = re.compile(r"(\.\./)?(index|[a-z]+/[A-Za-z0-9_-]+)\.html")


@pytest.fixture(scope="module")
def site_documents(demo_master: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Any]:
    """Every page document of the demo's site, as the site writer hands them to the renderer."""
    from evalops.domain.vocabulary import parse_timestamp
    from evalops.report import site as render
    from evalops.services.reports.site import write_site
    from evalops.store.engine import make_engine

    captured: list[Any] = []
    original = render.render_page

    def capture(doc: Any) -> str:
        captured.append(copy.deepcopy(doc))
        return original(doc)

    engine = make_engine(f"sqlite:///{demo_master / '.evalops' / 'registry.db'}")
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(render, "render_page", capture)
            write_site(
                engine,
                tmp_path_factory.mktemp("xss-site"),
                now=parse_timestamp("2026-11-30T12:00:00Z"),
            )
    finally:
        engine.dispose()
    assert {d["page"] for d in captured} == {
        "index", "suite", "task", "incident", "waiver", "calibration"
    }  # fmt: skip
    return captured


def _same_page(bad: dict[str, Any], doc: dict[str, Any]) -> dict[str, Any]:
    return {**bad, "page": doc["page"], "site": doc["site"]}


@pytest.mark.parametrize("offset", OFFSETS)
def test_site_pages_never_carry_injected_markup(site_documents: list[Any], offset: int) -> None:
    from evalops.report.site import render_page

    for doc in site_documents:
        bad = render_page(_same_page(hostile(doc, offset), doc))
        good = render_page(_same_page(harmless(doc, offset), doc))
        tree = parse_html(bad)  # strict: no parse error, whatever the text
        assert_no_active_content(tree, relative=SITE_LINK)
        assert len(tree.findall(".//style")) == 1
        assert element_sequence(tree, skip=("a",)) == element_sequence(
            parse_html(good), skip=("a",)
        ), doc["page"]
        # Ids become file names: every link into the site is a plain relative path.
        for a in tree.iter("a"):
            href = a.get("href")
            assert SITE_LINK.fullmatch(href) or urlsplit(href).scheme in ("http", "https"), href


@pytest.mark.parametrize("payload", PAYLOADS)
def test_decision_pages_link_back_safely_whatever_the_suite_id(
    documents: list[dict[str, Any]], payload: str
) -> None:
    from evalops.report.site import decision_page

    page = decision_page(hostile(documents[2], 3), suite_id=payload)
    tree = parse_html(page)
    assert_no_active_content(tree, relative=SITE_LINK)
    nav = tree.find(".//nav")
    assert nav is not None and next(a.get("href") for a in nav.iter("a")) == "../index.html"


def test_invisible_characters_never_reach_a_site_page_raw(site_documents: list[Any]) -> None:
    import itertools

    from evalops.report.site import render_page

    escaped = "build-125\\u200b\\u2028\\u2029\\u061c\\u202e"
    for doc in site_documents:
        bad = strings_replaced(doc, lambda i: f"build-125{INVISIBLE}", itertools.count())
        text = render_page(_same_page(bad, doc))
        assert not raw_invisible(text), (
            doc["page"],
            sorted(map(hex, map(ord, raw_invisible(text)))),
        )
        assert escaped in "".join(parse_html(text).find(".//body").itertext())


# Invisible and line-breaking characters: one of each kind the contract names (a zero-width
# space, the line and paragraph separators, the Arabic letter mark, a right-to-left override).
INVISIBLE = "\u200b\u2028\u2029\u061c\u202e"


def raw_invisible(text: str) -> set[str]:
    """Characters of `text` that no reader sees as themselves (a newline is layout)."""
    import unicodedata

    return {
        c for c in text if unicodedata.category(c) in ("Cf", "Zl", "Zp", "Cs", "Cc") and c != "\n"
    }


def test_invisible_characters_never_reach_a_report_raw(documents: list[dict[str, Any]]) -> None:
    """Build names, task titles, reasons, trial ids: every string of every report document
    holds each invisible character; every format shows it escaped (`\\u200b`), so
    `build-125` followed by U+200B never reads as `build-125`."""
    import itertools

    from evalops.export.junit import junit_xml
    from evalops.report.audit import html, markdown
    from evalops.report.suite_card import render_suite_card

    escaped = "build-125\\u200b\\u2028\\u2029\\u061c\\u202e"
    for doc in documents:
        bad = strings_replaced(doc, lambda i: f"build-125{INVISIBLE}", itertools.count())
        if "gate_id" in doc:
            bad["digests"]["execution_digest"] = doc["digests"]["execution_digest"]
            assert bad["build"] == f"build-125{INVISIBLE}"
            assert bad["trials"] and bad["trials"][0]["trial_id"] == f"build-125{INVISIBLE}"
            outputs = {"html": html(bad), "md": markdown(bad), "junit": junit_xml(bad)}
        else:
            outputs = {f: render_suite_card(bad, f) for f in ("html", "md")}
        for name, text in outputs.items():
            assert not raw_invisible(text), (name, sorted(map(hex, map(ord, raw_invisible(text)))))
        shown_html = "".join(parse_html(outputs["html"]).find(".//body").itertext())
        assert escaped in shown_html
        assert escaped in "".join(parse_fragment(markdown_html(outputs["md"])).itertext())
        if "junit" in outputs:
            root = ET.fromstring(outputs["junit"].encode("utf-8"))
            build = next(p for p in root.iter("property") if p.get("name") == "evalops.build")
            assert build.get("value") == escaped
