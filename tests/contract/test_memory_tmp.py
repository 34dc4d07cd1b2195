"""The run's temporary files go to memory when /dev/shm can hold them (tests/memory_tmp.py)."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.memory_tmp import PREFIX, SHM, memory_tmp_root, place_in, remove_left_behind


def _filesystem_type(path: Path) -> str:
    """What coreutils' `stat` says the file system is: a reference apart from /proc/mounts."""
    done = subprocess.run(
        ["stat", "--file-system", "--format", "%T", str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def test_a_directory_on_disk_is_not_taken(tmp_path: Path) -> None:
    # A directory inside a tmpfs is not its mount point: only the mount is looked up.
    assert memory_tmp_root(tmp_path, needed=0) is None


def test_dev_shm_is_taken_only_with_room_to_spare() -> None:
    if not SHM.is_dir() or _filesystem_type(SHM) != "tmpfs":
        if os.environ.get("CI") == "true":
            pytest.fail("CI's machines have a tmpfs at /dev/shm")
        pytest.skip("no tmpfs at /dev/shm on this machine")
    assert memory_tmp_root(SHM, needed=0) == SHM
    free = os.statvfs(SHM).f_bavail * os.statvfs(SHM).f_frsize
    assert memory_tmp_root(SHM, needed=free + 1) is None


def test_in_ci_the_tests_write_to_memory(tmp_path: Path) -> None:
    """.ci/run sets no TMPDIR and its machines have a large /dev/shm: the run is placed."""
    if os.environ.get("CI") != "true":
        pytest.skip("where TMPDIR points outside CI is the developer's choice")
    assert _filesystem_type(SHM) == "tmpfs"
    assert tmp_path.is_relative_to(SHM), tmp_path
    assert Path(tempfile.gettempdir()).name.startswith(PREFIX)
    assert os.environ["TMPDIR"] == tempfile.gettempdir()


def test_a_placed_process_and_what_it_starts_write_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs wherever the tests run (the test above needs CI's machine)."""
    monkeypatch.delenv("TMPDIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", None)
    left = tmp_path / f"{PREFIX}999999999"  # above any pid_max: a run that ended
    left.mkdir()
    mine = place_in(tmp_path)
    assert mine == tmp_path / f"{PREFIX}{os.getpid()}" and mine.is_dir()
    assert not left.exists()
    assert os.environ["TMPDIR"] == str(mine) and tempfile.gettempdir() == str(mine)
    child = subprocess.run(
        ["python3", "-c", "import tempfile; print(tempfile.gettempdir())"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert child.stdout.strip() == str(mine)


def test_directories_of_runs_that_ended_are_removed_and_others_kept(tmp_path: Path) -> None:
    ended = subprocess.Popen(["true"])
    ended.wait()
    running = subprocess.Popen(["sleep", "30"])
    try:
        gone = tmp_path / f"{PREFIX}{ended.pid}"
        kept = tmp_path / f"{PREFIX}{running.pid}"
        mine = tmp_path / f"{PREFIX}{os.getpid()}"
        other = tmp_path / "evalops-tests-notapid"
        for path in (gone, kept, mine, other):
            (path / "pytest-of-x").mkdir(parents=True)
        remove_left_behind(tmp_path)
        assert not gone.exists()
        assert kept.is_dir() and mine.is_dir() and other.is_dir()
    finally:
        running.kill()
        running.wait()
