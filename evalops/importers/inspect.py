"""Inspect AI logs (`.eval` and `.json`) -> `evalops.trial/v1` records (docs/importers.md).

Reading: the header, the reductions and each sample are parsed once and validated with
Inspect's own log models (`inspect_ai.log`). A `.eval` log is a zip opened once; a `.json`
log is streamed member by member (`json_stream`). Only one sample is in memory at a time,
and the bulky parts an import never reads (messages, model output, pooled event data) are
dropped before validation, which is what keeps reading well above 1,000 samples/s.

Translation, per sample and epoch: each of Inspect's `error_retries` is a failed attempt and
becomes its own trial; the first attempt is the original (`trial_index` = epoch - 1), each
later attempt a rerun of the one before it. Scores go through the map's `values`; tool calls
come from the `ToolEvent`s, attributed to the nearest enclosing agent span; usage sums the
model events outside the scorers (input tokens include cache reads and writes).
"""

from __future__ import annotations

import functools
import math
import struct
import zipfile
import zlib
from collections.abc import Generator, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from evalops.domain.canonical import MAX_SAFE_INTEGER
from evalops.domain.import_map import TaskMap
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
    grader_result,
    short_message,
    source_file_artifact,
    trial_id,
)
from evalops.importers.json_stream import (
    JsonStreamError,
    iter_object,
    loads_unique,
)

if TYPE_CHECKING:
    from inspect_ai.log import EvalLog

# evalops is not on PyPI (the name there is another project): the extra installs from a
# checkout, or its one dependency directly.
EXTRA_HINT = (
    "pip install '.[inspect]' in the evalops checkout, or pip install 'inspect-ai>=0.3.285,<0.4'"
)
TRIAL_PREFIX = "insp"
# Parts of a sample an import never reads; dropped before validation (they are most of it).
_UNREAD = ("messages", "output", "events_data", "timelines", "sandbox", "files", "setup")
_SCORING_SPANS = frozenset({"scorers", "scorer"})
_STORE_EFFECTS = "evalops:external_effects"
_STORE_MISSES = "evalops:fixture_misses"
_STORE_ARTIFACTS = "evalops:artifacts"
_ATTACHMENT = "attachment://"
# How the two formats store the transcript differs (a `.eval` pools model inputs in
# `events_data`, a `.json` writes them out): the execution's digest leaves it out. The
# record's own fields (tool calls, usage) are compared when a trial is imported again.
_LAYOUT = ("events", "events_data")
# What Inspect writes for a sample it cancelled because another sample failed the eval.
_HARNESS_CANCELLED = "CancelledError("
# A zip member's local header: signature, 22 bytes read from the central directory instead,
# the lengths of the name and the extra field that precede the data.
_LOCAL_HEADER = struct.Struct("<4s22xHH")
_LOCAL_SIGNATURE = b"PK\x03\x04"
_ENCRYPTED = 0x1
_UTF8_NAME = 0x800


def inspect_api() -> Any:
    """`inspect_ai.log`, imported only when a log is read (it is large and optional)."""
    try:
        import inspect_ai.log as api
    except ImportError:
        raise InputError(
            f"reading Inspect AI logs needs inspect-ai, the optional extra: {EXTRA_HINT}",
            field="inspect",
        ) from None
    return api


# ------------------------------------------------------------------------------ reading


