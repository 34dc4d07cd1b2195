"""One error tree for evalops; each error knows its exit code (docs/cli.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_INPUT = 2
EXIT_HOLD = 3
EXIT_BLOCK = 4
EXIT_REFUSED = 5
EXIT_VERIFY = 6
#: `trajectory grade` when the trajectory is not matched: the check fails the way a gate
#: block does (0 is matched; 2 stays a bad input, 6 tampering).
EXIT_UNMATCHED = EXIT_BLOCK


@dataclass
class EvalopsError(Exception):
    """Base of every error the CLI turns into an exit code and a one-line message."""

    message: str
    file: str | None = None
    line: int | None = None
    field: str | None = None

    exit_code: ClassVar[int] = EXIT_INTERNAL

    def __post_init__(self) -> None:
        if self.field == "":
            self.field = None  # a whole-document problem has no field path

    def __str__(self) -> str:
        return self.one_line()

    def one_line(self) -> str:
        """`<file>:<line>: <field>: <what>`, leaving out the parts that are unknown.

        The compiler-style prefix lets editors and CI annotations jump to the spot.
        """
        where = [
            part
            for part in (
                f"{self.file}:{self.line}" if self.file and self.line else self.file,
                self.field,
            )
            if part
        ]
        return ": ".join([*where, self.message])

    def json_entry(self, code: int | None = None) -> dict[str, object]:
        """The contract's `--json` error object (docs/cli.md), with `code` (this error's
        exit code unless given)."""
        code = self.exit_code if code is None else code
        return error_object(code, self.message, self.file, self.line, self.field)


#: The contract's words for a writer that waited for the lock in vain (docs/cli.md).
BUSY_MESSAGE = "registry is busy: another writer holds it"


class BusyError(EvalopsError):
    """Another writer held the registry's write lock beyond --lock-timeout; nothing changed."""

    exit_code: ClassVar[int] = EXIT_INTERNAL


class StorageFault(EvalopsError):
    """The storage under the database failed a read or a write (the disk is full, a
    file-size limit was reached, an I/O error): the transaction was rolled back, nothing
    was stored, and the same command may be run again once the cause is gone (exit 1, as a
    busy registry)."""

    exit_code: ClassVar[int] = EXIT_INTERNAL


class InputError(EvalopsError):
    """Bad file, schema violation or unknown reference: nothing was written."""

    exit_code: ClassVar[int] = EXIT_INPUT


class NoDatabase(InputError):
    """The SQLite file a database URL names does not exist (the CLI says where it looked)."""


class DatabaseUnavailable(InputError):
    """The database cannot be used from here: the connection was lost (a server restart,
    a failover, an administrator), or its location is read-only (exit 2, as an unreachable
    database)."""


class NewerSchema(InputError):
    """The database was migrated by a newer evalops than this one: nothing is changed, and
    no command advises an upgrade that cannot go back (exit 2)."""


class RefusedError(EvalopsError):
    """A policy refused the change; the lifecycle is unchanged and the refusal audited."""

    exit_code: ClassVar[int] = EXIT_REFUSED


class VerificationError(EvalopsError):
    """Tampering, a digest mismatch, or a database schema not at head."""

    exit_code: ClassVar[int] = EXIT_VERIFY


class DamagedDatabase(VerificationError):
    """The database file is damaged (SQLite calls it malformed; PostgreSQL reports data or
    an index corrupted, or a unique index the rules rely on is missing or invalid): restore
    it from a backup (exit 6)."""


@dataclass
class InputErrors(InputError):
    """Several input errors found in one pass; the first one is the headline."""

    errors: tuple[InputError, ...] = ()

    @classmethod
    def of(cls, errors: list[InputError]) -> InputError:
        # A file with several problems contributes each of them, not its headline.
        errors = [one for e in errors for one in (getattr(e, "errors", ()) or (e,))]
        if not errors:
            return InputError("input rejected")
        if len(errors) == 1:
            return errors[0]
        first = errors[0]
        return cls(
            message=f"{first.message} (and {len(errors) - 1} more)",
            file=first.file,
            line=first.line,
            field=first.field,
            errors=tuple(errors),
        )


@dataclass
class RejectedRecords(InputErrors):
    """An all-or-nothing ingest refused: every bad record (up to `cap`), nothing stored.

    The headline is the first bad record itself (its file, line, field and message, nothing
    appended), so editors and CI annotations jump to it. With `--json` the error document
    also carries the ingest shape (docs/cli.md): `ingested` (0),
    `skipped_identical`, `rejected` (every bad record up to the cap), `rejected_total` and
    `rejected_cap`; people read every record and a count on stderr.
    """

    total: int = 0
    cap: int = 0
    skipped_identical: int = 0
    remedy: str = "fix them, or allow some with --max-bad-records N"
    """What the user can do (an import has no --max-bad-records)."""
    unchecked: int = 0
    """Lines after the report filled up and the refusal was certain: counted, not checked."""

    @classmethod
    def of_records(
        cls,
        errors: list[InputError],
        *,
        total: int,
        cap: int,
        skipped_identical: int,
        remedy: str | None = None,
        unchecked: int = 0,
    ) -> RejectedRecords:
        first = errors[0] if errors else InputError("input rejected")
        return cls(
            message=first.message,
            file=first.file,
            line=first.line,
            field=first.field,
            errors=tuple(errors),
            total=total,
            cap=cap,
            skipped_identical=skipped_identical,
            **({"remedy": remedy} if remedy else {}),
            unchecked=unchecked,
        )

    def json_extra(self) -> dict[str, object]:
        extra: dict[str, object] = {
            "ingested": 0,
            "skipped_identical": self.skipped_identical,
            "rejected": [rejected_entry(e) for e in self.errors],
            "rejected_total": self.total,
            "rejected_cap": self.cap,
        }
        if self.unchecked:
            extra["unchecked_lines"] = self.unchecked  # only when lines were left unchecked
        return extra

    def human_lines(self) -> list[str]:
        lines = [f"rejected: {e.one_line()}" for e in self.errors]
        if self.total > len(self.errors):
            lines.append(
                f"rejected: {self.total - len(self.errors)} more bad records not listed "
                f"(the report stops at {self.cap})"
            )
        if self.unchecked:
            lines.append(
                f"rejected: {self.unchecked} more lines counted, not checked (refused already)"
            )
        records = "bad record" if self.total == 1 else "bad records"
        return [
            *lines,
            f"error: {self.total} {records}; nothing was stored (all or nothing: {self.remedy})",
        ]


def is_driver_error(exc: BaseException) -> bool:
    """An error raised by SQLAlchemy or a database driver (not by evalops itself): what a
    database said, through SQLAlchemy or straight from the driver (the readers run their
    SQL on the driver's connection)."""
    return type(exc).__module__.startswith(("sqlalchemy", "psycopg", "sqlite3"))


def error_object(
    code: int,
    message: str,
    file: str | None = None,
    line: int | None = None,
    field: str | None = None,
) -> dict[str, object]:
    """The contract's `--json` error object (docs/cli.md)."""
    return {"code": code, "message": message, "file": file, "line": line, "field": field}


def rejected_entry(error: InputError) -> dict[str, object]:
    """One rejected record as `trials ingest --json` lists it."""
    return {"file": error.file, "line": error.line, "field": error.field, "error": error.message}
