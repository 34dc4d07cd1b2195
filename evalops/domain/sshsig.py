"""OpenSSH signatures (SSHSIG) and public keys, verified without running ssh-keygen.

An SSHSIG file is what `ssh-keygen -Y sign -n NAMESPACE` writes: an armored blob holding
the signer's public key, the namespace, the hash algorithm and a signature over

    "SSHSIG" || string(namespace) || string(reserved)
             || string(hash_algorithm) || string(H(message))

(the format is OpenSSH's PROTOCOL.sshsig; `string` is a uint32 big-endian length and the
bytes). Keys: Ed25519, ECDSA on P-256/P-384/P-521 and RSA with SHA-2 signatures; RSA with
SHA-1 (`ssh-rsa` signatures) is refused as OpenSSH refuses it. FIDO security keys
(`sk-ssh-ed25519@openssh.com`, `sk-ecdsa-sha2-nistp256@openssh.com`, OpenSSH's PROTOCOL.u2f)
sign `sha256(application) || flags || counter || sha256(data)` instead of the data; their
signature carries the flags and counter after it. A malformed file raises
`MalformedSignature` (a usage error); a well-formed signature that does not verify is a
`SignatureCheck` with `valid=False` and the reason, so callers can name why they refuse.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    PublicFormat,
    load_ssh_public_key,
)

MAGIC = b"SSHSIG"
VERSION = 1
BEGIN = "-----BEGIN SSH SIGNATURE-----"
END = "-----END SSH SIGNATURE-----"
HASHES = {"sha256": hashlib.sha256, "sha512": hashlib.sha512}
#: Larger than any signature a supported key makes (RSA 16384 is about 4.2 KiB armored):
#: a bigger file is refused before it is decoded.
MAX_ARMORED_BYTES = 64 * 1024
_ECDSA_CURVES = {
    "ecdsa-sha2-nistp256": hashes.SHA256(),
    "ecdsa-sha2-nistp384": hashes.SHA384(),
    "ecdsa-sha2-nistp521": hashes.SHA512(),
}
_RSA_SIGNATURES = {"rsa-sha2-256": hashes.SHA256(), "rsa-sha2-512": hashes.SHA512()}
#: OpenSSH refuses smaller RSA moduli.
MIN_RSA_BITS = 1024
SK_ED25519 = "sk-ssh-ed25519@openssh.com"
SK_ECDSA = "sk-ecdsa-sha2-nistp256@openssh.com"
SK_TYPES = (SK_ED25519, SK_ECDSA)
KEY_TYPES = ("ssh-ed25519", "ssh-rsa", *_ECDSA_CURVES, *SK_TYPES)


class MalformedSignature(ValueError):
    """Not an SSHSIG file at all, or one whose structure is broken."""


class MalformedKey(ValueError):
    """Not an OpenSSH public key of a supported type."""


@dataclass(frozen=True)
class PublicKey:
    """An OpenSSH public key: its type, wire blob and the comment after it."""

    key_type: str
    blob: bytes
    comment: str = ""

    @property
    def fingerprint(self) -> str:
        """As `ssh-keygen -l` prints it: SHA256 of the wire blob, base64 without padding."""
        return "SHA256:" + base64.b64encode(hashlib.sha256(self.blob).digest()).decode().rstrip("=")

    @property
    def openssh(self) -> str:
        """`TYPE BASE64`, without the comment (what identifies the key)."""
        return f"{self.key_type} {base64.b64encode(self.blob).decode()}"


@dataclass(frozen=True)
class Signature:
    """A parsed SSHSIG blob."""

    public_key: PublicKey
    namespace: str
    reserved: bytes
    hash_algorithm: str
    sig_type: str
    sig_blob: bytes
    sk_flags: int | None = None
    """A security key's flags (bit 0: user present); None for other keys."""
    sk_counter: int | None = None


@dataclass(frozen=True)
class SecurityKey:
    """A FIDO security key's public key and the application it is bound to (PROTOCOL.u2f)."""

    key: ed25519.Ed25519PublicKey | ec.EllipticCurvePublicKey
    application: bytes


@dataclass(frozen=True)
class SignatureCheck:
    """The outcome of checking one signature over one message."""

    valid: bool
    reason: str
    signature: Signature


