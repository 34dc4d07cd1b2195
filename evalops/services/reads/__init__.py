"""The everyday read commands' queries: plain SQL through a `Reader` (evalops/store/reader.py),
no SQLAlchemy, table or spec models on SQLite.

The modules listed in `__all__` are this package's face: other packages import only those
(tests/contract/test_services_map.py).
"""

__all__ = [
    "authority",
    "calibration",
    "definitions",
    "hints",
    "listings",
    "off_line",
    "trials",
    "voids",
]
