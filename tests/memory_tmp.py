"""The test run's temporary files in memory (a pytest plugin, in `addopts`).

A whole run writes about 3.5 GB in 80,000 files (registries copied per test, git
repositories, two virtualenvs) and pytest deletes an earlier run's files when the next
starts. On a disk (ext4 mounted with `discard` on this project's machines) writing and
deleting them was about a tenth of the run's CPU (system time mostly); on a tmpfs it is
memory copies. So when `/dev/shm` is a tmpfs with room to spare, the controller points
`TMPDIR` there for itself and every process it starts (xdist workers, pip, git, the
commands the tests run): pytest's `tmp_path`, `tempfile` and the children's temporary
files all land in `/dev/shm/evalops-tests-PID/`. A run that passes removes its directory
at the end (the memory is given back); a failing run leaves it for a look, and the next
run removes it. A `TMPDIR` or `--basetemp` of your own is left alone.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

SHM = Path("/dev/shm")
PREFIX = "evalops-tests-"
# Room to leave: a run needs about 3.5 GB at its peak, and the space is the machine's RAM.
NEEDED_FREE = 8 * 1024**3

_placed: list[Path] = []
_passed = pytest.StashKey[bool]()


def _is_tmpfs(path: Path) -> bool:
    try:
        mounts = Path("/proc/mounts").read_text(encoding="utf-8").splitlines()
    except OSError:
        return False
    return any(
        len(fields) >= 3 and fields[1] == str(path) and fields[2] == "tmpfs"
        for fields in (line.split() for line in mounts)
    )


def memory_tmp_root(root: Path = SHM, needed: int = NEEDED_FREE) -> Path | None:
    """`root` when it is a writable tmpfs with `needed` bytes free, else None."""
    if not root.is_dir() or not os.access(root, os.W_OK) or not _is_tmpfs(root):
        return None
    stat = os.statvfs(root)
    return root if stat.f_bavail * stat.f_frsize >= needed else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # a PermissionError means it runs as another user: alive
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def remove_left_behind(root: Path) -> None:
    """Directories of earlier runs whose process is gone (a failed or killed run)."""
    for entry in root.glob(PREFIX + "*"):
        pid = entry.name.removeprefix(PREFIX)
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            shutil.rmtree(entry, ignore_errors=True)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    # xdist workers inherit TMPDIR from the controller and get their basetemp from it.
    if hasattr(config, "workerinput") or os.environ.get("TMPDIR") or config.option.basetemp:
        return
    root = memory_tmp_root()
    if root is not None:
        _placed.append(place_in(root))


def place_in(root: Path) -> Path:
    """This process's directory under `root`, made `TMPDIR` for it and what it starts,
    after removing what runs that ended left there."""
    remove_left_behind(root)
    mine = root / f"{PREFIX}{os.getpid()}"
    mine.mkdir(exist_ok=True)
    os.environ["TMPDIR"] = str(mine)
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again
    return mine


def pytest_unconfigure(config: pytest.Config) -> None:
    if not _placed:
        return
    mine = _placed.pop()
    os.environ.pop("TMPDIR", None)
    tempfile.tempdir = None
    if config.stash.get(_passed, False):
        shutil.rmtree(mine, ignore_errors=True)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    session.config.stash[_passed] = exitstatus == 0