class _Reader:
    def __init__(self, data: bytes, what: type[ValueError]) -> None:
        self._data = data
        self._at = 0
        self._error = what

    def raw(self, n: int) -> bytes:
        if n < 0 or self._at + n > len(self._data):
            raise self._error("truncated")
        out = self._data[self._at : self._at + n]
        self._at += n
        return out

    def uint32(self) -> int:
        return int.from_bytes(self.raw(4), "big")

    def string(self) -> bytes:
        return self.raw(self.uint32())

    def text(self) -> str:
        try:
            return self.string().decode("ascii")
        except UnicodeDecodeError as exc:
            raise self._error("a name that is not ASCII") from exc

    def mpint(self) -> int:
        data = self.string()
        if data and data[0] & 0x80:
            raise self._error("a negative integer")
        return int.from_bytes(data, "big")

    def done(self) -> None:
        if self._at != len(self._data):
            raise self._error(f"{len(self._data) - self._at} unexpected trailing bytes")


def _string(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


def parse_public_key(text: str) -> PublicKey:
    """`TYPE BASE64 [COMMENT]` as in authorized_keys and *.pub files."""
    parts = text.strip().split(None, 2)
    if len(parts) < 2:
        raise MalformedKey("expected 'TYPE BASE64 [COMMENT]'")
    key_type, encoded = parts[0], parts[1]
    if key_type.startswith("-----BEGIN"):
        raise MalformedKey("this is a private key: give its public key (the .pub file beside it)")
    if key_type not in KEY_TYPES:
        raise MalformedKey(f"unsupported key type {key_type!r} (supported: {', '.join(KEY_TYPES)})")
    try:
        blob = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise MalformedKey("the key is not valid base64") from exc
    key = PublicKey(key_type, blob, parts[2] if len(parts) > 2 else "")
    _load(key, MalformedKey)
    return key


def identity(key: PublicKey) -> bytes:
    """What makes two keys the same key whatever their encoding: the blob OpenSSH writes for
    the loaded key (an RSA integer with a leading zero byte, for one, is the same key as
    without it). Raises MalformedKey for a key that does not load."""
    loaded = _load(key, MalformedKey)
    if isinstance(loaded, SecurityKey):
        return key.blob  # its point is uncompressed (checked), the rest is its own bytes
    text = loaded.public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH)
    return base64.b64decode(text.split()[1])


LoadedKey = ed25519.Ed25519PublicKey | ec.EllipticCurvePublicKey | rsa.RSAPublicKey | SecurityKey


def _load(key: PublicKey, error: type[ValueError]) -> LoadedKey:
    try:
        return _load_cached(key.key_type, key.blob)
    except _BadKey as exc:
        raise error(str(exc)) from None


class _BadKey(ValueError):
    pass


@lru_cache(maxsize=4096)
def _load_cached(key_type: str, blob: bytes) -> LoadedKey:
    """Loading a key costs far more than verifying with it, and a registry has few keys."""
    key = PublicKey(key_type, blob)
    error = _BadKey
    reader = _Reader(key.blob, error)
    if reader.text() != key.key_type:
        raise error(f"the key blob is not a {key.key_type} key")
    if key_type in SK_TYPES:
        return _security_key(key_type, reader)
    try:
        loaded = load_ssh_public_key(key.openssh.encode())
    except (ValueError, UnsupportedAlgorithm, NotImplementedError, TypeError) as exc:
        # NotImplementedError: cryptography's answer to a compressed ECDSA point (valid
        # SEC1, but not what OpenSSH writes): a key that cannot be loaded is malformed.
        raise error(f"not a valid {key.key_type} key: {exc or type(exc).__name__}") from None
    if not isinstance(
        loaded, ed25519.Ed25519PublicKey | ec.EllipticCurvePublicKey | rsa.RSAPublicKey
    ):
        raise error(f"unsupported key type {key.key_type!r}")
    if isinstance(loaded, rsa.RSAPublicKey) and loaded.key_size < MIN_RSA_BITS:
        raise error(f"an RSA key of {loaded.key_size} bits (at least {MIN_RSA_BITS})")
    return loaded


