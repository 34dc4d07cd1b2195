"""Render a stored estimate (docs/estimation.md) as HTML, Markdown or JSON: the claims
sentence on top, every rate with its interval drawn (a point and a bar), per stratum too."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evalops.report.audit import to_json
from evalops.report.render import FORMATS, render


def _rows(rates: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{"label": key, **block} for key, block in rates.items()]


def _pass_first(rates: Mapping[str, Any]) -> dict[str, Any]:
    """The stored document's keys are sorted (canonical JSON); people read `pass` first."""
    return {k: rates[k] for k in sorted(rates, key=lambda k: (k != "pass", k))}


def render_estimate(
    doc: Mapping[str, Any], fmt: str, audit_head: Mapping[str, Any] | None = None
) -> str:
    """`audit_head`: the chain's head when rendered, the anchor HTML and Markdown carry (the
    JSON is the stored document itself, byte for byte)."""
    context: dict[str, Any] = {
        "doc": doc,
        "audit_head": dict(audit_head) if audit_head is not None else None,
        "rates": _pass_first(doc["rates"]),
        "difference": _pass_first(doc["difference"] or {}),
        "level": f"{float(doc['confidence']) * 100:g}%",
    }
    if fmt == "html":
        strata = [
            {"label": s["stratum"], **s["rates"]["pass"]}
            for s in doc["strata"]
            if "pass" in s["rates"]
        ]
        rows = _rows(_pass_first(doc["rates"]))
        return render("estimate.html.j2", rows=rows, strata_rows=strata, **context)
    if fmt == "md":
        return render("estimate.md.j2", **context)
    if fmt == "json":
        return to_json(doc)
    raise ValueError(f"format {fmt!r} is not one of {', '.join(FORMATS)}")
