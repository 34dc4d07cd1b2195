"""CLI hygiene: fast start-up, help with an example on every command, errors without tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from evalops.cli.main import command_tree
from tests.conftest import Cli

HEAVY = ("alembic", "jinja2", "git", "scipy")

_PROBE = """
import json, sys
from evalops.cli.main import main
try:
    main({argv!r})
finally:
    heavy = sorted(m for m in {heavy!r} if m in sys.modules)
    sys.stderr.write("HEAVY=" + json.dumps(heavy) + "\\n")
"""


@pytest.mark.parametrize(
    "argv", [["--help"], ["digest", "--help"], ["sync", "--help"], ["db", "--help"]]
)
def test_help_imports_no_heavy_module(argv: list[str]) -> None:
    probe = _PROBE.format(argv=argv, heavy=HEAVY)
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False
    )
    line = next(x for x in done.stderr.splitlines() if x.startswith("HEAVY="))
    assert json.loads(line.removeprefix("HEAVY=")) == []


def _commands(group: Any, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, Any]]:
    for name, command in sorted(group.commands.items()):
        path = (*prefix, name)
        if hasattr(command, "commands"):
            yield " ".join(path), command
            yield from _commands(command, path)
        else:
            yield " ".join(path), command


def test_every_command_has_help_with_an_example() -> None:
    root = command_tree()
    missing = [
        name
        for name, command in _commands(root)
        if not command.help or "Example:" not in command.help
    ]
    assert missing == []


def test_unknown_command_is_a_usage_error(cli: Cli) -> None:
    result = cli("no-such-command")
    assert result.code == 2


def test_input_error_is_one_line_without_traceback(tmp_path: Any, cli: Cli) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("spec_schema_version: eval-task/v9\n", encoding="utf-8")
    result = cli("digest", str(bad))
    assert result.code == 2
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0] == (
        f"error: {bad}:1: spec_schema_version: unknown spec_schema_version 'eval-task/v9' "
        "(known: eval-task/v1, execution-profile/v1, grader-set/v1, suite/v1, "
        "suite-policy/v1, gate-policy/v1, authority/v1)"
    )


def test_json_error_shape(tmp_path: Any, cli: Cli) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"spec_schema_version": "eval-task/v1",\n "id": "x", "id": "y"}', "utf-8")
    result = cli("digest", "--json", str(bad))
    assert result.code == 2
    assert result.json() == {
        "error": {
            "code": 2,
            "message": "duplicate key 'id'",
            "file": str(bad),
            "line": 2,
            "field": "id",
        }
    }
