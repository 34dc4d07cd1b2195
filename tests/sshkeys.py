"""Real OpenSSH keys and signatures for tests: made by `ssh-keygen` in temporary directories."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

#: (ssh-keygen -t, -b) for every key type evalops verifies.
KEY_SPECS = {
    "ed25519": ("ed25519", None),
    "ecdsa256": ("ecdsa", "256"),
    "ecdsa384": ("ecdsa", "384"),
    "ecdsa521": ("ecdsa", "521"),
    "rsa": ("rsa", "2048"),
}


def make_key(directory: Path, name: str, kind: str = "ed25519") -> Path:
    """A new passphrase-less key pair `directory/name` (+ `.pub`); returns the private key path."""
    key_type, bits = KEY_SPECS[kind]
    path = directory / name
    args = ["ssh-keygen", "-q", "-t", key_type, "-N", "", "-C", f"{name}@test", "-f", str(path)]
    if bits:
        args[4:4] = ["-b", bits]
    subprocess.run(args, check=True, capture_output=True)
    return path


def public_key(private: Path) -> str:
    return Path(f"{private}.pub").read_text().strip()


def sign(private: Path, message: bytes, namespace: str = "evalops", *extra: str) -> bytes:
    """`ssh-keygen -Y sign` of `message`: the armored signature."""
    out = subprocess.run(
        ["ssh-keygen", "-q", "-Y", "sign", "-n", namespace, "-f", str(private), *extra],
        input=message,
        capture_output=True,
        check=True,
    )
    return out.stdout


def sign_file(private: Path, path: Path, namespace: str = "evalops") -> Path:
    """Sign `path` as a user would (`ssh-keygen -Y sign -f KEY -n evalops FILE`): FILE.sig."""
    subprocess.run(
        ["ssh-keygen", "-q", "-Y", "sign", "-n", namespace, "-f", str(private), str(path)],
        check=True,
        capture_output=True,
    )
    return Path(f"{path}.sig")


def ssh_keygen_verifies(
    signature: bytes, message: bytes, key_line: str, namespace: str, work: Path
) -> bool:
    """`ssh-keygen -Y verify` with an allowed-signers file holding only `key_line`."""
    allowed = work / "allowed_signers"
    allowed.write_text(f"signer {key_line}\n")
    sig = work / "message.sig"
    sig.write_bytes(signature)
    command = ["ssh-keygen", "-Y", "verify", "-f", str(allowed), "-I", "signer", "-n", namespace]
    done = subprocess.run(
        [*command, "-s", str(sig)],
        input=message,
        capture_output=True,
        check=False,
    )
    return done.returncode == 0


def armor(blob: bytes) -> bytes:
    body = base64.b64encode(blob).decode()
    lines = [body[i : i + 70] for i in range(0, len(body), 70)]
    return (
        "-----BEGIN SSH SIGNATURE-----\n" + "\n".join(lines) + "\n-----END SSH SIGNATURE-----\n"
    ).encode()
