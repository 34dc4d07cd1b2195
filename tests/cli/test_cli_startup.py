"""The CLI starts without its heavy dependencies; its options parse as before.

Start-up time itself is measured by benchmarks/cli_start.py, never here: these tests check
which modules a start loads, in a fresh interpreter, and that the plain option parsing that
avoids pydantic gives the same values and the same errors as typer's.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import pytest

from evalops.cli import fastparams
from evalops.cli import main as main_module
from tests.conftest import Cli

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("sqlalchemy", "sqlmodel", "alembic", "scipy", "numpy", "pydantic", "jinja2", "git")


def _loaded_after(code: str) -> dict[str, bool]:
    """Run `code` in a fresh interpreter; which of HEAVY did it import?"""
    script = (
        "import sys, io, contextlib\n"
        f"{code}\n"
        f"print('\\n' + __import__('json').dumps({{m: m in sys.modules for m in {HEAVY!r}}}))\n"
    )
    loaded: dict[str, bool] = _printed_last(script)
    return loaded


def _printed_last(script: str, env: dict[str, str] | None = None) -> Any:
    """Run `script` in a fresh interpreter in the checkout (with `env`, else this one's);
    the JSON of its last line."""
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_importing_the_cli_loads_no_database_statistics_or_model_code() -> None:
    loaded = _loaded_after("import evalops.cli.main")
    assert not any(loaded.values()), [m for m, yes in loaded.items() if yes]


@pytest.mark.parametrize("argv", [["--help"], ["gate", "check", "--help"], ["trials", "--help"]])
def test_help_loads_no_database_statistics_or_model_code(argv: list[str]) -> None:
    loaded = _loaded_after(
        "from evalops.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main({argv!r}) == 0"
    )
    assert not any(loaded.values()), [m for m, yes in loaded.items() if yes]


def _cli_modules_after(argv: list[str]) -> set[str]:
    """The modules of the table's commands (evalops/cli/commands.py) that `evalops ARGV`
    imports, in a fresh interpreter."""
    from evalops.cli.commands import COMMANDS

    modules = sorted({f"evalops.cli.{entry.module}" for entry in COMMANDS})
    script = (
        "import contextlib, io, json, sys\n"
        "from evalops.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main({argv!r}) == 0\n"
        f"print('\\n' + json.dumps([m for m in {modules!r} if m in sys.modules]))\n"
    )
    return set(_printed_last(script))


@pytest.mark.parametrize(
    ("argv", "modules"),
    [
        (["--help"], set()),
        (["--version"], set()),
        (["gate", "check", "--help"], {"evalops.cli.gate"}),
        (["trials", "ingest", "--help"], {"evalops.cli.trials"}),
    ],
)
def test_a_command_imports_only_its_own_module(argv: list[str], modules: set[str]) -> None:
    """The root lists its commands from a table: `--help` imports none of them, and a
    command imports its own module and no other command's."""
    assert _cli_modules_after(argv) == modules


def test_validate_loads_no_database_code() -> None:
    loaded = _loaded_after(
        "from evalops.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert main(['validate', 'registry']) == 0"
    )
    assert not loaded["sqlalchemy"] and not loaded["sqlmodel"] and not loaded["alembic"]


SPEC_MODULES = ("pydantic", "pydantic_core", "evalops.domain.specs", "evalops.domain.vocabulary")


@pytest.mark.parametrize(
    ("argv", "modules"),
    [
        (["validate", "registry"], SPEC_MODULES),
        # A list of paths: typer would build a pydantic adapter for it.
        (["digest", "registry"], SPEC_MODULES),
    ],
)
def test_valid_spec_files_are_read_without_pydantic(
    argv: list[str], modules: tuple[str, ...]
) -> None:
    """Valid files are accepted by the plain checker (evalops/domain/spec_check.py):
    neither pydantic nor the spec models are imported (a model is built only when asked
    for, pydantic only names the problems of a file the checker does not accept)."""
    loaded = _printed_last(
        "import contextlib, io, json, sys\n"
        "from evalops.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    code = main({argv!r})\n"
        f"found = {{m: m in sys.modules for m in {modules!r}}}\n"
        "print('\\n' + json.dumps({'code': code, **found}))\n"
    )
    assert loaded == {"code": 0, **dict.fromkeys(modules, False)}


def test_an_invalid_spec_file_is_named_by_pydantic(tmp_path: Path) -> None:
    """The other side: a file the plain checker refuses is validated by pydantic, whose
    errors `validate` prints (here a revision of 0, at its line and field)."""
    registry = tmp_path / "registry"
    shutil.copytree(REPO / "registry", registry)
    task = registry / "tasks" / "support-reply-tone.yaml"
    text = task.read_text(encoding="utf-8")
    assert text.count("\nrevision: 1\n") == 1
    task.write_text(text.replace("\nrevision: 1\n", "\nrevision: 0\n"), encoding="utf-8")
    line = text[: text.index("\nrevision: 1\n")].count("\n") + 2
    loaded = _printed_last(
        "import contextlib, io, json, os, sys\n"
        f"os.chdir({str(tmp_path)!r})\n"
        "from evalops.cli.main import main\n"
        "err = io.StringIO()\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):\n"
        "    code = main(['validate', 'registry'])\n"
        "print('\\n' + json.dumps({'code': code, 'err': err.getvalue(), "
        "'pydantic': 'pydantic' in sys.modules}))\n"
    )
    assert loaded["code"] == 2 and loaded["pydantic"], loaded
    assert f"registry/tasks/support-reply-tone.yaml:{line}: revision: " in loaded["err"], loaded


@pytest.mark.parametrize(("argv", "alembic"), [(["init"], False), (["db", "upgrade"], True)])
def test_only_the_migrations_load_alembic(tmp_path: Path, argv: list[str], alembic: bool) -> None:
    """`init` creates an empty database without Alembic (docs/verify.md, "The database");
    `db upgrade` migrates it."""
    url = f"sqlite:///{tmp_path / 'registry.db'}"
    (tmp_path / "registry.db").touch()
    loaded = _loaded_after(
        "import os\n"
        "from evalops.cli.main import main\n"
        f"os.chdir({str(tmp_path)!r})\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main(['--db', {url!r}, *{argv!r}]) == 0"
    )
    assert loaded["sqlalchemy"] and loaded["alembic"] is alembic


class _Info:
    min: float | None = 0
    max: float | None = None


@pytest.mark.parametrize(
    ("annotation", "value", "expected"),
    [
        (str, "sqlite:///x.db", (True, "sqlite:///x.db")),
        (str | None, "me@example.com", (True, "me@example.com")),
        (str, b"bytes", (False, None)),
        (float, "5", (True, 5.0)),
        (float, "0.25", (True, 0.25)),
        (float, 600.0, (True, 600.0)),
        (float, "-1", (False, None)),  # out of range: typer says so
        (float, "1e3", (False, None)),  # unusual spelling: typer decides
        (float, "nan", (False, None)),
        (float, True, (False, None)),
        (int, "50", (True, 50)),
        (int, "5.0", (False, None)),
        (bool, False, (True, False)),
        (bool, "yes", (False, None)),
        (Path, "", (False, None)),
    ],
)
def test_plain_values_are_taken_and_everything_else_is_left_to_typer(
    annotation: object, value: object, expected: tuple[bool, object]
) -> None:
    assert fastparams._plain(annotation, _Info(), value) == expected


def _outcome(runtime: Any, param: Any, ctx: Any, value: object) -> tuple[str, object]:
    try:
        return ("value", runtime.coerce(value, param=param, ctx=ctx))
    except Exception as refused:  # typer's errors, compared by kind and words
        return ("error", f"{type(refused).__name__}: {refused}")


def _repeatable_and_word_options() -> list[tuple[Any, Any]]:
    from evalops.cli.main import command_tree

    found: list[tuple[Any, Any]] = []

    def walk(command: Any) -> None:
        for param in getattr(command, "params", []):
            annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
            if get_origin(annotation) in (list, Literal):
                found.append((command, param))
        for sub in getattr(command, "commands", {}).values():
            walk(sub)

    walk(command_tree())
    return found


def test_repeatable_and_word_options_parse_as_typer_parses_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every list and Literal option of the CLI: the plain path gives what typer's own
    coercion gives, value for value and error for error (typer is the reference), and
    answers the ordinary values itself."""
    from typer._click import Context
    from typer._coercion import build_runtime_param

    readable = tmp_path / "anchors.txt"
    readable.write_text("1:ab\n", encoding="utf-8")
    unreadable = tmp_path / "unreadable.txt"
    unreadable.write_text("1:ab\n", encoding="utf-8")
    access = os.access
    # Tests may run as root, whom no mode bit stops: the file is unreadable to both sides.
    monkeypatch.setattr(
        os, "access", lambda path, mode: False if Path(path) == unreadable else access(path, mode)
    )
    ordinary_lists: list[object] = [
        (),
        ("1:ab",),
        ("a", "b"),
        (str(readable), str(tmp_path / "missing")),
        (str(tmp_path),),
        ("-",),
        ("x" * 5000,),
        ["a", "b"],
    ]
    other_lists: list[object] = [("",), (str(readable), ""), (str(unreadable),), "a", None]
    options = _repeatable_and_word_options()
    kinds = {get_origin(param.type_descriptor.annotation) for _, param in options}
    assert kinds == {list, Literal}, kinds
    plain_first = fastparams._plain_first()
    assert plain_first is not None
    for command, param in options:
        annotation = param.type_descriptor.annotation
        runtime = param.get_runtime_param()
        assert isinstance(runtime, plain_first), param.name
        reference = build_runtime_param(param.type_descriptor)
        ctx = Context(command)
        if get_origin(annotation) is list:
            ordinary, other = ordinary_lists, other_lists
        else:
            words = list(get_args(annotation))
            ordinary, other = words, [w.upper() for w in words] + ["nope", "", ("pass",)]
        for value in [*ordinary, *other]:
            ours = _outcome(runtime, param, ctx, value)
            theirs = _outcome(reference, param, ctx, value)
            assert ours == theirs, (param.name, value)
        info = param.type_descriptor.parameter_info
        taken = [v for v in ordinary if fastparams._plain(annotation, info, v)[0]]
        assert taken == ordinary, (param.name, annotation)
        # (Paths a user may not read go to typer, which names the problem.)
        if get_args(annotation) == (Path,):
            assert not fastparams._plain(annotation, info, (str(unreadable),))[0]


def test_a_repeatable_option_takes_each_value_or_leaves_all_to_typer(tmp_path: Path) -> None:
    assert fastparams._plain(list[str], _Info(), ("a", "b")) == (True, ["a", "b"])
    assert fastparams._plain(list[str], _Info(), ()) == (True, [])
    assert fastparams._plain(list[str], _Info(), ("a", 1)) == (False, None)
    assert fastparams._plain(list[str], _Info(), "ab") == (False, None)
    assert fastparams._plain(list[Path], _Info(), (str(tmp_path),)) == (True, [tmp_path])
    assert fastparams._plain(list[Path], _Info(), (str(tmp_path), "")) == (False, None)
    assert fastparams._plain(Literal["gate", "suite"], _Info(), "suite") == (True, "suite")
    assert fastparams._plain(Literal["gate", "suite"], _Info(), "Suite") == (False, None)


def _threads_numpy_starts(env: dict[str, str], through_entry_point: bool) -> int:
    """How many threads a fresh interpreter gains when numpy loads (OpenBLAS's pool less
    the calling thread), loaded from a command run by the `evalops` entry point or not."""
    script = (
        "import os\n"
        "from evalops.cli import main as cli\n"
        "def command():\n"
        "    before = len(os.listdir('/proc/self/task'))\n"
        "    import numpy\n"
        "    print(len(os.listdir('/proc/self/task')) - before)\n"
        "    return 0\n"
        "cli.main = command\n"
        + ("cli.run()\n" if through_entry_point else "raise SystemExit(command())\n")
    )
    threads: int = _printed_last(script, env)
    return threads


@pytest.mark.parametrize(
    "setting",
    [None, ("OPENBLAS_NUM_THREADS", "2"), ("OMP_NUM_THREADS", "2"), ("GOTO_NUM_THREADS", "2")],
)
def test_the_entry_point_starts_no_blas_threads_unless_the_user_says_otherwise(
    setting: tuple[str, str] | None,
) -> None:
    """numpy's OpenBLAS starts a thread per CPU as it loads; evalops's statistics are
    scalars, so the `evalops` process asks for one unless the user set any of the counts
    OpenBLAS reads. The reference is the same interpreter without the entry point."""
    env = {k: v for k, v in os.environ.items() if k not in main_module.BLAS_THREAD_SETTINGS}
    if setting is not None:
        env[setting[0]] = setting[1]
    ours = _threads_numpy_starts(env, through_entry_point=True)
    theirs = _threads_numpy_starts(env, through_entry_point=False)
    if setting is None:
        assert ours == 0, ours
        # On one CPU OpenBLAS starts no pool anyway, and the two cannot differ.
        assert theirs >= 1 if (os.cpu_count() or 1) > 1 else theirs == 0, theirs
    else:
        assert ours == theirs == min(int(setting[1]), os.cpu_count() or 1) - 1, (ours, theirs)


def test_a_path_is_taken_when_missing_or_readable(tmp_path: Path) -> None:
    assert fastparams._plain(Path, _Info(), str(tmp_path)) == (True, tmp_path)
    missing = tmp_path / "nope"
    assert fastparams._plain(Path, _Info(), str(missing)) == (True, missing)
    assert fastparams._plain(Path, _Info(), tmp_path) == (True, tmp_path)


def test_global_options_parse_to_the_same_values(cli: Cli, workspace: Path) -> None:
    registry = workspace / "registry"
    done = cli(
        "--lock-timeout", "2.5", "--registry", str(registry), "--json", "validate", cwd=workspace
    )
    assert done.code == 0, done.stderr
    assert json.loads(done.stdout)["ok"] is True


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("-1", "greater than or equal to 0"),
        ("soon", "valid number"),
    ],
)
def test_bad_global_option_values_get_typers_errors(cli: Cli, value: str, message: str) -> None:
    done = cli("--lock-timeout", value, "validate")
    assert done.code == 2
    assert "Invalid value for '--lock-timeout'" in done.stderr
    assert message in done.stderr


def test_verify_replays_the_demo_without_pydantic_or_the_spec_models(demo: Path) -> None:
    """`verify` replays every stored decision and estimate on the `sqlite3` reader: the gate
    policy's rules are read by the plain table (evalops/domain/policy_rules.py), so
    neither pydantic nor the spec models load."""
    loaded = _printed_last(
        "import contextlib, io, json, os, sys\n"
        f"os.chdir({str(demo)!r})\n"
        "from evalops.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    code = main(['verify'])\n"
        f"print('\\n' + json.dumps({{'code': code, **{{m: m in sys.modules for m in "
        f"{SPEC_MODULES!r}}}}}))\n"
    )
    assert loaded == {"code": 0, **dict.fromkeys(SPEC_MODULES, False)}


def test_a_stored_gate_check_without_signed_acts_loads_no_cryptography(demo: Path) -> None:
    """cryptography is loaded where a signature is read or checked, never by a plain gate
    check of a registry that holds no authority; YAML only for a `--policy FILE`."""
    loaded = _printed_last(
        "import contextlib, io, json, os, sys\n"
        f"os.chdir({str(demo)!r})\n"
        "os.environ['EVALOPS_ACTOR'] = 'tester@example.com'\n"
        "from evalops.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    code = main(['gate', 'check', '--build', 'build-124', '--suite', 'regression/core'])\n"
        "print('\\n' + json.dumps({'code': code, 'stored': 'evalops.store.tables' in sys.modules,"
        " 'cryptography': 'cryptography' in sys.modules, 'yaml': 'yaml' in sys.modules}))\n"
    )
    assert loaded["code"] == 4 and loaded["stored"], loaded
    assert not loaded["cryptography"] and not loaded["yaml"], loaded
