"""`evalops demo`: the example registry, end to end, through the real CLI."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import typer

from evalops.domain.timestamps import format_timestamp
from evalops.errors import (
    EXIT_BLOCK,
    EXIT_HOLD,
    EXIT_INPUT,
    EXIT_OK,
    EXIT_REFUSED,
    EvalopsError,
    InputError,
)
from evalops.resources import example_registry_dir, templates_dir


class DemoFailed(EvalopsError):
    """A demo step ended with another exit code than the one it shows."""


@dataclass(frozen=True)
class Step:
    title: str
    args: tuple[str, ...]
    expect: int = EXIT_OK
    where: str = ""
    """The subdirectory of the demo directory the step runs in ("": the demo directory)."""


@dataclass(frozen=True)
class StepResult:
    step: Step
    code: int


POLICY_TASK = "support-refund-policy-explanation"
INCIDENT_OPEN = (
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
)


def waiver_args(now: datetime) -> tuple[str, ...]:
    """The demo's waiver: the fix build's non-critical failure, for two weeks."""
    return (
        "waiver",
        "grant",
        "--task",
        POLICY_TASK,
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
        format_timestamp(now + timedelta(days=14)),
    )


def steps(now: datetime) -> list[Step]:
    """The demo script: the whole lifecycle on the example registry (docs/promotion.md,
    docs/gate.md): incident, promotion, calibration, gate, waiver, replay, reports."""
    incident = "INC-1"
    policy_task = POLICY_TASK
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
            INCIDENT_OPEN,
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
        Step("The risk owner waives it, for this build only, for two weeks", waiver_args(now)),
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
                GATE_REPORT,
            ),
        ),
        Step("Replay the decision from its stored inputs", ("gate", "replay", "GATE-3")),
        Step("Re-hash the audit chain, every definition and every decision", ("verify",)),
        *estimation_steps(),
        # Last, so that the reports and the site show the whole registry (its estimates too).
        *report_steps(),
    ]


#: The fix build's passing decision as Markdown, written by its own `gate check --report`.
GATE_REPORT = "gate-report.md"
ESTIMATION_SUITE = "estimation/eu-sessions"
ESTIMATE_REPORT = "reports/estimate-EST-2.html"
#: The sampled production sessions of the estimation suite (registry/tasks/eu-sessions/).
EU_SESSIONS = (
    "eu-session-enterprise-refund-bulk-return",
    "eu-session-enterprise-refund-invoice-dispute",
    "eu-session-enterprise-refund-sla-credit",
    "eu-session-free-refund-damaged-item",
    "eu-session-free-refund-duplicate-charge",
    "eu-session-free-refund-late-order",
    "eu-session-pro-refund-cancelled-shipment",
    "eu-session-pro-refund-partial-order",
    "eu-session-pro-refund-subscription-downgrade",
    "eu-session-pro-refund-wrong-currency",
)


def estimation_steps() -> list[Step]:
    """How often refunds fail in EU production traffic: sampled sessions enter the estimation
    suite, two builds run them, and the estimate, the comparison and the plan follow
    (docs/estimation.md)."""
    promotions = [
        Step(
            f"A sampled EU session enters the estimation suite ({task.split('-')[2]} tier)",
            ("promote", task, "--to", ESTIMATION_SUITE),
        )
        for task in EU_SESSIONS
    ]
    return [
        *promotions,
        Step(
            "Ingest the sampled sessions' trials under build 124",
            ("trials", "ingest", "registry/trials/eu-sessions/candidate-b124.jsonl"),
        ),
        Step(
            "Ingest them under build 125 (the bulk return was not run)",
            ("trials", "ingest", "registry/trials/eu-sessions/fix-b125.jsonl"),
        ),
        Step(
            "A regression suite is no representative cohort: no estimate of it",
            ("estimate", "--suite", DEMO_SUITE, "--build", "build-125"),
            EXIT_INPUT,
        ),
        Step(
            "How often refunds fail in EU traffic under build 124, with honest intervals",
            ("estimate", "--suite", ESTIMATION_SUITE, "--build", "build-124"),
        ),
        Step(
            "Build 125 against build 124: the paired, stratified difference",
            (
                "estimate",
                "--suite",
                ESTIMATION_SUITE,
                "--build",
                "build-125",
                "--baseline",
                "build-124",
            ),
        ),
        Step("Replay the estimate from its stored inputs", ("estimate", "replay", "EST-2")),
        Step(
            "The estimate as a report: the claim on top, every interval drawn",
            ("report", "estimate", "EST-2", "--format", "html", "-o", ESTIMATE_REPORT),
        ),
        Step(
            "How many sessions a ±5-point interval and a 10-point comparison need",
            (
                "estimate",
                "plan",
                "--suite",
                ESTIMATION_SUITE,
                "--half-width",
                "0.05",
                "--detect",
                "0.1",
                "--baseline",
                "build-124",
            ),
        ),
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


SIGNED = "signed"
"""Part two runs on its own copy of the registry, under an authority: the first part's
database (and the README tour run on it) stays a registry without one."""
KEYS = "keys"
#: The demo's principals, each with the roles it holds (docs/authority.md).
PRINCIPALS = {
    "support-lead": "risk owner of regression/*, policy owner",
    "release-eng": "ingester, and risk owner of regression/*",
    "quality-lead": "calibrator and reviewer",
}


def authority_document() -> dict[str, object]:
    """The demo's authority: keys are filled in from `keys/` when the demo runs."""
    return {
        "spec_schema_version": "authority/v1",
        "id": "authority",
        "principals": [
            {"id": name, "email": f"{name}@example.com", "keys": []} for name in PRINCIPALS
        ],
        "roles": {
            "risk_owner": [
                {"principal": "support-lead", "suites": ["regression/*"]},
                {"principal": "release-eng", "suites": ["regression/*"]},
            ],
            "policy_owner": [{"principal": "support-lead"}],
            "ingester": [{"principal": "release-eng"}],
            "calibrator": [{"principal": "quality-lead"}],
            "reviewer": [{"principal": "quality-lead"}],
        },
        "separation_of_duties": ["no_self_waiver", "no_self_review"],
        "max_act_age_days": 7,
    }


