"""`evalops trials import inspect` on real logs written by Inspect AI (docs/importers.md).

The logs come from tests/importer_tasks/refund_task.py, run with Inspect's mock model once
per session, in Inspect's two formats. What each sample and epoch must become is derived
below from that task's PLAN and the contract (not from evalops' output): the expected
classes, rerun chains, and pass@k / pass^k by brute force over every k-subset of epochs.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import subprocess
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import rfc8785
import yaml

from tests.conftest import Cli
from tests.import_support import (
    INSPECT_BUILD,
    SAMPLE_TASKS,
    SUPPORT_SUITE,
    copy_workspace,
    counts,
    import_base,
    inspect_logs,
    inspect_map_text,
    trials_of,
)
from tests.importer_tasks.refund_task import EPOCHS, PLAN, RETRIES, USAGE

MAP = "maps/inspect.yaml"

# (sample, epoch) -> the class of each attempt, first to last. Every other epoch passes.
# Read off PLAN with the contract: a forbidden or wrongly-argued call fails the trajectory;
# "rate limit" matches the map's infrastructure pattern, a segfault does not (runtime_error);
# a value the map does not list (P) and NaN are grader_invalid.
NOT_PASSING: dict[tuple[str, int], list[str]] = {
    ("A-1", 3): ["task_fail"],  # billing:refund-all is forbidden; refund_check says I
    ("A-1", 5): ["task_fail"],  # refunds 1999, not amountMinor 4200; refund_check says I
    ("A-2", 2): ["infrastructure_invalid", "task_pass"],  # rate limited once, retried
    ("A-3", 1): ["grader_invalid"],  # reply_judge P is not in the map's values
    ("A-3", 4): ["runtime_error"] * (1 + RETRIES),  # crashes on every attempt
    ("A-3", 5): ["grader_invalid"],  # reply_judge unscored: NaN
}
# The example gate policy: a rerun stands in for infrastructure_invalid (2 attempts).
STANDS_IN_FOR = {"infrastructure_invalid": 2, "grader_invalid": 1}
K = {"support-refund-in-order": 3, "support-refund-policy-explanation": 3, "support-reply-tone": 3}


def attempts(sample: str, epoch: int) -> list[str]:
    return NOT_PASSING.get((sample, epoch), ["task_pass"])


def effective_class(chain: list[str]) -> str:
    """The last attempt allowed to stand in (docs/classification.md, counting attempts from 1)."""
    current = 0
    for nxt in range(1, len(chain)):
        if nxt + 1 > STANDS_IN_FOR.get(chain[current], 0):
            break
        current = nxt
    return chain[current]


def brute_force(passed: list[bool], k: int) -> tuple[float, float]:
    """pass@k and pass^k as the share of k-subsets with any / all passing trials."""
    subsets = list(itertools.combinations(passed, k))
    return (
        float(Fraction(sum(any(s) for s in subsets), len(subsets))),
        float(Fraction(sum(all(s) for s in subsets), len(subsets))),
    )


def expected_stats() -> dict[str, tuple[int, float, float]]:
    out = {}
    for sample, task in SAMPLE_TASKS.items():
        passed = [effective_class(attempts(sample, e)) == "task_pass" for e in range(1, EPOCHS + 1)]
        out[task] = (
            sum(len(attempts(sample, e)) for e in range(1, EPOCHS + 1)),
            *brute_force(passed, K[task]),
        )
    return out


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return inspect_logs(tmp_path_factory)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return import_base(tmp_path_factory)


@pytest.fixture
def ws(base: Path, tmp_path: Path) -> Path:
    return copy_workspace(base, tmp_path / "ws")


def run_import(cli: Cli, ws: Path, *args: str) -> Any:
    result = cli("trials", "import", "inspect", *args, "--json", cwd=ws)
    assert result.code == 0, result.stdout + result.stderr
    return result.json()


def chains(trials: list[dict[str, Any]]) -> dict[tuple[str, int], list[dict[str, Any]]]:
    """(sample, epoch) -> its trials in attempt order, following the rerun links."""
    by_parent = {t["parent"]: t for t in trials if t["parent"]}
    sample_of = {task: sample for sample, task in SAMPLE_TASKS.items()}
    out = {}
    for t in trials:
        if t["parent"] is None:
            chain = [t]
            while chain[-1]["trial_id"] in by_parent:
                chain.append(by_parent[chain[-1]["trial_id"]])
            out[(sample_of[t["task_id"]], t["trial_index"] + 1)] = chain
    return out


# ------------------------------------------------------------------------------ imports


@pytest.mark.parametrize("fmt", ["eval", "json"])
def test_each_attempt_is_a_trial_classified_as_the_contract_says(
    fmt: str, logs: dict[str, Path], ws: Path, cli: Cli
) -> None:
    data = run_import(cli, ws, str(logs[fmt]), "--map", MAP)
    total = sum(len(attempts(s, e)) for s in PLAN for e in range(1, EPOCHS + 1))
    assert (data["ingested"], data["skipped_identical"], data["rejected"]) == (total, 0, [])
    trials = trials_of(ws, INSPECT_BUILD)
    assert len(trials) == total
    found = chains(trials)
    assert sorted(found) == sorted((s, e) for s in PLAN for e in range(1, EPOCHS + 1))
    for (sample, epoch), chain in found.items():
        assert [t["class"] for t in chain] == attempts(sample, epoch), (sample, epoch)
        assert {t["task_id"] for t in chain} == {SAMPLE_TASKS[sample]}
        # Every attempt keeps the epoch's trial_index; each rerun names the attempt before it.
        assert {t["trial_index"] for t in chain} == {epoch - 1}
        for ordinal, trial in enumerate(chain[1:], start=1):
            assert trial["record"]["rerun"] == {
                "parent_trial_id": chain[ordinal - 1]["trial_id"],
                "reason": "error_retry",
                "ordinal": ordinal,
            }
        assert "rerun" not in chain[0]["record"]


def expected_ids(path: Path) -> dict[tuple[str, int, int], str]:
    """(sample, epoch, attempt) -> the documented trial id: a completed execution is
    [sample uuid, attempt], a failed attempt [uuid of its first event] (read raw)."""
    import zipfile

    import inspect_ai.log  # noqa: F401  (teaches zipfile Inspect's zstd)

    out = {}
    with zipfile.ZipFile(path) as archive:
        for name in archive.namelist():
            if not name.startswith("samples/"):
                continue
            raw = json.loads(archive.read(name))
            retries = raw.get("error_retries") or []
            for attempt in range(1, len(retries) + 2):
                final = attempt == len(retries) + 1
                if final and not raw.get("error"):
                    ids: list[Any] = [raw["uuid"], attempt]
                else:
                    events = raw["events"] if final else retries[attempt - 1]["events"]
                    ids = [events[0]["uuid"]] if events else [raw["uuid"], attempt]
                digest = hashlib.sha256(rfc8785.dumps(ids)).hexdigest()[:16]
                out[(str(raw["id"]), raw["epoch"], attempt)] = "insp-" + digest
    return out


def test_trial_ids_follow_the_documented_recipe(logs: dict[str, Path], ws: Path, cli: Cli) -> None:
    from inspect_ai.log import read_eval_log

    header = read_eval_log(str(logs["eval"]), header_only=True)
    expected = expected_ids(logs["eval"])
    run_import(cli, ws, str(logs["eval"]), "--map", MAP)
    found = chains(trials_of(ws, INSPECT_BUILD))
    for (sample, epoch), chain in found.items():
        for attempt, trial in enumerate(chain, start=1):
            assert trial["trial_id"] == expected[(sample, epoch, attempt)]
            assert trial["record"]["run_id"] == header.eval.run_id
    assert len(expected) == sum(len(chain) for chain in found.values())


def test_reimport_is_a_counted_noop(logs: dict[str, Path], ws: Path, cli: Cli) -> None:
    first = run_import(cli, ws, str(logs["eval"]), "--map", MAP)
    before = counts(ws)
    again = run_import(cli, ws, str(logs["eval"]), "--map", MAP)
    assert (again["ingested"], again["skipped_identical"]) == (0, first["ingested"])
    assert counts(ws) == before  # no trial, no batch, no audit event
    assert cli("verify", cwd=ws).code == 0


def test_records_carry_provenance_usage_effects_and_agents(
    logs: dict[str, Path], ws: Path, cli: Cli
) -> None:
    import inspect_ai

    out = ws / "out.jsonl"
    before = counts(ws)
    data = run_import(cli, ws, str(logs["eval"]), "--map", MAP, "-o", str(out))
    assert (data["ingested"], data["written"]) == (0, 18)
    assert counts(ws) == before
    records = [json.loads(line) for line in out.read_text().splitlines()]
    eval_id, digests = sample_digests(logs["eval"])
    per_call = USAGE["input_tokens"] + USAGE["cache_read"] + USAGE["cache_write"]
    tools = {"lookup_order": "crm:lookup-order", "refund": "billing:refund",
             "refund_all": "billing:refund-all", "kb_search": "kb:search"}  # fmt: skip
    completed = 0
    for rec in records:
        _, sample, epoch_text, attempt = rec["attempt_id"].split("/")
        epoch = int(epoch_text)
        # docs/importers.md: a provenance artifact identifying the execution, then one
        # naming the file the trial was read from and where in it.
        assert rec["artifact_manifest"]["artifacts"][-2:] == [
            {
                "kind": "source_log",
                "digest": digests[(sample, epoch, int(attempt))],
                "producer": f"inspect-ai {inspect_ai.__version__}",
                "location": f"{eval_id}#{sample}/{epoch}",
            },
            {
                "kind": "source_file",
                "producer": f"inspect-ai {inspect_ai.__version__}",
                "location": f"{logs['eval']}#{sample}/{epoch}",
            },
        ]
        if rec["runtime"]["status"] != "ok":
            continue  # a failed attempt: it never reached the model or a tool
        completed += 1
        plan = PLAN[sample][epoch]
        # One agent model call, cache reads and writes counted as input; the judge
        # scorer's own model call is the grader's usage, not the agent's.
        assert rec["usage"] == {
            "model_calls": 1,
            "input_tokens": per_call,
            "output_tokens": USAGE["output_tokens"],
        }
        # Calls are attributed to the nearest enclosing agent span, names mapped.
        assert rec["tool_calls"] == [
            {"tool": tools[fn], "args": args, "agent_id": agent}
            for agent, fn, args in plan["calls"]
        ]
        refunds = [a for _, fn, a in plan["calls"] if fn == "refund"]
        assert rec.get("external_effects", []) == [
            {"effect_key": f"refund:{a['orderId']}", "status": "committed"} for a in refunds
        ]
    assert completed == 3 * EPOCHS - 1  # every epoch but the one that always crashes
    # Ingesting the written file gives the same trials as importing: re-import is a no-op.
    assert cli("trials", "ingest", str(out), cwd=ws).code == 0
    again = run_import(cli, ws, str(logs["eval"]), "--map", MAP)
    assert (again["ingested"], again["skipped_identical"]) == (0, 18)


def sample_digests(path: Path) -> tuple[str, dict[tuple[str, int, int], str]]:
    """eval_id and (sample, epoch, attempt) -> the documented execution digest: sha256 of
    JSON with sorted keys and no whitespace, of the sample without the transcript's storage
    layout (`events`, `events_data`, also inside `error_retries`) for a completed
    execution, of the attempt's error (message, tracebacks) for a failed one."""
    import zipfile

    import inspect_ai.log  # noqa: F401  (teaches zipfile Inspect's zstd)

    def digest(value: Any) -> str:
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return "sha256:" + hashlib.sha256(text.encode()).hexdigest()

    layout = ("events", "events_data")
    out = {}
    with zipfile.ZipFile(path) as archive:
        header = json.loads(archive.read("header.json"))
        for name in archive.namelist():
            if not name.startswith("samples/"):
                continue
            raw = json.loads(archive.read(name))
            key = (str(raw["id"]), raw["epoch"])
            retries = raw.get("error_retries") or []
            for attempt, retry in enumerate(retries, start=1):
                out[(*key, attempt)] = digest({k: v for k, v in retry.items() if k not in layout})
            if raw.get("error"):
                out[(*key, len(retries) + 1)] = digest(raw["error"])
                continue
            lean = {k: v for k, v in raw.items() if k not in layout}
            if "error_retries" in raw:
                lean["error_retries"] = [
                    {k: v for k, v in r.items() if k not in layout} for r in retries
                ]
            out[(*key, len(retries) + 1)] = digest(lean)
    return header["eval"]["eval_id"], out


