"""The way back from an imported trial to the run that produced it: `trials show` names the
source file, the place in it and the command that opens it, for real Inspect 0.3.285 logs
(tests/importer_tasks, Inspect's mock model) and promptfoo 0.121.20 results
(tests/fixtures/promptfoo). Expected values are read from the sources with Inspect's own
reader and the standard library, never from evalops' output.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Cli
from tests.import_support import (
    INSPECT_BUILD,
    PF_BUILDS,
    PROMPTFOO_FIXTURES,
    copy_workspace,
    counts,
    import_base,
    inspect_logs,
    inspect_map_text,
    trials_of,
)

INSPECT_MAP = "maps/inspect.yaml"
RETRY_MAP = "retry.yaml"
PROMPTFOO_MAP = "maps/promptfoo.yaml"
RESULTS = PROMPTFOO_FIXTURES / "results.json"


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return inspect_logs(tmp_path_factory)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return import_base(tmp_path_factory)


@pytest.fixture
def ws(base: Path, tmp_path: Path) -> Path:
    out = copy_workspace(base, tmp_path / "ws")
    text = inspect_map_text().replace("  refund_agent:", "  refund_agent_once:", 1)
    (out / RETRY_MAP).write_text(text, encoding="utf-8")
    return out


def imported(cli: Cli, ws: Path, source: str, *args: str) -> None:
    done = cli("trials", "import", source, *args, "--json", cwd=ws)
    assert done.code == 0, done.stdout + done.stderr


def shown(cli: Cli, ws: Path, trial_id: str) -> dict[str, Any]:
    done = cli("trials", "show", trial_id, "--json", cwd=ws)
    assert done.code == 0, done.stdout + done.stderr
    data: dict[str, Any] = done.json()
    return data


def samples_of(log: Path) -> set[tuple[str, int]]:
    """(sample id, epoch) of every sample the log holds, by Inspect's own reader."""
    from inspect_ai.log import read_eval_log

    found = read_eval_log(str(log))
    return {(str(s.id), int(s.epoch)) for s in found.samples or []}


def test_inspect_trials_name_their_log_sample_and_epoch(
    logs: dict[str, Path], ws: Path, cli: Cli
) -> None:
    from inspect_ai.log import list_eval_logs, read_eval_log

    log = logs["eval"]
    imported(cli, ws, "inspect", str(log), "--map", INSPECT_MAP)
    header = read_eval_log(str(log), header_only=True)
    in_log = samples_of(log)
    seen = set()
    for trial in trials_of(ws, INSPECT_BUILD):
        source = shown(cli, ws, trial["trial_id"])["source"]
        assert source["tool"] == "inspect"
        assert source["log_file"] == str(log)
        assert source["eval_id"] == header.eval.eval_id
        assert (source["sample_id"], source["epoch"]) in in_log
        seen.add((source["sample_id"], source["epoch"]))
        # The command printed opens the viewer on a directory that lists this very log.
        command = source["open_with"].split()
        assert command[:3] == ["inspect", "view", "--log-dir"]
        listed = {
            Path(i.name.removeprefix("file://")).resolve() for i in list_eval_logs(command[3])
        }
        assert log.resolve() in listed
    assert seen == in_log
    human = cli("trials", "show", trials_of(ws, INSPECT_BUILD)[0]["trial_id"], cwd=ws)
    assert f"source: Inspect log {log}" in human.stdout
    assert f"open with: inspect view --log-dir {log.parent}" in human.stdout


def test_two_logs_in_one_import_each_trial_names_its_own(
    logs: dict[str, Path], ws: Path, cli: Cli
) -> None:
    first, second = logs["retry-first"], logs["retry-second"]
    imported(cli, ws, "inspect", str(first), str(second), "--map", RETRY_MAP, "--allow-incomplete")
    files = {str(first): samples_of(first), str(second): samples_of(second)}
    named = set()
    for trial in trials_of(ws, INSPECT_BUILD):
        source = shown(cli, ws, trial["trial_id"])["source"]
        assert source["log_file"] in files, source
        assert (source["sample_id"], source["epoch"]) in files[source["log_file"]]
        named.add(source["log_file"])
    assert named == set(files), "each log gave trials of its own"


def test_a_renamed_log_is_still_a_noop_and_keeps_the_first_name(
    logs: dict[str, Path], ws: Path, cli: Cli
) -> None:
    imported(cli, ws, "inspect", str(logs["eval"]), "--map", INSPECT_MAP)
    before = counts(ws)
    renamed = ws / "moved" / "renamed.eval"
    renamed.parent.mkdir()
    renamed.write_bytes(logs["eval"].read_bytes())
    imported(cli, ws, "inspect", str(renamed), "--map", INSPECT_MAP)
    assert counts(ws) == before
    trial = trials_of(ws, INSPECT_BUILD)[0]["trial_id"]
    assert shown(cli, ws, trial)["source"]["log_file"] == str(logs["eval"])
    assert cli("verify", cwd=ws).code == 0


def test_promptfoo_trials_name_eval_file_test_prompt_and_provider(ws: Path, cli: Cli) -> None:
    imported(cli, ws, "promptfoo", str(RESULTS), "--map", PROMPTFOO_MAP)
    document = json.loads(RESULTS.read_text(encoding="utf-8"))
    rows = {r["id"]: r for r in document["results"]["results"]}
    checked = 0
    for build in sorted(set(PF_BUILDS.values())):
        for trial in trials_of(ws, build):
            data = shown(cli, ws, trial["trial_id"])
            row = rows[data["attempt_id"]]
            source = data["source"]
            assert source["tool"] == "promptfoo"
            assert source["eval_id"] == document["evalId"]
            assert source["results_file"] == str(RESULTS)
            assert source["test_index"] == row["testIdx"]
            assert source["prompt_index"] == row["promptIdx"]
            assert source["provider"] == row["provider"]["label"]
            checked += 1
    assert checked == len(rows)
