"""`evalops gate check|show|list|replay` and `evalops compare`."""

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple, cast

import typer

from evalops.cli.colour import painted_cell, say_painted
from evalops.cli.context import (
    JsonFlag,
    Settings,
    add_row,
    collector_paused,
    echo_lines,
    emit,
    new_table,
    now,
    say,
    settings,
)
from evalops.cli.listing import (
    AllOption,
    LimitOption,
    Page,
    emit_page,
    filtered,
    no_match,
    row_limit,
)
from evalops.cli.tables import digests_to_fit, print_table
from evalops.domain.humanize import measure, plural
from evalops.errors import EXIT_BLOCK, EXIT_HOLD, EXIT_OK, EXIT_VERIFY, InputError

if TYPE_CHECKING:
    from evalops.cli.context import Settings
    from evalops.domain.gate_documents import AnyGateInputs, DecisionDocument
    from evalops.domain.next_steps import Hints
    from evalops.store.reader import Reader

gate_app = typer.Typer(
    help="The release gate: pass, hold or block, and why.\n\nExample: evalops gate check "
    "--build build-124 --suite regression/core",
    no_args_is_help=True,
)
EXIT_BY_DECISION = {"pass": EXIT_OK, "hold": EXIT_HOLD, "block": EXIT_BLOCK}


def _at_or_none(value: str | None) -> Any:
    from evalops.domain.timestamps import parse_timestamp

    if value is None:
        return None
    try:
        return parse_timestamp(value)
    except ValueError as exc:
        raise InputError(str(exc), field="--at") from None


def policy_line(policy: dict[str, Any]) -> str:
    """`gate policy release-gate (no revision: named by digest sha256:...)`: which policy
    decided, in the first lines, so a second policy file can never decide unseen."""
    revision = policy.get("revision")
    which = f"revision {revision}, " if revision is not None else "no revision: named by "
    return f"gate policy {policy.get('id')} ({which}digest {policy.get('digest')})"


def _refused_text(refused: dict[str, Any]) -> str:
    """A waiver the policy in force refuses (named by its id, with why), or a request
    refused at grant (it never got a WVR id, so it is named by its audit event)."""
    if refused.get("waiver_id"):
        # Refused by the policy: its reason; by the authority (a separation of duties):
        # the refusal, which names the rule.
        why = (
            refused.get("reason") or refused.get("refusal") or ", ".join(refused.get("rules") or [])
        )
        return f"{refused['waiver_id']} {refused.get('task_id')} ({why or 'refused'})"
    rules = ", ".join(refused.get("rules") or []) or "refused"
    return f"audit #{refused.get('seq')} {refused.get('task_id')} ({rules})"


def _waiver_lines(waivers: dict[str, list[Any]]) -> list[str]:
    """Every waiver the decision considered, by id (nothing is counted without a name)."""
    lines = []
    for kind in ("applied", "expired", "unused", "revoked"):
        if waivers.get(kind):
            lines.append(f"{kind} {len(waivers[kind])}: {', '.join(waivers[kind])}")
    refused = waivers.get("refused") or []
    if refused:
        listed = "; ".join(_refused_text(r) for r in refused)
        lines.append(f"refused {len(refused)}: {listed}")
    return lines


def _regression_line(r: dict[str, Any], alpha: bool = False) -> str:
    """`inconclusive (mcnemar, 1 paired task, no p-value): why`, rounded for people."""
    p_value = r.get("pValue")
    detail = [str(r["method"])]
    if alpha:
        detail.append(f"alpha {measure(r.get('alpha'))}")
    detail.append(plural(r["pairedTaskCount"], "paired task"))
    detail.append("no p-value" if p_value is None else f"p={measure(p_value)}")
    line = f"{r['verdict']} ({', '.join(detail)})"
    if r.get("reason"):
        line += f": {r['reason']}"
    return line


def _side(side: dict[str, Any] | None) -> str:
    if side is None:
        return "no trials"
    return f"{side['passedCount']}/{side['n']} pass^k {measure(side['passHatK'])}"


