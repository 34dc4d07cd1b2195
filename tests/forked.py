"""`evalops ARGS` in a real child process forked from the test process.

A `python -m evalops` child spends about 1.5 CPU seconds starting an interpreter and
importing evalops before its command does anything; tests that kill, race or starve
processes start dozens of them. A child forked from the test process, which has imported
evalops already, starts its command at once: it is still a process of its own, with its
own database connections, killed by a real SIGKILL, racing others for the real lock; only
the interpreter start-up, which none of these tests is about, is gone. Its CPU time is
counted among the test process's children once waited for, as a `python -m evalops`
child's is (`tests.cpu_profile`).

The child inherits the parent's memory, not its database connections: `start` collects
garbage first (pooled connections of engines the test dropped are closed), refuses to fork
while the parent holds a file of the SQLite database open (a SQLite connection must not
cross a fork: the child would believe it holds the parent's locks), and the child leaves
with `os._exit`, so no finalizer of the parent's objects runs in it.
"""

from __future__ import annotations

import gc
import io
import logging
import os
import signal
import sqlite3
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.helpers import CliResult

_TICKS = os.sysconf("SC_CLK_TCK")


def child_env(url: str, actor: str) -> dict[str, str]:
    """The environment of an `evalops` child: the test's without any EVALOPS_ setting (the
    demo fixture's pinned clock included), the database URL and the actor."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALOPS_")}
    env["EVALOPS_DATABASE_URL"] = url
    env["EVALOPS_ACTOR"] = actor
    return env


@dataclass
class Forked:
    """A running (or ended) `evalops` child."""

    pid: int
    stdout: Path
    stderr: Path
    returncode: int | None = None
    cpu_total: float = 0.0  # its user + system CPU seconds, once reaped
    peak_kib: int = 0  # its peak resident memory (Linux's ru_maxrss), once reaped

    def poll(self) -> int | None:
        """The exit code (negative: the signal that ended it) once it ended, else None."""
        if self.returncode is None:
            pid, status, usage = os.wait4(self.pid, os.WNOHANG)
            if pid == self.pid:
                self.returncode = os.waitstatus_to_exitcode(status)
                self.cpu_total = usage.ru_utime + usage.ru_stime
                self.peak_kib = usage.ru_maxrss
        return self.returncode

    def progress(self) -> tuple[bool, float]:
        """(still running, user + system CPU seconds spent so far), from /proc: a child
        that has ended but is not reaped yet (a zombie) is not running."""
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
        except OSError:
            stat = ""
        fields = stat.rpartition(")")[2].split()
        if self.returncode is not None or len(fields) < 13:
            return False, self.cpu_total
        cpu = (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime
        return fields[0] != "Z", cpu

    def kill(self) -> None:
        if self.returncode is None:
            os.kill(self.pid, signal.SIGKILL)

    def wait(self, timeout: float = 600) -> CliResult:
        """Wait for the end (SIGKILL after `timeout` seconds: a hang guard); its output."""
        deadline = time.monotonic() + timeout
        while self.poll() is None:
            if time.monotonic() > deadline:
                self.kill()
                os.waitpid(self.pid, 0)
                raise AssertionError(f"evalops child {self.pid} still running after {timeout}s")
            time.sleep(0.01)
        assert self.returncode is not None
        out = self.stdout.read_text(encoding="utf-8")
        err = self.stderr.read_text(encoding="utf-8")
        self.stdout.unlink(missing_ok=True)
        self.stderr.unlink(missing_ok=True)
        return CliResult(self.returncode, out, err)


def _open_files_of(database: Path) -> list[str]:
    names = {str(database), f"{database}-wal", f"{database}-shm", f"{database}-journal"}
    found = []
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target in names:
            found.append(target)
    return found


def start(
    args: list[str],
    cwd: Path,
    env: dict[str, str],
    sqlite_db: Path | None,
    before: Callable[[], None] | None = None,
) -> Forked:
    """Fork a child that runs `evalops ARGS` in `cwd` under `env` (`child_env`); its
    stdout and stderr go to files read by `wait`. `sqlite_db`: the SQLite database it
    uses, which the parent must not hold open. `before` runs in the child first (a
    resource limit of its own, say)."""
    if sqlite_db is not None:
        held = _open_files_of(sqlite_db.resolve())
        if held:
            # A connection no longer referenced but caught in a reference cycle is closed
            # by a collection. Only then: a full collection of a test process's heap
            # costs about 0.3 CPU-s, and most forks find nothing held.
            gc.collect()
            held = _open_files_of(sqlite_db.resolve())
        assert not held, f"the test process holds {held} open: a fork would share it"
    fd, out_name = tempfile.mkstemp(prefix="evalops-out-")
    os.close(fd)
    fd, err_name = tempfile.mkstemp(prefix="evalops-err-")
    os.close(fd)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 70
        try:
            _run_child(args, cwd, env, (out_name, err_name), before)
            code = 0
        except SystemExit as done:
            code = 0 if done.code is None else done.code if isinstance(done.code, int) else 70
        except BaseException:
            traceback.print_exc()
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
    return Forked(pid, Path(out_name), Path(err_name))


def _run_child(
    args: list[str],
    cwd: Path,
    env: dict[str, str],
    outputs: tuple[str, str],
    before: Callable[[], None] | None,
) -> None:
    # As a fresh interpreter would be: stdin empty, stdout and stderr its own files, Python's
    # default warning filters (pytest's turn every warning into an error), its environment.
    out, err = outputs
    for fd, name, flags in ((0, os.devnull, os.O_RDONLY), (1, out, os.O_WRONLY),
                            (2, err, os.O_WRONLY)):  # fmt: skip
        opened = os.open(name, flags)
        os.dup2(opened, fd)
        os.close(opened)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8")
    sys.stderr = io.TextIOWrapper(
        io.FileIO(2, "w", closefd=False), encoding="utf-8", line_buffering=True
    )
    warnings.resetwarnings()
    logging.root.handlers.clear()  # pytest's capturing handlers: Python's last resort instead
    logging.root.setLevel(logging.WARNING)
    for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
        warnings.simplefilter("ignore", category)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    if before is not None:
        before()
    from evalops.cli.main import main

    raise SystemExit(main(args))


def released_by(go: Path) -> Callable[[], None]:
    """A child's first step (`start`'s `before`): wait until `go` exists, at most a minute
    (a hang guard). Children forked first and released together start their commands within
    milliseconds of each other, and none shares a connection the parent opened after."""

    def wait() -> None:
        deadline = time.monotonic() + 60
        while not go.exists() and time.monotonic() < deadline:
            time.sleep(0.002)

    return wait


@contextmanager
def writer_lock_probe(url: str) -> Iterator[Callable[[], bool]]:
    """A probe: is the registry's writer lock held by some process right now? SQLite: a
    `BEGIN IMMEDIATE` that cannot wait fails (a fresh connection each time: none stays open
    across a fork); PostgreSQL: the advisory lock granted in this database (other tests'
    databases on the same server have their own)."""
    if url.startswith("sqlite:///"):
        path = url.removeprefix("sqlite:///")

        def sqlite_held() -> bool:
            con = sqlite3.connect(path, timeout=0, isolation_level=None)
            try:
                con.execute("BEGIN IMMEDIATE")
                con.execute("ROLLBACK")
                return False
            except sqlite3.OperationalError as exc:
                assert "locked" in str(exc), exc
                return True
            finally:
                con.close()

        yield sqlite_held
        return
    import psycopg

    with psycopg.connect(url.replace("+psycopg", ""), autocommit=True) as conn:

        def pg_held() -> bool:
            row = conn.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
                " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            ).fetchone()
            return bool(row and row[0])

        yield pg_held


def cpu_when_locked(child: Forked, held: Callable[[], bool], timeout: float = 600) -> float | None:
    """The child's CPU seconds when the writer lock is first seen held (its write has
    begun); None when it ended first."""
    deadline = time.monotonic() + timeout
    while True:
        running, cpu = child.progress()
        if not running:
            return None
        if held():
            return cpu
        assert time.monotonic() < deadline, "the writer lock was never taken"
        time.sleep(0.005)


def kill_after_cpu(child: Forked, cpu: float) -> tuple[bool, CliResult]:
    """SIGKILL the child once it has spent `cpu` CPU seconds: (True when the kill landed,
    the child still running; False when it ended first, its output)."""
    while True:
        running, spent = child.progress()
        if not running:
            break
        if spent >= cpu:
            child.kill()
            break
        time.sleep(0.002)
    result = child.wait()
    return result.code == -signal.SIGKILL, result
