"""promptfoo results (`-o results.json`, results version 3, or `-o results.jsonl`) -> trials.

Both formats are streamed: a `.json` file's `results.results` array is read one row at a
time (`json_stream`), a `.jsonl` file line by line; memory does not grow with the run. A
`.jsonl` file holds result rows and no header, so its run id is derived from the file's
digest and its start time comes from `--started-at`. Duplicate keys anywhere are refused.

Each row is one trial of one (test, prompt, provider): the test is the task, identified by
its `description` (else the canonical JSON of its `vars`) together with the digest of its
`vars`, the provider the execution. A trial's id is the row's `id` (the execution), so the
`.json` and `.jsonl` output of one run name the same trials. promptfoo records no per-row
time, so `trial_index` is the repeat ordinal (`response.metadata.repeatIndex` when a
provider reports it, else the order of appearance) and the times are synthesized from the
run's timestamp and the row's `latencyMs`. A row promptfoo failed (`success: false`) is
never imported as a pass: the map's `row_verdict` grader carries the row's own verdict.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Generator, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from evalops.domain.canonical import canonical_text
from evalops.domain.timestamps import format_timestamp, parse_timestamp
from evalops.errors import InputError
from evalops.importers.common import (
    Item,
    Resolved,
    ResolvedExecution,
    ResolvedTask,
    Skipped,
    SourceSummary,
    Translated,
    Unmapped,
    at,
    base_record,
    content_digest,
    file_digest,
    grader_result,
    plus_ms,
    short_message,
    source_file_artifact,
    trial_id,
)
from evalops.importers.json_stream import JsonStreamError, iter_object, unique_object
from evalops.registry.jsonl import read_lines

TRIAL_PREFIX = "pf"
PRODUCER = "promptfoo"
RESULTS_VERSION = 3
ERROR_ROW = 2  # promptfoo ResultFailureReason.ERROR: the provider or harness failed
FAILURE_REASONS = (0, 1, 2)  # none, assertion, error
MAX_REPEAT = 2**31 - 1
MAX_LATENCY_MS = 366 * 24 * 3600 * 1000  # a row that ran longer than a year is not real
PASSING = frozenset({"task_pass", "pass"})


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _loads(text: str | bytes) -> Any:
    """Strict JSON: no NaN or Infinity, no key named twice in one object."""
    return json.loads(text, parse_constant=_reject_constant, object_pairs_hook=unique_object)


@dataclass
class _Context:
    resolved: Resolved
    name: str
    run_id: str
    started_at: str
    unmapped: Unmapped
    ordinals: dict[tuple[str, str, int], int] = field(default_factory=dict)
    prompts: dict[tuple[str, str], int] = field(default_factory=dict)
    described: dict[str, str] = field(default_factory=dict)
    """A map key naming a description alone -> the vars digest of the test it matched."""


def _provider(row: Mapping[str, Any]) -> tuple[str | None, str | None]:
    provider = row.get("provider")
    if isinstance(provider, str):
        return None, provider
    if isinstance(provider, dict):
        label, pid = provider.get("label"), provider.get("id")
        return (label if isinstance(label, str) else None), (pid if isinstance(pid, str) else None)
    return None, None


def _execution(row: Mapping[str, Any], ctx: _Context) -> tuple[str, ResolvedExecution | None]:
    spec = ctx.resolved.map.spec
    label, pid = _provider(row)
    key = label or pid or "?"
    if spec.providers is None:
        return key, ctx.resolved.executions[str(spec.execution)]
    for candidate in (label, pid):
        if candidate is not None and candidate in spec.providers:
            return candidate, ctx.resolved.executions[spec.providers[candidate]]
    return key, None


def vars_digest(variables: Any) -> str:
    """The first 16 hex digits of the vars' digest: with the description, a test's identity."""
    return content_digest(variables).removeprefix("sha256:")[:16]


def test_key(row: Mapping[str, Any]) -> str:
    """The plain map key of a row's test: its description, else the canonical JSON of its
    vars."""
    description, variables = _description_and_vars(row)
    if description:
        return description
    return canonical_text(variables)


def _description_and_vars(row: Mapping[str, Any]) -> tuple[str | None, dict[str, Any]]:
    raw_case = row.get("testCase")
    case: Mapping[str, Any] = raw_case if isinstance(raw_case, dict) else {}
    description = case.get("description", row.get("description"))
    variables = case.get("vars", row.get("vars"))
    return (
        description if isinstance(description, str) and description else None,
        variables if isinstance(variables, dict) else {},
    )


def test_identity(row: Mapping[str, Any]) -> tuple[str, str]:
    """(plain key, `plain#vars digest`): two tests with one description are two tests."""
    _, variables = _description_and_vars(row)
    plain = test_key(row)
    return plain, f"{plain}#{vars_digest(variables)}"


def _map_key(ctx: _Context, plain: str, qualified: str, label: str) -> str | None:
    """The map's key for this test: `description#digest` first, else the description alone
    (which may then stand for one test only)."""
    tasks = ctx.resolved.map.spec.tasks
    if qualified in tasks:
        return qualified
    if plain not in tasks:
        return None
    first = ctx.described.setdefault(plain, qualified)
    if first != qualified:
        raise at(
            ctx.name,
            label,
            f"tests {first!r} and {qualified!r} share the description {plain!r} with "
            f"different vars: two tests, which the map sends to one task (map each by its "
            "description#vars digest)",
            "testCase.vars",
        )
    return plain


def _tool_calls(row: Mapping[str, Any], ctx: _Context, label: str) -> list[dict[str, Any]]:
    response = row.get("response")
    metadata = response.get("metadata") if isinstance(response, dict) else None
    calls = metadata.get("toolCalls") if isinstance(metadata, dict) else None
    if calls is None:
        return []
    if not isinstance(calls, list):
        raise at(
            ctx.name, label, "must be a list of {name, arguments}", "response.metadata.toolCalls"
        )
    spec = ctx.resolved.map.spec
    out = []
    for i, call in enumerate(calls):
        where = f"response.metadata.toolCalls[{i}]"
        name = call.get("name") if isinstance(call, dict) else None
        if not isinstance(name, str) or not name:
            raise at(ctx.name, label, "a tool call has no name", where)
        args = call.get("arguments", {})
        if isinstance(args, str):  # OpenAI-style providers pass arguments as JSON text
            try:
                args = _loads(args) if args.strip() else {}
            except ValueError:
                raise at(ctx.name, label, "arguments are not JSON", f"{where}.arguments") from None
        if not isinstance(args, dict):
            raise at(ctx.name, label, "arguments must be an object", f"{where}.arguments")
        entry: dict[str, Any] = {"tool": spec.tools.get(name, name), "args": args}
        if spec.target_agent_id:
            entry["agent_id"] = spec.target_agent_id
        out.append(entry)
    return out


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _usage(row: Mapping[str, Any]) -> dict[str, int]:
    usage = row.get("tokenUsage")
    if not isinstance(usage, dict):
        response = row.get("response")
        usage = response.get("tokenUsage") if isinstance(response, dict) else None
    if not isinstance(usage, dict):
        return {"model_calls": 0, "input_tokens": 0, "output_tokens": 0}
    details = usage.get("completionDetails")
    details = details if isinstance(details, dict) else {}
    return {
        "model_calls": _count(usage.get("numRequests")),
        # Input tokens include prompt-cache reads and writes (docs/importers.md).
        "input_tokens": _count(usage.get("prompt"))
        + _count(details.get("cacheReadInputTokens"))
        + _count(details.get("cacheCreationInputTokens")),
        "output_tokens": _count(usage.get("completion")),
    }


def _assertion_keys(components: list[Any]) -> list[str]:
    """Each assertion's scorer key: its metric, else its type; `key#1`, `key#2`... in file
    order when one row has several assertions with one key."""
    names = []
    for component in components:
        assertion = component.get("assertion") if isinstance(component, dict) else None
        assertion = assertion if isinstance(assertion, dict) else {}
        name = assertion.get("metric") or assertion.get("type")
        names.append(name if isinstance(name, str) and name else "(no assertion)")
    total = Counter(names)
    seen: Counter[str] = Counter()
    keys = []
    for name in names:
        seen[name] += 1
        keys.append(f"{name}#{seen[name]}" if total[name] > 1 else name)
    return keys


def _grader_results(
    row: Mapping[str, Any], ctx: _Context, label: str, key: str, target: ResolvedTask
) -> Iterator[tuple[dict[str, Any] | None, str] | Skipped]:
    task_map = ctx.resolved.map.spec.tasks[key]
    grading = row.get("gradingResult")
    components = grading.get("componentResults") if isinstance(grading, dict) else None
    components = components if isinstance(components, list) else []
    for i, (component, name) in enumerate(
        zip(components, _assertion_keys(components), strict=True)
    ):
        where = f"gradingResult.componentResults[{i}]"
        if not isinstance(component, dict):
            raise at(ctx.name, label, "must be an object", where)
        passed = component.get("pass")
        if not isinstance(passed, bool):
            raise at(ctx.name, label, "an assertion's pass must be true or false", f"{where}.pass")
        score = component.get("score")
        if score is not None and (
            isinstance(score, bool)
            or not isinstance(score, int | float)
            or not math.isfinite(score)
        ):
            raise at(
                ctx.name, label, "an assertion's score must be a finite number", f"{where}.score"
            )
        scorer = task_map.scorers.get(name)
        if scorer is None:
            if ctx.unmapped == "error":
                raise at(
                    ctx.name,
                    label,
                    f"assertion {name!r} is not in the map's scorers for test {key!r} "
                    "(map its metric or type, `key#1`, `key#2` when one row has several, "
                    "or pass --skip-unmapped)",
                    where,
                )
            yield Skipped(ctx.name, label, "unmapped_scorer", name)
            continue
        blocking = scorer.grader_id in target.blocking
        result, problem = grader_result(scorer, passed, score, blocking=blocking)
        yield result, problem if result is None else (f"{problem}:{name}" if problem else "")


def _whole(value: Any, name: str, where: str, label: str, limit: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= limit:
        raise at(name, label, f"must be a whole number from 0 to {limit}", where)
    return value


def _latency(row: Mapping[str, Any], name: str, label: str) -> float:
    latency = row.get("latencyMs", 0)
    if (
        isinstance(latency, bool)
        or not isinstance(latency, int | float)
        or not 0 <= latency <= MAX_LATENCY_MS
    ):
        raise at(
            name, label, f"must be a number of milliseconds from 0 to {MAX_LATENCY_MS}", "latencyMs"
        )
    return float(latency)


def _verdict(
    row: Mapping[str, Any],
    ctx: _Context,
    label: str,
    results: list[dict[str, Any]],
    target: ResolvedTask,
) -> None:
    """The row's own verdict reaches the trial: `success: false` is never a pass."""
    success = row.get("success")
    verdict = ctx.resolved.map.spec.row_verdict
    if verdict is not None:
        results.append(
            {
                "grader_id": verdict.grader_id,
                "grader_version": verdict.grader_version,
                "state": "task_pass" if success else "task_fail",
            }
        )
        return
    if success:
        return
    blocked = any(r["grader_id"] in target.blocking and r["state"] not in PASSING for r in results)
    if not blocked:
        grading = row.get("gradingResult")
        reason = grading.get("reason") if isinstance(grading, dict) else None
        why = f" ({short_message(reason)})" if isinstance(reason, str) and reason else ""
        raise at(
            ctx.name,
            label,
            f"promptfoo failed this row{why} but no mapped blocking assertion did: add "
            "row_verdict: {grader_id, grader_version} to the map so the row's own verdict "
            "reaches the trial",
            "success",
        )


