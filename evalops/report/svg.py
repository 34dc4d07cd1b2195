"""Inline SVG charts for the HTML reports: no script, no external reference, no style
attribute (the page's CSP allows only its own stylesheet), every text escaped.

Colours come from CSS classes (`k-pass`, `k-hold`, `k-block`, `k-fail`, `k-none`), and every
bar also carries its number as text, so a chart reads in grey print and to a screen reader.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from markupsafe import Markup

from evalops.report.text import visible

EVIDENCE_BLOCKED = (
    "ambiguous_external_effect",
    "missing_required_evidence",
    "grader_invalid",
    "infrastructure_invalid",
)
LABEL_CHARS = 44


def kind_of_class(classification: str) -> str:
    """The colour class of a trial or task class."""
    if classification == "task_pass":
        return "k-pass"
    if classification == "hard_constraint_fail":
        return "k-block"
    if classification in EVIDENCE_BLOCKED:
        return "k-hold"
    return "k-fail"


def kind_of_decision(decision: str) -> str:
    return {"pass": "k-pass", "hold": "k-hold", "block": "k-block"}.get(decision, "k-none")


def _t(value: Any) -> str:
    return escape(visible(value), quote=True)


def _label(value: Any, chars: int = LABEL_CHARS) -> str:
    text = visible(value)
    return text if len(text) <= chars else text[: chars - 1] + "…"


def _frame(chart_id: str, title: str, width: int, height: int, body: list[str]) -> Markup:
    return Markup(
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" '
        f'role="img" aria-labelledby="{chart_id}-t"><title id="{chart_id}-t">{_t(title)}</title>'
        + "".join(body)
        + "</svg>"
    )


def class_breakdown(chart_id: str, by_class: Sequence[Mapping[str, Any]]) -> Markup:
    """Trials per primary class, one horizontal bar each."""
    rows = list(by_class)
    width, label_w, row_h = 640, 220, 22
    top = max((int(r["trials"]) for r in rows), default=0) or 1
    height = max(row_h * len(rows) + 8, 30)
    body: list[str] = []
    if not rows:
        body.append('<text x="8" y="20" class="note">no trials</text>')
    for i, r in enumerate(rows):
        y = 4 + i * row_h
        w = round((width - label_w - 60) * int(r["trials"]) / top, 1)
        body.append(
            f'<text x="{label_w - 6}" y="{y + 15}" class="lbl" text-anchor="end">'
            f"{_t(r['classification'])}</text>"
            f'<rect x="{label_w}" y="{y + 3}" width="{w}" height="{row_h - 6}" '
            f'class="{kind_of_class(str(r["classification"]))}"/>'
            f'<text x="{label_w + w + 6}" y="{y + 15}" class="val">{int(r["trials"])}</text>'
        )
    return _frame(chart_id, "Trials by primary classification", width, height, body)


def pass_hat_k(chart_id: str, tasks: Sequence[Mapping[str, Any]], limit: int = 40) -> Markup:
    """pass^k per task, lowest first (tasks without enough trials first of all)."""
    ordered = sorted(
        tasks,
        key=lambda t: (
            t.get("passHatK") is not None,
            t.get("passHatK") or 0.0,
            str(t["task_id"]),
        ),
    )
    shown = ordered[:limit]
    width, label_w, row_h = 640, 300, 20
    height = row_h * len(shown) + (24 if len(ordered) > limit else 8)
    body: list[str] = []
    for i, t in enumerate(shown):
        y = 4 + i * row_h
        value = t.get("passHatK")
        w = round((width - label_w - 60) * float(value), 1) if value is not None else 0
        text = f"{float(value):.2f}" if value is not None else "n < k"
        body.append(
            f'<text x="{label_w - 6}" y="{y + 14}" class="lbl" text-anchor="end">'
            f"{_t(_label(t['task_id']))}</text>"
            f'<rect x="{label_w}" y="{y + 3}" width="{w}" height="{row_h - 6}" '
            f'class="{kind_of_class(str(t.get("state")))}"/>'
            f'<text x="{label_w + w + 6}" y="{y + 14}" class="val">{_t(text)}</text>'
        )
    if len(ordered) > limit:
        body.append(
            f'<text x="8" y="{height - 6}" class="note">the {limit} lowest of {len(ordered)} '
            "tasks; every task is in the table</text>"
        )
    if not shown:
        height = 30
        body.append('<text x="8" y="20" class="note">no member tasks</text>')
    return _frame(chart_id, "pass^k per task, lowest first", width, height, body)


def history(chart_id: str, decisions: Sequence[Mapping[str, Any]], current: str | None) -> Markup:
    """The suite's decisions, oldest first: one labelled box each, naming its build (cut to
    fit; the whole name in the box's tooltip)."""
    box, gap = 104, 6
    width = max(len(decisions) * (box + gap) + gap, 200)
    height = 84
    body: list[str] = []
    for i, d in enumerate(decisions):
        x = gap + i * (box + gap)
        mark = " cur" if d.get("gate_id") == current else ""
        body.append(
            f'<rect x="{x}" y="6" width="{box}" height="34" rx="3" '
            f'class="{kind_of_decision(str(d.get("decision")))}{mark}">'
            f"<title>{_t(d.get('gate_id', ''))}: {_t(d.get('build', ''))}</title></rect>"
            f'<text x="{x + box / 2}" y="28" class="dec" text-anchor="middle">'
            f"{_t(str(d.get('decision', '')).upper())}</text>"
            f'<text x="{x + box / 2}" y="56" class="lbl" text-anchor="middle">'
            f"{_t(d.get('gate_id', ''))}</text>"
            f'<text x="{x + box / 2}" y="74" class="val" text-anchor="middle">'
            f"{_t(_label(d.get('build', ''), 14))}</text>"
        )
    if not decisions:
        body.append('<text x="8" y="20" class="note">no decisions</text>')
    return _frame(chart_id, "Decision history of the suite, oldest first", width, height, body)


