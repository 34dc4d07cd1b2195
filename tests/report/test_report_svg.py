"""The suite card's small multiples: labelled axes and full task names."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from evalops.report.svg import small_multiples

LONG = "article-publish-approved-revision-needs-legal-sign-off"
SVG = "{http://www.w3.org/2000/svg}"


def _chart() -> ET.Element:
    builds = [{"build": "build-124"}, {"build": "build-125"}]
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
    return ET.fromstring(str(small_multiples("sm", series, builds)))


def _texts(node: ET.Element) -> list[str]:
    return [t.text or "" for t in node.iter(f"{SVG}text")]


def test_a_long_task_name_is_shown_whole_and_as_the_panel_title() -> None:
    panels = _chart().findall(f"{SVG}g")
    assert len(panels) == 2
    first = panels[0]
    assert first.findtext(f"{SVG}title") == LONG
    # Shown as HTML the browser wraps: the whole name, one element, never cut.
    shown = [d.text for d in first.iter("{http://www.w3.org/1999/xhtml}div")]
    assert shown == [LONG]
    assert not any("…" in t for t in _texts(first))


def test_a_panel_has_the_same_elements_whatever_its_task_is_called() -> None:
    def shape(task: str) -> list[str]:
        series = [{"task_id": task, "points": [{"build": "b", "passHatK": 1.0, "state": "x"}]}]
        chart = ET.fromstring(str(small_multiples("sm", series, [{"build": "b"}])))
        return [e.tag for e in chart.iter()]

    assert shape("t") == shape(LONG * 3) == shape("<b>a-b_c/d e</b>")


def test_each_panel_labels_pass_hat_k_from_0_to_1_and_the_builds_along_x() -> None:
    for panel in _chart().findall(f"{SVG}g"):
        texts = _texts(panel)
        assert {"pass^k", "0", "0.5", "1"} <= set(texts)
        assert "build-124" in texts and "build-125" in texts
        assert "builds, oldest first" in texts


def test_the_one_tick_is_at_the_top_of_a_full_bar() -> None:
    chart = _chart()
    panel = chart.findall(f"{SVG}g")[0]
    one = next(t for t in panel.iter(f"{SVG}text") if t.text == "1")
    bars = [r for r in chart.iter(f"{SVG}rect") if r.findtext(f"{SVG}title", "").endswith("1.00")]
    full = bars[0]
    assert abs(float(one.get("y", 0)) - 3 - float(full.get("y", 0))) < 0.05
