"""`evalops init` and `evalops db upgrade|downgrade|current|check`."""

from pathlib import Path
from typing import Annotated

import typer

from evalops.cli.context import JsonFlag, emit, say, settings
from evalops.domain.humanize import plural
from evalops.errors import DamagedDatabase, InputError, RefusedError, VerificationError

db_app = typer.Typer(
    help="Migrate the registry database.\n\nExample: evalops db current", no_args_is_help=True
)


def _status(url: str) -> dict[str, str | None]:
    from evalops.services.database import engine_for, require_database_file, stored_revision
    from evalops.store.engine import redact
    from evalops.store.schema import HEAD_REVISION

    engine = engine_for(url)
    try:
        require_database_file(url)
        return {"database": redact(url), "revision": stored_revision(engine), "head": HEAD_REVISION}
    except InputError:
        raise
    except Exception as exc:
        from evalops.services.database import unreachable

        raise unreachable(url, exc) from None
    finally:
        engine.dispose()


def _upgrade(
    url: str, revision: str, *, create_if_empty: bool = False, lock_timeout: float | None = None
) -> None:
    """Migrate to `revision`; with `create_if_empty`, an empty database is instead created
    at head from the models in one step (the same schema, docs/verify.md "The database"),
    without loading Alembic."""
    from evalops.errors import is_driver_error
    from evalops.services.database import (
        engine_for,
        refuse_unversioned,
        stored_revision,
        unreachable,
    )
    from evalops.store import fresh
    from evalops.store.engine import ensure_parent, sqlite_path
    from evalops.store.schema import HEAD_REVISION

    engine = engine_for(url) if lock_timeout is None else engine_for(url, lock_timeout=lock_timeout)
    try:
        ensure_parent(sqlite_path(url))
        current = stored_revision(engine)
        refuse_newer(url, current)
        refuse_unversioned(engine, url, current)
        if current not in (None, HEAD_REVISION):
            # An older schema: its rows must be what it recorded (the checks load the
            # verifier and the gate, which a new or current database does not need).
            from evalops.services.verify.upgrade_checks import check_before_upgrade

            check_before_upgrade(engine)
        if not (create_if_empty and fresh.create_at_head(engine)):
            from evalops.store import migrate

            migrate.upgrade(url, engine, revision)
    except (OSError, InputError, VerificationError, DamagedDatabase):
        raise
    except Exception as exc:
        _bad_revision(exc, revision)
        if is_driver_error(exc):  # SQLAlchemy's, or a driver's raised through a reader
            raise unreachable(url, exc) from None
        raise
    finally:
        engine.dispose()


def refuse_newer(url: str, revision: str | None) -> None:
    """A database migrated by a newer evalops (or stamped with a revision none of this
    one's migrations has) is left as it is (exit 2): this one can neither check its rows
    nor migrate it anywhere."""
    from evalops.store.engine import redact
    from evalops.store.faults import newer_schema
    from evalops.store.schema import HEAD_REVISION, is_newer, known_revisions

    if is_newer(revision):
        raise newer_schema(redact(url), str(revision), HEAD_REVISION)
    if revision is not None and revision not in known_revisions():
        raise InputError(
            f"database {redact(url)} is at {revision}, a revision no migration of this "
            f"evalops knows (head {HEAD_REVISION}); nothing changed",
            field="--db",
        )


def _downgrade_refusal(lost: dict[str, int]) -> str:
    """What a downgrade of a database holding audit events would do, said before it does:
    the recorded rows of the tables it drops, and whether the registry could come back."""
    from evalops.services.destroy import singular

    if not lost:
        say("would be lost: no recorded row (the tables it drops are empty)", err=True)
        return (
            "db downgrade of a registry holding audit events: the tables it drops hold no "
            "row, so `evalops db upgrade` brings it back as it was. Pass --force-destroy-data"
        )
    summary = ", ".join(plural(n, singular(what), what) for what, n in lost.items())
    say(f"would be lost: {summary}", err=True)
    return (
        f"db downgrade would destroy {summary}; the audit chain records them, so `verify` "
        "would fail from then on and `evalops db upgrade` may refuse the registry: it "
        "cannot be recovered. Export what you need, then pass --force-destroy-data"
    )


def _bad_revision(exc: Exception, revision: str) -> None:
    """Alembic's refusal of a revision it cannot resolve is a usage error (exit 2)."""
    from alembic.util import CommandError

    if isinstance(exc, CommandError):
        raise InputError(f"cannot migrate to revision {revision!r}: {exc}", field="revision")