def test_delegate_calls_do_not_count_toward_the_target_agents_trajectory(
    logs: dict[str, Path], ws: Path, cli: Cli
) -> None:
    run_import(cli, ws, str(logs["eval"]), "--map", MAP)
    for trial in trials_of(ws, INSPECT_BUILD):
        if trial["task_id"] != "support-refund-policy-explanation" or trial["class"] != "task_pass":
            continue
        block = json.loads(
            sql_one(ws, "select trajectory from trial where trial_id = ?", trial["trial_id"])
        )
        # kb_search ran inside the "researcher" agent span: a delegate, not observed.
        assert (block["observedCount"], block["matched"]) == (1, True)
        assert trial["efficiency"]["toolCallCount"] == 2


def sql_one(ws: Path, query: str, *params: Any) -> Any:
    from tests.import_support import sql

    return sql(ws, query, params)[0][0]


def test_audit_event_names_the_source_and_the_maps_digest(
    logs: dict[str, Path], ws: Path, cli: Cli
) -> None:
    data = run_import(cli, ws, str(logs["eval"]), "--map", MAP)
    # The map's digest, recomputed with PyYAML and rfc8785 (the map has no YAML 1.1 traps).
    value = yaml.safe_load(inspect_map_text())
    digest = "sha256:" + hashlib.sha256(rfc8785.dumps(value)).hexdigest()
    assert data["map_digest"] == digest
    payload = json.loads(
        sql_one(
            ws, "select payload from audit_event where kind = 'trials.ingest' order by seq desc"
        )
    )
    assert payload["source"] == "inspect"
    assert payload["map_digest"] == digest
    assert payload["files"] == [str(logs["eval"])]
    assert payload["ingested"] == data["ingested"]
    assert cli("verify", cwd=ws).code == 0


