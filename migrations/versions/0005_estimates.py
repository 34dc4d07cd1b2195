"""estimates: stored estimates of estimation suites, with every input, under their event

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-06 06:00:00

A new table only: nothing existing is carried forward or changed.
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel.sql.sqltypes  # noqa: F401
from alembic import op


revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "estimate",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("estimate_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("suite_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("build", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("baseline", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("suite_digest", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("execution_digest", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("evaluated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("inputs", sa.Text(), nullable=False),
        sa.Column("inputs_digest", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("result", sa.Text(), nullable=False),
        sa.Column("result_digest", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("audit_seq", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["audit_seq"], ["audit_event.seq"], name=op.f("fk_estimate_audit_seq_audit_event"),
            initially="DEFERRED", deferrable=True,
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_estimate")),
        sa.UniqueConstraint("estimate_id", name=op.f("uq_estimate_estimate_id")),
        sa.UniqueConstraint("number", name=op.f("uq_estimate_number")),
    )  # fmt: skip
    with op.batch_alter_table("estimate", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_estimate_audit_seq"), ["audit_seq"])
        batch_op.create_index(batch_op.f("ix_estimate_build"), ["build"])
        batch_op.create_index(batch_op.f("ix_estimate_suite_id"), ["suite_id"])


def downgrade() -> None:
    op.drop_table("estimate")
