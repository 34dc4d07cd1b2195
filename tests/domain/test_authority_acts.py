"""Signed acts judged from their bytes alone (`evalops.domain.authority`; DESIGN 15 and
docs/authority.md), without a workspace: the bytes an act is, the bounds on reading one, the
checks `judge` makes before the signatures (kind, registry, the same bytes, authority digest,
age, clock skew), the words of each refusal, scoped grants, thresholds and signed commits.

Expectations come from the contract's words: an act is the canonical JSON (RFC 8785, the
`rfc8785` package here) of the body and the five act fields, then one newline; at most 1 MiB,
64 levels of nesting, an `act_id` that is a UUID as `uuid.uuid4()` writes it; refused when
signed more than `max_act_age_days` ago or more than five minutes in the future.
"""

from __future__ import annotations

import base64
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import rfc8785
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from hypothesis import given, settings
from hypothesis import strategies as st

from evalops.domain import sshsig
from evalops.domain.act_roles import membership_act
from evalops.domain.authority import (
    MalformedAct,
    Scope,
    SignatureJudge,
    Signer,
    act_bytes,
    check_signatures,
    compose,
    judge,
    judge_commit,
    key_owners,
    nesting_exceeds,
    nesting_may_exceed,
    owner_of,
    read_act,
    role_refusal,
    suites_uncovered,
)
from evalops.domain.specs import AuthoritySpec

REGISTRY = "0b4c7e8e-0000-4000-8000-000000000001"
DIGEST = "sha256:" + "a" * 64
ACT_ID = "123e4567-e89b-42d3-a456-426614174000"
NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


def _line(private: Any) -> str:
    public = private.public_key().public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH)
    return str(public.decode("ascii"))


@pytest.fixture(scope="module")
def keys() -> dict[str, Any]:
    return {
        "alice": ed25519.Ed25519PrivateKey.generate(),
        "bob": ed25519.Ed25519PrivateKey.generate(),
        "carol": ed25519.Ed25519PrivateKey.generate(),
        "rsa": rsa.generate_private_key(public_exponent=65537, key_size=2048),
        "mallory": ed25519.Ed25519PrivateKey.generate(),  # no principal's
    }


def _authority(keys: dict[str, Any], **extra: Any) -> AuthoritySpec:
    return AuthoritySpec.model_validate(
        {
            "spec_schema_version": "authority/v1",
            "id": "authority",
            "principals": [
                {"id": "alice", "keys": [_line(keys["alice"])]},
                {"id": "bob", "keys": [_line(keys["bob"])]},
                {"id": "carol", "keys": [_line(keys["carol"])]},
                {"id": "dave", "keys": [_line(keys["rsa"])]},
            ],
            "roles": {
                "risk_owner": [
                    {"principal": "alice"},
                    {"principal": "bob", "suites": ["regression/*"]},
                    {"principal": "carol", "tasks": ["support-*"]},
                ],
                "policy_owner": [{"principal": "alice"}, {"principal": "bob", "suites": ["x/*"]}],
                "reviewer": [{"principal": "dave"}],
            },
            **extra,
        }
    )


# ------------------------------------------------------------------------------ the bytes


def test_an_act_is_its_canonical_json_and_one_newline() -> None:
    act: dict[str, Any] = {"b": [1, 2.5, "é"], "a": {"z": None, "y": True}, "act": "x"}
    assert act_bytes(act) == rfc8785.dumps(act) + b"\n"
    # Written out by hand (RFC 8785: keys sorted, no whitespace, UTF-8 as is).
    assert act_bytes({"b": 1, "a": "x"}) == b'{"a":"x","b":1}\n'


def test_compose_adds_the_five_act_fields_to_the_body() -> None:
    body = {"task": "t", "reason": "r"}
    assert compose(
        "waiver.grant",
        body,
        act_id=ACT_ID,
        signed_at="2026-12-06T12:00:00Z",
        authority_digest=DIGEST,
        registry_id=REGISTRY,
    ) == {
        "task": "t",
        "reason": "r",
        "act": "waiver.grant",
        "act_id": ACT_ID,
        "signed_at": "2026-12-06T12:00:00Z",
        "authority_digest": DIGEST,
        "registry_id": REGISTRY,
    }
    assert body == {"task": "t", "reason": "r"}  # the body itself is left as it was


