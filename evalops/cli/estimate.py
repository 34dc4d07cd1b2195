"""`evalops estimate` (stored as EST-n), `estimate show|list|replay|plan`."""

from collections.abc import Mapping
from typing import Annotated, Any

import typer

from evalops.cli.context import JsonFlag, add_row, echo_lines, emit, new_table, now, say, settings
from evalops.cli.tables import print_table
from evalops.domain.humanize import interval, measure, plural
from evalops.errors import EXIT_VERIFY, InputError

estimate_app = typer.Typer(
    help="Rates of the population an estimation suite samples, with honest intervals.\n\n"
    "Example: evalops estimate --suite estimation/eu-sessions --build build-124",
    invoke_without_command=True,
    no_args_is_help=False,
)

ConfidenceOption = Annotated[
    float, typer.Option(help="Confidence level of the intervals (default 0.95).")
]


def _at(value: str | None) -> Any:
    from evalops.domain.timestamps import parse_timestamp

    if value is None:
        return None
    try:
        return parse_timestamp(value)
    except ValueError as exc:
        raise InputError(str(exc), field="--at") from None


def _interval(block: Mapping[str, Any] | None) -> str:
    if not block or block.get("low") is None:
        return "unavailable"
    # Bracketed, as every interval people read: `-0.01 - 0.36` would read as a subtraction.
    return interval([block["low"], block["high"]])


def _signed(value: float | None) -> str:
    if value is None:
        return "-"
    return ("+" if value > 0 else "") + measure(value)


def _shown_keys(data: Mapping[str, Any]) -> list[str]:
    """`pass` and every class seen in the post-rerun or first results: a class no trial had
    is a row of zeros (its upper bound is in --json)."""
    rates = data["rates"]
    first = data["first_results"]
    return [
        k
        for k in rates
        if k == "pass" or rates[k]["rate"] > 0 or (k in first and first[k]["rate"] > 0)
    ]


def _render(data: Mapping[str, Any]) -> None:
    say(data["claims"])
    confidence = f"{data['confidence'] * 100:g}%"
    stored = data["estimate_id"] if data.get("stored", True) else "dry run: not stored"
    say(
        f"{stored}: {data['build']} on {data['suite']}, {plural(data['task_count'], 'task')}, "
        f"{plural(data['trial_count'], 'trial')}, {confidence} intervals "
        f"(evaluated at {data['evaluated_at']})"
    )
    if data["rates"]:
        table = new_table("rate", "estimate", f"interval {confidence}", "se", "deff", "n_eff",
                          "first results")  # fmt: skip
        for key in _shown_keys(data):
            r = data["rates"][key]
            first = data["first_results"].get(key)
            add_row(table, key, measure(r["rate"]), _interval(r), measure(r["se"]),
                    measure(r["deff"]), measure(r["n_eff"]),
                    measure(first["rate"]) if first else "-")  # fmt: skip
        print_table(table, drop=("first results", "deff", "n_eff", "se"))
        zero = len(data["rates"]) - len(_shown_keys(data))
        if zero:
            say(f"  {plural(zero, 'other class', 'other classes')}: no trial (bounds in --json)")
    invalid = data["invalid_rate"]
    say(
        f"  invalid first results {measure(invalid)}; "
        f"{plural(data['rerun_count'], 'rerun')} stood in or were refused"
    )
    strata = new_table("stratum", "weight", "tasks", "pass", f"interval {confidence}")
    for row in data["strata"]:
        p = row["rates"].get("pass")
        add_row(strata, row["stratum"], measure(row["weight"]), str(row["tasks"]),
                measure(p["rate"]) if p else "-", _interval(p))  # fmt: skip
    print_table(strata)
    if data["difference"]:
        d = data["difference"]["pass"]
        say(
            f"  difference vs {data['baseline']} (paired over {plural(d['paired_tasks'], 'task')}"
            f"): pass {_signed(d['diff'])} ({_interval_signed(d)})"
        )
        for key, block in data["difference"].items():
            if key != "pass" and block["diff"] != 0:
                say(f"    {key} {_signed(block['diff'])} ({_interval_signed(block)})")
    for reason in data["unavailable"]:
        say(f"  - {reason}")
    say("  an estimate is never a gate decision and changes none")
    if data.get("stored", True):
        say(f"next: evalops estimate replay {data['estimate_id']}")
    say(f"next: evalops estimate plan --suite {data['suite']} --half-width 0.05")


