"""tests/cli_server.py's `evalops` ends as the installed console script ends: the same
exit code, standard output and standard error, for the same arguments, input, directory
and environment; and a command killed by a signal ends the script by that signal."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests import cli_server
from tests.conftest import PINNED_NOW
from tests.helpers import children_of

INSTALLED = Path(sys.executable).parent / "evalops"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[cli_server.CliServer]:
    served = cli_server.start(tmp_path_factory.mktemp("cli-server"))
    yield served
    served.stop()


def _env(**extra: str) -> dict[str, str]:
    """No database URL: the command finds the registry's from its working directory."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALOPS_")}
    env["EVALOPS_NOW"] = PINNED_NOW
    return {**env, **extra}


def _run(program: Path, args: list[str], demo: Path, stdin: str) -> tuple[int, str, str]:
    done = subprocess.run(
        [str(program), *args], cwd=demo / "registry", env=_env(EVALOPS_ACTOR="a@b.example"),
        input=stdin, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize(
    ("args", "stdin"),
    [
        (["--help"], ""),
        (["gate", "list", "--json"], ""),
        (["gate", "show", "GATE-1"], ""),
        (["gate", "list", "--no-such-option"], ""),  # a usage error: exit 2
        (["gate", "show", "GATE-99"], ""),  # an unknown id: exit 2
        (["trials", "ingest", "-", "--json"], '{"not": "a trial"}\n'),  # read from stdin
        (["verify"], ""),
    ],
)
def test_the_served_evalops_ends_as_the_installed_one(
    server: cli_server.CliServer,
    demo_master: Path,
    tmp_path: Path,
    args: list[str],
    stdin: str,
) -> None:
    """Each on a fresh copy of the demo (a refused ingest is recorded), run in its
    `registry/` subdirectory: the database is found from the working directory."""
    outcomes = []
    demo = tmp_path / "demo"  # the same path for both: outputs may name it
    for program in (server.bin_dir / "evalops", INSTALLED):
        shutil.rmtree(demo, ignore_errors=True)
        shutil.copytree(demo_master, demo, symlinks=True)
        outcomes.append(_run(program, args, demo, stdin))
    served, installed = outcomes
    assert served == installed


@contextmanager
def _waiting_ingest(
    server: cli_server.CliServer, demo: Path
) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """The served `trials ingest -`, waiting for its input: (its script, the command's pid,
    the server's grandchild). The script is killed and its input closed afterwards."""
    script = subprocess.Popen(
        [str(server.bin_dir / "evalops"), "trials", "ingest", "-"],
        cwd=demo, env=_env(EVALOPS_ACTOR="a@b.example"), stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        commands: list[int] = []
        while not commands and time.monotonic() < deadline:
            commands = [c for w in children_of(server.process.pid) for c in children_of(w)]
            time.sleep(0.05)
        assert len(commands) == 1, "the command process was not found"
        yield script, commands[0]
    finally:
        script.kill()
        assert script.stdin is not None
        script.stdin.close()


def test_a_command_killed_by_a_signal_ends_the_script_by_it(
    server: cli_server.CliServer, demo_master: Path, tmp_path: Path
) -> None:
    """The command process is killed: the script the shell started ends by that signal."""
    demo = Path(shutil.copytree(demo_master, tmp_path / "demo", symlinks=True))
    with _waiting_ingest(server, demo) as (script, command):
        os.kill(command, signal.SIGKILL)
        assert script.wait(timeout=60) == -signal.SIGKILL


def test_a_file_the_command_writes_has_the_callers_umask(
    server: cli_server.CliServer, demo_master: Path, tmp_path: Path
) -> None:
    modes = []
    demo = tmp_path / "demo"
    for program in (server.bin_dir / "evalops", INSTALLED):
        shutil.rmtree(demo, ignore_errors=True)
        shutil.copytree(demo_master, demo, symlinks=True)
        done = subprocess.run(
            [str(program), "report", "audit", "--gate", "GATE-1", "-o", "out.md"],
            cwd=demo, env=_env(), umask=0o077, capture_output=True, check=False, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        modes.append((demo / "out.md").stat().st_mode & 0o777)
    assert modes == [0o600, 0o600]


def test_a_killed_script_takes_its_command_with_it(
    server: cli_server.CliServer, demo_master: Path, tmp_path: Path
) -> None:
    """The shell's `timeout` or a Ctrl-C ends the script: its command must not run on."""
    demo = Path(shutil.copytree(demo_master, tmp_path / "demo", symlinks=True))
    with _waiting_ingest(server, demo) as (script, command):
        script.kill()
        script.wait(timeout=60)
        deadline = time.monotonic() + 30
        while Path(f"/proc/{command}").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not Path(f"/proc/{command}").exists(), "the command outlived its script"
