"""voids: trials ingested by mistake left out from a void on, never deleted or edited

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-06 06:00:00

Two new tables (`trial_void`, one row per `VOID-n`; `voided_trial`, one row per trial row
it leaves out). A voided trial's id may be ingested again with new content, so a trial id
is now unique per content (`trial_id`, `record_digest`) instead of alone, and the foreign
keys that named a trial by id (a rerun's parent, a reconciliation's and a review's trial)
go: a foreign key needs a unique target. The services check those links against the live
trial of the id, as ingest, `trials reconcile` and `review resolve` did before. No row is
changed and no column added, so every row digest the chain recorded stays as it was.
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel.sql.sqltypes  # noqa: F401
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    for table in ("reconciliation", "review_result"):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_constraint(op.f(f"fk_{table}_trial_id_trial"), type_="foreignkey")
    with op.batch_alter_table("trial", schema=None) as batch_op:
        batch_op.drop_constraint(op.f("fk_trial_parent_trial_id_trial"), type_="foreignkey")
        batch_op.drop_constraint(op.f("uq_trial_trial_id"), type_="unique")
        batch_op.create_unique_constraint(
            op.f("uq_trial_trial_id_record_digest"), ["trial_id", "record_digest"]
        )
        batch_op.create_index(batch_op.f("ix_trial_trial_id"), ["trial_id"], unique=False)
    op.create_table(
        "trial_void",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("void_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("reason", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("batch", sa.Integer(), nullable=True),
        sa.Column("trial_count", sa.Integer(), nullable=False),
        sa.Column("hard_count", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("audit_seq", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["audit_seq"], ["audit_event.seq"], name=op.f("fk_trial_void_audit_seq_audit_event"),
            initially="DEFERRED", deferrable=True,
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_trial_void")),
        sa.UniqueConstraint("number", name=op.f("uq_trial_void_number")),
        sa.UniqueConstraint("void_id", name=op.f("uq_trial_void_void_id")),
    )  # fmt: skip
    with op.batch_alter_table("trial_void", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_trial_void_audit_seq"), ["audit_seq"])
    op.create_table(
        "voided_trial",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("void_row_id", sa.Integer(), nullable=False),
        sa.Column("trial_row_id", sa.Integer(), nullable=False),
        sa.Column("trial_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("classification", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("audit_seq", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["audit_seq"], ["audit_event.seq"],
            name=op.f("fk_voided_trial_audit_seq_audit_event"),
            initially="DEFERRED", deferrable=True,
        ),
        sa.ForeignKeyConstraint(
            ["trial_row_id"], ["trial.id"], name=op.f("fk_voided_trial_trial_row_id_trial")
        ),
        sa.ForeignKeyConstraint(
            ["void_row_id"], ["trial_void.id"], name=op.f("fk_voided_trial_void_row_id_trial_void")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_voided_trial")),
        sa.UniqueConstraint("trial_row_id", name=op.f("uq_voided_trial_trial_row_id")),
    )  # fmt: skip
    with op.batch_alter_table("voided_trial", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_voided_trial_audit_seq"), ["audit_seq"])
        batch_op.create_index(batch_op.f("ix_voided_trial_void_row_id"), ["void_row_id"])
        batch_op.create_index(batch_op.f("ix_voided_trial_trial_id"), ["trial_id"])


def downgrade() -> None:
    op.drop_table("voided_trial")
    op.drop_table("trial_void")
    with op.batch_alter_table("trial", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_trial_trial_id"))
        batch_op.drop_constraint(op.f("uq_trial_trial_id_record_digest"), type_="unique")
        batch_op.create_unique_constraint(op.f("uq_trial_trial_id"), ["trial_id"])
        batch_op.create_foreign_key(
            op.f("fk_trial_parent_trial_id_trial"), "trial", ["parent_trial_id"], ["trial_id"]
        )
    for table in ("reconciliation", "review_result"):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.create_foreign_key(
                op.f(f"fk_{table}_trial_id_trial"), "trial", ["trial_id"], ["trial_id"]
            )