def _interval_signed(block: Mapping[str, Any]) -> str:
    if block.get("low") is None:
        return "interval unavailable"
    return f"{_signed(block['low'])} to {_signed(block['high'])}"


@estimate_app.callback()
def estimate_run(
    ctx: typer.Context,
    suite: Annotated[str | None, typer.Option(help="The estimation suite.")] = None,
    build: Annotated[
        str | None, typer.Option(help="The system build whose rates to estimate.")
    ] = None,
    baseline: Annotated[
        str | None, typer.Option(help="A baseline build: the paired, stratified difference.")
    ] = None,
    at: Annotated[
        str | None, typer.Option(help="Estimate as of this time (RFC 3339; default now).")
    ] = None,
    confidence: ConfidenceOption = 0.95,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Compute and print without storing anything.")
    ] = False,
    json_flag: JsonFlag = False,
) -> None:
    """Estimate the rates of an estimation suite's population for a build; stored as EST-n.

    The task is the unit: each member's trials (selected and rerun-resolved as the gate does)
    give its share in each class; strata are weighted by the suite's declared weights; the
    interval is a Wilson interval at the effective sample size. Exit 2 for a suite that is not
    an estimation suite (a regression suite is not a representative cohort).

    Example: evalops estimate --suite estimation/eu-sessions --build build-124 --baseline build-123
    """
    if ctx.invoked_subcommand is not None:
        return
    if suite is None or build is None:
        if suite is None and build is None and not json_flag:
            typer.echo(ctx.get_help())
            raise typer.Exit(0)
        missing = "--suite" if suite is None else "--build"
        raise InputError(f"estimate needs {missing} (see `evalops estimate --help`)", field=missing)
    from evalops.services.estimation.inputs import EstimateAsk
    from evalops.services.estimation.records import estimate

    state = settings(ctx, json_flag)
    ask = EstimateAsk(suite, build, baseline, _at(at), confidence)
    with state.connect() as engine:
        data = estimate(engine, ask, now=now(), actor=state.who(), dry_run=dry_run)
    emit(ctx, data, lambda: _render(data))


@estimate_app.command("show")
def estimate_show(
    ctx: typer.Context,
    estimate_id: Annotated[str, typer.Argument(metavar="ID", help="Estimate id (EST-n).")],
    json_flag: JsonFlag = False,
) -> None:
    """Show a stored estimate as it was recorded.

    Example: evalops estimate show EST-1
    """
    from evalops.services.estimation.records import show

    state = settings(ctx, json_flag)
    with state.connect() as engine:
        data = show(engine, estimate_id)

    def human() -> None:
        _render(data)
        say(f"stored estimate {estimate_id}, recorded at {data['recorded_at']} by {data['actor']}")

    emit(ctx, data, human)


@estimate_app.command("list")
def estimate_list(
    ctx: typer.Context,
    suite: Annotated[str | None, typer.Option(help="Only this suite.")] = None,
    build: Annotated[str | None, typer.Option(help="Only this system build.")] = None,
    json_flag: JsonFlag = False,
) -> None:
    """List stored estimates, oldest first, with the pass rate and its interval.

    Example: evalops estimate list --suite estimation/eu-sessions
    """
    from evalops.services.estimation.records import list_estimates

    state = settings(ctx, json_flag)
    with state.connect() as engine:
        rows = list_estimates(engine, suite, build)
    lines = [
        f"{r['estimate_id']} {r['build']} {r['suite']} {r['evaluated_at']}: pass "
        f"{measure((r['pass'] or {}).get('rate'))} ({_interval(r['pass'])}), "
        f"{plural(r['task_count'], 'task')}" + (f", vs {r['baseline']}" if r["baseline"] else "")
        for r in rows
    ] or ["no estimates stored (make one with `evalops estimate --suite S --build B`)"]
    emit(ctx, {"estimates": rows}, echo_lines(lines))


