"""Definitions edited without a new revision: what `sync` would refuse, said by `validate`.

A task's `revision` (a grader set's `version`) names one identity digest for good: a file
whose (id, revision) is registered with another digest must be bumped before `sync` takes
it. `validate` checks files alone, so it said "ok" and the refusal came only at `sync`;
with the registry's database at hand it now warns first. Read through the plain reader
(`sqlite3` on a SQLite file), so `validate` stays free of SQLAlchemy.
"""

from __future__ import annotations

from collections.abc import Iterable

from evalops.domain.humanize import short_digest
from evalops.registry.definitions import Definition
from evalops.store.reader import Reader

# kind -> (table, id column, revision column, digest column, the spec field to bump)
_REGISTERED = {
    "task": ("task_revision", "task_id", "revision", "task_digest", "revision"),
    "grader_set": ("grader_set", "grader_set_id", "version", "grader_set_digest", "version"),
}


def edited_in_place(reader: Reader, definitions: Iterable[Definition]) -> list[str]:
    """One warning per file whose registered (id, revision) has another digest."""
    warnings: list[str] = []
    for d in definitions:
        if d.kind not in _REGISTERED or d.revision is None:
            continue
        table, id_column, number_column, digest_column, field = _REGISTERED[d.kind]
        registered = reader.scalar(
            f'SELECT "{digest_column}" FROM "{table}" '
            f'WHERE "{id_column}" = :id AND "{number_column}" = :number ORDER BY id LIMIT 1',
            {"id": d.id, "number": d.revision},
        )
        if registered is not None and registered != d.digest:
            kind = d.kind.replace("_", " ")
            warnings.append(
                f"{d.file}: {kind} {d.id} {field} {d.revision} is registered with "
                f"{digest_column} {short_digest(registered)}, this file has "
                f"{short_digest(d.digest)}: "
                f"bump `{field}` before `evalops sync` (it refuses the file as it is)"
            )
    return warnings
