"""An `evalops` command on a PATH, each run a fork of one process that imported evalops once.

The CI-recipe tests (tests/contract/test_ci_recipes.py) run shell scripts as a forge runs
them, and each `evalops` line was a new interpreter: 0.6 to 1.2 CPU s, almost all of it
importing SQLAlchemy, the table models and the command's modules before the command began.
What those tests are about is the shell's side of the process boundary: arguments,
environment, working directory, standard streams, exit codes and the files left behind.

Here `evalops` is a small script (`python -IS`: isolated, no site; about 15 ms) that sends
its arguments, environment, working directory and umask, and its three standard streams
themselves (the file descriptors, `socket.send_fds`), to a server started once. The server
forks a waiter, the waiter forks the command: the command process takes those streams as
its fds 0, 1 and 2, that directory, umask and environment, and runs
`evalops.cli.main.run`, the console script's entry point; the waiter sends back how it
ended, and the script ends the same way (the exit code, or the signal that killed the
command). The server imported every module of evalops, and the libraries its commands
import only when they run, before it forked. A script that is killed (its caller hangs
up) takes its command with it; a server told to stop, or whose starter is gone, kills what
still runs.

Every process is waited for by its parent (the command by its waiter, the waiter by the
server, the server by the test process when it stops), so the commands' CPU time reaches
the test run's total (`/usr/bin/time`) when the server stops, though not the per-test
figures of `tests.cpu_profile`. The installed console script itself is tested where the
process start is the point: tests/cli/test_cli_startup.py, `make demo` on a fresh clone and
the wheel (tests/cli/test_first_hour.py, tests/contract/test_demo_and_install.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
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
mask = os.umask(0o22)
os.umask(mask)
request = json.dumps(
    {{"argv": sys.argv, "cwd": os.getcwd(), "env": dict(os.environ), "umask": mask}}
).encode()
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
    socket_dir: Path

    def stop(self) -> None:
        """End the server: it kills any command still running and waits for every process
        it started (so their CPU is counted); killed itself if that takes too long."""
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.socket_dir, ignore_errors=True)


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
    return CliServer(process, bin_dir, sock.parent)


def _preload() -> None:
    """Every module of evalops, so that no command imports anything after the fork."""
    import importlib
    import pkgutil

    import evalops

    for module in pkgutil.walk_packages(evalops.__path__, "evalops."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)
    # What commands import only when they run: git for sync, the templates' and the
    # terminal's libraries, scipy's special functions for estimates.
    for name in ("git", "jinja2", "rich.console", "rich.table", "scipy.special"):
        importlib.import_module(name)


def serve(path: str) -> None:
    """Fork a waiter per connection; each forks the command and reports how it ended.

    On SIGTERM, or once the process that started it is gone, every command still running
    is killed and every process waited for."""
    _preload()
    # `-c` put the directory the server started in first on the import path; after a
    # command's `chdir` it would be the caller's directory, which a console script never
    # imports from.
    sys.path[:] = [p for p in sys.path if p != ""]
    parent = os.getppid()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path + ".new")
    listener.listen(16)
    os.rename(path + ".new", path)  # the socket appears only once it listens
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    while not stopping and os.getppid() == parent:
        ready, _, _ = select.select([listener], [], [], 1.0)
        if ready:
            connection, _ = listener.accept()
            if os.fork() == 0:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                os.setpgid(0, 0)  # the waiter and its command: one group to kill
                listener.close()
                _wait_for_command(connection)
            connection.close()
        _reap(block=False)
    _reap(block=True)
    os._exit(0)


def _reap(*, block: bool) -> None:
    """Wait for the waiters that have ended (their CPU, and their commands', is counted);
    with `block`, kill those still running first and wait for all."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            if not block:
                return
            _kill_groups_of_children()
            try:
                os.wait()
            except ChildProcessError:
                return


def _kill_groups_of_children() -> None:
    from tests.helpers import children_of

    for pid in children_of(os.getpid()):
        with contextlib.suppress(OSError):  # ended meanwhile
            os.killpg(pid, signal.SIGKILL)


def _wait_for_command(connection: socket.socket) -> None:
    """In a waiter: read the request, fork the command, wait for it, send how it ended. A
    caller that hangs up first (its script was killed) takes its command with it."""
    try:
        status = 1
        try:
            header, fds, _, _ = socket.recv_fds(connection, _HEADER.size, 3)
            if len(header) != _HEADER.size or len(fds) != 3:
                raise ConnectionError("an incomplete request")
            (size,) = _HEADER.unpack(header)
            payload = b""
            while len(payload) < size:
                chunk = connection.recv(size - len(payload))
                if not chunk:
                    raise ConnectionError("the caller hung up mid-request")
                payload += chunk
            request = json.loads(payload)
            pid = os.fork()
            if pid == 0:
                connection.close()
                _run_command(request, fds)
            for fd in fds:
                os.close(fd)
            status = _wait_or_kill(pid, connection)
        finally:
            with contextlib.suppress(OSError):
                connection.sendall(str(status).encode())
            connection.close()
    finally:
        os._exit(0)


def _wait_or_kill(pid: int, connection: socket.socket) -> int:
    """The command's exit code (negative: its signal); killed if the caller hangs up."""
    while True:
        ended, wait_status = os.waitpid(pid, os.WNOHANG)
        if ended:
            return os.waitstatus_to_exitcode(wait_status)
        hung_up, _, _ = select.select([connection], [], [], 0.05)
        if hung_up and not connection.recv(1, socket.MSG_PEEK):
            os.kill(pid, signal.SIGKILL)
            _, wait_status = os.waitpid(pid, 0)
            return os.waitstatus_to_exitcode(wait_status)


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
        os.umask(int(request["umask"]))  # type: ignore[call-overload]
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
