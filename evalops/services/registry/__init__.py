"""The registry's definitions: sync with git provenance, what is in force, suites and their
members, promotion and retirement, incidents, starter files and schemas.

The modules listed in `__all__` are this package's face: other packages import only those
(tests/contract/test_services_map.py).
"""

__all__ = [
    "definitions",
    "incidents",
    "promotion",
    "ratchet",
    "scaffold",
    "schemas",
    "starter_check",
    "suites",
    "sync",
    "tasks",
    "tracking",
    "unknown_ids",
]
