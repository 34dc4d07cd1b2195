"""The fast paths give exactly what the reference paths give.

- `parse_record` (the ingest parser) accepts and refuses exactly what `parse_json` does,
  with the same value, and vouches for the C encoder only when it is byte-identical to
  RFC 8785 (`rfc8785`, the reference);
- the stored and whole canonical forms cut from one encoding equal the reference;
- a row's digest line equals the reference canonical JSON of its values;
- the gate's inputs, which re-derive only trials whose evidence changed, equal inputs that
  re-derive every trial, after reconciliations, reviews and calibration changes.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import rfc8785
from hypothesis import event, given, settings
from hypothesis import strategies as st

from evalops.errors import InputError
from evalops.registry.jsonl import Line
from evalops.registry.load import parse_json, parse_record
from evalops.services.ingest.records import (
    _canonical_forms,
    _integral_floats_as_integers,
    _named_ids,
    parse_line,
    take_line,
)
from evalops.store.rowlines import PLAIN, TIMESTAMP, _line_of_any, cell, line_of
from tests.conftest import Cli
from tests.helpers import real_clock_demo

SAFE = 2**53 - 1
numbers = (
    st.integers(-(2**60), 2**60)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([1.0, 0.0, -0.0, 1e-5, 1e16, 1e21, 5e-324, 0.1, 4200.0])
)
text = st.text(max_size=8) | st.sampled_from(["\x00", "\ud800", "😀", "a\U0001f600b", "é"])
scalars = st.none() | st.booleans() | numbers | text
values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(text, children, max_size=3),
    max_leaves=12,
)
records = st.dictionaries(text | st.just("tool_calls"), values, max_size=6)


def _outcome(parse: Any, raw: str) -> tuple[str, Any]:
    try:
        return "ok", parse(raw)
    except InputError as exc:
        return "error", (exc.line, exc.field)


def _dumps(value: Any) -> str | None:
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=True)
    except (ValueError, UnicodeEncodeError):
        return None


@pytest.mark.slow  # several CPU seconds: `make test` runs it, `make test-fast` not
@settings(max_examples=500, deadline=None)
@given(records)
def test_parse_record_agrees_with_the_strict_parser(value: dict[str, Any]) -> None:
    raw = _dumps(value)
    if raw is None:
        return
    fast = _outcome(lambda t: parse_record(t, "r.jsonl"), raw)
    strict = _outcome(lambda t: parse_json(t, "r.jsonl", spec=False), raw)
    assert fast[0] == strict[0], (raw, fast, strict)
    if fast[0] == "error":
        assert fast[1] == strict[1]
        return
    parsed = fast[1]
    assert rfc8785.dumps(parsed.document.value) == rfc8785.dumps(strict[1].value)
    if parsed.encoder_safe:
        from evalops.domain.canonical import encode_trusted

        assert encode_trusted(parsed.document.value) == rfc8785.dumps(strict[1].value)


# Records the reference can encode, with `tool_calls` between other keys: the case where the
# stored form is cut out of the whole encoding. Mixed with `records` (whose hostile values
# exercise the refusals), most examples reach the comparison.
json_text = st.text(
    st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=8
) | st.sampled_from(["é", "😀", "a\tb", "\u2028"])
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-SAFE, SAFE) | json_text
    | st.sampled_from([0.5, -0.0, 1.5e-3, 1e-5, 1e21]),
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(json_text, children, max_size=3),
    max_leaves=12,
)  # fmt: skip
records_with_tool_calls = st.builds(
    lambda rest, calls: {**rest, "tool_calls": calls},
    st.dictionaries(
        json_text | st.sampled_from(["a", "run_id", "trial_id", "zz"]), json_values, max_size=5
    ),
    json_values,
)


@pytest.mark.slow  # several CPU seconds: `make test` runs it, `make test-fast` not
@settings(max_examples=400, deadline=None)
@given(records_with_tool_calls | records)
def test_stored_and_whole_forms_equal_the_reference(value: dict[str, Any]) -> None:
    raw = _dumps(value)
    if raw is None:
        event("not JSON text (a lone surrogate)")
        return
    try:
        parsed = parse_record(raw, "r.jsonl")
    except InputError:
        event("refused by the parser")
        return
    record = parsed.document.value
    try:
        expected_whole = rfc8785.dumps(record)
        expected_stored = rfc8785.dumps({k: v for k, v in record.items() if k != "tool_calls"})
    except Exception:
        event("refused by the reference")
        with pytest.raises(Exception):  # noqa: B017 - the reference's own error, any kind
            _canonical_forms(record, parsed.encoder_safe)
        return
    event(
        f"compared: tool_calls={'tool_calls' in record}, keys after it="
        f"{any(k > 'tool_calls' for k in record)}, encoder_safe={parsed.encoder_safe}"
    )
    assert _canonical_forms(record, parsed.encoder_safe) == (expected_whole, expected_stored)


def _with_float_ints(value: Any) -> Any:
    """`value` with every integer a float (`json.dumps` writes 3 as `3.0`)."""
    if isinstance(value, bool) or value is None or isinstance(value, str | float):
        return value
    if isinstance(value, int):
        return float(value)
    if isinstance(value, list):
        return [_with_float_ints(v) for v in value]
    return {k: _with_float_ints(v) for k, v in value.items()}


def _reference_identical(line: str, stored_digest: str) -> bool:
    """Independently of the ingest's fast paths: the line is one valid record (the strict
    parser) whose RFC 8785 form (`rfc8785`) hashes to the stored digest."""
    import hashlib

    try:
        value = parse_json(line, "r.jsonl", spec=False).value
        form = rfc8785.dumps(value)
    except Exception:  # refused by the strict parser or by the reference
        return False
    return "sha256:" + hashlib.sha256(form).hexdigest() == stored_digest


# Strings that look like the numbers around them: `1.0` inside a string is not a number.
number_like = st.sampled_from([",1,", ":2]", "[3}", "-4,", "[0]", ",1.0,", "x.0]", ":-0.0}"])
line_values = st.recursive(
    st.none() | st.booleans() | st.integers(-SAFE, SAFE) | json_text | number_like
    | st.sampled_from([0.5, -0.0, 1.5e-3, 1e-5, 1e21, 2.0**60]),
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(json_text | number_like, children, max_size=3),
    max_leaves=12,
)  # fmt: skip
_INTEGER_IN_TEXT = re.compile(r"(?<=[:,\[])(-?[0-9]+)(?=[,}\]])")


def _dotted_strings(value: Any) -> Any:
    """`value` with `.0` after each integer-looking part of its strings: another record."""
    if isinstance(value, str):
        return _INTEGER_IN_TEXT.sub(r"\1.0", value)
    if isinstance(value, list):
        return [_dotted_strings(v) for v in value]
    if isinstance(value, dict):
        return {_dotted_strings(k): _dotted_strings(v) for k, v in value.items()}
    return value


@pytest.mark.slow  # several CPU seconds: `make test` runs it, `make test-fast` not
@settings(max_examples=500, deadline=None)
@given(
    stored_value=st.dictionaries(json_text | number_like, line_values, max_size=5),
    other_value=st.dictionaries(json_text | number_like, line_values, max_size=5),
    data=st.data(),
)
def test_a_line_is_taken_as_stored_exactly_when_its_canonical_form_is(
    stored_value: dict[str, Any], other_value: dict[str, Any], data: st.DataObject
) -> None:
    """`take_line` (the no-op ingest's check) against the reference: a line counts as the
    record stored under its trial_id exactly when it is a valid record whose RFC 8785 form
    hashes to the stored record_digest, however it is spelled (key order, spacing, escapes,
    `1.0` for 1); otherwise it gives what `parse_line` gives."""
    import hashlib

    stored_record = {**stored_value, "trial_id": "t-1"}
    try:
        stored_digest = "sha256:" + hashlib.sha256(rfc8785.dumps(stored_record)).hexdigest()
    except Exception:
        event("the reference refuses the stored record")
        return
    # The line: the stored record or another one under the same trial_id, respelled.
    same = data.draw(st.booleans())
    value = stored_record if same else {**other_value, "trial_id": "t-1"}
    if data.draw(st.booleans()):
        value = _with_float_ints(value)
    if data.draw(st.booleans()):
        value = {**_dotted_strings(value), "trial_id": "t-1"}
    separators = data.draw(st.sampled_from([(",", ":"), (", ", ": "), (" , ", " :  ")]))
    try:
        line = json.dumps(
            value,
            sort_keys=data.draw(st.booleans()),
            ensure_ascii=data.draw(st.booleans()),
            separators=separators,
        )
    except (ValueError, UnicodeEncodeError):
        return
    if data.draw(st.booleans()):
        line = "{" + '"trial_id":"t-0",' + line[1:]  # a duplicate key: invalid JSON
    raw = line.encode("utf-8", "surrogatepass")
    expected = _reference_identical(line, stored_digest)
    event(f"same={same}, identical={expected}")
    if _integral_floats_as_integers(raw) != raw:
        event(f"integral floats respelled from the bytes, identical={expected}")
    taken = take_line(Line("r.jsonl", 1, raw), _named_ids(raw), {"t-1": stored_digest})
    assert (taken is None) == expected, line
    if taken is not None:
        try:
            parsed: Any = parse_line(Line("r.jsonl", 1, raw))
        except InputError as exc:
            parsed = exc
        if isinstance(parsed, InputError):
            assert isinstance(taken, InputError)
            assert (taken.line, taken.field, taken.message) == (
                parsed.line,
                parsed.field,
                parsed.message,
            )
        else:
            assert not isinstance(taken, InputError)
            assert rfc8785.dumps(taken[0]) == rfc8785.dumps(parsed[0])


@settings(max_examples=500, deadline=None)
@given(
    value=line_values,
    dotted=st.booleans(),
    floats=st.booleans(),
    compact=st.booleans(),
    ascii_only=st.booleans(),
)
def test_respelling_integral_floats_from_the_bytes_keeps_the_value(
    value: Any, dotted: bool, floats: bool, compact: bool, ascii_only: bool
) -> None:
    """Dropping `.0` from a line's bytes never changes what the line means: the respelled
    text parses to an equal value (Python's ==: 1.0 == 1, strings exactly), whatever the
    strings hold (`,1.0,` in a string stays); a line written by json.dumps with sorted keys,
    compact, becomes its RFC 8785 form when its only other spelling is integral floats."""
    value = {"v": value}  # a record is an object
    if dotted:
        value = _dotted_strings(value)
    written = _with_float_ints(value) if floats else value
    separators = (",", ":") if compact else (", ", ": ")
    line = json.dumps(written, sort_keys=True, ensure_ascii=ascii_only, separators=separators)
    raw = line.encode("utf-8", "surrogatepass")
    respelled = _integral_floats_as_integers(raw)
    event(f"respelled={respelled != raw}")
    assert json.loads(respelled) == json.loads(raw)
    try:
        canonical = rfc8785.dumps(value)
    except Exception:
        return
    plain = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    if compact and canonical == plain.encode("utf-8") and "\\" not in line:
        event("canonical but for integral floats")
        assert respelled == canonical


@pytest.mark.parametrize(
    ("stored_record", "line", "identical"),
    [
        ({"x": 1, "s": "a"}, '{"s":"a","trial_id":"t-1","x":1.0}', True),
        ({"x": [1, -2, 0]}, '{"trial_id":"t-1","x":[1.0,-2.0,0.0]}', True),
        ({"x": {"y": 3}}, '{"trial_id":"t-1","x":{"y":3.00}}', True),
        ({"x": 0}, '{"trial_id":"t-1","x":-0.0}', True),
        ({"x": 1e20}, '{"trial_id":"t-1","x":100000000000000000000.0}', True),
        ({"s": ",1,"}, '{"s":",1.0,","trial_id":"t-1"}', False),
        ({"s": "[1]"}, '{"s":"[1.0]","trial_id":"t-1"}', False),
        ({"s": 'a",1,'}, '{"s":"a\\",1.0,","trial_id":"t-1"}', False),
        ({"x": 1}, '{"trial_id":"t-1","x":01.0}', False),
        ({"x": 1.5}, '{"trial_id":"t-1","x":1.5.0}', False),
        ({"x": 1}, '{"trial_id":"t-1","x":1.0,"x":1.0}', False),
        ({"x": 1}, '{"trial_id":"t-1","x":1.0 }', True),
    ],
)
def test_a_line_is_taken_as_stored_only_when_it_is_that_record(
    stored_record: dict[str, Any], line: str, identical: bool
) -> None:
    """Lines that differ from the stored record only in how numbers are spelled are that
    record; `1.0` inside a string, an invalid number, a duplicate key are not (RFC 8785:
    one value, one form; docs/formats.md: a line that is not valid JSON is refused)."""
    import hashlib

    stored_digest = (
        "sha256:" + hashlib.sha256(rfc8785.dumps({**stored_record, "trial_id": "t-1"})).hexdigest()
    )
    assert _reference_identical(line, stored_digest) is identical  # the expectation holds
    raw = line.encode("utf-8")
    taken = take_line(Line("r.jsonl", 1, raw), _named_ids(raw), {"t-1": stored_digest})
    assert (taken is None) is identical


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.none()
        | st.text(max_size=6)
        | st.integers(-SAFE, SAFE)
        | st.floats(allow_nan=False, allow_infinity=False).filter(
            lambda f: abs(f) <= SAFE or not f.is_integer()
        )
        | st.datetimes(
            min_value=datetime(1970, 1, 2), max_value=datetime(9998, 1, 1), timezones=st.just(UTC)
        ),
        min_size=1,
        max_size=6,
    )
)
def test_row_lines_equal_the_reference(cells: list[Any]) -> None:
    from evalops.domain.vocabulary import format_timestamp

    if any(isinstance(c, str) and any(0xD800 <= ord(ch) <= 0xDFFF for ch in c) for c in cells):
        return
    shown = [format_timestamp(c) if isinstance(c, datetime) else c for c in cells]
    if any(isinstance(c, float) and not math.isfinite(c) for c in shown):
        return
    kinds = [TIMESTAMP if isinstance(c, datetime) else PLAIN for c in cells]
    line = line_of([cell(k, c) for k, c in zip(kinds, cells, strict=True)])
    assert line == rfc8785.dumps(shown) + b"\n"
    # Read back raw from SQLite, a timestamp is its stored text: the same line.
    raw = [c.strftime("%Y-%m-%d %H:%M:%S.%f") if isinstance(c, datetime) else c for c in cells]
    assert line_of([cell(k, c) for k, c in zip(kinds, raw, strict=True)]) == line


@settings(max_examples=500, deadline=None)
@given(
    st.lists(
        st.none()
        | st.booleans()
        | st.integers(-2 * SAFE, 2 * SAFE)
        | st.text(st.characters(), max_size=40)  # surrogates, controls, quotes, astral
        | st.sampled_from(['{"act":"waiver.grant","reason":"a \\"quoted\\" one"}\n', "\u2028"])
        | st.floats(-1e15, 1e15)
        | st.sampled_from([2.0**53, 1e16, math.nan, math.inf, -0.0, 1e-7]),
        max_size=12,
    )
)
def test_row_lines_of_any_cells_equal_the_reference(cells: list[Any]) -> None:
    """Every cell the drivers return for a plain column, as a list or as the driver's own
    tuple (a table of plain columns hashes the row as it comes): the line the encoder path
    wrote before strings and ints were written directly (`_line_of_any`: what every stored
    digest was computed with), which is the reference's line, or an error where the
    reference has one. An integral float beyond 2^53 is the one cell where that path and
    the reference differ (it writes 2^53 as `9007199254740992.0`): both paths alike."""
    try:
        before = _line_of_any(cells)
    except Exception as exc:
        event("refused")
        with pytest.raises(type(exc)):
            line_of(cells)
        with pytest.raises(Exception):  # noqa: B017 - the reference's own error, any kind
            rfc8785.dumps(cells)
        return
    assert line_of(cells) == line_of(tuple(cells)) == before
    if any(isinstance(c, float) and c.is_integer() and abs(c) > SAFE for c in cells):
        event("an integral float beyond 2^53")
        return
    event(f"compared: {sorted({type(c).__name__ for c in cells})}")
    assert before == rfc8785.dumps(cells) + b"\n"


# ------------------------------------------------- the gate re-derives only what changed


NOW = datetime(2030, 1, 1, tzinfo=UTC)  # after every event of the demo


def _inputs(demo: Path, *, everything: bool) -> dict[str, Any]:
    from evalops.services.gate.inputs import build_inputs, request_for
    from evalops.services.registry.definitions import StaleClassifications
    from evalops.store.engine import make_engine, read_session

    engine = make_engine(f"sqlite:///{demo / '.evalops' / 'registry.db'}")
    saved = StaleClassifications.needed
    if everything:
        StaleClassifications.needed = lambda self, *a: True  # type: ignore[method-assign]
    try:
        with read_session(engine) as session:
            out = {}
            for build in ("build-123", "build-124", "build-125"):
                request = request_for(
                    session, build=build, suite_id="regression/core", at=None, now=NOW
                )
                out[build] = build_inputs(session, request)
            return out
    finally:
        StaleClassifications.needed = saved  # type: ignore[method-assign]
        engine.dispose()


def test_gate_inputs_equal_a_full_rederivation(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, cli: Cli
) -> None:
    demo = tmp_path / "demo"
    shutil.copytree(real_clock_demo(tmp_path_factory), demo, symlinks=True)
    assert _inputs(demo, everything=False) == _inputs(demo, everything=True)
    # Change the evidence behind stored classifications: a review of a queued pair, an
    # invalidated calibration (the pinned judge's state changes for every support trial).
    queue = json.loads(cli("review", "list", "--json", cwd=demo).stdout)
    for item in queue[:1]:
        assert cli("review", "resolve", item["trial_id"], "--grader", item["grader_id"],
                   "--state", "task_fail", "--reason", "r", cwd=demo).code == 0  # fmt: skip
    fast = _inputs(demo, everything=False)
    assert fast == _inputs(demo, everything=True)
    assert (
        cli("calibration", "invalidate", "reply-quality", "--reason", "drift", cwd=demo).code == 0
    )
    after = _inputs(demo, everything=False)
    assert after == _inputs(demo, everything=True)
    assert after != fast  # the invalidation did change classifications
    shutil.rmtree(demo)


@pytest.mark.parametrize("with_null_run", [False, True])
def test_the_originals_lookup_searches_the_run_case_index(
    synced: Path, with_null_run: bool
) -> None:
    """Ingest looks up stored originals once per batch; a plan that scans the trial table
    makes ingest quadratic (it did: SQLite chose ix_trial_parent_trial_id, which every
    original matches). The plan must search ix_trial_run_case_index, on every branch."""
    import sqlite3

    from sqlalchemy.dialects import sqlite as sqlite_dialect

    from evalops.services.ingest.records import _ORIGINALS, _ORIGINALS_OR_NO_RUN

    statement = (_ORIGINALS_OR_NO_RUN if with_null_run else _ORIGINALS).params(
        runs=["run-1", "run-2"], cases=["sha256:a", "sha256:b"], indexes=[0, 1]
    )
    sql = str(
        statement.compile(
            dialect=sqlite_dialect.dialect(),
            compile_kwargs={"literal_binds": True, "render_postcompile": True},
        )
    )
    con = sqlite3.connect(synced / ".evalops" / "registry.db")
    try:
        plan = " ".join(str(row[-1]) for row in con.execute(f"EXPLAIN QUERY PLAN {sql}"))
    finally:
        con.close()
    assert "ix_trial_run_case_index" in plan, plan
    assert "SCAN" not in plan and "ix_trial_parent_trial_id" not in plan, plan


# --------------------------------------------- the review queue reads only what can queue


def _brute_force_queue(engine: Any) -> list[tuple[str, str, str]]:
    """Every trial re-derived, the queue taken from each classification (no pre-filter)."""
    from sqlmodel import select

    from evalops.services.registry.definitions import Definitions, rederive
    from evalops.store.engine import read_session
    from evalops.store.tables import Trial

    out = []
    with read_session(engine) as session:
        defs = Definitions(session)
        for trial in session.exec(select(Trial).order_by(Trial.id)):  # type: ignore[arg-type]
            current = rederive(defs, trial)
            for grader_id, why in current.review if current else ():
                out.append((trial.trial_id, grader_id, why))
    return out


def _ingest_abstained(demo: Path, cli: Cli, prefix: str = "abstained") -> None:
    """Two trials the calibrated judge abstains on: they wait for a person."""
    template = next(
        json.loads(line)
        for line in (demo / "registry" / "trials" / "fix-b125.jsonl").read_text().splitlines()
        if '"reply-quality"' in line
    )
    records = []
    for n in range(2):
        record = {k: v for k, v in template.items() if k not in ("primary_classification", "rerun")}
        record.update(trial_id=f"{prefix}-{n}", run_id=f"run-{prefix}", trial_index=n)
        record["grader_results"] = [
            {**g, "state": "abstain"} if g["grader_id"] == "reply-quality" else g
            for g in template["grader_results"]
        ]
        records.append(json.dumps(record))
    (demo / f"{prefix}.jsonl").write_text("\n".join(records) + "\n", encoding="utf-8")
    ingested = cli("trials", "ingest", f"{prefix}.jsonl", cwd=demo)
    assert ingested.code == 0, ingested.stderr


def test_the_review_queue_equals_a_rederivation_of_every_trial(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, cli: Cli
) -> None:
    """`review list` skips trials whose grader set has no blocking model or human grader;
    the queue must be the one a re-derivation of every trial gives, before and after a
    review and a calibration change."""
    from evalops.services.evidence.review import review_queue
    from evalops.store.engine import make_engine

    demo = tmp_path / "demo"
    shutil.copytree(real_clock_demo(tmp_path_factory), demo, symlinks=True)
    engine = make_engine(f"sqlite:///{demo / '.evalops' / 'registry.db'}")
    try:

        def queue() -> list[tuple[str, str, str]]:
            return [(r["trial_id"], r["grader_id"], r["why"]) for r in review_queue(engine)]

        _ingest_abstained(demo, cli)
        first = queue()
        assert [t for t, _, _ in first][-2:] == ["abstained-0", "abstained-1"], first
        assert first == _brute_force_queue(engine)
        trial_id, grader_id, _ = first[0]
        assert cli("review", "resolve", trial_id, "--grader", grader_id, "--state",
                   "task_fail", "--reason", "r", cwd=demo).code == 0  # fmt: skip
        second = queue()
        assert second == _brute_force_queue(engine) and len(second) == len(first) - 1
        assert cli("calibration", "invalidate", "reply-quality", "--reason", "drift",
                   cwd=demo).code == 0  # fmt: skip
        assert queue() == _brute_force_queue(engine) == []
        # Abstentions ingested while the judge is invalid are not labelled awaiting review;
        # a new calibration makes them queue: the stored labels are stale, not the queue.
        _ingest_abstained(demo, cli, prefix="while-invalid")
        assert queue() == []
        assert cli("calibration", "record", "reply-quality", "--labels",
                   "registry/calibration/reply-quality.jsonl", cwd=demo).code == 0  # fmt: skip
        third = queue()
        assert third == _brute_force_queue(engine)
        assert {"while-invalid-0", "while-invalid-1"} <= {t for t, _, _ in third}, third
    finally:
        engine.dispose()


def _brute_force_entry_counts(
    engine: Any,
) -> dict[str, tuple[dict[str, int], dict[str, int]]]:
    """Per task in force: valid trials per execution and uncounted ones by class, from a
    re-derivation of every trial (what promotion counted before it read stored classes),
    a rerun counted only where the gate lets it stand in (docs/classification.md)."""
    from sqlmodel import Session, select

    from evalops.domain.gate_rules import INVALID_RUNS
    from evalops.domain.reruns import TrialNode, resolve_reruns
    from evalops.errors import InputError
    from evalops.services.gate.policies import gate_policies_of_task, max_attempts
    from evalops.services.registry.definitions import Definitions, rederive
    from evalops.services.registry.promotion import uncounted_key
    from evalops.store import queries
    from evalops.store.tables import TaskRevision, Trial

    out = {}
    with Session(engine) as session:
        defs = Definitions(session)
        for task_id in sorted(set(session.exec(select(TaskRevision.task_id)).all())):
            task = queries.task_row(session, task_id)
            assert task is not None
            gs_row = queries.grader_set_row(session, queries.task_spec(task).grader_set)
            assert gs_row is not None
            counts: dict[str, int] = {}
            uncounted: dict[str, int] = {}
            trials = list(
                session.exec(
                    select(Trial).where(
                        Trial.task_id == task.task_id,
                        Trial.task_digest == task.task_digest,
                        Trial.grader_set_digest == gs_row.grader_set_digest,
                    )
                )
            )
            classes = {}
            for trial in trials:
                current = rederive(defs, trial)
                classes[trial.trial_id] = (current.primary if current else trial.classification,
                                           current)  # fmt: skip
            # The reruns the gate would not let stand in, under every policy judging the
            # task (none: no rerun stands in), per eval case.
            try:
                governing = gate_policies_of_task(session, task_id)
            except InputError:
                governing = []
            limits = [max_attempts(p) for p in governing] or [{}]
            refused: set[str] = set()
            for execution in {t.execution_digest for t in trials}:
                chain = [TrialNode(t.trial_id, t.parent_trial_id, classes[t.trial_id][0])
                         for t in trials if t.execution_digest == execution]  # fmt: skip
                for lim in limits:
                    refused |= resolve_reruns(chain, lim).not_permitted
            for trial in trials:
                cls, current = classes[trial.trial_id]
                if cls in INVALID_RUNS:
                    key: str | None = uncounted_key(cls, current)
                elif trial.trial_id in refused:
                    key = "rerun_not_permitted (a rerun the gate's rerun rules do not let stand in)"
                else:
                    key = None
                if key is None:
                    counts[trial.execution_digest] = counts.get(trial.execution_digest, 0) + 1
                else:
                    uncounted[key] = uncounted.get(key, 0) + 1
            out[task_id] = (counts, uncounted)
    return out


def _entry_counts(engine: Any) -> dict[str, tuple[dict[str, int], dict[str, int]]]:
    from sqlmodel import Session, select

    from evalops.services.registry.promotion import entry_facts
    from evalops.store import queries
    from evalops.store.tables import TaskRevision

    out = {}
    with Session(engine) as session:
        for task_id in sorted(set(session.exec(select(TaskRevision.task_id)).all())):
            task = queries.task_row(session, task_id)
            assert task is not None
            facts = entry_facts(session, task)
            out[task_id] = (facts.valid_trials_by_execution, facts.uncounted_trials)
    return out


def test_promotion_counts_equal_a_rederivation_of_every_trial(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, cli: Cli
) -> None:
    """Promotion's entry facts re-derive only trials whose evidence changed since ingest
    (and invalid ones, for their cause); the counts must be those a re-derivation of every
    trial gives, before and after a review, a reconciliation and a calibration change."""
    from evalops.store.engine import make_engine

    demo = tmp_path / "demo"
    shutil.copytree(real_clock_demo(tmp_path_factory), demo, symlinks=True)
    engine = make_engine(f"sqlite:///{demo / '.evalops' / 'registry.db'}")
    try:
        first = _entry_counts(engine)
        assert first == _brute_force_entry_counts(engine)
        assert any(uncounted for _, uncounted in first.values()), first
        _ingest_abstained(demo, cli)
        assert _entry_counts(engine) == _brute_force_entry_counts(engine)
        queued = cli("review", "list", "--json", cwd=demo)
        assert queued.code == 0, queued.stderr
        item = json.loads(queued.stdout)[0]
        assert cli("review", "resolve", item["trial_id"], "--grader", item["grader_id"],
                   "--state", "task_fail", "--reason", "r", cwd=demo).code == 0  # fmt: skip
        assert _entry_counts(engine) == _brute_force_entry_counts(engine)
        assert cli("calibration", "invalidate", "reply-quality", "--reason", "drift",
                   cwd=demo).code == 0  # fmt: skip
        after = _entry_counts(engine)
        assert after == _brute_force_entry_counts(engine)
        assert after != first
    finally:
        engine.dispose()


@pytest.mark.parametrize(
    "number", ["9007199254740992.0", "9007199254740994.0", "1e15", "-9.007199254740992e15"]
)
def test_an_integral_float_beyond_2_53_takes_the_reference_path(number: str) -> None:
    """Found by the property test above: the C encoder writes 2^53 as a float with `.0`."""
    raw = '{"x": ' + number + "}"
    try:
        parsed = parse_record(raw, "r.jsonl")
    except InputError:
        return  # refused by the strict parser: nothing to canonicalize
    record = parsed.document.value
    assert _canonical_forms(record, parsed.encoder_safe)[0] == rfc8785.dumps(record)


# ------------------------------------------- a listing counts its voided trials by their rows


@pytest.mark.parametrize(
    "filters",
    [{}, {"task": "support-refund-in-order"}, {"build": "build-124"}, {"suite": "regression/core"}],
)
def test_the_voided_count_reads_the_voided_rows_never_every_trial(
    demo: Path, filters: dict[str, str]
) -> None:
    """`trials list` says how many matching trials a void left out. Asking every matching
    trial whether it is voided grew with the table (0.1 s of a 0.2 s listing at 1,000,000
    trials, P5): the count must be driven by the voided rows, whatever the filters."""
    import sqlite3

    from evalops.services.reads.trials import TrialFilter, voided_count
    from evalops.store.reader import open_sqlite

    database = demo / ".evalops" / "registry.db"
    reader = open_sqlite(f"sqlite:///{database}", lock_timeout=5.0)
    assert reader is not None
    asked: list[tuple[str, dict[str, Any]]] = []
    scalar = reader.scalar

    def recorded(sql: str, params: dict[str, Any] | None = None) -> Any:
        asked.append((sql, dict(params or {})))
        return scalar(sql, params)

    reader.scalar = recorded  # type: ignore[method-assign]
    assert voided_count(reader, TrialFilter(**filters)) == 0
    counts = [(sql, params) for sql, params in asked if "count(" in sql.lower()]
    assert len(counts) == 1, asked
    sql, params = counts[0]
    con = sqlite3.connect(database)
    try:
        plan = [str(row[-1]) for row in con.execute(f"EXPLAIN QUERY PLAN {sql}", params)]
    finally:
        con.close()
    assert not any(step.startswith("SCAN trial") for step in plan), plan
    assert any("voided_trial" in step for step in plan), plan
