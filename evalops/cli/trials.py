"""`evalops trials ingest|list|show|reconcile|template` and `evalops trials import`."""

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from evalops.cli.context import (
    JsonFlag,
    add_row,
    emit,
    json_text,
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
from evalops.cli.progress import ProgressOption, progress, progress_mode
from evalops.cli.signing import (
    ActOption,
    PrintActOption,
    SignatureOption,
    SignWithOption,
    printing_act,
    signing_of,
)
from evalops.cli.tables import print_table
from evalops.domain.humanize import measure, text
from evalops.errors import EXIT_REFUSED, InputError, RejectedRecords
from evalops.services.ingest.unsynced import with_file_hints

if TYPE_CHECKING:
    from evalops.cli.context import Settings
    from evalops.record import TrialBuilder
    from evalops.services.authority.acts import Signing

trials_app = typer.Typer(
    help="Trial records: ingest, inspect, reconcile.\n\nExample: evalops trials list --build "
    "build-124",
    no_args_is_help=True,
)


EXIT_INTERRUPTED = 130


def _total(files: list[Path]) -> int | None:
    """The bytes to read, when every input is a regular file (not a pipe)."""
    if any(str(f) == "-" or not f.is_file() for f in files):
        return None
    return sum(f.stat().st_size for f in files)


def _trajectory_words(block: dict[str, Any]) -> str:
    """The stored trajectory block in words (`--json` keeps the block itself)."""
    from evalops.domain.trajectory import TrajectoryResult

    try:
        return TrajectoryResult.from_block(block).describe()
    except (KeyError, TypeError):
        import json

        return json.dumps(block)  # a block of another shape: shown as it is


def _score_text(trial: dict[str, Any]) -> str:
    """A trial's score as people read it: its gating score (0 for a crashed, hard-failed or
    evidence-blocked trial), `-` when nothing scored it."""
    return measure(float(trial["gating_score"])) if trial.get("scored", True) else "-"


@trials_app.command()
def ingest(
    ctx: typer.Context,
    files: Annotated[
        list[Path],
        typer.Argument(
            metavar="FILE",
            help="evalops.trial/v1 JSONL files; `-` (or /dev/stdin) reads standard input; "
            "gzip (.jsonl.gz) and zstd (.jsonl.zst) files are decompressed as they are read.",
        ),
    ],
    max_bad_records: Annotated[
        int,
        typer.Option(
            min=0,
            help="Commit the valid lines if at most N lines are bad (default: all or nothing).",
        ),
    ] = 0,
    progress_option: ProgressOption = None,
    sign_with: SignWithOption = None,
    print_act: PrintActOption = False,
    act: ActOption = None,
    signature: SignatureOption = None,
    json_flag: JsonFlag = False,
) -> None:
    """Ingest trial records: validated, classified by evalops, all-or-nothing by default.

    Re-ingesting an identical record is a counted no-op; the same trial_id with other
    content is an error. Every bad line is reported as file:line: field (up to 1,000, and
    how many in all). Ctrl-C stops the ingest with nothing stored (exit 130).

    Example: evalops trials ingest registry/trials/candidate-b124.jsonl
    """
    from evalops.services.ingest.records import ingest_files

    state = settings(ctx, json_flag)
    mode = progress_mode(ctx, progress_option)
    signing = signing_of(sign_with, print_act, act, signature)
    try:
        with (
            state.connect() as engine,
            printing_act(),
            progress(mode, "ingesting", _total(files)) as on_bytes,
        ):
            result = ingest_files(
                engine,
                files,
                actor=state.who(),
                now=now(),
                max_bad_records=max_bad_records,
                on_bytes=on_bytes,
                signing=signing,
            )
    except KeyboardInterrupt:
        # An open write transaction rolled back on the way out; a committed one is said so.
        from evalops.store.interrupts import interrupted_line

        say(interrupted_line(), err=True)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except RejectedRecords as refused:
        raise _hinted(refused, state.registry) from None
    result.rejected = with_file_hints(result.rejected, state.registry)

    def human() -> None:
        say(
            f"ingested {result.ingested}, skipped {result.skipped_identical} identical, "
            f"rejected {result.rejected_total}"
        )
        for note in result.notes():
            say(f"note: {note}", err=True)
        for e in result.rejected:
            say(f"rejected: {e.one_line()}", err=True)
        if result.rejected_total > len(result.rejected):
            say(
                f"rejected: {result.rejected_total - len(result.rejected)} more bad records not "
                f"listed (the report stops at {len(result.rejected)})",
                err=True,
            )
        if result.rejected_total and not result.ingested and not result.skipped_identical:
            # Within --max-bad-records the exit code is 0: a CI step would pass on nothing.
            say(
                "warning: every record was rejected, nothing was stored (exit 0 because "
                "--max-bad-records allows them): fix the records above",
                err=True,
            )

    emit(ctx, result.as_dict(), human)


@trials_app.command("list")
def list_(
    ctx: typer.Context,
    task: Annotated[str | None, typer.Option(help="Only this task id.")] = None,
    build: Annotated[str | None, typer.Option(help="Only this system build.")] = None,
    cls: Annotated[
        str | None, typer.Option("--class", help="Only trials currently of this class.")
    ] = None,
    suite: Annotated[
        str | None,
        typer.Option(help="Only trials of this suite's members at their pinned digests."),
    ] = None,
    limit: LimitOption = None,
    all_rows: AllOption = False,
    json_flag: JsonFlag = False,
) -> None:
    """List trials with their current classification (re-derived from current evidence).

    Shows the first 50 matching trials (oldest first) and "showing N of M" on stderr;
    --limit N or --all for more. Past 10,000 matches (or N, if larger) the count stops
    and says "of more than 10,000". --json lists every match unless --limit is given.

    Example: evalops trials list --task support-refund-in-order --class task_fail
    """
    from evalops.services.reads.listings import unknown_filters
    from evalops.services.reads.trials import TrialFilter, count_cap, list_trials, voided_count

    state = settings(ctx, json_flag)
    shown_limit = row_limit(ctx, limit, all_rows)
    where = TrialFilter(task=task, build=build, cls=cls, suite=suite)
    with state.read() as reader:
        rows, total = list_trials(reader, where, shown_limit)
        unknown = unknown_filters(reader, task=task, build=build, suite=suite) if not total else []
        voided = 0 if state.json else voided_count(reader, where)
    if voided:
        say(
            f"voided: {voided} matching trial{'s' if voided != 1 else ''} left out "
            "(`evalops void list` says by whom and why)",
            err=True,
        )

    def human() -> None:
        table = new_table("trial", "task", "build", "#", "class", "score", "rerun of", "labels")
        for r in rows:
            add_row(
                table,
                r["trial_id"],
                r["task_id"],
                r["build"] or "-",
                str(r["trial_index"]),
                r["classification"],
                _score_text(r),
                r["parent_trial_id"] or "",
                ", ".join(r["secondary_labels"]),
            )
        print_table(table, prose=("labels",), drop=("rerun of", "labels", "#", "task"))

    counted_to = None if cls or shown_limit is None else count_cap(shown_limit)
    emit_page(
        ctx,
        Page(rows, total, counted_to),
        "trials",
        human,
        empty=no_match(
            "trials", filtered(task=task, build=build, **{"class": cls}, suite=suite), unknown
        ),
    )


def source_lines(source: dict[str, Any] | None) -> list[str]:
    """Where an imported trial came from, and the command that opens it."""
    if not source:
        return []
    if source["tool"] == "inspect":
        log = source.get("log_file")
        where = (
            f"log {text(log)} (eval {text(source['eval_id'])})"
            if log
            else (f"eval {text(source['eval_id'])}")
        )
        return [
            f"source: Inspect {where}, sample {text(source['sample_id'])}, "
            f"epoch {text(source['epoch'])}",
            f"  open with: {text(source['open_with'])}",
        ]
    parts = [f"eval {text(source['eval_id'])}"]
    if source.get("results_file"):
        parts.append(f"file {text(source['results_file'])}")
    if source.get("test_index") is not None:
        parts.append(f"test index {source['test_index']}")
    if source.get("prompt_index") is not None:
        parts.append(f"prompt {source['prompt_index']}")
    if source.get("provider"):
        parts.append(f"provider {text(source['provider'])}")
    return [f"source: promptfoo {', '.join(parts)}", f"  open with: {text(source['open_with'])}"]


@trials_app.command()
def show(
    ctx: typer.Context,
    trial_id: Annotated[str, typer.Argument(metavar="TRIAL", help="Trial id.")],
    json_flag: JsonFlag = False,
) -> None:
    """Show a trial: classification and why, labels, rerun chain, effects, reconciliations,
    reviews.

    Example: evalops trials show trial-b124-article-publish-approved-revision-3
    """
    from evalops.services.ingest.trials import show_trial

    state = settings(ctx, json_flag)
    with state.connect() as engine:
        data = show_trial(engine, trial_id)

    def human() -> None:
        say(f"{data['trial_id']}  {data['task_id']}  build {text(data['build'])}")
        if data.get("void"):
            say(f"  {data['void']['line']} (left out of every decision from then on)")
        say(
            f"  class: {data['classification']} "
            f"(at ingest: {text(data['classification_at_ingest'])})"
        )
        for reason in data["reasons"]:
            say(f"    because {reason}")
        say(f"  labels: {', '.join(data['secondary_labels']) or '-'}")
        raw = f"  (trial score {text(data['score'])})" if data.get("scored", True) else ""
        say(f"  score {_score_text(data)}{raw}")
        for r in data["grader_results"]:
            say(f"  grader {r['grader_id']}@{r['grader_version']}: {r['state']}")
        for r in data["reviews"]:
            say(f"  review {r['grader_id']}: {r['state']} by {r['actor']} ({text(r['reason'])})")
        if data["trajectory"]:
            say(f"  trajectory: {_trajectory_words(data['trajectory'])}")
        say(f"  rerun chain: {' -> '.join(data['rerun_chain'])}")
        say(f"  ingest batch: {data['batch']} (`evalops trials void --batch {data['batch']}`)")
        for line in source_lines(data.get("source")):
            say(f"  {line}")
        # As recorded; the reconciliations below settle the requested or unknown ones.
        for e in data["external_effects"]:
            say(f"  effect {e['effect_key']}: {e['status']}")
        for r in data["reconciliations"]:
            say(
                f"  reconciled {r['effect_key']} -> {r['status']} by {r['actor']} "
                f"({text(r['evidence_uri'])})"
            )

    emit(ctx, data, human)


@trials_app.command()
def reconcile(
    ctx: typer.Context,
    trial_id: Annotated[str, typer.Argument(metavar="TRIAL", help="Trial id.")],
    effect: Annotated[str, typer.Option(help="The effect_key to reconcile.")],
    status: Annotated[str, typer.Option(help="committed or not_committed.")],
    evidence: Annotated[str, typer.Option(help="URI of the evidence (receipt, log).")],
    index: Annotated[
        int | None,
        typer.Option(
            min=0,
            max=2**53 - 1,  # a position canonical JSON can record
            help="Position in external_effects, when several requested/unknown effects share "
            "the key.",
        ),
    ] = None,
    sign_with: SignWithOption = None,
    print_act: PrintActOption = False,
    act: ActOption = None,
    signature: SignatureOption = None,
    json_flag: JsonFlag = False,
) -> None:
    """Settle one `requested` or `unknown` external effect (a new row).

    An effect recorded `committed` or `not_committed` is a fact of the run and is never
    reconciled, and a settled effect stays settled: both are refused (exit 5, audited).
    Under an authority a reconciliation is a signed act `trials.reconcile` by a risk_owner
    of every suite the trial's task is a member of.

    Example: evalops trials reconcile trial-b124-article-publish-approved-revision-3
    --effect publish:article-42 --status not_committed --evidence receipt://publish/none-42
    """
    from evalops.services.ingest.trials import reconcile as run

    state = settings(ctx, json_flag)
    with state.connect() as engine, printing_act():
        data = run(
            engine,
            trial_id,
            effect_key=effect,
            status=status,
            evidence_uri=evidence,
            actor=state.who(),
            now=now(),
            index=index,
            signing=signing_of(sign_with, print_act, act, signature),
        )

    def human() -> None:
        from evalops.services.reads.listings import describe_signers

        say(f"{trial_id}: {effect} reconciled as {status}; trial is now {data['classification']}")
        say(describe_signers(data["reconciled"]["signers"]))

    emit(ctx, data, human)


@trials_app.command()
def void(
    ctx: typer.Context,
    trial_ids: Annotated[
        list[str] | None,
        typer.Argument(metavar="TRIAL", help="The trials ingested by mistake."),
    ] = None,
    batch: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=2**63 - 1,
            help="Every live trial of this ingest batch (`trials show` names it).",
        ),
    ] = None,
    reason: Annotated[
        str, typer.Option(help="Why the trials are a mistake (shown wherever they are left out).")
    ] = "",
    confirm_hard_failure: Annotated[
        bool,
        typer.Option(
            "--confirm-hard-failure",
            help="Without an authority: void trials that are hard_constraint_fail or "
            "ambiguous_external_effect (under one: two signers, threshold trials.void_hard).",
        ),
    ] = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Store nothing; show what would change in the latest decision of each "
            "affected suite.",
        ),
    ] = False,
    sign_with: SignWithOption = None,
    print_act: PrintActOption = False,
    act: ActOption = None,
    signature: SignatureOption = None,
    json_flag: JsonFlag = False,
) -> None:
    """Void trials ingested by mistake: left out of the gate, statistics and listings from
    now on, never deleted or edited (a VOID-n row, audited).

    `--at` before the void, replays of earlier decisions and `verify` still see them. A
    voided trial's id may be ingested again with corrected content. Under an authority the
    void is a signed act `trials.void` by a risk_owner of every suite the trials' tasks are
    members of. Hard failures need two signers, or `--confirm-hard-failure` without one.

    Example: evalops trials void --batch 3 --reason "ingested under the wrong build" --dry-run
    """
    from evalops.services.ingest.voids import VoidRequest, void_trials

    state = settings(ctx, json_flag)
    request = VoidRequest(
        tuple(trial_ids or ()),
        batch,
        reason,
        confirm_hard_failure=confirm_hard_failure,
        dry_run=dry_run,
        signing=signing_of(sign_with, print_act, act, signature),
    )
    with state.connect() as engine, printing_act():
        data = void_trials(engine, request, actor=state.who(), now=now())
    emit(ctx, data, lambda: _print_void(data))
    if data["dry_run"] and data.get("refusal"):
        # Refused by the void's own rules: exit 5, as `retire --dry-run`; nothing is audited.
        raise typer.Exit(EXIT_REFUSED)


