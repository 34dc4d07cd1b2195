"""The structure of SSHSIG files and OpenSSH public keys as `evalops.domain.sshsig` reads
them, and the words it refuses them with (tests/domain/test_sshsig.py holds its verdicts to
`ssh-keygen -Y verify`; this file the parts a verdict alone does not show).

The layouts are OpenSSH's PROTOCOL.sshsig (`"SSHSIG" || uint32 version || string publickey
|| string namespace || string reserved || string hash_algorithm || string signature`, the
signed data `"SSHSIG" || string namespace || string reserved || string hash_algorithm ||
string H(message)`) and RFC 4253/5656/8709 key blobs, written out here with `struct`-like
helpers independent of evalops; where OpenSSH decides (a minimum RSA modulus, a key's
fingerprint), `ssh-keygen` is asked.
"""

from __future__ import annotations

import base64
import hashlib
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from evalops.domain import sshsig

MESSAGE = b'{"act":"waiver.grant"}\n'


def _s(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


def _mp(value: int) -> bytes:
    """RFC 4251 mpint: two's complement, big-endian, minimal, 0 as the empty string."""
    return _s(value.to_bytes((value.bit_length() + 8) // 8, "big") if value else b"")


def _armor(blob: bytes, width: int = 70) -> bytes:
    body = base64.b64encode(blob).decode()
    lines = [body[i : i + width] for i in range(0, len(body), width)]
    return (
        "-----BEGIN SSH SIGNATURE-----\n" + "\n".join(lines) + "\n-----END SSH SIGNATURE-----\n"
    ).encode()


def _signed_data(namespace: bytes, hash_name: bytes, message: bytes) -> bytes:
    digest = hashlib.new(hash_name.decode(), message).digest()
    return b"SSHSIG" + _s(namespace) + _s(b"") + _s(hash_name) + _s(digest)


def _sshsig(  # noqa: PLR0913 (each field of the blob can be varied)
    key_blob: bytes,
    inner: bytes,
    *,
    namespace: bytes = b"evalops",
    hash_name: bytes = b"sha512",
    version: int = 1,
    magic: bytes = b"SSHSIG",
    reserved: bytes = b"",
    tail: bytes = b"",
) -> bytes:
    return _armor(
        magic
        + version.to_bytes(4, "big")
        + _s(key_blob)
        + _s(namespace)
        + _s(reserved)
        + _s(hash_name)
        + _s(inner)
        + tail
    )


def _ed25519() -> tuple[ed25519.Ed25519PrivateKey, bytes]:
    private = ed25519.Ed25519PrivateKey.generate()
    raw = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return private, _s(b"ssh-ed25519") + _s(raw)


def _ed25519_signature(
    private: ed25519.Ed25519PrivateKey, blob: bytes, message: bytes = MESSAGE, **kw: Any
) -> bytes:
    namespace = kw.get("namespace", b"evalops")
    hash_name = kw.get("hash_name", b"sha512")
    try:
        raw = private.sign(_signed_data(namespace, hash_name, message))
    except UnicodeDecodeError:  # a hash name that is no name: never read that far
        raw = bytes(64)
    sig_type = kw.pop("sig_type", b"ssh-ed25519")
    return _sshsig(blob, _s(sig_type) + _s(raw), **kw)


def _line(blob: bytes, comment: str = "") -> str:
    key_type = blob[4 : 4 + int.from_bytes(blob[:4], "big")].decode()
    return f"{key_type} {base64.b64encode(blob).decode()}" + (f" {comment}" if comment else "")


# ------------------------------------------------------------------------------ public keys


def test_a_public_key_line_is_type_base64_and_comment() -> None:
    _, blob = _ed25519()
    encoded = base64.b64encode(blob).decode()
    key = sshsig.parse_public_key(f"  ssh-ed25519 {encoded} alice@laptop  work key \n")
    assert key == sshsig.PublicKey("ssh-ed25519", blob, "alice@laptop  work key")
    assert key.openssh == f"ssh-ed25519 {encoded}"
    assert sshsig.parse_public_key(f"ssh-ed25519\t{encoded}").comment == ""
    fingerprint = base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    assert key.fingerprint == f"SHA256:{fingerprint}"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("", "expected 'TYPE BASE64 [COMMENT]'"),
        ("ssh-ed25519", "expected 'TYPE BASE64 [COMMENT]'"),
        (
            "ssh-dss AAAA",
            "unsupported key type 'ssh-dss' (supported: ssh-ed25519, ssh-rsa, "
            "ecdsa-sha2-nistp256, ecdsa-sha2-nistp384, ecdsa-sha2-nistp521, "
            "sk-ssh-ed25519@openssh.com, sk-ecdsa-sha2-nistp256@openssh.com)",
        ),
        ("ssh-ed25519 AAAA*AAA", "the key is not valid base64"),
        ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE", "the key is not valid base64"),  # 19 characters
        (
            "-----BEGIN OPENSSH PRIVATE KEY----- b3BlbnNzaC1rZXktdjE=",
            "this is a private key: give its public key (the .pub file beside it)",
        ),
    ],
)
def test_what_is_not_a_public_key_is_named(line: str, message: str) -> None:
    with pytest.raises(sshsig.MalformedKey) as raised:
        sshsig.parse_public_key(line)
    assert str(raised.value) == message


@pytest.mark.parametrize("stray", ["*", "!", "."])
def test_a_character_outside_base64_is_refused_not_skipped(stray: str) -> None:
    # OpenSSH's decoder (b64_pton) fails on a character outside the alphabet; a lenient
    # decoder would drop it and read the rest, here a valid key, as that key.
    _, blob = _ed25519()
    encoded = base64.b64encode(blob).decode()
    with pytest.raises(sshsig.MalformedKey) as raised:
        sshsig.parse_public_key(f"ssh-ed25519 {encoded[:8]}{stray}{encoded[8:]}")
    assert str(raised.value) == "the key is not valid base64"


def test_a_key_blob_of_another_type_than_its_label_is_refused() -> None:
    _, blob = _ed25519()
    with pytest.raises(sshsig.MalformedKey) as raised:
        sshsig.parse_public_key("ssh-rsa " + base64.b64encode(blob).decode())
    assert str(raised.value) == "the key blob is not a ssh-rsa key"
    with pytest.raises(sshsig.MalformedKey) as raised:
        sshsig.parse_public_key("ssh-ed25519 " + base64.b64encode(b"\xff\xff").decode())
    assert str(raised.value) == "truncated"
    name = b"ssh-ed25519\xff"
    with pytest.raises(sshsig.MalformedKey) as raised:
        sshsig.parse_public_key("ssh-ed25519 " + base64.b64encode(_s(name)).decode())
    assert str(raised.value) == "a name that is not ASCII"


def _rsa_blob(e: int, n: int) -> bytes:
    return _s(b"ssh-rsa") + _mp(e) + _mp(n)


def _ssh_keygen_reads(line: str, tmp_path: Path) -> bool:
    path = tmp_path / "key.pub"
    path.write_text(line + "\n")
    done = subprocess.run(["ssh-keygen", "-l", "-f", str(path)], capture_output=True, check=False)
    return done.returncode == 0


@pytest.mark.parametrize("bits", [1023, 1024])
def test_an_rsa_key_needs_1024_bits_as_openssh_does(bits: int, tmp_path: Path) -> None:
    # An odd modulus of exactly `bits` bits (no private key needed to read a public one).
    n = (1 << (bits - 1)) | 0x10001 | 1
    line = _line(_rsa_blob(65537, n))
    openssh = _ssh_keygen_reads(line, tmp_path)
    assert openssh is (bits >= 1024)
    if openssh:
        assert sshsig.parse_public_key(line).key_type == "ssh-rsa"
    else:
        with pytest.raises(sshsig.MalformedKey) as raised:
            sshsig.parse_public_key(line)
        assert str(raised.value) == f"an RSA key of {bits} bits (at least 1024)"


def test_a_key_that_does_not_load_says_why() -> None:
    point = ec.generate_private_key(ec.SECP256R1()).public_key()
    compressed = point.public_bytes(Encoding.X962, PublicFormat.CompressedPoint)
    blob = _s(b"ecdsa-sha2-nistp256") + _s(b"nistp256") + _s(compressed)
    with pytest.raises(sshsig.MalformedKey) as raised:
        sshsig.parse_public_key(_line(blob))
    assert str(raised.value).startswith("not a valid ecdsa-sha2-nistp256 key: ")


def test_identity_is_the_key_whatever_its_encoding() -> None:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    numbers = private.public_key().public_numbers()
    plain = _rsa_blob(numbers.e, numbers.n)
    padded = _s(b"ssh-rsa") + _s(b"\x00" + _mp(numbers.e)[4:]) + _mp(numbers.n)
    assert padded != plain
    assert sshsig.identity(sshsig.PublicKey("ssh-rsa", padded)) == plain
    assert sshsig.identity(sshsig.PublicKey("ssh-rsa", plain)) == plain
    with pytest.raises(sshsig.MalformedKey):
        sshsig.identity(sshsig.PublicKey("ssh-rsa", b"\x00\x00\x00\x07ssh-rsa"))


# ------------------------------------------------------------------------------ security keys


def _sk_ed25519_blob(point: bytes, application: bytes = b"ssh:", tail: bytes = b"") -> bytes:
    return _s(b"sk-ssh-ed25519@openssh.com") + _s(point) + _s(application) + tail


def _sk_ecdsa_blob(curve: bytes, point: bytes, application: bytes = b"ssh:") -> bytes:
    return _s(b"sk-ecdsa-sha2-nistp256@openssh.com") + _s(curve) + _s(point) + _s(application)


def test_security_keys_are_read_and_their_identity_is_their_blob() -> None:
    raw = (
        ed25519.Ed25519PrivateKey.generate()
        .public_key()
        .public_bytes(Encoding.Raw, PublicFormat.Raw)
    )
    blob = _sk_ed25519_blob(raw)
    key = sshsig.parse_public_key(_line(blob))
    assert sshsig.identity(key) == blob
    point = (
        ec.generate_private_key(ec.SECP256R1())
        .public_key()
        .public_bytes(Encoding.X962, PublicFormat.UncompressedPoint)
    )
    assert sshsig.identity(sshsig.parse_public_key(_line(_sk_ecdsa_blob(b"nistp256", point))))


def test_malformed_security_keys_say_why() -> None:
    sk = "sk-ecdsa-sha2-nistp256@openssh.com"
    ed = "sk-ssh-ed25519@openssh.com"
    raw = bytes(32)
    cases = [
        (_sk_ed25519_blob(raw[:31]), f"not a valid {ed} key: an Ed25519 public key is 32 bytes"),
        (
            _sk_ed25519_blob(raw + b"\x00"),
            f"not a valid {ed} key: an Ed25519 public key is 32 bytes",
        ),
        (_sk_ed25519_blob(raw, tail=b"\x00"), "1 unexpected trailing bytes"),
        (
            _sk_ecdsa_blob(b"nistp384", b"\x04" + raw + raw),
            f"not a valid {sk} key: a {sk} key is on nistp256",
        ),
        (
            _sk_ecdsa_blob(b"nistp256", b"\x02" + raw),
            f"not a valid {sk} key: a {sk} key's point is written uncompressed",
        ),
        (
            _sk_ecdsa_blob(b"nistp256", b""),
            f"not a valid {sk} key: a {sk} key's point is written uncompressed",
        ),
    ]
    for blob, message in cases:
        with pytest.raises(sshsig.MalformedKey) as raised:
            sshsig.parse_public_key(_line(blob))
        assert str(raised.value) == message
    # A point that is not on the curve.
    with pytest.raises(sshsig.MalformedKey) as raised:
        sshsig.parse_public_key(_line(_sk_ecdsa_blob(b"nistp256", b"\x04" + raw + raw)))
    assert str(raised.value).startswith(f"not a valid {sk} key: ")


# ------------------------------------------------------------------------------ armor


def test_the_armor_is_read_line_by_line_at_any_width() -> None:
    blob = b"SSHSIG" + bytes(range(200))
    for width in (1, 64, 70, 76, 1000):
        assert sshsig.dearmor(_armor(blob, width)) == blob
        assert sshsig.dearmor(_armor(blob, width).decode()) == blob
    indented = (
        b"\n  -----BEGIN SSH SIGNATURE-----  \n  "
        + base64.b64encode(blob)
        + (b"  \n-----END SSH SIGNATURE-----\n\n")
    )
    assert sshsig.dearmor(indented) == blob


@pytest.mark.parametrize(
    ("armored", "message"),
    [
        (b"-----BEGIN SSH SIGNATURE-----\n-----END SSH SIGNATURE-----\n", "not armored"),
        (b"-----BEGIN SSH SIGNATURE-----\nAAAA\n", "not armored"),
        (b"AAAA\nAAAA\n-----END SSH SIGNATURE-----\n", "not armored"),
        (b"-----BEGIN SSH SIGNATURE-----\nAA*A\n-----END SSH SIGNATURE-----\n", "base64"),
        (b"-----BEGIN SSH SIGNATURE-----\n\xc3\xa9\n-----END SSH SIGNATURE-----\n", "ASCII"),
    ],
)
def test_what_is_not_armored_is_named(armored: bytes, message: str) -> None:
    expected = {
        "not armored": "not armored between '-----BEGIN SSH SIGNATURE-----' and "
        "'-----END SSH SIGNATURE-----'",
        "base64": "the armored body is not valid base64",
        "ASCII": "not ASCII",
    }[message]
    with pytest.raises(sshsig.MalformedSignature) as raised:
        sshsig.dearmor(armored)
    assert str(raised.value) == expected


@pytest.mark.parametrize("stray", [b"*", b"!", b"."])
def test_a_character_outside_base64_in_the_armor_is_refused_not_skipped(stray: bytes) -> None:
    # As OpenSSH's decoder: the body without the stray character would decode to a blob.
    body = base64.b64encode(b"SSHSIG" + bytes(range(30)))
    armored = (
        b"-----BEGIN SSH SIGNATURE-----\n"
        + body[:12]
        + stray
        + body[12:]
        + b"\n-----END SSH SIGNATURE-----\n"
    )
    with pytest.raises(sshsig.MalformedSignature) as raised:
        sshsig.dearmor(armored)
    assert str(raised.value) == "the armored body is not valid base64"


def test_an_armored_file_of_64_kib_is_read_and_a_byte_more_is_not() -> None:
    head = b"-----BEGIN SSH SIGNATURE-----\n"
    end = b"\n-----END SSH SIGNATURE-----\n"
    # Base64 of a length divisible by 4, and one empty line (read as nothing) to fill up.
    body = b"A" * (64 * 1024 - len(head) - len(end) - 1) + b"\n"
    exactly = head + body + end
    assert len(exactly) == 64 * 1024
    assert sshsig.dearmor(exactly) == base64.b64decode(body.strip())
    with pytest.raises(sshsig.MalformedSignature) as raised:
        sshsig.dearmor(head + b"AAAA" + body + end)
    assert str(raised.value) == "larger than 65536 bytes"


# ------------------------------------------------------------------------------ the blob


def test_a_signature_is_parsed_field_by_field() -> None:
    private, blob = _ed25519()
    armored = _ed25519_signature(private, blob, reserved=b"r", hash_name=b"sha256")
    sig = sshsig.parse_signature(armored)
    assert sig.public_key == sshsig.PublicKey("ssh-ed25519", blob)
    assert (sig.namespace, sig.reserved, sig.hash_algorithm, sig.sig_type) == (
        "evalops",
        b"r",
        "sha256",
        "ssh-ed25519",
    )
    assert len(sig.sig_blob) == 64
    assert (sig.sk_flags, sig.sk_counter) == (None, None)
    # The reserved field is not signed: the signature holds whatever it carries.
    assert sshsig.verify(armored, MESSAGE, "evalops").valid


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"magic": b"SSHSIH"}, "the blob does not start with SSHSIG"),
        ({"version": 2}, "unsupported SSHSIG version 2"),
        ({"version": 0}, "unsupported SSHSIG version 0"),
        ({"tail": b"\x00\x00"}, "2 unexpected trailing bytes"),
        ({"namespace": b"evalops\xff"}, "a name that is not ASCII"),
        ({"hash_name": b"sha\x80"}, "a name that is not ASCII"),
    ],
)
def test_a_broken_blob_is_named(change: dict[str, Any], message: str) -> None:
    private, blob = _ed25519()
    with pytest.raises(sshsig.MalformedSignature) as raised:
        sshsig.parse_signature(_ed25519_signature(private, blob, **change))
    assert str(raised.value) == message


