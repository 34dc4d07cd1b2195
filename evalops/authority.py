"""Sign and check evalops acts from Python (public API; docs/authority.md).

    from pathlib import Path
    from cryptography.hazmat.primitives.serialization import load_ssh_private_key
    from evalops.authority import sign_act, check_act_signature, fingerprint

    key = load_ssh_private_key(Path("~/.ssh/id_ed25519").expanduser().read_bytes(), None)
    act = Path("act.json").read_bytes()          # printed by `... --print-act`
    Path("act.json.sig").write_bytes(sign_act(act, key))
    # then: evalops waiver grant ... --act act.json --signature act.json.sig

`sign_act` writes exactly what `ssh-keygen -Y sign -n evalops` writes (the tests check that
OpenSSH verifies it), without starting a process. `check_act_signature` says whether a
signature over an act holds and which key made it; whether that key may sign the act is
for the authority in force to say, when evalops records it.
"""

from __future__ import annotations

from evalops.domain.authority import NAMESPACE, act_bytes, read_act
from evalops.domain.sshsig import (
    MalformedKey,
    MalformedSignature,
    PrivateKey,
    PublicKey,
    SignatureCheck,
    parse_public_key,
    sign,
    verify,
)

__all__ = [
    "MalformedKey",
    "MalformedSignature",
    "PublicKey",
    "SignatureCheck",
    "act_bytes",
    "check_act_signature",
    "fingerprint",
    "parse_public_key",
    "read_act",
    "sign_act",
]


def sign_act(act: bytes, private_key: PrivateKey) -> bytes:
    """The armored SSH signature of an act (namespace `evalops`)."""
    read_act(act)  # refuse to sign something that is not an act
    return sign(private_key, act, NAMESPACE)


def check_act_signature(act: bytes, signature: bytes) -> SignatureCheck:
    """Whether `signature` is a valid `evalops` signature over exactly `act`."""
    return verify(signature, act, NAMESPACE)


def fingerprint(public_key_line: str) -> str:
    """`SHA256:...` of an OpenSSH public key line, as `ssh-keygen -l` prints it."""
    return parse_public_key(public_key_line).fingerprint
