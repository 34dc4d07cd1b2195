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
)
SINGULAR = {plural: singular for _, plural, singular in COUNTED}


def at_risk(engine: Engine) -> dict[str, int]:
    """Rows a downgrade would drop, by what they are; empty when the chain is empty."""
    out: dict[str, int] = {}
    with engine.connect() as conn:
        tables = set(inspect(conn).get_table_names())
        for table, what, _ in COUNTED:
            if table in tables:
                n = int(conn.execute(text(f"SELECT count(*) FROM {table}")).scalar() or 0)
                if n:
                    out[what] = n
    return out if out.get("audit events") else {}
