"""Write the trials of the sampled EU sessions (`estimation/eu-sessions`) for two builds.

    .venv/bin/python registry/trials/generate_eu_sessions.py [OUTPUT_DIR]

Digests are read from the registry with evalops' own loader, so a changed spec regenerates
its trials. The output is deterministic (fixed ids and timestamps, one sorted-key JSON
object per line): tests/domain/test_sample_data.py checks the committed files never drift.

The story (docs/estimation.md): build-124 fails some refunds, more often for free-tier
tenants; build-125 fixes most of them. The bulk return of the enterprise stratum has no
trials under build-125 (its run was not scheduled), which an estimate names instead of
silently dropping.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from evalops.domain import digests
from evalops.registry.snapshot import load_snapshot

HERE = Path(__file__).resolve().parent
REGISTRY = HERE.parent
SUITE_TASKS = "eu-session-"

# Build -> (execution profile, first trial's start, task slug -> outcome per trial: 1 pass).
BUILDS: dict[str, tuple[str, str, dict[str, list[int]]]] = {
    "b124": (
        "candidate-b124",
        "2026-11-28T06:00:00+00:00",
        {
            "free-refund-late-order": [1, 0, 0],
            "free-refund-damaged-item": [1, 1, 0],
            "free-refund-duplicate-charge": [1, 1, 1],
            "pro-refund-partial-order": [1, 1, 1],
            "pro-refund-subscription-downgrade": [1, 0, 1],
            "pro-refund-wrong-currency": [0, 0, 1],
            "pro-refund-cancelled-shipment": [1, 1, 1],
            "enterprise-refund-invoice-dispute": [1, 1, 1],
            "enterprise-refund-sla-credit": [1, 1, 0],
            "enterprise-refund-bulk-return": [1, 1, 1],
        },
    ),
    "b125": (
        "fix-b125",
        "2026-11-30T06:00:00+00:00",
        {
            "free-refund-late-order": [1, 1, 0],
            "free-refund-damaged-item": [1, 1, 1],
            "free-refund-duplicate-charge": [1, 1, 1],
            "pro-refund-partial-order": [1, 1, 1],
            "pro-refund-subscription-downgrade": [1, 1, 1],
            "pro-refund-wrong-currency": [1, 0, 1],
            "pro-refund-cancelled-shipment": [1, 1, 1],
            "enterprise-refund-invoice-dispute": [1, 1, 1],
            "enterprise-refund-sla-credit": [1, 1, 1],
            "enterprise-refund-bulk-return": [],
        },
    ),
}


def _digest_of(snapshot: object, kind: str, def_id: str) -> str:
    found = snapshot.find(kind, def_id)  # type: ignore[attr-defined]
    if found is None:
        raise SystemExit(f"no {kind} {def_id} in {REGISTRY}")
    return str(found.digest)


def records(tag: str) -> list[dict[str, object]]:
    execution_id, start, outcomes = BUILDS[tag]
    snapshot = load_snapshot(REGISTRY)
    execution = _digest_of(snapshot, "execution_profile", execution_id)
    graders = _digest_of(snapshot, "grader_set", "eu-session-graders")
    begin = datetime.fromisoformat(start).astimezone(UTC)
    out: list[dict[str, object]] = []
    for slot, (slug, trials) in enumerate(outcomes.items()):
        task_id = SUITE_TASKS + slug
        task = _digest_of(snapshot, "task", task_id)
        for index, passed in enumerate(trials):
            started = begin + timedelta(minutes=15 * slot + 4 * index)
            trial_id = f"trial-{tag}-{task_id}-{index}"
            out.append(
                {
                    "schema": "evalops.trial/v1",
                    "trial_id": trial_id,
                    "run_id": f"run-{tag}-eu-sessions",
                    "attempt_id": f"attempt-{tag}-{task_id}-{index}-1",
                    "task_id": task_id,
                    "task_digest": task,
                    "execution_digest": execution,
                    "grader_set_digest": graders,
                    "eval_case_digest": digests.eval_case_digest(task, execution, graders),
                    "trial_index": index,
                    "started_at": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "completed_at": (started + timedelta(minutes=2)).strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "grader_results": [
                        {
                            "grader_id": "resolution",
                            "grader_version": 1,
                            "state": "task_pass" if passed else "task_fail",
                            "score": 1.0 if passed else 0.0,
                        }
                    ],
                    "runtime": {"status": "ok"},
                }
            )
    return out


def main(argv: list[str]) -> int:
    target = Path(argv[0]) if argv else HERE / "eu-sessions"
    target.mkdir(parents=True, exist_ok=True)
    for tag, (execution_id, _, _) in BUILDS.items():
        path = target / f"{execution_id}.jsonl"
        text = "".join(json.dumps(r, sort_keys=True) + "\n" for r in records(tag))
        path.write_bytes(text.encode("utf-8"))
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
