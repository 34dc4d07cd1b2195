"""`evalops report site`: the static registry site of the demo (docs/site.md).

Every page parses strictly, carries the report CSP and the audit head, holds no script, and
every relative link resolves; a re-run is byte-identical and rewrites no file; `--suite`
keeps the site to that suite; task histories flip as the domain's flips do.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.parse import unquote, urlsplit

import html5lib
import pytest

from tests.conftest import PINNED_NOW, Cli

SVG_NS = "{http://www.w3.org/2000/svg}"
PAGE_LINK = re.compile(r"^(\.\./)?(index|[a-z]+/[A-Za-z0-9_-]+)\.html$")


def _write(demo: Path, out: Path, *suites: str) -> dict[str, object]:
    from evalops.domain.vocabulary import parse_timestamp
    from evalops.services.reports.site import write_site
    from evalops.store.engine import make_engine

    engine = make_engine(f"sqlite:///{demo / '.evalops' / 'registry.db'}")
    try:
        result = write_site(engine, out, suites=suites, now=parse_timestamp(PINNED_NOW))
    finally:
        engine.dispose()
    return result.as_dict() | {"written_pages": result.written}


@pytest.fixture(scope="module")
def site(demo_master: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site") / "site"
    _write(demo_master, out)
    return out


def page_text(path: Path) -> str:
    """A page's HTML with `<wbr>` (where an id may wrap: markup, not text) left out, so a
    test can look for an id as it reads."""
    return path.read_text(encoding="utf-8").replace("<wbr>", "")


def pages(root: Path) -> list[Path]:
    return sorted(root.rglob("*.html"))


def hrefs(tree: object) -> list[str]:
    return [e.get("href") for e in tree.iter() if isinstance(e.tag, str) and e.get("href")]  # type: ignore[attr-defined]


def test_every_kind_of_page_is_written(site: Path) -> None:
    names = {p.relative_to(site).as_posix() for p in pages(site)}
    assert {
        "index.html",
        "suites/regression_2fcore.html",
        "decisions/GATE-1.html",
        "decisions/GATE-2.html",
        "decisions/GATE-3.html",
        "tasks/support-refund-in-order.html",
        "incidents/INC-1.html",
        "waivers/WVR-1.html",
        "calibrations/CAL-2.html",
    } <= names


def test_every_page_parses_has_the_head_and_csp_and_no_script(
    site: Path, demo_master: Path
) -> None:
    from tests.audit_recipe import recomputed_head

    seq, head = recomputed_head(demo_master / ".evalops" / "registry.db")
    for page in pages(site):
        parser = html5lib.HTMLParser(strict=True, namespaceHTMLElements=False)
        tree = parser.parse(page.read_text(encoding="utf-8"))
        assert parser.errors == [], page
        metas = {m.get("name") or m.get("http-equiv"): m.get("content") for m in tree.iter("meta")}
        assert metas["evalops-audit-head"] == f"{seq}:{head}", page
        csp = metas["Content-Security-Policy"]
        assert "script-src 'none'" in csp and "default-src 'none'" in csp, page
        assert not list(tree.iter("script")), page
        assert len(list(tree.iter("style"))) == 1, page
        text = page_text(page)
        assert f"evalops-audit-head:{seq}:{head}" in text, page


def test_every_relative_link_resolves_and_every_page_is_linked(site: Path) -> None:
    assert_links_resolve(site)


def test_a_retired_members_page_is_written_and_every_link_still_resolves(
    demo: Path, cli: Cli, tmp_path: Path
) -> None:
    """A suite page lists its retired members and links to their task pages: a member
    retired before any decision read it (so no chart point) had no page written, and the
    link was broken."""
    task = "eu-session-free-refund-late-order"
    done = cli(
        "retire", task, "--from", "estimation/eu-sessions", "--kind", "obsolete",
        "--reason", "no longer shipped", "--approved-by", "support-lead@example.com", cwd=demo,
    )  # fmt: skip
    assert done.code == 0, done.stdout + done.stderr
    out = tmp_path / "site"
    _write(demo, out)
    suite_page = out / "suites" / "estimation_2feu-sessions.html"
    assert f'href="../tasks/{task}.html"' in suite_page.read_text(encoding="utf-8")
    assert (out / "tasks" / f"{task}.html").is_file()
    assert_links_resolve(out)


def assert_links_resolve(site: Path) -> None:
    """Every relative link of every page names a page of the site, and every page but the
    index is linked from another."""
    linked: set[Path] = {(site / "index.html").resolve()}
    for page in pages(site):
        tree = html5lib.parse(page.read_text(encoding="utf-8"), namespaceHTMLElements=False)
        for href in hrefs(tree):
            parts = urlsplit(href)
            if parts.scheme in ("http", "https"):
                continue
            assert not parts.scheme and not parts.netloc, (page, href)
            if not parts.path:
                continue  # a fragment of the page itself
            target = (page.parent / unquote(parts.path)).resolve()
            assert target.is_file(), (page, href)
            assert site.resolve() in target.parents, (page, href)
            linked.add(target)
    assert linked == {p.resolve() for p in pages(site)}, "a page no other page links to"


def test_rerun_is_byte_identical_and_rewrites_nothing(demo_master: Path, tmp_path: Path) -> None:
    out = tmp_path / "site"
    first = _write(demo_master, out)
    assert first["written"] == first["pages"] and first["unchanged"] == 0
    before = {p: p.read_bytes() for p in pages(out)}
    for p in before:
        os.utime(p, (1_000_000, 1_000_000))  # a rewrite would move the mtime
    again = _write(demo_master, out)
    assert again["written"] == 0 and again["unchanged"] == first["pages"]
    assert {p: p.read_bytes() for p in pages(out)} == before
    assert all(p.stat().st_mtime == 1_000_000 for p in before)
    # Another directory: the same bytes (nothing depends on where or when it is written).
    other = tmp_path / "other"
    _write(demo_master, other)
    assert {p.relative_to(other): p.read_bytes() for p in pages(other)} == {
        p.relative_to(out): b for p, b in before.items()
    }


def test_a_damaged_page_is_written_again_and_only_it(demo_master: Path, tmp_path: Path) -> None:
    out = tmp_path / "site"
    _write(demo_master, out)
    damaged = out / "decisions" / "GATE-2.html"
    good = damaged.read_bytes()
    damaged.write_bytes(good.replace(b"HOLD", b"PASS"))
    (out / "tasks" / "support-refund-in-order.html").unlink()
    again = _write(demo_master, out)
    assert sorted(again["written_pages"]) == [  # type: ignore[type-var]
        "decisions/GATE-2.html",
        "tasks/support-refund-in-order.html",
    ]
    assert damaged.read_bytes() == good


def test_a_new_audit_event_changes_every_page(demo: Path, cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "site"
    _write(demo, out)
    before = {p: p.read_bytes() for p in pages(out)}
    opened = cli(
        "incident", "open", "--title", "a new incident", "--severity", "low",
        "--observed-at", "2026-11-02T09:14:00Z", "--trace-uri", "trace://x", cwd=demo,
    )  # fmt: skip
    assert opened.code == 0, opened.stderr
    result = _write(demo, out)
    assert result["written"] == result["pages"] == len(before) + 1
    assert (out / "incidents" / "INC-2.html").is_file()


def test_suite_filter_keeps_the_site_to_that_suite(demo_master: Path, tmp_path: Path) -> None:
    out = tmp_path / "site"
    _write(demo_master, out, "regression/core")
    names = {p.relative_to(out).as_posix() for p in pages(out)}
    assert [n for n in names if n.startswith("suites/")] == ["suites/regression_2fcore.html"]
    index = page_text(out / "index.html")
    assert "regression/core" in index and "capability/agents" not in index
    for page in pages(out):
        tree = html5lib.parse(page.read_text(encoding="utf-8"), namespaceHTMLElements=False)
        for href in hrefs(tree):
            if PAGE_LINK.match(href):
                assert (page.parent / href).resolve().is_file(), (page, href)


def test_cli_site_json_and_unknown_suite(demo: Path, cli: Cli) -> None:
    done = cli("--json", "report", "site", "out", "--suite", "regression/core", cwd=demo)
    assert done.code == 0, done.stderr
    data = done.json()
    assert data["index"] == "out/index.html" and data["written"] == data["pages"] > 0
    assert data["unchanged"] == 0
    again = cli("--json", "report", "site", "out", "--suite", "regression/core", cwd=demo)
    assert again.json()["written"] == 0 and again.json()["unchanged"] == data["pages"]
    human = cli("report", "site", "out", cwd=demo)
    assert human.code == 0 and "out/index.html" in human.stderr
    missing = cli("report", "site", "out", "--suite", "no/such", cwd=demo)
    assert missing.code == 2 and "no/such" in missing.stderr


def test_the_index_names_an_estimation_suite_s_latest_estimate(
    site: Path, demo_master: Path
) -> None:
    """An estimation suite has estimates, not gate decisions: its index row says so and
    names the latest, with its pass rate and interval as stored."""
    import json
    import sqlite3

    con = sqlite3.connect(demo_master / ".evalops" / "registry.db")
    estimate_id, build, result = con.execute(
        "SELECT estimate_id, build, result FROM estimate ORDER BY id DESC LIMIT 1"
    ).fetchone()
    con.close()
    rate = json.loads(result)["rates"]["pass"]
    row = next(
        line for line in page_text(site / "index.html").splitlines()
        if "estimation/eu-sessions" in line and "data-label=\"latest decision\"" in line
    )  # fmt: skip
    assert "no gate decision (an estimation suite): latest estimate" in row
    assert f'.html#{estimate_id}"><span class="id">{estimate_id}</span></a>' in row
    assert f"{build}</span>, pass {rate['rate']:.2f} [{rate['low']:.2f}, {rate['high']:.2f}]" in row


def test_a_site_that_cannot_be_written_is_a_named_error_not_a_bug(
    demo: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk, a page path taken by a directory, a DIR under a file: exit 2 naming the
    path and the cause, never "this is a bug in evalops"; no temporary file left."""
    import errno
    import os

    (demo / "a-file").write_text("x", encoding="utf-8")
    under_a_file = cli("report", "site", "a-file/site", cwd=demo)
    assert under_a_file.code == 2, under_a_file.stderr
    assert "a-file/site" in under_a_file.stderr and "cannot write the site" in under_a_file.stderr
    (demo / "taken" / "index.html").mkdir(parents=True)
    taken = cli("report", "site", "taken", cwd=demo)
    assert taken.code == 2 and "taken/index.html" in taken.stderr, taken.stderr
    assert "bug" not in taken.stderr

    def full(*args: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr("evalops.services.reports.site.os.replace", full)
    done = cli("--json", "report", "site", "out", cwd=demo)
    assert done.code == 2, done.stdout + done.stderr
    error = done.json()["error"]
    assert "No space left on device" in error["message"] and error["field"] == "DIR"
    assert not list((demo / "out").rglob(".tmp-*"))


def test_decision_page_is_the_audit_report_with_a_way_back(site: Path, demo_master: Path) -> None:
    page = page_text(site / "decisions" / "GATE-3.html")
    assert '<a href="../index.html">registry index</a>' in page
    assert '<a href="../suites/regression_2fcore.html">' in page
    assert "evalops audit report · GATE-3" in page


def test_suite_page_chart_has_labelled_axes_build_names_and_a_legend(site: Path) -> None:
    """One panel per task, each with its whole name, a labelled pass^k axis from 0 to 1 and
    every bar numbered and valued; the numbered list of builds names each number."""
    page = page_text(site / "suites" / "regression_2fcore.html")
    tree = html5lib.parse(page, namespaceHTMLElements=False)
    panels = tree.findall(".//figure")
    names = ["".join(p.find("figcaption").itertext()) for p in panels]
    assert {"support-refund-in-order", "article-publish-approved-revision"} <= set(names)
    key = tree.find(".//ol[@class='build-key']")
    builds = ["".join(li.itertext()).split(":")[0] for li in key.findall("li")]
    assert builds[:2] == ["build-124", "build-125"]
    for panel in panels:
        svg = panel.find(f"{SVG_NS}svg")
        texts = [t.text for t in svg.iter(f"{SVG_NS}text")]
        assert {"pass^k", "0", "0.5", "1", "builds, oldest first"} <= set(texts)
        # After the y axis ticks (0, 0.5, 1): each bar's number, as the build list numbers it.
        bars_texts = texts[texts.index("0.5") + 2 :]
        numbers = [int(t) for t in bars_texts if t and t.isdigit()]
        assert numbers == list(range(1, len(numbers) + 1)) and 0 < len(numbers) <= len(builds)
        bars = svg.findall(f"{SVG_NS}rect")
        values = [t for t in texts if t and "." in t and t not in ("0.5",)]
        assert len(values) == len(bars), "every bar carries its value"
    assert "task passed (task_pass)" in page and "hard constraint failed" in page


def test_task_page_shows_history_flips_incidents_graders_and_pins(site: Path) -> None:
    page = page_text(site / "tasks" / "support-refund-policy-explanation.html")
    tree = html5lib.parse(page, namespaceHTMLElements=False)
    text = "".join(tree.find(".//body").itertext())
    for gate in ("GATE-1", "GATE-2", "GATE-3"):
        assert gate in text
    assert "INC-1" in text and "WVR-1" in text and "reply-quality" in text
    assert "regression/core" in text


def test_waiver_and_calibration_pages_say_who_signed(site: Path) -> None:
    waiver = page_text(site / "waivers" / "WVR-1.html")
    assert "unsigned" in waiver and "policy wording fix ships in the next sprint" in waiver
    calibration = page_text(site / "calibrations" / "CAL-2.html")
    assert "unsigned" in calibration and "kappa_vs_majority" in calibration


def _cells(table: ET.Element) -> list[list[str]]:
    return [
        ["".join(cell.itertext()).strip() for cell in row if cell.tag in ("td", "th")]
        for row in table.iter("tr")
    ]


def test_a_calibration_page_lays_out_each_class_and_the_confusion(
    site: Path, demo_master: Path, cli: Cli
) -> None:
    """docs/site.md: per-class precision and recall with their bounds, kappa, holdout size
    and the confusion matrix, each as stored (`calibration show --json`), 4 significant
    digits."""
    stored = cli("calibration", "show", "CAL-2", "--json", cwd=demo_master).json()
    holdout = stored["holdout"]
    page = html5lib.parse(page_text(site / "calibrations" / "CAL-2.html"),
                          namespaceHTMLElements=False)  # fmt: skip
    terms = [
        (dt.text, dd.text)
        for dl in page.iter("dl")
        for dt, dd in zip(dl[::2], dl[1::2], strict=True)
    ]
    assert ("holdout split", str(stored["counts"]["holdout"])) in terms
    assert ("kappa against the majority label", f"{holdout['kappa_vs_majority']:.4g}") in terms
    heading = {h.get("id"): h for h in page.iter("h3")}
    assert set(heading) >= {"per-class", "confusion", "agreement"}
    tables = page.findall(".//table")
    per_class = next(t for t in tables if _cells(t)[0][:2] == ["class", "precision"])
    expected = [
        [name, f"{m['precision']:.4g}",
         f"[{m['precision_ci'][0]:.4g}, {m['precision_ci'][1]:.4g}]",
         f"{m['recall']:.4g}", f"[{m['recall_ci'][0]:.4g}, {m['recall_ci'][1]:.4g}]",
         str(m["support"])]
        for name, m in holdout["per_class"].items()
    ]  # fmt: skip
    assert _cells(per_class)[1:] == expected
    confusion = next(t for t in tables if _cells(t)[0][0] == "label \\ verdict")
    verdicts = _cells(confusion)[0][1:]
    assert set(verdicts) == {v for row in holdout["confusion"].values() for v in row}
    assert _cells(confusion)[1:] == [
        [label, *(str(row.get(v, 0)) for v in verdicts)]
        for label, row in holdout["confusion"].items()
    ]


def test_calibration_measures_of_a_partial_record_read_as_dashes() -> None:
    """A record without a holdout, a class without intervals, one annotator (kappa
    undefined): every measure still has its line, reading `–`; nothing raises."""
    from evalops.services.reports.site import calibration_measures

    assert calibration_measures({}) == calibration_measures(None)
    empty = calibration_measures({})
    assert [value for _, value in empty["sizes"]] == ["–"] * 5
    assert empty["per_class"] == [] and empty["confusion"] == {"verdicts": [], "rows": []}
    assert empty["agreement"] == []
    partial = calibration_measures(
        {
            "counts": {"holdout": 3},
            "holdout": {"per_class": {"task_fail": {"precision": 0.5}}, "confusion": None},
            "human_agreement": {"method": "cohen", "overall": None, "per_class": {"x": None}},
        }
    )
    assert partial["sizes"][1] == ["holdout split", "3"]
    assert partial["per_class"] == [
        {"class": "task_fail", "precision": "0.5", "precision_ci": "–", "recall": "–",
         "recall_ci": "–", "support": "–"}
    ]  # fmt: skip
    assert partial["agreement"] == [["overall (cohen)", "–"], ["x (cohen)", "–"]]


@pytest.fixture(scope="module")
def golden_site(demo_master: Path) -> dict[str, str]:
    from tests.golden_reports import render_site

    return render_site(demo_master)


@pytest.mark.parametrize("name", __import__("tests.golden_reports").golden_reports.SITE_PAGES)
def test_site_page_matches_its_golden_file(golden_site: dict[str, str], name: str) -> None:
    from tests.golden_reports import SITE_GOLDEN

    expected = (SITE_GOLDEN / name).read_text(encoding="utf-8")
    assert golden_site[name] == expected, f"{name} changed; if intended: make golden-reports"


# --- pure parts ------------------------------------------------------------------------------


def test_slugs_are_safe_distinct_and_short() -> None:
    from evalops.report.site import page_path, slug

    ids = ["a/b", "a_2fb", "a b", "A/B", "ä", "..", "", "x" * 300, "x" * 299 + "y", "<s>"]
    slugs = [slug(i) for i in ids]
    assert len(set(slugs)) == len(ids)
    for s in slugs:
        assert re.fullmatch(r"[A-Za-z0-9_-]+", s) and len(s) <= 140, s
    assert slug("a/b") == "a_2fb" and slug("a_2fb") == "a_5f2fb"
    assert page_path("suite", "../../etc") == "suites/_2e_2e_2f_2e_2e_2fetc.html"


def _point(gate: str, build: str, state: str | None, n: int | None = 3) -> object:
    from evalops.services.reports.site import Point

    passed = 3 if state == "task_pass" else 1
    return Point(gate, build, "pass", "t", n, passed if n else None, 1.0, None, state, "pass")


def test_task_history_flips_against_the_build_before() -> None:
    from evalops.services.reports.site import task_history

    rows = task_history(
        [
            _point("GATE-1", "b1", "task_pass"),
            _point("GATE-2", "b2", "task_fail"),  # regressed since b1
            _point("GATE-3", "b2", "task_fail"),  # b2 decided again: still since b1
            _point("GATE-4", "b3", "task_pass"),  # improved since b2
            _point("GATE-5", "b4", "task_pass"),  # unchanged
            _point("GATE-6", "b5", None, n=None),  # no trials: missing
            _point("GATE-7", "b6", "task_pass"),  # no trials before: new
        ]
    )
    assert [(r["flip"], r["since"]) for r in rows] == [
        (None, None),
        ("regressed", "b1"),
        ("regressed", "b1"),
        ("improved", "b2"),
        ("unchanged", "b3"),
        ("missing", "b4"),
        ("new", "b5"),
    ]


def test_metrics_are_flattened_in_order() -> None:
    from evalops.services.reports.site import flatten_metrics

    assert flatten_metrics({"a": 1, "b": {"c": [0.12345, 1.0], "d": {}}, "e": None}) == [
        ["a", "1"],
        ["b.c", "[0.1235, 1]"],
        ["b.d", "{}"],
        ["e", "–"],
    ]


def test_demo_directory_holds_the_site(demo_master: Path) -> None:
    index = demo_master / "site" / "index.html"
    assert index.is_file()
    manifest = json.loads((demo_master / "site" / ".evalops-site.json").read_text())
    written = {p.relative_to(index.parent).as_posix() for p in pages(index.parent)}
    assert set(manifest["pages"]) == written


def test_timestamps_are_shown_to_the_second() -> None:
    from evalops.report.site import when

    assert when("2026-11-30T12:00:00.123456Z") == "2026-11-30 12:00:00 UTC"
    assert when("2026-11-30T12:00:00+02:00") == "2026-11-30 12:00:00 +02:00"
    assert when(None) == "–" and when("not a time") == "not a time"


def test_a_build_decided_again_after_a_newer_one_keeps_its_place() -> None:
    """Builds are ordered by their first decision: acme-bot-41, decided again after
    acme-bot-42, compares with the build before 41 (none here), never "new since 42"; and
    42 still compares with 41's latest decision."""
    from evalops.services.reports.site import task_history

    rows = task_history(
        [
            _point("GATE-1", "acme-bot-40", "task_pass"),
            _point("GATE-2", "acme-bot-41", None, n=None),
            _point("GATE-3", "acme-bot-42", "task_fail"),
            _point("GATE-4", "acme-bot-41", "task_pass"),  # 41 again, after 42
            _point("GATE-5", "acme-bot-42", "task_fail"),  # 42 again: since 41's latest
        ]
    )
    assert [(r["gate_id"], r["flip"], r["since"]) for r in rows] == [
        ("GATE-1", None, None),
        ("GATE-2", "missing", "acme-bot-40"),
        ("GATE-3", "new", "acme-bot-41"),
        ("GATE-4", "unchanged", "acme-bot-40"),
        ("GATE-5", "regressed", "acme-bot-41"),
    ]
    assert not any(r["build"] == "acme-bot-41" and r["since"] == "acme-bot-42" for r in rows)


def test_index_counts_only_incidents_no_regression_task_guards_as_open(site: Path) -> None:
    """A promoted incident has a regression task: the index neither counts it as open nor
    marks its state as needing attention."""
    tree = html5lib.parse(
        (site / "index.html").read_text(encoding="utf-8"), namespaceHTMLElements=False
    )
    rows = tree.findall(".//table/tbody/tr")
    states = {}
    for row in rows:
        cells = row.findall("td")
        link = cells[0].find("a") if cells else None
        if link is not None and "incidents/" in (link.get("href") or ""):
            states["".join(link.itertext())] = (
                "".join(cells[1].itertext()),
                cells[1].find("strong") is not None,
            )
    assert states, "the demo has incidents"
    open_ones = [
        i for i, (state, _) in states.items() if state in ("open", "confirmed", "reproduced")
    ]
    promoted = [i for i, (state, _) in states.items() if state == "promoted"]
    assert promoted, "the demo promotes an incident"
    header = "".join(tree.find(".//header").itertext())
    assert f"{len(open_ones)} open incident" in header
    assert f"({len(promoted)} promoted to a regression task)" in header
    assert all(not marked for i, (_, marked) in states.items() if i in promoted)


def test_a_task_that_failed_a_hard_constraint_is_never_called_flaky(
    site: Path, demo_master: Path, cli: Cli
) -> None:
    """A refund committed twice is a failure however often the task passes: the suite page
    lists such a task apart ("Failed a hard constraint (not flaky)"), as the suite card
    does, never under "Flaky tasks". Which tasks failed a hard constraint in which build is
    read from the stored decisions themselves."""
    hard: set[str] = set()
    for gate in ("GATE-1", "GATE-2", "GATE-3"):
        shown = cli("gate", "show", gate, "--json", cwd=demo_master)
        assert shown.code == 0, shown.stderr
        hard |= {
            t["task_id"] for t in shown.json()["tasks"] if t["state"] == "hard_constraint_fail"
        }
    assert hard, "the demo holds a hard-constraint failure (the refund committed twice)"
    tree = html5lib.parse(
        page_text(site / "suites" / "regression_2fcore.html"), namespaceHTMLElements=False
    )
    body = tree.find(".//body")
    sections: dict[str, list[str]] = {}
    current = None
    for element in body.iter():
        if element.tag in ("h2", "h3"):
            current = element.get("id")
        elif element.tag == "li" and current in ("flaky", "hard-constraint"):
            sections.setdefault(current, []).append("".join(element.itertext()))
    flaky = " ".join(sections.get("flaky", []))
    apart = " ".join(sections.get("hard-constraint", []))
    for task_id in hard:
        assert task_id not in flaky, f"{task_id} failed a hard constraint: not flaky"
    assert any(task_id in apart for task_id in hard)


def test_a_long_read_keeps_each_task_revision_s_facts_once_whatever_the_build(
    demo_master: Path,
) -> None:
    """The registry site renders every decision in one read; what it keeps per task must
    not grow with the decisions (every build has its own execution), while each decision's
    tasks still name their own build's eval case (as its stored trials do)."""
    from sqlmodel import col, select

    from evalops.domain.vocabulary import parse_timestamp
    from evalops.services.registry.definitions import share_definitions
    from evalops.services.reports.audit import stored_document
    from evalops.store.engine import make_engine, read_session
    from evalops.store.tables import GateDecision

    db = demo_master / ".evalops" / "registry.db"
    engine = make_engine(f"sqlite:///{db}")
    try:
        with read_session(engine) as session:
            share_definitions(session)
            rows = session.exec(select(GateDecision).order_by(col(GateDecision.number))).all()
            documents = [stored_document(session, r, now=parse_timestamp(PINNED_NOW)) for r in rows]
            kept = session.info["evalops.report.task_facts"]
            builds = {r.execution_digest for r in rows}
    finally:
        engine.dispose()
    revisions = {
        (t["task_id"], t["task_digest"], t["grader_set_digest"])
        for d in documents
        for t in d["inputs"]["tasks"]
    }
    assert len(builds) >= 2 and len(documents) > len(builds)
    assert len(kept) == len(revisions)
    with sqlite3.connect(db) as con:
        for d in documents:
            build = d["inputs"]["execution_digest"]
            for t in d["tasks"]:
                pinned = (build, t["task_id"], t["task_digest"], t["grader_set_digest"])
                stored = con.execute(
                    "SELECT DISTINCT eval_case_digest FROM trial WHERE execution_digest = ? "
                    "AND task_id = ? AND task_digest = ? AND grader_set_digest = ?",
                    pinned,
                ).fetchall()
                assert stored == [(t["eval_case_digest"],)], (d["gate_id"], t["task_id"])