def test_a_truncated_blob_and_a_key_of_no_supported_type_are_named() -> None:
    with pytest.raises(sshsig.MalformedSignature) as raised:
        sshsig.parse_signature(_armor(b"SSHSIG\x00\x00\x00\x01\x00\x00\x00\x05ab"))
    assert str(raised.value) == "truncated"
    with pytest.raises(sshsig.MalformedSignature) as raised:
        sshsig.parse_signature(_armor(b"SSHSI"))
    assert str(raised.value) == "truncated"
    dss = _s(b"ssh-dss") + _mp(7)
    with pytest.raises(sshsig.MalformedSignature) as raised:
        sshsig.parse_signature(_sshsig(dss, _s(b"ssh-dss") + _s(b"x")))
    assert str(raised.value) == "unsupported key type 'ssh-dss'"
    _private, blob = _ed25519()
    broken = blob[:-1]
    with pytest.raises(sshsig.MalformedSignature) as raised:
        sshsig.parse_signature(_sshsig(broken, _s(b"ssh-ed25519") + _s(bytes(64))))
    assert str(raised.value).startswith("not a valid ssh-ed25519 key: ")
    # Trailing bytes after the signature inside its string.
    with pytest.raises(sshsig.MalformedSignature) as raised:
        sshsig.parse_signature(_sshsig(blob, _s(b"ssh-ed25519") + _s(bytes(64)) + b"\x01"))
    assert str(raised.value) == "1 unexpected trailing bytes"


