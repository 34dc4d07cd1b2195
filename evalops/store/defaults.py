"""Constants the CLI needs before any database code is imported (kept free of imports)."""

from __future__ import annotations

DEFAULT_URL = "sqlite:///.evalops/registry.db"
"""The registry database when neither `--db` nor EVALOPS_DATABASE_URL is given."""