def _ignore_dot_evalops() -> bool | str:
    """`evalops init` keeps the database out of git: `.evalops/` goes into the repository's
    .gitignore (created if absent) when the working directory is in a git work tree.

    Outside one (False), it goes into the working directory's .gitignore when the database
    was created there: the `git init && git add -A` that `sync` needs next must not commit
    it. Nothing is written when `.evalops/` is not here (a database named by --db). A
    repository git refuses to read (another user's) gives git's refusal, as a warning."""
    from evalops.registry.history import RepositoryRefused, repository_top

    try:
        top = repository_top(Path.cwd())
    except RepositoryRefused as refused:
        return refused.message  # git's own refusal, said as the warning
    except InputError:
        top = None  # no git on this machine: as outside a work tree
    if top is None:
        if (Path.cwd() / ".evalops").is_dir():
            _add_to_gitignore(Path.cwd() / ".gitignore")
        return False
    _add_to_gitignore(top / ".gitignore")
    return True


def _add_to_gitignore(ignore: Path) -> None:
    lines = ignore.read_text(encoding="utf-8").splitlines() if ignore.exists() else []
    if any(line.strip() in (".evalops/", ".evalops", "/.evalops/") for line in lines):
        return
    prefix = "" if not lines or lines[-1] == "" else "\n"
    with ignore.open("a", encoding="utf-8") as out:
        out.write(f"{prefix}.evalops/\n" if lines else ".evalops/\n")


_OUTSIDE_GIT = (
    "{cwd} is not in a git work tree: `evalops sync` registers the registry as committed in "
    "git, so run `git init` here and commit the registry first"
)


def init(
    ctx: typer.Context,
    starter: Annotated[
        Path | None,
        typer.Option(
            "--registry",
            metavar="DIR",
            help="Also write a starter registry into DIR (a task, its grader set, an "
            "execution profile, a suite and both policies) that validates as written; "
            "refused (exit 2) when DIR already holds files.",
        ),
    ] = None,
    database_only: Annotated[
        bool,
        typer.Option(
            "--database-only",
            help="With --registry DIR of an existing registry: create the database only, "
            "write no starter file.",
        ),
    ] = False,
    json_flag: JsonFlag = False,
) -> None:
    """Create the registry database (if needed) and migrate it to head.

    Inside a git work tree, `.evalops/` (where the SQLite database lives) is added to the
    repository's .gitignore. Outside one, a warning says `sync` needs the registry committed
    in git, and a database created here is still listed in ./.gitignore. With
    --registry DIR, starter files are written too (exit 2 and nothing written if one of
    them exists, or DIR holds files at all: `--database-only` then creates the database
    alone).

    Example: evalops init --registry registry
    """
    from evalops.services.registry.scaffold import starter_registry, write_authority_example

    state = settings(ctx, json_flag)
    if starter is not None and state.project_above is not None:
        # The database would go to the project above while the starters landed inside its
        # registry, where the next `sync` would register them for good.
        raise InputError(
            f"{Path.cwd()} is inside the registry of the project at {state.project_above}: "
            "starter files written here would become part of that registry; run "
            "`evalops init` (the database only) here, or `evalops init --registry DIR` in a "
            "directory of its own",
            field="--registry",
        )
    if database_only:
        starter = None
    written = starter_registry(starter) if starter is not None else []
    disabled = write_authority_example(starter) if starter is not None else None
    _upgrade(state.db_url, "head", create_if_empty=True, lock_timeout=state.lock_timeout)
    in_git = _ignore_dot_evalops()
    status = _status(state.db_url)
    warnings = []
    if isinstance(in_git, str):
        warnings.append(in_git)
    elif not in_git:
        kept_out = " (.gitignore keeps .evalops/ out of it)" if Path(".evalops").is_dir() else ""
        warnings.append(_OUTSIDE_GIT.format(cwd=Path.cwd()) + kept_out)
    data: dict[str, object] = {**status, "warnings": warnings}
    if starter is not None:
        data["written"] = [{"file": str(w.path), "kind": w.kind, "id": w.id} for w in written]
        data["disabled"] = [str(disabled)] if disabled else []

    def human() -> None:
        say(f"initialized {status['database']} at {status['head']}")
        for w in written:
            say(f"wrote {w.path} ({w.kind} {w.id})")
        if disabled:
            say(f"wrote {disabled} (an authority, disabled until filled in: docs/authority.md)")
        for line in warnings:
            say(f"warning: {line}", err=True)
        if starter is not None:
            commit = (
                ", commit them"
                if in_git
                else ", `git init && git add -A && git commit -m registry`,"
            )
            say(
                f"next: edit the files, then `evalops validate {starter}`{commit} "
                f"and `evalops sync {starter}`"
            )

    emit(ctx, data, human)


