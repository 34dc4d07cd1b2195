"""Which registry a database is (docs/authority.md, "Acts belong to one registry"): the
`registry_id` its first audit event records, else, for a registry whose first event
predates recording one, a UUID 5 of that event's hash."""

from __future__ import annotations

import uuid

import pytest

from evalops.domain.registry_identity import registry_id

HASH = "sha256:" + "ab" * 32


def test_a_recorded_id_is_the_registry_s_id_whatever_the_hash() -> None:
    drawn = str(uuid.uuid4())
    assert registry_id({"registry_id": drawn}, HASH) == drawn
    assert registry_id({"registry_id": drawn}, "sha256:" + "cd" * 32) == drawn


@pytest.mark.parametrize("payload", [None, {}, {"registry_id": "not-a-uuid"}, {"registry_id": 7}])
def test_without_a_recorded_uuid_the_id_is_derived_from_the_first_event_s_hash(
    payload: dict[str, object] | None,
) -> None:
    derived = registry_id(payload, HASH)
    assert derived is not None and uuid.UUID(derived).version == 5
    assert registry_id(payload, HASH) == derived  # a function of the chain
    assert registry_id(payload, "sha256:" + "cd" * 32) != derived


def test_a_database_without_events_has_no_id() -> None:
    assert registry_id({"registry_id": str(uuid.uuid4())}, None) is None
