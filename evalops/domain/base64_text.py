"""Base64 as DSSE envelopes carry it: standard or URL-safe, padded or not (the DSSE
specification accepts each). One reader for the attestation's verifier and `verify
--anchors`, so that an envelope one of them reads, the other reads too."""

from __future__ import annotations

import base64
import binascii
from typing import Any


def b64decode(text: Any) -> bytes:
    """Standard or URL-safe base64, padded or not (DSSE accepts either); ValueError else."""
    if not isinstance(text, str):
        raise ValueError("not a base64 string")
    standard = text.strip().replace("-", "+").replace("_", "/")
    try:
        return base64.b64decode(standard + "=" * (-len(standard) % 4), validate=True)
    except binascii.Error as exc:
        raise ValueError(str(exc)) from None