@dataclass(frozen=True)
class _Mapped:
    """A row whose provider and test the map knows: what its trial is of."""

    plain: str
    """The test's plain key (its description, else its vars)."""
    identity: str
    """`plain#vars digest`: the test itself."""
    provider_key: str
    execution: ResolvedExecution
    prompt: int
    label: str
    """`test/provider`, what errors name the row by until its ordinal is known."""
    key: str
    """The map's key for the test."""
    task_id: str


@dataclass(frozen=True)
class _Trial:
    """One mapped row's trial: its record's identity part, and what names it."""

    label: str
    """`test/provider/ordinal`."""
    failure: int
    """promptfoo's failureReason (ERROR_ROW: the provider or harness failed)."""
    target: ResolvedTask
    record: dict[str, Any]
    aliases: tuple[str, ...]
    where: str
    """The row within the run, for the source-log artifact's location."""


def _translate(row: Any, index: int, ctx: _Context) -> Iterator[Item]:
    """One result row's trial, in steps: the row mapped to an execution and a task (or why
    it is skipped), the trial it is (ordinal, ids, times), its outcome (runtime and grader
    results), then the rest of its record. Lazy: an unmapped assertion is yielded as
    skipped before a later error in the same row."""
    mapped = _mapped(row, index, ctx)
    if isinstance(mapped, Skipped):
        yield mapped
        return
    trial = _trial(row, mapped, ctx)
    record = trial.record
    results, labels = yield from _outcome(row, ctx, trial, mapped.key)
    record["grader_results"] = results
    record["tool_calls"] = _tool_calls(row, ctx, trial.label)
    if ctx.resolved.map.spec.target_agent_id:
        record["target_agent_id"] = ctx.resolved.map.spec.target_agent_id
    record["usage"] = _usage(row)
    record["artifact_manifest"] = {
        "artifacts": [
            {
                "kind": "source_log",
                "digest": content_digest(row),
                "producer": PRODUCER,
                "location": f"{ctx.run_id}#{trial.where}",
            },
            source_file_artifact(ctx.name, PRODUCER, _row_place(row, mapped)),
        ]
    }
    record["secondary_labels"] = labels
    yield Translated(
        ctx.name, trial.label, trial.target.task_id, record, mapped.identity, trial.aliases
    )


