"""Python's cycle collector, tuned for a test process (a pytest plugin, in `addopts`).

A test process holds a large heap that lives as long as it does: every test module, the
evalops, SQLAlchemy, Hypothesis and pydantic objects they imported, the compiled SQL. The
collector's full collections walk all of it: in `tests/services/test_gate.py`,
`tests/services/test_authority.py` and `tests/domain` (2,279 tests, one process), 50 full
collections took 6.6 of the 9.3 CPU seconds the collector used. After collection the heap
built so far is frozen (`gc.freeze()`: the collector no longer walks it) and a full
collection waits for a hundred times more young collections than by default; young
collections are as frequent as ever, and anything without a reference cycle is freed when
its last reference goes, as always.

With full collections that rare, garbage in reference cycles piled up: a worker ended a
whole run holding 0.6 to 3 million such objects (1.3 to 1.4 GB resident), which pytest's
last collection then walked (2 and 4.5 CPU seconds), and every `fork` of the act-pool
tests copied the page tables of it. So at the end of each test module, once its fixtures
are torn down, everything is collected and what is left is frozen in turn: the next
collection walks only what was made since. Module-scoped objects die at that boundary,
so little that is frozen becomes garbage later (session fixtures live to the end). A
`__del__` that raises in such a collection is reported at the module's last test, whose
teardown pytest checks next. Nothing a test checks depends on when cycles are collected:
the processes whose memory is measured are other processes.
"""

from __future__ import annotations

import gc

import pytest

# The default is (700, 10, 10): a full collection every 100 young-generation-1 collections.
THRESHOLDS = (700, 10, 1000)


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)


# `trylast`: after the runner's own teardown (the module's fixtures are gone), and before
# pytest's check for unraisable exceptions (a `trylast` hook of a plugin registered
# earlier, so called after this one).
@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    if nextitem is None or nextitem.path != item.path:
        gc.collect()
        gc.freeze()
