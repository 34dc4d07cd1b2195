"""Inspect imports, part 2: one trial per execution, every stop mapped, incomplete runs.

The logs are real (tests/importer_tasks/generate.py, Inspect's mock model): an `eval-retry`
pair whose second log copies the completed sample A-1 (same uuid), the failed first run
(status `error`, A-3 cancelled by the harness when A-2 crashed), a copy of it with status
`cancelled`, a log converted by Inspect from `.eval` to `.json`, an edited log and one with a
`turn` limit. What must happen is read from docs/importers.md, not from evalops' output.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import rfc8785

from tests.conftest import Cli
from tests.import_support import (
    INSPECT_BUILD,
    SAMPLE_TASKS,
    copy_workspace,
    counts,
    import_base,
    inspect_logs,
    inspect_map_text,
    sql,
    trials_of,
)
from tests.importer_tasks.refund_task import EPOCHS, PLAN, RETRIES

MAP = "maps/inspect.yaml"
RETRY_MAP = "retry.yaml"


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return inspect_logs(tmp_path_factory)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return import_base(tmp_path_factory)


@pytest.fixture
def ws(base: Path, tmp_path: Path) -> Path:
    out = copy_workspace(base, tmp_path / "ws")
    # The eval-retry pair ran the one-epoch variant of the refund task.
    text = inspect_map_text().replace("  refund_agent:", "  refund_agent_once:", 1)
    (out / RETRY_MAP).write_text(text, encoding="utf-8")
    return out


def run_import(cli: Cli, ws: Path, *args: str) -> Any:
    result = cli("trials", "import", "inspect", *args, "--json", cwd=ws)
    assert result.code == 0, result.stdout + result.stderr
    return result.json()


def refused(cli: Cli, ws: Path, *args: str) -> dict[str, Any]:
    """Exit 2 and nothing stored; the whole error document."""
    before = counts(ws)
    result = cli("trials", "import", "inspect", *args, "--json", cwd=ws)
    assert result.code == 2, result.stdout + result.stderr
    assert counts(ws) == before
    document: dict[str, Any] = result.json()
    return document


def write_map(ws: Path, text: str) -> str:
    (ws / "bad.yaml").write_text(text, encoding="utf-8")
    return "bad.yaml"


def trials_per_task(ws: Path) -> Counter[str]:
    return Counter(t["task_id"] for t in trials_of(ws, INSPECT_BUILD))


# ----------------------------------------------------------------------- eval-retry


def test_a_sample_eval_retry_copied_is_one_trial(logs: dict[str, Path], ws: Path, cli: Cli) -> None:
    from inspect_ai.log import read_eval_log

    first = read_eval_log(str(logs["retry-first"]))
    second = read_eval_log(str(logs["retry-second"]))
    # The premise, from Inspect itself: the retry log copied A-1, uuid and all.
    uuids = [{str(s.id): s.uuid for s in log.samples or []} for log in (first, second)]
    assert uuids[0]["A-1"] == uuids[1]["A-1"] and first.eval.eval_id != second.eval.eval_id

    # A-2 crashed in the first run; eval_retry ran it again and kept the crash, events and
    # all, as the new sample's error_retries: two executions, two trials, in either log.
    assert [len(s.error_retries or []) for s in second.samples or [] if s.id == "A-2"] == [1]
    data = run_import(cli, ws, str(logs["retry-second"]), "--map", RETRY_MAP)
    assert data["ingested"] == 4
    again = run_import(cli, ws, str(logs["retry-first"]), "--map", RETRY_MAP, "--allow-incomplete")
    # A-1 and A-2's crash: the same executions, counted once. A-3 was cancelled by the
    # harness: skipped and counted, never charged to the build.
    assert (again["ingested"], again["skipped_identical"]) == (0, 2)
    assert again["skipped"] == {"cancelled_by_harness": 1}
    assert trials_per_task(ws) == {
        SAMPLE_TASKS["A-1"]: 1,
        SAMPLE_TASKS["A-2"]: 2,
        SAMPLE_TASKS["A-3"]: 1,
    }
    a1 = next(t for t in trials_of(ws, INSPECT_BUILD) if t["task_id"] == SAMPLE_TASKS["A-1"])
    assert (
        a1["trial_id"]
        == "insp-" + hashlib.sha256(rfc8785.dumps([uuids[0]["A-1"], 1])).hexdigest()[:16]
    )
    a2 = {
        t["parent"]: t for t in trials_of(ws, INSPECT_BUILD) if t["task_id"] == SAMPLE_TASKS["A-2"]
    }
    crash, rerun = a2[None], a2.get(a2[None]["trial_id"])
    assert crash["class"] == "runtime_error" and rerun is not None
    assert cli("verify", cwd=ws).code == 0


def test_both_retry_logs_in_one_invocation_count_the_copy_once(
    logs: dict[str, Path], ws: Path, cli: Cli
) -> None:
    data = run_import(
        cli,
        ws,
        str(logs["retry-first"]),
        str(logs["retry-second"]),
        "--map",
        RETRY_MAP,
        "--allow-incomplete",
    )
    assert (data["ingested"], data["skipped_identical"]) == (4, 2)
    assert trials_per_task(ws) == {
        SAMPLE_TASKS["A-1"]: 1,
        SAMPLE_TASKS["A-2"]: 2,
        SAMPLE_TASKS["A-3"]: 1,
    }


# ------------------------------------------------------------------ incomplete runs


@pytest.mark.parametrize(("log", "status"), [("retry-first", "error"), ("cancelled", "cancelled")])
def test_an_incomplete_eval_is_refused_unless_allowed(
    log: str, status: str, logs: dict[str, Path], ws: Path, cli: Cli
) -> None:
    error = refused(cli, ws, str(logs[log]), "--map", RETRY_MAP)["error"]
    assert (error["file"], error["field"]) == (str(logs[log]), "status")
    assert repr(status) in error["message"] and "--allow-incomplete" in error["message"]
    # The dry run refuses it too: it runs every check the import runs.
    assert refused(cli, ws, str(logs[log]), "--map", RETRY_MAP, "--dry-run")["error"] == error
    data = run_import(cli, ws, str(logs[log]), "--map", RETRY_MAP, "--allow-incomplete")
    assert (data["ingested"], data["skipped"]) == (2, {"cancelled_by_harness": 1})
    classes = {t["task_id"]: t["class"] for t in trials_of(ws, INSPECT_BUILD)}
    # Never charged to the build: the cancelled sample has no trial at all.
    assert SAMPLE_TASKS["A-3"] not in classes
    assert classes[SAMPLE_TASKS["A-2"]] == "runtime_error"


# --------------------------------------------------------- identity of the execution


def test_a_converted_or_renamed_log_reimports_as_a_counted_noop(
    logs: dict[str, Path], ws: Path, cli: Cli
) -> None:
    first = run_import(cli, ws, str(logs["eval"]), "--map", MAP)
    before = counts(ws)
    renamed = ws / "elsewhere" / "renamed.eval"
    renamed.parent.mkdir()
    renamed.write_bytes(logs["eval"].read_bytes())
    for copy in (logs["converted"], renamed):  # `inspect log convert`, then a moved copy
        again = run_import(cli, ws, str(copy), "--map", MAP)
        assert (again["ingested"], again["skipped_identical"]) == (0, first["ingested"])
        assert counts(ws) == before
    assert cli("verify", cwd=ws).code == 0


def test_an_edited_log_is_refused_naming_each_trial_and_what_differs(
    logs: dict[str, Path], ws: Path, cli: Cli
) -> None:
    run_import(cli, ws, str(logs["json"]), "--map", MAP)
    document = refused(cli, ws, str(logs["edited"]), "--map", MAP)
    # The generator's edits: A-3 epoch 1's score, A-2 epochs 3 and 4 stopped by limits
    # (A-1 epoch 5 is invalidated: skipped, not compared).
    rejected = {r["field"].split(": ")[0]: r["error"] for r in document["rejected"]}
    assert sorted(rejected) == ["A-2/3", "A-2/4", "A-3/1"]
    assert "grader_results" in rejected["A-3/1"] and "runtime" in rejected["A-2/3"]
    for message in rejected.values():
        assert message.startswith("trial insp-") and "imported before" in message
    assert "--max-bad-records" not in json.dumps(document)  # import has no such option


def test_the_same_log_through_another_map_is_refused(
    logs: dict[str, Path], ws: Path, cli: Cli
) -> None:
    run_import(cli, ws, str(logs["eval"]), "--map", MAP)
    other = write_map(
        ws,
        inspect_map_text().replace(
            "ticket_check: {grader_id: ticket-outcome, grader_version: 1, values: {C: task_pass, "
            "I: task_fail}}",
            "ticket_check: {grader_id: ticket-outcome, grader_version: 1, values: {C: task_fail, "
            "I: task_pass}}",
        ),
    )
    document = refused(cli, ws, str(logs["eval"]), "--map", other)
    assert document["rejected"] and all(
        "grader_results" in r["error"] for r in document["rejected"]
    )


def legacy_records(path: Path, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records as evalops 0.x wrote them: trial ids from [eval_id, sample id, epoch,
    attempt], provenance naming the file (its sha256 and name)."""
    with zipfile.ZipFile(path) as archive:
        eval_id = json.loads(archive.read("header.json"))["eval"]["eval_id"]
    digest = "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()

    def old_id(attempt_id: str) -> str:
        _, sample, epoch, attempt = attempt_id.split("/")
        ids = rfc8785.dumps([eval_id, sample, int(epoch), int(attempt)])
        return "insp-" + hashlib.sha256(ids).hexdigest()[:16]

    new_to_old = {r["trial_id"]: old_id(r["attempt_id"]) for r in records}
    out = []
    for record in records:
        old = json.loads(json.dumps(record))
        old["trial_id"] = new_to_old[record["trial_id"]]
        if "rerun" in old:
            old["rerun"]["parent_trial_id"] = new_to_old[old["rerun"]["parent_trial_id"]]
        source = old["artifact_manifest"]["artifacts"][-1]
        sample_epoch = source["location"].split("#", 1)[1]
        source.update(digest=digest, location=f"{path.name}#{sample_epoch}")
        out.append(old)
    return out