def change_lines(changes: Mapping[str, Any], *, against: bool = True) -> list[str]:
    """The per-task flips, regressed first, one line per task that changed, then how many
    did not (the order is the report's)."""
    if not changes.get("baseline_build") and against:
        return []
    lines = []
    if against:
        where = (
            f"{changes['baseline_gate_id']}, the suite's previous decision on another build"
            if changes.get("source") == "previous_decision"
            else "the baseline"
        )
        lines.append(f"  changes since {changes['baseline_build']} ({where}):")
    moved = [t for t in changes["tasks"] if t["flip"] != "unchanged"]
    for t in moved[:TASK_ROWS]:
        lines.append(
            f"    {t['flip']:<9} {t['task_id']}: {_side(t['baseline'])} -> {_side(t['candidate'])}"
        )
    if len(moved) > TASK_ROWS:
        lines.append(f"    ... and {len(moved) - TASK_ROWS:,} more that changed (see --json)")
    unchanged = changes["counts"]["unchanged"]
    lines.append(f"    {plural(unchanged, 'task')} unchanged")
    if changes.get("alpha_note"):
        lines.append(f"  note: {changes['alpha_note']}")
    return lines


TASK_ROWS = 100
"""Rows of the terminal's task table beyond which it turns compact (a 10,000-task suite
would print for longer than anyone reads it)."""


#: The order of the task table: what stops the build first, a plain pass last.
EFFECT_ORDER = {"block": 0, "hold": 1}


