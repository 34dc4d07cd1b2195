"""The table `evalops --help` lists its commands from (evalops/cli/commands.py) is the CLI's
real command tree: every command each CLI module registers, under its module, with its own
one-line help at every terminal width. The root group builds a command only when it is
invoked, so without these tests a new, renamed or reworded command would be listed wrongly.
"""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer

import evalops.cli
from evalops.cli.commands import BY_NAME, COMMANDS
from evalops.cli.helpformat import click_module
from evalops.cli.main import command_tree

REPO = Path(__file__).resolve().parents[2]


def _registered() -> dict[str, tuple[str, bool]]:
    """name -> (module, hidden) of every command that any module of evalops.cli adds to a
    Typer through its `register` (found by walking the package, not through the table)."""
    found: dict[str, tuple[str, bool]] = {}
    for info in pkgutil.iter_modules(evalops.cli.__path__):
        module = importlib.import_module(f"evalops.cli.{info.name}")
        register = getattr(module, "register", None)
        if register is None:
            continue
        app = typer.Typer()
        if "run_cli" in register.__code__.co_varnames:
            register(app, run_cli=lambda argv: 0)
        else:
            register(app)
        for command in app.registered_commands:
            assert command.callback is not None
            name = command.name or typer.main.get_command_name(command.callback.__name__)
            assert name not in found, f"{name} registered twice"
            found[name] = (info.name, bool(command.hidden))
        for group in app.registered_groups:
            assert group.name, f"evalops.cli.{info.name} adds a group without a name"
            assert group.name not in found, f"{group.name} registered twice"
            found[group.name] = (info.name, group.hidden is True)
    return found


def test_the_table_names_every_registered_command_and_its_module() -> None:
    registered = _registered()
    # The walk must see the real CLI, or the comparison below would be vacuous.
    assert {"init", "gate", "trials", "verify", "demo", "compare"} <= set(registered)
    assert {name: module for name, (module, _) in registered.items()} == {
        entry.name: entry.module for entry in COMMANDS
    }
    assert len(BY_NAME) == len(COMMANDS), "a name twice in the table"
    # Every entry is listed by `--help`: a hidden command would need the table to say so.
    assert [name for name, (_, hidden) in registered.items() if hidden] == []


def _built() -> dict[str, Any]:
    root = command_tree()
    return {name: root.commands[name] for name in root.list_commands(None)}


def test_each_summary_is_the_commands_own_short_help_at_every_width() -> None:
    """`--help` shortens the table's summary to the width click would shorten the command's
    whole help to: the same text for every limit a terminal can give."""
    shorten = click_module().utils.make_default_short_help
    built = _built()
    assert list(built) == [entry.name for entry in COMMANDS]
    for entry in COMMANDS:
        command = built[entry.name]
        assert command.get_short_help_str(limit=sys.maxsize) == entry.summary, entry.name
        for limit in range(1, 300):
            assert shorten(entry.summary, limit) == command.get_short_help_str(limit), (
                entry.name,
                limit,
            )


@pytest.mark.parametrize("columns", [52, 64, 80])
def test_help_lists_each_command_with_its_built_short_help(
    columns: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh `evalops --help` (nothing built) lists each command with the line the built
    command shortens its own help to, at the listing's width."""
    monkeypatch.setenv("COLUMNS", str(columns))
    done = subprocess.run(
        [sys.executable, "-m", "evalops", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    built = _built()
    # click's help width for this terminal, less the 6 columns of indentation and spacing
    # that `format_commands` leaves beside the longest name.
    width = max(min(columns, 80) - 2, 50)
    limit = width - 6 - max(len(name) for name in built)
    listing = done.stdout[done.stdout.index("Registry commands:") :].splitlines()
    rows = [line.strip().split(None, 1) for line in listing if line.startswith("  ")]
    assert sorted(name for name, _ in rows) == sorted(built)
    for name, short in rows:
        assert short == built[name].get_short_help_str(limit), (columns, name)


def test_a_mistyped_command_is_offered_the_commands_not_yet_built() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "evalops", "gaet"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 2
    assert "No such command 'gaet'. Did you mean 'gate'" in done.stderr


def test_every_name_the_help_groups_list_is_a_command() -> None:
    """A group naming something that is not a command would hide a typo: a renamed command
    would silently fall to "Other" while the group kept its old name."""
    from evalops.cli.main import COMMAND_GROUPS

    registered = _registered()
    named = [name for _, names in COMMAND_GROUPS for name in names]
    assert [name for name in named if name not in registered] == []
    assert len(named) == len(set(named)), "a command in two groups"
    visible = {name for name, (_, hidden) in registered.items() if not hidden}
    assert sorted(visible - set(named)) == [], "a command left to the ungrouped Other list"


def _leaves(command: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    subcommands = getattr(command, "commands", None)
    if not subcommands:
        return [(path, command)]
    return [leaf for name, sub in subcommands.items() for leaf in _leaves(sub, (*path, name))]


def test_every_argument_has_a_name_a_user_reads() -> None:
    """Usage lines name arguments in capitals (`FILE`, `TRIAL`), as every option's metavar
    is: a bare parameter name (`{files}`) is the code's, and `TRIAL...` as a metavar
    doubles the ellipsis the usage line adds (`[TRIAL...]...`)."""
    import click

    root = command_tree()
    problems = []
    for path, command in _leaves(root):
        with click.Context(command, info_name=" ".join(("evalops", *path))) as ctx:
            usage = command.get_usage(ctx)
        for param in command.params:
            if getattr(param, "param_type_name", "") != "argument":
                continue
            metavar = getattr(param, "metavar", None)
            if not metavar or metavar != metavar.upper() or "." in metavar:
                problems.append(f"{' '.join(path)}: argument {param.name}: metavar {metavar!r}")
        if "...]..." in usage or "...}..." in usage:
            problems.append(f"{' '.join(path)}: {usage}")
    assert len(_leaves(root)) > 40, "the walk must see the real command tree"
    assert problems == []