def test_the_signed_data_is_protocol_sshsigs() -> None:
    for name in ("sha256", "sha512"):
        assert sshsig.signed_data("evalops", name, MESSAGE) == _signed_data(
            b"evalops", name.encode(), MESSAGE
        )


# ------------------------------------------------------------------------------ verdicts


def test_each_verdict_says_why() -> None:
    private, blob = _ed25519()
    good = _ed25519_signature(private, blob)
    check = sshsig.verify(good, MESSAGE, "evalops")
    assert (check.valid, check.reason) == (True, "valid")
    assert check.signature.public_key.blob == blob
    check = sshsig.verify(good, MESSAGE + b" ", "evalops")
    assert (check.valid, check.reason) == (False, "the signature does not match the signed data")
    check = sshsig.verify(good, MESSAGE, "git")
    assert (check.valid, check.reason) == (False, "signed for namespace 'evalops', not 'git'")
    md5 = _ed25519_signature(private, blob, hash_name=b"md5")
    check = sshsig.verify(md5, MESSAGE, "evalops")
    assert (check.valid, check.reason) == (False, "unsupported hash algorithm 'md5'")
    relabelled = _ed25519_signature(private, blob, sig_type=b"ssh-rsa")
    check = sshsig.verify(relabelled, MESSAGE, "evalops")
    assert (check.valid, check.reason) == (False, "a ssh-rsa signature from an ssh-ed25519 key")


