"""Run the refund task with Inspect's mock model and write the logs the importer tests read.

    python -m tests.importer_tasks.generate OUT_DIR

Writes `refund.eval` and `refund.json` (the same task, two runs, Inspect's two log formats)
and `edited.json`: a copy of `refund.json` edited with Inspect's own API, one sample
invalidated (A-1, epoch 5), one score edited (A-3 epoch 1, reply_judge P -> C), and two
samples marked as stopped by a limit (A-2 epochs 3 and 4: working, context). Also:

- `retry-first.eval` / `retry-second.eval`: an `inspect eval-retry` pair. The first run
  (one epoch, one sample at a time) completes A-1, crashes on A-2 and so fails the eval
  (status `error`), and Inspect cancels A-3; `eval_retry` then writes a second log that
  copies A-1 (same uuid) and runs A-2 and A-3 again.
- `cancelled.eval`: the first log with its status set to `cancelled` (Inspect's own writer).
- `turn.json`: `refund.json` with A-1 epoch 2 stopped by a `turn` limit.
- `converted.json`: `refund.eval` converted by Inspect (`inspect log convert`).

Run in a subprocess by the tests: Inspect sets up logging and an event loop of its own.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from inspect_ai import eval as inspect_eval
from inspect_ai import eval_retry
from inspect_ai.log import (
    EvalSampleLimit,
    ProvenanceData,
    convert_eval_logs,
    edit_score,
    invalidate_samples,
    read_eval_log,
    write_eval_log,
)
from inspect_ai.scorer import ScoreEdit

from tests.importer_tasks import refund_task


def run(fmt: str, out: Path) -> Path:
    refund_task.ATTEMPTS.clear()
    with tempfile.TemporaryDirectory() as log_dir:
        logs = inspect_eval(
            refund_task.refund_agent(),
            model=refund_task.mock_model(),
            log_format=fmt,  # type: ignore[arg-type]
            log_dir=log_dir,
            retry_on_error=refund_task.RETRIES,
            fail_on_error=False,
            display="none",
        )
        target = out / f"refund.{fmt}"
        shutil.copyfile(logs[0].location, target)
    return target


def edited(source: Path, target: Path) -> Path:
    log = read_eval_log(str(source))
    assert log.samples is not None
    doomed = next(s for s in log.samples if s.id == "A-1" and s.epoch == 5)
    assert doomed.uuid is not None
    who = ProvenanceData(author="qa@example.com", reason="flaky mock")
    log = invalidate_samples(log, [doomed.uuid], who)
    edit_score(
        log,
        "A-3",
        "reply_judge",
        ScoreEdit(value="C", provenance=ProvenanceData(author="qa@example.com", reason="re-read")),
        epoch=1,
    )
    # Two samples stopped by limits: one the map lists (working -> timeout), one it does not.
    for epoch, kind in ((3, "working"), (4, "context")):
        stopped = next(s for s in log.samples if s.id == "A-2" and s.epoch == epoch)
        stopped.limit = EvalSampleLimit(type=kind, limit=30)  # type: ignore[arg-type]
    write_eval_log(log, str(target))
    return target


def retry_pair(out: Path) -> None:
    refund_task.ATTEMPTS.clear()
    with tempfile.TemporaryDirectory() as log_dir:
        first = inspect_eval(
            refund_task.refund_agent_once(),
            model=refund_task.mock_model(),
            log_dir=log_dir,
            max_samples=1,
            display="none",
        )[0]
        assert first.status == "error", first.status
        shutil.copyfile(first.location, out / "retry-first.eval")
        second = eval_retry(first, log_dir=str(Path(log_dir) / "retry"), display="none")[0]
        assert second.status == "success", [
            (s.id, s.error and s.error.message[:300]) for s in second.samples or []
        ]
        shutil.copyfile(second.location, out / "retry-second.eval")
    log = read_eval_log(str(out / "retry-first.eval"))
    log.status = "cancelled"
    write_eval_log(log, str(out / "cancelled.eval"))


def turn_limited(source: Path, target: Path) -> None:
    log = read_eval_log(str(source))
    assert log.samples is not None
    stopped = next(s for s in log.samples if s.id == "A-1" and s.epoch == 2)
    stopped.limit = EvalSampleLimit(type="turn", limit=5)
    write_eval_log(log, str(target))


def converted(source: Path, target: Path) -> None:
    with tempfile.TemporaryDirectory() as conv_dir:
        convert_eval_logs(str(source), "json", conv_dir)
        (made,) = Path(conv_dir).glob("*.json")
        shutil.copyfile(made, target)


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    eval_log = run("eval", out)
    json_log = run("json", out)
    edited(json_log, out / "edited.json")
    retry_pair(out)
    turn_limited(json_log, out / "turn.json")
    converted(eval_log, out / "converted.json")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
