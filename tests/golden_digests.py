"""Regenerate tests/golden/digests.json: `make golden` (only with a spec_schema_version bump).

The pinned digests are the contract of section 4: a change to canonicalization or to a
recipe changes them, and that must never happen silently.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from evalops.registry.snapshot import load_snapshot

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden" / "digests.json"


def current_digests() -> list[dict[str, object]]:
    before = Path.cwd()
    os.chdir(ROOT)
    try:
        snapshot = load_snapshot(Path("registry"))
        rows = [d.digest_row() for d in snapshot.definitions]
    finally:
        os.chdir(before)
    return sorted(rows, key=lambda r: str(r["file"]))


def main() -> None:
    GOLDEN.write_text(json.dumps(current_digests(), indent=2) + "\n", encoding="utf-8")
    print(f"wrote {GOLDEN}")


if __name__ == "__main__":
    main()
