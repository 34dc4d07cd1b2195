"""Global options, output helpers and the per-invocation context shared by every command."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from evalops.store.defaults import DEFAULT_URL

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table
    from sqlalchemy.engine import Engine

    from evalops.store.reader import Reader


@dataclass
class Settings:
    """What the root callback parsed; read by every command."""

    db_url: str = DEFAULT_URL
    registry: Path = Path("registry")
    actor: str | None = None
    json: bool = False
    lock_timeout: float = 600.0
    progress: str = "auto"
    # --db and EVALOPS_DATABASE_URL were not given: the database was looked for.
    db_searched: bool = False
    # Run from inside the registry of a project with no database yet: that project's root.
    project_above: Path | None = None

    def engine(self, *, for_verify: bool = False) -> Engine:
        """The registry database, refused unless it exists and is at head (exit 2; 6 for
        `verify`)."""
        from evalops.services.database import open_database

        return open_database(self.db_url, lock_timeout=self.lock_timeout, for_verify=for_verify)

    @contextmanager
    def connect(self, *, for_verify: bool = False) -> Iterator[Engine]:
        """The registry database for one command, disposed of afterwards."""
        engine = self.engine(for_verify=for_verify)
        try:
            yield engine
        finally:
            engine.dispose()

    @contextmanager
    def read(self, *, for_verify: bool = False) -> Iterator[Reader]:
        """The registry database for one read-only command: on a plain SQLite file at head
        through `sqlite3` alone (no SQLAlchemy to import), else through an engine opened
        and checked as by `connect`, with the same errors."""
        from evalops.store.reader import engine_reader, open_sqlite

        fast = open_sqlite(self.db_url, lock_timeout=self.lock_timeout)
        if fast is not None:
            try:
                yield fast
            finally:
                fast.close()
            return
        with self.connect(for_verify=for_verify) as engine, engine_reader(engine) as reader:
            yield reader

    def who(self) -> str:
        """The acting user: an identifier, so at most 256 characters on every engine."""
        from evalops.domain.limits import MAX_IDENTIFIER_CHARS
        from evalops.errors import InputError

        actor = self.actor or resolve_actor()
        if len(actor) > MAX_IDENTIFIER_CHARS:
            raise InputError(
                f"actor is {len(actor):,} characters; an identifier is at most "
                f"{MAX_IDENTIFIER_CHARS}",
                field="--actor",
            )
        return actor


JsonFlag = Annotated[
    bool, typer.Option("--json", help="Machine-readable output: one JSON document on stdout.")
]


#: Whether this process is one command's own (`evalops ...`, `python -m evalops`), set by
#: `run`; not when `main` is called by a program of its own (tests, the demo's steps).
_OWN_PROCESS = [False]


def mark_own_process() -> None:
    """The command about to run is this process's only work (the `evalops` entry point)."""
    _OWN_PROCESS[0] = True


def is_own_process() -> bool:
    return _OWN_PROCESS[0]


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cycle collector off for one command's work, and on again after (if it was).

    For a command that builds one large document of plain dicts and lists in memory (a
    gate decision over 10,000 tasks: hundreds of thousands of them, alive until it is
    stored and printed): the collector ran 619 times while one was made, 55 of them over
    the older generations (every module the command imported), and freed nothing, for a
    sixth of the command's CPU. Everything is still freed when its last reference goes; only
    the few reference cycles made meanwhile wait until the collector is on again.

    What the work made and still holds when it ends (the modules it imported: hundreds of
    thousands of objects) would all be young then, and the collector's first young
    collection would walk them once more, for nothing (2% of the command). In the command's
    own process they are moved to the oldest generation without a walk (`freeze` then
    `unfreeze`, two list splices). Not when `main` is called by another program: `unfreeze`
    would thaw what that program froze (a test process freezes its heap), and asking how
    much it froze (`gc.get_freeze_count`) walks every frozen object, 50 ms for a test
    process's 1.5 million, more than the walk it would save."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if is_own_process():
            gc.freeze()
            gc.unfreeze()
        if was_on:
            gc.enable()


def settings(ctx: typer.Context, json_flag: bool = False) -> Settings:
    """The global settings; a command's own `--json` turns JSON output on too."""
    root = ctx.find_root()
    if not isinstance(root.obj, Settings):
        root.obj = Settings()
    if json_flag:
        root.obj.json = True
    return root.obj


