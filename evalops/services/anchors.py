"""Chain anchors kept outside the database (DESIGN.md section 10).

A database cannot defend itself against someone who rewrites its whole tail consistently,
so the chain head leaves it: `gate check --json`, `verify`, every report and attestation
carry `{seq, hash}`. `verify --anchor SEQ:HASH` / `--anchors FILE` fails unless the chain
still holds each one. Files may be reports (HTML, Markdown: the token
`evalops-audit-head:SEQ:sha256:HEX`), JSON documents (`audit_head` / `decision_event`
objects anywhere, DSSE envelopes' payloads included) or plain lines of `SEQ:HASH`.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlmodel import Session

from evalops.errors import InputError
from evalops.store.tables import AuditEvent

HASH = r"sha256:[0-9a-f]{64}"
TOKEN = re.compile(rf"evalops-audit-head:(\d+):({HASH})")
LINE = re.compile(rf"^\s*(\d+):({HASH})\s*$")
ANCHOR_KEYS = ("audit_head", "decision_event")
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
            f"anchor {text!r} is not SEQ:sha256:<64 hex> (as `evalops verify --json` prints "
            "audit_head)",
            field="--anchor",
        )
    return Anchor(int(match.group(1)), match.group(2), source)


def _json_anchors(value: Any, source: str, out: list[Anchor], depth: int = 0) -> None:
    if depth > 64:
        return
    if isinstance(value, dict):
        for key in ANCHOR_KEYS:
            head = value.get(key)
            if (
                isinstance(head, dict)
                and isinstance(head.get("seq"), int)
                and isinstance(head.get("hash"), str)
                and re.fullmatch(HASH, head["hash"])
            ):
                out.append(Anchor(head["seq"], head["hash"], f"{source} ({key})"))
        payload = value.get("payload")
        if isinstance(payload, str) and "payloadType" in value:
            try:
                decoded = json.loads(base64.b64decode(payload, validate=True))
            except (binascii.Error, ValueError):
                decoded = None
            _json_anchors(decoded, f"{source} (DSSE payload)", out, depth + 1)
        for item in value.values():
            _json_anchors(item, source, out, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _json_anchors(item, source, out, depth + 1)


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
    found: list[Anchor] = []
    with contextlib.suppress(ValueError):  # not JSON: look for tokens and lines
        _json_anchors(json.loads(text), name, found)
    found += [Anchor(int(m.group(1)), m.group(2), name) for m in TOKEN.finditer(text)]
    for number, line in enumerate(text.splitlines(), 1):
        match = LINE.match(line)
        if match:
            found.append(Anchor(int(match.group(1)), match.group(2), f"{name}:{number}"))
    unique = list({(a.seq, a.hash): a for a in found}.values())
    if not unique:
        raise InputError(
            "no chain anchor found (expected `evalops-audit-head:SEQ:HASH`, an `audit_head` "
            "object, or lines of SEQ:HASH)",
            name,
        )
    return sorted(unique, key=lambda a: a.seq)


def anchor_problem(session: Session, anchor: Anchor) -> str | None:
    event = session.get(AuditEvent, anchor.seq)
    if event is None:
        return (
            f"anchor {anchor.seq}:{anchor.hash} from {anchor.source}: the chain has no event "
            f"{anchor.seq} any more (its tail was cut)"
        )
    if event.hash != anchor.hash:
        return (
            f"anchor {anchor.seq}:{anchor.hash} from {anchor.source}: the chain holds "
            f"{event.hash} at seq {anchor.seq} (rewritten since the anchor was taken)"
        )
    return None
