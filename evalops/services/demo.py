"""`evalops demo`: the example registry, end to end, through the real CLI."""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import typer

from evalops.errors import EXIT_OK, EvalopsError, InputError
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


def steps() -> list[Step]:
    """The demo script; later capabilities append their steps here."""
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
        Step("List the registered tasks", ("task", "list")),
        Step("Re-hash the audit chain and every stored definition", ("verify",)),
    ]


@contextmanager
def _cwd(path: Path) -> Iterator[None]:
    before = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def prepare(directory: Path) -> Path:
    """Copy the example registry into `directory` and commit it to a fresh git repository."""
    import git

    registry = directory / "registry"
    shutil.copytree(example_registry_dir(), registry)
    repo = git.Repo.init(directory)
    try:
        with repo.config_writer() as config:
            config.set_value("user", "name", "evalops demo")
            config.set_value("user", "email", "demo@evalops.invalid")
        (directory / ".gitignore").write_text(".evalops/\n", encoding="utf-8")
        repo.index.add([".gitignore", "registry"])
        repo.index.commit("example registry")
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


def run_demo(directory: Path | None) -> list[StepResult]:
    from evalops.cli.main import main

    if directory is None:
        directory = Path(tempfile.mkdtemp(prefix="evalops-demo-"))
    elif directory.exists() and any(directory.iterdir()):
        raise InputError("demo directory is not empty; give an empty or new one", str(directory))
    directory.mkdir(parents=True, exist_ok=True)
    directory = directory.resolve()
    prepare(directory)
    typer.echo(f"evalops demo in {directory}\n")
    results: list[StepResult] = []
    env = {"EVALOPS_DATABASE_URL": None, "EVALOPS_REGISTRY": None, "EVALOPS_ACTOR": None}
    saved = {k: os.environ.pop(k, None) for k in env}
    try:
        with _cwd(directory):
            for number, step in enumerate(steps(), start=1):
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
    return results