@db_app.command()
def upgrade(
    ctx: typer.Context,
    revision: Annotated[str, typer.Argument(metavar="REVISION", help="Target revision.")] = "head",
    json_flag: JsonFlag = False,
) -> None:
    """Migrate the database up to REVISION (default head).

    Example: evalops db upgrade
    """
    state = settings(ctx, json_flag)
    if not revision.strip():
        raise InputError("give the revision to migrate up to: head, or a number", field="revision")
    _upgrade(state.db_url, revision, lock_timeout=state.lock_timeout)
    status = _status(state.db_url)
    emit(
        ctx,
        status,
        lambda: say(f"{status['database']} at {status['revision'] or 'base (empty)'}"),
    )


# `-1` (one revision down) is a revision, not an option: unknown options are arguments here.
@db_app.command(context_settings={"ignore_unknown_options": True})
def downgrade(
    ctx: typer.Context,
    revision: Annotated[
        str, typer.Argument(metavar="REVISION", help="Target revision, `-1` or `base`.")
    ],
    force_destroy_data: Annotated[
        bool,
        typer.Option(
            "--force-destroy-data",
            help="Downgrade even though the database holds audit events (they are lost).",
        ),
    ] = False,
    json_flag: JsonFlag = False,
) -> None:
    """Migrate the database down to REVISION.

    A database holding audit events is refused (exit 5) after printing what would be lost,
    unless --force-destroy-data: the chain, trials and decisions cannot be recovered.

    Example: evalops db downgrade base --force-destroy-data
    """
    from evalops.errors import is_driver_error
    from evalops.services.database import (
        engine_for,
        require_database_file,
        stored_revision,
        unreachable,
    )
    from evalops.services.destroy import at_risk, dropped_by
    from evalops.store import migrate

    state = settings(ctx, json_flag)
    if not revision.strip():
        raise InputError("give the revision to migrate down to: 0004, -1 or base", field="revision")
    engine = engine_for(state.db_url, lock_timeout=state.lock_timeout)
    try:
        require_database_file(state.db_url)
        try:
            current = stored_revision(engine)
            refuse_newer(state.db_url, current)
            try:
                dropped = dropped_by(current, revision)
            except Exception as exc:
                _bad_revision(exc, revision)
                raise
            lost, chained = at_risk(engine, dropped)
            if dropped.target == current:
                # Nothing to migrate: no refusal, nothing lost.
                lost, chained = {}, False
        except Exception as exc:
            if is_driver_error(exc):
                raise unreachable(state.db_url, exc) from None
            raise
        if chained and not force_destroy_data:
            raise RefusedError(_downgrade_refusal(lost))
        try:
            migrate.downgrade(state.db_url, engine, revision)
        except Exception as exc:
            _bad_revision(exc, revision)
            raise
    finally:
        engine.dispose()
    status = _status(state.db_url)
    emit(
        ctx,
        {**status, "destroyed": lost},
        lambda: say(f"{status['database']} at {status['revision'] or 'base (empty)'}"),
    )


@db_app.command()
def current(ctx: typer.Context, json_flag: JsonFlag = False) -> None:
    """Print the database's revision and the head this evalops needs.

    Example: evalops db current --json
    """
    state = settings(ctx, json_flag)
    status = _status(state.db_url)
    emit(
        ctx,
        status,
        lambda: say(
            f"{status['database']}: revision {status['revision'] or 'none'} (head {status['head']})"
        ),
    )


@db_app.command()
def check(ctx: typer.Context, json_flag: JsonFlag = False) -> None:
    """Exit 6 unless the database is at head, its storage is sound (SQLite's integrity
    check; the unique keys the rules rely on present and valid) and its schema matches the
    models.

    Example: evalops db check
    """
    from alembic.util import AutogenerateDiffsDetected

    from evalops.services.verify.run import snapshot_reader
    from evalops.services.verify.storage_checks import storage_problem
    from evalops.store import migrate
    from evalops.store.engine import redact
    from evalops.store.faults import damaged

    state = settings(ctx, json_flag)
    engine = state.engine(for_verify=True)
    try:
        with snapshot_reader(engine) as reader:
            problem = storage_problem(reader)
        if problem is not None:
            raise damaged(redact(state.db_url), problem)
        migrate.check(state.db_url, engine)
    except AutogenerateDiffsDetected as exc:
        raise VerificationError(f"schema differs from the models: {exc}") from None
    finally:
        engine.dispose()
    status = _status(state.db_url)
    emit(ctx, {**status, "ok": True}, lambda: say(f"ok: at {status['head']}"))


def register(app: typer.Typer) -> None:
    app.command("init")(init)
    app.add_typer(db_app, name="db")
