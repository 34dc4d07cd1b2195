"""Whether an interrupted command had already stored its change.

A Ctrl-C gets one line (docs/cli.md, exit 130), and it must be true: "nothing was stored"
while the transaction was still open (it rolls back), but not once it has committed and only
the output was left to print. A commit and the note that it happened are one step: a first
Ctrl-C during them is held until both are done, and delivered right after; a second one
stops at once (a commit can wait on a slow server), and is said to have come mid-commit.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

NOTHING_STORED = "interrupted: nothing was stored"
STORED = (
    "interrupted after the change was stored: it is in the registry, and only this "
    "command's output was cut short (`evalops verify` prints the audit head it ended at)"
)
MID_COMMIT = (
    "interrupted during the commit: the change may or may not be stored; `evalops registry "
    "show` and `evalops verify` say what the registry holds (each write is all or nothing)"
)

_state = {"committed": False, "mid_commit": False}


@contextmanager
def interrupts_held() -> Iterator[None]:
    """A first Ctrl-C (SIGINT) waits until the block is done; a second stops it at once.
    On the main thread, where Python handles signals; elsewhere nothing is held."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    asked: list[bool] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        if asked:
            _state["mid_commit"] = True
            raise KeyboardInterrupt
        asked.append(True)
        sys.stderr.write("finishing the commit; Ctrl-C again to stop at once\n")

    previous = signal.signal(signal.SIGINT, hold)
    try:
        yield
    finally:
        # None: a handler installed outside Python, which cannot be put back as it was.
        signal.signal(signal.SIGINT, signal.default_int_handler if previous is None else previous)
    if asked:
        raise KeyboardInterrupt


def forget_commits() -> None:
    """A new command starts (a test runs many in one process)."""
    _state.update(committed=False, mid_commit=False)


def note_committed() -> None:
    """A write transaction of this process committed."""
    _state["committed"] = True


def interrupted_line() -> str:
    """What an interrupt of this process's command says."""
    if _state["mid_commit"]:
        return MID_COMMIT
    return STORED if _state["committed"] else NOTHING_STORED