def failing_first(tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Blocking tasks, then holding ones, then passes resting on a waiver, then plain passes:
    the rows a reader looks for come first. A stable sort keeps the decision's order within
    each group."""

    def rank(t: dict[str, Any]) -> int:
        return EFFECT_ORDER.get(t["effect"], 2 if t["waiver_id"] else 3)

    return sorted(tasks, key=rank)


def _compact(tasks: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """The tasks failing first; every one when there are few, else the first TASK_ROWS."""
    shown = failing_first(tasks)
    if len(shown) <= TASK_ROWS:
        return shown, 0
    return shown[:TASK_ROWS], len(tasks) - TASK_ROWS


def _states(tasks: list[dict[str, Any]], shown: list[dict[str, Any]]) -> list[str]:
    """`9,900 task_pass` and the like: what the rows left out of the table hold."""
    ids = {t["task_id"] for t in shown}
    counts: dict[str, int] = {}
    for t in tasks:
        if t["task_id"] not in ids:
            counts[t["state"]] = counts.get(t["state"], 0) + 1
    return [f"{n:,} {state}" for state, n in sorted(counts.items())]


NOT_COUNTED_ROWS = 10
"""Tasks named with trials not counted, beyond which one line says how many more."""


def _not_counted_lines(data: Mapping[str, Any]) -> list[str]:
    """Trials of the build that are not evidence for the pins (another revision, grader-set
    version or execution profile), per task: otherwise only --json and the reports name
    them, and a reader takes "no trials" at its word."""
    from evalops.domain.next_steps import not_counted

    named = not_counted(data)
    lines = [f"  not counted: {line}" for line in named[:NOT_COUNTED_ROWS]]
    if len(named) > NOT_COUNTED_ROWS:
        more = plural(len(named) - NOT_COUNTED_ROWS, "more task")
        lines.append(f"  not counted: ... and {more} with trials not counted (see --json)")
    return lines


def _open_effects(reader: "Reader", data: Mapping[str, Any]) -> "NextFacts":
    """The unsettled effect keys of the trials holding the decision (read now: the decision
    records the trial, not the key), so that its `next:` line can name the key; and what
    else the registry knows for those lines (the awaited grader, who may sign)."""
    from evalops.domain.next_steps import effect_trials
    from evalops.services.reads.hints import next_step_hints
    from evalops.services.reads.trials import open_effects

    trials = effect_trials(data)
    return NextFacts(open_effects(reader, trials) if trials else {}, next_step_hints(reader, data))


class NextFacts(NamedTuple):
    """What the `next:` lines fill in from the registry, read beside the decision."""

    effects: Mapping[str, list[str]]
    hints: "Hints"


def _off_line(reader: "Reader", data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The branch syncs a held build's definitions came from (read only for a hold)."""
    if data["decision"] != "hold" or "definitions" in data:
        return []
    from evalops.services.reads.off_line import off_line_syncs

    return off_line_syncs(reader, str(data["build"]))


def _render_decision(
    data: Mapping[str, Any],
    changes: Mapping[str, Any] | None = None,
    effects: NextFacts | None = None,
    off_line: list[dict[str, Any]] | None = None,
    voids: list[dict[str, Any]] | None = None,
) -> None:
    say_painted(
        data["decision"].upper(), f": {data['build']} on {data['suite']} ({data['gate_id']})"
    )
    if data.get("policy"):
        say(digests_to_fit("  " + policy_line(data["policy"])))
    from evalops.domain.next_steps import explained_reasons

    for reason in explained_reasons(data):
        say(f"  - {reason}")
    if data["tasks"]:
        # A table for every decision: a pass shows what it rests on too.
        shown, left_out = _compact(data["tasks"])
        table = new_table(
            "task", "risk", "state", "effect", "n", "passed", "pass@k", "pass^k", "waiver"
        )
        for t in shown:
            add_row(
                table,
                t["task_id"],
                t["risk"],
                t["state"],
                painted_cell(t["effect"]),
                str(t["n"]),
                str(t["passedCount"]),
                measure(t.get("passAtK")),
                measure(t.get("passHatK")),
                t["waiver_id"] or "-",
            )
        # The verdict's columns stay; the counts behind pass^k go first at 80 columns.
        print_table(table, drop=("pass@k", "risk", "n", "passed", "waiver"))
        if left_out:
            states = ", ".join(_states(data["tasks"], shown))
            more = f"{left_out:,} more task{'s' if left_out != 1 else ''}"
            say(
                f"  ... and {more} ({states}): every task is in "
                f"--json and in `evalops report audit --gate {data['gate_id']}`"
            )
    for line in _not_counted_lines(data):
        say(line)
    for void in voids or []:
        say(f"  {void['line']}")
    waiver_lines = _waiver_lines(data["waivers"])
    if waiver_lines:
        say("  waivers: " + "; ".join(waiver_lines))
    # A stored decision shown by `gate show` names who signed each waiver.
    for waiver_id, signers in (data.get("waiver_signers") or {}).items():
        say(f"  waiver {waiver_id}: {_signed_line(signers)}")
    if data["regression"]:
        r = data["regression"]
        baseline = r.get("baseline") or "-"
        say(f"  regression vs {baseline}: {_regression_line(r)}")
    for line in change_lines(changes or {}):
        say(line)
    say(
        digests_to_fit(
            f"  evaluated at {data['evaluated_at']}; suite_digest {data['suite_digest']}"
        )
    )
    from evalops.domain.next_steps import NO_HINTS, next_steps

    facts = effects or NextFacts({}, NO_HINTS)
    for step in next_steps(data, facts.effects if effects else None, off_line, facts.hints):
        say(f"next: {step}")


def _write_artifacts(
    engine: Any,
    gate_id: str,
    junit: Path | None,
    report: Path | None,
    unstored: "tuple[DecisionDocument, AnyGateInputs] | None" = None,
) -> None:
    """`--junit` / `--report`: render the decision with the exporters (read-only); a dry
    run's `unstored` (result, inputs) is rendered marked as not stored.

    The report's format follows its suffix: .html, .json, else Markdown.
    """
    if junit is None and report is None:
        return
    from evalops.cli.output import format_for, write_output
    from evalops.export.junit import junit_xml
    from evalops.report.audit import audit_chunks
    from evalops.services.reports.audit import audit_document, unstored_document

    if unstored is not None:
        doc = unstored_document(engine, result=unstored[0], inputs=unstored[1], now=now())
    else:
        doc = audit_document(engine, gate_id, now=now())
    if junit is not None and write_output(str(junit), junit_xml(doc), "--junit"):
        say(f"wrote JUnit XML to {junit}", err=True)
    if report is not None:
        kind = format_for(None, str(report), "md")
        if write_output(str(report), audit_chunks(doc, kind), "--report"):
            say(f"wrote the audit report ({kind}) to {report}", err=True)


@gate_app.command("check")
def gate_check(
    ctx: typer.Context,
    build: Annotated[str, typer.Option(help="The system build to decide on.")],
    suite: Annotated[str, typer.Option(help="The suite that guards it.")],
    execution: Annotated[
        str | None, typer.Option(help="Execution profile id, when several share the build.")
    ] = None,
    baseline: Annotated[
        str | None,
        typer.Option(help="Baseline build for the paired verdict, or `auto` (last pass)."),
    ] = None,
    at: Annotated[
        str | None, typer.Option(help="Evaluate as of this time (RFC 3339; default now).")
    ] = None,
    policy: Annotated[
        str | None,
        typer.Option(
            help="A registered gate policy (id or sha256: digest; default: the one the suite "
            "names, else the only one in force); another than the suite's, or a policy FILE, "
            "only with --dry-run."
        ),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="Evaluate and print the decision without storing anything."),
    ] = False,
    junit: Annotated[Path | None, typer.Option(help="Also write JUnit XML here.")] = None,
    report: Annotated[
        Path | None, typer.Option(help="Also write the audit report here (.html, .json, else .md).")
    ] = None,
    definitions: Annotated[
        str | None,
        typer.Option(
            "--definitions",
            metavar="REV",
            help="Evaluate under the definitions of commit REV of the registry's repository "
            "(read as sync reads them, never registered, not in force); only with --dry-run.",
        ),
    ] = None,
    json_flag: JsonFlag = False,
) -> None:
    """Decide pass (exit 0), hold (3) or block (4) for a build on a suite; stored and audited.

    The suite's gate policy decides (`gate_policy:` in its declaration; none named: the only
    one in force). A stored decision uses only it: another registered `--policy`, or a policy
    FILE, needs `--dry-run`, which evaluates and prints without storing anything.
    A pull request's CI evaluates under its own commit's definitions without putting them
    in force: `--dry-run --definitions HEAD` (docs/ci.md).

    Example: evalops gate check --build build-124 --suite regression/core --baseline build-123
    """
    state = settings(ctx, json_flag)
    code = 0
    with collector_paused():
        try:
            _gate_check(
                ctx,
                state,
                {
                    "build": build,
                    "suite_id": suite,
                    "at": _at_or_none(at),
                    "now": now(),
                    "execution_id": execution,
                    "baseline": baseline,
                    "policy": policy,
                },
                dry_run=dry_run,
                junit=junit,
                report=report,
                definitions=definitions,
            )
        except typer.Exit as done:
            # Left here, so that the decision and its inputs are let go while the collector
            # is still off (else it would walk them once on again, for nothing).
            code = done.exit_code
    raise typer.Exit(code)