# ------------------------------------------------------------------------------ nesting


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize(("depth", "exceeds"), [(0, False), (1, False), (64, False), (65, True)])
def test_an_act_nests_at_most_64_levels(depth: int, exceeds: bool) -> None:
    assert nesting_exceeds(_nested(depth)) is exceeds
    assert nesting_exceeds('{"a":' * depth + "1" + "}" * depth) is exceeds


def test_nesting_counts_open_brackets_not_closed_ones_nor_siblings() -> None:
    # Many siblings of depth 64 are never deeper than 64.
    assert nesting_exceeds("[" + ",".join([_nested(63)] * 50) + "]") is False
    assert nesting_exceeds(_nested(3), limit=3) is False
    assert nesting_exceeds(_nested(4), limit=3) is True
    assert nesting_exceeds(_nested(2), limit=1) is True


@settings(max_examples=2000, deadline=None)
@given(
    st.text(alphabet='[]{}"\\a,:', max_size=80),
    st.integers(min_value=0, max_value=8),
)
def test_the_bracket_count_never_hides_a_text_the_scan_refuses(text: str, limit: int) -> None:
    """`read_act` scans only texts with more opening brackets than the limit: every text
    the scan refuses has that many."""
    if nesting_exceeds(text, limit):
        assert nesting_may_exceed(text, limit)
    opening = sum(char in "[{" for char in text)
    assert nesting_may_exceed(text, limit) is (opening > limit)


def test_an_act_with_few_brackets_is_never_scanned(monkeypatch: pytest.MonkeyPatch) -> None:
    from evalops.domain import authority

    scanned: list[str] = []
    monkeypatch.setattr(authority, "nesting_exceeds", lambda text: scanned.append(text) or False)
    read_act(json.dumps(_act()).encode())
    assert scanned == []
    deep = _act(task=[[["x"]]] * 40)  # 82 brackets and braces in all, 4 levels deep
    assert read_act(json.dumps(deep).encode())["task"] == deep["task"]
    assert len(scanned) == 1


def test_a_closing_bracket_ends_one_level() -> None:
    # Three levels, one closed, two opened: four levels at most.
    assert nesting_exceeds("[[[]" + "[[", limit=3) is True
    assert nesting_exceeds("[[[]" + "[", limit=3) is False
    assert nesting_exceeds("[]" * 3, limit=1) is False
    assert nesting_exceeds("{}[]" * 3, limit=1) is False


def test_only_brackets_and_braces_nest() -> None:
    # The scan runs before the JSON is parsed: any other character is no level.
    for char in "X:,1a ":
        assert nesting_exceeds(char * 100 + "[[", limit=1) is True, char
        assert nesting_exceeds(char * 100, limit=0) is False, char
    with pytest.raises(MalformedAct) as raised:
        read_act(b"X" * 100)
    assert str(raised.value).startswith("not a JSON act: ")


def test_brackets_inside_strings_do_not_nest() -> None:
    inside = json.dumps("[" * 100 + "{" * 100)
    assert nesting_exceeds(f"[{inside}]", limit=1) is False
    # An escaped quote does not end the string: the brackets after it are still inside it.
    escaped = '["a\\"' + "[" * 10 + '"]'
    assert json.loads(escaped) == ['a"' + "[" * 10]
    assert nesting_exceeds(escaped, limit=1) is False
    # An escaped backslash does end before the quote: what follows is outside the string.
    after = '["a\\\\", [[1]]]'
    assert json.loads(after) == ["a\\", [[1]]]
    assert nesting_exceeds(after, limit=2) is True
    assert nesting_exceeds(after, limit=3) is False
    # After a string closes, brackets count again.
    assert nesting_exceeds('["]", [["x"]]]', limit=2) is True


# ------------------------------------------------------------------------------ read_act


def _act(**changes: Any) -> dict[str, Any]:
    act: dict[str, Any] = {
        "act": "waiver.grant",
        "act_id": ACT_ID,
        "signed_at": "2026-12-06T12:00:00Z",
        "authority_digest": DIGEST,
        "registry_id": REGISTRY,
        "task": "t",
    }
    act.update(changes)
    return {k: v for k, v in act.items() if v is not ...}


def test_a_well_formed_act_reads_as_its_object() -> None:
    act = _act()
    assert read_act(act_bytes(act)) == act
    assert read_act(act_bytes(_act(registry_id=...)), stored=True) == _act(registry_id=...)


