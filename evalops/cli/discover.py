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


def registry_parent(start: Path, registry: Path) -> Path | None:
    """The directory whose `registry` holds `start` (`start` is that registry or inside it),
    in the same git work tree as `start`; None when `start` holds a database itself, is
    not in a git work tree, or is in a work tree of its own inside the registry. In a fresh
    clone there is no database yet to find, and `evalops init` run inside the registry
    would put one there: the project is the directory above the registry."""
    if (start / DEFAULT_DB_PATH).is_file():
        return None
    below: Path | None = None
    found: Path | None = None
    for directory in [start, *start.parents]:
        if (
            found is None
            and below is not None
            and (directory / registry).resolve() == below.resolve()
        ):
            found = directory
        if (directory / ".git").exists():
            return found
        below = directory
    return None


def in_registry_repository(start: Path, registry: Path) -> bool:
    """`start` is in a git work tree and `registry` is found from `start` or a directory
    above it, up to the work tree's root."""
    seen: list[Path] = []
    for directory in [start, *start.parents]:
        seen.append(directory)
        if (directory / ".git").exists():
            return any((d / registry).is_dir() for d in seen)
    return False


def no_database_here(start: Path) -> str:
    """The missing-database error away from any registry: `evalops init` would make a
    stray database, so where evalops looked and how to point it at the real one come first."""
    return (
        f"no registry database in the current directory, {start} (no {DEFAULT_DB_PATH}), "
        "which is not in a git work tree holding a registry: run evalops from your "
        "registry's repository, or name the database with --db or EVALOPS_DATABASE_URL; "
        "to start a new registry here, run `evalops init`"
    )


def no_database_in_registry_repository(path: Path) -> str:
    """The missing-database error in a git work tree holding the registry (a teammate's
    clone): git carries the spec files only, so `evalops init` alone would start a
    separate, empty registry beside the team's."""
    return (
        f"no registry database at {path}: the registry's spec files are in git, but its "
        "trials, suite members and decisions live in its database, not in git: point --db "
        "or EVALOPS_DATABASE_URL at the team's database (e.g. PostgreSQL), or run "
        "`evalops init` to start an empty one"
    )
