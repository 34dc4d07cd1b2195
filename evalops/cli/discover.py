"""Find the registry database from a subdirectory of the repository, as git finds `.git`."""

from __future__ import annotations

from pathlib import Path

from evalops.store.defaults import DEFAULT_DB_PATH


def project_root(start: Path) -> Path | None:
    """The nearest directory above `start` holding the default database, searched only up
    to the root of `start`'s git work tree (outside a work tree, nothing is searched).

    None when `start` itself holds one (the plain default applies) or none is found.
    """
    if (start / DEFAULT_DB_PATH).is_file():
        return None
    seen: list[Path] = []
    for directory in [start, *start.parents]:
        seen.append(directory)
        if (directory / ".git").exists():
            break
    else:
        return None
    return next((d for d in seen[1:] if (d / DEFAULT_DB_PATH).is_file()), None)