def _ecdsa_signature(private: ec.EllipticCurvePrivateKey, sig_type: bytes | None = None) -> bytes:
    point = private.public_key().public_bytes(Encoding.X962, PublicFormat.UncompressedPoint)
    blob = _s(b"ecdsa-sha2-nistp256") + _s(b"nistp256") + _s(point)
    signature = private.sign(
        _signed_data(b"evalops", b"sha512", MESSAGE), ec.ECDSA(hashes.SHA256())
    )
    r, s = decode_dss_signature(signature)
    return _sshsig(blob, _s(sig_type or b"ecdsa-sha2-nistp256") + _s(_mp(r) + _mp(s)))


def test_ecdsa_verdicts_say_why() -> None:
    private = ec.generate_private_key(ec.SECP256R1())
    assert sshsig.verify(_ecdsa_signature(private), MESSAGE, "evalops").valid
    check = sshsig.verify(_ecdsa_signature(private, b"ecdsa-sha2-nistp384"), MESSAGE, "evalops")
    assert (check.valid, check.reason) == (
        False,
        "a ecdsa-sha2-nistp384 signature from an ecdsa-sha2-nistp256 key",
    )
    # A negative r (an mpint with its top bit set and no leading zero) is malformed.
    point = private.public_key().public_bytes(Encoding.X962, PublicFormat.UncompressedPoint)
    blob = _s(b"ecdsa-sha2-nistp256") + _s(b"nistp256") + _s(point)
    negative = _sshsig(blob, _s(b"ecdsa-sha2-nistp256") + _s(_s(b"\x80\x01") + _mp(1)))
    with pytest.raises(sshsig.MalformedSignature) as raised:
        sshsig.verify(negative, MESSAGE, "evalops")
    assert str(raised.value) == "a negative integer"
    extra = _sshsig(blob, _s(b"ecdsa-sha2-nistp256") + _s(_mp(1) + _mp(1) + b"\x00"))
    with pytest.raises(sshsig.MalformedSignature) as raised:
        sshsig.verify(extra, MESSAGE, "evalops")
    assert str(raised.value) == "1 unexpected trailing bytes"
    # r = s = 0 (empty mpints) is read, and does not verify.
    zero = _sshsig(blob, _s(b"ecdsa-sha2-nistp256") + _s(_mp(0) + _mp(0)))
    assert not sshsig.verify(zero, MESSAGE, "evalops").valid


