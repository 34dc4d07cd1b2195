"""Run every benchmark: `make bench`."""

from __future__ import annotations

import sys

from benchmarks import import_inspect, ingest_memory


def main() -> int:
    failed = ingest_memory.main()
    sys.argv = sys.argv[:1]  # each benchmark parses its own (default) options
    return import_inspect.main() or failed


if __name__ == "__main__":
    sys.exit(main())
