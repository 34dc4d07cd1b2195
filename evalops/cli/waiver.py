"""`evalops waiver`: grant, list and revoke build-scoped, expiring waivers."""

import re
from datetime import datetime, timedelta
from typing import Annotated

import typer

from evalops.cli.context import (
    JsonFlag,
    echo_lines,
    emit,
    now,
    settings,
)
from evalops.cli.listing import LimitOption, emit_page, page_of, row_limit
from evalops.cli.signing import (
    ActOption,
    PrintActOption,
    SignatureOption,
    SignWithOption,
    printing_act,
    signing_of,
)
from evalops.errors import EXIT_REFUSED, InputError

waiver_app = typer.Typer(
    help="Build-scoped, expiring waivers of non-critical failures.\n\nExample: evalops waiver "
    "list --all",
    no_args_is_help=True,
)


# `--expires 14d`: a duration in days, hours or minutes from now.
_DURATION = re.compile(r"^(\d{1,5})([dhm])$")


def _expiry(value: str | None, base: datetime | None = None) -> str | None:
    """`--expires`: a timestamp with offset, or a duration from now (`7d`, `72h`, `90m`).

    Garbage is a usage error (exit 2, nothing audited); a well-formed timestamp without an
    offset goes on to the waiver rules, which refuse it (exit 5, audited, docs/gate.md).
    """
    from evalops.domain.timestamps import format_timestamp, parse_timestamp

    if value is None:
        return None
    match = _DURATION.match(value.strip())
    if match:
        amount, unit = int(match.group(1)), match.group(2)
        delta = {"d": timedelta(days=amount), "h": timedelta(hours=amount)}.get(
            unit, timedelta(minutes=amount)
        )
        return format_timestamp((base or now()) + delta)
    try:
        parse_timestamp(value)
    except ValueError as exc:
        if "no offset" not in str(exc):
            raise InputError(
                f"{exc}; give an RFC 3339 timestamp with offset (2026-12-15T00:00:00Z) or a "
                "duration (7d, 72h, 90m)",
                field="--expires",
            ) from None
    return value


@waiver_app.command("grant")
def waiver_grant(
    ctx: typer.Context,
    task: Annotated[str, typer.Option(help="The (non-critical) member task.")],
    suite: Annotated[str, typer.Option(help="The suite.")],
    states: Annotated[str, typer.Option(help="Comma-separated: task_fail,agent_error,...")],
    build: Annotated[str | None, typer.Option(help="The one build it covers.")] = None,
    owner: Annotated[str | None, typer.Option(help="Who owns the accepted risk.")] = None,
    reason: Annotated[str | None, typer.Option(help="Why it is acceptable.")] = None,
    expires: Annotated[
        str | None,
        typer.Option(
            help="Expiry: RFC 3339 with offset, or a duration from now (7d, 72h, 90m); within "
            "max_duration_days."
        ),
    ] = None,
    sign_with: SignWithOption = None,
    print_act: PrintActOption = False,
    act: ActOption = None,
    signature: SignatureOption = None,
    json_flag: JsonFlag = False,
) -> None:
    """Grant a waiver; refused (exit 5, the rule named) when the policy forbids it.

    With an authority in force the grant must be signed by a risk owner of the suite
    (--sign-with KEY, or --print-act then --act FILE --signature FILE); a relative --expires
    resolves against the act's signed_at, so both steps describe the same act.

    Example: evalops waiver grant --task support-refund-policy-explanation --suite
    regression/core --states task_fail --build build-125 --owner support-lead@example.com
    --reason "copy change ships next sprint" --expires 14d
    """
    from evalops.domain.waivers import WaiverRequest
    from evalops.services.gate.waivers import grant

    state = settings(ctx, json_flag)
    signing = signing_of(sign_with, print_act, act, signature)
    moment = now()
    expires = _expiry(expires, signing.act_time() or moment)
    request = WaiverRequest(
        task_id=task,
        suite_id=suite,
        states=tuple(s.strip() for s in states.split(",") if s.strip()),
        build=build,
        owner=owner,
        reason=reason,
        expires=expires,
    )
    with state.connect() as engine, printing_act():
        granted, data = grant(engine, request, actor=state.who(), now=moment, signing=signing)
    if granted:
        emit(
            ctx,
            data,
            echo_lines(
                [
                    f"granted {data['waiver_id']}: {data['task_id']} on {data['build']} for "
                    f"{', '.join(data['states'])} until {data['expires_at']}",
                    _signed_line(data["signers"]),
                    *(
                        [
                            f"note: {', '.join(data['overlaps'])} already "
                            f"cover{'s' if len(data['overlaps']) == 1 else ''} this task on "
                            f"{data['build']} for one of these states; both are recorded "
                            "(`evalops waiver revoke` the one no longer meant)"
                        ]
                        if data.get("overlaps")
                        else []
                    ),
                ]
            ),
        )
        return
    emit(
        ctx,
        data,
        echo_lines(
            ["waiver REFUSED:"] + [f"  [{r['rule']}] {r['message']}" for r in data["refusals"]]
        ),
    )
    raise typer.Exit(EXIT_REFUSED)