def resolve_actor() -> str:
    """`EVALOPS_ACTOR`, else git `user.email`, else the OS user (`--actor` wins over all)."""
    env = os.environ.get("EVALOPS_ACTOR")
    if env:
        return env
    try:
        email = subprocess.run(
            ["git", "config", "user.email"], capture_output=True, text=True, timeout=5, check=False
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        email = ""
    if email:
        return email
    try:
        import getpass

        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


NOW_ENV = "EVALOPS_NOW"


def now() -> datetime:
    """The only place the CLI reads the clock; services and the domain take time as input.

    `EVALOPS_NOW` (RFC 3339 with offset) pins the clock. It exists for tests and golden
    files only (a reproducible demo database); never set it in real use: every timestamp
    evalops records would lie.
    """
    pinned = os.environ.get(NOW_ENV)
    if pinned:
        from evalops.domain.timestamps import parse_timestamp
        from evalops.errors import InputError

        try:
            return parse_timestamp(pinned)
        except ValueError as exc:
            raise InputError(str(exc), field=NOW_ENV) from None
    return datetime.now(UTC)


_TERMINAL_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _terminal_escape(char: str) -> str:
    from evalops.domain.visible import unicode_escape

    return _TERMINAL_ESCAPES.get(char) or unicode_escape(char)


def shown(text: object) -> str:
    """Free text made safe for a terminal line: control, invisible and line-breaking
    characters (newlines, U+2028/9, zero-width and bidirectional controls included) become
    visible escapes (`\\u200b`), so stored text can neither add lines nor move the cursor,
    recolour the screen or pass for other text (docs/formats.md, "Free text")."""
    from evalops.domain.visible import escape_invisible

    out = escape_invisible(str(text), _terminal_escape)
    return out.encode("utf-8", "backslashreplace").decode("utf-8")


def say(text: object = "", err: bool = False) -> None:
    """One line of human output with every control character made visible."""
    try:
        typer.echo(shown(text), err=err)
    except BrokenPipeError:
        reader_gone(sys.stderr if err else sys.stdout)


def reader_gone(stream: Any) -> None:
    """The reader of `stream` went away (`evalops gate check | head -1`): the rest of the
    output goes to /dev/null, so the command finishes its work and exits with its own code
    (a gate decision's 0, 3 or 4), quietly, instead of dying of a broken pipe."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def flush_stdout() -> None:
    """Flush stdout now, so that a closed pipe shows here (and is made quiet) rather than at
    interpreter exit."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        reader_gone(sys.stdout)
        with suppress(OSError):
            sys.stdout.flush()  # what was buffered now goes to /dev/null


def add_row(table: Any, *cells: object) -> None:
    """A table row whose cells are shown as plain text (no markup, no control characters);
    a cell already made a rich Text (a coloured verdict word) is kept as it is."""
    from rich.text import Text

    table.add_row(*(c if isinstance(c, Text) else shown(c) for c in cells))


@cache
def _console_class() -> type[Console]:
    from rich.console import Console

    class QuietPipeConsole(Console):
        """Rich exits 1 on a broken pipe; here the rest of the output goes to /dev/null and
        the command keeps its own exit code (`evalops gate check | head -1`)."""

        def on_broken_pipe(self) -> None:
            self.quiet = True
            reader_gone(self.file)

    return QuietPipeConsole


def console(stderr: bool = False) -> Console:
    # markup=False, emoji=False: a stored "[red]" must print as itself, never as a style,
    # and a stored ":x:" as itself, never as an emoji (which would change widths and text).
    out = _console_class()(
        stderr=stderr, highlight=False, soft_wrap=True, markup=False, emoji=False
    )
    stream = sys.stderr if stderr else sys.stdout
    # The stream itself decides (FORCE_COLOR makes rich call a pipe a terminal of 80 columns).
    if not out.is_terminal or not stream.isatty():
        # Piped or captured output: no terminal to fit, so no width limit; a table takes
        # its natural width and never wraps or cuts an id or a digest.
        out.width = UNLIMITED_WIDTH
    return out


#: The width given to a console that is not a terminal (a table is only as wide as it needs).
UNLIMITED_WIDTH = 1_000_000


def new_table(*columns: str, title: str | None = None) -> Table:
    """A table for people: every column labelled, and a cell too long for the terminal
    folds onto the next line instead of being cut with an ellipsis, so no id or digest is
    ever shortened. (Rich's `no_wrap` would crop an id once the terminal is too narrow,
    so no column uses it.)"""
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for column in columns:
        if not column:
            raise ValueError("every column needs a label")
        table.add_column(column, overflow="fold")
    return table


def json_text(data: Any) -> str:
    """Indented JSON for a terminal: the same data once parsed, but an invisible or
    line-breaking character (U+200B, U+2028, a bidi control, a lone surrogate) is written
    as its `\\uXXXX` JSON escape, never raw (a raw newline is only ever the layout's)."""
    import json

    from evalops.domain.visible import escape_invisible

    text = json.dumps(data, indent=2, ensure_ascii=False)
    return "\n".join(escape_invisible(line, _json_escape) for line in text.split("\n"))


def _json_escape(char: str) -> str:
    import json

    return json.dumps(char)[1:-1]  # beyond the BMP: a surrogate pair, as JSON spells it


def print_json(data: Any) -> None:
    sys.stdout.write(json_text(data) + "\n")


def emit(ctx: typer.Context, data: Any, human: Callable[[], None]) -> None:
    """One JSON document on stdout with `--json`, else the human rendering.

    A reader that stops early (`| head -1`) does not change the command's exit code.
    """
    try:
        if settings(ctx).json:
            print_json(data)
        else:
            human()
        sys.stdout.flush()
    except BrokenPipeError:
        reader_gone(sys.stdout)


def note(message: str) -> None:
    """A message for people, on stderr (stdout is for data)."""
    console(stderr=True).print(message)


def echo_lines(lines: list[str]) -> Callable[[], None]:
    """A human renderer that prints prepared lines."""

    def render() -> None:
        for line in lines:
            say(line)

    return render