def _print_void(data: dict[str, Any]) -> None:
    if not data["dry_run"]:
        say(data["line"])
        say("next: `evalops void list`; `evalops gate check ... --dry-run` to see the effect")
        return
    n = data["trial_count"]
    say(f"dry run: would void {n} trial{'s' if n != 1 else ''} ({data['hard_count']} hard)")
    for t in data["trials"]:
        say(f"  {t['trial_id']}  {t['task_id']}  {t['classification']}")
    if data.get("refusal"):
        say(f"  would be refused: {data['refusal']}")
    if not data["decisions"]:
        say("  no stored decision of an affected suite: nothing to compare")
    for d in data["decisions"]:
        change = "unchanged" if d["decision"] == d["with_void"] else "changes"
        say(
            f"  {d['suite']}: latest {d['latest']} ({d['build']}) decided again now: "
            f"{d['decision']} -> with the void: {d['with_void']} ({change})"
        )
        if d.get("error"):
            say(f"    cannot decide it again: {d['error']}")
        for t in d["tasks"]:
            was, will = t["now"], t["with_void"] or {}
            say(
                f"    {t['task_id']}: {was['state']} n={was['n']} -> "
                f"{will.get('state', '-')} n={will.get('n', '-')}"
            )


void_app = typer.Typer(
    help="Voids of trials ingested by mistake (`evalops trials void` records them).\n\n"
    "Example: evalops void list",
    no_args_is_help=True,
)