def test_an_act_of_exactly_one_mib_is_read_and_one_byte_more_is_not() -> None:
    head = act_bytes(_act(pad=""))
    pad = 1024 * 1024 - len(head)
    exactly = act_bytes(_act(pad="x" * pad))
    assert len(exactly) == 1024 * 1024
    assert read_act(exactly)["pad"] == "x" * pad
    with pytest.raises(MalformedAct) as raised:
        read_act(act_bytes(_act(pad="x" * (pad + 1))))
    assert str(raised.value) == "an act is at most 1 MiB (1048576 bytes)"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"act": "\xff"}', "not a JSON act: "),
        (b"[" * 65 + b"]" * 65, "the act is nested deeper than 64 levels"),
        (b'{"act": ', "not a JSON act: "),
        (b"[1, 2]", "an act is a JSON object"),
        (b'"text"', "an act is a JSON object"),
    ],
)
def test_what_is_not_an_act_is_named(data: bytes, message: str) -> None:
    with pytest.raises(MalformedAct) as raised:
        read_act(data)
    assert str(raised.value).startswith(message)
    assert isinstance(raised.value, ValueError)


def test_sixty_four_levels_are_read() -> None:
    act = _act(deep=json.loads(_nested(63)))
    assert read_act(act_bytes(act))["deep"] == act["deep"]


@pytest.mark.parametrize("name", ["act", "act_id", "signed_at", "authority_digest", "registry_id"])
@pytest.mark.parametrize("value", [..., None, 7, ["x"]])
def test_each_act_field_is_required_as_text(name: str, value: Any) -> None:
    with pytest.raises(MalformedAct) as raised:
        read_act(act_bytes(_act(**{name: value})))
    assert str(raised.value) == f"the act has no {name!r}"


@pytest.mark.parametrize("name", ["act", "act_id", "signed_at", "authority_digest"])
def test_a_stored_act_needs_every_field_but_its_registry(name: str) -> None:
    with pytest.raises(MalformedAct) as raised:
        read_act(act_bytes(_act(**{name: ...})), stored=True)
    assert str(raised.value) == f"the act has no {name!r}"


@pytest.mark.parametrize("value", [None, 7, ["x"]])
def test_a_stored_act_with_a_registry_id_has_it_as_text(value: Any) -> None:
    with pytest.raises(MalformedAct) as raised:
        read_act(act_bytes(_act(registry_id=value)), stored=True)
    assert str(raised.value) == "the act's registry_id is not a string"


@pytest.mark.parametrize(
    "act_id",
    [
        ACT_ID.upper(),  # uuid4() writes lower case
        ACT_ID[:-1],
        ACT_ID + "0",
        " " + ACT_ID,
        ACT_ID.replace("-", ""),
        "not-a-uuid-at-all-and-rather-longer-than-forty-characters",
    ],
)
def test_an_act_id_is_a_uuid_as_uuid4_writes_it(act_id: str) -> None:
    with pytest.raises(MalformedAct) as raised:
        read_act(act_bytes(_act(act_id=act_id)))
    assert str(raised.value) == (
        f"act_id is a UUID (as --print-act writes it), not {act_id[:40]!r}"
    )


def test_any_uuid4_is_an_act_id() -> None:
    for _ in range(20):
        act_id = str(uuid.uuid4())
        assert read_act(act_bytes(_act(act_id=act_id)))["act_id"] == act_id


@pytest.mark.parametrize("signed_at", ["2026-12-06T12:00:00", "yesterday", "2026-13-01T00:00:00Z"])
def test_signed_at_is_a_timestamp_with_an_offset(signed_at: str) -> None:
    with pytest.raises(MalformedAct) as raised:
        read_act(act_bytes(_act(signed_at=signed_at)))
    assert str(raised.value).startswith("signed_at: ")
    assert repr(signed_at) in str(raised.value)


# ------------------------------------------------------------------------------ scopes


def test_a_scope_as_stored_and_read_back() -> None:
    assert Scope().as_dict() == {"suite": None, "task": None}
    full = Scope("s", "t", ("b1", "b2"), ("s1", "s2"), "trials.void_hard")
    stored = full.as_dict()
    assert stored == {
        "suite": "s",
        "task": "t",
        "builds": ["b1", "b2"],
        "suites": ["s1", "s2"],
        "threshold": "trials.void_hard",
    }
    assert Scope.of(json.loads(json.dumps(stored))) == full
    assert Scope.of({"suite": "s", "task": None}) == Scope("s")
    assert Scope.of({}) == Scope()


