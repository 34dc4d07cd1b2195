"""`evalops demo`: the example registry, end to end, through the real CLI."""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import typer

from evalops.domain.vocabulary import format_timestamp
from evalops.errors import EXIT_BLOCK, EXIT_HOLD, EXIT_OK, EXIT_REFUSED, EvalopsError, InputError
from evalops.resources import example_registry_dir, templates_dir


class DemoFailed(EvalopsError):
    """A demo step ended with another exit code than the one it shows."""


@dataclass(frozen=True)
class Step:
    title: str
    args: tuple[str, ...]
    expect: int = EXIT_OK


@dataclass(frozen=True)
class StepResult:
    step: Step
    code: int


def steps(now: datetime) -> list[Step]:
    """The demo script: the whole lifecycle on the example registry (docs/promotion.md,
    docs/gate.md): incident, promotion, calibration, gate, waiver, replay, reports."""
    expires = format_timestamp(now + timedelta(days=14))
    incident = "INC-1"
    policy_task = "support-refund-policy-explanation"
    return [
        Step("Create the registry database and migrate it to head", ("init",)),
        Step("Validate every spec file (no database needed)", ("validate", "registry")),
        Step("Register the definitions with their digests and git commit", ("sync", "registry")),
        Step("A re-sync of unchanged files changes nothing", ("sync", "registry")),
        Step(
            "Print the digests of the support agent's task and the candidate build",
            (
                "digest",
                "registry/tasks/support-refund-in-order.yaml",
                "registry/executions/candidate-b124.yaml",
            ),
        ),
        Step("Ingest the baseline build's trials", ("trials", "ingest", BASELINE_TRIALS)),
        Step(
            "A production failure: open an incident",
            (
                "incident",
                "open",
                "--title",
                "support agent promised a refund outside the refund policy",
                "--severity",
                "high",
                "--observed-at",
                "2026-11-02T09:14:00Z",
                "--trace-uri",
                "trace://prod/support/8812",
            ),
        ),
        Step("Confirm it is a real failure", ("incident", "confirm", incident)),
        Step(
            "Promotion is refused: no task reproduces the incident yet",
            ("promote", incident, "--to", "regression/core"),
            EXIT_REFUSED,
        ),
        Step(
            "Link the task that reproduces it",
            ("incident", "link", incident, "--task", policy_task),
        ),
        Step(
            "Still refused: the blocking model grader reply-quality is not calibrated",
            ("promote", incident, "--to", "regression/core"),
            EXIT_REFUSED,
        ),
        Step(
            "A calibration where humans disagree does not make the judge valid",
            (
                "calibration",
                "record",
                "reply-quality",
                "--labels",
                "registry/calibration/reply-quality-disputed.jsonl",
                "--annotation-guide",
                "support-reply-guide/v2",
            ),
        ),
        Step(
            "A calibration that meets the grader's requirements",
            (
                "calibration",
                "record",
                "reply-quality",
                "--labels",
                "registry/calibration/reply-quality.jsonl",
                "--annotation-guide",
                "support-reply-guide/v2",
            ),
        ),
        Step("Every model grader's calibration state", ("calibration", "status")),
        Step(
            "Now the promotion is accepted (the incident moves to promoted)",
            ("promote", incident, "--to", "regression/core"),
        ),
        Step(
            "Promote a critical invariant: publish exactly the approved revision",
            ("promote", "article-publish-approved-revision", "--to", "regression/core"),
        ),
        Step(
            "And another: refund in order, never refund twice",
            ("promote", "support-refund-in-order", "--to", "regression/core"),
        ),
        Step("Who guards what in the regression suite", ("suite", "coverage", "regression/core")),
        Step("Ingest the candidate build's trials", ("trials", "ingest", CANDIDATE_TRIALS)),
        Step(
            "The candidate is blocked: a refund was committed twice",
            (
                "gate",
                "check",
                "--build",
                "build-124",
                "--suite",
                "regression/core",
                "--baseline",
                "build-123",
            ),
            EXIT_BLOCK,
        ),
        Step(
            "Reconcile the publish effect nobody could confirm",
            (
                "trials",
                "reconcile",
                "trial-b124-article-publish-approved-revision-3",
                "--effect",
                "publish:article-42",
                "--status",
                "committed",
                "--evidence",
                "receipt://publish/article-42",
            ),
        ),
        Step("Ingest the fix build's trials", ("trials", "ingest", FIX_TRIALS)),
        Step(
            "The fix holds on a non-critical failure",
            ("gate", "check", "--build", "build-125", "--suite", "regression/core"),
            EXIT_HOLD,
        ),
        Step(
            "The risk owner waives it, for this build only, for two weeks",
            (
                "waiver",
                "grant",
                "--task",
                policy_task,
                "--suite",
                "regression/core",
                "--states",
                "task_fail",
                "--build",
                "build-125",
                "--owner",
                "support-lead@example.com",
                "--reason",
                "policy wording fix ships in the next sprint",
                "--expires",
                expires,
            ),
        ),
        Step(
            "The fix build passes",
            (
                "gate",
                "check",
                "--build",
                "build-125",
                "--suite",
                "regression/core",
                "--report",
                "gate-report.md",
            ),
        ),
        Step("Replay the decision from its stored inputs", ("gate", "replay", "GATE-3")),
        Step("Re-hash the audit chain, every definition and every decision", ("verify",)),
        *report_steps(),
    ]