def _mapped(row: Any, index: int, ctx: _Context) -> _Mapped | Skipped:
    """The row's test and provider through the map; unmapped, it is skipped or an error."""
    if not isinstance(row, dict):
        raise at(ctx.name, f"row {index}", "a result row must be a JSON object")
    try:
        plain, identity = test_identity(row)
    except (ValueError, TypeError) as exc:  # vars holding numbers JSON cannot write
        raise at(
            ctx.name, f"row {index}", f"the test's vars cannot be keyed: {exc}", "vars"
        ) from None

    provider_key, execution = _execution(row, ctx)
    prompt = row.get("promptIdx", 0)
    prompt = prompt if isinstance(prompt, int) and not isinstance(prompt, bool) else 0
    label = f"{plain}/{provider_key}"
    if execution is None:
        if ctx.unmapped == "error":
            raise at(
                ctx.name,
                label,
                f"provider {provider_key!r} is not in the map's providers (map it to an "
                "execution profile, or pass --skip-unmapped)",
                "provider",
            )
        return Skipped(ctx.name, label, "unmapped_provider", provider_key)
    key = _map_key(ctx, plain, identity, label)
    task_map = ctx.resolved.map.spec.tasks.get(key) if key is not None else None
    if key is None or task_map is None or task_map.task is None:
        if ctx.unmapped == "error":
            raise at(
                ctx.name,
                label,
                f"test {plain!r} is not in the map{_map_keys_hint(ctx, plain)} (map it, or "
                "pass --skip-unmapped)",
                "testCase.description",
            )
        return Skipped(ctx.name, label, "unmapped_sample", plain)
    return _Mapped(plain, identity, provider_key, execution, prompt, label, key, task_map.task)