def test_gate_decides_on_the_imported_run(logs: dict[str, Path], ws: Path, cli: Cli) -> None:
    run_import(cli, ws, str(logs["json"]), "--map", MAP)
    result = cli(
        "gate", "check", "--build", INSPECT_BUILD, "--suite", SUPPORT_SUITE, "--json", cwd=ws
    )
    data = result.json()
    # Critical refund task: 2 of 5 epochs fail under passRule all -> block. The policy task's
    # rate-limited epoch is stood in for by its retry -> pass. The tone task has two
    # grader_invalid epochs -> hold (evidence-blocked outranks its runtime_error).
    assert (result.code, data["decision"]) == (4, "block")
    states = {t["task_id"]: (t["state"], t["effect"], t["n"]) for t in data["tasks"]}
    assert states == {
        "support-refund-in-order": ("task_fail", "block", 5),
        "support-refund-policy-explanation": ("task_pass", "pass", 5),
        "support-reply-tone": ("grader_invalid", "hold", 5),
    }
    expected = expected_stats()
    for task in data["tasks"]:
        _, pass_at, pass_hat = expected[task["task_id"]]
        assert task["passAtK"] == pytest.approx(pass_at, rel=1e-9)
        assert task["passHatK"] == pytest.approx(pass_hat, rel=1e-9)


