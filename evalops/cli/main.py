"""The `evalops` command: global options, sub-commands, and errors -> exit codes."""

import functools
import gc
import importlib
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from evalops import __version__
from evalops.cli import fastparams
from evalops.cli.commands import BY_NAME, COMMANDS, Entry
from evalops.cli.context import (
    Settings,
    flush_stdout,
    mark_own_process,
    print_json,
    settings,
    shown,
)
from evalops.cli.discover import (
    in_registry_repository,
    no_database_here,
    no_database_in_registry_repository,
    project_root,
    registry_parent,
)
from evalops.cli.helpformat import click_module, use_in_help
from evalops.errors import (
    EXIT_INTERNAL,
    BusyError,
    EvalopsError,
    InputError,
    NoDatabase,
    RejectedRecords,
    error_object,
    is_driver_error,
)
from evalops.store.defaults import DEFAULT_DB_PATH, DEFAULT_URL


def _report(error: EvalopsError, as_json: bool) -> None:
    rejected = error if isinstance(error, RejectedRecords) else None
    several = getattr(error, "errors", ()) or ()
    if as_json:
        headline = error.json_entry()
        if several and rejected is None:
            # Every problem, each with its own file, line and field (the headline is first).
            headline["errors"] = [one.json_entry(error.exit_code) for one in several]
        print_json({"error": headline, **(rejected.json_extra() if rejected else {})})
    if rejected is not None:
        for text in rejected.human_lines():
            sys.stderr.write(shown(text) + "\n")
        return
    for one in several or (error,):
        sys.stderr.write(shown(f"error: {one.one_line()}") + "\n")


def _where_looked(error: EvalopsError, obj: object) -> EvalopsError:
    """No database found by the default search, away from any registry's repository: say
    where evalops looked rather than only "run `evalops init`" (which would create a stray
    database there). In a registry's repository (a clone), say that git holds no trials or
    decisions: the team's database is to be named, or an empty one started."""
    if not isinstance(error, NoDatabase) or not isinstance(obj, Settings) or not obj.db_searched:
        return error
    here = Path.cwd()
    if in_registry_repository(here, obj.registry):
        from evalops.store.engine import sqlite_path

        path = sqlite_path(obj.db_url)
        if path is None:
            return error
        return InputError(no_database_in_registry_repository(path), field="--db")
    return InputError(no_database_here(here), field="--db")


# `evalops --help` lists commands in groups, in the order of the workflow (docs/cli.md);
# a command no group names is listed last, under "Other".
COMMAND_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Registry", ("init", "new", "validate", "digest", "sync", "registry", "task", "schema", "db")),
    ("Lifecycle", ("incident", "suite", "promote", "retire")),
    ("Trials", ("trials", "void", "trajectory", "calibration", "review")),
    ("Gate", ("gate", "compare", "waiver", "estimate")),
    ("Reports", ("report", "export", "demo")),
    ("Authority and integrity", ("verify", "verify-attestation")),
)


def _fault(raised: Exception, obj: object) -> EvalopsError | None:
    """A storage fault (a full disk, a lost connection, a damaged file...) named by its
    cause for the database this invocation used; None for anything else (a bug)."""
    from evalops.store.faults import storage_fault

    url = obj.db_url if isinstance(obj, Settings) else DEFAULT_URL
    return storage_fault(raised, url)


