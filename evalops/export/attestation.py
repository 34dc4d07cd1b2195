"""An in-toto Statement v1 of a gate decision, optionally signed in a DSSE envelope.

Statement: `subject` is the evaluated execution profile, by its execution digest;
`predicateType` is `PREDICATE_TYPE`; the predicate is the decision (its stored document
verbatim, whose digest is `result_digest`), every input digest and the audit anchors.
Signing wraps the canonical JSON of the statement in a DSSE envelope
(payloadType `application/vnd.in-toto+json`), signed with Ed25519 over DSSE's
pre-authentication encoding. Keys are Ed25519, PEM (PKCS#8 private, SubjectPublicKeyInfo
public: `openssl genpkey -algorithm ed25519`) or OpenSSH (the `ssh-keygen -t ed25519` key
every signed act uses, and its `.pub`): the envelope is the same either way.

The signature's `keyid` is the one standard DSSE verifiers derive from the public key
(securesystemslib's default, `key_id`), so they match it without configuration; it is a hint:
`verify_envelope` tries the given key on every signature. Base64 may be standard or URL-safe,
padded or not, as DSSE allows.

A statement carries its own evidence: `statement_problem` checks that it is internally
consistent (the predicate's decision is the decision document's, the document hashes to the
predicate's `result_digest`, the subject is the document's execution digest), so a hand-made
statement signed with a valid key is still refused.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalops.domain.base64_text import b64decode
from evalops.domain.canonical import canonical_json, canonical_json_document, sha256_digest
from evalops.errors import InputError, VerificationError

if TYPE_CHECKING:
    from evalops.report.document import ReportDocument


if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "urn:evalops:predicate:gate-decision:v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
MAX_FILE_BYTES = 1024 * 1024
# Fields the predicate repeats from the decision document: each must say the same.
REPEATED_FIELDS = ("gate_id", "decision", "build", "suite", "evaluated_at")
DECISIONS = ("pass", "hold", "block")
GATE_ID = re.compile(r"GATE-[1-9][0-9]*")


def statement(doc: ReportDocument) -> dict[str, Any]:
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
    """The key id standard DSSE verifiers derive (securesystemslib's default): the sha256,
    in hex, of the canonical JSON `{"keytype": "ed25519", "keyval": {"public": HEX},
    "scheme": "ed25519"}`, HEX being the 32 raw public-key bytes."""
    from cryptography.hazmat.primitives import serialization

    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    key = {"keytype": "ed25519", "keyval": {"public": raw.hex()}, "scheme": "ed25519"}
    return hashlib.sha256(canonical_json(key)).hexdigest()


def read_bounded(path: Path, field: str, what: str) -> bytes:
    """The bytes of a small input file (a key, an attestation): at most MAX_FILE_BYTES, so
    a device or a huge file is refused (exit 2) instead of read until memory runs out."""
    try:
        with path.open("rb") as stream:
            data = stream.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise InputError(f"{what} not found", str(path), field=field) from None
    except OSError as exc:
        raise InputError(f"cannot read {what}: {exc.strerror}", str(path), field=field) from None
    if len(data) > MAX_FILE_BYTES:
        raise InputError(f"{what} is larger than 1 MiB", str(path), field=field)
    return data


_ED25519_WANTED = (
    "an attestation is signed with an Ed25519 key (OpenSSH `ssh-keygen -t ed25519`, or PEM "
    "`openssl genpkey -algorithm ed25519`)"
)


def _kind(key: object) -> str:
    """A loaded key's kind, as a person names it."""
    from cryptography.hazmat.primitives.asymmetric import ec, ed448, rsa

    kinds = (
        ((ec.EllipticCurvePrivateKey, ec.EllipticCurvePublicKey), "ECDSA"),
        ((rsa.RSAPrivateKey, rsa.RSAPublicKey), "RSA"),
        ((ed448.Ed448PrivateKey, ed448.Ed448PublicKey), "Ed448"),
    )
    return next((name for types, name in kinds if isinstance(key, types)), type(key).__name__)


def load_private_key(path: Path) -> Ed25519PrivateKey:
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    data = read_bounded(path, "--sign-key", "signing key")
    openssh = data.lstrip().startswith(b"-----BEGIN OPENSSH PRIVATE KEY-----")
    try:
        if openssh:
            key: object = serialization.load_ssh_private_key(data, password=None)
        else:
            key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        what = "an unencrypted OpenSSH private key" if openssh else "an unencrypted PEM private key"
        raise InputError(
            f"not {what} ({exc}); {_ED25519_WANTED}", str(path), field="--sign-key"
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise InputError(
            f"the signing key is an {_kind(key)} key: {_ED25519_WANTED}",
            str(path),
            field="--sign-key",
        )
    return key


def load_public_key(path: Path) -> Ed25519PublicKey:
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    data = read_bounded(path, "--key", "public key")
    openssh = not data.lstrip().startswith(b"-----BEGIN")
    try:
        if openssh:
            key: object = serialization.load_ssh_public_key(data.strip())
        else:
            key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError, UnsupportedAlgorithm, NotImplementedError) as exc:
        what = "an OpenSSH public key" if openssh else "a PEM public key"
        raise InputError(f"not {what}: {exc}", str(path), field="--key") from None
    if not isinstance(key, Ed25519PublicKey):
        raise InputError(
            f"the public key is an {_kind(key)} key: {_ED25519_WANTED}", str(path), field="--key"
        )
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
        digest = s.get("digest") if isinstance(s, dict) else None
        sha = digest.get("sha256") if isinstance(digest, dict) else None
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
        payload = b64decode(envelope_doc["payload"])
    except ValueError:
        raise VerificationError("payload is not valid base64") from None
    signatures = envelope_doc.get("signatures")
    if not isinstance(signatures, list) or not signatures:
        raise VerificationError("the envelope carries no signature")
    message = pae(PAYLOAD_TYPE, payload)
    for entry in signatures:
        try:
            public.verify(b64decode(entry.get("sig")), message)
        except (InvalidSignature, ValueError, AttributeError):
            continue
        try:
            value = json.loads(payload)
        except ValueError:
            raise VerificationError("payload is not JSON") from None
        checked = check_statement(value)
        problem = statement_problem(checked)
        if problem is not None:
            raise VerificationError(f"the signed statement is not consistent: {problem}")
        return checked
    raise VerificationError("no signature in the envelope verifies with this key")


def statement_problem(value: Mapping[str, Any]) -> str | None:
    """Why a statement contradicts itself, or None: the signer vouched for the decision
    document, so everything the statement says beside it must follow from it."""
    predicate = value["predicate"]
    document = predicate.get("decision_document")
    if not isinstance(document, dict):
        return "the predicate has no decision_document"
    # What a release job reads off the statement must be what evalops writes: a document
    # made by hand and signed with a valid key may hold anything at all.
    if document.get("decision") not in DECISIONS:
        return (
            f"the decision document's decision is {document.get('decision')!r}, not one of "
            f"{', '.join(DECISIONS)}"
        )
    gate_id = document.get("gate_id")
    if not isinstance(gate_id, str) or GATE_ID.fullmatch(gate_id) is None:
        return f"the decision document's gate_id is {gate_id!r}, not GATE-<n>"
    for name in REPEATED_FIELDS:
        if predicate.get(name) != document.get(name):
            return (
                f"predicate.{name} is {predicate.get(name)!r}, the decision document says "
                f"{document.get(name)!r}"
            )
    digests = predicate.get("digests")
    if not isinstance(digests, dict):
        return "the predicate has no digests"
    try:
        recomputed = sha256_digest(canonical_json_document(document))
    except (TypeError, ValueError) as exc:
        return f"the decision document is not canonical JSON data: {exc}"
    if digests.get("result_digest") != recomputed:
        return (
            f"the decision document hashes to {recomputed}, not to "
            f"result_digest {digests.get('result_digest')!r}"
        )
    execution = document.get("execution_digest")
    if digests.get("execution_digest") != execution:
        return "predicate.digests.execution_digest is not the decision document's"
    subjects = [f"sha256:{s['digest']['sha256']}" for s in value["subject"]]
    if subjects != [execution]:
        return (
            f"the subject is {', '.join(subjects)}, not the decision's execution digest "
            f"{execution!r}"
        )
    return None


def attestation_json(doc: ReportDocument, sign_key: Path | None = None) -> str:
    value: dict[str, Any] = statement(doc)
    if sign_key is not None:
        value = envelope(value, load_private_key(sign_key))
    return json.dumps(value, indent=2, ensure_ascii=True) + "\n"