# ------------------------------------------------------------------------------ dry run


def test_dry_run_reports_stats_and_the_source_reduction_and_stores_nothing(
    logs: dict[str, Path], ws: Path, cli: Cli
) -> None:
    from inspect_ai.log import read_eval_log

    before = counts(ws)
    data = run_import(cli, ws, str(logs["eval"]), "--map", MAP, "--dry-run")
    assert counts(ws) == before
    assert data["ingested"] == 18 and data["batch"] is None
    expected = expected_stats()
    log = read_eval_log(str(logs["eval"]), header_only=True)
    inspect_reductions: dict[str, dict[str, dict[str, Any]]] = {}
    for reduction in log.reductions or []:
        for s in reduction.samples:
            task = SAMPLE_TASKS[str(s.sample_id)]
            value = None if s.value != s.value else s.value
            inspect_reductions.setdefault(task, {}).setdefault(reduction.scorer, {})[
                str(reduction.reducer)
            ] = value
    for task in data["tasks"]:
        trials, pass_at, pass_hat = expected[task["task_id"]]
        assert task["trials"] == trials
        assert task["passAtK"] == pytest.approx(pass_at, rel=1e-9)
        assert task["passHatK"] == pytest.approx(pass_hat, rel=1e-9)
        assert task["source_reduction"] == inspect_reductions[task["task_id"]]
        assert task["graders_without_scorer"] == []
    # On identical pass/fail inputs the two reductions agree: the refund task's epochs pass
    # exactly when refund_check says C.
    refund = next(t for t in data["tasks"] if t["task_id"] == "support-refund-in-order")
    assert refund["passAtK"] == pytest.approx(
        refund["source_reduction"]["refund_check"]["pass_at_3"]
    )
    assert refund["passHatK"] == pytest.approx(
        refund["source_reduction"]["refund_check"]["pass_k_3"]
    )
    # Where they differ, the dry run says why (errored epochs, every grader required).
    tone = next(t for t in data["tasks"] if t["task_id"] == "support-reply-tone")
    assert any("errored epochs" in why for why in tone["differences"])
    human = cli("trials", "import", "inspect", str(logs["eval"]), "--map", MAP, "--dry-run", cwd=ws)
    assert human.code == 0
    assert "support-refund-in-order" in human.stdout and "inspect's own reduction" in human.stdout


def test_dry_run_lists_unmapped_samples_scorers_and_graders_without_scorer(
    logs: dict[str, Path], ws: Path, cli: Cli
) -> None:
    text = inspect_map_text().replace("      A-3: support-reply-tone\n", "")
    line = next(x for x in text.splitlines(keepends=True) if "ticket_check:" in x)
    text = text.replace(line, "")
    (ws / "partial.yaml").write_text(text, encoding="utf-8")
    data = run_import(
        cli, ws, str(logs["eval"]), "--map", "partial.yaml", "--dry-run", "--skip-unmapped"
    )
    assert data["unmapped"]["samples"] == [f"{logs['eval']}: A-3"]
    assert data["unmapped"]["scorers"] == [f"{logs['eval']}: ticket_check"]
    assert data["skipped"] == {"unmapped_sample": EPOCHS, "unmapped_scorer": 10}
    tasks = {t["task_id"]: t for t in data["tasks"]}
    assert tasks["support-refund-in-order"]["graders_without_scorer"] == ["ticket-outcome"]
    # Its trials lack a blocking grader's result: missing_required_evidence, every one.
    assert tasks["support-refund-in-order"]["classes"] == {"missing_required_evidence": 5}
    assert "support-reply-tone" not in tasks  # the map no longer names it


# ------------------------------------------------------------- edits and invalidations


