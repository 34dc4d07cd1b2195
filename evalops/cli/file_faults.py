"""Faults of the files a command reads or writes besides the database (an output file, a
directory to write into): named with the path and the cause, never as an internal error.

An `OSError` that names a file is the environment's answer (a directory where a file was
asked for, no permission, a full disk), not a bug in evalops. One that names no file stays
an internal error.
"""

from __future__ import annotations

import errno

from evalops.errors import EvalopsError, InputError, StorageFault

# The disk or its limits: the same command may be run again once space is freed (exit 1,
# as a full disk under the database).
STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO})


def file_fault(raised: BaseException) -> EvalopsError | None:
    """The error to show for an `OSError` about a named file; None for anything else."""
    if not isinstance(raised, OSError) or not raised.filename:
        return None
    path = str(raised.filename)
    cause = raised.strerror or type(raised).__name__
    if raised.errno in STORAGE_ERRNOS:
        return StorageFault(
            f"cannot write {path}: {cause}; free space (or raise the limit) and run the "
            "command again",
            str(path),
        )
    return InputError(f"cannot use this path: {cause}", path)
