"""Name the registry file behind a digest that is not registered.

A record built from a task file edited but not yet synced carries that file's new digest;
"task_digest ... is not registered" alone leaves people searching. The work tree's files are
digested once, only when such an error occurs, and the one whose digest it is gets named.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from pathlib import Path

from evalops.errors import InputError

_UNREGISTERED = re.compile(
    r"^(?P<field>task_digest|execution_digest|grader_set_digest) (?P<digest>sha256:[0-9a-f]{64})"
    r" is not registered$"
)


def _work_tree_digests(root: Path) -> dict[str, str]:
    """Digest -> file for every spec file of the registry that parses (others are skipped:
    this only serves a hint)."""
    from evalops.registry.definitions import load_definition
    from evalops.registry.snapshot import spec_files
    from evalops.registry.spec_sources import display_path

    found: dict[str, str] = {}
    if not root.is_dir():
        return found
    for path in spec_files(root):
        try:
            definition = load_definition(path, display_path(path))
        except InputError:
            continue
        found.setdefault(definition.digest, definition.file)
    return found


def with_file_hints(errors: Sequence[InputError], registry: Path) -> list[InputError]:
    """The errors, each unregistered digest that a registry file has naming that file."""
    digests: dict[str, str] | None = None
    out: list[InputError] = []
    for error in errors:
        match = _UNREGISTERED.match(error.message)
        if match is None:
            out.append(error)
            continue
        if digests is None:
            digests = _work_tree_digests(registry)
        file = digests.get(match.group("digest"))
        hint = (
            f": it is the digest of {file} as it is now, which was never synced (commit it "
            f"and run `evalops sync`)"
            if file
            else " (no file of the registry has it: was the record built from another "
            "checkout, or from a file since edited?)"
        )
        out.append(dataclasses.replace(error, message=error.message + hint))
    return out