def _key(name: str) -> str:
    return f"../{KEYS}/{name}"


def authority_steps(now: datetime) -> list[Step]:
    """Part two (docs/authority.md): the same acts, signed by the principals allowed to
    make them; an unsigned promotion, an unsigned waiver and a self-waiver are refused."""
    here = SIGNED
    return [
        Step("Part 2, under an authority: create its database", ("init",), where=here),
        Step(
            "Register the registry; its first authority is accepted as the bootstrap",
            ("sync", "registry"),
            where=here,
        ),
        Step(
            "The release engineer, an ingester, signs the fix build's ingest",
            ("trials", "ingest", FIX_TRIALS, "--sign-with", _key("release-eng")),
            where=here,
        ),
        Step(
            "The quality lead, a calibrator, signs the judge's calibration",
            (
                "calibration",
                "record",
                "reply-quality",
                "--labels",
                "registry/calibration/reply-quality.jsonl",
                "--annotation-guide",
                "support-reply-guide/v2",
                "--sign-with",
                _key("quality-lead"),
            ),
            where=here,
        ),
        *(
            Step(title, args, where=here)
            for title, args in (
                ("The same incident: open it", INCIDENT_OPEN),
                ("Confirm it", ("incident", "confirm", "INC-1")),
                (
                    "Link the task that reproduces it",
                    ("incident", "link", "INC-1", "--task", POLICY_TASK),
                ),
            )
        ),
        Step(
            "An unsigned promotion is refused: a new member is a risk owner's act",
            ("promote", "INC-1", "--to", DEMO_SUITE),
            EXIT_REFUSED,
            where=here,
        ),
        Step(
            "The support lead, a risk owner, signs the promotion (its judge is calibrated)",
            ("promote", "INC-1", "--to", DEMO_SUITE, "--sign-with", _key("support-lead")),
            where=here,
        ),
        Step(
            "An unsigned waiver is refused: an authority is in force",
            waiver_args(now),
            EXIT_REFUSED,
            where=here,
        ),
        Step(
            "Refused: the release engineer signed this build's ingest (no_self_waiver)",
            (*waiver_args(now), "--sign-with", _key("release-eng")),
            EXIT_REFUSED,
            where=here,
        ),
        Step(
            "The support lead, a risk owner, signs the waiver",
            (*waiver_args(now), "--sign-with", _key("support-lead")),
            where=here,
        ),
        Step("Who signed each waiver", ("waiver", "list", "--all"), where=here),
        Step(
            "The fix build passes on the signed waiver",
            ("gate", "check", "--build", "build-125", "--suite", DEMO_SUITE),
            where=here,
        ),
        Step("Who signed each calibration", ("calibration", "list"), where=here),
        Step(
            "verify re-checks every signature against the authority of its time",
            ("verify",),
            where=here,
        ),
    ]


