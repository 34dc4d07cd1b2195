"""`StoredAuthority`, the view of a stored authority `verify` judges signed acts with, reads
exactly what `AuthoritySpec` reads, and vouches for exactly the documents it accepts.

Each valid document below is read both ways and compared field by field; then every
mutation of it (a field missing, unknown, of another type, out of its pattern or range, a
cross-check broken) must be refused by both or by neither (a document the view refuses
goes to the model, which raises its own error: evalops/services/verify/act_checks.py). A judge
over the view judges a few hundred signed acts exactly as one over the model.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from pydantic import ValidationError

from evalops.domain import sshsig
from evalops.domain.authority import SignatureJudge
from evalops.domain.specs import AuthoritySpec
from evalops.domain.stored_authority import NotAView, StoredAuthority
from tests.domain.test_signature_judge import _acts, _authority, signing_keys  # noqa: F401

Doc = dict[str, Any]


def _line(private: Any) -> str:
    public = private.public_key().public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH)
    return str(public.decode("ascii"))


@pytest.fixture(scope="module")
def lines() -> list[str]:
    return [
        _line(ed25519.Ed25519PrivateKey.generate()),
        _line(ec.generate_private_key(ec.SECP256R1())),
        _line(rsa.generate_private_key(public_exponent=65537, key_size=2048)),
        _line(ed25519.Ed25519PrivateKey.generate()),
    ]


def _documents(lines: list[str]) -> dict[str, Doc]:
    """Valid authorities: everything given, defaults left out, the demo's shape."""
    return {
        "full": {
            "spec_schema_version": "authority/v1",
            "id": "org/authority-1",
            "principals": [
                {"id": "alice", "email": "alice@example.com", "keys": [lines[0]]},
                {"id": "bob.b", "keys": [lines[1], lines[2]]},
                {"id": "carol", "email": None, "keys": [lines[3], lines[3]]},
            ],
            "roles": {
                "risk_owner": [
                    {"principal": "alice", "suites": ["regression/*"]},
                    {"principal": "bob.b", "tasks": ["support-*", "billing-*"]},
                    {"principal": "carol", "suites": [], "tasks": []},
                ],
                "reviewer": [{"principal": "carol"}],
                "calibrator": [],
                "ingester": [{"principal": "alice"}, {"principal": "bob.b"}],
                "policy_owner": [{"principal": "alice"}],
            },
            "thresholds": {"waiver.grant": 2, "trials.ingest": 1, "retire": 3},
            "separation_of_duties": ["no_self_waiver", "no_self_review"],
            "max_act_age_days": 30,
        },
        "defaults": {
            "spec_schema_version": "authority/v1",
            "id": "a",
            "principals": [{"id": "x", "keys": [lines[0]]}],
        },
        "demo-like": {
            "spec_schema_version": "authority/v1",
            "id": "authority",
            "max_act_age_days": 7,
            "principals": [
                {"id": "support-lead", "email": "s@example.com", "keys": [lines[0]]},
                {"id": "release-eng", "keys": [lines[1]]},
            ],
            "roles": {
                "risk_owner": [{"principal": "support-lead", "suites": ["regression/*"]}],
                "ingester": [{"principal": "release-eng"}],
            },
            "separation_of_duties": ["no_self_waiver"],
        },
    }


def _plain(authority: Any) -> dict[str, Any]:
    """What a judge (and anything else) reads of an authority, as plain values."""
    return {
        "id": authority.id,
        "principals": [(p.id, list(p.keys)) for p in authority.principals],
        "roles": {
            role: [(g.principal, list(g.suites), list(g.tasks)) for g in grants]
            for role, grants in authority.roles.items()
        },
        "thresholds": dict(authority.thresholds),
        "separation_of_duties": list(authority.separation_of_duties),
        "max_act_age_days": authority.max_act_age_days,
    }


def _both(document: Any) -> tuple[Any, Any]:
    """(the model's reading or "refused", the view's reading or "refused")."""
    try:
        model: Any = _plain(AuthoritySpec.model_validate(document))
    except ValidationError:
        model = "refused"
    try:
        view: Any = _plain(StoredAuthority.of(document))
    except NotAView:
        view = "refused"
    return model, view


Mutation = Callable[[Doc], Any]


def _set(path: tuple[Any, ...], value: Any) -> Mutation:
    def mutate(doc: Doc) -> Any:
        *parents, last = path
        where: Any = doc
        for step in parents:
            where = where[step]
        where[last] = value
        return doc

    return mutate


def _drop(path: tuple[Any, ...]) -> Mutation:
    def mutate(doc: Doc) -> Any:
        *parents, last = path
        where: Any = doc
        for step in parents:
            where = where[step]
        del where[last]
        return doc

    return mutate


