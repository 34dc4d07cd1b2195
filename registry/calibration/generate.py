"""Write the example labelled items for the `reply-quality` model grader.

    .venv/bin/python registry/calibration/generate.py [OUTPUT_DIR]

Two deterministic sets (no randomness, so the files never drift):
- reply-quality.jsonl: two annotators who agree on all but a few items, and a judge that
  matches their majority on all but two holdout items per class: a valid calibration.
- reply-quality-disputed.jsonl: the same judge, but the annotators disagree on most
  `task_fail` items, so humans do not reach min_human_agreement on that class and the
  model grader may never block it (the calibration fails).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

STRATA = ("refund", "policy-question", "tone")


def _item(n: int, split: str, truth: str, second: str, model: str) -> dict[str, Any]:
    return {
        "item_id": f"reply-{n:04d}",
        "split": split,
        "stratum": STRATA[n % len(STRATA)],
        "human_labels": [
            {"annotator": "annotator-a", "label": truth},
            {"annotator": "annotator-b", "label": second},
        ],
        "model_label": model,
    }


def _flip(label: str) -> str:
    return "task_fail" if label == "task_pass" else "task_pass"


def items(disputed: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    n = 0
    for split, per_class in (("calibration", 20), ("holdout", 60)):
        for truth in ("task_pass", "task_fail"):
            for i in range(per_class):
                n += 1
                if disputed and truth == "task_fail":
                    second = _flip(truth) if i % 3 != 0 else truth  # mostly disagree
                else:
                    second = truth if i % 20 != 7 else _flip(truth)  # rare disagreement
                model = truth
                if split == "holdout" and i in (3, 41):
                    model = _flip(truth)  # two judge mistakes per class
                if split == "holdout" and i == 17:
                    model = "abstain"
                out.append(_item(n, split, truth, second, model))
    return out


def main() -> None:
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent
    target.mkdir(parents=True, exist_ok=True)
    for name, disputed in (("reply-quality.jsonl", False), ("reply-quality-disputed.jsonl", True)):
        lines = [json.dumps(item, sort_keys=True) for item in items(disputed)]
        (target / name).write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
