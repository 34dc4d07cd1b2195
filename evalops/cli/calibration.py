"""`evalops calibration record|status|list|show|invalidate`."""

from pathlib import Path
from typing import Annotated, Any

import typer

from evalops.cli.context import (
    JsonFlag,
    add_row,
    echo_lines,
    emit,
    new_table,
    now,
    say,
    settings,
)
from evalops.cli.listing import AllOption, LimitOption, emit_page, nothing, page_of, row_limit
from evalops.cli.signing import (
    ActOption,
    PrintActOption,
    SignatureOption,
    SignWithOption,
    printing_act,
    signing_of,
)
from evalops.cli.tables import print_table
from evalops.domain.humanize import interval, measure, plural

calibration_app = typer.Typer(
    help="Model-grader calibration against human labels.\n\nExample: evalops calibration status",
    no_args_is_help=True,
)


def _human(data: dict[str, Any]) -> None:
    say(f"{data['calibration_id']} {data['grader_id']}@{data['grader_version']}: {data['state']}")
    for reason in data["reasons"]:
        say(f"  - {reason}")
    agreement = data["human_agreement"]
    say(
        f"  human agreement ({agreement['method']}, "
        f"{plural(agreement['annotators'], 'annotator')}): "
        f"{measure(agreement['overall'], missing='undefined')}"
    )
    counts = data["counts"]
    usable = counts.get("holdout_with_majority", counts["holdout"])
    tied = (
        f" ({counts['holdout'] - usable} without a human majority)"
        if usable != counts["holdout"]
        else ""
    )
    say(f"  items: {counts['calibration']} calibration, {usable} holdout{tied}")
    holdout = data["holdout"]
    say(
        f"  holdout kappa vs majority {measure(holdout['kappa_vs_majority'], missing='undefined')}"
        f", abstain rate {measure(holdout['abstain_rate'])}"
    )
    for label, s in holdout["per_class"].items():
        say(
            f"    {label}: precision {measure(s['precision'])} {interval(s['precision_ci'])}, "
            f"recall {measure(s['recall'])} {interval(s['recall_ci'])}, support {s['support']}"
        )
    say(f"  blockable classes: {', '.join(data['blockable_classes']) or 'none'}")
    from evalops.domain.calibration_validity import BLOCKABLE_MEANING, shortfall_line

    say(f"    ({BLOCKABLE_MEANING})")
    for shortfall in data.get("shortfalls") or []:
        say(f"  to meet the bound: {shortfall_line(shortfall)}")


@calibration_app.command()
def record(
    ctx: typer.Context,
    grader: Annotated[str, typer.Argument(metavar="GRADER[@VERSION]", help="Model grader id.")],
    labels: Annotated[Path, typer.Option(help="JSONL of labelled items.")],
    annotation_guide: Annotated[
        str | None, typer.Option(help="Version of the annotation guide.")
    ] = None,
    sampling_frame: Annotated[
        str | None, typer.Option(help="Where the items were sampled from.")
    ] = None,
    config: Annotated[
        str | None,
        typer.Option(
            help="The grader_config_digest to calibrate (default: the grader's config in "
            "force). A calibration counts only for exactly this config."
        ),
    ] = None,
    sign_with: SignWithOption = None,
    print_act: PrintActOption = False,
    act: ActOption = None,
    signature: SignatureOption = None,
    require_valid: Annotated[
        bool,
        typer.Option(
            "--require-valid",
            help="Store the calibration only if it is valid; otherwise exit 5 (audited), "
            "nothing stored (a CI step that must not pass on a failing calibration).",
        ),
    ] = False,
    json_flag: JsonFlag = False,
) -> None:
    """Record how well a model grader agrees with human labels (kappa, Wilson intervals).

    With an authority in force the calibration must be signed by a calibrator.

    A calibration belongs to one grader config: decisions judge the config their suite
    pins, and a calibration of any other config never counts for it.

    Example: evalops calibration record reply-quality
    --labels registry/calibration/reply-quality.jsonl --annotation-guide support-reply/v2
    """
    from evalops.services.evidence.calibration import record_calibration

    state = settings(ctx, json_flag)
    signing = signing_of(sign_with, print_act, act, signature)
    with state.connect() as engine, printing_act():
        data = record_calibration(
            engine,
            grader,
            labels,
            config=config,
            annotation_guide=annotation_guide,
            sampling_frame=sampling_frame,
            actor=state.who(),
            now=now(),
            signing=signing,
            require_valid=require_valid,
        )
    emit(ctx, data, lambda: _human(data))