def _security_key(key_type: str, reader: _Reader) -> SecurityKey:
    """The rest of a security key's blob: `string pk, string application` (Ed25519) or
    `string "nistp256", string Q, string application` (ECDSA), nothing after."""
    try:
        if key_type == SK_ED25519:
            point = reader.string()
            if len(point) != 32:
                raise _BadKey("an Ed25519 public key is 32 bytes")
            inner: ed25519.Ed25519PublicKey | ec.EllipticCurvePublicKey = (
                ed25519.Ed25519PublicKey.from_public_bytes(point)
            )
        else:
            if reader.text() != "nistp256":
                raise _BadKey(f"a {key_type} key is on nistp256")
            point = reader.string()
            if point[:1] != b"\x04":
                raise _BadKey(f"a {key_type} key's point is written uncompressed")
            inner = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), point)
    except (ValueError, NotImplementedError) as exc:
        raise _BadKey(f"not a valid {key_type} key: {exc}") from None
    application = reader.string()
    reader.done()
    return SecurityKey(inner, application)


def dearmor(armored: bytes | str) -> bytes:
    """The blob inside `-----BEGIN SSH SIGNATURE-----` ... `-----END SSH SIGNATURE-----`."""
    if len(armored) > MAX_ARMORED_BYTES:
        raise MalformedSignature(f"larger than {MAX_ARMORED_BYTES} bytes")
    try:
        text = armored.decode("ascii") if isinstance(armored, bytes) else armored
    except UnicodeDecodeError as exc:
        raise MalformedSignature("not ASCII") from exc
    lines = [line.strip() for line in text.strip().splitlines()]
    if len(lines) < 3 or lines[0] != BEGIN or lines[-1] != END:
        raise MalformedSignature(f"not armored between {BEGIN!r} and {END!r}")
    try:
        return base64.b64decode("".join(lines[1:-1]), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise MalformedSignature("the armored body is not valid base64") from exc


def parse_signature(armored: bytes | str) -> Signature:
    """Parse an armored SSHSIG; structure only (magic, version, fields), no verification."""
    reader = _Reader(dearmor(armored), MalformedSignature)
    if reader.raw(6) != MAGIC:
        raise MalformedSignature("the blob does not start with SSHSIG")
    version = reader.uint32()
    if version != VERSION:
        raise MalformedSignature(f"unsupported SSHSIG version {version}")
    key_blob = reader.string()
    namespace = reader.text()
    reserved = reader.string()
    hash_algorithm = reader.text()
    inner = _Reader(reader.string(), MalformedSignature)
    reader.done()
    sig_type = inner.text()
    sig_blob = inner.string()
    flags = counter = None
    if sig_type in SK_TYPES:
        flags, counter = inner.raw(1)[0], inner.uint32()
    inner.done()
    key_type = _Reader(key_blob, MalformedSignature).text()
    key = PublicKey(key_type, key_blob)
    if key_type not in KEY_TYPES:
        raise MalformedSignature(f"unsupported key type {key_type!r}")
    _load(key, MalformedSignature)
    return Signature(key, namespace, reserved, hash_algorithm, sig_type, sig_blob, flags, counter)


def signed_data(namespace: str, hash_algorithm: str, message: bytes) -> bytes:
    """The exact bytes the key signs for `message` in `namespace`.

    The reserved field is signed empty whatever the blob carries, as OpenSSH does.
    """
    digest = HASHES[hash_algorithm](message).digest()
    return (
        MAGIC
        + _string(namespace.encode())
        + _string(b"")
        + _string(hash_algorithm.encode())
        + _string(digest)
    )


def _verify_raw(sig: Signature, data: bytes) -> str | None:
    """None when the key's signature over `data` holds, else why not."""
    key = _load(sig.public_key, MalformedSignature)
    try:
        if isinstance(key, SecurityKey):
            return _verify_security_key(sig, key, data)
        if isinstance(key, ed25519.Ed25519PublicKey):
            if sig.sig_type != "ssh-ed25519":
                return f"a {sig.sig_type} signature from an ssh-ed25519 key"
            key.verify(sig.sig_blob, data)
        elif isinstance(key, ec.EllipticCurvePublicKey):
            digest = _ECDSA_CURVES[sig.public_key.key_type]
            if sig.sig_type != sig.public_key.key_type:
                return f"a {sig.sig_type} signature from an {sig.public_key.key_type} key"
            values = _Reader(sig.sig_blob, MalformedSignature)
            r, s = values.mpint(), values.mpint()
            values.done()
            key.verify(encode_dss_signature(r, s), data, ec.ECDSA(digest))
        else:
            rsa_digest = _RSA_SIGNATURES.get(sig.sig_type)
            if rsa_digest is None:
                return f"{sig.sig_type!r} signatures are not accepted (RSA needs SHA-2)"
            key.verify(sig.sig_blob, data, padding.PKCS1v15(), rsa_digest)
    except InvalidSignature:
        return "the signature does not match the signed data"
    return None


def _verify_security_key(sig: Signature, key: SecurityKey, data: bytes) -> str | None:
    """PROTOCOL.u2f: the authenticator signed sha256(application) || flags || counter ||
    sha256(data); ECDSA hashes that with SHA-256, Ed25519 signs it as it is. Like
    `ssh-keygen -Y verify`, a signature without the user-presence flag is not refused."""
    if sig.sig_type != sig.public_key.key_type:
        return f"a {sig.sig_type} signature from a {sig.public_key.key_type} key"
    assert sig.sk_flags is not None and sig.sk_counter is not None
    signed = (
        hashlib.sha256(key.application).digest()
        + bytes([sig.sk_flags])
        + sig.sk_counter.to_bytes(4, "big")
        + hashlib.sha256(data).digest()
    )
    if isinstance(key.key, ed25519.Ed25519PublicKey):
        key.key.verify(sig.sig_blob, signed)
    else:
        values = _Reader(sig.sig_blob, MalformedSignature)
        r, s = values.mpint(), values.mpint()
        values.done()
        key.key.verify(encode_dss_signature(r, s), signed, ec.ECDSA(hashes.SHA256()))
    return None


def verify(armored: bytes | str, message: bytes, namespace: str) -> SignatureCheck:
    """Check an armored SSHSIG over `message` in `namespace` (MalformedSignature if broken).

    Who the key belongs to is the caller's question: the check answers only whether the key
    inside the signature signed exactly `message` for `namespace`.
    """
    sig = parse_signature(armored)
    if sig.namespace != namespace:
        return SignatureCheck(
            False, f"signed for namespace {sig.namespace!r}, not {namespace!r}", sig
        )
    if sig.hash_algorithm not in HASHES:
        return SignatureCheck(False, f"unsupported hash algorithm {sig.hash_algorithm!r}", sig)
    reason = _verify_raw(sig, signed_data(namespace, sig.hash_algorithm, message))
    return SignatureCheck(reason is None, reason or "valid", sig)


_ED25519 = "ssh-ed25519"
_ED25519_SIGNATURE = 64


class Verifier:
    """`verify` in one namespace for a caller that checks many signatures by a few keys it
    knows (`verify` re-checking every stored act), reduced to what that caller reads: why
    the signature does not hold, or None, and the key inside it. The same outcome as
    `verify`, exceptions included, with the parse of the one blob layout ssh-keygen writes
    for an Ed25519 key made a table lookup, and no objects built per signature.

    For each known Ed25519 key and hash algorithm that layout is a fixed head (magic,
    version 1, the key blob, the namespace, an empty reserved field, the hash name, an
    `ssh-ed25519` signature string of 64 bytes) and the 64 signature bytes: a blob that is
    exactly a known head and 64 bytes can only parse to that one signature, which `verify`
    would accept as well formed and check with the key's Ed25519 verification, as done
    here. Any other blob (another key type, an unknown key, a reserved field, a namespace
    or a length that differs) goes through `verify` itself.
    tests/domain/test_sshsig.py holds both to the same outcomes."""

    def __init__(self, key_blobs: Iterable[bytes], namespace: str) -> None:
        self.namespace = namespace
        self._heads: dict[bytes, tuple[PublicKey, ed25519.Ed25519PublicKey, str, bytes]] = {}
        for blob in key_blobs:
            try:
                if _Reader(blob, _BadKey).text() != _ED25519:
                    continue
                loaded = _load_cached(_ED25519, blob)
            except _BadKey:
                continue  # `verify` says what is wrong with it
            if not isinstance(loaded, ed25519.Ed25519PublicKey):
                continue
            key = PublicKey(_ED25519, blob)
            for name in HASHES:
                head = (
                    MAGIC
                    + VERSION.to_bytes(4, "big")
                    + _string(blob)
                    + _string(namespace.encode())
                    + _string(b"")
                    + _string(name.encode())
                    + (4 + len(_ED25519) + 4 + _ED25519_SIGNATURE).to_bytes(4, "big")
                    + _string(_ED25519.encode())
                    + _ED25519_SIGNATURE.to_bytes(4, "big")
                )
                # signed_data()'s bytes before the digest of the message.
                signed_head = (
                    MAGIC + _string(namespace.encode()) + _string(b"") + _string(name.encode())
                )
                self._heads[head] = (key, loaded, name, signed_head)

    def check(self, armored: bytes | str, message: bytes) -> tuple[str | None, PublicKey]:
        """(None if the signature holds, else `verify`'s reason; the key in the signature),
        as `verify(armored, message, self.namespace)` says; MalformedSignature as it."""
        blob = dearmor(armored)
        head = blob[:-_ED25519_SIGNATURE] if len(blob) > _ED25519_SIGNATURE else b""
        known = self._heads.get(head)
        if known is None:
            found = verify(armored, message, self.namespace)
            return (None if found.valid else found.reason), found.signature.public_key
        key, loaded, hash_algorithm, signed_head = known
        data = signed_head + _string(HASHES[hash_algorithm](message).digest())
        try:
            loaded.verify(blob[-_ED25519_SIGNATURE:], data)
        except InvalidSignature:
            return "the signature does not match the signed data", key
        return None, key


def split_signed_commit(raw: bytes) -> tuple[bytes, bytes | None]:
    """A git commit object -> (the payload git signed, the armored SSH signature or None).

    git signs the commit object without its `gpgsig` header (whose value continues on the
    lines that start with a space); only an SSH signature counts here.
    """
    head, sep, message = raw.partition(b"\n\n")
    kept: list[bytes] = []
    signature: list[bytes] = []
    inside = False
    for line in head.split(b"\n"):
        if line.startswith(b"gpgsig ") or line.startswith(b"gpgsig-sha256 "):
            inside = True
            signature.append(line.split(b" ", 1)[1])
        elif inside and line.startswith(b" "):
            signature.append(line[1:])
        else:
            inside = False
            kept.append(line)
    payload = b"\n".join(kept) + sep + message
    armored = b"\n".join(signature) + b"\n" if signature else None
    if armored is not None and not armored.startswith(BEGIN.encode()):
        armored = None  # an OpenPGP or X.509 signature: not an SSH one
    return payload, armored


def _mpint(value: int) -> bytes:
    data = value.to_bytes((value.bit_length() + 8) // 8, "big") if value else b""
    return _string(data)


PrivateKey = ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


def sign(
    private_key: PrivateKey, message: bytes, namespace: str, hash_algorithm: str = "sha512"
) -> bytes:
    """An armored SSHSIG of `message`, as `ssh-keygen -Y sign -n NAMESPACE` writes it (RSA
    keys sign with rsa-sha2-512)."""
    from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    line = private_key.public_key().public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH)
    public = parse_public_key(line.decode("ascii"))
    data = signed_data(namespace, hash_algorithm, message)
    if isinstance(private_key, ed25519.Ed25519PrivateKey):
        inner = _string(b"ssh-ed25519") + _string(private_key.sign(data))
    elif isinstance(private_key, ec.EllipticCurvePrivateKey):
        r, s = decode_dss_signature(
            private_key.sign(data, ec.ECDSA(_ECDSA_CURVES[public.key_type]))
        )
        inner = _string(public.key_type.encode()) + _string(_mpint(r) + _mpint(s))
    else:
        raw = private_key.sign(data, padding.PKCS1v15(), hashes.SHA512())
        inner = _string(b"rsa-sha2-512") + _string(raw)
    blob = (
        MAGIC
        + VERSION.to_bytes(4, "big")
        + _string(public.blob)
        + _string(namespace.encode())
        + _string(b"")
        + _string(hash_algorithm.encode())
        + _string(inner)
    )
    body = base64.b64encode(blob).decode()
    lines = [body[i : i + 70] for i in range(0, len(body), 70)]
    return "\n".join([BEGIN, *lines, END, ""]).encode("ascii")
