"""`evalops schema export` and the committed registry/schemas stay in step with the models."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import Cli
from tests.helpers import EXAMPLE_REGISTRY


def test_committed_schemas_match_a_fresh_export(tmp_path: Path, cli: Cli) -> None:
    result = cli("schema", "export", str(tmp_path / "schemas"), "--json")
    assert result.code == 0, result.stderr
    written = sorted(Path(p).name for p in result.json()["written"])
    committed = sorted(p.name for p in (EXAMPLE_REGISTRY / "schemas").glob("*.schema.json"))
    assert (
        written
        == committed
        == [
            "audit-report.schema.json",
            "authority.schema.json",
            "estimate.schema.json",
            "eval-summary.schema.json",
            "eval-task.schema.json",
            "execution-profile.schema.json",
            "gate-check.schema.json",
            "gate-policy.schema.json",
            "grader-set.schema.json",
            "import-map.schema.json",
            "suite-policy.schema.json",
            "suite.schema.json",
            "trial.schema.json",
            "verify-attestation.schema.json",
        ]
    )
    for name in written:
        fresh = (tmp_path / "schemas" / name).read_text(encoding="utf-8")
        assert fresh == (EXAMPLE_REGISTRY / "schemas" / name).read_text(encoding="utf-8"), (
            f"{name} is stale: run `make schemas`"
        )


def test_schemas_forbid_unknown_fields_and_document_fields() -> None:
    task = json.loads((EXAMPLE_REGISTRY / "schemas" / "eval-task.schema.json").read_text())
    assert task["additionalProperties"] is False
    assert task["properties"]["revision"]["description"].startswith("Must change")
    trial = json.loads((EXAMPLE_REGISTRY / "schemas" / "trial.schema.json").read_text())
    assert "schema" in trial["required"] and "trial_id" in trial["required"]
