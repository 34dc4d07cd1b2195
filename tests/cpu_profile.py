"""CPU time per test, child processes included: `pytest -p tests.cpu_profile`.

pytest's `--durations` reports wall time, which on a shared machine says more about the
other processes than about the test. This plugin reports, per test (setup, call and
teardown together), the user + system CPU seconds of the test process and of the child
processes it waited for (`evalops` subprocesses, `git`, `lint-imports`), the slowest
`EVALOPS_CPU_PROFILE_TOP` (default 30) at the end, and appends each test's figures as a
JSON line to `EVALOPS_CPU_PROFILE_FILE` (when set) as soon as it ends, so an interrupted
run keeps what it measured. Each line also holds the test's wall seconds, its worker and
when it ended: a test whose wall time is far above its CPU time waited (a lock, a sleep,
the PostgreSQL server), and the end times show how the two workers' queues ran out.
Under xdist each worker measures its own tests; the CPU figures are the same as in a
serial run, whatever the load.
"""

from __future__ import annotations

import json
import os
import resource
import time
from collections.abc import Generator
from typing import Any

import pytest

_TIMES: dict[str, list[float]] = {}


def _cpu() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None]:
    own, children = _cpu()
    started = time.monotonic()
    yield
    wall = time.monotonic() - started
    own_after, children_after = _cpu()
    _TIMES[item.nodeid] = [own_after - own, children_after - children]
    path = os.environ.get("EVALOPS_CPU_PROFILE_FILE")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            line = {
                "test": item.nodeid,
                "own": own_after - own,
                "children": children_after - children,
                "wall": wall,
                "worker": os.environ.get("PYTEST_XDIST_WORKER", ""),
                "end": time.time(),
            }
            out.write(json.dumps(line) + "\n")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _TIMES:
        return
    top = int(os.environ.get("EVALOPS_CPU_PROFILE_TOP", "30"))
    ranked = sorted(_TIMES.items(), key=lambda kv: -sum(kv[1]))
    total = sum(sum(v) for v in _TIMES.values())
    write = terminalreporter.write_line
    write(f"--- CPU seconds per test (own + child processes), {len(_TIMES)} tests, {total:.1f} s")
    for nodeid, (own, children) in ranked[:top]:
        write(f"{own + children:7.2f}  {own:6.2f} + {children:6.2f}  {nodeid}")