def test_a_log_imported_by_an_earlier_evalops_is_not_counted_twice(
    logs: dict[str, Path], ws: Path, cli: Cli
) -> None:
    out = ws / "new.jsonl"
    run_import(cli, ws, str(logs["eval"]), "--map", MAP, "-o", str(out))
    records = [json.loads(line) for line in out.read_text().splitlines()]
    old = ws / "old.jsonl"
    old.write_text("".join(json.dumps(r) + "\n" for r in legacy_records(logs["eval"], records)))
    assert cli("trials", "ingest", str(old), cwd=ws).code == 0
    before = counts(ws)
    again = run_import(cli, ws, str(logs["eval"]), "--map", MAP)
    assert (again["ingested"], again["skipped_identical"]) == (0, len(records))
    assert counts(ws) == before
    assert sql(ws, "select count(*) from trial where trial_id like 'insp-%'")[0][0] == len(records)


# -------------------------------------------------------------------- every stop


def test_a_limit_the_map_does_not_list_is_refused_naming_sample_and_limit(
    logs: dict[str, Path], ws: Path, cli: Cli
) -> None:
    bad = write_map(ws, inspect_map_text().replace("    turn: agent_error\n", ""))
    document = refused(cli, ws, str(logs["turn"]), "--map", bad)
    error = document["error"]
    assert (error["file"], error["field"]) == (str(logs["turn"]), "A-1/2: limit.type")
    assert "turn" in error["message"]
    assert refused(cli, ws, str(logs["turn"]), "--map", bad, "--dry-run")["error"] == error
    run_import(cli, ws, str(logs["turn"]), "--map", MAP)  # the example map lists every limit
    stopped = [
        t
        for t in trials_of(ws, INSPECT_BUILD)
        if t["task_id"] == SAMPLE_TASKS["A-1"] and t["trial_index"] == 1
    ]
    assert [(t["class"], t["record"]["runtime"]["status"]) for t in stopped] == [
        ("agent_error", "agent_error")
    ]