@waiver_app.command("list")
def waiver_list(
    ctx: typer.Context,
    all_: Annotated[
        bool, typer.Option("--all", help="Every waiver, expired and revoked too, with no limit.")
    ] = False,
    build: Annotated[str | None, typer.Option(help="Only waivers of this build.")] = None,
    task: Annotated[str | None, typer.Option(help="Only waivers of this task.")] = None,
    limit: LimitOption = None,
    json_flag: JsonFlag = False,
) -> None:
    """List waivers valid now (50 unless --limit N), or with --all every waiver ever granted.

    Example: evalops waiver list --all
    """
    from evalops.services.reads.listings import list_waivers

    state = settings(ctx, json_flag)
    # `--all` (the contract's "also expired and revoked") lists every waiver unless --limit.
    shown_limit = limit if all_ else row_limit(ctx, limit, False)
    with state.read() as reader:
        rows = list_waivers(reader, include_all=all_, now=now(), build=build, task=task)
    page = page_of(rows, shown_limit)
    emit_page(
        ctx,
        page,
        "waivers",
        echo_lines(
            [
                f"{r['waiver_id']} [{r['status'].replace('_', ' ')}] {r['task_id']} {r['build']} "
                f"{','.join(r['states'])} from {r['granted_at']} until {r['expires_at']} "
                f"(owner {r['owner']}; {_signed_line(r['signers'])})"
                for r in page.rows
            ]
        ),
    )


@waiver_app.command("revoke")
def waiver_revoke(
    ctx: typer.Context,
    waiver_id: Annotated[str, typer.Argument(metavar="ID", help="Waiver id.")],
    reason: Annotated[str, typer.Option(help="Why.")],
    sign_with: SignWithOption = None,
    print_act: PrintActOption = False,
    act: ActOption = None,
    signature: SignatureOption = None,
    json_flag: JsonFlag = False,
) -> None:
    """Revoke a waiver from now on (a new row; the grant stays in the history).

    With an authority in force the revocation is a risk owner's signed act, like a grant.

    Example: evalops waiver revoke WVR-2 --reason "fix did not ship"
    """
    from evalops.services.gate.waivers import revoke

    state = settings(ctx, json_flag)
    signing = signing_of(sign_with, print_act, act, signature)
    with state.connect() as engine, printing_act():
        revoked, data = revoke(
            engine, waiver_id, reason=reason, actor=state.who(), now=now(), signing=signing
        )
    if revoked:
        emit(
            ctx,
            data,
            echo_lines(
                [
                    f"revoked {waiver_id} at {data['revoked_at']}",
                    _signed_line(data["revocation_signers"]),
                ]
            ),
        )
        return
    emit(
        ctx,
        data,
        echo_lines(
            ["revocation REFUSED:"] + [f"  [{r['rule']}] {r['message']}" for r in data["refusals"]]
        ),
    )
    raise typer.Exit(EXIT_REFUSED)


def _signed_line(signers: list[dict[str, str]]) -> str:
    from evalops.services.reads.listings import describe_signers

    return describe_signers(signers)


def register(app: typer.Typer) -> None:
    app.add_typer(waiver_app, name="waiver")