def _map_keys_hint(ctx: _Context, plain: str) -> str:
    """`; did you mean 'refund in order'? (tests mapped: ...)`: a typo in a map key is
    otherwise hard to spot (the key and the test's description differ by a letter)."""
    from evalops.domain.suggestions import close_match, some_of

    keys = sorted(ctx.resolved.map.spec.tasks)
    match = close_match(plain, keys)
    meant = f"; did you mean {match!r}?" if match is not None else ""
    return f"{meant} (tests mapped: {some_of(keys)})"


def _failure_reason(row: Mapping[str, Any], ctx: _Context, label: str) -> int:
    """The row's failureReason, once its `success` is checked to be a boolean."""
    success = row.get("success")
    if not isinstance(success, bool):
        raise at(ctx.name, label, "must be true or false", "success")
    failure = row.get("failureReason", 0)
    if failure not in FAILURE_REASONS or isinstance(failure, bool):
        raise at(ctx.name, label, "must be 0, 1 or 2", "failureReason")
    return int(failure)


def _ordinal(row: Mapping[str, Any], mapped: _Mapped, ctx: _Context) -> int:
    """The row's repeat ordinal (`trial_index`): the provider's repeatIndex, else the order
    of appearance of (test, provider, prompt); a test runs with one prompt per run."""
    label, prompt = mapped.label, mapped.prompt
    first_prompt = ctx.prompts.setdefault((mapped.identity, mapped.provider_key), prompt)
    if first_prompt != prompt:
        raise at(
            ctx.name,
            label,
            f"test {mapped.plain!r} ran with prompts {first_prompt} and {prompt}; one task "
            "receives one input per run (split the prompts into separate tests)",
            "promptIdx",
        )
    response = row.get("response")
    metadata = response.get("metadata") if isinstance(response, dict) else None
    repeat = _whole(
        metadata.get("repeatIndex") if isinstance(metadata, dict) else None,
        ctx.name,
        "response.metadata.repeatIndex",
        label,
        MAX_REPEAT,
    )
    counter = (mapped.identity, mapped.provider_key, prompt)
    ordinal = ctx.ordinals.get(counter, 0)
    ctx.ordinals[counter] = ordinal + 1
    return ordinal if repeat is None else repeat


