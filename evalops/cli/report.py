"""`evalops report audit|suite|estimate|site`: audit reports, suite cards, estimates and the
registry site (read-only)."""

from pathlib import Path
from typing import Annotated, Any

import typer

from evalops.cli.context import JsonFlag, emit, note, now, settings
from evalops.cli.output import OutputOption, format_for, write_output
from evalops.cli.progress import ProgressOption, progress, progress_mode
from evalops.domain.humanize import plural
from evalops.errors import InputError

report_app = typer.Typer(
    help="Audit reports of stored gate decisions, suite cards (HTML, Markdown, JSON), and "
    "the static site of the registry.\n\n"
    "Example: evalops report audit --gate GATE-3 --format html -o audit.html",
    no_args_is_help=True,
)

FormatOption = Annotated[
    str | None,
    typer.Option(
        "--format",
        help="html, md or json (default: from the -o suffix; to a terminal md, else html).",
    ),
]


def _default_format(output: str) -> str:
    """Raw HTML is unreadable in a terminal: a report printed there is Markdown."""
    import sys

    return "md" if output == "-" and sys.stdout.isatty() else "html"


def _written(
    ctx: typer.Context, what: str, path: str | None, fmt: str, data: dict[str, Any]
) -> None:
    if path is None:
        return  # the report itself went to stdout
    emit(ctx, {**data, "format": fmt, "path": path}, lambda: note(f"wrote {what} to {path}"))


@report_app.command("audit")
def audit(
    ctx: typer.Context,
    named: Annotated[
        str | None,
        typer.Argument(
            metavar="GATE",
            help="Stored gate decision id (GATE-<n>), as `gate show` takes it; or --gate.",
            show_default=False,
        ),
    ] = None,
    gate_option: Annotated[
        str | None,
        typer.Option("--gate", help="Stored gate decision id (GATE-<n>).", show_default=False),
    ] = None,
    fmt: FormatOption = None,
    output: OutputOption = "-",
    json_flag: JsonFlag = False,
) -> None:
    """Render the audit report of a stored gate decision; nothing is evaluated or stored.

    Example: evalops report audit --gate GATE-3 --format html -o reports/audit-GATE-3.html
    """
    from evalops.report.audit import audit_chunks
    from evalops.services.reports.audit import audit_document

    state = settings(ctx, json_flag)
    gate = _one_decision(named, gate_option)
    chosen = format_for(fmt, output, _default_format(output), strict=True)
    with state.connect() as engine:
        doc = audit_document(engine, gate, now=now())
    path = write_output(output, audit_chunks(doc, chosen))
    _written(
        ctx,
        f"{chosen} audit report of {gate}",
        path,
        chosen,
        {"gate_id": gate, "decision": doc["decision"], "audit_head": doc["audit_head"]},
    )


def _one_decision(named: str | None, option: str | None) -> str:
    """The decision named as `report audit GATE-3` (as `gate show` names one) or with
    `--gate GATE-3`."""
    if named is None and option is None:
        raise InputError(
            "name the decision: evalops report audit GATE-3 (or --gate GATE-3); "
            "`evalops gate list` lists them",
            field="--gate",
        )
    if named is not None and option is not None and named != option:
        raise InputError(
            f"two decisions named: {named} and --gate {option}; name one", field="--gate"
        )
    return named or option or ""


@report_app.command("suite")
def suite(
    ctx: typer.Context,
    suite_id: Annotated[str, typer.Argument(metavar="SUITE", help="Suite id.")],
    fmt: FormatOption = None,
    output: OutputOption = "-",
    builds: Annotated[
        int, typer.Option(help="How many of the latest decided builds to chart.", min=1)
    ] = 10,
    json_flag: JsonFlag = False,
) -> None:
    """Render a suite card: members and pins, coverage, calibration, recent decisions, pass^k
    per task across the last builds, flaky tasks.

    Example: evalops report suite regression/core --format html -o reports/suite.html
    """
    from evalops.report.suite_card import render_suite_card
    from evalops.services.reports.suite_cards import suite_card_document

    state = settings(ctx, json_flag)
    chosen = format_for(fmt, output, _default_format(output), strict=True)
    with state.connect() as engine:
        doc = suite_card_document(engine, suite_id, builds=builds, now=now())
    path = write_output(output, render_suite_card(doc, chosen))
    _written(
        ctx,
        f"{chosen} suite card of {suite_id}",
        path,
        chosen,
        {"suite": suite_id, "audit_head": doc["audit_head"]},
    )


@report_app.command("estimate")
def estimate(
    ctx: typer.Context,
    estimate_id: Annotated[str, typer.Argument(metavar="ID", help="Stored estimate id (EST-n).")],
    fmt: FormatOption = None,
    output: OutputOption = "-",
    json_flag: JsonFlag = False,
) -> None:
    """Render a stored estimate: the claims sentence on top, every rate and stratum with its
    interval drawn; nothing is computed or stored.

    Example: evalops report estimate EST-2 --format html -o reports/estimate-EST-2.html
    """
    from evalops.report.estimate import render_estimate
    from evalops.services.estimation.records import stored_result_and_head

    state = settings(ctx, json_flag)
    chosen = format_for(fmt, output, _default_format(output), strict=True)
    with state.connect() as engine:
        doc, head = stored_result_and_head(engine, estimate_id)
    path = write_output(output, render_estimate(doc, chosen, head))
    _written(ctx, f"{chosen} report of {estimate_id}", path, chosen, {"estimate_id": estimate_id})


@report_app.command("site")
def site(
    ctx: typer.Context,
    directory: Annotated[
        Path, typer.Argument(metavar="DIR", help="Directory to write the site into.")
    ],
    suites: Annotated[
        list[str] | None,
        typer.Option("--suite", help="Only this suite and what it links to (repeatable)."),
    ] = None,
    progress_option: ProgressOption = None,
    json_flag: JsonFlag = False,
) -> None:
    """Write the static site of the registry: an index, a page per suite, decision, task,
    incident, waiver and calibration. Relative links, no script; a re-run on an unchanged
    registry rewrites no file (docs/site.md).

    Example: evalops report site site/ --suite regression/core
    """
    from evalops.services.reports.site import write_site

    state = settings(ctx, json_flag)
    mode = progress_mode(ctx, progress_option)
    # Pages are counted as they are written: how many a registry makes is known only then.
    with (
        state.connect() as engine,
        progress(mode, "writing site pages", None, unit="records") as on_page,
    ):
        result = write_site(engine, directory, suites=suites or (), now=now(), on_page=on_page)
    data = result.as_dict()
    emit(
        ctx,
        data,
        lambda: note(
            f"wrote the site to {directory}: {plural(data['written'], 'page')} written, "
            f"{data['unchanged']:,} unchanged; open {result.index}"
        ),
    )


def register(app: typer.Typer) -> None:
    app.add_typer(report_app, name="report")
