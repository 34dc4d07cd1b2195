"""Files evalops writes for people and other tools (reports, exports, converted trials).

They are written to a temporary file and renamed into place, so a failure never leaves a
partial file. `mkstemp` creates that file readable by its owner only; a report or an export
is meant to be shared like any file the user writes, so it is given the mode the umask
allows (0644 under the usual 022) before it takes its place.
"""

from __future__ import annotations

import os


def shared_mode() -> int:
    """The mode a new regular file gets under the current umask (0o666 minus the mask)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def follow_umask(fd: int) -> None:
    """Give a file opened by `mkstemp` the mode an ordinary new file would have."""
    os.fchmod(fd, shared_mode())