def _gate_check(
    ctx: typer.Context,
    state: Settings,
    options: dict[str, Any],
    *,
    dry_run: bool,
    junit: Path | None,
    report: Path | None,
    definitions: str | None,
) -> None:
    """`gate check` with its options read (`options`: those of the services' `check`)."""
    from evalops.services.gate.check import check_decided, dry_run_check

    data: DecisionDocument
    inputs: AnyGateInputs
    number: int | None = None
    if definitions is not None:
        if not dry_run:
            raise InputError(
                "--definitions evaluates under a commit's definitions without putting them "
                "in force: only with --dry-run",
                field="--definitions",
            )
        _check_under_definitions(ctx, state, definitions, options, junit, report)
        return
    _refuse_unwritable(junit, report)
    unwritten: InputError | None = None
    with state.connect() as engine:
        if dry_run:
            data, inputs = dry_run_check(engine, **options)
            _write_artifacts(engine, data["gate_id"], junit, report, (data, inputs))
        else:
            data, inputs, number = check_decided(engine, actor=state.who(), **options)
            try:
                _write_artifacts(engine, data["gate_id"], junit, report)
            except InputError as failed:
                # Checked writable above, the file failed all the same (a disk filled up):
                # the decision is stored, so it is printed with its exit code, and how to
                # write the file again is said.
                unwritten = failed
        from evalops.services.reads.voids import decision_voids
        from evalops.services.reports.changes import decision_cutoff
        from evalops.store.reader import engine_reader

        changes, effects, off_line = None, None, None
        with engine_reader(engine) as reader:
            # The cutoff the inputs in memory record: a stored decision's text is not read.
            voids = decision_voids(reader, data, decision_cutoff(inputs, None))
        if not state.json:
            from evalops.services.reports.changes import decision_changes

            # From the decision in memory: a stored one's text is not parsed again.
            changes = decision_changes(engine, unstored=(data, inputs), before=number)
            with engine_reader(engine) as reader:
                effects = _open_effects(reader, data)
                off_line = _off_line(reader, data)
    # A key of the command's output only, never of the stored decision (docs/json.md).
    cast("dict[str, Any]", data)["voids"] = voids
    emit(ctx, data, lambda: _render_decision(data, changes, effects, off_line, voids))
    if unwritten is not None:
        gate_id = data["gate_id"]
        say(
            f"error: {unwritten}; {gate_id} is stored: `evalops gate show {gate_id} "
            "--junit FILE --report FILE` writes them",
            err=True,
        )
    raise typer.Exit(EXIT_BY_DECISION[data["decision"]])


