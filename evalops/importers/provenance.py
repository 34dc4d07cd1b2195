"""The way back from an imported trial to the run that produced it (docs/importers.md).

An import records two artifacts per trial: `source_log` (what identifies the execution:
`<eval id>#<sample>/<epoch>` for Inspect, `<eval id>#<row>` for promptfoo) and
`source_file` (the file it was read from and where in it). `source_of` reads them back for
`trials show`, the drill-down of a report and the registry site, with the command that
opens the source tool's viewer on that run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evalops.importers.common import SOURCE_FILE

_INSPECT_PRODUCER = "inspect-ai"
_PROMPTFOO_PRODUCER = "promptfoo"


def _artifact(record: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    artifacts = (record.get("artifact_manifest") or {}).get("artifacts") or []
    return next((a for a in artifacts if isinstance(a, Mapping) and a.get("kind") == kind), None)


def _source_file(record: Mapping[str, Any]) -> tuple[str | None, str]:
    """The file an import read the trial from and where in it (`<file>#<where>`), when the
    import recorded it (trials imported by an earlier evalops: None)."""
    found = _artifact(record, SOURCE_FILE)
    location = str((found or {}).get("location") or "")
    if not location:
        return None, ""
    file, _, where = location.rpartition("#")
    return (file or None), where


def _log_dir(log: str) -> str:
    return log.rpartition("/")[0] or "."


def _inspect_trace(
    location: str, record: Mapping[str, Any], files: Sequence[str]
) -> dict[str, Any]:
    """An Inspect trial: its log file (recorded at import; else the one file its import
    read), eval id, sample and epoch, and the command that opens the viewer on the log's
    directory (the log is listed there under its file name)."""
    eval_id, _, where = location.partition("#")
    sample, _, epoch = where.rpartition("/")
    recorded, _ = _source_file(record)
    log = recorded or (files[0] if len(files) == 1 else None)
    return {
        "tool": "inspect",
        "eval_id": eval_id,
        "log_file": log,
        "log_files": [log] if log else list(files),
        "sample_id": sample,
        "epoch": int(epoch) if epoch.isdigit() else epoch,
        "open_with": f"inspect view --log-dir {_log_dir(log)}" if log else "inspect view",
    }


def _promptfoo_trace(location: str, record: Mapping[str, Any]) -> dict[str, Any]:
    """A promptfoo row: its eval id, results file, test index, prompt index and provider
    (recorded at import; an earlier evalops kept the test index only when the row had no
    id), and the command that opens promptfoo's viewer on that eval."""
    eval_id, _, where = location.partition("#")
    recorded, place = _source_file(record)
    parts = dict(p.partition("=")[::2] for p in place.split("&") if "=" in p)
    test = parts.get("test") or where.split("/", 1)[0]
    prompt = parts.get("prompt")
    return {
        "tool": "promptfoo",
        "eval_id": eval_id,
        "results_file": recorded,
        "test_index": int(test) if test.isdigit() else None,
        "prompt_index": int(prompt) if prompt and prompt.isdigit() else None,
        "provider": parts.get("provider"),
        "row": where,
        "open_with": f"promptfoo view (eval {eval_id})",
    }


def source_of(record: Mapping[str, Any], files: Sequence[str] = ()) -> dict[str, Any] | None:
    """Where an imported trial came from (None for a trial not imported from a harness).
    `files`: what the trial's ingest read (for trials imported before the file was kept)."""
    log = _artifact(record, "source_log")
    producer = str((log or {}).get("producer") or "")
    location = str((log or {}).get("location") or "")
    if producer.startswith(_INSPECT_PRODUCER):
        return _inspect_trace(location, record, files)
    if producer == _PROMPTFOO_PRODUCER:
        return _promptfoo_trace(location, record)
    return None