def test_invalidated_samples_are_skipped_and_edited_scores_labelled(
    logs: dict[str, Path], ws: Path, cli: Cli
) -> None:
    data = run_import(cli, ws, str(logs["edited"]), "--map", MAP)
    assert data["skipped"] == {"invalidated": 1}
    assert data["ingested"] == 17
    found = chains(trials_of(ws, INSPECT_BUILD))
    assert ("A-1", 5) not in found
    edited = found[("A-3", 1)]
    assert [t["class"] for t in edited] == ["task_pass"]
    assert "edited_score" in edited[0]["labels"]
    # The map's runtime.limits: working -> timeout (infrastructure_invalid), context ->
    # agent_error; the scorers' verdicts on a stopped sample do not make it a pass.
    working = found[("A-2", 3)][0]
    assert working["record"]["runtime"] == {"status": "timeout", "message": "working limit reached"}
    assert working["class"] == "infrastructure_invalid"
    context = found[("A-2", 4)][0]
    assert context["record"]["runtime"] == {
        "status": "agent_error",
        "message": "context limit reached",
    }
    assert context["class"] == "agent_error"


# ------------------------------------------------------------------------- bad inputs


def refused(cli: Cli, ws: Path, *args: str) -> dict[str, Any]:
    before = counts(ws)
    result = cli("trials", "import", "inspect", *args, "--json", cwd=ws)
    assert result.code == 2, result.stdout + result.stderr
    assert counts(ws) == before
    error: dict[str, Any] = result.json()["error"]
    return error


def test_promptfoo_output_given_to_the_inspect_importer_says_so(ws: Path, cli: Cli) -> None:
    """As the promptfoo importer names an Inspect log: the other importer, by name."""
    from tests.import_support import PROMPTFOO_FIXTURES

    error = refused(cli, ws, str(PROMPTFOO_FIXTURES / "results.json"), "--map", MAP)
    assert "promptfoo output" in error["message"], error["message"]
    assert "trials import promptfoo" in error["message"]


def write_map(ws: Path, text: str) -> str:
    (ws / "bad.yaml").write_text(text, encoding="utf-8")
    return "bad.yaml"


@pytest.mark.parametrize("fmt", ["eval", "json"])
def test_unmapped_sample_is_refused_unless_skipped(
    fmt: str, logs: dict[str, Path], ws: Path, cli: Cli
) -> None:
    bad = write_map(ws, inspect_map_text().replace("      A-3: support-reply-tone\n", ""))
    error = refused(cli, ws, str(logs[fmt]), "--map", bad)
    assert error["file"] == str(logs[fmt])
    assert error["field"].startswith("A-3/") and error["field"].endswith(": id")
    assert "--skip-unmapped" in error["message"]
    data = run_import(cli, ws, str(logs[fmt]), "--map", bad, "--skip-unmapped")
    assert data["skipped"] == {"unmapped_sample": EPOCHS}
    assert data["ingested"] == 18 - 7


def test_unmapped_scorer_is_refused_naming_the_sample(
    logs: dict[str, Path], ws: Path, cli: Cli
) -> None:
    bad = write_map(ws, inspect_map_text().replace("      effect_guard:", "      effect_grd:"))
    error = refused(cli, ws, str(logs["eval"]), "--map", bad)
    assert error["file"] == str(logs["eval"])
    assert error["field"].endswith(": scores.effect_guard")
    assert error["field"].split(": ")[0].split("/")[0] in PLAN


def test_an_unmapped_scorer_value_is_grader_invalid_not_a_pass(
    logs: dict[str, Path], ws: Path, cli: Cli
) -> None:
    # docs/importers.md: a value with no entry in `values` (or NaN) is grader_invalid. Drop C from
    # ticket_check: every scored trial becomes grader_invalid, none passes.
    bad = write_map(
        ws,
        inspect_map_text().replace(
            "grader_version: 1, values: {C: task_pass, I: task_fail}}",
            "grader_version: 1, values: {I: task_fail}}",
        ),
    )
    run_import(cli, ws, str(logs["eval"]), "--map", bad)
    scored = [t for t in trials_of(ws, INSPECT_BUILD) if t["record"]["grader_results"]]
    assert scored and all(t["class"] == "grader_invalid" for t in scored)
    assert all("unmapped_value:ticket_check" in t["labels"] for t in scored)


def test_task_version_mismatch_is_refused(logs: dict[str, Path], ws: Path, cli: Cli) -> None:
    bad = write_map(ws, inspect_map_text().replace("task_version: 2", "task_version: 3"))
    error = refused(cli, ws, str(logs["eval"]), "--map", bad)
    assert (error["file"], error["field"]) == (str(logs["eval"]), "eval.task_version")


def test_two_samples_mapped_to_one_task_are_refused(
    logs: dict[str, Path], ws: Path, cli: Cli
) -> None:
    text = inspect_map_text().replace(
        "A-2: support-refund-policy-explanation", "A-2: support-refund-in-order"
    )
    bad = write_map(ws, text)
    error = refused(cli, ws, str(logs["eval"]), "--map", bad)
    line = next(i for i, x in enumerate(text.splitlines(), start=1) if x.strip().startswith("A-2:"))
    assert (error["file"], error["line"]) == (bad, line)
    assert error["field"] == "tasks.refund_agent.samples.A-2"
    assert "one task receives at most one sample" in error["message"]