# Lines of a task's name a small-multiples panel has room for: four lines of a panel's
# width hold about 120 characters; a longer name is whole in the panel's title.
NAME_LINES = 4


def _panel_axes(x0: float, x1: float, top: float, base: float, builds: Sequence[Any]) -> str:
    """A panel's axes: pass^k 0 to 1 along y (ticks at 0, 0.5 and 1), the builds along x,
    oldest at the left (the first and last named; every bar's title names its build)."""
    mid = (top + base) / 2
    ticks = "".join(
        f'<line x1="{x0 - 3}" y1="{y:.1f}" x2="{x0}" y2="{y:.1f}" class="axis"/>'
        f'<text x="{x0 - 5}" y="{y + 3:.1f}" class="note" text-anchor="end">{label}</text>'
        for y, label in ((base, "0"), (mid, "0.5"), (top, "1"))
    )
    out = (
        f'<line x1="{x0}" y1="{top:.1f}" x2="{x0}" y2="{base}" class="axis"/>{ticks}'
        f'<text x="{x0 - 26}" y="{mid:.1f}" class="note" text-anchor="middle" '
        f'transform="rotate(-90 {x0 - 26} {mid:.1f})">pass^k</text>'
    )
    if builds:
        first, last = builds[0].get("build"), builds[-1].get("build")
        out += f'<text x="{x0}" y="{base + 11}" class="note">{_t(_label(first, 14))}</text>' + (
            f'<text x="{x1}" y="{base + 11}" class="note" text-anchor="end">'
            f"{_t(_label(last, 14))}</text>"
            if len(builds) > 1
            else ""
        )
    out += (
        f'<text x="{(x0 + x1) / 2:.1f}" y="{base + 22}" class="note" text-anchor="middle">'
        "builds, oldest first</text>"
    )
    return out


