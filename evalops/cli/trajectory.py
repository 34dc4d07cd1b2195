"""`evalops trajectory grade`: grade a tool-call trajectory against a task's expectation."""

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from evalops.cli.context import (
    JsonFlag,
    emit,
    say,
    settings,
)
from evalops.errors import EXIT_UNMATCHED, InputError

if TYPE_CHECKING:
    pass

trajectory_app = typer.Typer(
    help="Grade tool-call trajectories (RFC 0244).\n\nExample: evalops trajectory grade "
    "--task support-refund-in-order --calls calls.json",
    no_args_is_help=True,
)


def _read_json(path: Path, what: str) -> Any:
    from evalops.registry.load import decode_text, parse_json

    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {what}: {exc.strerror}", str(path)) from None
    return parse_json(decode_text(data, str(path)), str(path), spec=False).value


@trajectory_app.command("grade")
def grade(
    ctx: typer.Context,
    calls: Annotated[Path, typer.Option(help="JSON list of calls: {tool, args, agent_id}.")],
    expected: Annotated[
        Path | None, typer.Option(help="JSON file with a task's expected.trajectory object.")
    ] = None,
    task: Annotated[
        str | None, typer.Option(help="Take the expectation from this registered task.")
    ] = None,
    target_agent: Annotated[
        str | None,
        typer.Option("--target-agent", help="Grade only this agent's own calls."),
    ] = None,
    json_flag: JsonFlag = False,
) -> None:
    """Grade a list of tool calls against a trajectory expectation (RFC 0244 section A).

    Example: evalops trajectory grade --expected expected.json --calls calls.json
    --target-agent support
    """
    from pydantic import ValidationError

    from evalops.domain.specs import TrajectoryExpectation
    from evalops.domain.trajectory import ObservedCall
    from evalops.domain.trajectory import grade as run_grade
    from evalops.domain.trial_record import ToolCall
    from evalops.domain.vocabulary import MAX_TOOL_CALLS
    from evalops.registry.definitions import pydantic_error
    from evalops.registry.load import Document

    state = settings(ctx, json_flag)
    if (expected is None) == (task is None):
        raise InputError("give exactly one of --expected FILE and --task ID", field="--expected")
    if expected is not None:
        raw = _read_json(expected, "expectation")
        try:
            expectation = TrajectoryExpectation.model_validate(raw)
        except ValidationError as exc:
            raise pydantic_error(Document(str(expected), raw, {}), exc) from None
    else:
        from evalops.store import queries
        from evalops.store.engine import read_session

        with state.connect() as engine, read_session(engine) as session:
            row = queries.task_row(session, str(task))
            if row is None:
                from evalops.services.registry.unknown_ids import not_registered

                raise InputError(not_registered(session, "task", str(task)), field="--task")
            spec = queries.task_spec(row)
        if spec.contract.expected is None or spec.contract.expected.trajectory is None:
            raise InputError(f"task {task} has no trajectory expectation", field="--task")
        expectation = spec.contract.expected.trajectory
    raw_calls = _read_json(calls, "calls")
    if not isinstance(raw_calls, list):
        raise InputError("calls must be a JSON list", str(calls), 1)
    if len(raw_calls) > MAX_TOOL_CALLS:
        raise InputError(
            f"{len(raw_calls)} calls; a trajectory holds at most {MAX_TOOL_CALLS:,}",
            str(calls),
            1,
            "calls",
        )
    observed = []
    for i, item in enumerate(raw_calls):
        try:
            call = ToolCall.model_validate(item)
        except ValidationError as exc:
            err = pydantic_error(Document(str(calls), item, {}), exc)
            raise InputError(err.message, str(calls), None, f"[{i}].{err.field}") from None
        observed.append(ObservedCall(call.tool, call.args, call.agent_id))
    result = run_grade(expectation, observed, target_agent)

    def human() -> None:
        say(f"trajectory {result.describe()}")
        for line in result.explanations:
            say(f"  - {line}")

    # The RFC 0244 block, plus why it is not matched (empty when it is).
    emit(ctx, {**result.block(), "reasons": list(result.explanations)}, human)
    if not result.matched:
        # An unmatched trajectory fails the check: the contract's failing-decision code.
        raise typer.Exit(EXIT_UNMATCHED)


def register(app: typer.Typer) -> None:
    app.add_typer(trajectory_app, name="trajectory")