def test_rsa_with_sha1_is_refused_by_name() -> None:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    numbers = private.public_key().public_numbers()
    blob = _rsa_blob(numbers.e, numbers.n)
    data = _signed_data(b"evalops", b"sha512", MESSAGE)
    raw = private.sign(data, padding.PKCS1v15(), hashes.SHA1())
    check = sshsig.verify(_sshsig(blob, _s(b"ssh-rsa") + _s(raw)), MESSAGE, "evalops")
    assert (check.valid, check.reason) == (
        False,
        "'ssh-rsa' signatures are not accepted (RSA needs SHA-2)",
    )
    raw = private.sign(data, padding.PKCS1v15(), hashes.SHA256())
    assert sshsig.verify(_sshsig(blob, _s(b"rsa-sha2-256") + _s(raw)), MESSAGE, "evalops").valid


def test_a_security_key_signature_of_the_other_type_says_so() -> None:
    private = ed25519.Ed25519PrivateKey.generate()
    raw = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    blob = _sk_ed25519_blob(raw)
    data = _signed_data(b"evalops", b"sha512", MESSAGE)
    flags, counter = 1, 9
    signed = (
        hashlib.sha256(b"ssh:").digest()
        + bytes([flags])
        + counter.to_bytes(4, "big")
        + hashlib.sha256(data).digest()
    )
    tail = bytes([flags]) + counter.to_bytes(4, "big")
    good = _sshsig(blob, _s(b"sk-ssh-ed25519@openssh.com") + _s(private.sign(signed)) + tail)
    sig = sshsig.parse_signature(good)
    assert (sig.sk_flags, sig.sk_counter) == (1, 9)
    assert sshsig.verify(good, MESSAGE, "evalops").valid
    other = _sshsig(
        blob, _s(b"sk-ecdsa-sha2-nistp256@openssh.com") + _s(private.sign(signed)) + tail
    )
    check = sshsig.verify(other, MESSAGE, "evalops")
    assert (check.valid, check.reason) == (
        False,
        "a sk-ecdsa-sha2-nistp256@openssh.com signature from a sk-ssh-ed25519@openssh.com key",
    )


