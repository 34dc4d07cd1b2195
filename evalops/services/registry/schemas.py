"""JSON Schemas for editors, harness authors and the tools that read evalops's output.

Input formats (specs, trial records, import maps) are generated from their pydantic models.
Machine-readable outputs (`gate check --json`, `estimate --json`, the audit report's JSON,
`verify-attestation --json`, the EvalSummary export) are written by hand and shipped as
files, beside this module and beside the summary exporter, so a consumer can validate what
it reads.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evalops.domain.import_map import ImportMap
from evalops.domain.specs import SPEC_MODELS
from evalops.domain.trial_record import TrialRecord

SCHEMA_BASE = "https://evalops.dev/schemas/"
_PACKAGE = Path(__file__).resolve().parent.parent.parent
OUTPUT_SCHEMAS = (
    _PACKAGE / "services" / "output_schemas" / "gate-check.schema.json",
    _PACKAGE / "services" / "output_schemas" / "audit-report.schema.json",
    _PACKAGE / "services" / "output_schemas" / "verify-attestation.schema.json",
    _PACKAGE / "services" / "output_schemas" / "estimate.schema.json",
    _PACKAGE / "export" / "eval-summary.schema.json",
)


def schema_documents() -> dict[str, dict[str, Any]]:
    """File name -> JSON Schema: one per spec format, TrialRecord, the import map and each
    machine-readable output."""
    models: dict[str, Any] = {v.replace("/v1", ""): m for v, m in SPEC_MODELS.items()}
    models["trial"] = TrialRecord
    models["import-map"] = ImportMap
    out: dict[str, dict[str, Any]] = {}
    for name, model in models.items():
        schema = model.model_json_schema(by_alias=True, mode="validation")
        file_name = f"{name}.schema.json"
        out[file_name] = {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": SCHEMA_BASE + file_name,
            **schema,
        }
    for path in OUTPUT_SCHEMAS:
        out[path.name] = json.loads(path.read_text(encoding="utf-8"))
    return out


def render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def export_schemas(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, schema in schema_documents().items():
        path = directory / name
        path.write_text(render(schema), encoding="utf-8")
        written.append(path)
    return written
