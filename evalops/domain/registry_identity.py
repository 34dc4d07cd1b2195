"""Which registry an act belongs to: the `registry_id` of a registry database.

A registry is named by its first audit event, which no later write changes and `verify`
holds to the chain: the random `registry_id` that event records (`store.audit` draws one
for the first event of every new registry), or, when it records none (a registry begun
before that), a UUID derived from that event's hash, which needs no migration. A copy of
one database (a backup, a move to PostgreSQL) is the same registry under the same id.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from typing import Any

#: The namespace of derived ids (uuid5 of the first event's hash in it).
_NAMESPACE = uuid.UUID("6d1f5f3e-5b0a-4c1e-9a57-2f2c6f0e4a37")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def registry_id(first_payload: Mapping[str, Any] | None, first_hash: str | None) -> str | None:
    """The registry id of a database whose first audit event has this payload and hash
    (None: no event yet, so no act can exist either)."""
    if first_hash is None:
        return None
    recorded = (first_payload or {}).get("registry_id")
    if isinstance(recorded, str) and _UUID.fullmatch(recorded):
        return recorded
    return str(uuid.uuid5(_NAMESPACE, first_hash))