@void_app.command("list")
def void_list(ctx: typer.Context, json_flag: JsonFlag = False) -> None:
    """List every void: hard-failure voids first, then newest first, with who signed.

    Example: evalops void list --json
    """
    from evalops.services.reads.voids import list_voids

    state = settings(ctx, json_flag)
    with state.read() as reader:
        voids = list_voids(reader)

    def human() -> None:
        if not voids:
            say("no voids")
            return
        for v in voids:
            hard = "HARD " if v["hard_count"] else ""
            say(
                f"{hard}{v['line']} ({v['at']}; {', '.join(v['trials'][:10])}"
                f"{' ...' if len(v['trials']) > 10 else ''})"
            )

    emit(ctx, voids, human)


import_app = typer.Typer(
    help="Import trials from the harnesses teams already run: Inspect AI logs and promptfoo "
    "results, through an import map (registry/imports/).\n\nExample: evalops trials import "
    "inspect logs/refund.eval --map registry/imports/inspect-support.yaml --dry-run",
    no_args_is_help=True,
)
trials_app.add_typer(import_app, name="import")

MapOption = Annotated[
    Path,
    typer.Option(
        "--map", help="The import map (import-map/v1): samples -> tasks, scorers -> graders."
    ),
]
OutputOption = Annotated[
    Path | None,
    typer.Option(
        "-o", "--output", help="Write the trial records to this JSONL file instead of ingesting."
    ),
]
DryRunOption = Annotated[
    bool,
    typer.Option(
        "--dry-run",
        help="Ingest nothing; run every check the import runs (and exit as it would), and "
        "print per task the trials, pass@k / pass^k beside the source tool's own reduction, "
        "unmapped samples and scorers (with --skip-unmapped), blocking graders with no scorer.",
    ),
]
SkipUnmappedOption = Annotated[
    bool,
    typer.Option(
        "--skip-unmapped",
        help="Skip (and count) samples, scorers and providers the map does not name, "
        "instead of refusing the import.",
    ),
]


