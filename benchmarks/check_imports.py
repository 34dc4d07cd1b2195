"""What `gate check` imports before it reads a row: the part of P4 that no change to the
check's own work can remove while the check is written on SQLAlchemy, SQLModel and the
table models.

    python -m benchmarks.check_imports

Imports the modules `evalops gate check` runs through (the CLI, its `gate` commands, the
services' check with its loader and the tables) and nothing else; `p4_side.py` measures it
in the same rounds as the check and the floor.
"""

from __future__ import annotations

import importlib
import json

MODULES = ("evalops.cli.main", "evalops.cli.gate", "evalops.services.gate.check")


def main() -> None:
    for name in MODULES:
        importlib.import_module(name)
    print(json.dumps({"imported": list(MODULES)}))


if __name__ == "__main__":
    main()
