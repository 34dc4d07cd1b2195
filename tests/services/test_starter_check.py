"""`validate` names unedited starter tasks by comparing each task's digest with one starter's:
sound because a starter task's digest is the same whatever id and grader set it was
written with (the digest covers spec_schema_version, contract and fixtures only)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalops.registry.definitions import load_definition
from evalops.services.registry.scaffold import execution_yaml, task_yaml
from evalops.services.registry.starter_check import registry_warnings


@pytest.mark.parametrize(
    ("task_id", "grader_set"),
    [("refund-once", "refund-graders"), ("a", "b"), ("x" * 60, "first-task-graders")],
)
def test_a_starter_task_is_named_whatever_its_id_and_grader_set(
    tmp_path: Path, task_id: str, grader_set: str
) -> None:
    first = load_definition(_write(tmp_path, "first-task", "first-task-graders"))
    other = load_definition(_write(tmp_path, task_id, grader_set))
    assert other.digest == first.digest
    assert registry_warnings([other]) and task_id in registry_warnings([other])[0]


def test_an_edited_starter_task_is_not_named(tmp_path: Path) -> None:
    path = _write(tmp_path, "refund-once", "refund-graders")
    path.write_text(path.read_text().replace("task_done: true", "refunded: true"))
    assert registry_warnings([load_definition(path)]) == []


def _write(tmp_path: Path, task_id: str, grader_set: str) -> Path:
    path = tmp_path / "tasks" / f"{task_id}.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(task_yaml(task_id, grader_set), encoding="utf-8")
    return path


@pytest.mark.parametrize("profile_id", ["first-build", "b", "v1.2", "x" * 60])
def test_a_starter_profile_builds_its_own_id_and_is_named(tmp_path: Path, profile_id: str) -> None:
    """Why a profile whose system_build is not its id is not read against a starter: every
    starter profile's build is its id."""
    path = tmp_path / "executions" / f"{profile_id}.yaml"
    path.parent.mkdir()
    path.write_text(execution_yaml(profile_id), encoding="utf-8")
    starter = load_definition(path)
    assert starter.value["system_build"] == profile_id
    assert registry_warnings([starter]) and str(path) in registry_warnings([starter])[0]
    edited = path.read_text().replace(f"system_build: {profile_id}", "system_build: other")
    path.write_text(edited, encoding="utf-8")
    assert registry_warnings([load_definition(path)]) == []


def test_a_starter_with_only_its_title_edited_is_named_and_told_what_counts(
    tmp_path: Path,
) -> None:
    """A newcomer who retitled a starter was warned it was "unedited": the digest leaves
    meta out, so it is still a starter where it counts, and the warning now says what does
    count."""
    path = _write(tmp_path, "refund-once", "refund-graders")
    text = path.read_text()
    title = next(line for line in text.splitlines() if line.strip().startswith("title:"))
    path.write_text(text.replace(title, "  title: Refund once, retitled"), encoding="utf-8")
    retitled = load_definition(path)
    assert retitled.value["meta"]["title"] == "Refund once, retitled"
    (warning,) = registry_warnings([retitled])
    assert str(path) in warning
    assert (
        "what the digest covers, a task's contract and fixtures or a profile's model and "
        "settings, not only the title or other meta"
    ) in warning