def _run_import(
    ctx: typer.Context,
    source: str,
    files: list[Path],
    map_file: Path,
    *,
    output: Path | None,
    dry_run: bool,
    skip_unmapped: bool,
    started_at: str | None,
    json_flag: bool,
    progress_option: str | None = None,
    allow_incomplete: bool = False,
    signing: "Signing | None" = None,
) -> None:
    from evalops.services.authority.acts import UNSIGNED
    from evalops.services.ingest.imports import import_trials

    state = settings(ctx, json_flag)
    mode = progress_mode(ctx, progress_option)
    try:
        with (
            state.connect() as engine,
            printing_act(),
            progress(mode, "importing", None, unit="records") as on_record,
        ):
            result = import_trials(
                engine,
                source,  # type: ignore[arg-type]
                files,
                map_file,
                actor=state.who(),
                now=now(),
                dry_run=dry_run,
                output=output,
                skip_unmapped=skip_unmapped,
                started_at=started_at,
                allow_incomplete=allow_incomplete,
                on_record=on_record,
                signing=signing or UNSIGNED,
            )
    except KeyboardInterrupt:
        # An open write transaction rolled back on the way out; a committed one is said so
        # (-o writes its file only when complete).
        from evalops.store.interrupts import interrupted_line

        say(interrupted_line(), err=True)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    emit(ctx, result.as_dict(), lambda: _print_import(result.as_dict()))


