"""Render a suite card document (members, coverage, calibration, recent decisions, pass^k
across builds with flaky tasks called out) as HTML, Markdown or JSON."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evalops.report.audit import COMMENT_LIMIT, to_json
from evalops.report.render import FORMATS, render


def render_suite_card(doc: Mapping[str, Any], fmt: str) -> str:
    if fmt == "html":
        return render("suite.html.j2", doc=doc)
    if fmt == "md":
        text = render("suite.md.j2", doc=doc, limit=len(doc.get("members", [])) + 1)
        if len(text) > COMMENT_LIMIT:
            text = render("suite.md.j2", doc=doc, limit=200)
        return text
    if fmt == "json":
        return to_json(doc)
    raise ValueError(f"format {fmt!r} is not one of {', '.join(FORMATS)}")
