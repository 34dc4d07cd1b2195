"""`evalops verify` and `evalops demo`."""

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from evalops.cli.context import JsonFlag, echo_lines, emit, now, settings
from evalops.cli.progress import ProgressOption, progress_mode, stages
from evalops.domain.humanize import plural


def verify(  # noqa: PLR0913 (options of one command)
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
            help="Reports, attestations or lines of SEQ:HASH holding anchors (repeatable; "
            "the files after it are read too, so `--anchors reports/*` takes every report).",
        ),
    ] = None,
    more_anchors: Annotated[
        list[Path] | None,
        typer.Argument(
            metavar="FILE",
            help="More anchor files, after --anchors (what a shell glob expands to).",
            show_default=False,
        ),
    ] = None,
    progress_option: ProgressOption = None,
    json_flag: JsonFlag = False,
) -> None:
    """Re-hash the audit chain, every row it recorded (both directions), every definition
    and trial, and replay every gate decision; exit 6 naming the first bad item.

    A database cannot defend itself against a consistent rewrite of its tail: keep the
    printed audit head (or any report) elsewhere and pass it back with --anchor/--anchors.

    Example: evalops verify --anchors reports/*.html site/index.html
    """
    from evalops.errors import InputError
    from evalops.services.verify.anchors import anchors_in_file, parse_anchor

    state = settings(ctx, json_flag)
    if more_anchors and not anchors:
        raise InputError(
            f"{more_anchors[0]}: a file to verify against goes after --anchors "
            "(evalops verify --anchors FILE...)",
            field="--anchors",
        )
    wanted = [parse_anchor(a) for a in anchor or []]
    for path in [*(anchors or []), *(more_anchors or [])]:
        wanted += anchors_in_file(path)
    # After the anchors are read: a bad anchor file is refused before the verifier loads.
    from evalops.services.verify.run import verify_reader

    mode = progress_mode(ctx, progress_option)
    # One snapshot, read on a SQLite file by `sqlite3` alone (no SQLAlchemy to import).
    with state.read(for_verify=True) as reader, stages(mode, "verifying") as on_stage:
        report = verify_reader(reader, wanted, on_stage)
        from evalops.services.verify.rule_history import check_promotions, check_rule_history

        if on_stage is not None:
            on_stage("syncs against git history")
        history = check_rule_history(reader, state.registry)
        check_promotions(reader)
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
    lines.append(
        f"   {history.skipped}"
        if history.skipped
        else f"   {plural(history.checked, 'sync')} re-checked against the git history of "
        f"{state.registry}"
        + (f" ({len(history.unknown)} of commits it does not hold)" if history.unknown else "")
    )
    if head is not None:
        lines.append(f"   audit head {head['seq']}:{head['hash']} (keep it to anchor later checks)")
    emit(ctx, {**report.as_dict(), "rule_history": history.as_dict()}, echo_lines(lines))


def register(app: typer.Typer, run_cli: Callable[[list[str]], int]) -> None:
    """`run_cli` is the CLI's own entry point (evalops/cli/main.py `main`), which `demo` runs
    step by step: passed in rather than imported, since main imports this module."""

    def demo(
        ctx: typer.Context,
        directory: Annotated[
            Path | None,
            typer.Option(
                "--dir", help="Empty directory to run in (default: a new temp directory)."
            ),
        ] = None,
    ) -> None:
        """Run the lifecycle on a copy of the example registry, printing each command and exit code.

        Example: evalops demo --dir /tmp/evalops-demo
        """
        from evalops.cli.demo import run_demo

        settings(ctx)
        run_demo(directory, now=now(), run_cli=run_cli)

    app.command("verify")(verify)
    app.command("demo")(demo)
