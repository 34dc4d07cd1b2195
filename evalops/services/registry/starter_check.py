"""Warnings about a registry that still holds what the starters wrote.

An unedited starter task shares its task_digest with every other unedited starter task (the
digest covers contract and fixtures, not the id), so syncing it registers a placeholder, and
the first real edit then needs a revision bump. Two execution profiles naming one
system_build make `gate check --build` ask which one was meant.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from functools import cache

from evalops.registry.definitions import Definition, definition_from_document
from evalops.registry.load import document_from_bytes
from evalops.services.registry.scaffold import execution_yaml, task_yaml


@cache
def _starter_digest(kind: str, definition_id: str, grader_set: str) -> str:
    text = task_yaml(definition_id, grader_set) if kind == "task" else execution_yaml(definition_id)
    # Read as a file of that content would be (no file written: `validate` starts faster).
    return definition_from_document(
        document_from_bytes(text.encode("utf-8"), "starter.yaml")
    ).digest


def _is_starter(definition: Definition) -> bool:
    if definition.kind == "task":
        # The task digest leaves out id and grader set: one digest stands for every starter
        # task, so one starter is read, not one per task file.
        return definition.digest == _starter_digest("task", "first-task", "first-task-graders")
    if definition.kind == "execution_profile":
        # A starter profile names its own id as its build (`execution_yaml`): any other is
        # not one, and needs no starter read to say so.
        if definition.value["system_build"] != definition.id:
            return False
        return definition.digest == _starter_digest("execution_profile", definition.id, "")
    return False


def registry_warnings(
    definitions: Iterable[Definition], only: set[tuple[str, str]] | None = None
) -> list[str]:
    """A line naming the starters left unedited (among `only`, (kind, id) pairs, when given:
    `sync` names those it just registered), and one per system_build several profiles name."""
    definitions = list(definitions)
    starters = [
        d.file for d in definitions if (only is None or (d.kind, d.id) in only) and _is_starter(d)
    ]
    warnings: list[str] = []
    if starters:
        warnings.append(
            "still as `evalops new` or `init --registry` wrote "
            f"{'them' if len(starters) > 1 else 'it'} "
            f"(edit before relying on {'them' if len(starters) > 1 else 'it'}: what the "
            "digest covers, a task's contract and fixtures or a profile's model and "
            "settings, not only the title or other meta; unedited starter tasks share one "
            "task_digest, and once synced the first real edit needs a revision bump): "
            f"{', '.join(sorted(starters))}"
        )
    builds: dict[str, list[str]] = defaultdict(list)
    for definition in definitions:
        if definition.kind == "execution_profile":
            builds[str(definition.value["system_build"])].append(definition.id)
    for build, ids in sorted(builds.items()):
        if len(ids) > 1 and (only is None or any(("execution_profile", i) in only for i in ids)):
            warnings.append(
                f"execution profiles {', '.join(sorted(ids))} share system_build {build}: "
                f"`gate check --build {build}` then needs --execution to pick one"
            )
    return warnings
