"""An `evalops` command on a PATH, each run a fork of one process that imported evalops once.

The CI-recipe tests (tests/contract/test_ci_recipes.py) run shell scripts as a forge runs
them, and each `evalops` line was a new interpreter: 0.6 to 1.2 CPU s, almost all of it
importing SQLAlchemy, the table models and the command's modules before the command began.
What those tests are about is the shell's side of the process boundary: arguments,
environment, working directory, standard streams, exit codes and the files left behind.

Here `evalops` is a small script (`python -IS`: isolated, no site; about 15 ms) that sends its
arguments, environment and working directory, and its three standard streams themselves
(the file descriptors, `socket.send_fds`), to a server started once. The server forks a
waiter, the waiter forks the command: the command process takes those streams as its fds 0,
1 and 2, that directory and that environment, and runs `evalops.cli.main.run`, the console
script's entry point; the waiter sends back how it ended, and the script ends the same way
(the exit code, or the signal that killed the command). Nothing is imported again: the
server imported every module of evalops before it forked.

Every process is waited for by its parent (the command by its waiter, the waiter by the
server, the server by the test process when it stops), so the commands' CPU time reaches
the test run's total (`/usr/bin/time`) when the server stops, though not the per-test
figures of `tests.cpu_profile`. The installed console script itself is tested where the
process start is the point: tests/cli/test_cli_startup.py, `make demo` on a fresh clone and
the wheel (tests/cli/test_first_hour.py, tests/contract/test_demo_and_install.py).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

_HEADER = struct.Struct("!I")
# Run with `-IS`: the standard library only, nothing of the checkout.
_SCRIPT = """\
import json, os, signal, socket, struct, sys
request = json.dumps({{"argv": sys.argv, "cwd": os.getcwd(), "env": dict(os.environ)}}).encode()
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.connect({path!r})
socket.send_fds(server, [struct.pack("!I", len(request))], [0, 1, 2])
server.sendall(request)
reply = b""
while chunk := server.recv(64):
    reply += chunk
status = int(reply)
if status < 0:
    if -status != signal.SIGKILL:  # whose handler cannot be set: it is the default
        signal.signal(-status, signal.SIG_DFL)
    os.kill(os.getpid(), -status)
sys.exit(status)
"""


@dataclass
class CliServer:
    """A running server and the directory holding its `evalops` script."""

    process: subprocess.Popen[bytes]
    bin_dir: Path

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=60)


def start(root: Path) -> CliServer:
    """Start a server (evalops imported) and write its `evalops` script in `root/bin`."""
    # A Unix socket's path has at most 107 bytes: a short directory of its own.
    sock = Path(tempfile.mkdtemp(prefix="evalops-cli-")) / "s"
    process = subprocess.Popen(
        [sys.executable, "-c", f"from tests.cli_server import serve; serve({str(sock)!r})"],
        cwd=Path(__file__).resolve().parent.parent,
        env={k: v for k, v in os.environ.items() if not k.startswith("EVALOPS_")},
        stdin=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while not sock.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"the evalops server did not start (exit {process.poll()})")
        time.sleep(0.02)
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True)
    script = bin_dir / "evalops"
    script.write_text(f"#!{sys.executable} -IS\n" + _SCRIPT.format(path=str(sock)))
    script.chmod(0o755)
    return CliServer(process, bin_dir)


def _preload() -> None:
    """Every module of evalops, so that no command imports anything after the fork."""
    import importlib
    import pkgutil

    import evalops

    for module in pkgutil.walk_packages(evalops.__path__, "evalops."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)


def serve(path: str) -> None:
    """Fork a waiter per connection; each forks the command and reports how it ended."""
    _preload()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path + ".new")
    listener.listen(16)
    os.rename(path + ".new", path)  # the socket appears only once it listens
    waiters: set[int] = set()

    def stop(_signum: int, _frame: object) -> None:
        for pid in waiters:
            os.waitpid(pid, 0)
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    while True:
        connection, _ = listener.accept()
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            listener.close()
            _wait_for_command(connection)
        connection.close()
        waiters.add(pid)
        # Reap the waiters that have ended (their CPU, and their commands', is counted).
        while waiters:
            ended, _ = os.waitpid(-1, os.WNOHANG)
            if ended == 0:
                break
            waiters.discard(ended)


def _wait_for_command(connection: socket.socket) -> None:
    status = 1
    try:
        header, fds, _, _ = socket.recv_fds(connection, _HEADER.size, 3)
        (size,) = _HEADER.unpack(header)
        payload = b""
        while len(payload) < size:
            payload += connection.recv(size - len(payload))
        request = json.loads(payload)
        pid = os.fork()
        if pid == 0:
            connection.close()
            _run_command(request, fds)
        for fd in fds:
            os.close(fd)
        _, wait_status = os.waitpid(pid, 0)
        status = os.waitstatus_to_exitcode(wait_status)
    finally:
        connection.sendall(str(status).encode())
        connection.close()
        os._exit(0)


def _run_command(request: dict[str, object], fds: list[int]) -> None:
    """In the command process: the caller's streams, directory, environment and arguments;
    then the console script's entry point; ends as a Python process ends."""
    import traceback

    code = 1
    try:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(str(request["cwd"]))
        os.environ.clear()
        os.environ.update(request["env"])  # type: ignore[call-overload]
        sys.argv = list(request["argv"])  # type: ignore[call-overload]
        # New stream objects on the new fds: line-buffered on a terminal, as at start-up.
        sys.stdin = open(0, encoding=sys.stdin.encoding, closefd=False)  # noqa: SIM115
        out, err = sys.stdout, sys.stderr
        sys.stdout = open(  # noqa: SIM115
            1, "w", buffering=1 if os.isatty(1) else -1, encoding=out.encoding,
            errors=out.errors, closefd=False,
        )  # fmt: skip
        sys.stderr = open(  # noqa: SIM115
            2, "w", buffering=1, encoding=err.encoding, errors=err.errors, closefd=False
        )
        from evalops.cli.main import run

        run()
        code = 0
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except OSError:
                code = code or 120  # what Python exits with when it cannot flush at exit
        os._exit(code)
