"""Chain anchors kept outside the database (docs/verify.md).

A database cannot defend itself against someone who rewrites its whole tail consistently,
so the chain head leaves it: `gate check --json`, `verify`, every report and attestation
carry `{seq, hash}`. `verify --anchor SEQ:HASH` / `--anchors FILE` fails unless the chain
still holds each one. An anchor is read only from the place evalops writes it, never from
text that merely looks like one (a trial id or a reason can hold any token): the top-level
`audit_head` / `decision_event` of a JSON document (an attestation's predicate, DSSE
payloads decoded), the `evalops-audit-head` meta element of an HTML report, the comment
that is a Markdown report's first line, or a file whose every line is `SEQ:HASH`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalops.domain.base64_text import b64decode
from evalops.errors import InputError

HASH = r"sha256:[0-9a-f]{64}"
LINE = re.compile(rf"^\s*(\d+):({HASH})\s*$")
# The one place of each in a report, exactly as evalops writes it: the HTML meta element
# (inside <head>, before any user text can appear: all of it is escaped) and the Markdown
# comment that is the report's first line.
HTML_META = re.compile(rf'<meta name="evalops-audit-head" content="(\d+):({HASH})">')
MARKDOWN_FIRST_LINE = re.compile(rf"^<!-- evalops-audit-head:(\d+):({HASH}) -->$")
ANCHOR_KEYS = ("audit_head", "decision_event")
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
#: Anchor files (reports, attestations, lists) are at most 1 MiB.
MAX_ANCHOR_FILE = 1024 * 1024


@dataclass(frozen=True)
class Anchor:
    seq: int
    hash: str
    source: str

    def as_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "hash": self.hash, "source": self.source}


def parse_anchor(text: str, source: str = "--anchor") -> Anchor:
    match = LINE.match(text)
    if match is None:
        raise InputError(
            f"anchor {text!r} is not SEQ:sha256:<64 hex> (as the `audit head` line of "
            "`evalops verify` prints it, or `audit_head`'s seq and hash under --json)",
            field="--anchor",
        )
    return Anchor(int(match.group(1)), match.group(2), source)


def _top_level_anchors(document: dict[str, Any], source: str) -> list[Anchor]:
    """`audit_head` / `decision_event` of one JSON object, at its top level only."""
    found = []
    for key in ANCHOR_KEYS:
        head = document.get(key)
        if (
            isinstance(head, dict)
            and isinstance(head.get("seq"), int)
            and not isinstance(head.get("seq"), bool)
            and isinstance(head.get("hash"), str)
            and re.fullmatch(HASH, head["hash"])
        ):
            found.append(Anchor(head["seq"], head["hash"], f"{source} ({key})"))
    return found


def _json_anchors(document: Any, source: str) -> list[Anchor]:
    """Anchors of a JSON document evalops wrote: a report or `--json` output (top-level
    keys), an in-toto Statement (its predicate's), or a DSSE envelope of one. Nothing
    nested deeper counts: user text can be anywhere in a document, never a key there."""
    if not isinstance(document, dict):
        return []
    payload = document.get("payload")
    if isinstance(payload, str) and "payloadType" in document:
        try:
            statement = json.loads(b64decode(payload))
        except ValueError:
            return []
        return _json_anchors(statement, f"{source} (DSSE payload)")
    if document.get("_type") == STATEMENT_TYPE:
        predicate = document.get("predicate")
        return _top_level_anchors(predicate, source) if isinstance(predicate, dict) else []
    return _top_level_anchors(document, source)


def _html_anchors(text: str, source: str) -> list[Anchor]:
    head, closed, _ = text.partition("</head>")
    match = HTML_META.search(head) if closed else None
    return [Anchor(int(match.group(1)), match.group(2), f"{source} (meta)")] if match else []


def _markdown_anchors(text: str, source: str) -> list[Anchor]:
    first = text.split("\n", 1)[0].rstrip("\r")
    match = MARKDOWN_FIRST_LINE.match(first)
    return [Anchor(int(match.group(1)), match.group(2), f"{source}:1")] if match else []


def _listed_anchors(text: str, source: str) -> list[Anchor]:
    """A file of anchor lines: every line `SEQ:HASH`, blank or a `#` comment."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = LINE.match(line)
        if match is None:
            return []
        found.append(Anchor(int(match.group(1)), match.group(2), f"{source}:{number}"))
    return found


def anchors_in(text: str, source: str) -> list[Anchor]:
    """The anchors of one file, read only from where evalops writes them, by the file's
    kind: JSON, an HTML report, a Markdown report, or a list of anchor lines."""
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            return _json_anchors(json.loads(text), source)
        except ValueError:
            return []
    if stripped[:15].lower() == "<!doctype html>":
        return _html_anchors(text, source)
    if text.startswith("<!-- evalops-audit-head:"):
        return _markdown_anchors(text, source)
    return _listed_anchors(text, source)


def anchors_in_file(path: Path) -> list[Anchor]:
    """Every anchor a report, attestation or anchor list holds (at least one, else exit 2)."""
    name = str(path)
    try:
        # Read at most one byte past the limit: a device or a pipe (/dev/zero) has no size
        # to check first, and must not be read until memory runs out.
        with path.open("rb") as stream:
            data = stream.read(MAX_ANCHOR_FILE + 1)
    except OSError as exc:
        raise InputError(f"cannot read anchor file: {exc.strerror}", name) from None
    if len(data) > MAX_ANCHOR_FILE:
        raise InputError("anchor file is larger than 1 MiB", name, field="--anchors")
    text = data.decode("utf-8", errors="replace")
    found = anchors_in(text, name)
    unique = list({(a.seq, a.hash): a for a in found}.values())
    if not unique:
        raise InputError(
            "no chain anchor found (expected the `audit_head` of a JSON document or "
            "attestation, the `evalops-audit-head` meta element of an HTML report, the "
            "first-line comment of a Markdown report, or lines of SEQ:HASH)",
            name,
        )
    return sorted(unique, key=lambda a: a.seq)