@estimate_app.command("replay")
def estimate_replay(
    ctx: typer.Context,
    estimate_id: Annotated[str, typer.Argument(metavar="ID", help="Estimate id (EST-n).")],
    json_flag: JsonFlag = False,
) -> None:
    """Recompute a stored estimate from its stored inputs; exit 6 unless byte-identical.

    Example: evalops estimate replay EST-1
    """
    from evalops.services.estimation.records import replay

    state = settings(ctx, json_flag)
    with state.connect() as engine:
        data = replay(engine, estimate_id)
    lines = [f"{estimate_id}: {'identical' if data['identical'] else 'DIFFERENT'}"]
    lines += [f"  - {p}" for p in data["problems"]]
    emit(ctx, data, echo_lines(lines))
    if not data["identical"]:
        raise typer.Exit(EXIT_VERIFY)


def _render_plan(data: Mapping[str, Any]) -> None:
    confidence = f"{data['confidence'] * 100:g}%"
    measured = f"build {data['build']}" if data["build"] else "no build yet"
    say(f"plan for {data['suite']} ({data['rate']} rate, {confidence}), measured on {measured}")
    table = new_table("stratum", "weight", "tasks now", "between-task var", "within-task var")
    for s in data["strata"]:
        between, within = s["between_task_variance"], s["within_task_variance"]
        add_row(table, s["stratum"], measure(s["weight"]), str(s["tasks"]), measure(between),
                measure(within))  # fmt: skip
    print_table(table)
    t = data["trials_per_task"]
    say(f"  trials per task: {t['plan']} ({t['why']})")
    if data["allocation"]:
        for name in ("proportional", "neyman"):
            a = data["allocation"][name]
            per = ", ".join(f"{s} {n}" for s, n in a["by_stratum"].items())
            say(
                f"  ±{measure(data['half_width'])} needs {a['tasks']} tasks ({name}: {per}); "
                f"expected half-width {measure(a['half_width'])}"
            )
    mde = data["detectable_difference"]
    if mde["difference"] is None:
        say(f"  today's tasks: {mde['why']}")
    else:
        say(
            f"  today's tasks detect a paired difference of {measure(mde['difference'])} "
            f"with power {measure(mde['power'])}"
        )
    if data["detect"]:
        d = data["detect"]
        per = ", ".join(f"{s} {n}" for s, n in d["by_stratum"].items())
        say(
            f"  detecting {measure(d['difference'])} with power {measure(d['power'])} needs "
            f"{d['tasks']} paired tasks ({per})"
        )
    for line in data["assumptions"]:
        say(f"  assumes: {line}")


@estimate_app.command("plan")
def estimate_plan(
    ctx: typer.Context,
    suite: Annotated[str, typer.Option(help="The estimation suite.")],
    half_width: Annotated[
        float | None, typer.Option(help="The interval half-width wanted (e.g. 0.05 for ±5 points).")
    ] = None,
    confidence: ConfidenceOption = 0.95,
    detect: Annotated[
        float | None, typer.Option(help="A paired difference of rates to detect (e.g. 0.05).")
    ] = None,
    power: Annotated[float, typer.Option(help="Power for --detect (default 0.8).")] = 0.8,
    build: Annotated[
        str | None, typer.Option(help="Measure this build (default: the latest estimated).")
    ] = None,
    baseline: Annotated[
        str | None, typer.Option(help="Measure the paired differences against this build.")
    ] = None,
    rate: Annotated[str, typer.Option(help="The rate planned for: pass or a class.")] = "pass",
    task_cost: Annotated[
        float, typer.Option(help="What a new task costs, in trials (default 1).")
    ] = 1.0,
    json_flag: JsonFlag = False,
) -> None:
    """How many tasks per stratum and trials per task a question needs (nothing stored).

    Variance components (between tasks, within a task) are measured on the latest build;
    proportional and Neyman allocations reach --half-width; --detect D --power P gives the
    tasks a paired comparison needs. With no trials yet it says what it assumes.

    Example: evalops estimate plan --suite estimation/eu-sessions --half-width 0.05 --detect 0.1
    """
    from evalops.services.estimation.planning import PlanAsk, plan

    state = settings(ctx, json_flag)
    ask = PlanAsk(suite, half_width, confidence, detect, power, build, baseline, rate, task_cost)
    with state.connect() as engine:
        data = plan(engine, ask, now())
    emit(ctx, data, lambda: _render_plan(data))


def register(app: typer.Typer) -> None:
    app.add_typer(estimate_app, name="estimate")
