"""A line on the terminal while no test has ended for a while: what is still running.

`make test` hands out the slow tests first (`--dist loadgroup`), so for the first minutes
the progress counter barely moves and a run looks hung. This plugin (loaded by `addopts`
in pyproject.toml) writes, whenever no test has ended for `EVALOPS_TEST_HEARTBEAT`
seconds (default 30; 0 turns it off), how many tests have ended and the tests running
longest, with how long each has run:

    ... 212 of 4,470 tests done after 3m05s; running: tests/store/test_crash_safety.py::
    test_a_killed_sync_is_whole_or_absent[sqlite] (1m12s), ...

It runs in the process that reports (the xdist controller, or the only process with
`-n 0`): xdist forwards each worker's test starts and reports to it.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

INTERVAL = "EVALOPS_TEST_HEARTBEAT"
SHOWN = 3


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


class Heartbeat:
    def __init__(
        self, write: Any, interval: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._write = write
        self._clock = clock
        self._interval = interval
        self._lock = threading.Lock()
        self._running: dict[str, float] = {}
        self._started = clock()
        self._last = self._started
        self._done = 0
        self._total: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="test-heartbeat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def collected(self, total: int) -> None:
        with self._lock:
            self._total = max(self._total or 0, total)

    def began(self, nodeid: str) -> None:
        with self._lock:
            self._running.setdefault(nodeid, self._clock())

    def ended(self, nodeid: str) -> None:
        with self._lock:
            if self._running.pop(nodeid, None) is not None:
                self._done += 1
            self._last = self._clock()

    def line(self, now: float) -> str | None:
        """The line to write at `now`, or None while tests keep ending."""
        with self._lock:
            if now - self._last < self._interval or not self._running:
                return None
            self._last = now  # once per interval while nothing ends
            longest = sorted(self._running.items(), key=lambda kv: kv[1])[:SHOWN]
            done, total = self._done, self._total
        of = f" of {total:,}" if total else ""
        running = ", ".join(f"{nodeid} ({_duration(now - t)})" for nodeid, t in longest)
        more = len(self._running) - len(longest)
        extra = f", and {more} more" if more > 0 else ""
        elapsed = _duration(now - self._started)
        return f"... {done:,}{of} tests done after {elapsed}; running: {running}{extra}"

    def _beat(self) -> None:
        while not self._stop.wait(min(self._interval, 5.0)):
            text = self.line(self._clock())
            if text is not None:
                self._write(text)


class HeartbeatPlugin:
    """The hooks that feed a `Heartbeat` (registered by `pytest_configure` below)."""

    def __init__(self, heartbeat: Heartbeat) -> None:
        self.heartbeat = heartbeat

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.heartbeat.collected(len(session.items))

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self.heartbeat.collected(len(ids))

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        self.heartbeat.began(nodeid)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "teardown":
            self.heartbeat.ended(report.nodeid)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.heartbeat.stop()


def _interval() -> float:
    try:
        return float(os.environ.get(INTERVAL, "30"))
    except ValueError:
        return 30.0


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    interval = _interval()
    if hasattr(config, "workerinput") or interval <= 0:
        return  # an xdist worker: its controller reports
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    heartbeat = Heartbeat(reporter.write_line, interval)
    config.pluginmanager.register(HeartbeatPlugin(heartbeat), "evalops-heartbeat")
    heartbeat.start()