def _print_import(data: dict[str, Any]) -> None:
    from evalops.cli.imports_text import import_summary_lines

    for line in import_summary_lines(data):
        typer.echo(line)
    for e in data["rejected"]:
        where = ": ".join(str(p) for p in (e["file"], e["field"]) if p)
        say(f"rejected: {where}: {e['error']}", err=True)


@import_app.command("inspect")
def import_inspect(
    ctx: typer.Context,
    logs: Annotated[list[Path], typer.Argument(metavar="LOG", help="Inspect .eval or .json logs.")],
    map_file: MapOption,
    output: OutputOption = None,
    dry_run: DryRunOption = False,
    skip_unmapped: SkipUnmappedOption = False,
    allow_incomplete: Annotated[
        bool,
        typer.Option(
            "--allow-incomplete",
            help="Import a log whose eval did not finish (status error, cancelled or "
            "started); samples the harness cancelled because another failed are skipped "
            "and counted (cancelled_by_harness).",
        ),
    ] = False,
    progress_option: ProgressOption = None,
    sign_with: SignWithOption = None,
    print_act: PrintActOption = False,
    act: ActOption = None,
    signature: SignatureOption = None,
    json_flag: JsonFlag = False,
) -> None:
    """Import Inspect AI logs (.eval or .json): each sample-epoch execution becomes a trial.

    A trial is named by the sample's uuid, so a sample an eval-retry log copied is the same
    trial (imported once). Each of a sample's error_retries is its own trial, a rerun of the
    attempt before it. Scores map through the map's values (unlisted or NaN: grader_invalid
    for a blocking grader); every limit must be mapped. All or nothing; re-importing a log,
    a copy or a conversion of it is a counted no-op. Needs the inspect extra:
    pip install '.[inspect]' in the evalops checkout.

    Example: evalops trials import inspect refund.eval --map registry/imports/inspect-support.yaml
    """
    _run_import(
        ctx,
        "inspect",
        logs,
        map_file,
        output=output,
        dry_run=dry_run,
        skip_unmapped=skip_unmapped,
        started_at=None,
        json_flag=json_flag,
        progress_option=progress_option,
        allow_incomplete=allow_incomplete,
        signing=signing_of(sign_with, print_act, act, signature),
    )


