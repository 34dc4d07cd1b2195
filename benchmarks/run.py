"""Run every benchmark: `make bench`."""

from __future__ import annotations

import sys

from benchmarks import ingest_memory, report_scale


def main() -> int:
    failed = ingest_memory.main()
    print()
    failed |= report_scale.main()
    return failed


if __name__ == "__main__":
    sys.exit(main())
