"""Inline SVG for the site pages: pass^k of each task across builds, with labelled axes and
a legend. Like `svg`: no script, no style attribute, colours from CSS classes, every text
escaped; each point also carries its value in a `<title>`, and the page lists every value in
a table, so nothing is said only by colour."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from markupsafe import Markup

from evalops.report.svg import clip, esc, kind_of_class, svg_frame

PANEL_W, PANEL_H = 320, 170
PLOT_LEFT, PLOT_TOP, PLOT_BOTTOM, PLOT_RIGHT = 40, 26, 58, 12
LEGEND_H = 44
MAX_TICK_LABELS = 10
LEGEND = (
    ("k-pass", "task passed (task_pass)"),
    ("k-fail", "failed (task_fail, agent or runtime error)"),
    ("k-block", "hard constraint failed"),
    ("k-hold", "evidence missing or invalid"),
)


def _legend(width: int) -> list[str]:
    body = []
    x, y = 8, 14
    for cls, text in LEGEND:
        if x + 14 + 7 * len(text) > width:
            x, y = 8, y + 18
        body.append(
            f'<rect x="{x}" y="{y - 9}" width="10" height="10" class="{cls}"/>'
            f'<text x="{x + 14}" y="{y}" class="val">{esc(text)}</text>'
        )
        x += 14 + 7 * len(text) + 14
    return body


def _axes(px: int, py: int, plot_w: int, plot_h: int) -> list[str]:
    x0, y0 = px + PLOT_LEFT, py + PLOT_TOP
    body = [
        f'<line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y0 + plot_h}" class="axis"/>'
        f'<line x1="{x0}" y1="{y0 + plot_h}" x2="{x0 + plot_w}" y2="{y0 + plot_h}" class="axis"/>'
    ]
    for value in (0.0, 0.5, 1.0):
        y = y0 + plot_h - plot_h * value
        body.append(
            f'<line x1="{x0 - 3}" y1="{y:.1f}" x2="{x0 + plot_w}" y2="{y:.1f}" class="grid"/>'
            f'<text x="{x0 - 5}" y="{y + 4:.1f}" class="val" text-anchor="end">{value:g}</text>'
        )
    cy = y0 + plot_h / 2
    body.append(
        f'<text x="{px + 10}" y="{cy:.1f}" class="val" text-anchor="middle" '
        f'transform="rotate(-90 {px + 10} {cy:.1f})">pass^k</text>'
    )
    return body


def _x_ticks(
    px: int, py: int, plot_w: int, plot_h: int, builds: Sequence[Mapping[str, Any]]
) -> list[str]:
    n = len(builds)
    step = max(1, -(-n // MAX_TICK_LABELS))
    body = []
    base = py + PLOT_TOP + plot_h
    for j, b in enumerate(builds):
        if j % step and j != n - 1:
            continue
        x = px + PLOT_LEFT + _x(j, n, plot_w)
        body.append(
            f'<text x="{x:.1f}" y="{base + 12}" class="val" text-anchor="end" '
            f'transform="rotate(-35 {x:.1f} {base + 12})">{esc(clip(b["build"], 12))}</text>'
        )
    body.append(
        f'<text x="{px + PLOT_LEFT + plot_w / 2:.1f}" y="{py + PANEL_H - 4}" class="val" '
        'text-anchor="middle">build, oldest to newest</text>'
    )
    return body


def _x(j: int, n: int, plot_w: int) -> float:
    return plot_w / 2 if n <= 1 else 6 + (plot_w - 12) * j / (n - 1)


def _series(
    px: int, py: int, plot_w: int, plot_h: int, points: Sequence[Mapping[str, Any]]
) -> list[str]:
    n = len(points)
    body: list[str] = []
    run: list[str] = []
    marks: list[str] = []
    for j, p in enumerate(points):
        value = p.get("passHatK")
        if value is None:
            if len(run) > 1:
                body.append(f'<polyline points="{" ".join(run)}" class="trend"/>')
            run = []
            continue
        x = px + PLOT_LEFT + _x(j, n, plot_w)
        y = py + PLOT_TOP + plot_h - plot_h * float(value)
        run.append(f"{x:.1f},{y:.1f}")
        marks.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" class="{kind_of_class(str(p.get("state")))}">'
            f"<title>{esc(p.get('build'))} ({esc(p.get('gate_id'))}): pass^k "
            f"{float(value):.2f}, {esc(p.get('state'))}</title></circle>"
        )
    if len(run) > 1:
        body.append(f'<polyline points="{" ".join(run)}" class="trend"/>')
    return body + marks


def trend(
    chart_id: str, series: Sequence[Mapping[str, Any]], builds: Sequence[Mapping[str, Any]]
) -> Markup:
    """One panel per task: pass^k (y, 0 to 1) of the latest decision of each build (x)."""
    cols = 2
    width = cols * PANEL_W
    rows = (len(series) + cols - 1) // cols
    height = LEGEND_H + max(rows * PANEL_H, 30)
    plot_w = PANEL_W - PLOT_LEFT - PLOT_RIGHT
    plot_h = PANEL_H - PLOT_TOP - PLOT_BOTTOM
    body = _legend(width)
    for i, s in enumerate(series):
        px, py = (i % cols) * PANEL_W, LEGEND_H + (i // cols) * PANEL_H
        body.append(
            f'<rect x="{px + 2}" y="{py + 2}" width="{PANEL_W - 4}" height="{PANEL_H - 4}" '
            'class="panel"/>'
            f'<text x="{px + 8}" y="{py + 16}" class="lbl">{esc(clip(s["task_id"], 40))}</text>'
        )
        body += _axes(px, py, plot_w, plot_h)
        body += _x_ticks(px, py, plot_w, plot_h, builds)
        body += _series(px, py, plot_w, plot_h, s.get("points", []))
    if not series:
        body.append(f'<text x="8" y="{LEGEND_H + 20}" class="note">no member tasks</text>')
    return svg_frame(chart_id, "pass^k per task across builds", width, height, body)
