"""What the two readers of a registry share: which sub-directories hold which kinds, one
spec file to read (from the work tree or from a commit's objects), and how a path is shown.

evalops/registry/snapshot.py reads the work tree, evalops/registry/committed.py a commit; the
snapshot uses both, so what they share lives here rather than in either (no import cycle).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from evalops.errors import InputError
from evalops.registry.load import Document

# Sub-directory -> the kinds of definition it may hold.
SPEC_DIRS: dict[str, tuple[str, ...]] = {
    "tasks": ("task",),
    "executions": ("execution_profile",),
    "graders": ("grader_set",),
    "suites": ("suite",),
    "policies": ("suite_policy", "gate_policy", "authority"),
}


def display_path(path: Path) -> str:
    """A path relative to the working directory when it is below it, else as given."""
    if not path.is_absolute():
        return os.path.normpath(path)
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def outside_error(target: object, boundary: Path, display: str) -> InputError:
    return InputError(
        f"symlink to {target} leads outside the registry's git work tree "
        f"{boundary}: provenance must describe what was read (copy the file in)",
        display,
    )


@dataclass(frozen=True)
class SpecSource:
    """One spec file to read: where it sits below the registry, and how to parse it."""

    sub: str
    """The registry sub-directory holding it (`tasks`, `graders`, ...)."""
    display: str
    load: Callable[[], Document]
    problem: InputError | None = None
    """Why it cannot be read at all (a symlink out of the work tree...)."""
