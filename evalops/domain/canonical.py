"""Canonical JSON (RFC 8785, JCS) and sha256 digests (DESIGN.md section 4)."""

from __future__ import annotations

import hashlib
from typing import Any

import rfc8785

DIGEST_PREFIX = "sha256:"
GENESIS_HASH = DIGEST_PREFIX + "0" * 64
MAX_SAFE_INTEGER = 2**53 - 1


def canonical_json(value: Any) -> bytes:
    """RFC 8785 canonical bytes of a JSON value (dicts, lists, str, int, float, bool, None)."""
    return rfc8785.dumps(value)


def sha256_digest(data: bytes) -> str:
    return DIGEST_PREFIX + hashlib.sha256(data).hexdigest()


def digest(value: Any) -> str:
    """`"sha256:" + hex(SHA-256(canonical_json(value)))`."""
    return sha256_digest(canonical_json(value))


def canonical_text(value: Any) -> str:
    """Canonical JSON as text, for storing a value so that it re-hashes to the same digest."""
    return canonical_json(value).decode("utf-8")