class _Log:
    """One Inspect log: its header, then its samples (raw JSON) one at a time."""

    opened: zipfile.ZipFile | BinaryIO | None = None
    """The archive or file `read` opened, which its samples' generator closes when done."""

    def __init__(self, path: Path, name: str) -> None:
        self.path = path
        self.name = name
        self.reductions: list[Any] = []
        self.last: str | None = None
        """The last sample read whole (`A-1/2`): a truncated log names it."""

    def _fail(self, message: str, field_path: str | None = None) -> InputError:
        return InputError(message, self.name, None, field_path)

    def read(self) -> tuple[EvalLog, Generator[dict[str, Any], None, None]]:
        api = inspect_api()  # also teaches zipfile Inspect's zstd compression
        if self.name.endswith(".eval"):
            return self._read_eval(api)
        if self.name.endswith(".json"):
            return self._read_json(api)
        raise self._fail("not an Inspect log: expected a .eval or .json file")

    def _header(self, api: Any, raw: Any) -> EvalLog:
        from pydantic import ValidationError

        if not isinstance(raw, dict):
            raise self._fail("the log header is not a JSON object")
        if isinstance(raw.get("results"), dict) and "evalId" in raw:
            # promptfoo's output: {"evalId", "results": {...}, "config", ...}
            raise self._fail(
                "this is promptfoo output, not an Inspect AI log "
                "(`evalops trials import promptfoo`)"
            )
        try:
            header: EvalLog = api.EvalLog.model_validate(raw)
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            where = ".".join(str(p) for p in first["loc"])
            raise self._fail(f"not a valid Inspect log header: {first['msg']}", where) from None
        return header

    def _read_eval(self, api: Any) -> tuple[EvalLog, Generator[dict[str, Any], None, None]]:
        try:
            archive = zipfile.ZipFile(self.path)
        except (zipfile.BadZipFile, OSError) as exc:
            raise self._fail(f"cannot open the .eval log (a zip archive): {exc}") from None
        try:
            names = list(dict.fromkeys(i.filename for i in archive.infolist()))
            if "header.json" in names:
                header = self._header(api, self._member(archive, "header.json"))
            else:
                # A log still being written has no header yet: Inspect reads its journal.
                header = api.read_eval_log(str(self.path), header_only=True)
            if "reductions.json" in names:
                reductions = self._member(archive, "reductions.json")
                self.reductions = reductions if isinstance(reductions, list) else []
        except BaseException:
            archive.close()
            raise
        samples = [n for n in names if n.startswith("samples/") and n.endswith(".json")]
        self.opened = archive
        return header, self._eval_samples(archive, samples)

    def _member(self, archive: zipfile.ZipFile, name: str) -> Any:
        try:
            data = _read_member(archive, name)
        except Exception as exc:  # zlib, zstd, CRC, truncation: all a corrupt archive
            raise self._fail(f"cannot read {name} from the .eval log: {exc}", name) from None
        try:
            # The standard parser reads Inspect's NaN and refuses a key named twice.
            return loads_unique(data)
        except (ValueError, UnicodeDecodeError) as exc:
            raise self._fail(f"{name} in the .eval log is not valid JSON: {exc}", name) from None
        except RecursionError:
            # Deeper than the interpreter's stack: no sample of a real log is.
            raise self._fail(f"{name} in the .eval log is nested too deeply", name) from None

    def _eval_samples(
        self, archive: zipfile.ZipFile, names: list[str]
    ) -> Generator[dict[str, Any], None, None]:
        with archive:
            for name in names:
                raw = self._member(archive, name)
                if not isinstance(raw, dict):
                    raise self._fail(f"{name} is not a JSON object", name)
                yield raw

    def _read_json(self, api: Any) -> tuple[EvalLog, Generator[dict[str, Any], None, None]]:
        try:
            stream = self.path.open("rb")
        except OSError as exc:
            raise self._fail(f"cannot read the log: {exc.strerror}") from None
        members = iter_object(stream, frozenset({"samples", "reductions"}))
        raw_header: dict[str, Any] = {}
        samples: Iterator[Any] = iter(())
        try:
            for key, value in members:
                if key == "samples":
                    samples = value
                    break
                if key != "reductions":
                    raw_header[key] = value
        except JsonStreamError as exc:
            stream.close()
            raise self._fail(f"cannot read the JSON log: {exc}") from None
        except BaseException:
            stream.close()
            raise
        try:
            header = self._header(api, raw_header)
        except BaseException:
            stream.close()
            raise
        self.opened = stream
        return header, self._json_samples(stream, members, samples)

    def close(self) -> None:
        """Close what `read` opened, for a caller that refuses the log before reading a
        sample: a generator never started never enters its `with`, so closing it does not
        close the file."""
        if self.opened is not None:
            self.opened.close()

    def _json_samples(
        self, stream: Any, members: Iterator[tuple[str, Any]], samples: Iterator[Any]
    ) -> Generator[dict[str, Any], None, None]:
        with stream:
            try:
                for raw in samples:
                    if not isinstance(raw, dict):
                        raise self._fail("a sample is not a JSON object", "samples")
                    yield raw
                    self.last = f"{raw.get('id')}/{raw.get('epoch')}"
                for key, value in members:
                    if key == "reductions":
                        self.reductions = list(value)
            except JsonStreamError as exc:
                after = f" after sample {self.last}, the last complete one" if self.last else ""
                raise self._fail(f"cannot read the JSON log{after}: {exc}", self.last) from None


