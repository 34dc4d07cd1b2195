"""An in-toto Statement v1 of a gate decision, optionally signed in a DSSE envelope.

Statement: `subject` is the evaluated execution profile, by its execution digest;
`predicateType` is `PREDICATE_TYPE`; the predicate is the decision (its stored document
verbatim, whose digest is `result_digest`), every input digest and the audit anchors.
Signing wraps the canonical JSON of the statement in a DSSE envelope
(payloadType `application/vnd.in-toto+json`), signed with Ed25519 over DSSE's
pre-authentication encoding. Keys are PEM: PKCS#8 private, SubjectPublicKeyInfo public
(`openssl genpkey -algorithm ed25519`).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalops.domain.canonical import canonical_json
from evalops.errors import InputError, VerificationError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "urn:evalops:predicate:gate-decision:v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"


def statement(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The in-toto Statement v1 of a report document."""
    digests = doc.get("digests") or {}
    execution = str(digests.get("execution_digest") or "")
    if not execution.startswith("sha256:"):
        raise InputError("the decision has no sha256 execution digest to attest")
    return {
        "_type": STATEMENT_TYPE,
        "subject": [
            {
                "name": f"evalops-execution:{doc['build']}",
                "digest": {"sha256": execution.removeprefix("sha256:")},
            }
        ],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "gate_id": doc["gate_id"],
            "decision": doc["decision"],
            "build": doc["build"],
            "suite": doc["suite"],
            "evaluated_at": doc["evaluated_at"],
            "decided_at": doc.get("decided_at"),
            "decided_by": doc.get("decided_by"),
            "digests": {
                "suite_digest": digests.get("suite_digest"),
                "policy_digest": digests.get("policy_digest"),
                "execution_digest": digests.get("execution_digest"),
                "baseline_execution_digest": digests.get("baseline_execution_digest"),
                "inputs_digest": digests.get("inputs_digest"),
                "result_digest": digests.get("result_digest"),
                "eval_cases": list(digests.get("eval_cases", [])),
            },
            "decision_document": doc.get("decision_document"),
            "audit_head": doc.get("audit_head"),
            "decision_event": doc.get("decision_event"),
            "evalops_version": doc.get("evalops_version"),
            "recompute": list(doc.get("recompute", [])),
        },
    }


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE pre-authentication encoding: what is actually signed."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def key_id(public: Ed25519PublicKey) -> str:
    """`sha256:` of the public key's DER SubjectPublicKeyInfo (a hint, not trusted)."""
    from cryptography.hazmat.primitives import serialization

    der = public.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return "sha256:" + hashlib.sha256(der).hexdigest()


def load_private_key(path: Path) -> Ed25519PrivateKey:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except FileNotFoundError:
        raise InputError("signing key not found", str(path), field="--sign-key") from None
    except (ValueError, TypeError) as exc:
        raise InputError(
            f"not an unencrypted PEM private key: {exc}", str(path), field="--sign-key"
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise InputError("the signing key must be Ed25519", str(path), field="--sign-key")
    return key


def load_public_key(path: Path) -> Ed25519PublicKey:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        key = serialization.load_pem_public_key(path.read_bytes())
    except FileNotFoundError:
        raise InputError("public key not found", str(path), field="--key") from None
    except (ValueError, TypeError) as exc:
        raise InputError(f"not a PEM public key: {exc}", str(path), field="--key") from None
    if not isinstance(key, Ed25519PublicKey):
        raise InputError("the public key must be Ed25519", str(path), field="--key")
    return key


def envelope(statement_doc: Mapping[str, Any], key: Ed25519PrivateKey) -> dict[str, Any]:
    """A DSSE envelope of the statement's canonical JSON, signed with `key`."""
    payload = canonical_json(dict(statement_doc))
    signature = key.sign(pae(PAYLOAD_TYPE, payload))
    return {
        "payloadType": PAYLOAD_TYPE,
        "payload": base64.b64encode(payload).decode("ascii"),
        "signatures": [
            {
                "keyid": key_id(key.public_key()),
                "sig": base64.b64encode(signature).decode("ascii"),
            }
        ],
    }


def check_statement(value: Any) -> dict[str, Any]:
    """`value` as an in-toto Statement v1 with this predicate type, or VerificationError."""
    if not isinstance(value, dict) or value.get("_type") != STATEMENT_TYPE:
        raise VerificationError(f"payload is not an in-toto Statement ({STATEMENT_TYPE})")
    subjects = value.get("subject")
    if not isinstance(subjects, list) or not subjects:
        raise VerificationError("statement has no subject")
    for s in subjects:
        sha = s.get("digest", {}).get("sha256") if isinstance(s, dict) else None
        if not isinstance(sha, str) or len(sha) != 64 or sha.strip("0123456789abcdef"):
            raise VerificationError("a subject has no valid digest.sha256")
    if value.get("predicateType") != PREDICATE_TYPE:
        raise VerificationError(
            f"predicateType is {value.get('predicateType')!r}, expected {PREDICATE_TYPE}"
        )
    if not isinstance(value.get("predicate"), dict):
        raise VerificationError("statement has no predicate object")
    return value


def verify_envelope(envelope_doc: Any, public: Ed25519PublicKey) -> dict[str, Any]:
    """The statement inside a DSSE envelope signed by `public`; VerificationError otherwise."""
    from cryptography.exceptions import InvalidSignature

    if not isinstance(envelope_doc, dict) or "payload" not in envelope_doc:
        raise VerificationError("not a DSSE envelope (an unsigned statement cannot be verified)")
    if envelope_doc.get("payloadType") != PAYLOAD_TYPE:
        raise VerificationError(f"payloadType is not {PAYLOAD_TYPE}")
    try:
        payload = base64.b64decode(str(envelope_doc["payload"]), validate=True)
    except ValueError:
        raise VerificationError("payload is not valid base64") from None
    signatures = envelope_doc.get("signatures")
    if not isinstance(signatures, list) or not signatures:
        raise VerificationError("the envelope carries no signature")
    message = pae(PAYLOAD_TYPE, payload)
    for entry in signatures:
        try:
            sig = base64.b64decode(str(entry.get("sig", "")), validate=True)
            public.verify(sig, message)
        except (InvalidSignature, ValueError, AttributeError):
            continue
        try:
            return check_statement(json.loads(payload))
        except ValueError:
            raise VerificationError("payload is not JSON") from None
    raise VerificationError("no signature in the envelope verifies with this key")


def attestation_json(doc: Mapping[str, Any], sign_key: Path | None = None) -> str:
    value: dict[str, Any] = statement(doc)
    if sign_key is not None:
        value = envelope(value, load_private_key(sign_key))
    return json.dumps(value, indent=2, ensure_ascii=True) + "\n"
