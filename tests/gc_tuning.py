"""Python's cycle collector, tuned for a test process (a pytest plugin, in `addopts`).

A test process holds a large heap that lives as long as it does: every test module, the
evalops, SQLAlchemy, Hypothesis and pydantic objects they imported, the compiled SQL. The
collector's full collections walk all of it: in `tests/services/test_gate.py`,
`tests/services/test_authority.py` and `tests/domain` (2,279 tests, one process), 50 full
collections took 6.6 of the 9.3 CPU seconds the collector used. After collection the heap
built so far is frozen (`gc.freeze()`: the collector no longer walks it) and a full
collection waits for a hundred times more young collections than by default; young
collections are as frequent as ever, and anything without a reference cycle is freed when
its last reference goes, as always. Nothing a test checks depends on when cycles are
collected: the processes whose memory is measured are other processes.
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
