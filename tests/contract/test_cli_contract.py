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


#: Commands that change nothing registered (a few write a file: an export, a report): their
#: help examples are run as printed on a copy of the demo's registry.
READ_ONLY = {
    ("calibration", "list"), ("calibration", "show"), ("calibration", "status"),
    ("db", "current"), ("db", "check"), ("estimate", "list"), ("estimate", "show"),
    ("estimate", "replay"), ("estimate", "plan"), ("export", "junit"), ("export", "otel"),
    ("export", "summary"), ("gate", "list"), ("gate", "replay"), ("gate", "show"),
    ("incident", "list"), ("incident", "show"), ("report",), ("review", "list"),
    ("suite", "coverage"), ("suite", "list"), ("suite", "show"), ("task", "list"),
    ("task", "show"), ("trials", "list"), ("trials", "show"), ("trials", "template"),
    ("void", "list"), ("waiver", "list"), ("verify",), ("validate",), ("digest",),
}  # fmt: skip


def _examples() -> Iterator[tuple[str, list[str]]]:
    """Each `evalops ...` example line of every command's help, as argv."""
    import itertools
    import re
    import shlex

    line = re.compile(r"^\s*(?:Examples?:\s*)?evalops\s+(?P<args>.+?)\s*$")
    for name, command in _commands(command_tree()):
        lines = (command.help or "").splitlines()
        for number, text in enumerate(lines):
            found = line.match(text)
            if found:
                # The example goes on to the end of its paragraph (help joins the lines).
                rest = itertools.takewhile(
                    lambda after: after.strip() and not line.match(after), lines[number + 1 :]
                )
                yield name, shlex.split(" ".join([found["args"], *rest]))


def _globbed(argv: list[str], where: Any) -> list[str]:
    """`argv` as a shell expands it in `where`: a pattern that matches nothing is kept."""
    import glob

    out: list[str] = []
    for arg in argv:
        matched = sorted(glob.glob(arg, root_dir=where)) if "*" in arg else []
        out.extend(matched or [arg])
    return out


def _read_only(argv: list[str]) -> bool:
    return any(tuple(argv[: len(key)]) == key for key in READ_ONLY)


def test_every_read_only_help_example_runs_on_the_demo_registry(demo: Any, cli: Cli) -> None:
    """A newcomer's registry is the demo's (README): an example that names an id the demo
    lacks (an incident, a trial) fails as pasted. Every example of a read-only command is
    run as its help prints it, in the demo's directory, and must succeed."""
    examples = [(name, argv) for name, argv in _examples() if _read_only(argv)]
    ran = {tuple(argv[:2]) for _, argv in examples}
    assert {("incident", "show"), ("trials", "show"), ("gate", "list")} <= ran, ran
    failed = []
    for name, argv in examples:
        done = cli(*_globbed(argv, demo), cwd=demo)
        if done.code != 0:
            failed.append((name, argv, done.code, done.stderr.strip()[-300:]))
    assert failed == [], "\n".join(map(str, failed))