def test_an_unscoped_grant_covers_every_act_and_a_scoped_one_only_its_globs(
    keys: dict[str, Any],
) -> None:
    authority = _authority(keys)
    assert role_refusal(authority, "alice", "waiver.grant", Scope()) is None
    assert role_refusal(authority, "bob", "waiver.grant", Scope("regression/core", "t")) is None
    assert role_refusal(authority, "carol", "waiver.grant", Scope("smoke", "support-x")) is None
    # A grant scoped by suites never covers an act with no suite (fail closed).
    assert role_refusal(authority, "bob", "waiver.grant", Scope(None, "t")) == (
        "principal 'bob' holds risk_owner but not for task 't'"
    )
    assert role_refusal(authority, "bob", "waiver.grant", Scope("smoke/core", "t")) == (
        "principal 'bob' holds risk_owner but not for suite 'smoke/core', task 't'"
    )
    assert role_refusal(authority, "carol", "waiver.grant", Scope("smoke", "billing")) == (
        "principal 'carol' holds risk_owner but not for suite 'smoke', task 'billing'"
    )
    assert role_refusal(authority, "carol", "waiver.grant", Scope("smoke")) == (
        "principal 'carol' holds risk_owner but not for suite 'smoke'"
    )
    assert role_refusal(authority, "bob", "waiver.grant", Scope()) == (
        "principal 'bob' holds risk_owner but not for this act"
    )
    assert role_refusal(authority, "dave", "waiver.grant", Scope()) == (
        "principal 'dave' does not hold risk_owner, which waiver.grant needs"
    )
    # Globs are case-sensitive (fnmatchcase).
    assert role_refusal(authority, "bob", "waiver.grant", Scope("Regression/core")) is not None


def test_an_act_on_several_suites_needs_one_of_them_per_signer_and_a_signer_for_each(
    keys: dict[str, Any],
) -> None:
    authority = _authority(keys)
    both = Scope(task="t", suites=("regression/a", "smoke/b"))
    assert role_refusal(authority, "bob", "trials.void", both) is None
    assert role_refusal(authority, "bob", "trials.void", Scope(suites=("smoke/b", "x/y"))) == (
        "principal 'bob' holds risk_owner but not for any of suites 'smoke/b', 'x/y'"
    )
    assert suites_uncovered(authority, "trials.void", both, ["bob"]) == ["smoke/b"]
    assert suites_uncovered(authority, "trials.void", both, ["bob", "alice"]) == []
    assert suites_uncovered(authority, "trials.void", both, ["carol"]) == [
        "regression/a",
        "smoke/b",
    ]
    # Grants of principals not named do not count, nor grants of another role.
    assert suites_uncovered(authority, "trials.void", both, []) == ["regression/a", "smoke/b"]
    assert suites_uncovered(authority, "review.resolve", both, ["bob"]) == [
        "regression/a",
        "smoke/b",
    ]
    data = b'{"act":"trials.void"}\n'
    judged = check_signatures(
        authority, "trials.void", data, [sshsig.sign(keys["bob"], data, "evalops")], both
    )
    assert judged.refusal == (
        "no signer holds risk_owner for suite 'smoke/b': a trials.void needs one of each "
        "suite it touches"
    )
    assert judged.rule == "authority"
    assert not judged.ok
    judged = check_signatures(
        authority,
        "trials.void",
        data,
        [sshsig.sign(keys["bob"], data, "evalops"), sshsig.sign(keys["alice"], data, "evalops")],
        both,
    )
    assert judged.ok and judged.refusal is None
    assert [s.principal for s in judged.signers] == ["bob", "alice"]


def test_a_signer_scoped_by_tasks_covers_every_suite_of_its_task(keys: dict[str, Any]) -> None:
    authority = _authority(keys)
    # carol holds risk_owner for tasks support-*, in any suite.
    on_her_task = Scope(task="support-1", suites=("a/x", "b/y"))
    assert suites_uncovered(authority, "trials.void", on_her_task, ["carol"]) == []
    other_task = Scope(task="billing-1", suites=("a/x", "b/y"))
    assert suites_uncovered(authority, "trials.void", other_task, ["carol"]) == ["a/x", "b/y"]
    # A role nobody holds covers no suite.
    assert suites_uncovered(authority, "calibration.record", on_her_task, ["carol"]) == [
        "a/x",
        "b/y",
    ]


def test_a_task_scoped_grant_covers_an_act_on_several_suites_of_its_task(
    keys: dict[str, Any],
) -> None:
    authority = _authority(keys)
    on_her_task = Scope(task="support-1", suites=("a/x", "b/y"))
    assert role_refusal(authority, "carol", "trials.void", on_her_task) is None
    assert role_refusal(authority, "carol", "trials.void", Scope(suites=("a/x",))) == (
        "principal 'carol' holds risk_owner but not for any of suites 'a/x'"
    )


