"""evalops' SSHSIG verifier agrees with `ssh-keygen -Y verify` on every case an attacker tries.

Every case is judged twice: by `evalops.domain.sshsig` (valid only when the signature holds
AND its key is the expected one) and by OpenSSH with an allowed-signers file holding the
expected key. Signatures come from real `ssh-keygen -Y sign`; the hostile ones are its output
cut, padded, re-labelled or re-signed with the same key over other bytes.
"""

from __future__ import annotations

import base64
import hashlib
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.hazmat.primitives.serialization import load_ssh_private_key
from hypothesis import given, settings
from hypothesis import strategies as st

from evalops.domain import sshsig
from tests.sshkeys import KEY_SPECS, armor, make_key, public_key, sign, ssh_keygen_verifies

MESSAGE = b'{"act":"waiver.grant","act_id":"0b8e","reason":"known flake"}'


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("sshkeys")
    made = {kind: make_key(root, kind, kind) for kind in KEY_SPECS}
    made["ed25519-other"] = make_key(root, "ed25519-other", "ed25519")
    return made


def _s(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


def _fields(armored: bytes) -> list[bytes]:
    """[magic, version, key, namespace, reserved, hashalg, signature] of an SSHSIG blob."""
    lines = armored.decode().strip().splitlines()[1:-1]
    blob = base64.b64decode("".join(lines))
    out, at = [blob[:6], blob[6:10]], 10
    while at < len(blob):
        n = int.from_bytes(blob[at : at + 4], "big")
        out.append(blob[at + 4 : at + 4 + n])
        at += 4 + n
    return out


def _rebuild(fields: list[bytes]) -> bytes:
    return armor(fields[0] + fields[1] + b"".join(_s(f) for f in fields[2:]))


def _signed_data(namespace: bytes, hashalg: bytes, message: bytes) -> bytes:
    """PROTOCOL.sshsig's signed data, written out here independently of evalops."""
    digest = hashlib.new(hashalg.decode(), message).digest()
    return b"SSHSIG" + _s(namespace) + _s(b"") + _s(hashalg) + _s(digest)


def _rsa_signature(private: Path, sig_type: bytes, digest: hashes.HashAlgorithm) -> bytes:
    """An SSHSIG made with the RSA key directly, with a chosen signature algorithm."""
    key = load_ssh_private_key(private.read_bytes(), None)
    assert isinstance(key, rsa.RSAPrivateKey)
    good = _fields(sign(private, MESSAGE))
    raw = key.sign(_signed_data(b"evalops", b"sha512", MESSAGE), padding.PKCS1v15(), digest)
    return _rebuild([*good[:6], _s(sig_type) + _s(raw)])


def _ours(signature: bytes, message: bytes, key_line: str, namespace: str) -> bool:
    try:
        check = sshsig.verify(signature, message, namespace)
    except sshsig.MalformedSignature:
        return False
    expected = sshsig.parse_public_key(key_line)
    return check.valid and check.signature.public_key.blob == expected.blob


Case = Callable[[dict[str, Path], str], tuple[bytes, bytes, str, str]]


def _good(keys: dict[str, Path], kind: str) -> tuple[bytes, bytes, str, str]:
    return sign(keys[kind], MESSAGE), MESSAGE, public_key(keys[kind]), "evalops"


def _mutated(change: Callable[[list[bytes]], list[bytes]]) -> Case:
    def case(keys: dict[str, Path], kind: str) -> tuple[bytes, bytes, str, str]:
        sig, message, key, ns = _good(keys, kind)
        return _rebuild(change(_fields(sig))), message, key, ns

    return case


def _flip_last_signature_byte(f: list[bytes]) -> list[bytes]:
    inner = f[6]
    return [*f[:6], inner[:-1] + bytes([inner[-1] ^ 1])]


CASES: dict[str, Case] = {
    "good": _good,
    "sha256 hash": lambda k, kind: (
        sign(k[kind], MESSAGE, "evalops", "-O", "hashalg=sha256"),
        MESSAGE,
        public_key(k[kind]),
        "evalops",
    ),
    "other message": lambda k, kind: (
        sign(k[kind], MESSAGE),
        MESSAGE.replace(b"flake", b"flakE"),
        public_key(k[kind]),
        "evalops",
    ),
    "message with a trailing newline": lambda k, kind: (
        sign(k[kind], MESSAGE),
        MESSAGE + b"\n",
        public_key(k[kind]),
        "evalops",
    ),
    "wrong namespace": lambda k, kind: (
        sign(k[kind], MESSAGE, "git"),
        MESSAGE,
        public_key(k[kind]),
        "evalops",
    ),
    "namespace field relabelled": lambda k, kind: (
        _rebuild([*(f := _fields(sign(k[kind], MESSAGE, "git")))[:3], b"evalops", *f[4:]]),
        MESSAGE,
        public_key(k[kind]),
        "evalops",
    ),
    "hash field relabelled": _mutated(lambda f: [*f[:5], b"sha256", *f[6:]]),
    "unknown hash": _mutated(lambda f: [*f[:5], b"md5", *f[6:]]),
    "version 2": _mutated(lambda f: [f[0], (2).to_bytes(4, "big"), *f[2:]]),
    "bad magic": _mutated(lambda f: [b"SSHSIH", *f[1:]]),
    "reserved field set": _mutated(lambda f: [*f[:4], b"x", *f[5:]]),
    "signature bit flipped": _mutated(_flip_last_signature_byte),
    "other key of the type": lambda k, kind: (
        sign(k[kind], MESSAGE),
        MESSAGE,
        public_key(k["ed25519-other" if kind == "ed25519" else "ed25519"]),
        "evalops",
    ),
    "key field swapped": lambda k, kind: (
        _rebuild(
            [
                *(f := _fields(sign(k[kind], MESSAGE)))[:2],
                _fields(sign(k["ed25519-other"], MESSAGE))[2],
                *f[3:],
            ]
        ),
        MESSAGE,
        public_key(k["ed25519-other"]),
        "evalops",
    ),
    "truncated by one byte": lambda k, kind: _truncated(k, kind, 1),
    "truncated by half": lambda k, kind: _truncated(k, kind, None),
    "one trailing byte": lambda k, kind: _padded(k, kind, b"\0"),
    "oversized trailer": lambda k, kind: _padded(k, kind, b"A" * 70_000),
    "signature with trailing byte": _mutated(lambda f: [*f[:6], f[6] + b"\0"]),
    "not base64": lambda k, kind: (
        sign(k[kind], MESSAGE).replace(b"U1NIU0lH", b"U1NIU0l*"),
        MESSAGE,
        public_key(k[kind]),
        "evalops",
    ),
}


def _truncated(keys: dict[str, Path], kind: str, cut: int | None) -> tuple[bytes, bytes, str, str]:
    sig, message, key, ns = _good(keys, kind)
    blob = base64.b64decode("".join(sig.decode().strip().splitlines()[1:-1]))
    return armor(blob[: len(blob) // 2 if cut is None else -cut]), message, key, ns


def _padded(keys: dict[str, Path], kind: str, extra: bytes) -> tuple[bytes, bytes, str, str]:
    sig, message, key, ns = _good(keys, kind)
    blob = base64.b64decode("".join(sig.decode().strip().splitlines()[1:-1]))
    return armor(blob + extra), message, key, ns


EXPECTED_VALID = {"good", "sha256 hash", "reserved field set"}


@pytest.mark.parametrize("kind", list(KEY_SPECS))
@pytest.mark.parametrize("case", list(CASES))
def test_evalops_agrees_with_ssh_keygen(
    keys: dict[str, Path], kind: str, case: str, tmp_path: Path
) -> None:
    signature, message, key_line, namespace = CASES[case](keys, kind)
    openssh = ssh_keygen_verifies(signature, message, key_line, namespace, tmp_path)
    assert _ours(signature, message, key_line, namespace) == openssh
    # And each case means what its name says (a case that stopped testing anything fails).
    assert openssh == (case in EXPECTED_VALID)


@pytest.mark.parametrize(
    ("sig_type", "digest", "valid"),
    [
        (b"rsa-sha2-256", hashes.SHA256(), True),
        (b"rsa-sha2-512", hashes.SHA512(), True),
        (b"ssh-rsa", hashes.SHA1(), False),  # SHA-1: refused by OpenSSH and by evalops
        (b"rsa-sha2-256", hashes.SHA512(), False),  # labelled one hash, made with another
    ],
)
def test_rsa_signature_algorithms(
    keys: dict[str, Path],
    sig_type: bytes,
    digest: hashes.HashAlgorithm,
    valid: bool,
    tmp_path: Path,
) -> None:
    signature = _rsa_signature(keys["rsa"], sig_type, digest)
    key_line = public_key(keys["rsa"])
    assert ssh_keygen_verifies(signature, MESSAGE, key_line, "evalops", tmp_path) is valid
    assert _ours(signature, MESSAGE, key_line, "evalops") is valid


@pytest.mark.parametrize("kind", list(KEY_SPECS))
def test_fingerprint_is_what_ssh_keygen_prints(keys: dict[str, Path], kind: str) -> None:
    printed = subprocess.run(
        ["ssh-keygen", "-l", "-E", "sha256", "-f", f"{keys[kind]}.pub"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()[1]
    assert sshsig.parse_public_key(public_key(keys[kind])).fingerprint == printed


@pytest.mark.parametrize(
    "line",
    [
        "",
        "ssh-ed25519",
        "ssh-ed25519 not*base64",
        "ssh-dss AAAAB3NzaC1kc3MAAACBAP",
        # an ed25519 blob labelled as an RSA key
        "ssh-rsa AAAAC3NzaC1lZDI1NTE5AAAAIBm7BeQK7z6M0G0Q9R6o9m5Cq0m3FYyYk3s8l7c7iK0A",
        # a truncated ed25519 key
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBm7BeQK7z6M0G0Q9R6o",
    ],
)
def test_malformed_public_keys_are_refused(line: str) -> None:
    with pytest.raises(sshsig.MalformedKey):
        sshsig.parse_public_key(line)


def test_malformed_signature_names_the_problem() -> None:
    with pytest.raises(sshsig.MalformedSignature, match="armored"):
        sshsig.parse_signature(
            b"-----BEGIN PGP SIGNATURE-----\nAAAA\n-----END PGP SIGNATURE-----\n"
        )
    with pytest.raises(sshsig.MalformedSignature, match="larger than"):
        sshsig.parse_signature(b"A" * (sshsig.MAX_ARMORED_BYTES + 1))


def test_wrong_namespace_says_which(keys: dict[str, Path]) -> None:
    check = sshsig.verify(sign(keys["ed25519"], MESSAGE, "git"), MESSAGE, "evalops")
    assert not check.valid and "'git'" in check.reason


@pytest.mark.parametrize("kind", list(KEY_SPECS))
@pytest.mark.parametrize("hash_algorithm", ["sha256", "sha512"])
def test_python_signatures_verify_with_ssh_keygen(
    keys: dict[str, Path], kind: str, hash_algorithm: str, tmp_path: Path
) -> None:
    """`evalops.authority.sign_act` writes what OpenSSH accepts, for every key type."""
    key = load_ssh_private_key(keys[kind].read_bytes(), None)
    signature = sshsig.sign(key, MESSAGE, "evalops", hash_algorithm)
    line = public_key(keys[kind])
    assert ssh_keygen_verifies(signature, MESSAGE, line, "evalops", tmp_path)
    assert not ssh_keygen_verifies(signature, MESSAGE + b" ", line, "evalops", tmp_path)
    assert _ours(signature, MESSAGE, line, "evalops")


# ------------------------------------------------------------------ FIDO security keys
#
# No hardware key exists here: the keys and signatures are built with `cryptography`
# following OpenSSH's PROTOCOL.u2f, written out below independently of evalops, and every
# case is checked against `ssh-keygen -Y verify`.

SK_TYPES = {
    "sk-ed25519": b"sk-ssh-ed25519@openssh.com",
    "sk-ecdsa": b"sk-ecdsa-sha2-nistp256@openssh.com",
}


def _mp(value: int) -> bytes:
    return _s(value.to_bytes((value.bit_length() + 8) // 8, "big") if value else b"")


def _sk_signature(kind: str, how: dict[str, Any] | None = None) -> tuple[bytes, str]:
    """(armored SSHSIG, public key line) of a fresh security key: the authenticator signs
    sha256(application) || flags || uint32 counter || sha256(SSHSIG signed data)."""
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519
    from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    how = how or {}
    application: bytes = how.get("application", b"ssh:")
    signed_application: bytes = how.get("signed_application", application)
    flags: int = how.get("flags", 0x01)
    counter: int = how.get("counter", 7)
    namespace: bytes = how.get("namespace", b"evalops")
    key_type = SK_TYPES[kind]
    data = _signed_data(namespace, b"sha512", MESSAGE)
    signed = (
        hashlib.sha256(signed_application).digest()
        + bytes([flags])
        + counter.to_bytes(4, "big")
        + hashlib.sha256(data).digest()
    )
    if kind == "sk-ed25519":
        private = ed25519.Ed25519PrivateKey.generate()
        raw = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        blob = _s(key_type) + _s(raw) + _s(application)
        signature = _s(private.sign(signed))
    else:
        ec_private = ec.generate_private_key(ec.SECP256R1())
        point = ec_private.public_key().public_bytes(Encoding.X962, PublicFormat.UncompressedPoint)
        blob = _s(key_type) + _s(b"nistp256") + _s(point) + _s(application)
        r, s = decode_dss_signature(ec_private.sign(signed, ec.ECDSA(hashes.SHA256())))
        signature = _s(_mp(r) + _mp(s))
    inner = (
        _s(how.get("sig_type", key_type)) + signature + bytes([flags]) + counter.to_bytes(4, "big")
    )
    armored = _rebuild(
        [
            b"SSHSIG",
            (1).to_bytes(4, "big"),
            blob,
            namespace,
            b"",
            b"sha512",
            inner + how.get("tail", b""),
        ]
    )
    return armored, f"{key_type.decode()} {base64.b64encode(blob).decode()} sk@test"


SK_CASES: dict[str, tuple[dict[str, Any], bytes, bool]] = {
    # name: (how the signature is made, the message checked, valid for OpenSSH)
    "good": ({}, MESSAGE, True),
    "user verified too": ({"flags": 0x05}, MESSAGE, True),
    # ssh-keygen -Y verify does not require the user-presence flag (sshd does): neither do we.
    "no user presence": ({"flags": 0x00}, MESSAGE, True),
    "another application": ({"application": b"ssh:evalops"}, MESSAGE, True),
    "signed for another application": ({"signed_application": b"ssh:other"}, MESSAGE, False),
    "other message": ({}, MESSAGE + b"!", False),
    "wrong namespace": ({"namespace": b"git"}, MESSAGE, False),
    "trailing byte after the counter": ({"tail": b"\0"}, MESSAGE, False),
    "signature type of the other sk key": ({"sig_type": b"other"}, MESSAGE, False),
}


@pytest.mark.parametrize("kind", list(SK_TYPES))
@pytest.mark.parametrize("case", list(SK_CASES))
def test_security_key_signatures_agree_with_ssh_keygen(
    kind: str, case: str, tmp_path: Path
) -> None:
    how, message, valid = SK_CASES[case]
    if how.get("sig_type") == b"other":
        other = next(t for k, t in SK_TYPES.items() if k != kind)
        how = {**how, "sig_type": other}
    signature, key_line = _sk_signature(kind, how)
    openssh = ssh_keygen_verifies(signature, message, key_line, "evalops", tmp_path)
    assert openssh is valid
    assert _ours(signature, message, key_line, "evalops") is valid


@pytest.mark.parametrize("kind", list(SK_TYPES))
def test_security_key_flipped_bit_and_truncation(kind: str, tmp_path: Path) -> None:
    signature, key_line = _sk_signature(kind)
    fields = _fields(signature)
    inner = fields[6]
    # A flipped counter bit: the authenticator did not sign that counter.
    flipped = _rebuild([*fields[:6], inner[:-1] + bytes([inner[-1] ^ 1])])
    # No counter at all: a malformed signature.
    cut = _rebuild([*fields[:6], inner[:-4]])
    for bad in (flipped, cut):
        assert not ssh_keygen_verifies(bad, MESSAGE, key_line, "evalops", tmp_path)
        assert not _ours(bad, MESSAGE, key_line, "evalops")
    with pytest.raises(sshsig.MalformedSignature):
        sshsig.parse_signature(cut)


@pytest.mark.parametrize("kind", list(SK_TYPES))
def test_security_key_fingerprint_is_what_ssh_keygen_prints(kind: str, tmp_path: Path) -> None:
    _, key_line = _sk_signature(kind)
    (tmp_path / "sk.pub").write_text(key_line + "\n")
    printed = subprocess.run(
        ["ssh-keygen", "-l", "-E", "sha256", "-f", str(tmp_path / "sk.pub")],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert sshsig.parse_public_key(key_line).fingerprint == printed[1]
    assert printed[-1] == ("(ED25519-SK)" if kind == "sk-ed25519" else "(ECDSA-SK)")


# ------------------------------------------------------------------ sshsig.Verifier
#
# `verify` re-checks every stored act with a Verifier, which reads ssh-keygen's Ed25519
# layout by a table lookup instead of the general parse: every case above, and random edits
# of a good signature, must come out of it exactly as out of `sshsig.verify` (the reference):
# the same reason (None when valid) and key, or the same exception and message.


def _reference(signature: bytes, message: bytes, namespace: str) -> Any:
    try:
        check = sshsig.verify(signature, message, namespace)
    except sshsig.MalformedSignature as exc:
        return ("MalformedSignature", str(exc))
    return (None if check.valid else check.reason), check.signature.public_key


def _checked(verifier: sshsig.Verifier, signature: bytes, message: bytes) -> Any:
    try:
        return verifier.check(signature, message)
    except sshsig.MalformedSignature as exc:
        return ("MalformedSignature", str(exc))


def _key_blobs(keys: dict[str, Path]) -> list[bytes]:
    return [sshsig.parse_public_key(public_key(path)).blob for path in keys.values()]


@pytest.mark.parametrize("known", ["every key", "no key"])
@pytest.mark.parametrize("kind", list(KEY_SPECS))
@pytest.mark.parametrize("case", list(CASES))
def test_verifier_agrees_with_verify(
    keys: dict[str, Path], kind: str, case: str, known: str
) -> None:
    signature, message, _, namespace = CASES[case](keys, kind)
    verifier = sshsig.Verifier(_key_blobs(keys) if known == "every key" else [], namespace)
    for text in (message, MESSAGE + b" ", b""):
        assert _checked(verifier, signature, text) == _reference(signature, text, namespace)


@pytest.mark.parametrize("hash_algorithm", ["sha256", "sha512"])
def test_verifier_takes_its_lookup_for_ed25519_signatures(
    keys: dict[str, Path], hash_algorithm: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ssh-keygen's and evalops' own Ed25519 signatures never reach the general parse (else
    the comparison above would not test the lookup at all); a key it does not know does."""
    made = sign(keys["ed25519"], MESSAGE, "evalops", "-O", f"hashalg={hash_algorithm}")
    private = load_ssh_private_key(keys["ed25519"].read_bytes(), None)
    ours = sshsig.sign(private, MESSAGE, "evalops", hash_algorithm)  # type: ignore[arg-type]
    expected = {s: _reference(s, MESSAGE, "evalops") for s in (made, ours)}
    verifier = sshsig.Verifier(_key_blobs(keys), "evalops")
    stranger = sshsig.Verifier([sshsig.parse_public_key(public_key(keys["rsa"])).blob], "evalops")

    def general(*_: Any) -> sshsig.SignatureCheck:
        raise AssertionError("the general parse ran")

    monkeypatch.setattr(sshsig, "verify", general)
    for signature, check in expected.items():
        assert check[0] is None and verifier.check(signature, MESSAGE) == check
        assert verifier.check(signature, MESSAGE + b" ")[0] is not None
        with pytest.raises(AssertionError, match="the general parse ran"):
            stranger.check(signature, MESSAGE)


@settings(max_examples=300, deadline=None)
@given(
    edit=st.one_of(
        st.tuples(st.just("byte"), st.integers(0, 400), st.integers(1, 255)),
        st.tuples(st.just("cut"), st.integers(1, 200), st.just(0)),
        st.tuples(st.just("add"), st.integers(0, 400), st.integers(0, 255)),
        st.tuples(st.just("none"), st.just(0), st.just(0)),
    ),
    width=st.sampled_from([70, 76, 64, 1, 1000]),
    hash_algorithm=st.sampled_from(["sha256", "sha512"]),
    message_edit=st.integers(-1, 80),
)
def test_verifier_agrees_with_verify_on_random_edits(
    ed25519_private: Any, edit: tuple[str, int, int], width: int, hash_algorithm: str,
    message_edit: int,
) -> None:  # fmt: skip
    """A good Ed25519 signature with one byte of its blob changed, cut off or added (in the
    head the lookup matches on, or in the signature), re-armored at any line width, over the
    message or the message with one byte changed."""
    private, blob_of_key = ed25519_private
    armored = sshsig.sign(private, MESSAGE, "evalops", hash_algorithm)
    blob = base64.b64decode("".join(armored.decode().strip().splitlines()[1:-1]))
    how, at, value = edit
    at %= len(blob)
    if how == "byte":
        blob = blob[:at] + bytes([blob[at] ^ value]) + blob[at + 1 :]
    elif how == "cut":
        blob = blob[:-at] if at < len(blob) else b""
    elif how == "add":
        blob = blob[:at] + bytes([value]) + blob[at:]
    body = base64.b64encode(blob).decode()
    lines = [body[i : i + width] for i in range(0, len(body), width)]
    signature = "\n".join([sshsig.BEGIN, *lines, sshsig.END, ""]).encode()
    message = MESSAGE
    if 0 <= message_edit < len(MESSAGE):
        message = MESSAGE[:message_edit] + b"#" + MESSAGE[message_edit + 1 :]
    verifier = sshsig.Verifier([blob_of_key], "evalops")
    reference = _reference(signature, message, "evalops")
    assert _checked(verifier, signature, message) == reference
    if how == "none" and message == MESSAGE:
        assert reference[0] is None  # the unedited signature holds: the edits are edits


@pytest.fixture(scope="module")
def ed25519_private() -> tuple[Any, bytes]:
    from cryptography.hazmat.primitives.asymmetric import ed25519
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    private = ed25519.Ed25519PrivateKey.generate()
    line = private.public_key().public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH).decode()
    return private, sshsig.parse_public_key(line).blob


def test_a_private_key_given_for_a_public_one_says_so(tmp_path: Path) -> None:
    """`new authority --key ~/.ssh/id_ed25519` (the private half) read as an unknown key
    type `-----BEGIN`: it says which file to give instead."""
    private = make_key(tmp_path, "alice")
    with pytest.raises(sshsig.MalformedKey, match=r"private key: give its public key \(the \.pub"):
        sshsig.parse_public_key(private.read_text())
