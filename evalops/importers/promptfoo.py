"""promptfoo results (`-o results.json`, results version 3, or `-o results.jsonl`) -> trials.

Read with the standard library: a `.json` file is one document (use `.jsonl` to stream a
very large run); a `.jsonl` file holds one result row per line and no header, so its run id
is derived from the file's digest and its start time comes from `--started-at`.

Each row is one trial of one (test, prompt, provider): the test is the task (map key: its
`description`, else the canonical JSON of its `vars`), the provider the execution. promptfoo
records no per-row time and no repeat index, so `trial_index` is the repeat ordinal
(`response.metadata.repeatIndex` when a provider reports it, else the order of appearance)
and the times are synthesized from the run's timestamp and the row's `latencyMs`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalops.domain.canonical import canonical_text
from evalops.domain.vocabulary import format_timestamp, parse_timestamp
from evalops.errors import InputError
from evalops.importers.common import (
    Item,
    Resolved,
    ResolvedExecution,
    Skipped,
    SourceSummary,
    Translated,
    Unmapped,
    at,
    base_record,
    file_digest,
    grader_result,
    plus_ms,
    short_message,
    trial_id,
)
from evalops.registry.jsonl import read_lines

TRIAL_PREFIX = "pf"
RESULTS_VERSION = 3
ERROR_ROW = 2  # promptfoo ResultFailureReason.ERROR: the provider or harness failed


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _loads(text: str | bytes) -> Any:
    return json.loads(text, parse_constant=_reject_constant)


@dataclass
class _Context:
    resolved: Resolved
    name: str
    run_id: str
    started_at: str
    producer: str
    digest: str
    unmapped: Unmapped
    location_name: str
    ordinals: dict[tuple[str, str, int], int] = field(default_factory=dict)
    prompts: dict[tuple[str, str], int] = field(default_factory=dict)


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


def test_key(row: Mapping[str, Any]) -> str:
    """The map key of a row's test: its description, else the canonical JSON of its vars."""
    case = row.get("testCase") if isinstance(row.get("testCase"), dict) else {}
    assert isinstance(case, dict)
    description = case.get("description", row.get("description"))
    if isinstance(description, str) and description:
        return description
    variables = case.get("vars", row.get("vars"))
    return canonical_text(variables if isinstance(variables, dict) else {})


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
        # Input tokens include prompt-cache reads and writes (DESIGN.md 10.1).
        "input_tokens": _count(usage.get("prompt"))
        + _count(details.get("cacheReadInputTokens"))
        + _count(details.get("cacheCreationInputTokens")),
        "output_tokens": _count(usage.get("completion")),
    }


def _grader_results(
    row: Mapping[str, Any], ctx: _Context, label: str, key: str
) -> Iterator[tuple[dict[str, Any], str] | Skipped]:
    task_map = ctx.resolved.map.spec.tasks[key]
    grading = row.get("gradingResult")
    components = grading.get("componentResults") if isinstance(grading, dict) else None
    seen: dict[str, int] = {}
    for i, component in enumerate(components if isinstance(components, list) else []):
        where = f"gradingResult.componentResults[{i}]"
        if not isinstance(component, dict):
            raise at(ctx.name, label, "must be an object", where)
        assertion = component.get("assertion")
        assertion = assertion if isinstance(assertion, dict) else {}
        name = assertion.get("metric") or assertion.get("type")
        if not isinstance(name, str) or not name:
            name = "(no assertion)"
        scorer = task_map.scorers.get(name)
        if scorer is None:
            if ctx.unmapped == "error":
                raise at(
                    ctx.name,
                    label,
                    f"assertion {name!r} is not in the map's scorers for test {key!r} "
                    "(map its metric or type, or pass --skip-unmapped)",
                    where,
                )
            yield Skipped(ctx.name, label, "unmapped_scorer", name)
            continue
        if name in seen:
            raise at(
                ctx.name,
                label,
                f"assertions {seen[name]} and {i} share the scorer key {name!r}; give them "
                "distinct metrics (a trial carries at most one result per grader)",
                where,
            )
        seen[name] = i
        result, problem = grader_result(scorer, component.get("pass"), component.get("score"))
        yield result, f"{problem}:{name}" if problem else ""