def test_every_suite_without_a_signer_is_named(keys: dict[str, Any]) -> None:
    authority = _authority(keys)
    data = b'{"act":"trials.void"}\n'
    scope = Scope(task="t", suites=("regression/a", "smoke/b", "x/y"))
    judged = check_signatures(
        authority, "trials.void", data, [sshsig.sign(keys["bob"], data, "evalops")], scope
    )
    assert judged.refusal == (
        "no signer holds risk_owner for suite 'smoke/b', 'x/y': a trials.void needs one of "
        "each suite it touches"
    )


def test_the_key_owners_given_are_the_ones_read(keys: dict[str, Any]) -> None:
    """`owners` is `key_owners(authority)` when the caller already has it: the judge reads
    those, not the authority's keys again."""
    authority = _authority(keys)
    data = b'{"act":"waiver.grant"}\n'
    signature = sshsig.sign(keys["alice"], data, "evalops")
    fingerprint = sshsig.parse_public_key(_line(keys["alice"])).fingerprint
    unknown = (
        f"signature 1: key {fingerprint} is not a key of any principal of the authority in force"
    )
    assert check_signatures(authority, "waiver.grant", data, [signature], Scope(), {}).refusal == (
        unknown
    )
    assert SignatureJudge(authority, {}).check(
        "waiver.grant", data, [signature], Scope()
    ).refusal == (unknown)
    assert check_signatures(authority, "waiver.grant", data, [signature], Scope()).ok


# ------------------------------------------------------------------------------ signatures


def test_signers_are_named_with_their_key_fingerprints(keys: dict[str, Any]) -> None:
    authority = _authority(keys)
    data = b'{"act":"waiver.grant"}\n'
    signature = sshsig.sign(keys["alice"], data, "evalops")
    judged = check_signatures(authority, "waiver.grant", data, [signature, signature], Scope())
    fingerprint = sshsig.parse_public_key(_line(keys["alice"])).fingerprint
    assert judged.signers == [Signer("alice", fingerprint)]
    assert judged.signers[0].as_dict() == {"principal": "alice", "fingerprint": fingerprint}


def test_refusals_name_the_signature_and_why(keys: dict[str, Any]) -> None:
    authority = _authority(keys)
    data = b'{"act":"waiver.grant"}\n'
    good = sshsig.sign(keys["alice"], data, "evalops")
    unknown = sshsig.sign(keys["mallory"], data, "evalops")
    judged = check_signatures(authority, "waiver.grant", data, [good, unknown], Scope())
    fingerprint = sshsig.parse_public_key(_line(keys["mallory"])).fingerprint
    assert judged.refusal == (
        f"signature 2: key {fingerprint} is not a key of any principal of the authority in force"
    )
    judged = check_signatures(
        authority, "waiver.grant", data, [sshsig.sign(keys["alice"], data, "git")], Scope()
    )
    assert judged.refusal == "signature 1: signed for namespace 'git', not 'evalops'"
    judged = check_signatures(
        authority, "waiver.grant", data, [sshsig.sign(keys["rsa"], data, "evalops")], Scope()
    )
    assert judged.refusal == (
        "signature 1: principal 'dave' does not hold risk_owner, which waiver.grant needs"
    )
    judged = check_signatures(authority, "waiver.grant", data, [], Scope())
    assert judged.refusal == "waiver.grant is unsigned and an authority is in force"
    assert judged.signers == []


def test_a_threshold_counts_distinct_principals_and_names_them(keys: dict[str, Any]) -> None:
    authority = _authority(keys, thresholds={"waiver.grant": 3})
    data = b'{"act":"waiver.grant"}\n'
    signatures = [sshsig.sign(keys[k], data, "evalops") for k in ("bob", "alice", "alice")]
    judged = check_signatures(authority, "waiver.grant", data, signatures, Scope("regression/a"))
    assert judged.refusal == "waiver.grant needs 3 distinct signers, has 2 (alice, bob)"
    assert judged.rule == "threshold"
    signatures.append(sshsig.sign(keys["carol"], data, "evalops"))
    scope = Scope("regression/a", "support-1")
    judged = check_signatures(authority, "waiver.grant", data, signatures, scope)
    assert judged.ok
    assert [s.principal for s in judged.signers] == ["bob", "alice", "carol"]