def test_the_example_map_lists_every_limit_inspect_reports() -> None:
    import typing

    from inspect_ai.log import EvalSampleLimit

    from evalops.registry.import_maps import load_import_map
    from tests.helpers import EXAMPLE_REGISTRY

    reported = set(typing.get_args(EvalSampleLimit.model_fields["type"].annotation))
    loaded = load_import_map(EXAMPLE_REGISTRY / "imports" / "inspect-support.yaml")
    assert set(loaded.spec.runtime.limits) == reported


# ---------------------------------------------------------------------- bad input


def corrupt_member(source: Path, target: Path, member: str) -> None:
    data = bytearray(source.read_bytes())
    with zipfile.ZipFile(source) as archive:
        info = archive.getinfo(member)
    name_len = int.from_bytes(data[info.header_offset + 26 : info.header_offset + 28], "little")
    extra_len = int.from_bytes(data[info.header_offset + 28 : info.header_offset + 30], "little")
    start = info.header_offset + 30 + name_len + extra_len
    for i in range(start + 4, start + min(info.compress_size, 64)):
        data[i] ^= 0x5A
    target.write_bytes(bytes(data))


def test_a_corrupt_sample_inside_an_eval_is_exit_2_naming_it(
    logs: dict[str, Path], ws: Path, cli: Cli
) -> None:
    import inspect_ai.log  # noqa: F401  (teaches zipfile Inspect's zstd)

    bad = ws / "corrupt.eval"
    corrupt_member(logs["eval"], bad, "samples/A-2_epoch_3.json")
    error = refused(cli, ws, str(bad), "--map", MAP)["error"]
    assert error["file"] == str(bad)
    assert error["field"] == "samples/A-2_epoch_3.json"


