"""`evalops suite list|show|coverage`, `evalops promote`, `evalops retire`."""

from typing import Annotated, Any

import typer

from evalops.cli.context import JsonFlag, add_row, emit, new_table, now, say, settings
from evalops.cli.listing import AllOption, LimitOption, emit_page, page_of, row_limit
from evalops.cli.signing import (
    ActOption,
    PrintActOption,
    SignatureOption,
    SignWithOption,
    printing_act,
    signing_of,
)
from evalops.cli.tables import print_table
from evalops.domain.humanize import plural
from evalops.errors import EXIT_REFUSED

suite_app = typer.Typer(
    help="Suites and their members.\n\nExample: evalops suite show regression/core",
    no_args_is_help=True,
)
SuiteArg = Annotated[str, typer.Argument(metavar="SUITE", help="Suite id.")]


@suite_app.command("list")
def list_(
    ctx: typer.Context,
    limit: LimitOption = None,
    all_rows: AllOption = False,
    json_flag: JsonFlag = False,
) -> None:
    """List suites with their kind, member count and current suite_digest (50 unless
    --limit N or --all).

    Example: evalops suite list
    """
    from evalops.services.registry.suites import list_suites

    state = settings(ctx, json_flag)
    with state.connect() as engine:
        rows = list_suites(engine)
    page = page_of(rows, row_limit(ctx, limit, all_rows))

    def human() -> None:
        table = new_table("suite", "kind", "members", "suite_digest")
        for r in page.rows:
            add_row(table, r["suite"], r["kind"], str(r["members"]), r["suite_digest"])
        print_table(table, shorten=("suite_digest",))

    emit_page(ctx, page, "suites", human)


def _removal(removed: dict[str, Any]) -> str:
    """A removed member's kind, reason (when it says more than the kind) and approver."""
    kind, reason = removed.get("kind"), removed.get("reason")
    why = reason if kind is None or reason == kind else f"{kind}: {reason}"
    return f"{why} by {removed['approved_by']}"


@suite_app.command()
def show(
    ctx: typer.Context,
    suite: SuiteArg,
    all_: Annotated[
        bool, typer.Option("--all", help="Also show removed members, with reason and approver.")
    ] = False,
    json_flag: JsonFlag = False,
) -> None:
    """Show a suite's members: pinned revision and digests, when, by whom, via which promotion,
    and who signed it (principal and key fingerprint, or "unsigned").

    Example: evalops suite show regression/core --all
    """
    from evalops.services.reads.listings import describe_signers, show_suite

    state = settings(ctx, json_flag)
    with state.read() as reader:
        data = show_suite(reader, suite, include_removed=all_)

    def human() -> None:
        say(f"{data['suite']} ({data['kind']})  suite_digest {data['suite_digest']}")
        table = new_table("task", "rev", "task_digest", "added", "by", "via", "signed", "removed")
        for m in data["members"]:
            removed = m["removed"]
            add_row(
                table,
                m["task_id"],
                str(m["revision"]),
                m["task_digest"],
                m["added_at"],
                m["added_by"],
                (m["promotion"] or {}).get("subject", "-"),
                describe_signers(m["signers"]),
                (f"{_removal(removed)}; {describe_signers(removed['signers'])}" if removed else ""),
            )
        print_table(
            table,
            shorten=("task_digest",),
            prose=("signed", "removed"),
            drop=("via", "by", "added", "rev", "removed"),
        )

    emit(ctx, data, human)


@suite_app.command()
def coverage(ctx: typer.Context, suite: SuiteArg, json_flag: JsonFlag = False) -> None:
    """Per forbidden effect and success-state key of each member: primary grader, evidence,
    gate effect; gaps are marked.

    Example: evalops suite coverage regression/core
    """
    from evalops.services.registry.suites import suite_coverage

    state = settings(ctx, json_flag)
    with state.connect() as engine:
        data = suite_coverage(engine, suite)

    def human() -> None:
        table = new_table(
            "task",
            "kind",
            "item",
            "primary grader",
            "evidence",
            "gate effect",
            "gap",
            title=f"{suite}: {plural(data['gaps'], 'gap')}",
        )
        for r in data["rows"]:
            add_row(
                table,
                r["task_id"],
                r["kind"],
                r["item"],
                r["primary_grader"] or "-",
                ", ".join(r["evidence"]),
                r["gate_effect"],
                "GAP" if r["gap"] else "-",
            )
        print_table(table, prose=("evidence",), drop=("gap", "primary grader", "kind"))

    emit(ctx, data, human)