WRONG_TYPES = [None, True, 1, 1.5, "x", "", [], {}, ["x"]]


def _mutations(lines: list[str]) -> dict[str, Mutation]:
    """Every way the "full" document can be edited, one edit each."""
    out: dict[str, Mutation] = {}
    fields = {
        ("spec_schema_version",): ["authority/v2"],
        ("id",): ["Alice", "a\n", "-a", "a" * 128, "a" * 129, "a b"],
        ("principals",): [],
        ("principals", 0): [],
        ("principals", 0, "id"): ["Alice", "a\n", "b" * 129],
        ("principals", 0, "email"): ["x" * 4096, "x" * 4097],
        ("principals", 0, "keys"): [[""], ["not a key"], [lines[1]], ["x" * 4097]],
        ("principals", 0, "keys", 0): [],
        ("roles",): [{"owner": []}],
        ("roles", "reviewer"): [[{"principal": "nobody"}]],
        ("roles", "reviewer", 0): [{"principal": "carol", "extra": 1}],
        ("roles", "reviewer", 0, "principal"): ["nobody", "Carol"],
        ("roles", "risk_owner", 0, "suites"): [[""], ["x" * 4097], [1]],
        ("roles", "risk_owner", 1, "tasks"): [["a", ""]],
        ("thresholds",): [{"waiver.sign": 1}],
        ("thresholds", "waiver.grant"): [0, -1, 4, 2.0, "2"],
        ("thresholds", "review.resolve"): [1, 2],
        ("separation_of_duties",): [["no_self_waiver", "other"], "no_self_waiver"],
        ("max_act_age_days",): [0, -3, 7.0, "7"],
    }
    for path, values in fields.items():
        for value in [*WRONG_TYPES, *values]:
            out[f"{path} = {value!r:.40} ({len(repr(value))} chars)"] = _set(path, value)
    for path in [
        ("spec_schema_version",), ("id",), ("principals",), ("roles",), ("thresholds",),
        ("separation_of_duties",), ("max_act_age_days",), ("principals", 0, "id"),
        ("principals", 0, "email"), ("principals", 0, "keys"), ("roles", "reviewer"),
        ("roles", "reviewer", 0, "principal"), ("roles", "risk_owner", 0, "suites"),
    ]:  # fmt: skip
        out[f"without {path}"] = _drop(path)
    for path in [(), ("principals", 0), ("roles", "reviewer", 0)]:
        out[f"unknown field at {path}"] = _set((*path, "note"), "x")
    out["a key of two principals"] = _set(("principals", 1, "keys"), [lines[0]])
    out["a principal twice"] = _set(("principals", 2, "id"), "alice")
    out["not an object"] = lambda doc: [doc]
    return out


def test_the_view_reads_every_valid_authority_as_the_model(lines: list[str]) -> None:
    for name, document in _documents(lines).items():
        model, view = _both(document)
        assert model != "refused", name
        assert view == model, name
        # What sync stores is the JSON of the file: read back from text as well.
        assert _plain(StoredAuthority.of(json.loads(json.dumps(document)))) == model, name


def test_the_view_refuses_exactly_what_the_model_refuses(lines: list[str]) -> None:
    full = _documents(lines)["full"]
    refused = accepted = 0
    for name, mutate in _mutations(lines).items():
        model, view = _both(mutate(copy.deepcopy(full)))
        assert view == model, name
        if model == "refused":
            refused += 1
        else:
            accepted += 1
    # The corpus holds both kinds (an edit the model accepts must read alike too).
    assert refused > 150 and accepted >= 8, (refused, accepted)


def test_a_key_that_does_not_parse_is_refused_by_both(lines: list[str]) -> None:
    document = _documents(lines)["defaults"]
    document["principals"][0]["keys"] = ["ssh-ed25519 AAAA"]
    with pytest.raises(NotAView, match="not an OpenSSH public key"):
        StoredAuthority.of(document)
    with pytest.raises(ValidationError):
        AuthoritySpec.model_validate(document)
    with pytest.raises(sshsig.MalformedKey):
        sshsig.parse_public_key("ssh-ed25519 AAAA")


def test_a_judge_over_the_view_judges_as_one_over_the_model(
    signing_keys: dict[str, Any],  # noqa: F811
) -> None:
    model = _authority(signing_keys)
    view = StoredAuthority.of(json.loads(model.model_dump_json()))
    assert _plain(view) == _plain(model)
    over_model, over_view = SignatureJudge(model), SignatureJudge(view)
    outcomes = set()
    for kind, data, signatures, scope in _acts(signing_keys, 300):
        try:
            expected: Any = over_model.check(kind, data, signatures, scope)
        except sshsig.MalformedSignature as exc:
            expected = ("MalformedSignature", str(exc))
        try:
            got: Any = over_view.check(kind, data, signatures, scope)
        except sshsig.MalformedSignature as exc:
            got = ("MalformedSignature", str(exc))
        assert got == expected
        outcomes.add("malformed" if isinstance(expected, tuple) else expected.ok)
    assert outcomes == {True, False, "malformed"}