@import_app.command("promptfoo")
def import_promptfoo(
    ctx: typer.Context,
    results: Annotated[
        list[Path],
        typer.Argument(metavar="RESULTS", help="promptfoo -o results.json or .jsonl files."),
    ],
    map_file: MapOption,
    output: OutputOption = None,
    dry_run: DryRunOption = False,
    skip_unmapped: SkipUnmappedOption = False,
    started_at: Annotated[
        str | None,
        typer.Option(
            "--started-at",
            help="Start of the run (RFC 3339 with offset); required for .jsonl results, "
            "whose rows carry no timestamp.",
        ),
    ] = None,
    progress_option: ProgressOption = None,
    sign_with: SignWithOption = None,
    print_act: PrintActOption = False,
    act: ActOption = None,
    signature: SignatureOption = None,
    json_flag: JsonFlag = False,
) -> None:
    """Import promptfoo results (promptfoo eval --repeat N -o results.json): a row, a trial.

    A test (description and vars) is a task, a provider an execution; trial_index is the
    repeat ordinal; an assertion's pass maps through the map's values, and a row promptfoo
    failed reaches the map's row_verdict grader. All or nothing; re-importing the run (its
    .json or .jsonl) is a counted no-op.

    Example: evalops trials import promptfoo out.json --map registry/imports/promptfoo-support.yaml
    """
    _run_import(
        ctx,
        "promptfoo",
        results,
        map_file,
        output=output,
        dry_run=dry_run,
        skip_unmapped=skip_unmapped,
        started_at=started_at,
        json_flag=json_flag,
        progress_option=progress_option,
        signing=signing_of(sign_with, print_act, act, signature),
    )


