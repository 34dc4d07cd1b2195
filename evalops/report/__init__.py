"""Audit reports and suite cards: one jinja2 Environment over plain report documents."""