def test_a_void_of_a_hard_failure_needs_two_signers_by_default(keys: dict[str, Any]) -> None:
    """docs/trials.md: threshold `trials.void_hard`, default 2; any other act's default is 1."""
    authority = _authority(keys)
    data = b'{"act":"trials.void"}\n'
    one = [sshsig.sign(keys["alice"], data, "evalops")]
    hard = Scope("s", "t", threshold="trials.void_hard")
    judged = check_signatures(authority, "trials.void", data, one, hard)
    assert (
        judged.refusal == "trials.void (trials.void_hard) needs 2 distinct signers, has 1 (alice)"
    )
    assert judged.rule == "threshold"
    assert check_signatures(authority, "trials.void", data, one, Scope("s", "t")).ok
    # A declared threshold wins over the default, for the key that counts.
    declared = _authority(keys, thresholds={"trials.void_hard": 1})
    assert check_signatures(declared, "trials.void", data, one, hard).ok
    declared = _authority(keys, thresholds={"trials.void": 2})
    assert check_signatures(declared, "trials.void", data, one, hard).refusal == (
        "trials.void (trials.void_hard) needs 2 distinct signers, has 1 (alice)"
    )
    judged = check_signatures(declared, "trials.void", data, one, Scope("s", "t"))
    assert judged.refusal == "trials.void needs 2 distinct signers, has 1 (alice)"


def _with_blob(signature: bytes, blob: bytes) -> bytes:
    """The SSHSIG with its public key blob replaced (the signed data does not include it)."""
    raw = sshsig.dearmor(signature)
    at = 6 + 4
    length = int.from_bytes(raw[at : at + 4], "big")
    swapped = raw[:at] + len(blob).to_bytes(4, "big") + blob + raw[at + 4 + length :]
    body = base64.b64encode(swapped).decode()
    lines = [body[i : i + 70] for i in range(0, len(body), 70)]
    return "\n".join([sshsig.BEGIN, *lines, sshsig.END, ""]).encode()


def _padded_rsa_blob(line: str) -> bytes:
    """The RSA key's blob with its exponent written with a leading zero byte: the same key."""
    blob = base64.b64decode(line.split()[1])
    at = 4 + 7  # string "ssh-rsa"
    e_len = int.from_bytes(blob[at : at + 4], "big")
    e = blob[at + 4 : at + 4 + e_len]
    return blob[:at] + (e_len + 1).to_bytes(4, "big") + b"\x00" + e + blob[at + 4 + e_len :]


def test_a_key_in_another_encoding_is_its_principals(keys: dict[str, Any]) -> None:
    authority = _authority(keys)
    line = _line(keys["rsa"])
    padded = _padded_rsa_blob(line)
    assert padded != sshsig.parse_public_key(line).blob
    owners = key_owners(authority)
    other = sshsig.PublicKey("ssh-rsa", padded)
    assert owner_of(owners, other) == "dave"
    assert owner_of(owners, sshsig.parse_public_key(_line(keys["mallory"]))) is None
    data = b'{"act":"review.resolve"}\n'
    signature = _with_blob(sshsig.sign(keys["rsa"], data, "evalops"), padded)
    assert sshsig.verify(signature, data, "evalops").valid
    judged = check_signatures(authority, "review.resolve", data, [signature], Scope())
    assert judged.ok
    assert judged.signers == [Signer("dave", other.fingerprint)]


def test_an_owner_lookup_of_a_key_that_does_not_load_is_no_one() -> None:
    assert owner_of({}, sshsig.PublicKey("ssh-ed25519", b"\x00\x00\x00\x0bssh-ed25519")) is None


def test_key_owners_maps_each_key_to_its_principal(keys: dict[str, Any]) -> None:
    owners = key_owners(_authority(keys))
    expected = {
        sshsig.parse_public_key(_line(keys[k])).blob: p
        for k, p in (("alice", "alice"), ("bob", "bob"), ("carol", "carol"), ("rsa", "dave"))
    }
    assert owners == expected


def test_a_judge_with_a_scope_that_holds_lists_judges_it_all_the_same(
    keys: dict[str, Any],
) -> None:
    """A scope read back from a stored row may hold lists (unhashable): not memoized, judged."""
    authority = _authority(keys)
    data = b'{"act":"waiver.grant"}\n'
    signature = sshsig.sign(keys["bob"], data, "evalops")
    listed = Scope("smoke/x", "t", ["b1"])  # type: ignore[arg-type]
    judge_ = SignatureJudge(authority)
    for _ in range(2):
        assert judge_.check("waiver.grant", data, [signature], listed).refusal == (
            "signature 1: principal 'bob' holds risk_owner but not for suite 'smoke/x', task 't'"
        )
    assert judge_.check("waiver.grant", data, [signature], Scope("regression/x")).ok