def _edited(lines: list[str], edit: Callable[[Doc], Any]) -> Any:
    document = copy.deepcopy(_documents(lines)["full"])
    return edit(document)


def _refusals(lines: list[str]) -> list[tuple[Mutation, str]]:
    roles = "['calibrator', 'ingester', 'policy_owner', 'reviewer', 'risk_owner']"
    return [
        (lambda doc: [doc], "authority: not an object"),
        (_set(("note",), "x"), "authority: unknown field 'note'"),
        (_drop(("id",)), "authority: id is missing"),
        (
            _set(("spec_schema_version",), "authority/v2"),
            "spec_schema_version: 'authority/v2' is not one of ['authority/v1']",
        ),
        (_set(("roles",), []), "roles: not an object"),
        (_set(("roles", "owner"), []), f"role: 'owner' is not one of {roles}"),
        (_set(("roles", "reviewer"), {}), "grants: not a list of at least 0"),
        (_set(("roles", "reviewer", 0), "carol"), "grant: not an object"),
        (_set(("roles", "reviewer", 0, "extra"), 1), "grant: unknown field 'extra'"),
        (_drop(("roles", "reviewer", 0, "principal")), "grant: principal is missing"),
        (_set(("roles", "reviewer", 0, "principal"), "Carol"), "principal: not an id"),
        (_set(("roles", "risk_owner", 0, "suites"), [""]), "suites: not a non-empty string"),
        (_set(("roles", "risk_owner", 0, "suites"), "x"), "suites: not a list of at least 0"),
        (_set(("roles", "risk_owner", 1, "tasks"), [1]), "tasks: not a non-empty string"),
        (_set(("thresholds",), [1]), "thresholds: not an object"),
        (_set(("thresholds", "waiver.grant"), 0), "threshold: not a positive integer"),
        (_set(("thresholds", "waiver.grant"), True), "threshold: not a positive integer"),
        (
            _set(("separation_of_duties",), "no_self_waiver"),
            "separation_of_duties: not a list of at least 0",
        ),
        (
            _set(("separation_of_duties",), ["other"]),
            "separation_of_duties: 'other' is not one of ['no_self_review', 'no_self_waiver']",
        ),
        (_set(("id",), "Alice"), "id: not an id"),
        (_set(("principals",), []), "principals: not a list of at least 1"),
        (_set(("principals", 0), "alice"), "principal: not an object"),
        (_set(("principals", 0, "note"), "x"), "principal: unknown field 'note'"),
        (_drop(("principals", 0, "keys")), "principal: keys is missing"),
        (_drop(("principals", 0, "id")), "principal: id is missing"),
        (_set(("principals", 0, "id"), "Alice"), "id: not an id"),
        (_set(("principals", 0, "email"), ""), "email: not a non-empty string"),
        (_set(("principals", 0, "keys"), []), "keys: not a list of at least 1"),
        (_set(("principals", 0, "keys"), [""]), "keys: not a non-empty string"),
        (_set(("max_act_age_days",), 0), "max_act_age_days: not a positive integer"),
        (_set(("principals", 2, "id"), "alice"), "principal 'alice' is listed twice"),
        (
            _set(("principals", 1, "keys"), [lines[0]]),
            "a key of 'bob.b' is also a key of another",
        ),
        (_set(("roles", "reviewer", 0, "principal"), "nobody"), "unknown principal 'nobody'"),
        (
            _set(("thresholds", "waiver.grant"), 4),
            "waiver.grant needs 4 distinct signers but at most 3 principal(s) hold risk_owner "
            "for one scope (its acts name suite and task)",
        ),
    ]


def test_the_view_names_what_it_does_not_vouch_for(lines: list[str]) -> None:
    """The model decides about such a document (and raises its own error); the view's
    reason says where it stopped, for whoever reads a traceback."""
    for edit, reason in _refusals(lines):
        with pytest.raises(NotAView) as raised:
            StoredAuthority.of(_edited(lines, edit))
        assert str(raised.value) == reason
    act = _set(("thresholds", "waiver.sign"), 1)
    with pytest.raises(NotAView) as raised:
        StoredAuthority.of(_edited(lines, act))
    assert str(raised.value).startswith(
        "act: 'waiver.sign' is not one of ['calibration.invalidate'"
    )