def small_multiples(
    chart_id: str, series: Sequence[Mapping[str, Any]], builds: Sequence[Mapping[str, Any]]
) -> Markup:
    """pass^k of every task across the shown builds: one small panel per task, its full
    name on top (HTML the browser wraps), pass^k from 0 to 1 up the y axis and the builds
    along x."""
    cols = 3
    panel_w, bar_area, line_h, left = 210, 56, 12, 40
    n_builds = max(len(builds), 1)
    # The name is HTML inside the panel, so the browser wraps it at any width and the
    # panel's structure never depends on what the name says (room for NAME_LINES lines).
    name_h = line_h * NAME_LINES
    panel_h = name_h + bar_area + 44
    rows = (len(series) + cols - 1) // cols
    width, height = cols * panel_w, max(rows * panel_h, 30)
    body: list[str] = []
    for i, s in enumerate(series):
        px, py = (i % cols) * panel_w, (i // cols) * panel_h
        base = py + name_h + 14 + bar_area
        x0, x1 = px + left, px + panel_w - 8
        name = (
            f'<foreignObject x="{px + 8}" y="{py + 5}" width="{panel_w - 16}" '
            f'height="{name_h + 2}"><div xmlns="http://www.w3.org/1999/xhtml" class="pname">'
            f"{_t(s['task_id'])}</div></foreignObject>"
        )
        body.append(
            f"<g><title>{_t(s['task_id'])}</title>"
            f'<rect x="{px + 2}" y="{py + 2}" width="{panel_w - 4}" height="{panel_h - 4}" '
            f'class="panel"/>{name}'
            f'<line x1="{x0}" y1="{base}" x2="{x1}" y2="{base}" class="axis"/>'
            + _panel_axes(x0, x1, base - (bar_area - 12), base, s.get("points", []))
            + "</g>"
        )
        bar_w = (x1 - x0) / n_builds
        for j, p in enumerate(s.get("points", [])):
            value = p.get("passHatK")
            x = x0 + j * bar_w
            if value is None:
                body.append(
                    f'<text x="{x + bar_w / 2:.1f}" y="{base - 2}" class="note" '
                    'text-anchor="middle">–</text>'
                )
                continue
            h = round((bar_area - 12) * float(value), 1)
            body.append(
                f'<rect x="{x + 1:.1f}" y="{base - h:.1f}" width="{max(bar_w - 2, 1):.1f}" '
                f'height="{h}" class="{kind_of_class(str(p.get("state")))}">'
                f"<title>{_t(p.get('build'))}: pass^k {float(value):.2f}</title></rect>"
                f'<text x="{x + bar_w / 2:.1f}" y="{base - h - 3:.1f}" class="val" '
                f'text-anchor="middle">{float(value):.2f}</text>'
            )
    if not series:
        body.append('<text x="8" y="20" class="note">no member tasks</text>')
    return _frame(chart_id, "pass^k per task across the last builds", width, height, body)


def intervals(chart_id: str, title: str, rows: Sequence[Mapping[str, Any]]) -> Markup:
    """One line per rate on a 0-1 axis: its interval as a bar and the estimate as a point,
    the numbers as text (a row without an interval shows the point alone, and says so)."""
    width, label_w, row_h, right = 640, 200, 22, 150
    span = width - label_w - right
    height = max(row_h * len(rows) + 26, 48)
    body: list[str] = [
        f'<line x1="{label_w}" y1="{height - 18}" x2="{label_w + span}" y2="{height - 18}" '
        'class="axis"/>',
        f'<text x="{label_w}" y="{height - 4}" class="lbl" text-anchor="middle">0</text>',
        f'<text x="{label_w + span / 2}" y="{height - 4}" class="lbl" '
        'text-anchor="middle">0.5</text>',
        f'<text x="{label_w + span}" y="{height - 4}" class="lbl" text-anchor="middle">1</text>',
    ]
    for i, r in enumerate(rows):
        y = 4 + i * row_h
        x = round(label_w + span * float(r["rate"]), 1)
        body.append(
            f'<text x="{label_w - 6}" y="{y + 14}" class="lbl" text-anchor="end">'
            f"{_t(_label(r['label']))}</text>"
        )
        if r.get("low") is not None and r.get("high") is not None:
            x0 = round(label_w + span * float(r["low"]), 1)
            x1 = round(label_w + span * float(r["high"]), 1)
            body.append(
                f'<rect x="{x0}" y="{y + 7}" width="{max(x1 - x0, 1)}" height="6" class="k-none"/>'
            )
            text = f"{float(r['rate']):.3f} ({float(r['low']):.3f}-{float(r['high']):.3f})"
        else:
            text = f"{float(r['rate']):.3f} (no interval)"
        body.append(
            f'<circle cx="{x}" cy="{y + 10}" r="4" class="k-pass"/>'
            f'<text x="{label_w + span + 8}" y="{y + 14}" class="val">{_t(text)}</text>'
        )
    return _frame(chart_id, title, width, height, body)
