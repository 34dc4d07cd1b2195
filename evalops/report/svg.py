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

from evalops.report.ids import ident
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


def esc(value: Any) -> str:
    return escape(visible(value), quote=True)


def clip(value: Any, chars: int = LABEL_CHARS) -> str:
    text = visible(value)
    return text if len(text) <= chars else text[: chars - 1] + "…"


def svg_frame(chart_id: str, title: str, width: int, height: int, body: list[str]) -> Markup:
    return Markup(
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" '
        f'role="img" aria-labelledby="{chart_id}-t"><title id="{chart_id}-t">{esc(title)}</title>'
        + "".join(body)
        + "</svg>"
    )


def _bar_rows(
    chart_id: str, title: str, rows: Sequence[tuple[str, float, str, str]], *, ids: bool
) -> Markup:
    """A horizontal bar chart as HTML rows, so it reads at any width: the label (an id wraps
    at its separators only), the bar (a scaled SVG rectangle: its length the value over the
    chart's range), and the value as text. `rows`: (label, fraction 0..1, colour class,
    value text)."""
    out = [f'<div class="bars" id="{chart_id}" role="img" aria-label="{esc(title)}">']
    for label, fraction, kind, value in rows:
        width = round(max(0.0, min(1.0, fraction)) * 100, 1)
        shown = _id_html(label) if ids else esc(label)
        out.append(
            f'<div class="bar-row"><span class="bar-label">{shown}</span>'
            '<svg class="bar" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 100 10" '
            'preserveAspectRatio="none" aria-hidden="true">'
            f'<rect x="0" y="0" width="{width:g}" height="10" class="{kind}"/></svg>'
            f'<span class="bar-val">{esc(value)}</span></div>'
        )
    out.append("</div>")
    return Markup("".join(out))


def _id_html(value: Any) -> str:
    return str(ident(value))


def class_breakdown(chart_id: str, by_class: Sequence[Mapping[str, Any]]) -> Markup:
    """Trials per primary class, one horizontal bar each, its count beside it."""
    rows = list(by_class)
    if not rows:
        return Markup(f'<p class="note" id="{chart_id}">no trials</p>')
    top = max(int(r["trials"]) for r in rows) or 1
    return _bar_rows(
        chart_id,
        "Trials by primary classification",
        [
            (
                str(r["classification"]),
                int(r["trials"]) / top,
                kind_of_class(str(r["classification"])),
                str(int(r["trials"])),
            )
            for r in rows
        ],
        ids=True,
    )


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
    if not shown:
        return Markup(f'<p class="note" id="{chart_id}">no member tasks</p>')
    chart = _bar_rows(
        chart_id,
        "pass^k per task, lowest first",
        [
            (
                str(t["task_id"]),
                float(t["passHatK"]) if t.get("passHatK") is not None else 0.0,
                kind_of_class(str(t.get("state"))),
                f"{float(t['passHatK']):.2f}" if t.get("passHatK") is not None else "n < k",
            )
            for t in shown
        ],
        ids=True,
    )
    if len(ordered) > limit:
        chart += Markup(
            f'<p class="note">the {limit} lowest of {len(ordered)} tasks; every task is in the '
            "table</p>"
        )
    return chart


def history(chart_id: str, decisions: Sequence[Mapping[str, Any]], current: str | None) -> Markup:
    """The suite's decisions, oldest first: one labelled box each (its verdict, gate id and
    whole build name), in rows that wrap at any width."""
    if not decisions:
        return Markup(f'<p class="note" id="{chart_id}">no decisions</p>')
    out = [f'<ol class="history" id="{chart_id}" aria-label="decision history, oldest first">']
    for d in decisions:
        mark = " cur" if d.get("gate_id") == current else ""
        kind = kind_of_decision(str(d.get("decision")))
        out.append(
            f'<li class="{kind}{mark}"><span class="dec">{esc(str(d.get("decision", "")).upper())}'
            f'</span><span class="gate">{_id_html(d.get("gate_id", ""))}</span>'
            f'<span class="build">{_id_html(d.get("build", ""))}</span></li>'
        )
    out.append("</ol>")
    return Markup("".join(out))


def build_key(builds: Sequence[Mapping[str, Any]]) -> str:
    """The numbers the panels' bars carry, with the build, decision and gate each stands for
    (oldest first, as the bars)."""
    items = "".join(
        f'<li><span class="id">{esc(b.get("build", ""))}</span>'
        + (
            f" ({esc(b['gate_id'])}{', ' + esc(b['decision']) if b.get('decision') else ''})"
            if b.get("gate_id")
            else ""
        )
        + "</li>"
        for b in builds
    )
    return f'<ol class="build-key">{items}</ol>'


PANEL_LEFT, PANEL_SLOT, PANEL_PLOT_H = 44, 30, 64


MIN_BAR_H = 3
"""The height (px) of a bar whose value is 0, so its colour, the task's state, is seen."""


