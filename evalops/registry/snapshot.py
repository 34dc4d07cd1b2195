"""A registry directory read as one consistent snapshot of definitions."""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from evalops.errors import InputError, InputErrors
from evalops.registry.definitions import Definition, definition_from_document
from evalops.registry.load import SPEC_SUFFIXES, load_document
from evalops.registry.spec_sources import SPEC_DIRS, SpecSource, display_path, outside_error


@dataclass(frozen=True)
class Snapshot:
    root: Path
    definitions: tuple[Definition, ...]

    def of_kind(self, kind: str) -> list[Definition]:
        return [d for d in self.definitions if d.kind == kind]

    def find(self, kind: str, def_id: str) -> Definition | None:
        return next((d for d in self.definitions if d.kind == kind and d.id == def_id), None)


def _walk(folder: Path) -> list[Path]:
    """Every file below `folder`, symlinked directories followed (once each, so a link
    cycle ends): a file reached through a link out of the work tree must be seen to be
    refused, never silently skipped."""
    files: list[Path] = []
    seen: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=True):
        real = os.path.realpath(dirpath)
        if real in seen:
            dirnames[:] = []
            continue
        seen.add(real)
        files.extend(Path(dirpath) / name for name in filenames)
    return sorted(files)


def spec_files(root: Path) -> list[Path]:
    files: list[Path] = []
    for sub in SPEC_DIRS:
        folder = root / sub
        if folder.is_dir():
            files.extend(p for p in _walk(folder) if p.is_file() and p.name.endswith(SPEC_SUFFIXES))
    return files


#: At most this many errors are reported by one run of `validate` / `sync` (the rest are
#: counted); every file is still read.
MAX_REPORTED_ERRORS = 200


def _declared_id(source: SpecSource) -> str:
    """The id an invalid file declares, as far as it can be read (else its file name), so
    that nothing else is reported as missing it: it is there, and already reported."""
    try:
        value = source.load().value
    except InputError:
        value = None
    declared = value.get("id") if isinstance(value, dict) else None
    return declared if isinstance(declared, str) else Path(source.display).name.split(".")[0]


def _capped(errors: list[InputError]) -> list[InputError]:
    flat = [one for e in errors for one in (getattr(e, "errors", ()) or (e,))]
    if len(flat) <= MAX_REPORTED_ERRORS:
        return flat
    more = len(flat) - MAX_REPORTED_ERRORS
    return [
        *flat[:MAX_REPORTED_ERRORS],
        InputError(
            f"{more} more errors not listed (at most {MAX_REPORTED_ERRORS} are reported per "
            "run; fix these and run again)"
        ),
    ]


def _cross_check(defs: list[Definition], broken: frozenset[str] = frozenset()) -> list[InputError]:
    """Problems between files; `broken` holds the ids of grader-set files that exist but are
    invalid (already reported: a task naming one is not reported again)."""
    errors: list[InputError] = []
    seen: dict[tuple[str, str], Definition] = {}
    for d in defs:
        key = (d.kind, d.id)
        if key in seen:
            errors.append(
                InputError(
                    f"{d.kind} id {d.id!r} is also defined in {seen[key].file}",
                    d.file,
                    d.lines.get(("id",), 1),
                    "id",
                )
            )
        seen[key] = d
    authorities = [d for d in defs if d.kind == "authority"]
    for extra in authorities[1:]:
        errors.append(
            InputError(
                f"a registry has at most one authority; {authorities[0].file} is one already",
                extra.file,
                extra.lines.get(("id",), 1),
                "spec_schema_version",
            )
        )
    # Read from the files' values (valid: the fields are there, of their types), so that
    # `validate` needs no pydantic model (evalops/registry/definitions.py).
    grader_sets = {d.id: d.value for d in defs if d.kind == "grader_set"}
    for d in defs:
        if d.kind != "task":
            continue
        grader_set = d.value["grader_set"]
        graders = grader_sets.get(grader_set)
        if graders is None and grader_set in broken:
            continue
        if graders is None:
            from evalops.domain.suggestions import close_match  # only on this error

            like = close_match(str(grader_set), sorted(grader_sets))
            errors.append(
                InputError(
                    f"grader set {grader_set!r} is not in the registry"
                    + (f"; did you mean {like!r}?" if like else ""),
                    d.file,
                    d.lines.get(("grader_set",), 1),
                    "grader_set",
                )
            )
            continue
        score_from = d.value["contract"].get("score_from")
        if score_from is not None:
            # Grader ids are unique in a valid set: the first is the one (GraderSet.grader).
            grader = next((g for g in graders["graders"] if g["id"] == score_from), None)
            if grader is None or grader["layer"] != "outcome":
                errors.append(
                    InputError(
                        f"score_from {score_from!r} is not an outcome grader of {grader_set!r}",
                        d.file,
                        d.lines.get(("contract", "score_from"), 1),
                        "contract.score_from",
                    )
                )
    return errors


