"""What a destructive operation would lose, counted before it is allowed to run."""

from __future__ import annotations

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
    """What one of `what` is called (`audit event`; `estimate row` for `estimate rows`)."""
    return SINGULAR.get(what, what.removesuffix("s"))


def dropped_tables(current: str | None, revision: str) -> set[str]:
    """The tables the migrations from `current` down to `revision` drop: found by running
    them on an empty in-memory database, never on the registry (a downgrade of one step
    drops what that step added, not the whole schema)."""
    from sqlalchemy import create_engine
    from sqlalchemy.pool import StaticPool

    from evalops.store import migrate

    scratch = create_engine("sqlite://", poolclass=StaticPool)
    try:
        if current is not None:
            migrate.upgrade("sqlite://", scratch, current)
        before = set(inspect(scratch).get_table_names())
        migrate.downgrade("sqlite://", scratch, revision)
        with scratch.connect() as conn:
            after = set(inspect(conn).get_table_names())
    finally:
        scratch.dispose()
    return before - after - {"alembic_version"}


def at_risk(engine: Engine, dropped: set[str] | None = None) -> tuple[dict[str, int], bool]:
    """(rows a downgrade would drop, those of `dropped` or of every table when None, by
    what they are; whether the database holds audit events at all, which DESIGN makes the
    refusal's condition)."""
    out: dict[str, int] = {}
    named = {table: what for table, what, _ in COUNTED}
    order = list(named)
    with engine.connect() as conn:
        present = set(inspect(conn).get_table_names())
        chained = "audit_event" in present and bool(
            conn.execute(text("SELECT count(*) FROM audit_event")).scalar()
        )
        tables = present if dropped is None else present & dropped
        for table in sorted(tables, key=lambda t: (order.index(t) if t in named else 99, t)):
            if table == "alembic_version" or (dropped is None and table not in named):
                continue
            n = int(conn.execute(text(f"SELECT count(*) FROM {table}")).scalar() or 0)
            if n:
                out[named.get(table, f"{table} rows")] = n
    # What people count (audit events, trials, ...) when any of it goes; the other tables'
    # rows only when nothing counted does (a downgrade that drops just the signed acts).
    counted = {what: n for what, n in out.items() if not what.endswith(" rows")}
    return counted or out, chained
