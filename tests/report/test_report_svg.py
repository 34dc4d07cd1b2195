"""The suite card's small multiples: one panel per task, each with its whole name, a
labelled pass^k axis and every bar numbered (the build key names each number) and valued;
an estimate's intervals, every label drawn whole."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import html5lib

from evalops.report.svg import class_breakdown, history, intervals, pass_hat_k, small_multiples

LONG = "article-publish-approved-revision-needs-legal-sign-off"
SVG = "{http://www.w3.org/2000/svg}"
BUILDS = [{"build": "build-124", "gate_id": "GATE-1"}, {"build": "build-125", "gate_id": "GATE-3"}]
# A monospace font advances at most 0.62 em a character (DejaVu Sans Mono 0.602, Liberation
# Mono 0.600); chart labels are 12 px monospace (templates/report.css, `svg .lbl`).
MONO_ADVANCE_PX = 12 * 0.62


def _chart() -> ET.Element:
    series = [
        {
            "task_id": task,
            "points": [
                {"build": "build-124", "passHatK": 0.4, "state": "task_pass"},
                {"build": "build-125", "passHatK": 1.0, "state": "task_pass"},
            ],
        }
        for task in (LONG, "support-refund-in-order")
    ]
    return _html(str(small_multiples("sm", series, BUILDS)))


def _html(text: str) -> ET.Element:
    """The markup inside a wrapping <div> (HTML: `<wbr>` is a void element, not XML)."""
    fragment = html5lib.parseFragment(f"<div>{text}</div>", namespaceHTMLElements=False)
    root: ET.Element = fragment[0]
    return root


def _texts(node: ET.Element) -> list[str]:
    return [t.text or "" for t in node.iter(f"{SVG}text")]


def test_a_long_task_name_is_shown_whole_as_an_id_that_wraps_at_separators() -> None:
    panels = _chart().findall(".//figure")
    assert len(panels) == 2
    caption = panels[0].find("figcaption")
    assert caption is not None
    assert "".join(caption.itertext()) == LONG
    ident = caption.find("span")
    assert ident is not None and ident.get("class") == "id"
    assert len(ident.findall("wbr")) == LONG.count("-")
    assert not any("…" in t for t in _texts(panels[0]))


def test_a_panel_has_the_same_elements_whatever_its_task_is_called() -> None:
    def shape(task: str) -> list[str]:
        series = [{"task_id": task, "points": [{"build": "b", "passHatK": 1.0, "state": "x"}]}]
        chart = _html(str(small_multiples("sm", series, [{"build": "b"}])))
        return [e.tag for e in chart.iter() if e.tag != "wbr"]

    assert shape("t") == shape(LONG * 3) == shape("<b>a-b_c/d e</b>")


def test_each_panel_labels_pass_hat_k_and_numbers_and_values_every_bar() -> None:
    chart = _chart()
    for panel in chart.findall(".//figure"):
        texts = _texts(panel)
        assert {"pass^k", "0", "0.5", "1", "builds, oldest first"} <= set(texts)
        assert "1" in texts and "2" in texts  # each bar's build number
        assert "0.40" in texts and "1.00" in texts  # each bar's value
        assert len(list(panel.iter(f"{SVG}rect"))) == 2
    key = chart.find(".//ol[@class='build-key']")
    assert key is not None
    assert ["".join(li.itertext()) for li in key] == ["build-124 (GATE-1)", "build-125 (GATE-3)"]


def test_panels_are_never_drawn_smaller_than_their_text_needs() -> None:
    """Each panel's SVG has its own size (a phone shows it one to a row, unscaled): wide
    enough for its axis caption at 12 px, whatever the number of builds."""
    for builds in (1, 2, 8):
        series = [
            {"task_id": "t", "points": [{"build": str(i), "passHatK": 0.5} for i in range(builds)]}
        ]
        chart = _html(
            str(small_multiples("sm", series, [{"build": str(i)} for i in range(builds)]))
        )
        svg = chart.find(f".//{SVG}svg")
        assert svg is not None
        width = float(svg.get("width", 0))
        assert width >= 44 + 7 * len("builds, oldest first")
        assert width <= 360, "fits a 390 px phone without shrinking"


def test_bar_charts_are_html_rows_with_every_bar_labelled_and_valued() -> None:
    tasks = [
        {"task_id": "a-b", "passHatK": 0.25, "state": "task_fail"},
        {"task_id": "c", "passHatK": None, "state": "missing_required_evidence"},
    ]
    rows = _html(str(pass_hat_k("phk", tasks))).findall("div/div")
    assert ["".join(r.find("span").itertext()) for r in rows] == ["c", "a-b"]
    assert [r.findall("span")[-1].text for r in rows] == ["n < k", "0.25"]
    assert rows[1].find(f"{SVG}svg/{SVG}rect").get("width") == "25"
    classes = _html(str(class_breakdown("cls", [{"classification": "task_fail", "trials": 4}])))
    assert classes.find("div/div/span[@class='bar-val']").text == "4"


def test_history_is_a_wrapping_list_oldest_first_naming_gate_and_build() -> None:
    decisions = [
        {"gate_id": "GATE-1", "decision": "block", "build": "acme-bot-40"},
        {"gate_id": "GATE-2", "decision": "pass", "build": "acme-bot-41"},
    ]
    items = _html(str(history("hist", decisions, "GATE-2"))).findall("ol/li")
    assert ["".join(i.itertext()) for i in items] == [
        "BLOCKGATE-1acme-bot-40",
        "PASSGATE-2acme-bot-41",
    ]
    assert items[1].get("class") == "k-pass cur"


def test_every_interval_label_is_drawn_whole_inside_its_chart() -> None:
    """An estimate's rates are named by trial classes as long as
    `missing_required_evidence`, strata and estimates by any id: an SVG shows nothing of a
    label past its edge, so each must fit the chart whole (44 characters at most)."""
    labels = [
        "pass",
        "ambiguous_external_effect",
        "missing_required_evidence",
        "EST-12 build-2026-12-06-rc1",
        "x" * 60,
    ]
    rows = [{"label": label, "rate": 0.5, "low": 0.1, "high": 0.9} for label in labels]
    svg = _html(str(intervals("iv", "Rates", rows))).find(f"{SVG}svg")
    assert svg is not None
    width = float(svg.get("width", 0))
    drawn = [t for t in svg.iter(f"{SVG}text") if t.get("class") == "lbl"]
    names = [t.text for t in drawn if t.text not in ("0", "0.5", "1")]
    assert names == [*labels[:-1], "x" * 43 + "…"]
    for text in drawn:
        extent = len(text.text or "") * MONO_ADVANCE_PX
        shift = {"start": 0.0, "middle": extent / 2, "end": extent}[
            text.get("text-anchor", "start")
        ]
        left = float(text.get("x", 0)) - shift
        assert left >= 0 and left + extent <= width, (text.text, left, extent, width)


def test_a_pass_hat_k_of_zero_still_shows_its_state_s_colour() -> None:
    """A task that failed every time in a build has pass^k 0: its bar is drawn at a few
    pixels, in its state's colour class, so "failed" and "evidence missing" stay told apart
    where a bar of no height showed neither; its value still reads 0.00."""
    series = [
        {
            "task_id": "t",
            "points": [
                {"build": "build-124", "passHatK": 0.0, "state": "task_fail"},
                {"build": "build-125", "passHatK": 0.0, "state": "missing_required_evidence"},
            ],
        }
    ]
    chart = _html(str(small_multiples("sm", series, BUILDS)))
    rects = list(chart.iter(f"{SVG}rect"))
    assert [r.get("class") for r in rects] == ["k-fail", "k-hold"]
    assert all(float(r.get("height") or 0) >= 3 for r in rects)
    assert _texts(chart).count("0.00") == 2


def test_the_failed_and_evidence_missing_colours_are_apart() -> None:
    """The two colours a reader must tell apart on a chart differ in hue by more than a
    shade: WCAG's contrast of each on white is at least 4.5, and their hues are at least
    60 degrees apart (the brown and ochre of before were 10 degrees apart)."""
    import colorsys
    import re
    from pathlib import Path

    css = (Path(__file__).parents[2] / "templates" / "report.css").read_text(encoding="utf-8")
    colours = dict(re.findall(r"--(fail|hold):#([0-9a-f]{6})", css))

    def rgb(hex_: str) -> tuple[float, float, float]:
        return tuple(int(hex_[i : i + 2], 16) / 255 for i in (0, 2, 4))  # type: ignore[return-value]

    def luminance(c: tuple[float, float, float]) -> float:
        lin = [x / 12.92 if x <= 0.04045 else ((x + 0.055) / 1.055) ** 2.4 for x in c]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]

    for name in ("fail", "hold"):
        assert 1.05 / (luminance(rgb(colours[name])) + 0.05) >= 4.5, name
    hues = [colorsys.rgb_to_hsv(*rgb(colours[n]))[0] * 360 for n in ("fail", "hold")]
    apart = abs(hues[0] - hues[1])
    assert min(apart, 360 - apart) >= 60, hues
