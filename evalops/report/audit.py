"""Render a report document as HTML, Markdown or JSON.

HTML is one self-contained file (inline stylesheet and SVG, no script, a restrictive CSP);
Markdown fits a pull-request comment (GitHub refuses comments over 65,536 characters, so
long tables are cut, rows whole, with a note); JSON is the document itself.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from evalops.report.render import FORMATS, render
from evalops.report.svg import kind_of_decision

if TYPE_CHECKING:
    from evalops.report.document import ReportDocument


COMMENT_LIMIT = 65_536
"""GitHub's limit for a pull-request comment, in characters."""
HTML_TRIAL_ROWS = 500
"""Notable trials listed in the HTML report; the JSON report has every one."""
_MIN_ROW_CHARS = 24


def to_json(doc: Mapping[str, Any]) -> str:
    """Indented JSON; text that cannot be UTF-8 (a lone surrogate) is written escaped."""
    text = json.dumps(doc, indent=2, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(doc, indent=2, ensure_ascii=True)
    return text + "\n"


def _longest(doc: ReportDocument) -> int:
    waivers: Mapping[str, Any] = doc.get("waivers") or {}
    return max(
        len(doc.get("tasks", [])),
        len(doc.get("trials", [])),
        len(doc.get("reasons", [])),
        len(doc.get("calibration", [])),
        *(len(v) for v in waivers.values()),
        1,
    )


def markdown(doc: ReportDocument, *, limit: int = COMMENT_LIMIT) -> str:
    """The Markdown report, cut (whole rows, with a note) to at most `limit` characters."""
    full = render("audit.md.j2", doc=doc, limit=_longest(doc), truncated=False)
    if len(full) <= limit:
        return full
    # Cut every long table to the same number of rows: the largest that fits.
    lo, hi = 0, min(_longest(doc), limit // _MIN_ROW_CHARS)
    best = render("audit.md.j2", doc=doc, limit=0, truncated=True)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        text = render("audit.md.j2", doc=doc, limit=mid, truncated=True)
        if len(text) <= limit:
            lo, best = mid, text
        else:
            hi = mid - 1
    if len(best) > limit:
        raise ValueError("the report's summary alone exceeds the comment limit")
    return best


def html(doc: ReportDocument) -> str:
    return render(
        "audit.html.j2",
        doc=doc,
        kind=kind_of_decision(str(doc.get("decision"))),
        trial_limit=HTML_TRIAL_ROWS,
    )


def render_audit(doc: ReportDocument, fmt: str) -> str:
    """The audit report of `doc` in `fmt` (html, md or json)."""
    if fmt == "html":
        return html(doc)
    if fmt == "md":
        return markdown(doc)
    if fmt == "json":
        return to_json(doc)
    raise ValueError(f"format {fmt!r} is not one of {', '.join(FORMATS)}")
