"""`evalops verify` and `evalops demo`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evalops.cli.context import JsonFlag, emit, now, settings


def verify(ctx: typer.Context, json_flag: JsonFlag = False) -> None:
    """Re-hash the audit chain and every stored definition; exit 6 naming the first bad item.

    Example: evalops verify
    """
    from evalops.services.verify import verify_database

    state = settings(ctx, json_flag)
    with state.connect() as engine:
        report = verify_database(engine)
    emit(
        ctx,
        report.as_dict(),
        lambda: typer.echo(
            f"ok: {report.events} audit events, {report.definitions} definitions, "
            f"{report.trials} trials and {report.decisions} gate decisions verified"
        ),
    )


def demo(
    ctx: typer.Context,
    directory: Annotated[
        Path | None,
        typer.Option("--dir", help="Empty directory to run in (default: a new temp directory)."),
    ] = None,
) -> None:
    """Run the lifecycle on a copy of the example registry, printing each command and exit code.

    Example: evalops demo --dir /tmp/evalops-demo
    """
    from evalops.services.demo import run_demo

    settings(ctx)
    run_demo(directory, now=now())


def register(app: typer.Typer) -> None:
    app.command("verify")(verify)
    app.command("demo")(demo)
