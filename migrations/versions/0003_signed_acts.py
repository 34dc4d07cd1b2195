"""signed acts: the act, its SSH signatures and signer principals, under the row's event

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01 18:10:00

A new table only: registries without an authority never write to it, and nothing existing
is carried forward or changed.
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel.sql.sqltypes  # noqa: F401
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "signed_act",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("act_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("kind", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("subject", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("act", sa.Text(), nullable=False),
        sa.Column("signatures", sa.Text(), nullable=False),
        sa.Column("signers", sa.Text(), nullable=False),
        sa.Column("scope", sa.Text(), nullable=False),
        sa.Column("authority_digest", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("audit_seq", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["audit_seq"], ["audit_event.seq"], name=op.f("fk_signed_act_audit_seq_audit_event"),
            initially="DEFERRED", deferrable=True,
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_signed_act")),
        sa.UniqueConstraint("act_id", name=op.f("uq_signed_act_act_id")),
    )  # fmt: skip
    with op.batch_alter_table("signed_act", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_signed_act_audit_seq"), ["audit_seq"])
        batch_op.create_index(batch_op.f("ix_signed_act_kind"), ["kind"])
        batch_op.create_index(batch_op.f("ix_signed_act_subject"), ["subject"])


def downgrade() -> None:
    op.drop_table("signed_act")