def work_tree(root: Path) -> Path:
    """The git work tree holding `root` (the nearest parent with `.git`), else `root`."""
    resolved = root.resolve()
    for folder in (resolved, *resolved.parents):
        if (folder / ".git").exists():
            return folder
    return resolved


def _outside(path: Path, boundary: Path) -> bool:
    """A symlink (or a file in a symlinked directory) leading out of the work tree."""
    return not path.resolve().is_relative_to(boundary)


def _work_tree_sources(root: Path) -> list[SpecSource]:
    boundary = work_tree(root)
    sources: list[SpecSource] = []
    for path in spec_files(root):
        display = display_path(path)
        sub = path.relative_to(root).parts[0]
        problem = (
            outside_error(path.resolve(), boundary, display) if _outside(path, boundary) else None
        )
        sources.append(SpecSource(sub, display, partial(load_document, path, display), problem))
    return sources


def require_registry_dir(root: Path) -> None:
    """Every command reading a registry refuses a missing one alike: where it looked, and
    the two usual ways out (run from elsewhere, or name the directory). A spec file or one
    of a registry's folders named instead is told apart: the registry is read whole."""
    if root.is_file():
        raise InputError(
            "a file, not a registry: a registry is read whole, from the directory holding "
            f"{', '.join(f'{d}/' for d in SPEC_DIRS)}{_registry_above(root)}",
            display_path(root),
        )
    if not root.is_dir():
        raise InputError(
            f"registry directory not found: {root.absolute()} (run from the directory "
            "that holds registry/, or name the registry directory: evalops --registry DIR, "
            "or the argument of validate and sync)",
            display_path(root),
        )


def _registry_above(path: Path) -> str:
    """`: name X` for the registry directory holding `path` in one of its folders."""
    for parent in path.parents:
        if parent.name in SPEC_DIRS:
            return f": name {display_path(parent.parent)}"
    return ""


def load_snapshot(root: Path) -> Snapshot:
    """Read every spec file below `root` in the work tree (`validate`, `digest`); all
    problems of all files are reported together (up to MAX_REPORTED_ERRORS), with no
    follow-on error about a file already reported."""
    require_registry_dir(root)
    return _snapshot(root, _work_tree_sources(root))


def load_committed_snapshot(root: Path, commit: str) -> Snapshot:
    """Read every spec file below `root` as `commit` holds it (git objects, never the work
    tree): what `sync` records is what that commit contains."""
    # Imported here: reading git objects is `sync`'s business, not `validate`'s (start-up).
    from evalops.registry.committed import committed_sources

    require_registry_dir(root)
    return _snapshot(root, committed_sources(root, work_tree(root), commit))


def _snapshot(root: Path, sources: list[SpecSource]) -> Snapshot:
    errors: list[InputError] = []
    defs: list[Definition] = []
    broken_grader_sets: set[str] = set()
    for source in sources:
        if source.problem is not None:
            errors.append(source.problem)
            continue
        try:
            definition = definition_from_document(source.load())
        except InputError as exc:
            errors.append(exc)
            if source.sub == "graders":
                broken_grader_sets.add(_declared_id(source))
            continue
        if definition.kind not in SPEC_DIRS[source.sub]:
            errors.append(
                InputError(
                    f"a {definition.kind} file does not belong in {source.sub}/",
                    source.display,
                    definition.lines.get(("spec_schema_version",), 1),
                    "spec_schema_version",
                )
            )
            continue
        defs.append(definition)
    errors.extend(_cross_check(defs, frozenset(broken_grader_sets)))
    if errors:
        raise InputErrors.of(_capped(errors))
    if not defs:
        if root.name in SPEC_DIRS:
            raise InputError(
                "no spec files found: this is one of a registry's folders, and a registry is "
                f"read whole: name {display_path(root.parent)}",
                display_path(root),
            )
        raise InputError(
            "no spec files found (expected tasks/, executions/, graders/, suites/, policies/)",
            display_path(root),
        )
    return Snapshot(root, tuple(defs))