# ------------------------------------------------------------------------------ judge


def _judge(keys: dict[str, Any], act: dict[str, Any], body: dict[str, Any], **kw: Any) -> Any:
    data = kw.pop("data", None) or act_bytes(act)
    signer = kw.pop("signer", "alice")
    args: dict[str, Any] = {
        "kind": "waiver.grant",
        "body": body,
        "data": data,
        "signatures": [sshsig.sign(keys[signer], data, "evalops")],
        "authority": _authority(keys, max_act_age_days=3),
        "authority_digest": DIGEST,
        "scope": Scope("regression/core", "t"),
        "now": NOW,
        "registry_id": REGISTRY,
    }
    args.update(kw)
    return judge(**args)


def test_an_act_that_is_what_the_command_would_store_stands(keys: dict[str, Any]) -> None:
    judged = _judge(keys, _act(), {"task": "t"})
    assert judged.ok
    assert [s.principal for s in judged.signers] == ["alice"]


def test_an_act_of_another_kind_is_refused(keys: dict[str, Any]) -> None:
    judged = _judge(keys, _act(act="waiver.revoke"), {"task": "t"})
    assert judged.refusal == "the act is a waiver.revoke act, not waiver.grant"
    assert judged.rule == "authority"


def test_an_act_of_another_registry_is_refused_under_its_own_rule(keys: dict[str, Any]) -> None:
    other = "0b4c7e8e-0000-4000-8000-000000000002"
    judged = _judge(keys, _act(registry_id=other), {"task": "t"})
    assert judged.refusal == (
        f"the act is an act of registry {other}, not of this one ({REGISTRY}): an act "
        "belongs to the registry it was printed by"
    )
    assert judged.rule == "registry"


def test_an_act_that_differs_from_what_would_be_stored_names_the_first_field(
    keys: dict[str, Any],
) -> None:
    judged = _judge(keys, _act(task="u", reason="r"), {"task": "t", "reason": "s"})
    assert judged.refusal == (
        'the act differs from what this command would store: reason is "r" in the act, "s" here'
    )
    judged = _judge(keys, _act(), {"task": "t", "extra": [1]})
    assert judged.refusal == (
        "the act differs from what this command would store: extra is null in the act, [1] here"
    )
    judged = _judge(keys, _act(more=True), {"task": "t"})
    assert judged.refusal == (
        "the act differs from what this command would store: more is true in the act, null here"
    )


def test_an_act_with_the_same_fields_in_other_bytes_is_refused(keys: dict[str, Any]) -> None:
    act = _act()
    spaced = json.dumps(act, sort_keys=True).encode() + b"\n"
    assert json.loads(spaced) == act and spaced != act_bytes(act)
    judged = _judge(keys, act, {"task": "t"}, data=spaced)
    assert judged.refusal == (
        "the act's bytes differ from the canonical JSON of what this command would store"
    )
    judged = _judge(keys, act, {"task": "t"}, data=act_bytes(act)[:-1])
    assert judged.refusal == (
        "the act's bytes differ from the canonical JSON of what this command would store"
    )


def test_an_act_under_another_authority_is_refused(keys: dict[str, Any]) -> None:
    other = "sha256:" + "b" * 64
    judged = _judge(keys, _act(authority_digest=other), {"task": "t"})
    assert judged.refusal == (
        f"the act was signed under authority {other}, not the one in force ({DIGEST})"
    )


@pytest.mark.parametrize(
    ("signed_at", "refusal"),
    [
        # Five minutes of clock skew are allowed, not a second more.
        (NOW + timedelta(minutes=5), None),
        (NOW + timedelta(minutes=5, microseconds=1), "in the future"),
        (NOW + timedelta(days=1), "in the future"),
        # max_act_age_days 3: exactly 3 days ago stands, a moment older does not.
        (NOW - timedelta(days=3), None),
        (NOW - timedelta(days=3, microseconds=1), "max_act_age_days"),
        (NOW - timedelta(days=30), "max_act_age_days"),
        (NOW, None),
    ],
)
def test_an_act_is_refused_when_too_old_or_in_the_future(
    keys: dict[str, Any], signed_at: datetime, refusal: str | None
) -> None:
    text = signed_at.isoformat(timespec="microseconds").replace("+00:00", "Z")
    judged = _judge(keys, _act(signed_at=text), {"task": "t"})
    if refusal is None:
        assert judged.ok, judged.refusal
    elif refusal == "in the future":
        assert judged.refusal == f"the act is signed at {text}, in the future"
    else:
        assert judged.refusal == (f"the act was signed at {text}, more than max_act_age_days 3 ago")


