"""tamper evidence: every row under its audit event; definitions in force

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30 21:30:52

- Every `audit_seq` foreign key becomes DEFERRABLE INITIALLY DEFERRED (a change's rows are
  flushed before the event that digests them).
- `trial`, `grader_config` and `sync_run` get the `audit_seq` of the event that recorded
  them; `reconciliation` gets the position of the effect it settled; `gate_decision` the
  sync run it was made under; the new `sync_in_force` table records, per sync, the
  definitions its commit holds.
- Existing databases are carried forward, recorded as such: one `migration.in_force` event
  puts the newest registered definition of every id in force, and one `migration.rows`
  event commits to the digest of every row that existed before, per event, so `verify` can
  check those rows as it checks new ones.
"""

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
import sqlmodel.sql.sqltypes  # noqa: F401
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

AUDITED = (
    "calibration",
    "calibration_invalidation",
    "execution_profile",
    "gate_decision",
    "grader_set",
    "incident",
    "incident_event",
    "ingest_batch",
    "policy",
    "promotion",
    "reconciliation",
    "review_result",
    "suite",
    "suite_membership",
    "task_revision",
    "waiver",
    "waiver_revocation",
)
NEW_AUDITED = ("grader_config", "sync_run", "trial")
# Integers from user files reach 2^53-1: 64-bit columns on PostgreSQL too.
BIG_COLUMNS = (
    ("task_revision", "revision"),
    ("grader_set", "version"),
    ("grader_config", "grader_version"),
    ("trial", "trial_index"),
    ("calibration", "grader_version"),
)
ACTOR = "evalops migration 0002"


def _fk(table: str) -> str:
    return f"fk_{table}_audit_seq_audit_event"