def _refuse_unwritable(junit: Path | None, report: Path | None) -> None:
    """Before anything is decided or stored: a `--junit` or `--report` path that cannot be
    written is exit 2 with nothing stored, not a stored decision whose verdict is hidden
    behind a write error."""
    from evalops.cli.output import refuse_unwritable

    if junit is not None:
        refuse_unwritable(str(junit), "--junit")
    if report is not None:
        refuse_unwritable(str(report), "--report")


def _check_under_definitions(
    ctx: typer.Context,
    state: "Settings",
    revision: str,
    options: dict[str, Any],
    junit: Path | None,
    report: Path | None,
) -> None:
    """`--dry-run --definitions REV`: everything (decision, report, JUnit, hints) made in
    one transaction holding REV's definitions in force, then rolled back."""
    from evalops.services.gate.check import dry_run_check
    from evalops.services.gate.definitions_at import definitions_at
    from evalops.services.reads.voids import decision_voids
    from evalops.services.reports.changes import decision_changes, decision_cutoff
    from evalops.store.reader import ConnectionReader

    with (
        state.connect() as engine,
        definitions_at(engine, state.registry, revision, actor=state.who(), now=now()) as (
            bound,
            conn,
            where,
        ),
    ):
        data, inputs = dry_run_check(bound, **options)
        # A key of the dry run's document only (gate-check.schema.json).
        cast("dict[str, Any]", data)["definitions"] = where.as_dict()
        _write_artifacts(bound, data["gate_id"], junit, report, (data, inputs))
        changes, effects = None, None
        voids = decision_voids(ConnectionReader(conn), data, decision_cutoff(inputs, None))
        cast("dict[str, Any]", data)["voids"] = voids
        if not state.json:
            changes = decision_changes(bound, gate_id=data["gate_id"], unstored=(data, inputs))
            effects = _open_effects(ConnectionReader(conn), data)

    def human() -> None:
        say(f"dry run {where.describe()}")
        _render_decision(data, changes, effects, voids=voids)

    emit(ctx, data, human)
    raise typer.Exit(EXIT_BY_DECISION[data["decision"]])


@gate_app.command("show")
def gate_show(
    ctx: typer.Context,
    gate_id: Annotated[str, typer.Argument(metavar="ID", help="Gate decision id.")],
    junit: Annotated[Path | None, typer.Option(help="Also write JUnit XML here.")] = None,
    report: Annotated[
        Path | None, typer.Option(help="Also write the audit report here (.html, .json, else .md).")
    ] = None,
    json_flag: JsonFlag = False,
) -> None:
    """Show a stored gate decision; --junit / --report re-render it (nothing is recorded).

    Exits 0 whatever the stored decision says (showing is not deciding): a release job
    gates on the exit code of `gate check`, or of `verify-attestation --require pass`.

    Example: evalops gate show GATE-3 --junit gate.xml --report gate-report.md
    """
    from evalops.services.reads.voids import decision_voids

    state = settings(ctx, json_flag)
    effects: NextFacts | None = None
    voids: list[dict[str, Any]] = []
    if junit is None and report is None:
        from evalops.services.reads.listings import show_decision

        with state.read() as reader:
            data = show_decision(reader, gate_id)
            effects = None if state.json else _open_effects(reader, data)
            voids = decision_voids(reader, data)
    else:
        from evalops.services.gate.check import show
        from evalops.store.reader import engine_reader

        with state.connect() as engine:
            data = show(engine, gate_id)
            _write_artifacts(engine, gate_id, junit, report)
            with engine_reader(engine) as reader:
                effects = None if state.json else _open_effects(reader, data)
                voids = decision_voids(reader, data)
    # A key of the command's output only, never of the stored decision (docs/json.md).
    data["voids"] = voids

    def human() -> None:
        _render_decision(data, effects=effects, voids=voids)
        say(
            f"stored decision {gate_id}, shown as recorded (exit 0 whatever it says; "
            "`gate check` exits 0, 3 or 4)"
        )

    emit(ctx, data, human)