def test_a_json_log_naming_samples_twice_is_refused(
    logs: dict[str, Path], ws: Path, cli: Cli
) -> None:
    text = logs["json"].read_text(encoding="utf-8").rstrip()
    assert text.endswith("}")
    twice = ws / "twice.json"
    # Inspect's reader (the standard library's) would show the last, empty, array.
    twice.write_text(text[:-1] + ', "samples": []}', encoding="utf-8")
    error = refused(cli, ws, str(twice), "--map", MAP)["error"]
    assert error["file"] == str(twice) and "duplicate key 'samples'" in error["message"]


def last_complete_sample(text: str) -> str | None:
    """Decode the samples array of a cut log element by element (the standard library)."""
    decoder = json.JSONDecoder()
    pos = text.index('\n  "samples": [')  # the top-level member (two-space indent)
    pos = text.index("[", pos) + 1
    last = None
    while True:
        while pos < len(text) and text[pos] in " \n\r\t,":
            pos += 1
        try:
            sample, pos = decoder.raw_decode(text, pos)
        except ValueError:
            return last
        last = f"{sample['id']}/{sample['epoch']}"


@pytest.mark.parametrize("fraction", [0.5, 0.95])
def test_a_truncated_json_log_names_the_last_complete_sample(
    fraction: float, logs: dict[str, Path], ws: Path, cli: Cli
) -> None:
    data = logs["json"].read_bytes()
    cut = ws / "cut.json"
    cut.write_bytes(data[: int(len(data) * fraction)])
    last = last_complete_sample(cut.read_text(encoding="utf-8", errors="ignore"))
    assert last is not None
    error = refused(cli, ws, str(cut), "--map", MAP)["error"]
    assert f"after sample {last}, the last complete one" in error["message"]


# ------------------------------------------------------------- non-blocking graders


