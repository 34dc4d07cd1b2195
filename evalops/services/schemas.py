"""JSON Schemas generated from the pydantic models, for editors and harness authors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evalops.domain.import_map import ImportMap
from evalops.domain.specs import SPEC_MODELS
from evalops.domain.trial_record import TrialRecord

SCHEMA_BASE = "https://evalops.dev/schemas/"


def schema_documents() -> dict[str, dict[str, Any]]:
    """File name -> JSON Schema: one per spec format, TrialRecord and the import map."""
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