def _translate(row: Any, index: int, ctx: _Context) -> Iterator[Item]:
    if not isinstance(row, dict):
        raise at(ctx.name, f"row {index}", "a result row must be a JSON object")
    key = test_key(row)
    provider_key, execution = _execution(row, ctx)
    prompt = row.get("promptIdx", 0)
    prompt = prompt if isinstance(prompt, int) and not isinstance(prompt, bool) else 0
    label = f"{key}/{provider_key}"
    if execution is None:
        if ctx.unmapped == "error":
            raise at(
                ctx.name,
                label,
                f"provider {provider_key!r} is not in the map's providers (map it to an "
                "execution profile, or pass --skip-unmapped)",
                "provider",
            )
        yield Skipped(ctx.name, label, "unmapped_provider", provider_key)
        return
    task_map = ctx.resolved.map.spec.tasks.get(key)
    if task_map is None or task_map.task is None:
        if ctx.unmapped == "error":
            raise at(
                ctx.name,
                label,
                f"test {key!r} is not in the map (map it, or pass --skip-unmapped)",
                "testCase.description",
            )
        yield Skipped(ctx.name, label, "unmapped_sample", key)
        return
    first_prompt = ctx.prompts.setdefault((key, provider_key), prompt)
    if first_prompt != prompt:
        raise at(
            ctx.name,
            label,
            f"test {key!r} ran with prompts {first_prompt} and {prompt}; one task receives "
            "one input per run (split the prompts into separate tests)",
            "promptIdx",
        )
    response = row.get("response")
    metadata = response.get("metadata") if isinstance(response, dict) else None
    repeat = metadata.get("repeatIndex") if isinstance(metadata, dict) else None
    counter = (key, provider_key, prompt)
    ordinal = ctx.ordinals.get(counter, 0)
    ctx.ordinals[counter] = ordinal + 1
    if isinstance(repeat, int) and not isinstance(repeat, bool) and repeat >= 0:
        ordinal = repeat
    label = f"{label}/{ordinal}"
    target = ctx.resolved.tasks[task_map.task]
    row_id = row.get("id")
    ids: tuple[object, ...] = (
        (row_id,)
        if isinstance(row_id, str) and row_id
        else (ctx.run_id, key, provider_key, prompt, ordinal)
    )
    latency = row.get("latencyMs")
    latency = (
        latency
        if isinstance(latency, int | float) and not isinstance(latency, bool) and latency >= 0
        else 0
    )
    record = base_record(
        trial=trial_id(TRIAL_PREFIX, *ids),
        run_id=ctx.run_id,
        attempt_id=str(row_id) if isinstance(row_id, str) and row_id else label,
        target=target,
        execution=execution,
        trial_index=ordinal,
        started_at=ctx.started_at,
        completed_at=plus_ms(ctx.started_at, float(latency)),
    )
    labels = ["timestamps_synthesized"]
    results: list[dict[str, Any]] = []
    if row.get("failureReason") == ERROR_ROW:
        text = row.get("error") or (response.get("error") if isinstance(response, dict) else None)
        text = text if isinstance(text, str) else "error"
        record["runtime"] = {
            "status": ctx.resolved.map.spec.runtime.status_of(text),
            "message": short_message(text),
        }
    else:
        record["runtime"] = {"status": "ok"}
        for item in _grader_results(row, ctx, label, key):
            if isinstance(item, Skipped):
                yield item
                continue
            result, problem = item
            results.append(result)
            if problem:
                labels.append(problem)
    record["grader_results"] = results
    record["tool_calls"] = _tool_calls(row, ctx, label)
    if ctx.resolved.map.spec.target_agent_id:
        record["target_agent_id"] = ctx.resolved.map.spec.target_agent_id
    record["usage"] = _usage(row)
    where = row_id if isinstance(row_id, str) and row_id else f"{row.get('testIdx')}/{prompt}"
    record["artifact_manifest"] = {
        "artifacts": [
            {
                "kind": "source_log",
                "digest": ctx.digest,
                "producer": ctx.producer,
                "location": f"{ctx.location_name}#{where}",
            }
        ]
    }
    record["secondary_labels"] = labels
    yield Translated(ctx.name, label, target.task_id, record)


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
    digest = file_digest(path)
    common = {
        "resolved": resolved,
        "name": name,
        "digest": digest,
        "unmapped": unmapped,
        "location_name": path.name,
    }
    if name.endswith(".jsonl"):
        if started_at is None:
            raise InputError(
                "promptfoo JSONL rows carry no timestamp: give the run's start with "
                "--started-at (or import the .json output)",
                name,
                None,
                "--started-at",
            )
        ctx = _Context(
            run_id="promptfoo-" + digest.removeprefix("sha256:")[:16],
            started_at=_timestamp(started_at, name, "--started-at"),
            producer="promptfoo",
            **common,  # type: ignore[arg-type]
        )
        return SourceSummary(name, ctx.producer, ctx.run_id), _jsonl_rows(path, ctx)
    if not name.endswith(".json"):
        raise InputError("not promptfoo results: expected a .json or .jsonl file", name)
    try:
        document = _loads(path.read_bytes())
    except OSError as exc:
        raise InputError(f"cannot read the results: {exc.strerror}", name) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"not valid JSON (truncated?): {exc}", name) from None
    results = document.get("results") if isinstance(document, dict) else None
    if not isinstance(results, dict) or not isinstance(results.get("results"), list):
        raise InputError("not promptfoo results: no results.results list", name, None, "results")
    if results.get("version") != RESULTS_VERSION:
        raise InputError(
            f"promptfoo results version {results.get('version')!r} is not supported "
            f"(version {RESULTS_VERSION} is)",
            name,
            None,
            "results.version",
        )
    eval_id = document.get("evalId")
    if not isinstance(eval_id, str) or not eval_id:
        raise InputError("the results have no evalId", name, None, "evalId")
    metadata = document.get("metadata")
    version = metadata.get("promptfooVersion") if isinstance(metadata, dict) else None
    ctx = _Context(
        run_id=eval_id,
        started_at=_timestamp(results.get("timestamp"), name, "results.timestamp"),
        producer=f"promptfoo {version}" if isinstance(version, str) else "promptfoo",
        **common,  # type: ignore[arg-type]
    )
    rows: list[Any] = results["results"]

    def items() -> Iterator[Item]:
        for index, row in enumerate(rows):
            yield from _translate(row, index, ctx)

    return SourceSummary(name, ctx.producer, ctx.run_id), items()


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
