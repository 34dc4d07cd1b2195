"""Run every benchmark: `make bench`."""

from __future__ import annotations

import sys

from benchmarks import ingest_memory


def main() -> int:
    return ingest_memory.main()


if __name__ == "__main__":
    sys.exit(main())
