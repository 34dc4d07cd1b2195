"""`SignatureJudge` (what `verify` checks every stored act with) judges each act exactly as
the plain per-act check does, however many acts one judge has judged before.

The reference below is `check_signatures` as it stood before the judge: every signature
parsed by `sshsig.verify`, the key owners, fingerprints and role grants looked up afresh for
each act. A few hundred acts (every act kind, scopes in and out of scoped grants, keys of
every type and unknown ones, tampered messages, other namespaces, duplicate and missing
signatures, thresholds) are judged in random order by one shared judge, by a fresh one
each, and by the reference: the three judgements must be equal. The reference follows the
contract as it changed since: a threshold undeclared by the authority is 1, except
`trials.void_hard`, whose default is 2 (docs/trials.md, "Voiding a mistaken record").
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from evalops.domain import sshsig
from evalops.domain.authority import (
    NAMESPACE,
    Judgement,
    Scope,
    SignatureJudge,
    Signer,
    check_signatures,
    key_owners,
    role_refusal,
)
from evalops.domain.specs import ACT_ROLES, AuthoritySpec

#: Thresholds the contract sets when an authority declares none (docs/trials.md: a void
#: leaving out a hard failure needs "two distinct signers ... threshold `trials.void_hard`,
#: default 2"); written out here, not read from evalops, so the reference stays independent.
CONTRACT_DEFAULT_THRESHOLDS = {"trials.void_hard": 2}


def _reference(
    authority: AuthoritySpec, kind: str, data: bytes, signatures: Sequence[bytes], scope: Scope
) -> Judgement:
    owners = key_owners(authority)
    signers: list[Signer] = []
    for number, signature in enumerate(signatures, 1):
        check = sshsig.verify(signature, data, NAMESPACE)
        key = check.signature.public_key
        if not check.valid:
            return Judgement(refusal=f"signature {number}: {check.reason}")
        principal = owners.get(key.blob)
        if principal is None:
            return Judgement(
                refusal=f"signature {number}: key {key.fingerprint} is not a key of any "
                "principal of the authority in force"
            )
        problem = role_refusal(authority, principal, kind, scope)
        if problem is not None:
            return Judgement(refusal=f"signature {number}: {problem}")
        signer = Signer(principal, key.fingerprint)
        if signer not in signers:
            signers.append(signer)
    if not signatures:
        return Judgement(refusal=f"{kind} is unsigned and an authority is in force")
    needed = authority.thresholds.get(kind, CONTRACT_DEFAULT_THRESHOLDS.get(kind, 1))  # type: ignore[call-overload]
    principals = sorted({s.principal for s in signers})
    if len(principals) < needed:
        return Judgement(
            refusal=f"{kind} needs {needed} distinct signers, has {len(principals)} "
            f"({', '.join(principals)})",
            rule="threshold",
        )
    return Judgement(signers=signers)


def _line(private: Any) -> str:
    public = private.public_key().public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH)
    return str(public.decode("ascii"))


@pytest.fixture(scope="module")
def signing_keys() -> dict[str, Any]:
    return {
        "alice": ed25519.Ed25519PrivateKey.generate(),
        "bob": ec.generate_private_key(ec.SECP256R1()),
        "carol-1": ed25519.Ed25519PrivateKey.generate(),
        "carol-2": ed25519.Ed25519PrivateKey.generate(),
        "dave": rsa.generate_private_key(public_exponent=65537, key_size=2048),
        "mallory": ed25519.Ed25519PrivateKey.generate(),  # no principal's
    }


def _authority(keys: dict[str, Any]) -> AuthoritySpec:
    return AuthoritySpec.model_validate(
        {
            "spec_schema_version": "authority/v1",
            "id": "authority",
            "principals": [
                {"id": "alice", "keys": [_line(keys["alice"])]},
                {"id": "bob", "keys": [_line(keys["bob"])]},
                {"id": "carol", "keys": [_line(keys["carol-1"]), _line(keys["carol-2"])]},
                {"id": "dave", "keys": [_line(keys["dave"])]},
            ],
            "roles": {
                "risk_owner": [
                    {"principal": "alice"},
                    {"principal": "bob", "suites": ["regression/*"]},
                    {"principal": "carol", "tasks": ["support-*"]},
                ],
                "reviewer": [{"principal": "dave"}, {"principal": "carol"}],
                "ingester": [{"principal": "alice"}, {"principal": "carol"}],
            },
            "thresholds": {"waiver.revoke": 2, "trials.ingest": 2},
        }
    )


SCOPES = [
    Scope(),
    Scope("regression/core", "support-refund"),
    Scope("regression/core", "billing-invoice"),
    Scope("smoke/core", "support-refund"),
    Scope("smoke/core", None),
    Scope(None, "support-refund", ("build-1", "build-2")),
]


def _acts(keys: dict[str, Any], count: int) -> list[tuple[str, bytes, list[bytes], Scope]]:
    """(kind, data, signatures, scope) of `count` acts, signed every which way."""
    pick = random.Random(20261202)
    names = list(keys)
    acts = []
    for n in range(count):
        kind = pick.choice(list(ACT_ROLES))
        data = f'{{"act":"{kind}","n":{n}}}\n'.encode()
        signatures = []
        for name in pick.sample(names, pick.choice([0, 1, 1, 1, 2, 2, 3])):
            signed, namespace = data, NAMESPACE
            roll = pick.random()
            if roll < 0.08:
                signed = data + b" "  # signed other bytes
            elif roll < 0.12:
                namespace = "git"
            hash_algorithm = pick.choice(["sha256", "sha512"])
            signature = sshsig.sign(keys[name], signed, namespace, hash_algorithm)
            signatures.append(signature)
            if pick.random() < 0.1:
                signatures.append(signature)  # the same signer twice
        if pick.random() < 0.05:
            signatures.append(b"not a signature")
        acts.append((kind, data, signatures, pick.choice(SCOPES)))
    return acts


def _judged(judge: Any, *args: Any) -> Any:
    try:
        return judge(*args)
    except sshsig.MalformedSignature as exc:
        return ("MalformedSignature", str(exc))


def test_one_judge_for_many_acts_judges_as_the_reference(signing_keys: dict[str, Any]) -> None:
    authority = _authority(signing_keys)
    acts = _acts(signing_keys, 300)
    shared = SignatureJudge(authority)
    outcomes = set()
    for kind, data, signatures, scope in acts:
        reference = _judged(_reference, authority, kind, data, signatures, scope)
        assert _judged(shared.check, kind, data, signatures, scope) == reference
        fresh = _judged(check_signatures, authority, kind, data, signatures, scope)
        assert fresh == reference
        if isinstance(reference, tuple):
            outcomes.add(reference[0])
        else:
            outcomes.add("ok" if reference.ok else reference.refusal or "")
    # Every way an act stands or falls came up (a generator that stopped making a case
    # would leave the comparison above testing less than it says).
    assert {"ok", "MalformedSignature"} <= outcomes
    for expected in (
        "the signature does not match the signed data",
        "signed for namespace 'git', not 'evalops'",
        "is not a key of any principal of the authority in force",
        "principal 'bob' holds risk_owner but not for",
        "principal 'dave' does not hold",
        "is unsigned and an authority is in force",
        "distinct signers, has 1 (",
    ):
        assert any(expected in o for o in outcomes), (expected, outcomes)
