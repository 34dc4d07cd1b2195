"""Whether an interrupted command had already stored its change.

A Ctrl-C gets one line (docs/cli.md, exit 130), and it must be true: "nothing was stored"
while the transaction was still open (it rolls back), but not once it has committed and only
the output was left to print. A commit and the note that it happened are one step: the
interrupt is held off while both run, and delivered right after.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

NOTHING_STORED = "interrupted: nothing was stored"
STORED = (
    "interrupted after the change was stored: it is in the registry, and only this "
    "command's output was cut short (`evalops verify` prints the audit head it ended at)"
)

_committed: list[bool] = []


@contextmanager
def interrupts_held() -> Iterator[None]:
    """Ctrl-C (SIGINT) waits until the block is done (on the main thread, where Python
    handles signals, and where the OS lets a thread block one)."""
    block = getattr(signal, "pthread_sigmask", None)
    if block is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    before = block(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        block(signal.SIG_SETMASK, before)


def forget_commits() -> None:
    """A new command starts (a test runs many in one process)."""
    _committed.clear()


def note_committed() -> None:
    """A write transaction of this process committed."""
    _committed.append(True)


def interrupted_line() -> str:
    """What an interrupt of this process's command says."""
    return STORED if _committed else NOTHING_STORED