FINAL_GATE = "GATE-3"
DEMO_SUITE = "regression/core"
REPORTS = (
    f"reports/audit-{FINAL_GATE}.html",
    f"reports/audit-{FINAL_GATE}.md",
    "reports/suite-regression-core.html",
)
SITE_DIR = "site"
"""Where the demo writes the registry site (docs/site.md); its index is SITE_DIR/index.html."""


def report_steps() -> list[Step]:
    """The demo's last steps: the audit reports of its final decision, the suite card and
    the registry site."""
    html, markdown, card = REPORTS
    return [
        Step(
            "The audit report of the final decision: one self-contained HTML file",
            ("report", "audit", "--gate", FINAL_GATE, "--format", "html", "-o", html),
        ),
        Step(
            "The same report in Markdown, sized for a pull-request comment",
            ("report", "audit", "--gate", FINAL_GATE, "--format", "md", "-o", markdown),
        ),
        Step(
            "The suite card: members, coverage, calibration, pass^k across builds",
            ("report", "suite", DEMO_SUITE, "--format", "html", "-o", card),
        ),
        Step(
            "The registry as a static site: suites, decisions, tasks, incidents, waivers",
            ("report", "site", SITE_DIR),
        ),
    ]


BASELINE_TRIALS = "registry/trials/baseline-b123.jsonl"
CANDIDATE_TRIALS = "registry/trials/candidate-b124.jsonl"
FIX_TRIALS = "registry/trials/fix-b125.jsonl"


@contextmanager
def _cwd(path: Path) -> Iterator[None]:
    before = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def prepare(directory: Path, now: datetime | None = None) -> Path:
    """Copy the example registry into `directory` and commit it to a fresh git repository
    (dated `now`, so a pinned clock gives the same commit id every time)."""
    import git

    registry = directory / "registry"
    # Only the registry's own files: a stray bytecode cache would change the commit id.
    shutil.copytree(
        example_registry_dir(), registry, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    repo = git.Repo.init(directory)
    try:
        with repo.config_writer() as config:
            config.set_value("user", "name", "evalops demo")
            config.set_value("user", "email", "demo@evalops.invalid")
        (directory / ".gitignore").write_text(".evalops/\n", encoding="utf-8")
        repo.index.add([".gitignore", "registry"])
        when = f"{int(now.timestamp())} +0000" if now is not None else None
        repo.index.commit("example registry", author_date=when, commit_date=when)
    finally:
        repo.close()
    return registry


def _render_summary(directory: Path, results: list[StepResult]) -> Path:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(templates_dir()),
        autoescape=jinja2.select_autoescape(["html"]),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    text = env.get_template("demo_summary.md.j2").render(
        directory=str(directory),
        results=[
            {"title": r.step.title, "command": "evalops " + shlex.join(r.step.args), "code": r.code}
            for r in results
        ],
    )
    path = directory / "demo-summary.md"
    path.write_text(text, encoding="utf-8")
    return path


def run_demo(directory: Path | None, now: datetime | None = None) -> list[StepResult]:
    from evalops.cli.main import main

    if directory is None:
        directory = Path(tempfile.mkdtemp(prefix="evalops-demo-"))
    elif directory.exists() and any(directory.iterdir()):
        raise InputError("demo directory is not empty; give an empty or new one", str(directory))
    directory.mkdir(parents=True, exist_ok=True)
    directory = directory.resolve()
    started = now or datetime.now(UTC)
    prepare(directory, started)
    typer.echo(f"evalops demo in {directory}\n")
    results: list[StepResult] = []
    env = {"EVALOPS_DATABASE_URL": None, "EVALOPS_REGISTRY": None, "EVALOPS_ACTOR": None}
    saved = {k: os.environ.pop(k, None) for k in env}
    try:
        with _cwd(directory):
            for number, step in enumerate(steps(started), start=1):
                typer.secho(f"## {number}. {step.title}", bold=True)
                typer.echo(f"$ evalops {shlex.join(step.args)}")
                code = main(["--actor", "demo@evalops.invalid", *step.args])
                typer.echo(f"-> exit {code}\n")
                results.append(StepResult(step, code))
                if code != step.expect:
                    raise DemoFailed(
                        f"demo step {number} ({step.title}) exited {code}, expected {step.expect}"
                    )
    finally:
        for k, v in saved.items():
            if v is not None:
                os.environ[k] = v
    summary = _render_summary(directory, results)
    typer.echo(f"demo complete: {len(results)} steps; summary in {summary}")
    typer.echo("reports (open the HTML files in a browser; the Markdown fits a PR comment):")
    for report in REPORTS:
        typer.echo(f"  {directory / report}")
    typer.echo("the registry site (open its index in a browser; any static host serves it):")
    typer.echo(f"  {directory / SITE_DIR / 'index.html'}")
    return results
