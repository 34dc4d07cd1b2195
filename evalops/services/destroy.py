"""What a destructive operation would lose, counted before it is allowed to run."""

from __future__ import annotations

from typing import NamedTuple

from sqlalchemy import inspect, text
from sqlalchemy.engine import Engine

# The tables whose loss matters to people, in the order a warning lists them, each with
# what one row is called (the JSON keys are the plurals).
COUNTED = (
    ("audit_event", "audit events", "audit event"),
    ("trial", "trials", "trial"),
    ("gate_decision", "gate decisions", "gate decision"),
    ("waiver", "waivers", "waiver"),
    ("calibration", "calibrations", "calibration"),
    ("incident", "incidents", "incident"),
    ("estimate", "estimates", "estimate"),
)
SINGULAR = {plural: singular for _, plural, singular in COUNTED}


def singular(what: str) -> str:
    """What one of `what` is called (`audit event`; `trial row (losing ...)` for `trial rows
    (losing ...)`)."""
    return SINGULAR.get(what, what.replace(" rows", " row", 1))


class Dropped(NamedTuple):
    """What the migrations from one revision down to another drop."""

    tables: set[str]
    columns: dict[str, set[str]]
    """Columns dropped from tables that stay, by table."""
    target: str | None
    """The revision it ends at (None: base)."""
    everything: bool
    """Every table goes (down to base)."""


def dropped_by(current: str | None, revision: str) -> Dropped:
    """What the migrations from `current` down to `revision` drop: found by running them on
    an empty in-memory database, never on the registry (a downgrade of one step drops what
    that step added, tables or columns, not the whole schema)."""
    from sqlalchemy import create_engine
    from sqlalchemy.pool import StaticPool

    from evalops.store import migrate

    scratch = create_engine("sqlite://", poolclass=StaticPool)
    try:
        if current is not None:
            migrate.upgrade("sqlite://", scratch, current)
        before = _schema(scratch)
        migrate.downgrade("sqlite://", scratch, revision)
        after = _schema(scratch)
        with scratch.connect() as conn:
            target = (
                conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
                if "alembic_version" in after
                else None
            )
    finally:
        scratch.dispose()
    tables = set(before) - set(after) - {"alembic_version"}
    columns = {t: before[t] - after[t] for t in after if t in before and before[t] - after[t]}
    return Dropped(tables, columns, target, not (set(after) - {"alembic_version"}))


def _schema(engine: Engine) -> dict[str, set[str]]:
    with engine.connect() as conn:
        found = inspect(conn)
        return {t: {c["name"] for c in found.get_columns(t)} for t in found.get_table_names()}


def at_risk(engine: Engine, dropped: Dropped) -> tuple[dict[str, int], bool]:
    """(rows a downgrade would drop or strip, by what they are: down to base, every counted
    table's; else each dropped table's rows and those of each table that loses columns,
    `trial rows (losing audit_seq)`; whether the database holds audit events at all, the
    condition of the refusal)."""
    out: dict[str, int] = {}
    named = {table: what for table, what, _ in COUNTED}
    with engine.connect() as conn:
        present = set(inspect(conn).get_table_names())
        counts = {
            table: int(conn.execute(text(f"SELECT count(*) FROM {table}")).scalar() or 0)
            for table in present - {"alembic_version"}
        }
    chained = bool(counts.get("audit_event"))
    if dropped.everything:
        # Down to base: what people count, of every table.
        return {named[t]: counts[t] for t in named if counts.get(t)}, chained
    for table in sorted(present & dropped.tables, key=lambda t: (t not in named, t)):
        if counts.get(table):
            out[named.get(table, f"{table} rows")] = counts[table]
    for table, columns in sorted(dropped.columns.items()):
        if counts.get(table):
            out[f"{table} rows (losing {', '.join(sorted(columns))})"] = counts[table]
    return out, chained