def _read_member(archive: zipfile.ZipFile, name: str) -> bytes:
    """A member's bytes, checked as `ZipFile.read` checks them (local header name, size,
    CRC-32), read straight from the archive's file: `ZipFile.read` builds a file object
    and a decompressor per member (about 7% of importing a sample). A member
    this does not read plainly (encrypted, a local header that disagrees with the
    directory, a short read) goes to `ZipFile.read`, which raises its own error."""
    info = archive.getinfo(name)
    decompressor_of = getattr(zipfile, "_get_decompressor", None)
    stream = archive.fp
    if decompressor_of is None or stream is None or info.flag_bits & _ENCRYPTED:
        return archive.read(name)
    stream.seek(info.header_offset)
    header = stream.read(_LOCAL_HEADER.size)
    if len(header) != _LOCAL_HEADER.size:
        return archive.read(name)
    signature, name_length, extra_length = _LOCAL_HEADER.unpack(header)
    raw_name = stream.read(name_length)
    legacy = getattr(archive, "metadata_encoding", None) or "cp437"  # not in typeshed
    encoding = "utf-8" if info.flag_bits & _UTF8_NAME else legacy
    if signature != _LOCAL_SIGNATURE or raw_name.decode(encoding, "replace") != info.orig_filename:
        return archive.read(name)
    stream.seek(extra_length, 1)
    packed = stream.read(info.compress_size)
    if len(packed) != info.compress_size:
        return archive.read(name)
    decompressor = decompressor_of(info.compress_type)  # Inspect's zstd is patched in
    data = packed if decompressor is None else decompressor.decompress(packed)
    if decompressor is not None and hasattr(decompressor, "flush"):
        data += decompressor.flush()
    if len(data) != info.file_size or zlib.crc32(data) != info.CRC:
        raise zipfile.BadZipFile(f"Bad CRC-32 or size for file {name!r}")
    return data


# -------------------------------------------------------------------------- translation


@dataclass
class _Context:
    """What translating one log's samples needs."""

    resolved: Resolved
    name: str
    header: EvalLog
    task_map: TaskMap | None
    execution: ResolvedExecution
    producer: str
    unmapped: Unmapped
    summary: SourceSummary
    incomplete: bool = False
    """The eval did not finish (`error`, `cancelled`, `started`), imported with
    --allow-incomplete: samples the harness cancelled are skipped, not charged."""
    run_id: str = ""
    id_base: str = ""
    """`eval_id` (else `run_id`): unique per log, the root of every trial id."""
    owners: dict[str, int | str] = field(default_factory=dict)
    """evalops task id -> the sample id it received."""


@dataclass(frozen=True)
class _Span:
    agent: str | None
    """Name of the nearest enclosing agent span (itself included)."""
    scoring: bool
    """Inside Inspect's scorers: model calls there are the grader's, not the agent's."""


def _resolve_attachments(value: Any, attachments: Mapping[str, Any]) -> Any:
    """Inspect moves long strings to `attachments` and leaves `attachment://<id>` behind."""
    if isinstance(value, str) and value.startswith(_ATTACHMENT):
        found = attachments.get(value[len(_ATTACHMENT) :])
        return found if isinstance(found, str) else value
    if isinstance(value, dict):
        return {k: _resolve_attachments(v, attachments) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve_attachments(v, attachments) for v in value]
    return value


@dataclass
class _Observed:
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    first: str | None = None
    last: str | None = None


def _observe(
    events: list[Any], ctx: _Context, attachments: Mapping[str, Any], label: str, task_id: str
) -> _Observed:
    """Tool calls (with their agent) and the agent's own model usage, in one pass.

    A span begins before anything inside it, so each span's agent and scoring flag are
    known from its parent's when it begins.
    """
    tools = ctx.resolved.map.spec.tools
    target = ctx.resolved.map.spec.target_agent_id
    spans: dict[Any, _Span] = {}
    root = _Span(None, False)
    out = _Observed()
    for e in events:
        if not isinstance(e, dict):
            continue
        stamp = e.get("timestamp")
        if isinstance(stamp, str):
            out.first = out.first or stamp
            out.last = stamp
        kind = e.get("event")
        if kind == "span_begin":
            parent = spans.get(e.get("parent_id"), root)
            span_type = e.get("type")
            name = e.get("name")
            spans[e.get("id")] = _Span(
                str(name) if span_type == "agent" and name else parent.agent,
                parent.scoring or span_type in _SCORING_SPANS,
            )
        elif kind == "tool":
            if spans.get(e.get("span_id"), root).scoring:
                # A scorer checking the outcome (a judge reading the ledger) acts as the
                # grader, as its model usage does: its calls are no step of the agent's.
                continue
            function, arguments = e.get("function"), e.get("arguments")
            if not isinstance(function, str) or not isinstance(arguments, dict):
                raise at(
                    ctx.name, label, "a tool event has no function name or arguments", "events"
                )
            agent = spans.get(e.get("span_id"), root).agent or target
            call: dict[str, Any] = {
                "tool": tools.get(function, function),
                "args": _resolve_attachments(arguments, attachments),
            }
            if agent:
                call["agent_id"] = agent
            out.tool_calls.append(call)
        elif kind == "model":
            if spans.get(e.get("span_id"), root).scoring:
                continue  # the scorer's own model usage is the grader's, not the agent's
            out.model_calls += 1
            output = e.get("output")
            usage = output.get("usage") if isinstance(output, dict) else None
            if isinstance(usage, dict):
                out.input_tokens += _tokens(usage, "input_tokens")
                out.input_tokens += _tokens(usage, "input_tokens_cache_read")
                out.input_tokens += _tokens(usage, "input_tokens_cache_write")
                out.output_tokens += _tokens(usage, "output_tokens")
    ctx.summary.agents.setdefault(task_id, set()).update(
        c.get("agent_id") or "-" for c in out.tool_calls
    )
    return out


