"""Render the pages of the static registry site (docs/site.md) from their documents.

Pure functions over page documents, like every renderer here. Pages live one directory
below the index (`suites/`, `decisions/`, `tasks/`, `incidents/`, `waivers/`,
`calibrations/`), so every link is relative and the site works from a file system or any
static host. File names are made from ids by `slug`: every character outside
`[A-Za-z0-9-]` is written as `_XX` (its UTF-8 bytes in hex), so any id, however hostile,
gives a plain file name and an href that needs no escaping, and two ids never share one.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from evalops.report.audit import html as audit_html
from evalops.report.render import render

if TYPE_CHECKING:
    from evalops.report.document import ReportDocument


DIRECTORIES = {
    "suite": "suites",
    "decision": "decisions",
    "task": "tasks",
    "incident": "incidents",
    "waiver": "waivers",
    "calibration": "calibrations",
}
PAGES = ("index", *DIRECTORIES)
_SAFE = re.compile(r"[A-Za-z0-9-]")
SLUG_CHARS = 120
"""A longer escaped id is cut and suffixed with a digest of the whole id (file names are
limited to 255 bytes on common file systems)."""


@lru_cache(maxsize=8192)
def slug(ident: str) -> str:
    """A file name stem for `ident`: `[A-Za-z0-9-]` kept, every other character `_XX`.
    Cached: the site links every build's decision from every task page."""
    out = "".join(
        c if _SAFE.fullmatch(c) else "".join(f"_{b:02x}" for b in c.encode("utf-8", "replace"))
        for c in ident
    )
    if not out:
        return "_"
    if len(out) > SLUG_CHARS:
        # `_z` never begins an escape (those are hex), so a cut name never equals a whole one.
        out = out[:SLUG_CHARS] + "_z" + hashlib.sha256(ident.encode("utf-8")).hexdigest()[:16]
    return out


def page_path(kind: str, ident: str) -> str:
    """The page's path relative to the site root (`/`-separated)."""
    if kind == "index":
        return "index.html"
    return f"{DIRECTORIES[kind]}/{slug(str(ident))}.html"


def _linker(page: str) -> Any:
    root = "" if page == "index" else "../"

    def href(kind: str, ident: Any = "") -> str:
        return root + page_path(kind, "" if ident is None else str(ident))

    return href


_TIMESTAMP = re.compile(r"(\d{4}-\d\d-\d\d)T(\d\d:\d\d:\d\d)(?:\.\d+)?(Z|[+-]\d\d:\d\d)")


def when(value: Any) -> str:
    """A stored timestamp for people: to the second, `2026-11-30 12:00:00 UTC` (the JSON
    and the audit chain keep every digit)."""
    text = "" if value is None else str(value)
    found = _TIMESTAMP.fullmatch(text)
    if found is None:
        return text or "–"
    date, clock, offset = found.groups()
    return f"{date} {clock} {'UTC' if offset == 'Z' else offset}"


def render_page(doc: Mapping[str, Any]) -> str:
    """The HTML of one site page (`doc["page"]` names which; decision pages: `decision_page`)."""
    from evalops.report import site_svg

    page = str(doc["page"])
    if page not in PAGES or page == "decision":
        raise ValueError(f"not a site page: {page!r}")
    return render(f"site_{page}.html.j2", doc=doc, href=_linker(page), chart=site_svg, when=when)


def decision_page(doc: ReportDocument, *, suite_id: str) -> str:
    """The audit report of a stored decision, with a line of links back into the site.

    The report's own template is used as is (the same report `report audit` writes); the
    navigation line goes right after `<body>`, built from the same slugs as every link.
    """
    from markupsafe import escape

    text = audit_html(doc)
    href = _linker("decision")
    nav = (
        f'<nav class="site"><a href="{href("index")}">registry index</a> · '
        f'<a href="{href("suite", suite_id)}">suite {escape(_visible(suite_id))}</a></nav>\n'
    )
    return text.replace("<body>\n", "<body>\n" + nav, 1)


def _visible(value: str) -> str:
    from evalops.report.text import visible

    return visible(value)
