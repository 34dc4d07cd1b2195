"""Reading an import map file (`import-map/v1`) with the strict spec loader."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from evalops.domain import digests
from evalops.domain.import_map import ImportMap
from evalops.errors import InputError
from evalops.registry.definitions import pydantic_error
from evalops.registry.load import Document, format_path, load_document

MAP_VERSION = "import-map/v1"


@dataclass(frozen=True)
class LoadedMap:
    """A validated map, the document it came from (for file:line errors) and its digest."""

    spec: ImportMap
    document: Document
    digest: str

    @property
    def path(self) -> str:
        return self.document.path

    def line_of(self, *loc: str | int) -> int:
        return self.document.line_of(tuple(loc))

    def error(self, message: str, *loc: str | int) -> InputError:
        """An error at a field of the map file (`map.yaml:12: tasks.x.samples.A-1: ...`)."""
        return InputError(message, self.path, self.line_of(*loc), format_path(tuple(loc)))


def load_import_map(path: Path) -> LoadedMap:
    """Parse and validate a map; every problem is exit 2 with file:line: field."""
    doc = load_document(path)
    value = doc.value
    if not isinstance(value, dict):
        raise InputError("an import map must hold a mapping", doc.path, 1)
    version = value.get("spec_schema_version")
    if version != MAP_VERSION:
        raise InputError(
            f"spec_schema_version must be {MAP_VERSION!r}, not {version!r}",
            doc.path,
            doc.line_of(("spec_schema_version",)) if version is not None else 1,
            "spec_schema_version",
        )
    try:
        spec = ImportMap.model_validate(value)
    except ValidationError as exc:
        raise pydantic_error(doc, exc) from None
    # The whole object, like a policy's digest: any change to the map changes it.
    return LoadedMap(spec, doc, digests.document_digest(value))