def test_a_truncated_security_key_ecdsa_signature_is_malformed() -> None:
    private = ec.generate_private_key(ec.SECP256R1())
    point = private.public_key().public_bytes(Encoding.X962, PublicFormat.UncompressedPoint)
    sk = b"sk-ecdsa-sha2-nistp256@openssh.com"
    blob = _sk_ecdsa_blob(b"nistp256", point)
    tail = bytes([1]) + (9).to_bytes(4, "big")
    # One mpint of the two (r, s): truncated.
    armored = _sshsig(blob, _s(sk) + _s(_mp(5)) + tail)
    with pytest.raises(sshsig.MalformedSignature) as raised:
        sshsig.verify(armored, MESSAGE, "evalops")
    assert str(raised.value) == "truncated"


# ------------------------------------------------------------------------------ Verifier


def test_a_verifier_skips_keys_it_cannot_look_up_and_still_judges_their_signatures() -> None:
    private, blob = _ed25519()
    ec_private = ec.generate_private_key(ec.SECP256R1())
    point = ec_private.public_key().public_bytes(Encoding.X962, PublicFormat.UncompressedPoint)
    ec_blob = _s(b"ecdsa-sha2-nistp256") + _s(b"nistp256") + _s(point)
    broken = [b"", b"\xff", _s(b"ssh-ed25519") + _s(b"short"), _s(b"ssh-ed25519")]
    verifier = sshsig.Verifier([*broken, ec_blob, blob], "evalops")
    assert verifier.namespace == "evalops"
    assert verifier.check(_ed25519_signature(private, blob), MESSAGE) == (
        None,
        sshsig.PublicKey("ssh-ed25519", blob),
    )
    for hash_name in (b"sha256", b"sha512"):
        signature = _ed25519_signature(private, blob, hash_name=hash_name)
        assert verifier.check(signature, MESSAGE)[0] is None
        assert verifier.check(signature, MESSAGE + b"x")[0] == (
            "the signature does not match the signed data"
        )
    assert verifier.check(_ecdsa_signature(ec_private), MESSAGE) == (
        None,
        sshsig.PublicKey("ecdsa-sha2-nistp256", ec_blob),
    )
    # The namespace is the verifier's.
    git = sshsig.Verifier([blob], "git")
    assert git.check(_ed25519_signature(private, blob, namespace=b"git"), MESSAGE)[0] is None
    assert git.check(_ed25519_signature(private, blob), MESSAGE)[0] == (
        "signed for namespace 'evalops', not 'git'"
    )
    with pytest.raises(sshsig.MalformedSignature):
        verifier.check(b"nothing", MESSAGE)


