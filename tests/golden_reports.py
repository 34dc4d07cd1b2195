"""Regenerate the golden audit reports: `make golden-reports` (python -m tests.golden_reports).

Builds the demo database with the pinned clock of the test suite and writes the HTML,
Markdown and JSON audit reports of its final decision, and its suite card, to
`tests/golden/reports/`, and a few representative pages of its registry site (docs/site.md)
to `tests/golden/site/`. Run it only when a change to the reports is intended, and review
the diff: `tests/report/test_report_golden.py` compares every rendering to these files
byte for byte.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

GOLDEN = Path(__file__).resolve().parent / "golden" / "reports"
SITE_GOLDEN = GOLDEN.parent / "site"
SITE_PAGES = (
    "index.html",
    "suites/regression_2fcore.html",
    "tasks/support-refund-policy-explanation.html",
    "incidents/INC-1.html",
    "waivers/WVR-1.html",
    "calibrations/CAL-2.html",
)
"""The index, a suite with its chart, a task with flips, incident, waiver and calibration
pages (decision pages are the audit report, whose golden files are above)."""
READS_GOLDEN = GOLDEN.parent / "reads"
READS = (
    ("trials", "list"),
    ("trials", "list", "--all"),
    ("trials", "list", "--limit", "3"),
    ("trials", "list", "--class", "task_pass"),
    ("trials", "list", "--class", "ambiguous_external_effect"),
    ("trials", "list", "--task", "article-source-records-complete"),
    ("trials", "list", "--build", "build-124", "--suite", "regression/core"),
    ("trials", "list", "--suite", "no/such-suite"),
    ("trials", "list", "--class", "not-a-class"),
    ("calibration", "status"),
    ("trials", "show", "trial-b123-article-source-records-complete-3-rerun-1"),
    ("trials", "show", "trial-b124-article-publish-approved-revision-3"),
)
"""The read commands whose listings were once written twice (an ORM path beside the
Reader's): what they printed, human and `--json`, kept byte for byte."""
GATE = "GATE-3"
SUITE = "regression/core"


def render_all(demo: Path) -> dict[str, str]:
    """Every golden file's name and its text, rendered from the demo directory `demo`."""
    from evalops.domain.vocabulary import parse_timestamp
    from evalops.report.audit import render_audit
    from evalops.report.suite_card import render_suite_card
    from evalops.services.reports.audit import audit_document
    from evalops.services.reports.suite_cards import suite_card_document
    from evalops.store.engine import make_engine
    from tests.conftest import PINNED_NOW

    now = parse_timestamp(PINNED_NOW)
    engine = make_engine(f"sqlite:///{demo / '.evalops' / 'registry.db'}")
    try:
        doc = audit_document(engine, GATE, now=now)
        card = suite_card_document(engine, SUITE, now=now)
    finally:
        engine.dispose()
    out = {f"audit-{GATE}.{fmt}": render_audit(doc, fmt) for fmt in ("html", "md", "json")}
    out["suite-card.html"] = render_suite_card(card, "html")
    out["suite-card.md"] = render_suite_card(card, "md")
    return out


def render_site(demo: Path) -> dict[str, str]:
    """The golden site pages and their text, written from the demo directory `demo`."""
    from evalops.domain.vocabulary import parse_timestamp
    from evalops.services.reports.site import write_site
    from evalops.store.engine import make_engine
    from tests.conftest import PINNED_NOW

    engine = make_engine(f"sqlite:///{demo / '.evalops' / 'registry.db'}")
    try:
        with tempfile.TemporaryDirectory(prefix="evalops-golden-site-") as tmp:
            write_site(engine, Path(tmp), now=parse_timestamp(PINNED_NOW))
            return {name: (Path(tmp) / name).read_text(encoding="utf-8") for name in SITE_PAGES}
    finally:
        engine.dispose()


def reads_name(argv: tuple[str, ...], as_json: bool) -> str:
    words = "-".join(a.strip("-").replace("/", "_") for a in argv)
    return f"{words}{'.json' if as_json else ''}.txt"


def render_reads(demo: Path) -> dict[str, str]:
    """What each of READS printed in `demo` (exit code, stdout, stderr), human and --json,
    in the test suite's environment and with its pinned clock."""
    import contextlib
    import io

    from evalops.cli.main import main
    from tests.conftest import PINNED_NOW, evalops_test_env

    out: dict[str, str] = {}
    before = Path.cwd()
    with evalops_test_env():
        os.environ["EVALOPS_NOW"] = PINNED_NOW
        os.chdir(demo)
        try:
            for argv in READS:
                for as_json in (False, True):
                    stdout, stderr = io.StringIO(), io.StringIO()
                    args = ["--json", *argv] if as_json else list(argv)
                    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
                        code = main(args)
                    out[reads_name(argv, as_json)] = (
                        f"$ evalops {' '.join(args)}\nexit {code}\n--- stdout\n"
                        f"{stdout.getvalue()}--- stderr\n{stderr.getvalue()}"
                    )
        finally:
            os.chdir(before)
    return out


def main() -> int:
    from tests.conftest import build_demo

    with tempfile.TemporaryDirectory(prefix="evalops-golden-") as tmp:
        demo = build_demo(Path(tmp) / "demo")
        files = render_all(demo)
        site = render_site(demo)
        reads = render_reads(demo)
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for name, text in sorted(files.items()):
        (GOLDEN / name).write_text(text, encoding="utf-8", newline="\n")
        print(f"wrote {GOLDEN / name} ({len(text)} characters)")
    for name, text in sorted(site.items()):
        path = SITE_GOLDEN / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8", newline="\n")
        print(f"wrote {path} ({len(text)} characters)")
    READS_GOLDEN.mkdir(parents=True, exist_ok=True)
    for name, text in sorted(reads.items()):
        (READS_GOLDEN / name).write_text(text, encoding="utf-8", newline="\n")
        print(f"wrote {READS_GOLDEN / name} ({len(text)} characters)")
    return 0


if __name__ == "__main__":
    os.environ.pop("EVALOPS_DATABASE_URL", None)
    sys.exit(main())