def prepare_authority(directory: Path, now: datetime) -> None:
    """Part two's keys (`keys/`, made by ssh-keygen: ed25519, no passphrase) and its copy of
    the registry with an authority naming them, committed (nobody signs the bootstrap)."""
    import git

    keys = directory / KEYS
    keys.mkdir()
    document = authority_document()
    principals: list[dict[str, object]] = document["principals"]  # type: ignore[assignment]
    for principal in principals:
        name = str(principal["id"])
        command = ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"{name}@demo"]
        typer.echo(f"$ {shlex.join([*command, '-f', f'{KEYS}/{name}'])}")
        try:
            subprocess.run(
                [*command, "-f", str(keys / name)], check=True, capture_output=True, timeout=60
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise DemoFailed(
                f"the demo needs ssh-keygen (OpenSSH) to make its keys: {exc}"
            ) from None
        principal["keys"] = [(keys / f"{name}.pub").read_text(encoding="utf-8").strip()]
    signed = directory / SIGNED
    prepare(signed, now)
    path = signed / "registry" / "policies" / "authority.yaml"
    path.write_text(
        "# The demo's authority (docs/authority.md); its keys are in ../../../keys/.\n"
        + json.dumps(document, indent=2)
        + "\n",
        encoding="utf-8",
    )
    repo = git.Repo(signed)
    try:
        repo.index.add([str(path.relative_to(signed))])
        when = f"{int(now.timestamp())} +0000"
        repo.index.commit("declare the authority", author_date=when, commit_date=when)
    finally:
        repo.close()
    typer.echo(f"wrote {SIGNED}/registry/policies/authority.yaml and committed it:")
    for name, roles in PRINCIPALS.items():
        typer.echo(f"  {name}: {roles}")
    typer.echo("")


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
            {
                "title": r.step.title,
                "command": (f"cd {r.step.where} && " if r.step.where else "")
                + "evalops "
                + shlex.join(r.step.args),
                "code": r.code,
            }
            for r in results
        ],
    )
    path = directory / SUMMARY
    path.write_text(text, encoding="utf-8")
    return path


#: What a finished demo leaves in its directory (the Makefile's sign of an earlier demo).
SUMMARY = "demo-summary.md"


def _run_steps(
    directory: Path, script: list[Step], results: list[StepResult], run_cli: RunCli
) -> None:
    """Run `script` through the real CLI (`run_cli`, evalops/cli/main.py `main`), numbering
    on from `results`; stop at a step that ends with another exit code than the one it shows."""
    where = ""
    for number, step in enumerate(script, start=len(results) + 1):
        if step.where != where:
            where = step.where
            typer.echo(f"$ cd {directory / where}\n")
        typer.secho(f"## {number}. {step.title}", bold=True)
        typer.echo(f"$ evalops {shlex.join(step.args)}")
        with _cwd(directory / step.where):
            code = run_cli(["--actor", "demo@evalops.invalid", *step.args])
        typer.echo(f"-> exit {code}\n")
        results.append(StepResult(step, code))
        if code != step.expect:
            raise DemoFailed(
                f"demo step {number} ({step.title}) exited {code}, expected {step.expect}"
            )


#: The CLI's entry point: arguments in, exit code out. Given by the caller, since the CLI
#: (evalops/cli/main.py) imports the command that runs the demo.
RunCli = Callable[[list[str]], int]


def run_demo(
    directory: Path | None, now: datetime | None = None, *, run_cli: RunCli
) -> list[StepResult]:
    if directory is None:
        directory = Path(tempfile.mkdtemp(prefix="evalops-demo-"))
    elif directory.exists() and any(directory.iterdir()):
        if (directory / SUMMARY).is_file():
            # Never deleted here: the tutorial works in the demo's directory, so an earlier
            # demo may hold the reader's own work by now.
            raise InputError(
                f"demo directory holds an earlier evalops demo ({SUMMARY}), which evalops "
                f"demo never deletes: remove it first (rm -rf {shlex.quote(str(directory))}, "
                "as `make demo` replaces its own) or give an empty or new directory",
                str(directory),
            )
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
        _run_steps(directory, steps(started), results, run_cli)
        typer.secho("# Part 2: the same registry under an authority (docs/authority.md)", bold=True)
        prepare_authority(directory, started)
        _run_steps(directory, authority_steps(started), results, run_cli)
    finally:
        for k, v in saved.items():
            if v is not None:
                os.environ[k] = v
    summary = _render_summary(directory, results)
    typer.echo(f"demo complete: {len(results)} steps; summary in {summary}")
    typer.echo("reports (open the HTML files in a browser; the Markdown fits a PR comment):")
    for report in (*REPORTS, ESTIMATE_REPORT, GATE_REPORT):
        typer.echo(f"  {directory / report}")
    typer.echo("the registry site (open its index in a browser; any static host serves it):")
    typer.echo(f"  {directory / SITE_DIR / 'index.html'}")
    return results
