"""`evalops review list|resolve`: the human review queue."""

from typing import Annotated, Any

import typer

from evalops.cli.context import (
    JsonFlag,
    echo_lines,
    emit,
    now,
    say,
    settings,
)
from evalops.cli.listing import AllOption, LimitOption, emit_page, page_of, row_limit
from evalops.cli.signing import (
    ActOption,
    PrintActOption,
    SignatureOption,
    SignWithOption,
    printing_act,
    signing_of,
)

review_app = typer.Typer(
    help="The human review queue.\n\nExample: evalops review list", no_args_is_help=True
)


@review_app.command("list")
def review_list(
    ctx: typer.Context,
    task: Annotated[str | None, typer.Option(help="Only this task id.")] = None,
    grader: Annotated[str | None, typer.Option(help="Only this grader id.")] = None,
    resolved: Annotated[
        bool,
        typer.Option(
            "--resolved", help="List the human verdicts recorded, with who signed each, instead."
        ),
    ] = False,
    limit: LimitOption = None,
    all_rows: AllOption = False,
    json_flag: JsonFlag = False,
) -> None:
    """Trials waiting for a person: abstentions and verdicts a model grader may not block on.

    Shows 50 (--limit N or --all for more) and "showing N of M" on stderr.

    Example: evalops review list
    """
    from evalops.services.reads.listings import describe_signers

    state = settings(ctx, json_flag)
    shown_limit = row_limit(ctx, limit, all_rows)
    if resolved:
        _resolved_list(ctx, state, task, grader, shown_limit)
        return
    from evalops.services.evidence.review import review_queue

    with state.connect() as engine:
        rows = review_queue(engine)
    rows = [
        r
        for r in rows
        if (task is None or r["task_id"] == task) and (grader is None or r["grader_id"] == grader)
    ]
    page = page_of(rows, shown_limit)
    emit_page(
        ctx,
        page,
        "trials waiting for review",
        echo_lines(
            [
                f"{r['trial_id']} {r['task_id']} {r['grader_id']}: {r['why']} "
                f"(now {r['classification']}; ingest {describe_signers(r['ingest_signers'])})"
                for r in page.rows
            ]
        ),
    )


def _resolved_list(
    ctx: typer.Context, state: Any, task: str | None, grader: str | None, shown_limit: int | None
) -> None:
    """`review list --resolved`: the human verdicts recorded, with who signed each."""
    from evalops.services.evidence.review import resolved_reviews
    from evalops.services.reads.listings import describe_signers

    with state.connect() as engine:
        rows = resolved_reviews(engine)
    rows = [
        r
        for r in rows
        if (task is None or r["task_id"] == task) and (grader is None or r["grader_id"] == grader)
    ]
    page = page_of(rows, shown_limit)
    emit_page(
        ctx,
        page,
        "resolved reviews",
        echo_lines(
            [
                f"{r['trial_id']} {r['grader_id']} -> {r['state']} {r['at']} {r['actor']} "
                f"({describe_signers(r['signers'])})"
                for r in page.rows
            ]
        ),
    )


@review_app.command()
def resolve(
    ctx: typer.Context,
    trial_id: Annotated[str, typer.Argument(metavar="TRIAL", help="Trial id.")],
    grader: Annotated[str, typer.Option(help="The grader whose result is reviewed.")],
    state_value: Annotated[str, typer.Option("--state", help="The human verdict.")],
    reason: Annotated[str, typer.Option(help="Why.")],
    sign_with: SignWithOption = None,
    print_act: PrintActOption = False,
    act: ActOption = None,
    signature: SignatureOption = None,
    json_flag: JsonFlag = False,
) -> None:
    """Append a human grader result; the trial is re-classified from all its results.

    With an authority in force the verdict must be signed by a reviewer (--sign-with KEY,
    or --print-act then --act FILE --signature FILE).

    Example: evalops review resolve trial-b125-support-reply-tone-1 --grader reply-quality
    --state task_pass --reason "reply cites the refund policy correctly"
    """
    from evalops.services.evidence.review import resolve as run

    state = settings(ctx, json_flag)
    signing = signing_of(sign_with, print_act, act, signature)
    with state.connect() as engine, printing_act():
        data = run(
            engine,
            trial_id,
            grader_id=grader,
            state=state_value,
            reason=reason,
            actor=state.who(),
            now=now(),
            signing=signing,
        )
    emit(
        ctx,
        data,
        lambda: say(
            f"{trial_id}: reviewed {grader} as {state_value}; trial is now {data['classification']}"
        ),
    )


def register(app: typer.Typer) -> None:
    app.add_typer(review_app, name="review")