def test_sample_ids_1_and_text_1_are_two_samples_for_one_task(
    logs: dict[str, Path], ws: Path, cli: Cli
) -> None:
    doc = json.loads(logs["json"].read_text(encoding="utf-8"))  # json reads Inspect's NaN
    for sample in doc["samples"]:
        sample["id"] = {"A-1": 1, "A-2": "1"}.get(sample["id"], sample["id"])
    doc.pop("reductions", None)
    odd = ws / "odd.json"
    odd.write_text(json.dumps(doc), encoding="utf-8")
    text = inspect_map_text().replace("      A-1: support-refund-in-order\n", "")
    bad = write_map(
        ws,
        text.replace(
            "A-2: support-refund-policy-explanation", "'1': support-refund-policy-explanation"
        ),
    )
    error = refused(cli, ws, str(odd), "--map", bad)
    assert error["file"] == str(odd) and error["field"].endswith(": id")
    assert "one task receives at most one sample" in error["message"]


def test_a_log_whose_model_is_not_the_execution_profiles_is_refused(
    logs: dict[str, Path], ws: Path, cli: Cli
) -> None:
    bad = write_map(ws, inspect_map_text("candidate-b124"))
    error = refused(cli, ws, str(logs["eval"]), "--map", bad)
    assert (error["file"], error["field"]) == (str(logs["eval"]), "eval.model")
    assert (
        "mockllm/model" in error["message"]
        and "example-provider/example-model-2026-10" in error["message"]
    )
    # ... and what to do: a profile of the log's model.
    assert "`evalops new execution ID`" in error["message"], error["message"]


def test_a_copy_of_a_log_in_one_invocation_is_the_same_trials(
    logs: dict[str, Path], ws: Path, cli: Cli
) -> None:
    copy = ws / "copy.eval"
    copy.write_bytes(logs["eval"].read_bytes())
    data = run_import(cli, ws, str(logs["eval"]), str(copy), "--map", MAP)
    assert (data["ingested"], data["skipped_identical"]) == (18, 18)


def test_a_corrupt_zip_is_refused(logs: dict[str, Path], ws: Path, cli: Cli) -> None:
    garbage = ws / "garbage.eval"
    garbage.write_bytes(b"PK\x03\x04 this is not a zip archive" * 10)
    error = refused(cli, ws, str(garbage), "--map", MAP)
    assert error["file"] == str(garbage)
    cut = ws / "cut.eval"
    data = logs["eval"].read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    assert refused(cli, ws, str(cut), "--map", MAP)["file"] == str(cut)


@pytest.mark.parametrize("fraction", [0.05, 0.5, 0.95])
def test_a_truncated_json_log_is_refused_and_nothing_is_stored(
    fraction: float, logs: dict[str, Path], ws: Path, cli: Cli
) -> None:
    cut = ws / "cut.json"
    data = logs["json"].read_bytes()
    cut.write_bytes(data[: int(len(data) * fraction)])
    error = refused(cli, ws, str(cut), "--map", MAP)
    assert error["file"] == str(cut)
    assert "truncated" in error["message"] or "invalid JSON" in error["message"]


def test_a_map_for_the_other_tool_is_refused(logs: dict[str, Path], ws: Path, cli: Cli) -> None:
    error = refused(cli, ws, str(logs["eval"]), "--map", "maps/promptfoo.yaml")
    assert (error["file"], error["field"]) == ("maps/promptfoo.yaml", "source")


def test_missing_inspect_extra_names_it(
    logs: dict[str, Path], ws: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "inspect_ai.log", None)  # what a missing package does
    error = refused(cli, ws, str(logs["eval"]), "--map", MAP)
    # evalops is not on PyPI under its name: the extra comes from the checkout.
    assert "pip install '.[inspect]' in the evalops checkout" in error["message"]
    assert "'evalops[" not in error["message"]


def test_help_does_not_import_inspect() -> None:
    probe = (
        "import sys\nfrom evalops.cli.main import main\n"
        "try:\n    main(['trials', 'import', 'inspect', '--help'])\n"
        "except SystemExit:\n    pass\n"
        "print('inspect_ai' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False
    )
    assert done.stdout.strip().splitlines()[-1] == "False", done.stdout + done.stderr


