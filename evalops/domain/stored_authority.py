"""A registered authority read back from its stored document, without the spec models.

`verify` judges every stored signed act against the authority of its time; a
`SignatureJudge` reads an authority's principals, role grants and thresholds and nothing
else, so this view of the stored JSON serves it as well as `AuthoritySpec`, and spares
`verify` importing pydantic (as the views of evalops/domain/facts.py spare the read
commands).

`sync` stores only authorities the model accepted, but `verify` is there for a database
that may have been edited: the view vouches for exactly the documents the model accepts
(the same field types, patterns, lengths and cross-checks, no coercion, no unknown field)
and raises `NotAView` for any other, which the caller then hands to the model, so that a
stored document the model rejects fails as it always failed.
tests/domain/test_stored_authority.py holds the two to that, document by document.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Any, NamedTuple, cast, get_args

from evalops.domain.act_roles import ACT_ROLES, ActKind, Role, SeparationRule
from evalops.domain.limits import ID_PATTERN, MAX_FREE_TEXT_CHARS
from evalops.domain.thresholds import threshold_problem

SCHEMA_VERSION = "authority/v1"
#: `AuthoritySpec.max_act_age_days` when a file leaves it out.
DEFAULT_MAX_ACT_AGE_DAYS = 7
_ID = re.compile(ID_PATTERN)
_AUTHORITY_FIELDS = frozenset(
    (
        "spec_schema_version",
        "id",
        "principals",
        "roles",
        "thresholds",
        "separation_of_duties",
        "max_act_age_days",
    )
)
_PRINCIPAL_FIELDS = frozenset(("id", "email", "keys"))
_GRANT_FIELDS = frozenset(("principal", "suites", "tasks"))


class NotAView(ValueError):
    """A stored document the view does not vouch for (the spec model decides about it)."""


def _object(value: Any, fields: frozenset[str], required: Collection[str], where: str) -> Any:
    if not isinstance(value, dict):
        raise NotAView(f"{where}: not an object")
    unknown = value.keys() - fields
    if unknown:
        raise NotAView(f"{where}: unknown field {sorted(unknown)[0]!r}")
    for name in required:
        if name not in value:
            raise NotAView(f"{where}: {name} is missing")
    return value


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise NotAView(f"{where}: not an object")
    return value


def _list(value: Any, where: str, *, at_least: int = 0) -> list[Any]:
    if not isinstance(value, list) or len(value) < at_least:
        raise NotAView(f"{where}: not a list of at least {at_least}")
    return value


def _text(value: Any, where: str) -> str:
    """`NonEmptyStr`: 1 to MAX_FREE_TEXT_CHARS characters."""
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_FREE_TEXT_CHARS:
        raise NotAView(f"{where}: not a non-empty string")
    return value


def _texts(value: Any, where: str, *, at_least: int = 0) -> tuple[str, ...]:
    return tuple(_text(v, where) for v in _list(value, where, at_least=at_least))


def _id(value: Any, where: str) -> str:
    # The model's pattern ends at the end of the text: a trailing newline is no id.
    if not isinstance(value, str) or _ID.fullmatch(value) is None:
        raise NotAView(f"{where}: not an id")
    return value


def _one_of(value: Any, names: Collection[str], where: str) -> str:
    if not isinstance(value, str) or value not in names:
        raise NotAView(f"{where}: {value!r} is not one of {sorted(names)}")
    return value


def _positive(value: Any, where: str) -> int:
    """`PositiveInt`, strictly: an integer (not a boolean) of at least 1."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise NotAView(f"{where}: not a positive integer")
    return value


class StoredGrant(NamedTuple):
    principal: str
    suites: tuple[str, ...]
    tasks: tuple[str, ...]

    @classmethod
    def of(cls, document: Any) -> StoredGrant:
        grant = _object(document, _GRANT_FIELDS, ("principal",), "grant")
        return cls(
            _id(grant["principal"], "principal"),
            _texts(grant.get("suites", []), "suites"),
            _texts(grant.get("tasks", []), "tasks"),
        )


class StoredPrincipal(NamedTuple):
    id: str
    keys: tuple[str, ...]

    @classmethod
    def of(cls, document: Any) -> StoredPrincipal:
        principal = _object(document, _PRINCIPAL_FIELDS, ("id", "keys"), "principal")
        if principal.get("email") is not None:
            _text(principal["email"], "email")
        return cls(_id(principal["id"], "id"), _texts(principal["keys"], "keys", at_least=1))


class StoredAuthority(NamedTuple):
    """What `AuthoritySpec` holds, as plain tuples and dicts (read-only by convention)."""

    id: str
    principals: tuple[StoredPrincipal, ...]
    roles: Mapping[Role, tuple[StoredGrant, ...]]
    thresholds: Mapping[ActKind, int]
    separation_of_duties: tuple[SeparationRule, ...]
    max_act_age_days: int

    @classmethod
    def of(cls, document: Any) -> StoredAuthority:
        """A registered authority's document (NotAView when the model would not accept it)."""
        required = ("spec_schema_version", "id", "principals")
        doc = _object(document, _AUTHORITY_FIELDS, required, "authority")
        _one_of(doc["spec_schema_version"], (SCHEMA_VERSION,), "spec_schema_version")
        roles = {
            _one_of(role, get_args(Role), "role"): tuple(
                StoredGrant.of(g) for g in _list(grants, "grants")
            )
            for role, grants in _mapping(doc.get("roles", {}), "roles").items()
        }
        thresholds = {
            _one_of(act, ACT_ROLES, "act"): _positive(needed, "threshold")
            for act, needed in _mapping(doc.get("thresholds", {}), "thresholds").items()
        }
        separation = tuple(
            _one_of(rule, get_args(SeparationRule), "separation_of_duties")
            for rule in _list(doc.get("separation_of_duties", []), "separation_of_duties")
        )
        authority = cls(
            id=_id(doc["id"], "id"),
            principals=tuple(
                StoredPrincipal.of(p) for p in _list(doc["principals"], "principals", at_least=1)
            ),
            roles=cast("dict[Role, tuple[StoredGrant, ...]]", roles),
            thresholds=cast("dict[ActKind, int]", thresholds),
            separation_of_duties=cast("tuple[SeparationRule, ...]", separation),
            max_act_age_days=_positive(
                doc.get("max_act_age_days", DEFAULT_MAX_ACT_AGE_DAYS), "max_act_age_days"
            ),
        )
        authority._check_consistent()
        return authority

    def _check_consistent(self) -> None:
        """`AuthoritySpec`'s own checks: each principal and each key once, grants to
        principals it lists, thresholds its role holders can meet."""
        # Imported here: cryptography is needed only when an authority is read.
        from evalops.domain import sshsig

        ids: set[str] = set()
        owner_of: dict[bytes, str] = {}
        for principal in self.principals:
            if principal.id in ids:
                raise NotAView(f"principal {principal.id!r} is listed twice")
            ids.add(principal.id)
            for line in principal.keys:
                try:
                    blob = sshsig.identity(sshsig.parse_public_key(line))
                except sshsig.MalformedKey as exc:
                    raise NotAView(f"not an OpenSSH public key: {exc}") from None
                if owner_of.setdefault(blob, principal.id) != principal.id:
                    raise NotAView(f"a key of {principal.id!r} is also a key of another")
        for grants in self.roles.values():
            for grant in grants:
                if grant.principal not in ids:
                    raise NotAView(f"unknown principal {grant.principal!r}")
        problem = threshold_problem(self.roles, self.thresholds)
        if problem is not None:
            raise NotAView(problem[1])
