"""Run every benchmark: `make bench`."""

from __future__ import annotations

import sys

from benchmarks import import_inspect, ingest_memory, report_scale


def main() -> int:
    failed = ingest_memory.main()
    print()
    failed |= report_scale.main()
    print()
    sys.argv = sys.argv[:1]  # each benchmark parses its own (default) options
    failed |= import_inspect.main()
    return failed


if __name__ == "__main__":
    sys.exit(main())