def test_a_non_blocking_scorers_unmapped_value_only_adds_a_label(
    logs: dict[str, Path], ws: Path, cli: Cli
) -> None:
    from tests.helpers import commit_all

    graders = ws / "registry" / "graders" / "support-graders.yaml"
    text = graders.read_text(encoding="utf-8")
    needle = "    blocking: true                   # blocks only while its calibration is valid"
    assert needle in text
    graders.write_text(
        text.replace(needle, "    blocking: false                  # a diagnostic only").replace(
            "version: 2\nmeta:", "version: 3\nmeta:", 1
        ),
        encoding="utf-8",
    )
    commit_all(ws, "reply-quality is a diagnostic")
    assert cli("sync", cwd=ws).code == 0
    run_import(cli, ws, str(logs["eval"]), "--map", MAP)
    tone = {
        t["trial_index"] + 1: t
        for t in trials_of(ws, INSPECT_BUILD)
        if t["task_id"] == SAMPLE_TASKS["A-3"] and t["parent"] is None
    }
    # Epoch 1's judge said P (not in the map), epoch 5's nothing (NaN): a label each, and
    # the class is what the blocking graders say (every other scorer said C).
    for epoch in (1, 5):
        assert PLAN["A-3"][epoch]["scores"]["reply_judge"] in ("P", None)
        assert tone[epoch]["class"] == "task_pass", epoch
        assert "diagnostic:reply-quality:unmapped" in tone[epoch]["labels"]
        graders_seen = {r["grader_id"] for r in tone[epoch]["record"]["grader_results"]}
        assert "reply-quality" not in graders_seen
    assert len(tone) == EPOCHS and RETRIES >= 1


@pytest.mark.postgres
def test_one_trial_per_execution_on_postgresql(
    logs: dict[str, Path], pg_url: str, tmp_path: Path, cli: Cli
) -> None:
    from tests.helpers import commit_all, copy_example_registry, write_yaml

    ws = tmp_path / "pg"
    registry = copy_example_registry(ws / "registry")
    write_yaml(
        registry / "executions" / "inspect-mock.yaml",
        {
            "spec_schema_version": "execution-profile/v1",
            "id": "inspect-mock",
            "system_build": INSPECT_BUILD,
            "model": {"provider": "mockllm", "name": "model"},
        },
    )
    text = inspect_map_text().replace("  refund_agent:", "  refund_agent_once:", 1)
    (ws / "map.yaml").write_text(text, encoding="utf-8")
    commit_all(ws)
    for args in (("init",), ("sync",)):
        assert cli("--db", pg_url, *args, cwd=ws).code == 0

    def imported(*args: str) -> Any:
        done = cli("--db", pg_url, "trials", "import", "inspect", *args, "--json", cwd=ws)
        assert done.code == 0, done.stdout + done.stderr
        return done.json()

    first = imported(str(logs["retry-second"]), "--map", "map.yaml")
    assert first["ingested"] == 4
    again = imported(str(logs["retry-first"]), "--map", "map.yaml", "--allow-incomplete")
    assert (again["ingested"], again["skipped_identical"]) == (0, 2)
    assert again["skipped"] == {"cancelled_by_harness": 1}
    assert cli("--db", pg_url, "verify", cwd=ws).code == 0


def test_the_dry_run_of_both_retry_logs_previews_what_the_import_stores(
    logs: dict[str, Path], ws: Path, cli: Cli
) -> None:
    both = (str(logs["retry-first"]), str(logs["retry-second"]), "--map", RETRY_MAP)
    before = counts(ws)
    preview = run_import(cli, ws, *both, "--allow-incomplete", "--dry-run")
    previewed = {t["task_id"]: t["trials"] for t in preview["tasks"] if t["trials"]}
    assert counts(ws) == before  # a dry run stores nothing
    run_import(cli, ws, *both, "--allow-incomplete")
    assert previewed == dict(trials_per_task(ws))
    assert previewed == {SAMPLE_TASKS["A-1"]: 1, SAMPLE_TASKS["A-2"]: 2, SAMPLE_TASKS["A-3"]: 1}
