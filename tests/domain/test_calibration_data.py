"""The example label sets are what their generator writes, and tell the intended story."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from evalops.domain.calibration import LabelledItem, calibration_metrics
from evalops.domain.calibration_validity import StoredCalibration, calibration_validity
from evalops.domain.specs import GraderSet
from evalops.registry.load import load_document
from evalops.services.evidence.calibration import read_labels
from tests.helpers import EXAMPLE_REGISTRY

CALIBRATION = EXAMPLE_REGISTRY / "calibration"


def test_generator_reproduces_the_committed_files(tmp_path: Path) -> None:
    subprocess.run([sys.executable, str(CALIBRATION / "generate.py"), str(tmp_path)], check=True)
    for name in ("reply-quality.jsonl", "reply-quality-disputed.jsonl"):
        assert (tmp_path / name).read_bytes() == (CALIBRATION / name).read_bytes(), name


def _validity(name: str) -> tuple[str, frozenset[str], tuple[str, ...]]:
    graders = GraderSet.model_validate(
        load_document(EXAMPLE_REGISTRY / "graders" / "support-graders.yaml").value
    )
    judge = graders.grader("reply-quality")
    assert judge is not None
    items: list[LabelledItem] = read_labels(CALIBRATION / name, judge)
    record = StoredCalibration("CAL-x", "sha256:cfg", calibration_metrics(items))
    v = calibration_validity(judge, "sha256:cfg", record)
    return v.state, v.blockable_classes, v.reasons


def test_the_agreeing_set_is_valid_for_both_classes() -> None:
    state, blockable, reasons = _validity("reply-quality.jsonl")
    assert state == "valid", reasons
    assert blockable == {"task_pass", "task_fail"}


def test_the_disputed_set_fails_on_human_agreement() -> None:
    state, blockable, reasons = _validity("reply-quality-disputed.jsonl")
    assert state == "failing"
    assert "task_fail" not in blockable
    assert any("human agreement" in r for r in reasons)
