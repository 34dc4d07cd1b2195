"""The site's suite page chart: pass^k of each task across builds, one panel per task (the
audit report's panels, `svg.panel`): every bar numbered as the page's list of builds numbers
its build and carrying its value, so nothing is said only by colour or only on hover."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from markupsafe import Markup

from evalops.report.svg import panel


def trend(
    chart_id: str, series: Sequence[Mapping[str, Any]], builds: Sequence[Mapping[str, Any]]
) -> Markup:
    """One panel per task: pass^k (y, 0 to 1) of the latest decision of each build (x)."""
    if not series:
        return Markup(f'<p class="note" id="{chart_id}">no member tasks</p>')
    panels = "".join(panel(s["task_id"], s.get("points", []), len(builds)) for s in series)
    return Markup(f'<div class="panels" id="{chart_id}">{panels}</div>')