@trials_app.command()
def template(
    ctx: typer.Context,
    task: Annotated[str, typer.Option(help="Registered task id.")],
    execution: Annotated[str, typer.Option(help="Registered execution profile id.")],
    jsonl: Annotated[
        bool,
        typer.Option(
            "--jsonl",
            help="One compact line, as `trials ingest` reads it (the default when stdout "
            "is not a terminal).",
        ),
    ] = False,
    count: Annotated[
        int,
        typer.Option(
            "--count",
            metavar="N",
            min=1,
            max=10_000,
            help="N records, the repeated trials of one run: trial_index --index to "
            "--index+N-1, each with its own trial_id and attempt_id.",
        ),
    ] = 1,
    index: Annotated[
        int,
        typer.Option("--index", metavar="N", min=0, help="The (first) record's trial_index."),
    ] = 0,
    run_id: Annotated[
        str, typer.Option("--run-id", metavar="ID", help="The records' run_id.")
    ] = "run-0001",
    trial_prefix: Annotated[
        str,
        typer.Option(
            "--trial-prefix",
            metavar="PREFIX",
            help="trial_id is PREFIX-NNNN, NNNN the trial_index plus 1 (trial-0001 first): "
            "another prefix keeps another run's or task's templates apart.",
        ),
    ] = "trial",
    target_agent: Annotated[
        str | None,
        typer.Option(
            "--target-agent",
            metavar="ID",
            help="The record's target_agent_id; every tool call then carries it as its "
            "agent_id (a call without one is not observed for the target).",
        ),
    ] = None,
    definitions: Annotated[
        str | None,
        typer.Option(
            "--definitions",
            metavar="REV",
            help="Fill the digests from commit REV's definitions (read as sync reads them, "
            "nothing registered): a pull request's profile before it is in force.",
        ),
    ] = None,
    json_flag: JsonFlag = False,
) -> None:
    """Print a valid skeleton trial record for a task and execution, digests filled in.

    One result per grader of the task's grader set, the expected tool calls, runtime ok:
    edit what your harness observed, or build records in Python with
    evalops.record.TrialBuilder. In a terminal the record is indented for reading; into
    a file or a pipe it is one line, so `evalops trials template ... > t.jsonl` ingests.
    A trial_id names one record for good: templates to ingest together need distinct ids
    (--count, --trial-prefix) and, within one run, distinct trial_index values.

    Example: evalops trials template --task support-refund-in-order --execution candidate-b124
    """
    from evalops.domain.canonical import MAX_SAFE_INTEGER

    state = settings(ctx, json_flag)
    if index + count - 1 > MAX_SAFE_INTEGER:
        # What ingest accepts: integers JSON readers everywhere read exactly.
        raise InputError(
            f"--index {index} with --count {count} goes beyond trial_index {MAX_SAFE_INTEGER:,} "
            "(2^53-1), the largest integer a trial record holds",
            field="--index",
        )
    if not trial_prefix.strip("-"):
        raise InputError(
            f"--trial-prefix {trial_prefix!r} names no prefix: give letters or digits "
            "(b124 gives b124-0001)",
            field="--trial-prefix",
        )
    builder = _builder(state, task, execution, definitions)
    started = now()
    records = [
        builder.template(
            started,
            # `--trial-prefix v2-` means v2-0001, not v2--0001.
            trial_id=f"{trial_prefix.rstrip('-')}-{i + 1:04d}",
            run_id=run_id,
            attempt_id=f"attempt-{i + 1:04d}",
            trial_index=i,
            target_agent_id=target_agent,
        )
        for i in range(index, index + count)
    ]
    # Trial files are JSON Lines: a record redirected to a file must be one line.
    compact = jsonl or not sys.stdout.isatty()

    def human() -> None:
        for record in records:
            typer.echo(_compact_json(record) if compact else json_text(record))

    emit(ctx, records[0] if count == 1 else records, human)


def _builder(
    state: "Settings", task: str, execution: str, definitions: str | None
) -> "TrialBuilder":
    """The template's definitions: those in force, or commit `definitions`'s."""
    from evalops.record import TrialBuilder

    if definitions is None:
        try:
            return TrialBuilder.from_database(state.db_url, task=task, execution=execution)
        except InputError as error:
            if (
                error.field not in ("--task", "--execution")
                or "no longer in force" in error.message
            ):
                raise
            # A branch's sync registers its definitions without putting them in force.
            error.message += (
                "; a definition of a branch not yet merged: add --definitions REV to read "
                "commit REV's (HEAD: the checked-out one)"
            )
            raise
    from evalops.services.gate.definitions_at import definitions_at

    with (
        state.connect() as engine,
        definitions_at(engine, state.registry, definitions, actor=state.who(), now=now()) as (
            at_engine,
            _,
            _,
        ),
    ):
        return TrialBuilder.from_engine(at_engine, task=task, execution=execution)


def _compact_json(record: dict[str, Any]) -> str:
    """One line; invisible characters as JSON escapes, as `json_text` writes them."""
    import json

    return json.dumps(record, ensure_ascii=True)


def _hinted(refused: RejectedRecords, registry: Path) -> RejectedRecords:
    """The refusal, with every unregistered digest a registry file has naming that file."""
    import dataclasses

    errors = with_file_hints(list(refused.errors), registry)
    first = errors[0] if errors else refused
    return dataclasses.replace(refused, message=first.message, errors=tuple(errors))


def register(app: typer.Typer) -> None:
    app.add_typer(trials_app, name="trials")
    app.add_typer(void_app, name="void")
