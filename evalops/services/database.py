"""Opening the registry database: usage errors are exit 2, a schema not at head is exit 2
outside `verify` (exit 6 inside it), and the URL is shown only with its secrets masked."""

from __future__ import annotations

import re

from sqlalchemy import inspect, text
from sqlalchemy.engine import Engine

from evalops.errors import EvalopsError, InputError, NoDatabase, VerificationError
from evalops.store.engine import (
    DEFAULT_LOCK_TIMEOUT,
    make_engine,
    normalize_url,
    redact,
    sqlite_path,
)
from evalops.store.faults import newer_schema, storage_fault
from evalops.store.schema import HEAD_REVISION, is_newer


def stored_revision(engine: Engine) -> str | None:
    """The database's Alembic revision, read without importing Alembic."""
    with engine.connect() as conn:
        if not inspect(conn).has_table("alembic_version"):
            return None
        return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()


def refuse_unversioned(engine: Engine, url: str, current: str | None) -> None:
    """A database with evalops's tables and no schema revision (its `alembic_version` row
    deleted or emptied by hand) is damaged (exit 6): `init` would fail on the tables it
    finds, and no command can know which schema they have."""
    if current is not None:
        return
    with engine.connect() as conn:
        tables = inspect(conn).has_table("audit_event")
    if tables:
        from evalops.store.faults import damaged

        raise damaged(
            redact(url),
            "it holds evalops's tables but no schema revision: the alembic_version row was "
            "removed by hand",
        )


def _reason(exc: BaseException, url: str) -> str:
    """The driver's message, first line only, with the URL's password never repeated."""
    from sqlalchemy.engine import make_url

    message = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    first = message[0] if message else type(exc).__name__
    try:
        password = make_url(url).password
    except Exception:
        password = None
    if password:
        first = masked_password(first, str(password))
    return first[:300]


# Where a driver's text can hold a password: a URL's `user:PASSWORD@` and a connection
# string's `password=PASSWORD` (any key ending in password, any case).
_AS_A_VALUE = r"(?:(?<=:){pw}(?=@)|(?i:(?<=password=)){pw}(?=[\s&'\"]|$))"
_ANYWHERE = 8
"""From this length on a password is masked wherever it appears: a shorter one (`1`,
`ion`) would be found inside the driver's words, and masking it there garbles the cause
and tells which letters the password holds."""


def masked_password(text: str, password: str) -> str:
    """`text` with `password` (and its URL-quoted form) shown as `***` wherever it stands
    as a value; anywhere at all when it is long enough not to be part of a word."""
    import re
    from urllib.parse import quote

    for form in dict.fromkeys((password, quote(password, safe=""))):
        if len(form) >= _ANYWHERE:
            text = text.replace(form, "***")
        else:
            text = re.sub(_AS_A_VALUE.format(pw=re.escape(form)), "***", text)
    return text


def engine_for(url: str, *, lock_timeout: float = DEFAULT_LOCK_TIMEOUT) -> Engine:
    """An engine on a well-formed URL whose server answers (else exit 2, URL masked)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    expected = "(expected sqlite:///PATH or postgresql://USER@HOST/DB)"
    try:
        backend = make_url(normalize_url(url)).get_backend_name()
    except (ArgumentError, ValueError) as exc:
        raise InputError(
            f"malformed database URL {redact(url)}: {_reason(exc, url)} {expected}", field="--db"
        ) from None
    if backend not in SUPPORTED_BACKENDS:
        raise InputError(
            f"unsupported database URL {redact(url)}: evalops stores its registry in SQLite "
            f"or PostgreSQL {expected}",
            field="--db",
        )
    options = make_url(normalize_url(url)).query if backend == "sqlite" else {}
    if options:
        # The driver would warn about them and go on (`mode=ro` then wrote anyway), or read
        # the path as a URI: none of them does what it says here.
        raise InputError(
            f"SQLite URL options are not supported ({', '.join(sorted(options))}) in "
            f"{redact(url)}: evalops opens the file itself, read-write and in WAL mode; give "
            "sqlite:///PATH alone (to keep a copy from being written, verify a copy, or use "
            "the file's permissions)",
            field="--db",
        )
    try:
        engine = make_engine(url, lock_timeout=lock_timeout)
    except (ArgumentError, NoSuchModuleError, ValueError, ImportError) as exc:
        raise InputError(
            f"malformed database URL {redact(url)}: {_reason(exc, url)} {expected}", field="--db"
        ) from None
    return engine


SUPPORTED_BACKENDS = ("sqlite", "postgresql")


def require_database_file(url: str) -> None:
    """A SQLite URL must name an existing file (opening it would create an empty one)."""
    path = sqlite_path(url)
    if path is not None and not path.exists():
        raise NoDatabase(
            f"no registry database at {path}: run `evalops init` first "
            f"(database at revision none, evalops needs {HEAD_REVISION})",
            field="--db",
        )


def unreachable(url: str, exc: BaseException) -> EvalopsError:
    """The usage error (exit 2) for a database the driver cannot open, URL masked."""
    return _unreachable(url, exc)


def _unreachable(url: str, exc: BaseException) -> EvalopsError:
    """A storage fault named by its cause (a locked, damaged or read-only SQLite file),
    else "cannot open database" with the driver's reason (exit 2)."""
    fault = storage_fault(exc, url, opening=True)
    if fault is not None:
        return fault
    reason = _reason(exc, url)
    hint = ""
    if re.search(r'role "[^"]*" does not exist', reason):
        hint = "; create that role on the server, or name an existing user in the URL"
    elif "does not exist" in reason:
        hint = "; create the database, then run `evalops init`"
    return InputError(f"cannot open database {redact(url)}: {reason}{hint}", field="--db")


def open_database(
    url: str, *, lock_timeout: float = DEFAULT_LOCK_TIMEOUT, for_verify: bool = False
) -> Engine:
    """An engine on a registry database that exists and is migrated to head.

    Missing, unreachable or malformed: exit 2 ("run evalops init"). Locked, damaged or
    read-only: the storage fault (store/faults.py). Newer than this evalops: exit 2 ("use a
    newer evalops"), for `verify` too. Older: exit 2 ("run evalops db upgrade"), except for
    `verify`, where it is a verification failure (6).
    """
    engine = engine_for(url, lock_timeout=lock_timeout)
    try:
        require_database_file(url)
    except InputError:
        engine.dispose()
        raise
    try:
        current = stored_revision(engine)
    except Exception as exc:  # the driver's own errors: refused, unknown host, bad auth...
        engine.dispose()
        raise _unreachable(url, exc) from None
    if is_newer(current):
        engine.dispose()
        raise newer_schema(redact(url), str(current), HEAD_REVISION)
    try:
        refuse_unversioned(engine, url, current)
    except EvalopsError:
        engine.dispose()
        raise
    if current != HEAD_REVISION:
        engine.dispose()
        message = (
            f"database {redact(url)} is at revision {current or 'none'}, evalops needs "
            f"{HEAD_REVISION}: run `evalops " + ("init`" if current is None else "db upgrade`")
        )
        if for_verify:
            raise VerificationError(message)
        raise InputError(message, field="--db")
    return engine