@pytest.mark.postgres
def test_import_into_a_postgresql_registry(
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
    (ws / "map.yaml").write_text(inspect_map_text(), encoding="utf-8")
    commit_all(ws)
    for args in (("init",), ("sync",)):
        assert cli("--db", pg_url, *args, cwd=ws).code == 0
    first = cli(
        "--db",
        pg_url,
        "trials",
        "import",
        "inspect",
        str(logs["eval"]),
        "--map",
        "map.yaml",
        "--json",
        cwd=ws,
    )
    assert first.code == 0, first.stdout + first.stderr
    assert first.json()["ingested"] == 18
    again = cli(
        "--db",
        pg_url,
        "trials",
        "import",
        "inspect",
        str(logs["eval"]),
        "--map",
        "map.yaml",
        "--json",
        cwd=ws,
    )
    assert (again.json()["ingested"], again.json()["skipped_identical"]) == (0, 18)
    assert cli("--db", pg_url, "verify", cwd=ws).code == 0


def test_a_dry_run_lists_every_unmapped_sample_and_scorer_with_counts(
    logs: dict[str, Path], ws: Path, cli: Cli
) -> None:
    """Not the first one only: every problem at once, how often each was met, and the exit
    the import would have (2, nothing stored)."""
    text = inspect_map_text().replace("      A-3: support-reply-tone\n", "")
    line = next(x for x in text.splitlines(keepends=True) if "ticket_check:" in x)
    bad = write_map(ws, text.replace(line, ""))
    error = refused(cli, ws, str(logs["eval"]), "--map", bad, "--dry-run")
    message = error["message"]
    assert f"sample A-3 ({logs['eval']}, {EPOCHS}x)" in message, message
    assert f"scorer ticket_check ({logs['eval']}, 10x)" in message, message
    assert "--skip-unmapped" in message


def test_the_dry_run_explains_a_difference_only_where_the_numbers_differ(
    logs: dict[str, Path], ws: Path, cli: Cli
) -> None:
    data = run_import(cli, ws, str(logs["eval"]), "--map", MAP, "--dry-run")
    tasks = {t["task_id"]: t for t in data["tasks"]}
    refund = tasks["support-refund-in-order"]
    reduced = refund["source_reduction"]["refund_check"]
    assert (reduced["pass_at_3"], reduced["pass_k_3"]) == pytest.approx(
        (refund["passAtK"], refund["passHatK"])
    )
    # The scorer whose numbers are evalops' own is never said to count differently.
    assert "refund_check" not in refund["differs_from"]
    human = cli("trials", "import", "inspect", str(logs["eval"]), "--map", MAP, "--dry-run", cwd=ws)
    block = human.stdout.split("support-refund-in-order", 1)[1].split("support-refund-policy")[0]
    assert "counts differently from refund_check" not in block
    for task in tasks.values():
        # Every difference explained is one a number shows, and every number that differs
        # is explained.
        assert bool(task["differs_from"]) == bool(task["differences"]), task
    assert tasks["support-reply-tone"]["differences"]


def test_every_place_a_map_is_wrong_is_named_in_one_run(
    logs: dict[str, Path], ws: Path, cli: Cli
) -> None:
    """A task id misspelt and a grader version wrong: two lines of one refusal, each at its
    line of the map, where the first alone was named and the second took another run."""
    text = inspect_map_text()
    assert "A-1: support-refund-in-order" in text and "ticket_check: {grader_id" in text
    bad_text = text.replace("A-1: support-refund-in-order", "A-1: support-refund-in-ordr")
    bad_text = bad_text.replace(
        "grader_id: ticket-outcome, grader_version: 1",
        "grader_id: ticket-outcome, grader_version: 9",
    )
    bad = write_map(ws, bad_text)
    error = refused(cli, ws, str(logs["eval"]), "--map", bad)
    lines = bad_text.splitlines()
    expected = [
        (
            next(n for n, line in enumerate(lines, 1) if "support-refund-in-ordr" in line),
            "tasks.refund_agent.samples.A-1",
        ),
        (
            next(n for n, line in enumerate(lines, 1) if "grader_version: 9" in line),
            "tasks.refund_agent.scorers.ticket_check.grader_version",
        ),
    ]
    assert [(e["line"], e["field"]) for e in error["errors"]] == expected, error
    assert all(e["file"] == bad for e in error["errors"])
    assert "did you mean 'support-refund-in-order'" in error["errors"][0]["message"]


def test_a_sample_nested_deeper_than_the_interpreter_reads_is_named_not_a_crash(
    logs: dict[str, Path], ws: Path, cli: Cli
) -> None:
    """A sample member of a `.eval` whose JSON nests 100,000 levels deep: exit 2 naming the
    file and the member (as a corrupt sample is), not an internal error; nothing stored."""
    import zipfile

    import inspect_ai.log  # noqa: F401  (teaches zipfile Inspect's zstd)

    deep = ws / "deep.eval"
    with zipfile.ZipFile(logs["eval"]) as source, zipfile.ZipFile(deep, "w") as target:
        names = source.namelist()
        victim = next(n for n in names if n.startswith("samples/"))
        for name in names:
            data = source.read(name)
            if name == victim:
                data = data.rstrip()[:-1] + b', "zz": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
            target.writestr(name, data)
    before = cli("trials", "list", "--json", cwd=ws).stdout
    for extra in ([], ["--dry-run"]):
        result = cli("trials", "import", "inspect", str(deep), "--map", MAP, *extra, cwd=ws)
        assert result.code == 2, result.stdout + result.stderr
        assert f"{victim} in the .eval log is nested too deeply" in result.stderr
        assert "internal error" not in result.stderr
    assert cli("trials", "list", "--json", cwd=ws).stdout == before


def test_a_voided_imported_trial_is_not_taken_back_by_importing_its_log_from_elsewhere(
    logs: dict[str, Path], ws: Path, cli: Cli
) -> None:
    """The same log copied to another path holds the same executions: a trial voided from
    it stays voided (docs/trials.md, "a voided record is
    never taken back"); only the run and file it was read from differ, which is no new
    content."""
    import shutil

    data = run_import(cli, ws, str(logs["eval"]), "--map", MAP)
    assert data["ingested"] > 0
    listed = cli("trials", "list", "--build", "build-inspect-1", "--json", cwd=ws).json()
    rows = listed["trials"] if isinstance(listed, dict) else listed
    trial_id = next(r["trial_id"] for r in rows if r["trial_id"].startswith("insp-"))
    voided = cli("trials", "void", trial_id, "--reason", "a harness bug",
                 "--confirm-hard-failure", cwd=ws)  # fmt: skip
    assert voided.code == 0, voided.stdout + voided.stderr
    elsewhere = ws / "elsewhere"
    elsewhere.mkdir()
    copy = elsewhere / logs["eval"].name
    shutil.copy(logs["eval"], copy)
    before = cli("trials", "list", "--build", "build-inspect-1", "--json", cwd=ws).stdout
    again = cli("trials", "import", "inspect", str(copy), "--map", MAP, cwd=ws)
    assert again.code == 2, again.stdout + again.stderr
    assert f"trial {trial_id} with this content was voided" in again.stderr
    assert cli("trials", "list", "--build", "build-inspect-1", "--json", cwd=ws).stdout == before


@pytest.mark.parametrize(("field", "value"), [("epoch", 10**30), ("id", 2**53)])
def test_a_sample_number_beyond_2_53_is_named_not_a_crash(
    logs: dict[str, Path], ws: Path, cli: Cli, field: str, value: int
) -> None:
    """An epoch or an integer sample id beyond what canonical JSON can hold (a trial id is
    derived from them) is exit 2 naming the sample and the field, never an internal error."""
    doc = json.loads(logs["json"].read_text(encoding="utf-8"))
    doc["samples"][0][field] = value
    hostile = ws / "hostile.json"
    hostile.write_text(json.dumps(doc), encoding="utf-8")
    result = cli("--json", "trials", "import", "inspect", str(hostile), "--map", MAP, cwd=ws)
    assert result.code == 2, result.stdout + result.stderr
    error = result.json()["error"]
    assert field in str(error["field"]) and "2^53" in error["message"], error
    assert "internal error" not in result.stderr


def test_a_sample_invalidated_after_its_import_is_refused_until_voided(
    logs: dict[str, Path], ws: Path, cli: Cli, tmp_path: Path
) -> None:
    """Inspect marks a sample invalidated after the log was imported. Importing the final
    log again said "left out: invalidated" and exited 0, while the stored trial kept
    counting; imported alone, the final log decides otherwise. The import now refuses
    (exit 2), naming the trial and the void that leaves it out; once voided, it imports."""
    from inspect_ai.log import ProvenanceData, invalidate_samples, read_eval_log, write_eval_log

    run_import(cli, ws, str(logs["eval"]), "--map", MAP)
    log = read_eval_log(str(logs["eval"]))
    assert log.samples
    victim = log.samples[0]
    invalidated = invalidate_samples(
        log, [str(victim.uuid)], ProvenanceData(author="qa@example.com", reason="bad case")
    )
    final = tmp_path / "invalidated.eval"
    write_eval_log(invalidated, str(final))
    before = cli("trials", "list", "--build", "build-inspect-1", "--json", cwd=ws).stdout
    refused = cli("--json", "trials", "import", "inspect", str(final), "--map", MAP, cwd=ws)
    assert refused.code == 2, refused.stdout + refused.stderr
    error = refused.json()["error"]
    assert error["field"] == "invalidation" and "is invalidated in the log" in error["message"]
    assert cli("trials", "list", "--build", "build-inspect-1", "--json", cwd=ws).stdout == before
    trial_id = re.search(r"trials void (\S+) --reason", error["message"])
    assert trial_id is not None
    voided = cli("trials", "void", trial_id.group(1), "--reason", "invalidated in Inspect",
                 "--confirm-hard-failure", cwd=ws)  # fmt: skip
    assert voided.code == 0, voided.stdout + voided.stderr
    again = cli("trials", "import", "inspect", str(final), "--map", MAP, cwd=ws)
    assert again.code == 0, again.stdout + again.stderr
