"""`evalops task list|show`."""

from typing import Annotated, Any

import typer

from evalops.cli.context import JsonFlag, add_row, emit, new_table, say, settings
from evalops.cli.listing import AllOption, LimitOption, emit_page, page_of, row_limit
from evalops.cli.tables import print_table
from evalops.domain.humanize import text

task_app = typer.Typer(help="Registered tasks.\n\nExample: evalops task list", no_args_is_help=True)


@task_app.command("list")
def list_(
    ctx: typer.Context,
    suite: Annotated[str | None, typer.Option(help="Only this suite's current members.")] = None,
    limit: LimitOption = None,
    all_rows: AllOption = False,
    json_flag: JsonFlag = False,
) -> None:
    """List the latest registered revision of every task (50 unless --limit N or --all),
    and which revision is in force where another is.

    Example: evalops task list --json
    """
    from evalops.services.registry.tasks import list_tasks

    state = settings(ctx, json_flag)
    with state.connect() as engine:
        rows = list_tasks(engine, suite=suite)
    page = page_of(rows, row_limit(ctx, limit, all_rows))

    def human() -> None:
        table = new_table("task", "rev", "risk", "task_digest", "grader set", "git")
        for r in page.rows:
            add_row(
                table,
                r["task_id"],
                str(r["revision"]) + _not_in_force(r),
                r["risk"],
                r["task_digest"],
                r["grader_set"],
                (r["git_commit"] or "-")[:10] + (" dirty" if r["git_dirty"] else ""),
            )
        print_table(table, shorten=("task_digest",), drop=("git", "grader set", "risk", "rev"))

    # A suite with no members is not a registry without tasks.
    empty = f"suite {suite} has no members; `evalops promote TASK --to {suite}` adds one"
    emit_page(ctx, page, "tasks", human, empty=empty if suite else None)


def _not_in_force(row: dict[str, Any]) -> str:
    """Beside a revision that is not the one in force: which is."""
    in_force = row["in_force_revision"]
    if in_force == row["revision"]:
        return ""
    return " (not in force)" if in_force is None else f" (in force: {in_force})"


@task_app.command("show")
def show(
    ctx: typer.Context,
    task_id: Annotated[str, typer.Argument(metavar="ID", help="Task id.")],
    json_flag: JsonFlag = False,
) -> None:
    """Show a task: its latest revision, digest, provenance and every registered revision.

    Example: evalops task show article-publish-approved-revision
    """
    from evalops.services.registry.tasks import show_task

    state = settings(ctx, json_flag)
    with state.connect() as engine:
        data = show_task(engine, task_id)

    def human() -> None:
        dirty = " (dirty)" if data["git_dirty"] else ""
        fields: list[tuple[str, Any]] = [
            ("task", f"{data['task_id']} revision {data['revision']}{_not_in_force(data)}"),
            ("title", text(data["title"])),
            ("risk", data["risk"]),
            ("task_digest", data["task_digest"]),
            ("grader set", data["grader_set"]),
            ("file", data["file"]),
            ("git", text(data["git_commit"], missing="no commit") + dirty),
            ("synced", f"{text(data['synced_at'])} by {text(data['synced_by'])}"),
        ]
        for name, value in fields:
            say(f"{name:>12}: {value}")
        if len(data["history"]) > 1:
            say("     history:")
            for h in data["history"]:
                say(f"              r{h['revision']} {h['task_digest']} {h['synced_at']}")

    emit(ctx, data, human)


def register(app: typer.Typer) -> None:
    app.add_typer(task_app, name="task")
