"""The one jinja2 Environment every report is rendered with.

HTML templates (`*.html.j2`) are autoescaped; Markdown templates (`*.md.j2`) escape free
text with the `md` filter; every template runs under `StrictUndefined`, so a missing key is
an error rather than an empty cell. Every value printed passes through `finalize`, which
makes control characters visible whatever the format.
"""

from __future__ import annotations

import base64
import hashlib
import math
import re
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from markupsafe import Markup

from evalops.domain.humanize import plural
from evalops.report import svg
from evalops.report.ids import ident, prose
from evalops.report.rows import selected
from evalops.report.text import anchor_token, md, safe_url, visible

if TYPE_CHECKING:
    import jinja2

FORMATS = ("html", "md", "json")
STYLESHEET = "report.css"
SITE_STYLESHEET = "site.css"
"""Added to the report's stylesheet on the pages of the registry site (docs/site.md)."""


# Every digest a report shows is named for what it covers: a suite has two (its declaration
# file, and the suite_digest over its members' pins), and they must never be confused.
DIGEST_NAMES = {
    "suite_digest": "suite_digest (with members)",
    "policy_digest": "policy_digest (gate policy)",
    "execution_digest": "execution_digest (candidate execution profile)",
    "baseline_execution_digest": "baseline_execution_digest (baseline execution profile)",
    "inputs_digest": "inputs_digest (everything the decision read)",
    "result_digest": "result_digest (the decision document)",
}
DEFINITION_NAMES = {
    "suite": "suite declaration",
    "gate_policy": "gate policy",
    "execution_profile": "execution profile",
    "task": "task",
    "grader_set": "grader set",
}


_FRAGMENT = re.compile(r"[A-Z][A-Z0-9]*-[1-9][0-9]*")


def _autoescape(name: str | None) -> bool:
    return name is not None and name.endswith((".html.j2", ".svg.j2"))


_STORED_MOMENT = re.compile(r"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\.\d+Z")


def for_people(value: Any) -> Any:
    """A stored timestamp to the second (`2026-11-30T12:00:00Z`): people read seconds; the
    JSON report keeps the exact value. Anything else unchanged."""
    if isinstance(value, str):
        found = _STORED_MOMENT.fullmatch(value)
        if found:
            return found.group(1) + "Z"
    return value


def _finalize(value: Any) -> Any:
    # Called for every value printed (hundreds of thousands on a registry site), so the
    # common case is short: a plain str of printable ASCII has nothing to make visible,
    # and only one ending in `Z` can be a stored timestamp.
    if type(value) is str and value.isascii() and value.isprintable():
        return for_people(value) if value[-1:] == "Z" else value
    if isinstance(value, Markup):
        return value  # already safe: written by evalops (SVG charts, the stylesheet)
    if isinstance(value, str):
        return visible(for_people(value))
    return value


def num(value: Any, digits: int = 3) -> str:
    """A score or ratio for a table cell: fixed digits, `–` when absent or not finite."""
    if value is None or isinstance(value, bool):
        return "–"
    if isinstance(value, int):
        value = float(value)  # canonical JSON stores 1.0 as 1: still a ratio
    if isinstance(value, float):
        return f"{value:.{digits}f}" if math.isfinite(value) else "–"
    return visible(value)


_PLAIN = re.compile(r"[A-Za-z0-9 :._/@+=,#-]+")


def seconds(value: Any) -> str:
    """A duration for people: whole seconds (tenths below ten), minutes beside longer ones;
    the JSON report keeps the exact value."""
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return "–"
    if not math.isfinite(value):
        return "–"
    shown = f"{value:.1f} s" if abs(value) < 10 else f"{round(value)} s"
    if abs(value) >= 60:
        minutes, rest = divmod(round(value), 60)
        shown += f" ({minutes} min {rest} s)"
    return shown


def code(value: Any) -> str:
    """A plain id, digest or command as an inline code span; anything else escaped text.

    A code span cannot be escaped from inside (backslashes are literal there), so only
    strings made of harmless characters become one.
    """
    text = visible(value if value is not None else "")
    if not text:
        return ""
    return f"`{text}`" if _PLAIN.fullmatch(text) else md(text)


def short(digest: Any, length: int = 12) -> str:
    """`sha256:` plus the first hex digits, for tables (the full digest is shown elsewhere)."""
    text = visible(digest or "")
    return text[: len("sha256:") + length] if text.startswith("sha256:") else text


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """The shared Environment (built once per process; templates are compiled once)."""
    import jinja2

    from evalops.resources import templates_dir

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(templates_dir()),
        autoescape=_autoescape,
        undefined=jinja2.StrictUndefined,
        finalize=_finalize,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        code=lambda value: code(for_people(value)),
        # HTML only: ids wrap at their separators, never inside a word (templates/report.css).
        id=ident,
        prose=prose,
        md=lambda value: md(for_people(value)),
        num=num,
        # `1 member task`, `3 member tasks`: the rule of everything else people read.
        plural=plural,
        seconds=seconds,
        # A spool's rows read as needed, not listed at once (`report/rows.py`).
        selected=selected,
        short=short,
        url=safe_url,
        visible=visible,
        # `#ID` for an id that is a safe fragment (EST-2), else nothing: a link never
        # carries text a registry row could hold.
        fragment=lambda value: f"#{value}" if _FRAGMENT.fullmatch(str(value)) else "",
        # An estimate as a row of `svg.intervals` (its build labels it).
        estimate_row=lambda e: {"label": f"{e['estimate_id']} {e['build']}", **e["pass"]},
    )
    env.globals.update(
        svg=svg,
        anchor_token=anchor_token,
        digest_names=DIGEST_NAMES,
        definition_names=DEFINITION_NAMES,
    )
    css = (templates_dir() / STYLESHEET).read_text(encoding="utf-8")
    env.globals["stylesheet"] = Markup(css)
    env.globals["csp"] = content_security_policy(css)
    site_css = css + (templates_dir() / SITE_STYLESHEET).read_text(encoding="utf-8")
    env.globals["site_stylesheet"] = Markup(site_css)
    env.globals["site_csp"] = content_security_policy(site_css)
    return env


def content_security_policy(css: str) -> str:
    """Nothing may load or run; only the report's own stylesheet (by hash) applies."""
    digest = base64.b64encode(hashlib.sha256(css.encode("utf-8")).digest()).decode("ascii")
    return (
        "default-src 'none'; "
        f"style-src 'sha256-{digest}'; "
        "img-src 'none'; script-src 'none'; object-src 'none'; "
        "base-uri 'none'; form-action 'none'"
    )


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)