@calibration_app.command("status")
def status_(ctx: typer.Context, json_flag: JsonFlag = False) -> None:
    """Every model grader: valid, stale, failing or missing, and why.

    Example: evalops calibration status --json
    """
    from evalops.services.reads.calibration import calibration_status

    state = settings(ctx, json_flag)
    with state.read() as reader:
        rows = calibration_status(reader)

    def human() -> None:
        if not rows:
            say(nothing("model graders"))
            return
        table = new_table("grader", "version", "config", "in force", "pinned by", "state", "why")
        for r in rows:
            add_row(
                table,
                r["grader_id"],
                str(r["grader_version"]),
                r["grader_config_digest"],
                "yes" if r["in_force"] else "no",
                ", ".join(r["pinned_by"]) or "-",
                r["state"],
                "; ".join(r["reasons"]),
            )
        print_table(
            table,
            shorten=("config",),
            prose=("why", "pinned by"),
            drop=("in force", "pinned by", "version"),
        )

    emit(
        ctx,
        [
            {
                k: r[k]
                for k in (
                    "grader_id",
                    "grader_version",
                    "grader_config_digest",
                    "in_force",
                    "pinned_by",
                    "state",
                    "reasons",
                )
            }
            for r in rows
        ],
        human,
    )


@calibration_app.command("list")
def list_(
    ctx: typer.Context,
    limit: LimitOption = None,
    all_rows: AllOption = False,
    json_flag: JsonFlag = False,
) -> None:
    """List calibration records (50 unless --limit N or --all).

    Example: evalops calibration list
    """
    from evalops.services.evidence.calibration import list_calibrations

    state = settings(ctx, json_flag)
    shown_limit = row_limit(ctx, limit, all_rows)
    from evalops.services.reads.listings import describe_signers

    with state.connect() as engine:
        rows = list_calibrations(engine)
    page = page_of(rows, shown_limit)
    emit_page(
        ctx,
        page,
        "calibration records",
        echo_lines(
            [
                f"{r['calibration_id']} {r['grader_id']}@{r['grader_version']} "
                f"{r['state']} {r['recorded_at']} {r['recorded_by']} "
                f"({describe_signers(r['signers'])})" + _invalidated_text(r["invalidated"])
                for r in page.rows
            ]
        ),
    )


@calibration_app.command()
def show(
    ctx: typer.Context,
    calibration_id: Annotated[str, typer.Argument(metavar="CAL", help="Calibration id.")],
    json_flag: JsonFlag = False,
) -> None:
    """Show a calibration record with its metrics and current state.

    Example: evalops calibration show CAL-1 --json
    """
    from evalops.services.evidence.calibration import show as run

    state = settings(ctx, json_flag)
    with state.connect() as engine:
        data = run(engine, calibration_id)
    emit(ctx, data, lambda: _human(data))


def _invalidated_text(found: dict[str, Any] | None) -> str:
    """`; invalidated T by A (signed by ...): REASON`, or nothing."""
    if found is None:
        return ""
    from evalops.services.reads.listings import describe_signers

    return (
        f"; invalidated {found['at']} by {found['by']} "
        f"({describe_signers(found['signers'])}): {found['reason']}"
    )


@calibration_app.command()
def invalidate(
    ctx: typer.Context,
    grader: Annotated[str, typer.Argument(metavar="GRADER", help="Model grader id.")],
    reason: Annotated[str, typer.Option(help="Why, e.g. label distribution shift.")],
    sign_with: SignWithOption = None,
    print_act: PrintActOption = False,
    act: ActOption = None,
    signature: SignatureOption = None,
    json_flag: JsonFlag = False,
) -> None:
    """Withdraw a grader's calibration (a new row); it is stale until recalibrated.

    With an authority in force the invalidation must be signed by a calibrator: a stale
    calibration holds every release the grader judges.

    Example: evalops calibration invalidate reply-quality --reason "label distribution shift"
    """
    from evalops.services.evidence.calibration import invalidate as run

    state = settings(ctx, json_flag)
    signing = signing_of(sign_with, print_act, act, signature)
    with state.connect() as engine, printing_act():
        data = run(engine, grader, reason=reason, actor=state.who(), now=now(), signing=signing)
    emit(ctx, data, lambda: _human(data))


def register(app: typer.Typer) -> None:
    app.add_typer(calibration_app, name="calibration")