def panel(
    task_id: Any, points: Sequence[Mapping[str, Any]], n_builds: int, title: str = "pass^k"
) -> str:
    """One task's panel: its whole name above (HTML, wraps at its separators), then an SVG
    drawn at its own size (never shrunk: its text stays 12 px) with pass^k 0 to 1 up the y
    axis and one bar per build along x, each bar numbered as the build key numbers its build
    and carrying its value ("–": no result in that build)."""
    slots = max(n_builds, 1)
    width = max(PANEL_LEFT + slots * PANEL_SLOT + 8, 190)
    top, base = 16, 16 + PANEL_PLOT_H
    height = base + 30
    x0, x1 = PANEL_LEFT, PANEL_LEFT + slots * PANEL_SLOT
    body = [
        f'<line x1="{x0}" y1="{top}" x2="{x0}" y2="{base}" class="axis"/>',
        f'<line x1="{x0}" y1="{base}" x2="{x1}" y2="{base}" class="axis"/>',
    ]
    mid_y = (top + base) / 2
    # Turned up the y axis, the title's baseline at x=12 keeps its glyphs' ascent (11 px at
    # 12 px) inside the chart, whose left edge clips what passes it.
    body.append(
        f'<text x="12" y="{mid_y:g}" class="note" text-anchor="middle" '
        f'transform="rotate(-90 12 {mid_y:g})">{esc(title)}</text>'
    )
    for tick, label in ((0.0, "0"), (0.5, "0.5"), (1.0, "1")):
        y = base - PANEL_PLOT_H * tick
        body.append(
            f'<line x1="{x0 - 3}" y1="{y:g}" x2="{x0}" y2="{y:g}" class="axis"/>'
            f'<text x="{x0 - 5}" y="{y + 4:g}" class="note" text-anchor="end">{label}</text>'
        )
    for j, p in enumerate(points):
        value = p.get("passHatK")
        x = x0 + j * PANEL_SLOT
        mid = x + PANEL_SLOT / 2
        body.append(
            f'<text x="{mid:g}" y="{base + 14}" class="note" text-anchor="middle">{j + 1}</text>'
        )
        if value is None:
            body.append(
                f'<text x="{mid:g}" y="{base - 3}" class="note" text-anchor="middle">–</text>'
            )
            continue
        # A pass^k of 0 still shows its state's colour: a bar of the least visible height.
        h = max(round(PANEL_PLOT_H * float(value), 1), MIN_BAR_H)
        body.append(
            f'<rect x="{x + 4:g}" y="{base - h:g}" width="{PANEL_SLOT - 8}" height="{h:g}" '
            f'class="{kind_of_class(str(p.get("state")))}">'
            f"<title>{esc(p.get('build'))}: pass^k {float(value):.2f}</title></rect>"
            f'<text x="{mid:g}" y="{max(base - h - 3, 11):g}" class="val" '
            f'text-anchor="middle">{float(value):.2f}</text>'
        )
    body.append(f'<text x="{x0}" y="{height - 2}" class="note">builds, oldest first</text>')
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="panel-chart" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{esc(title)} of {esc(task_id)} by build">' + "".join(body) + "</svg>"
    )
    return f'<figure class="panel"><figcaption>{_id_html(task_id)}</figcaption>{svg}</figure>'


def small_multiples(
    chart_id: str, series: Sequence[Mapping[str, Any]], builds: Sequence[Mapping[str, Any]]
) -> Markup:
    """pass^k of every task across the shown builds: one panel per task, as many to a row as
    the page has room for (one on a phone), then the key to the builds' numbers."""
    if not series:
        return Markup(f'<p class="note" id="{chart_id}">no member tasks</p>')
    panels = "".join(panel(s["task_id"], s.get("points", []), len(builds)) for s in series)
    return Markup(
        f'<div class="panels" id="{chart_id}">{panels}</div>'
        f'<p class="legend">Builds by number, oldest first:</p>{build_key(builds)}'
    )


def intervals(chart_id: str, title: str, rows: Sequence[Mapping[str, Any]]) -> Markup:
    """One line per rate on a 0-1 axis: its interval as a bar and the estimate as a point,
    the numbers as text (a row without an interval shows the point alone, and says so).
    Each row's label is written on a line of its own above its bar, from the left edge: a
    rate or stratum name (`ambiguous_external_effect`) is wider than any column beside the
    bars could be at a phone's width, and the chart would cut it off."""
    # Drawn at about a phone's width (365 px), so that on a 390 px screen it is not scaled
    # down and its labels and numbers stay readable; wider screens show it as drawn.
    width, left, row_h, right = 365, 6, 34, 125
    span = width - left - right
    height = max(row_h * len(rows) + 26, 48)
    body: list[str] = [
        f'<line x1="{left}" y1="{height - 18}" x2="{left + span}" y2="{height - 18}" '
        'class="axis"/>',
        f'<text x="{left}" y="{height - 4}" class="lbl" text-anchor="middle">0</text>',
        f'<text x="{left + span / 2}" y="{height - 4}" class="lbl" text-anchor="middle">0.5</text>',
        f'<text x="{left + span}" y="{height - 4}" class="lbl" text-anchor="middle">1</text>',
    ]
    for i, r in enumerate(rows):
        y = 4 + i * row_h
        x = round(left + span * float(r["rate"]), 1)
        body.append(f'<text x="0" y="{y + 11}" class="lbl">{esc(clip(r["label"]))}</text>')
        if r.get("low") is not None and r.get("high") is not None:
            x0 = round(left + span * float(r["low"]), 1)
            x1 = round(left + span * float(r["high"]), 1)
            body.append(
                f'<rect x="{x0}" y="{y + 19}" width="{max(x1 - x0, 1)}" height="6" class="k-none"/>'
            )
            text = f"{float(r['rate']):.3f} ({float(r['low']):.3f}-{float(r['high']):.3f})"
        else:
            text = f"{float(r['rate']):.3f} (no interval)"
        body.append(
            f'<circle cx="{x}" cy="{y + 22}" r="4" class="k-pass"/>'
            f'<text x="{left + span + 8}" y="{y + 26}" class="val">{esc(text)}</text>'
        )
    return svg_frame(chart_id, title, width, height, body)
