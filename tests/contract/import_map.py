"""The import graph of a package, read from its source with `ast` (nothing is imported).

tests/contract/test_services_map.py runs these checks on `evalops/`, then on tiny planted
packages, so a check that silently stopped finding anything fails there too. import-linter
(`make layers`) checks layers between packages; it does not look inside function bodies for
cycles within a layer, nor at private names, nor at the faces of the services sub-packages.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Module:
    name: str
    path: Path

    @property
    def is_package(self) -> bool:
        return self.path.name == "__init__.py"


@dataclass(frozen=True)
class Import:
    """One module naming another in an import statement (module level or in a function)."""

    source: str
    target: str
    line: int
    #: The name imported from `target` (`from target import name`), when it is not a module.
    name: str | None = None


def modules(root: Path, package: str) -> dict[str, Module]:
    """Every module of `package` (a directory below `root`), by dotted name."""
    found: dict[str, Module] = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = Module(".".join(parts), path)
    return found


def _parsed(module: Module) -> ast.Module:
    return parsed_file(module.path)


def parsed_file(path: Path) -> ast.Module:
    """The syntax tree of a source file, parsed once per process and text (the contract
    tests walk every module of evalops, several times each)."""
    return _parse(path.read_text(encoding="utf-8"), str(path))


@functools.cache
def _parse(text: str, filename: str) -> ast.Module:
    """Parsed once per text: each check walks every module of evalops again."""
    return ast.parse(text, filename=filename)


def _from_base(module: Module, node: ast.ImportFrom) -> str:
    """The module a `from X import ...` names, relative imports resolved."""
    if not node.level:
        return node.module or ""
    base = module.name.split(".")
    if not module.is_package:
        base = base[:-1]
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _known(name: str, known: dict[str, Module]) -> str | None:
    """The longest module of `known` that `name` is or lies in (`a.b.c` for `import a.b.c.d`
    when `d` is an attribute)."""
    parts = name.split(".")
    while parts:
        if ".".join(parts) in known:
            return ".".join(parts)
        parts.pop()
    return None


def imports(module: Module, known: dict[str, Module]) -> Iterator[Import]:
    """Every import of another module of `known` by `module`, wherever it is written: at
    module level, in a function, under `if TYPE_CHECKING` (mypy and readers follow it too)."""
    for node in ast.walk(_parsed(module)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _known(alias.name, known)
                if target is not None:
                    yield Import(module.name, target, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = _from_base(module, node)
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                if submodule in known:
                    yield Import(module.name, submodule, node.lineno)
                elif base in known:
                    yield Import(module.name, base, node.lineno, alias.name)


def graph(known: dict[str, Module]) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {name: set() for name in known}
    for module in known.values():
        for edge in imports(module, known):
            if edge.target != module.name:
                edges[module.name].add(edge.target)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm,
    iterative: a deep package must not hit the recursion limit), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = counter
                    counter += 1
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(edges[successor]))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component: list[str] = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return sorted(found)


def _module_aliases(module: Module, known: dict[str, Module]) -> dict[str, str]:
    """Local names bound to a module of `known` (`import a.b as m`, `from a import b`,
    `import a.b` binding `a`), each with the dotted module it names."""
    aliases: dict[str, str] = {}
    for node in ast.walk(_parsed(module)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname and alias.name in known:
                    aliases[alias.asname] = alias.name
                elif not alias.asname:
                    top = alias.name.split(".")[0]
                    if top in known:
                        aliases[top] = top
        elif isinstance(node, ast.ImportFrom):
            base = _from_base(module, node)
            for alias in node.names:
                if f"{base}.{alias.name}" in known:
                    aliases[alias.asname or alias.name] = f"{base}.{alias.name}"
    return aliases


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return None if inner is None else f"{inner}.{node.attr}"
    return None


def private_imports(known: dict[str, Module]) -> list[str]:
    """Every private name (`_x`, not a dunder) one module takes from another: `from m import
    _x`, a private module imported from elsewhere, or `m._x` on an imported module `m`."""
    found: list[str] = []
    for module in known.values():
        for edge in imports(module, known):
            if edge.target == module.name:
                continue
            names = [edge.name] if edge.name and _private(edge.name) else []
            # A private module (`pkg/_impl.py`) is private to its package `pkg`.
            parts = edge.target.split(".")
            names += [
                part
                for i, part in enumerate(parts)
                if _private(part) and not module.name.startswith(".".join(parts[:i]) + ".")
            ]
            found += [
                f"{module.path}:{edge.line}: {module.name} imports {name} of {edge.target}"
                for name in names
            ]
        aliases = _module_aliases(module, known)
        for node in ast.walk(_parsed(module)):
            if not (isinstance(node, ast.Attribute) and _private(node.attr)):
                continue
            dotted = _dotted(node.value)
            if dotted is None:
                continue
            head, _, rest = dotted.partition(".")
            if head not in aliases:
                continue
            target = ".".join(filter(None, [aliases[head], rest]))
            if target in known and target != module.name:
                found.append(
                    f"{module.path}:{node.lineno}: {module.name} uses {node.attr} of {target}"
                )
    return sorted(set(found))


def face(package: Module) -> tuple[str | None, list[str] | None]:
    """The docstring and the literal `__all__` of a package's `__init__.py`."""
    tree = _parsed(package)
    names: list[str] | None = None
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
            and isinstance(node.value, ast.List | ast.Tuple)
        ):
            names = [e.value for e in node.value.elts if isinstance(e, ast.Constant)]
    return ast.get_docstring(tree), names


@dataclass(frozen=True)
class Layout:
    """What `services` may hold: sub-packages with a face, and these flat helpers."""

    services: str
    helpers: frozenset[str]


def layout_problems(root: Path, package: str, layout: Layout) -> list[str]:
    """A flat module outside the helpers, a sub-package without a docstring or `__all__`,
    an `__all__` naming a module that does not exist, or a module outside a sub-package
    importing one of its modules that `__all__` does not name."""
    known = modules(root, package)
    services = layout.services
    problems: list[str] = []
    faces: dict[str, set[str]] = {}
    directory = known[services].path.parent
    for path in sorted(directory.iterdir()):
        if path.suffix == ".py" and path.stem != "__init__" and path.stem not in layout.helpers:
            problems.append(
                f"{path}: flat module in {services} outside the helpers "
                f"{sorted(layout.helpers)}: move it into the sub-package it serves"
            )
        if path.is_dir() and any(path.glob("*.py")):
            sub = f"{services}.{path.name}"
            if sub not in known:
                problems.append(f"{path}: sub-package without __init__.py")
                continue
            doc, names = face(known[sub])
            if not doc:
                problems.append(f"{known[sub].path}: sub-package without a docstring")
            if names is None:
                problems.append(f"{known[sub].path}: sub-package without a literal __all__")
                names = []
            missing = [n for n in names if f"{sub}.{n}" not in known]
            if missing:
                problems.append(f"{known[sub].path}: __all__ names no such module: {missing}")
            faces[sub] = set(names)
    for module in known.values():
        for edge in imports(module, known):
            for sub, offered in faces.items():
                inside = edge.target.startswith(f"{sub}.")
                if not inside or module.name == sub or module.name.startswith(f"{sub}."):
                    continue
                first = edge.target[len(sub) + 1 :].split(".")[0]
                if first not in offered:
                    problems.append(
                        f"{module.path}:{edge.line}: {module.name} imports "
                        f"{edge.target}, which {sub}.__all__ does not offer"
                    )
    return problems
