"""The migration revision this build of evalops needs (a test pins it to Alembic's head).

Kept as a constant so that every command can check the database without importing Alembic.
"""

HEAD_REVISION = "0007"