class EvalopsGroup(TyperGroup):
    """The root command: maps every EvalopsError raised below it to its exit code, without a
    traceback. Its sub-commands are named by a table (evalops/cli/commands.py) and each is
    imported and built only when invoked: `evalops --help` builds none of them."""

    def list_commands(self, ctx: Any) -> list[str]:
        return [entry.name for entry in COMMANDS]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = self.commands.get(cmd_name)
        if command is None and cmd_name in BY_NAME:
            command = self.commands[cmd_name] = _build(BY_NAME[cmd_name])
        return command

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        """typer's, with its "Did you mean" drawn from every command's name (typer's own
        reads only the commands built so far). `_click_resolve_command` is typer's copy of
        click's lookup (tests/cli/test_typer_internals.py checks it is still there)."""
        from difflib import get_close_matches

        try:
            return self._click_resolve_command(ctx, args)
        except click_module().exceptions.UsageError as unknown:
            matches = get_close_matches(args[0], self.list_commands(ctx)) if args else []
            if self.suggest_commands and matches:
                suggestions = ", ".join(f"{m!r}" for m in matches)
                unknown.message = f"{unknown.message.rstrip('.')}. Did you mean {suggestions}?"
            raise

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """The commands in groups (`COMMAND_GROUPS`), each with its short help, from the
        table: shortened to the terminal's width as click shortens a command's help."""
        shorten = click_module().utils.make_default_short_help
        listed = {entry.name: entry.summary for entry in COMMANDS}
        limit = formatter.width - 6 - max(len(n) for n in listed)
        groups = [(title, [n for n in names if n in listed]) for title, names in COMMAND_GROUPS]
        named = {n for _, names in groups for n in names}
        groups.append(("Other", [n for n in listed if n not in named]))
        for title, names in groups:
            if names:
                with formatter.section(f"{title} commands"):
                    formatter.write_dl([(n, shorten(listed[n], limit)) for n in names])

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            # Whether the change had been stored when the stop came (docs/cli.md, 130).
            from evalops.store.interrupts import interrupted_line

            sys.stderr.write(interrupted_line() + "\n")
            ctx.exit(130)
        except Exception as raised:
            # The engine module is not imported here (the CLI starts without it): if it
            # raised WriterBusy, it is loaded already.
            engine = sys.modules.get("evalops.store.engine")
            busy = engine is not None and isinstance(raised, engine.WriterBusy)
            obj = ctx.find_root().obj
            fault = None if busy or isinstance(raised, EvalopsError) else _fault(raised, obj)
            if fault is None and not busy and not isinstance(raised, EvalopsError):
                from evalops.cli.file_faults import file_fault

                fault = file_fault(raised)
            if not (isinstance(raised, EvalopsError) or busy or fault is not None):
                raise
            if fault is not None:
                error = fault
            else:
                error = raised if isinstance(raised, EvalopsError) else BusyError(str(raised))
            error = _where_looked(error, obj)
            _report(error, isinstance(obj, Settings) and obj.json)
            ctx.exit(error.exit_code)


HELP_NAMES = ["-h", "--help"]
use_in_help()  # help text never breaks an id; examples stay pasteable commands

app = typer.Typer(
    cls=EvalopsGroup,
    name="evalops",
    help=(
        "Eval-asset lifecycle manager for AI-agent evaluations.\n\n"
        "Reference: docs/ in the project (docs/cli.md: every command, option and exit "
        "code).\n\n"
        "Example: git init -q && evalops init --registry registry && evalops validate "
        "registry && git add registry .gitignore && git commit -qm 'starter registry' && "
        "evalops sync registry"
    ),
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    add_completion=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": HELP_NAMES},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"evalops {__version__}")
        raise typer.Exit()


def _defaulted(ctx: typer.Context, name: str) -> bool:
    """The option took its default (not given, not from its environment variable). Compared
    by name: typer ships its own copy of click's ParameterSource."""
    source = ctx.get_parameter_source(name)
    return getattr(source, "name", None) == "DEFAULT"


def _found_from_a_subdirectory(ctx: typer.Context, db_url: str, registry: Path) -> tuple[str, Path]:
    """Run from a subdirectory of the repository (`cd registry`), use the database and the
    registry of the directory above that holds them, as git finds its repository: following
    "run `evalops init`" there would otherwise create a second, empty database."""
    if not _defaulted(ctx, "db_url"):
        return db_url, registry
    found = project_root(Path.cwd())
    if found is None and _defaulted(ctx, "registry"):
        # No database yet (a fresh clone): inside the registry, the project is above it.
        found = registry_parent(Path.cwd(), registry)
        settings(ctx).project_above = found
    if found is None:
        return db_url, registry
    db_url = f"sqlite:///{found / DEFAULT_DB_PATH}"
    if _defaulted(ctx, "registry"):
        registry = found / "registry"
    return db_url, registry


@app.callback()
def root(
    ctx: typer.Context,
    db_url: Annotated[
        str,
        typer.Option(
            "--db",
            envvar="EVALOPS_DATABASE_URL",
            help="Registry database URL (sqlite:///... or postgresql://...).",
        ),
    ] = DEFAULT_URL,
    registry: Annotated[
        Path,
        typer.Option(envvar="EVALOPS_REGISTRY", help="Registry directory of spec files."),
    ] = Path("registry"),
    actor: Annotated[
        str | None,
        typer.Option(help="Who is acting (else EVALOPS_ACTOR, git user.email, OS user)."),
    ] = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="Machine-readable output: one JSON document.")
    ] = False,
    lock_timeout: Annotated[
        float,
        typer.Option(
            envvar="EVALOPS_LOCK_TIMEOUT",
            min=0,
            max=86_400,  # a day; inf and 1e400 are no timeout a driver takes
            help="Seconds a writer waits for another writer's lock before exit 1 "
            "(registry is busy).",
        ),
    ] = 600.0,
    progress: Annotated[
        str,
        typer.Option(
            "--progress",
            envvar="EVALOPS_PROGRESS",
            metavar="auto|bar|plain|none",
            help="Progress of long work (ingest) on stderr: a bar in a terminal and plain "
            "periodic lines otherwise (auto), or forced bar, plain or none.",
        ),
    ] = "auto",
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """Global options apply to every command."""
    state = settings(ctx)
    db_url, registry = _found_from_a_subdirectory(ctx, db_url, registry)
    state.db_url = db_url
    state.db_searched = _defaulted(ctx, "db_url")
    state.registry = registry
    state.actor = actor
    state.json = json_output
    state.lock_timeout = lock_timeout
    state.progress = progress


