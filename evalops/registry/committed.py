"""A registry's spec files as one commit holds them (read from git objects, never the work tree).

Symlinks are followed inside the commit, the way the work-tree reader follows them on disk:
a link to a file or a directory of the same repository reads what the commit holds there;
a link leading out of the repository is refused, as on disk.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path

from evalops.errors import InputError
from evalops.registry.git_tree import (
    MAX_LINK_HOPS,
    TreeEntry,
    list_tree,
    read_blobs,
    resolve_link,
)
from evalops.registry.load import MAX_SPEC_BYTES, SPEC_SUFFIXES, Document, document_from_bytes
from evalops.registry.spec_sources import SPEC_DIRS, SpecSource, display_path, outside_error


@dataclass(frozen=True)
class _Found:
    """A spec file reached at `path` (below the registry, links kept in the name)."""

    path: str
    entry: TreeEntry | None
    problem: str | None = None
    outside: str | None = None
    """The target of a symlink leading out of the repository."""
    via: tuple[str, ...] = ()
    """The repository paths of the symlinks followed to reach it (a chain: every hop)."""


def _is_spec(path: str) -> bool:
    return path.endswith(SPEC_SUFFIXES)


class _Resolver:
    """Follows a commit's symlinks inside that commit."""

    def __init__(self, top: Path, commit: str) -> None:
        self.top = top
        self.commit = commit
        self._tree: dict[str, TreeEntry] | None = None
        self._targets: dict[str, str] = {}

    @property
    def tree(self) -> dict[str, TreeEntry]:
        if self._tree is None:
            self._tree = list_tree(self.top, self.commit, "")
        return self._tree

    def prefetch(self, links: list[TreeEntry]) -> None:
        blobs = read_blobs(self.top, [e.sha for e in links])
        for entry in links:
            self._targets[entry.path] = blobs[entry.sha].decode("utf-8", "surrogateescape")

    def target(self, entry: TreeEntry) -> str:
        if entry.path not in self._targets:
            self.prefetch([entry])
        return self._targets[entry.path]

    def expand(
        self, name: str, entry: TreeEntry, hops: int = 0, via: tuple[str, ...] = ()
    ) -> list[_Found]:
        """The spec files a link at `name` (the path it is read under) leads to."""
        target = self.target(entry)
        via = (*via, entry.path)
        if hops >= MAX_LINK_HOPS:
            problem = f"symlink chain at {target} is too long (a cycle?)"
            return [_Found(name, None, problem, via=via)]
        resolved = resolve_link(entry.path, target, self.top)
        if resolved is None:
            return [_Found(name, None, outside=target, via=via)]
        hit = self.tree.get(resolved)
        if hit is not None:
            if hit.is_link:
                return self.expand(name, hit, hops + 1, via)
            return [_Found(name, hit, via=via)] if _is_spec(name) else []
        prefix = f"{resolved}/" if resolved else ""
        inside = [e for p, e in self.tree.items() if p.startswith(prefix)]
        if not inside:
            problem = f"symlink to {target}, which the commit does not hold"
            return [_Found(name, None, problem, via=(*via, resolved))]
        found: list[_Found] = []
        for e in inside:
            below = f"{name}/{e.path[len(prefix) :]}"
            if e.is_link:
                found.extend(self.expand(below, e, hops + 1, via))
            elif _is_spec(below):
                found.append(_Found(below, e, via=via))
        return found


def _found_files(rel: str, tree: dict[str, TreeEntry], resolver: _Resolver) -> list[_Found]:
    base = f"{rel}/" if rel else ""
    links = [e for e in tree.values() if e.is_link]
    if links:
        resolver.prefetch(links)
    found: list[_Found] = []
    for path, entry in sorted(tree.items()):
        below = path[len(base) :]
        if below.split("/", 1)[0] not in SPEC_DIRS or ("/" not in below and not entry.is_link):
            continue
        if entry.is_link:
            found.extend(resolver.expand(path, entry))
        elif _is_spec(path):
            found.append(_Found(path, entry))
    return sorted(found, key=lambda f: f.path)


