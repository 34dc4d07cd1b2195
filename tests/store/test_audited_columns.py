"""The plain list of what each audited table's row digest covers is the table models'.

`verify` on a SQLite file re-hashes every row through `sqlite3`, reading the columns
evalops/store/audited_columns.py names; the events recorded the digests of what
evalops/store/rowdigest.py `digest_plan` derives from the models. Both must be the same,
table for table and column for column: a column or a table added to the models and not to
the list would go unchecked by `verify` (or fail every verify, for a new column's rows).
"""

from __future__ import annotations

from sqlalchemy import Table
from sqlmodel import SQLModel

import evalops.store.tables  # noqa: F401  (registers every table in the metadata)
from evalops.store.audited_columns import AUDITED_COLUMNS
from evalops.store.rowdigest import COVERED_ELSEWHERE, digest_plan
from evalops.store.rowlines import BOOLEAN, PLAIN, TIMESTAMP


def _audited() -> list[Table]:
    """Every table whose rows carry the audit seq of the event that recorded them."""
    return [t for t in SQLModel.metadata.tables.values() if "audit_seq" in t.columns]


def test_the_same_tables_as_the_models_in_name_order() -> None:
    names = sorted(t.name for t in _audited())
    assert list(AUDITED_COLUMNS) == names
    assert "trial" in names and "audit_event" not in names  # an event is no row it records


def test_each_table_s_columns_and_kinds_are_its_digest_plan() -> None:
    for table in _audited():
        assert AUDITED_COLUMNS[table.name] == tuple(digest_plan(table)), table.name


def test_every_column_but_audit_seq_and_the_ones_covered_elsewhere_is_read() -> None:
    """Derived here from the columns themselves, not from `digest_plan`."""
    for table in _audited():
        expected = sorted(
            c.name
            for c in table.columns
            if c.name != "audit_seq" and (table.name, c.name) not in COVERED_ELSEWHERE
        )
        assert [name for name, _ in AUDITED_COLUMNS[table.name]] == expected, table.name
    assert ("record", PLAIN) not in AUDITED_COLUMNS["trial"]
    assert {kind for plan in AUDITED_COLUMNS.values() for _, kind in plan} == {
        TIMESTAMP,
        BOOLEAN,
        PLAIN,
    }