def test_the_signatures_are_judged_last(keys: dict[str, Any]) -> None:
    judged = _judge(keys, _act(), {"task": "t"}, signer="mallory")
    assert judged.refusal is not None and judged.refusal.startswith("signature 1: key SHA256:")
    judged = _judge(keys, _act(), {"task": "t"}, signer="carol")
    assert judged.refusal == (
        "signature 1: principal 'carol' holds risk_owner but not for suite 'regression/core', "
        "task 't'"
    )


def test_judge_reads_the_act_and_refuses_what_is_no_act(keys: dict[str, Any]) -> None:
    with pytest.raises(MalformedAct):
        _judge(keys, _act(), {"task": "t"}, data=b"[]\n")


# ------------------------------------------------------------------------------ commits


def test_a_rule_change_needs_a_commit_signed_by_an_unscoped_policy_owner(
    keys: dict[str, Any],
) -> None:
    authority = _authority(keys)
    sha = "0123456789abcdef0123456789abcdef01234567"
    payload = b"tree 1234\nauthor a\n\nchange the policy\n"
    signed = sshsig.sign(keys["alice"], payload, "git")
    assert judge_commit(authority, sha, payload, signed) == (
        None,
        Signer("alice", sshsig.parse_public_key(_line(keys["alice"])).fingerprint),
    )

    refusal, signer = judge_commit(authority, sha, payload, None)
    assert signer is None
    assert refusal == (
        "commit 0123456789ab is not SSH-signed (git config gpg.format ssh, then sign it: "
        "`git commit --amend -S --no-edit` for the last commit, or `git rebase --exec "
        "'git commit --amend -S --no-edit' LAST_SYNCED` for every commit since the last sync)"
    )

    refusal, signer = judge_commit(authority, sha, payload, b"not a signature")
    assert signer is None and refusal is not None
    assert refusal.startswith("commit 0123456789ab carries a malformed SSH signature: ")

    # Signed for evalops acts, not for git: not a commit signature.
    refusal, signer = judge_commit(
        authority, sha, payload, sshsig.sign(keys["alice"], payload, "evalops")
    )
    assert (refusal, signer) == (
        "commit 0123456789ab: signed for namespace 'evalops', not 'git'",
        None,
    )
    refusal, signer = judge_commit(authority, sha, payload + b" ", signed)
    assert (refusal, signer) == (
        "commit 0123456789ab: the signature does not match the signed data",
        None,
    )
    mallory = sshsig.parse_public_key(_line(keys["mallory"])).fingerprint
    assert judge_commit(authority, sha, payload, sshsig.sign(keys["mallory"], payload, "git")) == (
        f"commit 0123456789ab is signed by key {mallory}, no principal's",
        None,
    )
    # A policy owner scoped to some suites does not cover rule changes; nor another role.
    for who in ("bob", "carol"):
        assert judge_commit(authority, sha, payload, sshsig.sign(keys[who], payload, "git")) == (
            f"commit 0123456789ab is signed by {who!r}, who is not a policy_owner",
            None,
        )


def test_without_any_policy_owner_no_commit_changes_the_rules(keys: dict[str, Any]) -> None:
    authority = AuthoritySpec.model_validate(
        {
            "spec_schema_version": "authority/v1",
            "id": "authority",
            "principals": [{"id": "alice", "keys": [_line(keys["alice"])]}],
            "roles": {"risk_owner": [{"principal": "alice"}]},
        }
    )
    payload = b"tree 1\n\nm\n"
    signed = sshsig.sign(keys["alice"], payload, "git")
    assert judge_commit(authority, "f" * 40, payload, signed) == (
        "commit ffffffffffff is signed by 'alice', who is not a policy_owner",
        None,
    )


# ------------------------------------------------------------------------------ memberships


def test_a_membership_row_is_signed_as_a_retirement_or_a_promotion() -> None:
    """docs/authority.md: `retire` is its own act; a new member or a new pin is
    `suite.promote`."""
    assert membership_act("retired") == "retire"
    for action in ("added", "repinned"):
        assert membership_act(action) == "suite.promote"