@gate_app.command("list")
def gate_list(
    ctx: typer.Context,
    suite: Annotated[str | None, typer.Option(help="Only this suite.")] = None,
    build: Annotated[str | None, typer.Option(help="Only this system build.")] = None,
    limit: LimitOption = None,
    all_rows: AllOption = False,
    json_flag: JsonFlag = False,
) -> None:
    """List stored gate decisions: the newest 50 (--limit N, --all), oldest first.

    Example: evalops gate list --suite regression/core
    """
    from evalops.services.reads.listings import list_decisions, unknown_filters

    state = settings(ctx, json_flag)
    shown_limit = row_limit(ctx, limit, all_rows)
    with state.read() as reader:
        rows, total = list_decisions(reader, suite, build=build, limit=shown_limit)
        unknown = unknown_filters(reader, suite=suite, build=build) if not total else []

    def human() -> None:
        for r in rows:
            say_painted(
                f"{r['decision']:<5}",
                f" {r['build']} {r['suite']} {r['evaluated_at']}",
                before=f"{r['gate_id']} ",
                key=r["decision"],
            )

    emit_page(
        ctx,
        Page(rows, total),
        "gate decisions",
        human,
        empty=no_match("gate decisions", filtered(suite=suite, build=build), unknown),
    )


@gate_app.command("replay")
def gate_replay(
    ctx: typer.Context,
    gate_id: Annotated[str, typer.Argument(metavar="ID", help="Gate decision id.")],
    json_flag: JsonFlag = False,
) -> None:
    """Re-evaluate a stored decision from its stored inputs; exit 6 unless byte-identical.

    Example: evalops gate replay GATE-3
    """
    from evalops.services.gate.check import replay

    state = settings(ctx, json_flag)
    with state.connect() as engine:
        data = replay(engine, gate_id)
    lines = [f"{gate_id}: {'identical' if data['identical'] else 'DIFFERENT'}"]
    lines += [f"  - {p}" for p in data["problems"]]
    emit(ctx, data, echo_lines(lines))
    if not data["identical"]:
        raise typer.Exit(EXIT_VERIFY)


def _signed_line(signers: list[dict[str, str]]) -> str:
    from evalops.services.reads.listings import describe_signers

    return describe_signers(signers)


def compare(
    ctx: typer.Context,
    baseline: Annotated[str, typer.Option(help="Baseline build.")],
    candidate: Annotated[str, typer.Option(help="Candidate build.")],
    suite: Annotated[str, typer.Option(help="Suite whose members are paired.")],
    method: Annotated[
        str | None, typer.Option(help="mcnemar, sign-test, paired-t or paired-bootstrap.")
    ] = None,
    alpha: Annotated[float | None, typer.Option(help="Significance level.")] = None,
    seed: Annotated[int, typer.Option(help="Seed of paired-bootstrap (recorded).")] = 20261130,
    policy: Annotated[
        str | None,
        typer.Option(
            help="A registered gate policy id or digest (default: the suite's gate policy)."
        ),
    ] = None,
    json_flag: JsonFlag = False,
) -> None:
    """The paired regression verdict of two builds on a suite (nothing stored).

    Example: evalops compare --baseline build-123 --candidate build-124 --suite
    regression/core --method sign-test --alpha 0.05
    """
    from evalops.services.gate.check import compare as run

    state = settings(ctx, json_flag)
    with state.connect() as engine:
        data = run(
            engine,
            baseline=baseline,
            candidate=candidate,
            suite_id=suite,
            method=method,
            alpha=alpha,
            seed=seed,
            now=now(),
            policy=policy,
        )
    emit(
        ctx,
        data,
        echo_lines(
            [
                f"{candidate} vs {baseline} on {suite}: " + _regression_line(data, alpha=True),
                *change_lines(data["changes"], against=False),
            ]
        ),
    )


def register(app: typer.Typer) -> None:
    app.add_typer(gate_app, name="gate")
    app.command("compare")(compare)