def _run_cli(argv: list[str]) -> int:
    """`main` (defined below) for `evalops demo`, which runs this CLI in-process step by
    step: given to the command rather than imported by it (it would import this module)."""
    return main(argv)


def _build(entry: Entry) -> Any:
    """The click command of one sub-command: its module's `register` on a Typer of its own,
    then typer's conversion of that one command with the root's settings (what
    `typer.main.get_command(app)` would have made of it among all the others)."""
    module: Any = importlib.import_module(f"evalops.cli.{entry.module}")
    own = typer.Typer()
    if entry.module == "verify":
        module.register(own, run_cli=_run_cli)
    else:
        module.register(own)
    command: Any = None
    for info in own.registered_commands:
        named = info.name or typer.main.get_command_name(getattr(info.callback, "__name__", ""))
        if entry.name == named:
            command = typer.main.get_command_from_info(
                info,
                pretty_exceptions_short=app.pretty_exceptions_short,
                rich_markup_mode=app.rich_markup_mode,
            )
    for group in own.registered_groups:
        if entry.name == group.name:
            command = typer.main.get_group_from_info(
                group,
                pretty_exceptions_short=app.pretty_exceptions_short,
                suggest_commands=app.suggest_commands,
                rich_markup_mode=app.rich_markup_mode,
            )
    if command is None:
        raise RuntimeError(f"evalops.cli.{entry.module} registers no command {entry.name!r}")
    # Ordinary option values parse without pydantic: simple commands start fast.
    fastparams.install_tree(command, HELP_NAMES)
    return command


@functools.cache
def _command() -> Any:
    """The root click command of `app`, built once per process (`evalops demo` and the
    tests run many commands in one process); its sub-commands are built as they are used."""
    command = typer.main.get_command(app)
    fastparams.install_tree(command, HELP_NAMES)
    return command


def command_tree() -> Any:
    """The whole click command tree, every sub-command built: for what reads the CLI's
    commands rather than running one (the docs' and help tests)."""
    command = _command()
    for name in command.list_commands(None):
        command.get_command(None, name)
    return command


