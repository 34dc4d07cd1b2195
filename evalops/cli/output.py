"""Writing a rendered report or export: to a file (atomically) or to stdout (`-`)."""

import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated

import typer

from evalops.cli.context import reader_gone
from evalops.errors import InputError, StorageFault
from evalops.files import follow_umask

FORMAT_BY_SUFFIX = {
    ".html": "html",
    ".htm": "html",
    ".md": "md",
    ".markdown": "md",
    ".json": "json",
}

OutputOption = Annotated[
    str,
    typer.Option("-o", "--output", help="File to write, or `-` for stdout."),
]


def format_for(fmt: str | None, output: str, default: str = "html", *, strict: bool = False) -> str:
    """`--format`, else the output file's suffix, else `default`.

    `strict` (a command with `--format`): a file whose suffix names no format is an input
    error rather than `default` written under a name that says otherwise (`x.pdf`).
    """
    if fmt is not None:
        if fmt not in ("html", "md", "json"):
            raise InputError(f"format {fmt!r} is not one of html, md, json", field="--format")
        return fmt
    suffix = Path(output).suffix.lower()
    if strict and output != "-" and suffix not in FORMAT_BY_SUFFIX:
        named = f"its suffix {suffix!r} names no format" if suffix else "it has no suffix"
        known = list(FORMAT_BY_SUFFIX)
        raise InputError(
            f"{output}: the format follows the suffix and {named}: end the name in "
            f"{', '.join(known[:-1])} or {known[-1]}, or give --format html|md|json",
            field="--output",
        )
    return FORMAT_BY_SUFFIX.get(suffix, default)


def refuse_unwritable(output: str, field: str = "--output") -> None:
    """Exit 2 now if `output` could not be written later: for a command that records
    something before it writes its file (`gate check --report`), so that a path it cannot
    write refuses the command with nothing stored. Tried, not inferred from permission bits
    (which an administrator's process ignores): a temporary file is made and removed in the
    nearest directory that exists, where the parents `write_output` creates would go."""
    if output == "-":
        return
    path = Path(output)
    if path.is_dir():
        raise InputError("is a directory; give a file name", str(path), field=field)
    existing = path.parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise InputError(f"cannot write: {existing} is not a directory", str(path), field=field)
    import tempfile

    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=existing)
    except OSError as exc:
        raise InputError(f"cannot write: {exc.strerror}", str(path), field=field) from None
    os.close(fd)
    Path(tmp).unlink(missing_ok=True)


def write_output(output: str, text: str | Iterable[str], field: str = "--output") -> str | None:
    """Write `text` to `output` (parents created, replaced atomically); `-` is stdout.
    `text` may come in pieces (a large JSON report, written as it is encoded). `field` is
    the option a refusal names.

    Returns the path written, or None for stdout.
    """
    pieces = [text] if isinstance(text, str) else text
    if output == "-":
        try:
            for piece in pieces:
                sys.stdout.write(piece)
            sys.stdout.flush()
        except BrokenPipeError:
            reader_gone(sys.stdout)  # the reader stopped early: keep the exit code
        return None
    path = Path(output)
    if path.is_dir():
        raise InputError("is a directory; give a file name", str(path), field=field)
    if path.is_symlink():
        # The link stays a link: its target is what is written (as a shell's `>` does).
        try:
            path = path.resolve()
        except (OSError, RuntimeError):
            raise InputError("is a loop of symbolic links", str(path), field=field) from None
    if path.exists() and not path.is_file():
        # A pipe, a terminal or a device (/dev/stdout): written through, never replaced.
        return _write_through(path, pieces, field)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        import tempfile

        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            follow_umask(fd)
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as stream:
                for piece in pieces:
                    stream.write(piece)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise _write_error(exc, path, field) from None
    return str(path)


def _write_through(path: Path, pieces: Iterable[str], field: str) -> str:
    try:
        with path.open("w", encoding="utf-8", newline="\n") as stream:
            for piece in pieces:
                stream.write(piece)
    except OSError as exc:
        raise _write_error(exc, path, field) from None
    return str(path)


def _write_error(exc: OSError, path: Path, field: str) -> Exception:
    """A full disk is a storage fault (exit 1: run again once there is room); anything
    else the path's own problem (exit 2)."""
    from evalops.cli.file_faults import STORAGE_ERRNOS

    if exc.errno in STORAGE_ERRNOS:
        return StorageFault(f"cannot write: {exc.strerror}", str(path), field=field)
    dangling = next((p for p in path.parents if p.is_symlink() and not p.exists()), None)
    if dangling is not None:
        # mkdir says "File exists" of a link that leads nowhere: name the link instead.
        return InputError(
            f"cannot write: {dangling} is a symbolic link that leads nowhere (a loop, or "
            "a target that does not exist)",
            str(path),
            field=field,
        )
    return InputError(f"cannot write: {exc.strerror}", str(path), field=field)