def test_a_verifier_looks_up_every_ed25519_key_whatever_comes_before_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each known Ed25519 key's signatures take the table lookup (never the general parse),
    after keys of other types and broken blobs alike."""
    private, blob = _ed25519()
    ec_point = (
        ec.generate_private_key(ec.SECP256R1())
        .public_key()
        .public_bytes(Encoding.X962, PublicFormat.UncompressedPoint)
    )
    ec_blob = _s(b"ecdsa-sha2-nistp256") + _s(b"nistp256") + _s(ec_point)
    broken = _s(b"ssh-ed25519") + _s(b"short")
    for before in ([ec_blob], [broken], [b"\xff"], [ec_blob, broken]):
        verifier = sshsig.Verifier([*before, blob], "evalops")

        def general(*_: Any) -> sshsig.SignatureCheck:
            raise AssertionError("the general parse ran")

        with monkeypatch.context() as patched:
            patched.setattr(sshsig, "verify", general)
            assert verifier.check(_ed25519_signature(private, blob), MESSAGE) == (
                None,
                sshsig.PublicKey("ssh-ed25519", blob),
            )


def test_a_verifier_over_a_blob_no_longer_than_a_signature_takes_the_general_parse() -> None:
    _private, blob = _ed25519()
    verifier = sshsig.Verifier([blob], "evalops")
    with pytest.raises(sshsig.MalformedSignature) as raised:
        verifier.check(_armor(bytes(64)), MESSAGE)
    assert str(raised.value) == "the blob does not start with SSHSIG"


# ------------------------------------------------------------------------------ git commits


def test_a_git_commit_splits_into_its_payload_and_ssh_signature() -> None:
    armored = _ed25519_signature(*_ed25519(), namespace=b"git")
    lines = armored.decode().strip().splitlines()
    header = "gpgsig " + lines[0] + "".join(f"\n {line}" for line in lines[1:])
    head = "tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\nauthor A <a@x> 1 +0000\n"
    raw = f"{head}{header}\ncommitter C <c@x> 1 +0000\n\nsubject\n\nbody\n".encode()
    payload, signature = sshsig.split_signed_commit(raw)
    assert payload == f"{head}committer C <c@x> 1 +0000\n\nsubject\n\nbody\n".encode()
    assert signature == ("\n".join(lines) + "\n").encode()
    raw256 = raw.replace(b"gpgsig ", b"gpgsig-sha256 ")
    assert sshsig.split_signed_commit(raw256) == (payload, signature)


def test_a_commit_without_an_ssh_signature_has_none() -> None:
    raw = b"tree 1\nauthor A\n\nmessage with a gpgsig line\ngpgsig x\n"
    assert sshsig.split_signed_commit(raw) == (raw, None)
    pgp = (
        b"tree 1\ngpgsig -----BEGIN PGP SIGNATURE-----\n iQ\n -----END PGP SIGNATURE-----\n"
        b"author A\n\nm\n"
    )
    assert sshsig.split_signed_commit(pgp) == (b"tree 1\nauthor A\n\nm\n", None)
    # No message at all: the payload is the header as it is.
    assert sshsig.split_signed_commit(b"tree 1\nauthor A") == (b"tree 1\nauthor A", None)


def test_only_the_signature_header_and_its_continuation_lines_are_left_out() -> None:
    """A merge of a signed tag carries a `mergetag` header whose value continues on lines
    that start with a space: they are signed, and stay in the payload; the message may hold
    anything, a `gpgsig` line and blank lines included."""
    signature = [b"-----BEGIN SSH SIGNATURE-----", b"U1NIU0lH", b"-----END SSH SIGNATURE-----"]
    mergetag = b"mergetag object 1\n type commit\n tag v1\n"
    message = b"subject\n\ngpgsig -----BEGIN SSH SIGNATURE-----\n x\n\nlast\n"
    raw = (
        b"tree 1\nparent 2\n"
        + mergetag
        + b"gpgsig "
        + b"\n ".join(signature)
        + b"\nauthor A\n\n"
        + message
    )
    payload, armored = sshsig.split_signed_commit(raw)
    assert payload == b"tree 1\nparent 2\n" + mergetag + b"author A\n\n" + message
    assert armored == b"\n".join(signature) + b"\n"


def test_a_signature_header_value_is_what_follows_its_first_space() -> None:
    raw = b"tree 1\ngpgsig  -----BEGIN SSH SIGNATURE-----\n -----END SSH SIGNATURE-----\n\nm\n"
    # The value starts with a space: not an SSH signature's armor.
    assert sshsig.split_signed_commit(raw) == (b"tree 1\n\nm\n", None)


def test_a_commit_git_signed_verifies(tmp_path: Path) -> None:
    """A commit signed by git itself (gpg.format ssh) splits into what git signed."""
    key = tmp_path / "key"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True,
        capture_output=True,
    )  # fmt: skip
    repo = tmp_path / "repo"
    env_args = [
        "-c", "user.name=A", "-c", "user.email=a@x", "-c", "gpg.format=ssh",
        "-c", f"user.signingkey={key}", "-c", "commit.gpgsign=true",
    ]  # fmt: skip
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(
        ["git", *env_args, "-C", str(repo), "commit", "-q", "--allow-empty", "-m", "m"],
        check=True, capture_output=True,
    )  # fmt: skip
    raw = subprocess.run(
        ["git", "-C", str(repo), "cat-file", "commit", "HEAD"], check=True, capture_output=True
    ).stdout
    payload, signature = sshsig.split_signed_commit(raw)
    assert signature is not None and b"gpgsig" not in payload
    check = sshsig.verify(signature, payload, "git")
    assert check.valid
    line = Path(f"{key}.pub").read_text()
    assert check.signature.public_key.blob == sshsig.parse_public_key(line).blob


# ------------------------------------------------------------------------------ signing


def test_python_signatures_have_openssh_layout() -> None:
    rsa_private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    armored = sshsig.sign(rsa_private, MESSAGE, "evalops")
    text = armored.decode("ascii")
    lines = text.splitlines()
    assert text.endswith("-----END SSH SIGNATURE-----\n")
    assert lines[0] == "-----BEGIN SSH SIGNATURE-----"
    assert all(len(line) <= 70 for line in lines[1:-1])
    assert all(len(line) == 70 for line in lines[1:-2])
    sig = sshsig.parse_signature(armored)
    assert (sig.sig_type, sig.hash_algorithm, sig.namespace, sig.reserved) == (
        "rsa-sha2-512",
        "sha512",
        "evalops",
        b"",
    )
    rsa_private.public_key().verify(
        sig.sig_blob,
        _signed_data(b"evalops", b"sha512", MESSAGE),
        padding.PKCS1v15(),
        hashes.SHA512(),
    )
    assert sshsig.parse_signature(
        sshsig.sign(rsa_private, MESSAGE, "x", "sha256")
    ).hash_algorithm == ("sha256")


@pytest.mark.parametrize("curve", [ec.SECP256R1(), ec.SECP384R1(), ec.SECP521R1()])
def test_python_ecdsa_signatures_write_minimal_mpints(curve: ec.EllipticCurve) -> None:
    """RFC 4251: an mpint has a leading zero byte exactly when its top bit is set, else none."""
    private = ec.generate_private_key(curve)
    for n in range(12):
        sig = sshsig.parse_signature(sshsig.sign(private, MESSAGE + bytes([n]), "evalops"))
        values = sig.sig_blob
        at = 0
        for _ in range(2):
            length = int.from_bytes(values[at : at + 4], "big")
            data = values[at + 4 : at + 4 + length]
            assert data and not (data[0] == 0 and len(data) > 1 and data[1] < 0x80)
            assert data[0] < 0x80
            at += 4 + length
        assert at == len(values)
        assert sshsig.verify(sshsig.sign(private, MESSAGE, "evalops"), MESSAGE, "evalops").valid