def main(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code (1 for an unexpected internal error)."""
    command = _command()
    args = argv if argv is not None else sys.argv[1:]
    noted = sys.modules.get("evalops.store.interrupts")
    if noted is not None:  # an earlier command of this process wrote (tests run many)
        noted.forget_commits()
    as_json = "--json" in args
    oversized = oversized_argument(args)
    if oversized is not None:
        _report(oversized, as_json)
        return oversized.exit_code
    try:
        result = command.main(args=argv, prog_name="evalops", standalone_mode=False)
    except SystemExit as done:
        flush_stdout()
        code = done.code
        return code if isinstance(code, int) else (0 if code is None else EXIT_INTERNAL)
    except (KeyboardInterrupt, typer.Abort):
        from evalops.store.interrupts import interrupted_line

        sys.stderr.write(interrupted_line() + "\n")
        return 130
    except Exception as exc:
        if _is_usage_error(exc):
            # Found by the option parser (click's UsageError family): exit 2, and a JSON
            # error under --json like every other failure.
            usage_code: int = exc.exit_code  # type: ignore[attr-defined]
            if type(exc).__name__ == "NoArgsIsHelpError":
                # A group named without a command (`evalops`, `evalops trials`): its help,
                # as click prints it, not an error line.
                exc.show()  # type: ignore[attr-defined]
                return usage_code
            message = shown(exc.format_message())  # type: ignore[attr-defined]
            field = _usage_field(exc)
            if as_json:
                print_json({"error": error_object(usage_code, message, field=field)})
            # One line, as every other error: click's own is four (usage, hint, blank, error).
            context = getattr(exc, "ctx", None)
            path = getattr(context, "command_path", None) or _command_path(command, args)
            named = f"{field}: " if field and field not in message else ""
            sys.stderr.write(f"error: {named}{message} (`{path} -h` for help)\n")
            return usage_code
        if os.environ.get("EVALOPS_DEBUG"):
            raise
        message = shown(f"internal error: {type(exc).__name__}: {_said(exc)}")
        if as_json:
            print_json({"error": error_object(EXIT_INTERNAL, message)})
        sys.stderr.write(
            f"{message}\n"
            "(this is a bug in evalops; run again with EVALOPS_DEBUG=1 for the traceback)\n"
        )
        return EXIT_INTERNAL
    return result if isinstance(result, int) and not isinstance(result, bool) else 0


def _command_path(root: Any, args: list[str]) -> str:
    """The command the words of `args` name (`evalops gate check`), for a usage error the
    option parser raised before the command had a context (a value missing after its
    option): each word that names a sub-command of the group before it. Options and
    their values are passed over (`evalops --json gate check`) until a command that is
    not a group is reached."""
    words = ["evalops"]
    command = root
    value_next = False
    for arg in args:
        find = getattr(command, "get_command", None)
        if not callable(find):
            break
        if value_next:  # the value of an option of this group (`--registry registry`)
            value_next = False
            continue
        if arg.startswith("-"):
            value_next = "=" not in arg and _takes_a_value(command, arg)
            continue
        found = find(None, arg)
        if found is not None:
            words.append(arg)
            command = found
    return " ".join(words)


def _takes_a_value(command: Any, name: str) -> bool:
    """Whether `name` is an option of `command` that takes a value (not a flag)."""
    for param in getattr(command, "params", ()):
        if name in (getattr(param, "opts", ()) or ()):
            return not (getattr(param, "is_flag", False) or getattr(param, "count", False))
    return False


def _usage_field(exc: Exception) -> str | None:
    """The option or argument a usage error is about (`--suite` for a missing `--suite`, as
    every other error names its field, `--bogus` for an unknown one); None when click names
    none."""
    unknown = getattr(exc, "option_name", None)  # click's NoSuchOption, BadOptionUsage
    if isinstance(unknown, str) and unknown:
        return unknown
    param = getattr(exc, "param", None)
    if param is None:
        return None
    if getattr(param, "param_type_name", "") == "argument":
        # As the message names it: its metavar (`ID`), else its name in capitals.
        return str(getattr(param, "metavar", None) or str(param.name).upper())
    names: list[str] = list(getattr(param, "opts", None) or [])
    return next((name for name in names if name.startswith("--")), names[0] if names else None)


def _said(exc: BaseException) -> str:
    """What an unexpected error says: a database driver's error by its first line only
    (SQLAlchemy appends the statement, every bind parameter and a link to its own docs,
    which can run to kilobytes and hold stored values)."""
    text = str(exc)
    if is_driver_error(exc):
        lines = text.strip().splitlines()
        text = lines[0][:300] if lines else ""
    return text


#: Options whose value is an identifier (a build name, an actor): stored in indexed columns.
IDENTIFIER_OPTIONS = frozenset({"--build", "--baseline", "--actor"})


def oversized_argument(args: list[str]) -> InputError | None:
    """The first argument beyond its limit (an identifier option's value at most 256
    characters, any other argument at most 4,096), before anything is parsed or stored:
    the same refusal on every engine."""
    from evalops.domain.limits import MAX_FREE_TEXT_CHARS, MAX_IDENTIFIER_CHARS

    previous = ""
    for arg in args:
        name, value = previous, arg
        if arg.startswith("--") and "=" in arg:
            name, _, value = arg.partition("=")
        limit = MAX_IDENTIFIER_CHARS if name in IDENTIFIER_OPTIONS else MAX_FREE_TEXT_CHARS
        if len(value) > limit:
            what = "an identifier" if limit == MAX_IDENTIFIER_CHARS else "an argument"
            return InputError(
                f"{len(value):,} characters; {what} is at most {limit:,}",
                field=name if name.startswith("-") else None,
            )
        previous = arg
    return None


def _is_usage_error(exc: BaseException) -> bool:
    """click's ClickException family (typer vendors its own click, so match by shape)."""
    return (
        any(k.__name__ == "ClickException" for k in type(exc).__mro__)
        and isinstance(getattr(exc, "exit_code", None), int)
        and callable(getattr(exc, "show", None))
    )


# What OpenBLAS reads for its thread count, first to last: a user who set any of them decides.
BLAS_THREAD_SETTINGS = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")


def one_blas_thread() -> None:
    """evalops's statistics are scalars and short vectors: the OpenBLAS threads numpy starts
    as it loads only spin, a fifth of a second of CPU for every command that loads scipy.
    Unless the user set a thread count of their own, this process asks for one."""
    if not any(name in os.environ for name in BLAS_THREAD_SETTINGS):
        os.environ["OPENBLAS_NUM_THREADS"] = "1"


def run() -> None:
    """The `evalops` entry point: this process runs one command and ends."""
    mark_own_process()
    one_blas_thread()
    code = main()
    # What is still alive (every imported module: hundreds of thousands of objects) is
    # moved where the collector never looks. At exit the interpreter collects once more
    # over all of it, a tenth of a large `gate check`, to free memory the process's end
    # frees anyway. The command has flushed and closed its database (`connect`, `read`);
    # what it left to `atexit` still runs.
    gc.freeze()
    sys.exit(code)