def _row_place(row: Mapping[str, Any], mapped: _Mapped) -> str:
    """Where the row is in its results file, as promptfoo's viewer names it: the test
    index, the prompt index and the provider's label (or id)."""
    return f"test={row.get('testIdx')}&prompt={mapped.prompt}&provider={mapped.provider_key}"


def _trial(row: Mapping[str, Any], mapped: _Mapped, ctx: _Context) -> _Trial:
    """The trial a mapped row is: checked verdict fields, ordinal, ids and synthesized
    times (the run's start plus the row's latency)."""
    failure = _failure_reason(row, ctx, mapped.label)
    ordinal = _ordinal(row, mapped, ctx)
    prompt, provider_key = mapped.prompt, mapped.provider_key
    label = f"{mapped.label}/{ordinal}"
    latency = _latency(row, ctx.name, label)
    target = ctx.resolved.tasks[mapped.task_id]
    row_id = row.get("id")
    has_id = isinstance(row_id, str) and bool(row_id)
    ids: tuple[object, ...] = (
        (row_id,) if has_id else (ctx.run_id, mapped.identity, provider_key, prompt, ordinal)
    )
    # Without a row id, an earlier evalops keyed the test by its description alone.
    aliases = (
        ()
        if has_id
        else (trial_id(TRIAL_PREFIX, ctx.run_id, mapped.plain, provider_key, prompt, ordinal),)
    )
    record = base_record(
        trial=trial_id(TRIAL_PREFIX, *ids),
        run_id=ctx.run_id,
        attempt_id=str(row_id) if has_id else label,
        target=target,
        execution=mapped.execution,
        trial_index=ordinal,
        started_at=ctx.started_at,
        completed_at=plus_ms(ctx.started_at, latency),
    )
    where = row_id if has_id else f"{row.get('testIdx')}/{prompt}/{ordinal}"
    return _Trial(label, failure, target, record, aliases, str(where))


def _outcome(
    row: Mapping[str, Any], ctx: _Context, trial: _Trial, key: str
) -> Generator[Item, None, tuple[list[dict[str, Any]], list[str]]]:
    """The trial's runtime (into its record) and its grader results and labels: an error
    row has no grader results; otherwise each mapped assertion's, then the row's own
    verdict (unmapped assertions are yielded as skipped)."""
    record, label = trial.record, trial.label
    labels = ["timestamps_synthesized"]
    results: list[dict[str, Any]] = []
    if trial.failure == ERROR_ROW:
        response = row.get("response")
        text = row.get("error") or (response.get("error") if isinstance(response, dict) else None)
        text = text if isinstance(text, str) else "error"
        record["runtime"] = {
            "status": ctx.resolved.map.spec.runtime.status_of(text),
            "message": short_message(text),
        }
        return results, labels
    record["runtime"] = {"status": "ok"}
    for item in _grader_results(row, ctx, label, key, trial.target):
        if isinstance(item, Skipped):
            yield item
            continue
        result, problem = item
        if result is not None:
            results.append(result)
        if problem:
            labels.append(problem)
    _verdict(row, ctx, label, results, trial.target)
    return results, labels


def _timestamp(text: Any, name: str, field_path: str) -> str:
    try:
        if not isinstance(text, str):
            raise ValueError("missing")
        return format_timestamp(parse_timestamp(text))
    except ValueError as exc:
        raise InputError(f"not an RFC 3339 timestamp: {exc}", name, None, field_path) from None