def committed_sources(root: Path, top: Path, commit: str) -> list[SpecSource]:
    """Every spec file below `root` in `commit`, its blobs read in one batch."""
    rel = root.resolve().relative_to(top).as_posix()
    rel = "" if rel == "." else rel
    tree = list_tree(top, commit, rel)
    tree = {p: e for p, e in tree.items() if not rel or p.startswith(f"{rel}/")}
    found = _found_files(rel, tree, _Resolver(top, commit))
    readable = [
        f.entry.sha for f in found if f.entry is not None and f.entry.size <= MAX_SPEC_BYTES
    ]
    blobs = read_blobs(top, readable)
    base = len(rel) + 1 if rel else 0
    sources: list[SpecSource] = []
    for f in found:
        below = f.path[base:]
        display = display_path(root / below)
        sub = below.split("/", 1)[0]
        sources.append(_source(sub, display, f, blobs, top))
    return sources


def _source(
    sub: str, display: str, found: _Found, blobs: dict[str, bytes], top: Path
) -> SpecSource:
    if found.outside is not None:
        return SpecSource(sub, display, _unreadable, outside_error(found.outside, top, display))
    if found.problem is not None:
        return SpecSource(sub, display, _unreadable, InputError(found.problem, display))
    assert found.entry is not None
    if found.entry.size > MAX_SPEC_BYTES:
        size = found.entry.size
        problem = InputError(f"file is {size} bytes; a spec file is at most 1 MiB", display, 1)
        return SpecSource(sub, display, _unreadable, problem)
    return SpecSource(sub, display, partial(document_from_bytes, blobs[found.entry.sha], display))


def _unreadable() -> Document:
    raise InputError("file cannot be read")


#: Registry sub-directories whose every definition bears rules (a grader decides what
#: blocks); a task bears rules only through its `meta.risk` / `meta.protects`.
RULE_DIRS = ("policies", "suites", "graders")


@dataclass(frozen=True)
class RuleReads:
    """Where one commit's rule-bearing definitions are read from (repository paths)."""

    rules: frozenset[str]
    """Every file a policy, suite declaration, authority or grader set is read from: the
    path it is listed under, each symlink followed, and the file finally read."""
    tasks: dict[str, tuple[str, ...]]
    """The blob id of each task file read -> the repository paths it is read through."""


def rule_reads(top: Path, commit: str, rel: str) -> RuleReads:
    """What `commit` holds of the registry at `rel` (repository-relative, "" for the top)
    that bears rules, every symlink followed inside the commit."""
    rel = "" if rel == "." else rel
    tree = list_tree(top, commit, rel)
    tree = {p: e for p, e in tree.items() if not rel or p.startswith(f"{rel}/")}
    base = len(rel) + 1 if rel else 0
    rules: set[str] = set()
    tasks: dict[str, tuple[str, ...]] = {}
    for found in _found_files(rel, tree, _Resolver(top, commit)):
        sub = found.path[base:].split("/", 1)[0]
        paths = {found.path, *found.via}
        if found.entry is not None:
            paths.add(found.entry.path)
        if sub in RULE_DIRS:
            rules |= paths
        elif sub == "tasks" and found.entry is not None:
            tasks[found.entry.sha] = (*tasks.get(found.entry.sha, ()), *sorted(paths))
        elif sub == "tasks":
            rules |= paths  # a task file that cannot be read: any change to it counts
    return RuleReads(frozenset(rules), tasks)


def task_blobs(top: Path, shas: list[str]) -> dict[str, Document | None]:
    """Each task blob parsed (None: it does not parse), read in one batch."""
    blobs = read_blobs(top, shas)
    out: dict[str, Document | None] = {}
    for sha, data in blobs.items():
        try:
            out[sha] = document_from_bytes(data, sha) if len(data) <= MAX_SPEC_BYTES else None
        except InputError:
            out[sha] = None
    return out
