"""Definitions edited without a new revision: what `sync` would refuse, said by `validate`.

A task's `revision` (a grader set's `version`) names one identity digest for good, and a
task's risk labels (`meta.risk`, `meta.protects`) never change under it either; a suite
never changes kind. `validate` checks files alone, so it said "ok" and the refusal came
only at `sync`; with the registry's database at hand it now warns first. Read through the
plain reader (`sqlite3` on a SQLite file), so `validate` stays free of SQLAlchemy.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from evalops.domain.humanize import short_digest
from evalops.registry.definitions import Definition
from evalops.store.reader import Reader

# kind -> (table, id column, revision column, digest column, the spec field to bump)
_REGISTERED = {
    "task": ("task_revision", "task_id", "revision", "task_digest", "revision"),
    "grader_set": ("grader_set", "grader_set_id", "version", "grader_set_digest", "version"),
}


def _labels(document: dict[str, Any]) -> tuple[str, list[str]]:
    meta = document.get("meta", {})
    return str(meta.get("risk")), sorted(meta.get("protects", []))


def _task_labels(reader: Reader, d: Definition) -> str | None:
    """`sync`'s label ratchet: the labels of a registered (id, revision) never change."""
    rows = reader.rows(
        'SELECT document FROM "task_revision" WHERE task_id = :id AND revision = :number '
        "ORDER BY id",
        {"id": d.id, "number": d.revision},
    )
    risk, protects = _labels(d.value)
    for row in rows:
        old_risk, old_protects = _labels(json.loads(row["document"]))
        for name, before, after in (
            ("risk", old_risk, risk),
            ("protects", old_protects, protects),
        ):
            if before != after:
                return (
                    f"{d.file}: task {d.id} revision {d.revision} is registered with meta.{name} "
                    f"{before}, this file says {after}: risk labels never change in place, "
                    "bump `revision` before `evalops sync`"
                )
    return None


def _suite_kind(reader: Reader, d: Definition) -> str | None:
    registered = reader.scalar(
        'SELECT kind FROM "suite" WHERE suite_id = :id ORDER BY id DESC LIMIT 1', {"id": d.id}
    )
    kind = d.value.get("kind")
    if registered is not None and registered != kind:
        return (
            f"{d.file}: suite {d.id} is registered as kind {registered}, this file says "
            f"{kind}: a suite never changes kind (declare a new suite)"
        )
    return None


def edited_in_place(reader: Reader, definitions: Iterable[Definition]) -> list[str]:
    """One warning per file `sync` would refuse against what is registered."""
    warnings: list[str] = []
    for d in definitions:
        if d.kind == "suite":
            found = _suite_kind(reader, d)
            if found:
                warnings.append(found)
            continue
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
        elif registered is not None and d.kind == "task":
            found = _task_labels(reader, d)
            if found:
                warnings.append(found)
    return warnings
