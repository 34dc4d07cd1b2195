"""What `sync` refuses of a definition already registered, and what `validate` warns of.

A task's `revision` (a grader set's `version`) names one identity digest for good; a task's
risk labels (`meta.risk`, `meta.protects`) never change under it; a suite never changes
kind (docs/digests.md, docs/gate.md). `sync` refuses such a file, and `validate` warns of it
first when the registry's SQLite file is at hand: one rule for both, reading what is
registered through a `Reader` (`sqlite3` itself for `validate`, which stays free of
SQLAlchemy; the sync's own transaction for `sync`), one query per table, never one per file.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, NamedTuple

from evalops.domain.facts import StoredMeta, StoredTaskHead
from evalops.errors import InputError
from evalops.registry.definitions import Definition
from evalops.store.reader import Reader


class Registered(NamedTuple):
    """One registered row of a definition's table, as the rule reads it."""

    id: int
    #: The identity digest column's name and value (None for a suite, which has none).
    digest_column: str | None
    digest: str | None
    document_digest: str
    #: A suite's kind; None elsewhere.
    kind: str | None
    #: A task's stored document (its labels are read from it); None elsewhere.
    document: str | None


# table -> (its natural key's columns, then `Registered`'s fields). Every row of a key, in
# the order registered (`ORDER BY id`).
_TABLES: dict[str, tuple[str, int]] = {
    "task": (
        "SELECT task_id, revision, id, 'task_digest', task_digest, document_digest, NULL, "
        'document FROM "task_revision" ORDER BY id',
        2,
    ),
    "grader_set": (
        "SELECT grader_set_id, version, id, 'grader_set_digest', grader_set_digest, "
        'document_digest, NULL, NULL FROM "grader_set" ORDER BY id',
        2,
    ),
    "execution_profile": (
        "SELECT execution_id, id, 'execution_digest', execution_digest, document_digest, "
        'NULL, NULL FROM "execution_profile" ORDER BY id',
        1,
    ),
    "suite": (
        'SELECT suite_id, id, NULL, NULL, document_digest, kind, NULL FROM "suite" ORDER BY id',
        1,
    ),
    "policy": (
        "SELECT kind, policy_id, id, 'policy_digest', policy_digest, document_digest, NULL, "
        'NULL FROM "policy" ORDER BY id',
        2,
    ),
}


def _natural_key(d: Definition) -> tuple[str, Any]:
    """The table `d` is registered in and its natural key there (read from the file's
    value: a definition's pydantic model is built only for what is registered)."""
    if d.kind in ("task", "grader_set"):
        return d.kind, (d.id, d.revision)
    if d.kind in ("execution_profile", "suite"):
        return d.kind, d.id
    # Suite and gate policies and authority files share one table, keyed by kind too.
    return "policy", (d.kind, d.id)


class RegisteredRows:
    """The rows registered under each definition's natural key (id, and revision or
    version where it has one), each table read whole the first time a definition of its
    kind asks: a registry of 10,000 tasks synced unchanged made 10,000 queries, one per
    file. A key's rows are in the order they were registered."""

    def __init__(self, reader: Reader) -> None:
        self._reader = reader
        self._by_table: dict[str, dict[Any, list[Registered]]] = {}

    def of(self, d: Definition) -> list[Registered]:
        table, key = _natural_key(d)
        if table not in self._by_table:
            self._by_table[table] = self._read(table)
        return list(self._by_table[table].get(key, ()))

    def _read(self, table: str) -> dict[Any, list[Registered]]:
        sql, width = _TABLES[table]
        grouped: dict[Any, list[Registered]] = {}
        make = Registered._make
        for row in self._reader.tuples(sql):
            key = row[:width] if width > 1 else row[0]
            grouped.setdefault(key, []).append(make(row[width:]))
        return grouped


def conflict(d: Definition, rows: list[Registered]) -> InputError | None:
    """A revision/version registered with another identity digest, risk labels changed
    under a registered revision, or a suite changing kind: the error naming the file's
    line and field, or None."""
    if d.kind in ("task", "grader_set"):
        field = "revision" if d.kind == "task" else "version"
        subject = "task" if d.kind == "task" else "grader set"
        for row in rows:
            if row.digest != d.digest:
                return _refusal(
                    d,
                    f"{subject} {d.id} {field} {d.revision} is registered with "
                    f"{row.digest_column} {row.digest}, this file has {d.digest}: bump {field}",
                    field,
                )
    if d.kind == "task":
        return _label_change(d, rows)
    if d.kind == "suite" and rows:
        latest = max(rows, key=lambda r: r.id)
        if latest.kind != d.value["kind"]:
            return _refusal(
                d,
                f"suite {d.id} is registered as kind {latest.kind}; a suite never changes "
                "kind (declare a new suite)",
                "kind",
            )
    return None


def _refusal(d: Definition, message: str, field: str) -> InputError:
    """`message` at the line of the file's top-level `field`."""
    return InputError(message, d.file, d.lines.get((field,), 1), field)


def _label_change(d: Definition, rows: list[Registered]) -> InputError | None:
    """Risk labels ratchet (docs/gate.md): a new revision carries new labels. Both sides are
    read from the documents as the gate reads them (`StoredMeta`): the file was
    validated as it was read, each stored one when it was registered, and validating 10,000
    of them again cost seconds of every sync. Every stored row is read, even one whose
    digest says it holds this very document: the gate reads the labels from the document,
    not from its digest."""
    meta = StoredMeta.of(d.value)
    for row in rows:
        old = _stored_meta(d, row)
        if isinstance(old, InputError):
            return old
        for name, before, after in (
            ("risk", old.risk, meta.risk),
            ("protects", sorted(old.protects), sorted(meta.protects)),
        ):
            if before != after:
                return InputError(
                    f"task {d.id} revision {d.revision} is registered with meta.{name} "
                    f"{before}, this file says {after}: risk labels never change in place, "
                    "bump revision (a lower risk takes effect only when that revision is "
                    "promoted)",
                    d.file,
                    d.lines.get(("meta", name), d.lines.get(("meta",), 1)),
                    f"meta.{name}",
                )
    return None


def _stored_meta(d: Definition, row: Registered) -> StoredMeta | InputError:
    """The labels of a registered revision's stored document, read as the gate reads the
    document (its labels and its trial plan: a document the gate could not read is not
    built on); a document that is not a task's any more was changed outside evalops: the
    error saying so."""
    try:
        return StoredTaskHead.of(json.loads(row.document or "")).meta
    except (ValueError, TypeError, KeyError, AttributeError):
        return _refusal(
            d,
            f"task {d.id} revision {d.revision} is registered with a document that is not a "
            "task's: the database was changed outside evalops (run `evalops verify`)",
            "revision",
        )


def refusals(reader: Reader, definitions: Iterable[Definition]) -> list[InputError]:
    """What `sync` would refuse of `definitions` against what `reader` shows registered."""
    registered = RegisteredRows(reader)
    found = (conflict(d, registered.of(d)) for d in definitions if d.kind in _RATCHETED)
    return [problem for problem in found if problem is not None]


#: The kinds a rule above concerns (a policy or profile changed is a new row, not a refusal).
_RATCHETED = ("task", "grader_set", "suite")