def upgrade() -> None:
    for table in AUDITED:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_constraint(_fk(table), type_="foreignkey")
            batch_op.create_foreign_key(
                _fk(table), "audit_event", ["audit_seq"], ["seq"],
                initially="DEFERRED", deferrable=True,
            )
    op.create_table(
        "sync_in_force",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("sync_run_id", sa.Integer(), nullable=False),
        sa.Column("kind", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("definition_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("document_digest", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("audit_seq", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["audit_seq"], ["audit_event.seq"], name=op.f(_fk("sync_in_force")),
            initially="DEFERRED", deferrable=True,
        ),
        sa.ForeignKeyConstraint(
            ["sync_run_id"], ["sync_run.id"], name=op.f("fk_sync_in_force_sync_run_id_sync_run")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sync_in_force")),
        sa.UniqueConstraint(
            "sync_run_id", "kind", "definition_id",
            name=op.f("uq_sync_in_force_sync_run_id_kind_definition_id"),
        ),
    )
    with op.batch_alter_table("sync_in_force", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_sync_in_force_audit_seq"), ["audit_seq"])
        batch_op.create_index(batch_op.f("ix_sync_in_force_sync_run_id"), ["sync_run_id"])

    for table in NEW_AUDITED:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column("audit_seq", sa.Integer(), nullable=True))
    op.execute(
        "UPDATE trial SET audit_seq = (SELECT b.audit_seq FROM ingest_batch b "
        "WHERE b.id = trial.ingest_batch_id)"
    )
    op.execute(
        "UPDATE grader_config SET audit_seq = (SELECT g.audit_seq FROM grader_set g "
        "WHERE g.id = grader_config.grader_set_row_id)"
    )
    registered = " UNION ALL ".join(
        f"SELECT sync_run_id, audit_seq FROM {t}"
        for t in ("task_revision", "execution_profile", "grader_set", "suite", "policy")
    )
    op.execute(
        f"UPDATE sync_run SET audit_seq = (SELECT min(r.audit_seq) FROM ({registered}) r "
        "WHERE r.sync_run_id = sync_run.id)"
    )
    for table in NEW_AUDITED:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.alter_column("audit_seq", existing_type=sa.Integer(), nullable=False)
            batch_op.create_index(batch_op.f(f"ix_{table}_audit_seq"), ["audit_seq"])
            batch_op.create_foreign_key(
                _fk(table), "audit_event", ["audit_seq"], ["seq"],
                initially="DEFERRED", deferrable=True,
            )
    for table, column in BIG_COLUMNS:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.alter_column(
                column, existing_type=sa.Integer(), type_=sa.BigInteger(), existing_nullable=False
            )
    with op.batch_alter_table("trial", schema=None) as batch_op:
        batch_op.create_index(
            "ix_trial_run_case_index", ["run_id", "eval_case_digest", "trial_index"]
        )
        batch_op.create_index("ix_trial_execution_task", ["execution_digest", "task_id"])
    with op.batch_alter_table("reconciliation", schema=None) as batch_op:
        batch_op.add_column(sa.Column("effect_index", sa.Integer(), nullable=True))
    with op.batch_alter_table("gate_decision", schema=None) as batch_op:
        batch_op.add_column(sa.Column("sync_run_id", sa.Integer(), nullable=True))
        batch_op.create_foreign_key(
            batch_op.f("fk_gate_decision_sync_run_id_sync_run"), "sync_run",
            ["sync_run_id"], ["id"],
        )
    _carry_data_forward(op.get_bind())


def _carry_data_forward(conn: sa.Connection) -> None:
    """Settle legacy reconciliations, put definitions in force, and commit to every
    existing row's digest in the chain (each step recorded as its own audit event)."""
    from evalops.domain.audit_chain import event_hash
    from evalops.domain.canonical import GENESIS_HASH, canonical_text, sha256_digest
    from evalops.domain.vocabulary import format_timestamp
    from evalops.store.rowdigest import ROWS_VERSION, RowsDigest
    from evalops.store.tables import SQLModel

    metadata = SQLModel.metadata
    _settle_legacy_reconciliations(conn)
    head = conn.execute(sa.text("SELECT seq, hash FROM audit_event ORDER BY seq DESC LIMIT 1"))
    last = head.first()
    if last is None:
        return  # an empty database: nothing to carry forward
    events = metadata.tables["audit_event"]
    last_at = conn.execute(sa.select(events.c.at).where(events.c.seq == last[0])).scalar_one()
    # Audit time never runs backwards, whatever this machine's clock says.
    now = max(datetime.now(UTC), last_at)
    state = {"seq": int(last[0]), "hash": str(last[1])}

    def append(kind: str, subject: str, payload: dict[str, Any]) -> int:
        seq = state["seq"] + 1
        text = canonical_text(payload)
        payload_digest = sha256_digest(text.encode("utf-8"))
        at = format_timestamp(now)
        hashed = event_hash(
            state["hash"] or GENESIS_HASH, seq=seq, at=at, actor=ACTOR, kind=kind,
            subject=subject, payload_digest=payload_digest,
        )
        conn.execute(
            metadata.tables["audit_event"].insert().values(
                seq=seq, at=now, actor=ACTOR, kind=kind, subject=subject,
                payload_digest=payload_digest, payload=text, prev_hash=state["hash"],
                hash=hashed,
            )
        )
        state["seq"], state["hash"] = seq, hashed
        return seq

    # Every row that exists now, per event and table, before this migration adds any.
    legacy: dict[int, RowsDigest] = {}
    for table in sorted(metadata.tables.values(), key=lambda t: t.name):
        # Only the tables this revision knows: later revisions add audited tables that do
        # not exist yet when it runs.
        if table.name not in (*AUDITED, *NEW_AUDITED):
            continue
        for row in conn.execute(sa.select(table).order_by(table.c.audit_seq, table.c.id)):
            legacy.setdefault(row.audit_seq, RowsDigest()).add(table, row._mapping)
    append(
        "migration.rows",
        "migration:0002",
        {
            "migration": "0002",
            "rows_version": ROWS_VERSION,
            "legacy_rows": {str(seq): d.as_payload() for seq, d in sorted(legacy.items())},
        },
    )
    _put_in_force(conn, metadata, append, now)


def _settle_legacy_reconciliations(conn: sa.Connection) -> None:
    """A reconciliation now settles one requested/unknown effect: the first such effect
    with its key (legacy rows named a key only); rows that match none stay unsettled."""
    import json

    rows = conn.execute(
        sa.text(
            "SELECT r.id, r.effect_key, t.record, t.trial_id FROM reconciliation r "
            "JOIN trial t ON t.trial_id = r.trial_id ORDER BY r.id"
        )
    ).all()
    taken: set[tuple[str, int]] = set()
    for rec_id, key, record, trial_key in rows:
        effects = json.loads(record).get("external_effects", [])
        for index, effect in enumerate(effects):
            if (
                effect.get("effect_key") == key
                and effect.get("status") in ("requested", "unknown")
                and (trial_key, index) not in taken
            ):
                taken.add((trial_key, index))
                conn.execute(
                    sa.text("UPDATE reconciliation SET effect_index = :i WHERE id = :id"),
                    {"i": index, "id": rec_id},
                )
                break


def _put_in_force(conn: sa.Connection, metadata: Any, append: Any, now: datetime) -> None:
    from evalops.store.rowdigest import RowsDigest

    sources = (
        ("task", "task_revision", "task_id", None),
        ("execution_profile", "execution_profile", "execution_id", None),
        ("grader_set", "grader_set", "grader_set_id", None),
        ("suite", "suite", "suite_id", None),
        ("suite_policy", "policy", "policy_id", "suite_policy"),
        ("gate_policy", "policy", "policy_id", "gate_policy"),
    )
    newest: dict[tuple[str, str], str] = {}
    for kind, table_name, id_column, policy_kind in sources:
        table = metadata.tables[table_name]
        stmt = sa.select(table.c[id_column], table.c.document_digest).order_by(table.c.id)
        if policy_kind:
            stmt = stmt.where(table.c.kind == policy_kind)
        for ident, document_digest in conn.execute(stmt):
            newest[(kind, ident)] = document_digest
    if not newest:
        return
    latest = conn.execute(
        sa.text("SELECT git_commit, git_dirty, git_branch, git_remote, registry_path "
                "FROM sync_run ORDER BY id DESC LIMIT 1")
    ).first()
    head = conn.execute(sa.text("SELECT max(seq) FROM audit_event")).scalar()
    seq = int(head) + 1
    run_table = metadata.tables["sync_run"]
    run_id = conn.execute(
        run_table.insert().values(
            at=now, actor=ACTOR, registry_path=latest[4] if latest else "",
            git_commit=latest[0] if latest else None,
            git_dirty=bool(latest[1]) if latest else False,
            git_branch=latest[2] if latest else None, git_remote=latest[3] if latest else None,
            audit_seq=seq,
        )
    ).inserted_primary_key[0]
    forced_table = metadata.tables["sync_in_force"]
    for (kind, ident), document_digest in sorted(newest.items()):
        conn.execute(
            forced_table.insert().values(
                sync_run_id=run_id, kind=kind, definition_id=ident,
                document_digest=document_digest, audit_seq=seq,
            )
        )
    digest = RowsDigest()
    for table in (run_table, forced_table):
        for row in conn.execute(
            sa.select(table).where(table.c.audit_seq == seq).order_by(table.c.id)
        ):
            digest.add(table, row._mapping)
    append(
        "migration.in_force",
        f"sync:{run_id}",
        {
            "sync_run": run_id,
            "in_force": [
                {"kind": k, "id": i, "document_digest": d} for (k, i), d in sorted(newest.items())
            ],
            "rows": digest.as_payload(),
        },
    )


def downgrade() -> None:
    with op.batch_alter_table("gate_decision", schema=None) as batch_op:
        batch_op.drop_constraint(
            batch_op.f("fk_gate_decision_sync_run_id_sync_run"), type_="foreignkey"
        )
        batch_op.drop_column("sync_run_id")
    with op.batch_alter_table("reconciliation", schema=None) as batch_op:
        batch_op.drop_column("effect_index")
    with op.batch_alter_table("trial", schema=None) as batch_op:
        batch_op.drop_index("ix_trial_execution_task")
        batch_op.drop_index("ix_trial_run_case_index")
    for table, column in BIG_COLUMNS:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.alter_column(
                column, existing_type=sa.BigInteger(), type_=sa.Integer(), existing_nullable=False
            )
    for table in NEW_AUDITED:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_constraint(_fk(table), type_="foreignkey")
            batch_op.drop_index(batch_op.f(f"ix_{table}_audit_seq"))
            batch_op.drop_column("audit_seq")
    with op.batch_alter_table("sync_in_force", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_sync_in_force_sync_run_id"))
        batch_op.drop_index(batch_op.f("ix_sync_in_force_audit_seq"))
    op.drop_table("sync_in_force")
    for table in AUDITED:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_constraint(_fk(table), type_="foreignkey")
            batch_op.create_foreign_key(_fk(table), "audit_event", ["audit_seq"], ["seq"])
