"""Render a report document as HTML, Markdown or JSON.

HTML is one self-contained file (inline stylesheet and SVG, no script, a restrictive CSP);
Markdown fits a pull-request comment (GitHub refuses comments over 65,536 characters, so
long tables are cut, rows whole, with a note); JSON is the document itself.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from evalops.report.render import FORMATS, render
from evalops.report.rows import is_spooled
from evalops.report.svg import kind_of_decision

if TYPE_CHECKING:
    from evalops.report.document import ReportDocument


COMMENT_LIMIT = 65_536
"""GitHub's limit for a pull-request comment, in characters."""
HTML_TRIAL_ROWS = 500
"""Notable trials listed in the HTML report; the JSON report has every one."""
_MIN_ROW_CHARS = 24


class _Streamed(list[Any]):
    """Rows read back from disk (`report/rows.py`), as the JSON encoder sees a list: it
    asks whether the list is empty and iterates it, so each row is read, written and let
    go in turn (the encoder of an indented document is the pure-Python one, which takes
    any `list` instance; nothing else sees this type)."""

    def __init__(self, rows: Sequence[Any]) -> None:
        super().__init__()
        self.rows = rows

    def __iter__(self) -> Iterator[Any]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def __bool__(self) -> bool:
        return len(self.rows) > 0


def _streamed(value: Any) -> list[Any]:
    if is_spooled(value):
        return _Streamed(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_SURROGATE = re.compile("[\ud800-\udfff]")
_END = object()


def _has_surrogate(value: Any) -> bool:
    """Whether any text of `value` (keys too) holds a lone surrogate, which UTF-8 cannot
    encode (the JSON report then escapes every non-ASCII character). Depth first, one
    iterator per level, so rows read back from disk are read one at a time."""
    stack: list[Iterator[Any]] = [iter((value,))]
    while stack:
        item = next(stack[-1], _END)
        if item is _END:
            stack.pop()
        elif isinstance(item, str):
            if not item.isascii() and _SURROGATE.search(item):
                return True
        elif isinstance(item, Mapping):
            stack.append(iter([*(k for k in item if isinstance(k, str)), *item.values()]))
        elif isinstance(item, list | tuple) or is_spooled(item):
            stack.append(iter(item))
    return False


def json_chunks(doc: Mapping[str, Any]) -> Iterator[str]:
    """`to_json(doc)` a piece at a time, so a report of any size is written as it is
    encoded: indented JSON; text that cannot be UTF-8 (a lone surrogate) is written
    escaped."""
    encoder = json.JSONEncoder(indent=2, ensure_ascii=_has_surrogate(doc), default=_streamed)
    parts: list[str] = []
    for part in encoder.iterencode(doc):
        parts.append(part)
        if len(parts) >= 4096:
            yield "".join(parts)
            parts = []
    parts.append("\n")
    yield "".join(parts)


def to_json(doc: Mapping[str, Any]) -> str:
    """Indented JSON; text that cannot be UTF-8 (a lone surrogate) is written escaped."""
    return "".join(json_chunks(doc))


def _longest(doc: ReportDocument) -> int:
    waivers: Mapping[str, Any] = doc.get("waivers") or {}
    return max(
        len(doc.get("tasks", [])),
        len(doc.get("trials", [])),
        len(doc.get("reasons", [])),
        len(doc.get("calibration", [])),
        len((doc.get("authority") or {}).get("acts", [])),
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


def audit_chunks(doc: ReportDocument, fmt: str) -> Iterator[str]:
    """`render_audit(doc, fmt)` a piece at a time: the JSON report as it is encoded (it
    lists every trial); HTML and Markdown, which list a bounded number, whole."""
    if fmt == "json":
        yield from json_chunks(doc)
    else:
        yield render_audit(doc, fmt)


def render_audit(doc: ReportDocument, fmt: str) -> str:
    """The audit report of `doc` in `fmt` (html, md or json)."""
    if fmt == "html":
        return html(doc)
    if fmt == "md":
        return markdown(doc)
    if fmt == "json":
        return to_json(doc)
    raise ValueError(f"format {fmt!r} is not one of {', '.join(FORMATS)}")