def read_promptfoo(
    path: Path,
    name: str,
    resolved: Resolved,
    *,
    unmapped: Unmapped,
    started_at: str | None = None,
) -> tuple[SourceSummary, Iterator[Item]]:
    """Check one results file and translate its rows lazily."""
    if name.endswith(".jsonl"):
        if started_at is None:
            raise InputError(
                "promptfoo JSONL rows carry no timestamp: give the run's start with "
                "--started-at (or import the .json output)",
                name,
                None,
                "--started-at",
            )
        digest = file_digest(path)
        ctx = _Context(
            resolved=resolved,
            name=name,
            run_id="promptfoo-" + digest.removeprefix("sha256:")[:16],
            started_at=_timestamp(started_at, name, "--started-at"),
            unmapped=unmapped,
        )
        return SourceSummary(name, PRODUCER, ctx.run_id), _jsonl_rows(path, ctx)
    if not name.endswith(".json"):
        also = (
            " (an Inspect AI log: `evalops trials import inspect`)"
            if name.endswith(".eval")
            else ""
        )
        raise InputError(f"not promptfoo results: expected a .json or .jsonl file{also}", name)
    header = _json_header(path, name)
    ctx = _Context(
        resolved=resolved,
        name=name,
        run_id=header.eval_id,
        started_at=header.started_at,
        unmapped=unmapped,
    )
    return SourceSummary(name, PRODUCER, ctx.run_id), _json_rows(path, ctx)


@dataclass(frozen=True)
class _Header:
    eval_id: str
    started_at: str


def _open(path: Path, name: str) -> BinaryIO:
    try:
        return path.open("rb")
    except OSError as exc:
        raise InputError(f"cannot read the results: {exc.strerror}", name) from None


_RESULTS = frozenset({"results"})
_HEADER = ("evalId", "version", "timestamp")


def _document(stream: BinaryIO, found: dict[str, Any], name: str) -> Iterator[Iterator[Any]]:
    """Walk a results document member by member; yield `results.results` (the rows, not yet
    read) when reached, then read on. Header fields go into `found` as they pass."""
    for key, value in iter_object(stream, frozenset(), _RESULTS, _RESULTS):
        if key == "evalId":
            found["evalId"] = value
        elif key == "eval":
            raise InputError(
                "this is an Inspect AI log, not promptfoo results "
                "(`evalops trials import inspect`)",
                name,
            )
        elif key == "results" and isinstance(value, Iterator):
            for inner_key, inner in value:
                if inner_key in ("version", "timestamp"):
                    found[inner_key] = inner
                elif inner_key == "results" and isinstance(inner, Iterator):
                    found["results"] = True
                    yield inner


def _json_header(path: Path, name: str) -> _Header:
    """`evalId`, `results.version` and `results.timestamp`. promptfoo writes them before the
    rows, so this reads only the start of the file; otherwise it reads on past the rows."""
    found: dict[str, Any] = {}
    with _open(path, name) as stream:
        try:
            for _rows in _document(stream, found, name):
                if all(k in found for k in _HEADER):
                    break
        except JsonStreamError as exc:
            raise InputError(f"cannot read the results: {exc}", name) from None
    if "results" not in found:
        raise InputError("not promptfoo results: no results.results list", name, None, "results")
    if found.get("version") != RESULTS_VERSION:
        raise InputError(
            f"promptfoo results version {found.get('version')!r} is not supported "
            f"(version {RESULTS_VERSION} is)",
            name,
            None,
            "results.version",
        )
    eval_id = found.get("evalId")
    if not isinstance(eval_id, str) or not eval_id:
        raise InputError("the results have no evalId", name, None, "evalId")
    return _Header(eval_id, _timestamp(found.get("timestamp"), name, "results.timestamp"))


def _json_rows(path: Path, ctx: _Context) -> Iterator[Item]:
    last: str | None = None
    with _open(path, ctx.name) as stream:
        try:
            for rows in _document(stream, {}, ctx.name):
                for index, row in enumerate(rows):
                    for item in _translate(row, index, ctx):
                        last = f"{index} ({item.label})"
                        yield item
        except JsonStreamError as exc:
            after = f" after row {last}, the last complete one" if last else ""
            raise InputError(f"cannot read the results{after}: {exc}", ctx.name) from None


def _jsonl_rows(path: Path, ctx: _Context) -> Iterator[Item]:
    with path.open("rb") as stream:
        for index, line in enumerate(read_lines(stream, ctx.name)):
            if isinstance(line, InputError):
                raise line
            try:
                row = _loads(line.data)
            except (ValueError, UnicodeDecodeError) as exc:
                raise InputError(f"not valid JSON: {exc}", ctx.name, line.number) from None
            yield from _translate(row, index, ctx)
