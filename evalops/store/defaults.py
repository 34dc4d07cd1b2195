"""Constants the CLI needs before any database code is imported (kept free of imports)."""

from __future__ import annotations

DEFAULT_DB_PATH = ".evalops/registry.db"
"""Where the default database lives, relative to the directory evalops runs in."""

DEFAULT_URL = f"sqlite:///{DEFAULT_DB_PATH}"
"""The registry database when neither `--db` nor EVALOPS_DATABASE_URL is given."""
