"""Persistence: tables, sessions, migrations and the audit chain."""
