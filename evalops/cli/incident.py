"""`evalops incident open|confirm|link|close|list|show`."""

from typing import Annotated, Any

import typer

from evalops.cli.context import JsonFlag, add_row, emit, new_table, now, say, settings
from evalops.cli.listing import (
    AllOption,
    LimitOption,
    emit_page,
    filtered,
    no_match,
    page_of,
    row_limit,
)
from evalops.cli.tables import print_table
from evalops.domain.humanize import plural, text

incident_app = typer.Typer(
    help="Real failures, from report to regression task.\n\nExample: evalops incident list",
    no_args_is_help=True,
)
IncidentArg = Annotated[str, typer.Argument(metavar="INC", help="Incident id, e.g. INC-1.")]


def _human(data: dict[str, Any]) -> None:
    tasks = ", ".join(data["tasks"]) or "-"
    say(f"{data['incident_id']} [{data['state']}] {data['severity']}: {data['title']}")
    say(f"  observed {text(data['observed_at'])}  trace {text(data['trace_uri'])}  tasks {tasks}")
    for h in data.get("history", []):
        extra = " ".join(x for x in (h["task_id"] or "", h["reason"] or "") if x)
        say(f"  {h['at']} {h['action']:>8} -> {h['state']:<10} {h['actor']} {extra}")


def _run(ctx: typer.Context, json_flag: bool, call: Any) -> None:
    state = settings(ctx, json_flag)
    with state.connect() as engine:
        data = call(engine, state.who())
    emit(ctx, data, lambda: _human(data))


@incident_app.command("open")
def open_(
    ctx: typer.Context,
    title: Annotated[str, typer.Option(help="What went wrong, in one line.")],
    severity: Annotated[str, typer.Option(help="critical, high, medium or low.")],
    observed_at: Annotated[str, typer.Option(help="When it was observed (RFC 3339, offset).")],
    trace_uri: Annotated[str, typer.Option(help="Where the production trace is.")],
    description: Annotated[str | None, typer.Option(help="More detail.")] = None,
    json_flag: JsonFlag = False,
) -> None:
    """Record a production failure as an open incident (INC-<n>).

    Example: evalops incident open --title "published unapproved draft" --severity critical
    --observed-at 2026-11-02T09:14:00Z --trace-uri trace://prod/8812
    """
    from evalops.services.registry.incidents import open_incident

    _run(
        ctx,
        json_flag,
        lambda engine, actor: open_incident(
            engine,
            title=title,
            severity=severity,
            observed_at=observed_at,
            trace_uri=trace_uri,
            description=description,
            actor=actor,
            now=now(),
        ),
    )


@incident_app.command()
def confirm(ctx: typer.Context, incident_id: IncidentArg, json_flag: JsonFlag = False) -> None:
    """Confirm that an open incident is a real failure.

    Example: evalops incident confirm INC-1
    """
    from evalops.services.registry import incidents

    _run(
        ctx,
        json_flag,
        lambda engine, actor: incidents.confirm(engine, incident_id, actor=actor, now=now()),
    )


@incident_app.command()
def link(
    ctx: typer.Context,
    incident_id: IncidentArg,
    task: Annotated[str, typer.Option(help="The registered task that reproduces it.")],
    json_flag: JsonFlag = False,
) -> None:
    """Link the task that reproduces an incident (a confirmed one becomes reproduced).

    Example: evalops incident link INC-1 --task article-publish-approved-revision
    """
    from evalops.services.registry import incidents

    _run(
        ctx,
        json_flag,
        lambda engine, actor: incidents.link(engine, incident_id, task, actor=actor, now=now()),
    )


@incident_app.command()
def close(
    ctx: typer.Context,
    incident_id: IncidentArg,
    reason: Annotated[str, typer.Option(help="Why it is closed.")],
    json_flag: JsonFlag = False,
) -> None:
    """Close an incident, with a reason.

    Example: evalops incident close INC-1 --reason "guarded by regression/core"
    """
    from evalops.services.registry import incidents

    _run(
        ctx,
        json_flag,
        lambda engine, actor: incidents.close(
            engine, incident_id, reason=reason, actor=actor, now=now()
        ),
    )


@incident_app.command("list")
def list_(
    ctx: typer.Context,
    state_filter: Annotated[
        str | None, typer.Option("--state", help="Only incidents in this state.")
    ] = None,
    task: Annotated[str | None, typer.Option(help="Only incidents linked to this task.")] = None,
    limit: LimitOption = None,
    all_rows: AllOption = False,
    json_flag: JsonFlag = False,
) -> None:
    """List incidents with their state and linked tasks (50 unless --limit N or --all).

    Example: evalops incident list --state open
    """
    from evalops.services.reads.listings import list_incidents, unknown_filters

    state = settings(ctx, json_flag)
    with state.read() as reader:
        rows = list_incidents(reader, state_filter)
        page = page_of(
            [r for r in rows if task is None or task in r["tasks"]],
            row_limit(ctx, limit, all_rows),
        )
        unknown = unknown_filters(reader, task=task) if not page.total else []
        if not page.total and state_filter is not None:
            elsewhere = len(list_incidents(reader, None))
            if elsewhere:
                unknown.append(
                    f"{plural(elsewhere, 'incident')} in other states (`evalops incident list` "
                    "lists every state)"
                )

    def human() -> None:
        table = new_table("incident", "state", "severity", "title", "tasks")
        for r in page.rows:
            add_row(
                table,
                r["incident_id"],
                r["state"],
                r["severity"],
                r["title"],
                ", ".join(r["tasks"]),
            )
        print_table(table, prose=("title", "tasks"))

    emit_page(
        ctx,
        page,
        "incidents",
        human,
        empty=no_match("incidents", filtered(state=state_filter, task=task), unknown),
    )


@incident_app.command()
def show(ctx: typer.Context, incident_id: IncidentArg, json_flag: JsonFlag = False) -> None:
    """Show an incident and every move it made.

    Example: evalops incident show INC-1 --json
    """
    from evalops.services.registry import incidents

    _run(ctx, json_flag, lambda engine, _actor: incidents.show(engine, incident_id))


def register(app: typer.Typer) -> None:
    app.add_typer(incident_app, name="incident")
