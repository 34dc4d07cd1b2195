"""Where the shipped `migrations/` and `templates/` are: inside the wheel, or the checkout."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def _locate(installed: str, checkout: str) -> Path:
    inside = _PACKAGE / installed
    if inside.is_dir():
        return inside
    return _PACKAGE.parent / checkout


def migrations_dir() -> Path:
    return _locate("_migrations", "migrations")


def templates_dir() -> Path:
    return _locate("_templates", "templates")


def example_registry_dir() -> Path:
    return _locate("_registry", "registry")
