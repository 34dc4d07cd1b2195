"""Run every benchmark: `make bench`.

The performance targets (benchmarks/perf.py, P1-P7) first, then P9 (benchmarks/grown_build.py:
memory of a decision and an estimate as the gated build grows, and `gate check` of a
1,000,000-trial build under 150 MB), P10 (benchmarks/noop_ingest.py: a no-op
re-ingest against the first ingest, on both engines), then the streaming, report and importer
benchmarks (import_inspect; import_scale: start-up against the registry's size, memory
against the log's), the read commands on the demo registry (read_commands, P8), signed acts
at scale (authority_scale), the registry site (report_site: 1,000 decisions) and P11
(estimate_scale: an estimate against the gate of the same build). Each prints
its own figures; the exit status is 1 if any fails.
Pass `--quick` for a smaller run of the performance targets (not the issue's sizes).
"""

from __future__ import annotations

import sys

from benchmarks import (
    authority_scale,
    estimate_scale,
    grown_build,
    import_inspect,
    import_scale,
    ingest_memory,
    noop_ingest,
    perf,
    read_commands,
    report_scale,
    report_site,
)


def main() -> int:
    quick = "--quick" in sys.argv[1:]
    sys.argv = sys.argv[:1]
    if quick:
        sys.argv += ["--records", "20000", "--big", "100000", "--runs", "3"]
    failed = perf.main()
    print()
    sys.argv = sys.argv[:1]  # each benchmark parses its own (default) options
    failed |= grown_build.main(["--quick"] if quick else [])
    print()
    sys.argv = sys.argv[:1]
    failed |= noop_ingest.main(["--records", "10000", "--runs", "3"] if quick else [])
    print()
    failed |= ingest_memory.main()
    print()
    failed |= report_scale.main()
    print()
    failed |= import_inspect.main()
    print()
    failed |= import_scale.main()
    print()
    failed |= read_commands.main()
    print()
    failed |= authority_scale.main([])
    print()
    failed |= report_site.main([])
    print()
    sys.argv = sys.argv[:1]
    if quick:
        sys.argv += ["--tasks", "1000", "--runs", "1"]
    failed |= estimate_scale.main()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
