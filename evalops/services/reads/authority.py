"""The authority in force at a point of the audit chain, read through a `Reader` (plain SQL;
on SQLite no SQLAlchemy or spec models unless a stored document needs the model's verdict).

`verify`'s signed-acts and separation stages, its second gate-input loader and the `next:`
hints all judge acts with it.
"""

from __future__ import annotations

import json
from typing import Any

from evalops.domain.authority import AuthorityFacts, SignatureJudge
from evalops.domain.stored_authority import NotAView, StoredAuthority
from evalops.store.in_force_sql import IN_FORCE_RUN_UPTO_SQL
from evalops.store.reader import Reader


def authority_at(reader: Reader, cutoff: int) -> tuple[AuthorityFacts, str, SignatureJudge] | None:
    """The authority in force as of audit seq `cutoff`, its policy digest and its judge
    (`authority_in_force` of evalops/services/authority/acts.py: the latest sync up to `cutoff`,
    the first row registered with each digest it holds, the last such row)."""
    found = reader.first(IN_FORCE_RUN_UPTO_SQL, {"cutoff": cutoff})
    run = None if found is None else found["id"]
    if run is None:
        return None
    first: dict[str, dict[str, Any]] = {}
    for row in reader.rows(
        'SELECT p.id, p.policy_id, p.document, p.policy_digest FROM "policy" AS p '
        "JOIN \"sync_in_force\" AS f ON f.sync_run_id = :run AND f.kind = 'authority' "
        "AND f.definition_id = p.policy_id AND f.document_digest = p.document_digest "
        "WHERE p.kind = 'authority' ORDER BY p.id",
        {"run": run},
    ):
        first.setdefault(row["policy_id"], row)
    # At most one authority is in force (validate and sync refuse a second one).
    chosen = max(first.values(), key=lambda r: r["id"], default=None)
    if chosen is None:
        return None
    authority, judge = _judged(json.loads(chosen["document"]))
    return authority, chosen["policy_digest"], judge


def _judged(document: Any) -> tuple[AuthorityFacts, SignatureJudge]:
    """The view of a stored authority and its judge. A document the view does not vouch for
    is not one `sync` registered: the spec model decides, and raises what it always raised."""
    try:
        view = StoredAuthority.of(document)
    except NotAView:
        from evalops.domain.specs import AuthoritySpec

        model = AuthoritySpec.model_validate(document)
        return model, SignatureJudge(model)
    return view, SignatureJudge(view)