def _tokens(usage: Mapping[str, Any], key: str) -> int:
    value = usage.get(key)
    return value if isinstance(value, int) and value > 0 else 0


def _usage(observed: _Observed) -> dict[str, int]:
    return {
        "model_calls": observed.model_calls,
        "input_tokens": observed.input_tokens,
        "output_tokens": observed.output_tokens,
    }


def _moment(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return parse_timestamp(text)
    except ValueError:
        return None


def _timestamp(text: str | None) -> str | None:
    moment = _moment(text)
    return format_timestamp(moment) if moment else None


def _validate(raw: dict[str, Any], ctx: _Context, label: str) -> Any:
    """The parts of a sample an import reads, validated with Inspect's own models.

    A sample in a legacy shape (`score`, `transcript`) goes through Inspect's whole
    `EvalSample` model and its migrations; a current one through its parts alone, which is
    several times faster than validating the transcript nobody reads.
    """
    from pydantic import ValidationError

    legacy = "score" in raw or "transcript" in raw
    lean = {k: v for k, v in raw.items() if k not in _UNREAD and k != "events"}
    lean["error_retries"] = [
        {k: v for k, v in r.items() if k != "events"} if isinstance(r, dict) else r
        for r in raw.get("error_retries") or []
    ]
    try:
        if legacy:
            lean["input"] = ""
            return inspect_api().EvalSample.model_validate(lean)
        return _parts_model().model_validate(lean)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        raise at(ctx.name, label, f"not a valid Inspect sample: {first['msg']}", where) from None


@functools.cache
def _parts_model() -> Any:
    """A model of the sample fields an import reads, built from Inspect's types."""
    from pydantic import ConfigDict, create_model

    api = inspect_api()
    from inspect_ai.model import ModelUsage
    from inspect_ai.scorer import Score

    retry: Any = api.EvalRetryError
    return create_model(
        "InspectSampleParts",
        __config__=ConfigDict(extra="ignore"),
        scores=(dict[str, Score] | None, None),
        error=(api.EvalError | None, None),
        error_retries=(list[retry] | None, None),
        limit=(api.EvalSampleLimit | None, None),
        invalidation=(dict[str, Any] | None, None),  # only whether a sample is invalidated
        model_usage=(dict[str, ModelUsage], {}),
        started_at=(str | None, None),
        completed_at=(str | None, None),
        store=(dict[str, Any], {}),
        attachments=(dict[str, str], {}),
    )


def _translate(raw: dict[str, Any], ctx: _Context) -> Iterator[Item]:
    """One sample-epoch's trials, in steps: the sample's key, the task it maps to (or why it
    is skipped), the sample validated, then one trial per failed attempt and the final one.
    Lazy: a failed attempt's trial is yielded before a later error in the final attempt."""
    sample_id, epoch, label = _sample_key(raw, ctx)
    task_id = _task_of(raw, ctx, sample_id, label)
    if isinstance(task_id, Skipped):
        if task_id.reason == "invalidated":
            task_id = replace(task_id, trial_ids=_invalidated_ids(raw, ctx))
        yield task_id
        return
    one = _sample(raw, ctx, task_id, (sample_id, epoch, label))
    yield from _failed_attempts(one)
    yield from _final_attempt(one)


def _invalidated_ids(raw: Mapping[str, Any], ctx: _Context) -> tuple[str, ...]:
    """The trial ids an invalidated sample's attempts have (or had under an earlier
    evalops), as if it were imported: an earlier import may have stored them."""
    retries = raw.get("error_retries") or []
    if not isinstance(retries, list):
        return ()
    attempt_events = [_events_of(r) for r in retries] + [raw.get("events") or []]
    ids, legacy = _attempt_ids(raw, ctx, attempt_events, bool(raw.get("error")))
    return tuple(dict.fromkeys([*ids, *legacy]))


def _sample_key(raw: Mapping[str, Any], ctx: _Context) -> tuple[int | str, int, str]:
    """The sample's id and epoch, checked, and the label errors name it by (`id/epoch`)."""
    sample_id, epoch = raw.get("id"), raw.get("epoch")
    label = f"{sample_id}/{epoch}"
    if not isinstance(sample_id, int | str) or isinstance(sample_id, bool):
        raise at(ctx.name, label, "a sample has no id", "id")
    if isinstance(sample_id, int) and abs(sample_id) > MAX_SAFE_INTEGER:
        raise at(ctx.name, label, f"a sample id beyond +-(2^53-1): {sample_id}", "id")
    if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 1:
        raise at(ctx.name, label, "a sample has no epoch (a whole number from 1)", "epoch")
    if epoch > MAX_SAFE_INTEGER:
        raise at(ctx.name, label, f"an epoch beyond 2^53-1: {epoch}", "epoch")
    return sample_id, epoch, label


def _task_of(
    raw: Mapping[str, Any], ctx: _Context, sample_id: int | str, label: str
) -> str | Skipped:
    """The evalops task a sample is a trial of, or why the sample is skipped."""
    if raw.get("invalidation"):
        return Skipped(ctx.name, label, "invalidated", str(sample_id))
    if ctx.incomplete and _harness_cancelled(raw):
        return Skipped(ctx.name, label, "cancelled_by_harness", str(sample_id))
    if ctx.task_map is None:
        return Skipped(ctx.name, label, "unmapped_task", str(ctx.header.eval.task))
    task_id = (ctx.task_map.samples or {}).get(str(sample_id))
    if task_id is None:
        if ctx.unmapped == "error":
            raise at(
                ctx.name,
                label,
                f"sample {sample_id} of task {ctx.header.eval.task} is not in the map "
                "(map it, or pass --skip-unmapped)",
                "id",
            )
        return Skipped(ctx.name, label, "unmapped_sample", str(sample_id))
    # Map keys are text: the ids 1 and "1" are one key, but two samples of the log.
    owner = ctx.owners.setdefault(task_id, sample_id)
    if owner != sample_id or type(owner) is not type(sample_id):
        raise at(
            ctx.name,
            label,
            f"samples {owner!r} and {sample_id!r} both map to task {task_id} "
            "(one task receives at most one sample per log)",
            "id",
        )
    return task_id


@dataclass
class _Sample:
    """One mapped sample-epoch, validated, and what each of its attempts' records shares."""

    ctx: _Context
    raw: dict[str, Any]
    sample_id: int | str
    epoch: int
    label: str
    task_id: str
    task_map: TaskMap
    target: ResolvedTask
    sample: Any
    """The parts an import reads, validated with Inspect's models (`_validate`)."""
    attempt_events: list[list[Any]]
    """Each attempt's events: the failed ones (`error_retries`), then the final one."""
    ids: list[str]
    legacy: list[str]
    started: str
    completed: str
    labels: list[str]
    """The final attempt's secondary labels so far."""

    @property
    def attempts(self) -> int:
        return len(self.attempt_events)

    @property
    def attachments(self) -> Mapping[str, Any]:
        return self.sample.attachments or {}

    def source_artifact(self, digest: str) -> dict[str, Any]:
        return {
            "kind": "source_log",
            "digest": digest,
            "producer": self.ctx.producer,
            "location": f"{self.ctx.id_base}#{self.sample_id}/{self.epoch}",
        }

    def file_artifact(self) -> dict[str, Any]:
        """The log file this sample was read from, its sample id and epoch."""
        return source_file_artifact(
            self.ctx.name, self.ctx.producer, f"{self.sample_id}/{self.epoch}"
        )

    def aliases(self, attempt: int) -> tuple[str, ...]:
        old = self.legacy[attempt - 1]
        return (old,) if old != self.ids[attempt - 1] else ()

    def record(self, attempt: int, start: str, end: str) -> dict[str, Any]:
        ctx = self.ctx
        rec = base_record(
            trial=self.ids[attempt - 1],
            run_id=ctx.run_id,
            attempt_id=f"{ctx.id_base}/{self.sample_id}/{self.epoch}/{attempt}",
            target=self.target,
            execution=ctx.execution,
            trial_index=self.epoch - 1,
            started_at=start,
            completed_at=end,
        )
        if attempt > 1:
            rec["rerun"] = {
                "parent_trial_id": self.ids[attempt - 2],
                "reason": "error_retry",
                "ordinal": attempt - 1,
            }
        target_agent = ctx.resolved.map.spec.target_agent_id
        if target_agent:
            rec["target_agent_id"] = target_agent
        return rec


def _sample(
    raw: dict[str, Any], ctx: _Context, task_id: str, key: tuple[int | str, int, str]
) -> _Sample:
    """Validate a mapped sample and fix what all its attempts' records share."""
    sample_id, epoch, label = key
    assert ctx.task_map is not None  # `_task_of` skips the samples of an unmapped task
    target = ctx.resolved.tasks[task_id]
    events = raw.get("events") or []
    retries_raw = raw.get("error_retries") or []
    sample = _validate(raw, ctx, label)
    started, completed, labels = _sample_window(sample, ctx)
    attempt_events = [_events_of(r) for r in retries_raw] + [events]
    ids, legacy = _attempt_ids(raw, ctx, attempt_events, sample.error is not None)
    return _Sample(
        ctx=ctx,
        raw=raw,
        sample_id=sample_id,
        epoch=epoch,
        label=label,
        task_id=task_id,
        task_map=ctx.task_map,
        target=target,
        sample=sample,
        attempt_events=attempt_events,
        ids=ids,
        legacy=legacy,
        started=started,
        completed=completed,
        labels=labels,
    )


def _sample_window(sample: Any, ctx: _Context) -> tuple[str, str, list[str]]:
    """The sample's start and end as Inspect recorded them, else synthesized (and said so):
    a missing start is the eval's creation, an end missing or before the start is the
    start."""
    labels: list[str] = []
    begin = _moment(sample.started_at)
    end = _moment(sample.completed_at)
    if begin is None:
        begin = _moment(ctx.header.eval.created) or datetime(1970, 1, 1, tzinfo=UTC)
        labels.append("timestamps_synthesized")
    if end is None or end < begin:
        end = begin
        if "timestamps_synthesized" not in labels:
            labels.append("timestamps_synthesized")
    return format_timestamp(begin), format_timestamp(end), labels


def _failed_attempts(one: _Sample) -> Iterator[Item]:
    """The failed attempts: Inspect keeps their error and the events since the last model
    call."""
    ctx = one.ctx
    retries_raw = one.raw.get("error_retries") or []
    for attempt, (retry, retry_raw) in enumerate(
        zip(one.sample.error_retries or [], retries_raw, strict=True), start=1
    ):
        # Built exactly as the failed final attempt of a log is: `eval_retry` copies that
        # attempt, events and all, into the retry log's error_retries (one execution).
        observed = _observe(
            one.attempt_events[attempt - 1], ctx, one.attachments, one.label, one.task_id
        )
        begun, ended = _timestamp(observed.first), _timestamp(observed.last)
        rec = one.record(attempt, begun or one.started, ended or begun or one.started)
        rec["grader_results"] = []
        rec["runtime"] = {
            "status": ctx.resolved.map.spec.runtime.status_of(retry.message),
            "message": short_message(retry.message),
        }
        rec["tool_calls"] = observed.tool_calls
        rec["usage"] = _usage(observed)
        rec["artifact_manifest"] = {
            "artifacts": [one.source_artifact(_failure_digest(retry_raw)), one.file_artifact()]
        }
        rec["secondary_labels"] = [] if begun else ["timestamps_synthesized"]
        yield Translated(
            ctx.name,
            f"{one.label}#{attempt}",
            one.task_id,
            rec,
            str(one.sample_id),
            one.aliases(attempt),
        )


def _final_attempt(one: _Sample) -> Iterator[Item]:
    """The sample's own (last) attempt: scores, runtime, usage and the store's extras."""
    ctx, sample = one.ctx, one.sample
    final_failed = sample.error is not None
    started, completed, labels = one.started, one.completed, one.labels
    events = one.attempt_events[-1]
    observed = _observe(events, ctx, one.attachments, one.label, one.task_id)
    if final_failed:
        begun, ended = _timestamp(observed.first), _timestamp(observed.last)
        if begun:
            started, completed = begun, ended or begun
            labels = [x for x in labels if x != "timestamps_synthesized"]
    rec = one.record(one.attempts, started, completed)
    rec["grader_results"] = yield from _scores(one, labels)
    rec["runtime"] = _runtime(one)
    rec["tool_calls"] = observed.tool_calls
    rec["usage"] = _final_usage(observed, sample, labels)
    artifacts = _store_extras(rec, one)
    digest = _failure_digest(one.raw.get("error")) if final_failed else _execution_digest(one.raw)
    rec["artifact_manifest"] = {
        "artifacts": [*artifacts, one.source_artifact(digest), one.file_artifact()]
    }
    if one.attempts > 1 and not final_failed:
        labels.insert(0, "after_error_retries")
    rec["secondary_labels"] = list(dict.fromkeys(labels))
    yield Translated(
        ctx.name, one.label, one.task_id, rec, str(one.sample_id), one.aliases(one.attempts)
    )


def _scores(one: _Sample, labels: list[str]) -> Generator[Item, None, list[dict[str, Any]]]:
    """The final attempt's grader results through the map's scorers (each unmapped scorer
    skipped, or an error); what happened to a value is added to `labels`."""
    ctx = one.ctx
    results: list[dict[str, Any]] = []
    for name, score in (one.sample.scores or {}).items():
        scorer = one.task_map.scorers.get(name)
        if scorer is None:
            if ctx.unmapped == "error":
                raise at(
                    ctx.name,
                    one.label,
                    f"scorer {name!r} is not in the map for task {ctx.header.eval.task} "
                    "(map it, or pass --skip-unmapped)",
                    f"scores.{name}",
                )
            yield Skipped(ctx.name, one.label, "unmapped_scorer", name)
            continue
        blocking = scorer.grader_id in one.target.blocking
        result, problem = grader_result(scorer, score.value, score.value, blocking=blocking)
        if result is not None:
            results.append(result)
            if problem:
                labels.append(f"{problem}:{name}")
        elif problem:
            labels.append(problem)
        if any(edit.provenance is not None for edit in getattr(score, "history", None) or []):
            labels.append("edited_score")
    return results


def _runtime(one: _Sample) -> dict[str, Any]:
    """How the final attempt ended: its error, the limit that stopped it (every limit is
    mapped), or ok."""
    ctx, sample = one.ctx, one.sample
    if sample.error is not None:
        return {
            "status": ctx.resolved.map.spec.runtime.status_of(sample.error.message),
            "message": short_message(sample.error.message),
        }
    if sample.limit is not None:
        status = ctx.resolved.map.spec.runtime.limits.get(sample.limit.type)
        if status is None:
            raise at(
                ctx.name,
                one.label,
                f"sample {one.sample_id} was stopped by the {sample.limit.type} limit, which "
                f"the map's runtime.limits does not list (every stop is mapped: add "
                f"{sample.limit.type}: <status>)",
                "limit.type",
            )
        return {"status": status, "message": f"{sample.limit.type} limit reached"}
    return {"status": "ok"}


def _final_usage(observed: _Observed, sample: Any, labels: list[str]) -> dict[str, int]:
    """The agent's model usage from the model events; without any (events were not logged),
    the sample's totals, scorers included, and `labels` says so."""
    if observed.model_calls or not sample.model_usage:
        return _usage(observed)
    totals = list(sample.model_usage.values())
    labels.append("usage_includes_scorers")
    return {
        "model_calls": 0,
        "input_tokens": sum(
            u.input_tokens + (u.input_tokens_cache_read or 0) + (u.input_tokens_cache_write or 0)
            for u in totals
        ),
        "output_tokens": sum(u.output_tokens for u in totals),
    }


def _store_extras(rec: dict[str, Any], one: _Sample) -> list[Any]:
    """What the harness left in the sample's store for evalops: external effects and
    fixture misses go into `rec`; its artifacts are returned (a list, else an error)."""
    store = one.sample.store or {}
    if _STORE_EFFECTS in store:
        rec["external_effects"] = store[_STORE_EFFECTS]
    if _STORE_MISSES in store:
        rec["fixture_misses"] = store[_STORE_MISSES]
    artifacts = store.get(_STORE_ARTIFACTS, [])
    if not isinstance(artifacts, list):
        raise at(
            one.ctx.name, one.label, "must be a list of artifacts", f"store.{_STORE_ARTIFACTS}"
        )
    return artifacts


def _events_of(retry: Any) -> list[Any]:
    events = retry.get("events") if isinstance(retry, dict) else None
    return events if isinstance(events, list) else []


def _first_uuid(events: list[Any]) -> str | None:
    first = events[0] if events else None
    uuid = first.get("uuid") if isinstance(first, dict) else None
    return uuid if isinstance(uuid, str) and uuid else None


def _attempt_ids(
    raw: Mapping[str, Any], ctx: _Context, attempt_events: list[list[Any]], final_failed: bool
) -> tuple[list[str], list[str]]:
    """Each attempt's trial id, and the id an earlier evalops gave it.

    One trial per execution, whichever log carries it. A completed execution is named by
    the sample's uuid (an eval-retry or eval-set log copies completed samples, uuid and
    all); a failed attempt by the uuid of its first event, because `eval_retry` copies a
    failed sample into the new sample's error_retries under a new sample uuid but with its
    events. Logs without uuids: [eval_id, sample id, epoch, attempt], as before.
    """
    sample_id, epoch = raw.get("id"), raw.get("epoch")
    attempts = len(attempt_events)
    legacy = [
        trial_id(TRIAL_PREFIX, ctx.id_base, sample_id, epoch, a) for a in range(1, attempts + 1)
    ]
    uuid = raw.get("uuid")
    ids = []
    for attempt, events in enumerate(attempt_events, start=1):
        failed = attempt < attempts or final_failed
        first = _first_uuid(events) if failed else None
        if first is not None:
            ids.append(trial_id(TRIAL_PREFIX, first))
        elif isinstance(uuid, str) and uuid:
            ids.append(trial_id(TRIAL_PREFIX, uuid, attempt))
        else:
            ids.append(legacy[attempt - 1])
    return ids, legacy


def _failure_digest(error: Any) -> str:
    """The digest of a failed attempt: its error (message and traceback), events left out."""
    lean = (
        {k: v for k, v in error.items() if k not in _LAYOUT} if isinstance(error, dict) else error
    )
    return content_digest(lean)


def _harness_cancelled(raw: Mapping[str, Any]) -> bool:
    error = raw.get("error")
    message = error.get("message") if isinstance(error, dict) else None
    return isinstance(message, str) and message.startswith(_HARNESS_CANCELLED)


def _execution_digest(raw: Mapping[str, Any]) -> str:
    """The digest of one sample-epoch execution, alike in a `.eval`, its `.json` conversion
    and any log that carries it (the transcript's storage layout left out)."""
    lean = {k: v for k, v in raw.items() if k not in _LAYOUT}
    retries = raw.get("error_retries")
    if isinstance(retries, list):
        lean["error_retries"] = [
            {k: v for k, v in r.items() if k not in _LAYOUT} if isinstance(r, dict) else r
            for r in retries
        ]
    return content_digest(lean)


def _reductions(ctx: _Context, reductions: list[Any]) -> None:
    """The source tool's own per-sample reduction of the epochs, by evalops task."""
    if ctx.task_map is None:
        return
    samples = ctx.task_map.samples or {}
    for entry in reductions:
        if not isinstance(entry, dict):
            continue
        scorer, reducer = entry.get("scorer"), entry.get("reducer") or "mean"
        for item in entry.get("samples") or []:
            if not isinstance(item, dict):
                continue
            task_id = samples.get(str(item.get("sample_id")))
            if task_id is None or not isinstance(scorer, str):
                continue
            value = _finite(item.get("value"))
            ctx.summary.reductions.setdefault(task_id, {}).setdefault(scorer, {})[str(reducer)] = (
                value
            )


def _finite(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    return value


def _check_header(
    header: EvalLog, name: str, resolved: Resolved, unmapped: Unmapped, allow_incomplete: bool
) -> None:
    """Refuse a log the map or the execution profile rules out, before reading samples."""
    spec = resolved.map.spec
    if header.status != "success" and not allow_incomplete:
        raise InputError(
            f"the eval's status is {header.status!r}, not 'success': an incomplete run is "
            "refused (pass --allow-incomplete to import its samples; those the harness "
            "cancelled are skipped and counted)",
            name,
            None,
            "status",
        )
    execution = resolved.executions[str(spec.execution)]
    task_map = spec.tasks.get(header.eval.task)
    if task_map is None and unmapped == "error":
        raise InputError(
            f"Inspect task {header.eval.task!r} is not in the map (tasks: "
            f"{', '.join(spec.tasks) or 'none'}); map it, or pass --skip-unmapped",
            name,
            None,
            "eval.task",
        )
    if (
        task_map is not None
        and task_map.task_version is not None
        and str(task_map.task_version) != str(header.eval.task_version)
    ):
        raise InputError(
            f"the log's task_version is {header.eval.task_version!r}; the map "
            f"({resolved.map.path}) requires {task_map.task_version!r}",
            name,
            None,
            "eval.task_version",
        )
    if header.eval.model != execution.model:
        raise InputError(
            f"the log evaluated model {header.eval.model!r}; execution profile "
            f"{execution.execution_id} is {execution.model!r}: map the task to a profile of "
            "that model (`evalops new execution ID`, its model set to the log's, commit and "
            "`evalops sync`)",
            name,
            None,
            "eval.model",
        )
    if not (header.eval.eval_id or header.eval.run_id):
        raise InputError("the log has neither an eval_id nor a run_id", name, None, "eval.eval_id")


def read_inspect(
    path: Path, name: str, resolved: Resolved, *, unmapped: Unmapped, allow_incomplete: bool = False
) -> tuple[SourceSummary, Iterator[Item]]:
    """Open one log, check it against the map, and translate its samples lazily.

    Header problems (a task, task_version or model the map and the execution profile
    refuse) are raised here, before any sample is read.
    """
    spec = resolved.map.spec
    log = _Log(path, name)
    header, samples = log.read()
    try:
        _check_header(header, name, resolved, unmapped, allow_incomplete)
    except InputError:
        log.close()
        raise
    version = header.eval.packages.get("inspect_ai")
    producer = f"inspect-ai {version}" if version else "inspect-ai"
    run_id = header.eval.run_id or header.eval.eval_id
    ctx = _Context(
        resolved=resolved,
        name=name,
        header=header,
        task_map=spec.tasks.get(header.eval.task),
        execution=resolved.executions[str(spec.execution)],
        producer=producer,
        unmapped=unmapped,
        summary=SourceSummary(name, producer, run_id),
        incomplete=header.status != "success",
        run_id=run_id,
        id_base=header.eval.eval_id or run_id,
    )

    def items() -> Iterator[Item]:
        # `header.invalidated` only says some sample is; each sample's `invalidation` says which.
        try:
            for raw in samples:
                yield from _translate(raw, ctx)
        finally:
            # A sample refused mid-log raises here, not in `samples`: close the log now,
            # not when the garbage collector reaches the suspended reader.
            samples.close()
        _reductions(ctx, log.reductions)

    return ctx.summary, items()
