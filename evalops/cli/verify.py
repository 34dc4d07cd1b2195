"""`evalops verify` and `evalops demo`."""

from pathlib import Path
from typing import Annotated

import typer

from evalops.cli.context import JsonFlag, echo_lines, emit, now, settings
from evalops.cli.progress import ProgressOption, progress_mode, stages
from evalops.domain.humanize import plural


def verify(
    ctx: typer.Context,
    anchor: Annotated[
        list[str] | None,
        typer.Option(
            metavar="SEQ:HASH",
            help="A chain head kept outside the database (repeatable); fail unless the chain "
            "still holds it.",
        ),
    ] = None,
    anchors: Annotated[
        list[Path] | None,
        typer.Option(
            metavar="FILE",
            help="Reports, attestations or lines of SEQ:HASH holding anchors (repeatable).",
        ),
    ] = None,
    progress_option: ProgressOption = None,
    json_flag: JsonFlag = False,
) -> None:
    """Re-hash the audit chain, every row it recorded (both directions), every definition
    and trial, and replay every gate decision; exit 6 naming the first bad item.

    A database cannot defend itself against a consistent rewrite of its tail: keep the
    printed audit head (or any report) elsewhere and pass it back with --anchor/--anchors.

    Example: evalops verify --anchors reports/audit-GATE-3.html
    """
    from evalops.services.verify.anchors import anchors_in_file, parse_anchor

    state = settings(ctx, json_flag)
    wanted = [parse_anchor(a) for a in anchor or []]
    for path in anchors or []:
        wanted += anchors_in_file(path)
    # After the anchors are read: a bad anchor file is refused before the verifier loads.
    from evalops.services.verify.run import verify_reader

    mode = progress_mode(ctx, progress_option)
    # One snapshot, read on a SQLite file by `sqlite3` alone (no SQLAlchemy to import).
    with state.read(for_verify=True) as reader, stages(mode, "verifying") as on_stage:
        report = verify_reader(reader, wanted, on_stage)
    head = report.head
    lines = [
        f"ok: {plural(report.events, 'audit event')}, {plural(report.rows, 'row')}, "
        f"{plural(report.definitions, 'definition')}, {plural(report.trials, 'trial')} and "
        f"{plural(report.decisions, 'gate decision')} verified"
    ]
    if report.estimates:
        lines.append(f"   {plural(report.estimates, 'estimate')} recomputed byte for byte")
    for carried in report.carried_forward:
        lines.append(
            f"   rows of audit seq 1-{carried['seq'] - 1} were carried forward by migration "
            f"{carried['migration']} (seq {carried['seq']}), checked at the upgrade only as far "
            "as the older schema recorded them"
        )
    if report.carried_forward:
        lines.append(f"   rows are fully covered from audit seq {report.covered_from} on")
    if report.anchors:
        lines.append(f"   {plural(len(report.anchors), 'anchor')} held by the chain")
    if head is not None:
        lines.append(f"   audit head {head['seq']}:{head['hash']} (keep it to anchor later checks)")
    emit(ctx, report.as_dict(), echo_lines(lines))


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
    from evalops.cli.demo import run_demo

    settings(ctx)
    run_demo(directory, now=now())


def register(app: typer.Typer) -> None:
    app.command("verify")(verify)
    app.command("demo")(demo)
