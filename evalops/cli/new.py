"""`evalops new task|grader-set|execution|suite|policy ID` and `new authority`: starters."""

from pathlib import Path
from typing import Annotated, Literal

import typer

from evalops.cli.context import JsonFlag, emit, say, settings

new_app = typer.Typer(
    help="Write a commented starter file that `evalops validate` accepts as written.\n\n"
    "Example: evalops new task refund-once",
    no_args_is_help=True,
)

IdArg = Annotated[str, typer.Argument(metavar="ID", help="Id of the new definition.")]
RegistryOpt = Annotated[
    Path | None,
    typer.Option(
        "--registry",
        metavar="DIR",
        help="Registry directory to write into (default: the global --registry, ./registry).",
    ),
]


def _run(
    ctx: typer.Context,
    kind: str,
    definition_id: str,
    registry: Path | None,
    json_flag: bool,
    **options: str | None,
) -> None:
    from evalops.services.registry.scaffold import new_definition

    state = settings(ctx, json_flag)
    root = registry or state.registry
    grader_set = options.get("grader_set")
    written = new_definition(
        root, kind, definition_id, grader_set=grader_set,
        policy_kind=options.get("policy_kind") or "gate",
    )  # fmt: skip
    rows = [{"file": str(w.path), "kind": w.kind, "id": w.id} for w in written]

    def human() -> None:
        for w in written:
            say(f"wrote {w.path} ({w.kind} {w.id})")
        say(f"next: edit it, then `evalops validate {root}`")

    emit(ctx, {"written": rows}, human)


@new_app.command("task")
def task(
    ctx: typer.Context,
    definition_id: IdArg,
    grader_set: Annotated[
        str | None,
        typer.Option(
            "--grader-set",
            metavar="ID",
            help="The task's grader set (default ID-graders; a starter is written when the "
            "registry has no file for it).",
        ),
    ] = None,
    registry: RegistryOpt = None,
    json_flag: JsonFlag = False,
) -> None:
    """Write tasks/ID.yaml (and its grader set when it has no file yet).

    Example: evalops new task refund-once --grader-set support-graders
    """
    _run(ctx, "task", definition_id, registry, json_flag, grader_set=grader_set)


@new_app.command("grader-set")
def grader_set(
    ctx: typer.Context,
    definition_id: IdArg,
    registry: RegistryOpt = None,
    json_flag: JsonFlag = False,
) -> None:
    """Write graders/ID.yaml: an outcome grader and a hard-constraint grader.

    Example: evalops new grader-set support-graders
    """
    _run(ctx, "grader-set", definition_id, registry, json_flag)


@new_app.command("execution")
def execution(
    ctx: typer.Context,
    definition_id: IdArg,
    registry: RegistryOpt = None,
    json_flag: JsonFlag = False,
) -> None:
    """Write executions/ID.yaml: an execution profile for one system build.

    Example: evalops new execution candidate-b7
    """
    _run(ctx, "execution", definition_id, registry, json_flag)


@new_app.command("suite")
def suite(
    ctx: typer.Context,
    definition_id: IdArg,
    registry: RegistryOpt = None,
    json_flag: JsonFlag = False,
) -> None:
    """Write suites/ID.yaml (a `/` in the id becomes `-` in the file name).

    Example: evalops new suite regression/payments
    """
    _run(ctx, "suite", definition_id, registry, json_flag)


@new_app.command("policy")
def policy(
    ctx: typer.Context,
    definition_id: IdArg,
    policy_kind: Annotated[
        Literal["gate", "suite"],
        typer.Option("--type", help="A gate policy or a suite policy."),
    ] = "gate",
    registry: RegistryOpt = None,
    json_flag: JsonFlag = False,
) -> None:
    """Write policies/ID.yaml: a gate policy (default) or a suite policy (--type suite).

    Example: evalops new policy release-gate --type gate
    """
    _run(ctx, "policy", definition_id, registry, json_flag, policy_kind=policy_kind)


@new_app.command("authority")
def authority(
    ctx: typer.Context,
    principal: Annotated[str, typer.Option(help="Id of the first principal (holds every role).")],
    key: Annotated[
        Path, typer.Option(metavar="FILE.pub", help="The principal's OpenSSH public key file.")
    ],
    registry: RegistryOpt = None,
    json_flag: JsonFlag = False,
) -> None:
    """Write policies/authority.yaml: one principal with its key holding every role.

    Example: evalops new authority --principal alice --key ~/.ssh/id_ed25519.pub
    """
    from evalops.services.registry.scaffold import new_authority

    state = settings(ctx, json_flag)
    root = registry or state.registry
    written = new_authority(root, principal, key)
    rows = [{"file": str(w.path), "kind": w.kind, "id": w.id} for w in written]

    def human() -> None:
        for w in written:
            say(f"wrote {w.path} ({w.kind} {w.id})")
        say(f"next: add principals and scopes, then `evalops validate {root}`, commit and sync")

    emit(ctx, {"written": rows}, human)


def register(app: typer.Typer) -> None:
    app.add_typer(new_app, name="new")