def _checklist(data: dict[str, Any], verb: str) -> None:
    outcome = {
        "accepted": f"{verb} accepted",
        "refused": f"{verb} REFUSED",
        "noop": (
            f"already a member with this pin; {data['subject']} promoted (its task guards it)"
            if data.get("incident_promoted")
            else "already a member with this pin: nothing to do"
        ),
        "dry_run": f"dry run: would be {'accepted' if data['accepted'] else 'refused'}",
        "dry_run_noop": (
            f"dry run: already a member with this pin; {data['subject']} would be promoted "
            "(its task guards it)"
            if data.get("incident_promoted")
            else "dry run: already a member with this pin (nothing would change)"
        ),
    }[data["outcome"]]
    # A retirement takes the task out of the suite: an arrow into it read as a promotion.
    where = f"out of {data['suite']}" if verb == "retirement" else f"-> {data['suite']}"
    say(f"{outcome}: {data['subject']} {where}")
    for r in data["requirements"]:
        mark = "ok  " if r["met"] else "FAIL"
        say(f"  [{mark}] {r['name']}: {r['evidence']}")
        if r["fix"]:
            say(f"         fix: {r['fix']}")
    if data.get("signers") is not None:
        from evalops.services.registry.promotion import signers_wanted

        # The authority judges only a signed act: say before it who can sign this one.
        wanted = signers_wanted((data["signers"], data["signatures_needed"]))
        say(
            f"  under the authority it needs the act suite.promote signed by {wanted} (--sign-with)"
        )


def promote(
    ctx: typer.Context,
    subject: Annotated[
        str, typer.Argument(metavar="SUBJECT", help="A task id, or an incident id (INC-<n>).")
    ],
    to: Annotated[str, typer.Option("--to", help="Target suite id.")],
    dry_run: Annotated[bool, typer.Option(help="Print the checklist; change nothing.")] = False,
    reason: Annotated[str | None, typer.Option(help="Why, for the record.")] = None,
    sign_with: SignWithOption = None,
    print_act: PrintActOption = False,
    act: ActOption = None,
    signature: SignatureOption = None,
    json_flag: JsonFlag = False,
) -> None:
    """Promote a task (or an incident's task) into a suite under the SuitePolicy.

    Every requirement of the target kind's entry rule is checked; all met: the membership
    is recorded (exit 0); any unmet: nothing changes, the refusal is audited (exit 5).
    With an authority in force a new member or a new pin must be signed by a risk owner
    of the suite (`suite.promote`: --sign-with KEY, or --print-act then --act/--signature).

    Example: evalops promote INC-1 --to regression/core
    """
    from evalops.services.registry.promotion import promote as run_promote

    state = settings(ctx, json_flag)
    signing = signing_of(sign_with, print_act, act, signature)
    with state.connect() as engine, printing_act():
        result = run_promote(
            engine,
            subject,
            to,
            actor=state.who(),
            now=now(),
            reason=reason,
            dry_run=dry_run,
            signing=signing,
        )
    data = result.as_dict()
    emit(ctx, data, lambda: _checklist(data, "promotion"))
    if not result.accepted:
        raise typer.Exit(EXIT_REFUSED)


def retire(
    ctx: typer.Context,
    task: Annotated[str, typer.Argument(metavar="TASK", help="Member task id.")],
    from_: Annotated[str, typer.Option("--from", help="Suite id.")],
    reason: Annotated[
        str,
        typer.Option(
            help="Why, in free text (with --kind); without --kind one of obsolete, "
            "unsupported or replaced, taken as the kind."
        ),
    ],
    kind: Annotated[
        str | None,
        typer.Option(
            help="obsolete, unsupported or replaced: what the suite policy's rules key on."
        ),
    ] = None,
    approved_by: Annotated[
        str | None, typer.Option(help="The risk owner who approves the removal.")
    ] = None,
    replaced_by: Annotated[
        str | None, typer.Option(help="The member task that takes over its coverage.")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option(help="Print the checklist the retirement would meet; change nothing.")
    ] = False,
    sign_with: SignWithOption = None,
    print_act: PrintActOption = False,
    act: ActOption = None,
    signature: SignatureOption = None,
    json_flag: JsonFlag = False,
) -> None:
    """Remove a task from a suite (history kept); refused (exit 5) without approval, or when
    the replacement does not cover everything the task covered.

    With an authority in force the retirement must be signed by risk owners of the suite
    (their principals are the approval; --sign-with KEY, or --print-act then --act/--signature).

    --dry-run prints the checklist the retirement would meet and changes nothing (exit 5
    when it would be refused).

    Example: evalops retire old-task --from regression/core --kind replaced
    --reason "new-task checks the refund path end to end" --approved-by risk@example.com
    --replaced-by new-task
    """
    from evalops.services.registry.promotion import retire as run_retire

    state = settings(ctx, json_flag)
    signing = signing_of(sign_with, print_act, act, signature)
    with state.connect() as engine, printing_act():
        result = run_retire(
            engine,
            task,
            from_,
            reason=reason,
            kind=kind,
            approved_by=approved_by,
            replaced_by=replaced_by,
            actor=state.who(),
            now=now(),
            signing=signing,
            dry_run=dry_run,
        )
    data = result.as_dict()
    emit(ctx, data, lambda: _checklist(data, "retirement"))
    if not result.accepted:
        raise typer.Exit(EXIT_REFUSED)


def register(app: typer.Typer) -> None:
    app.add_typer(suite_app, name="suite")
    app.command("promote")(promote)
    app.command("retire")(retire)
