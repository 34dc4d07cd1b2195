"""`calibration status` through a `Reader`: plain SQL, no SQLAlchemy, table or spec models
on SQLite.

The same document as evalops/services/evidence/calibration.py `status` (which the registry site
renders): every model grader config that matters, the one in force and each one a suite
pins, judged by `calibration_validity` on its own newest calibration.
tests/services/test_read_differential.py compares both on registries with calibrations,
invalidations and recalibrated graders.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from evalops.domain.digests import grader_config_digest
from evalops.domain.facts import GraderFacts, StoredGraderSet
from evalops.services.reads.definitions import (
    GraderSetDocument,
    config_validity,
    grader_set_by_digest,
    model_configs,
)
from evalops.services.reads.listings import suite_members
from evalops.store.in_force_sql import LATEST_IN_FORCE_RUN_SQL
from evalops.store.reader import Reader


def _grader_sets_in_force(reader: Reader) -> list[dict[str, Any]]:
    """The first registered row of every grader set in force, by grader set id
    (`queries.in_force_rows(session, "grader_set")`)."""
    out: dict[str, dict[str, Any]] = {}
    for row in reader.rows(
        "SELECT g.id, g.grader_set_id, g.document FROM grader_set AS g "
        "JOIN sync_in_force AS f ON f.kind = 'grader_set' "
        "AND f.definition_id = g.grader_set_id AND f.document_digest = g.document_digest "
        f"AND f.sync_run_id = {LATEST_IN_FORCE_RUN_SQL} "
        "ORDER BY g.id"
    ):
        out.setdefault(row["grader_set_id"], row)
    return [out[k] for k in sorted(out)]


def newest_grader_config(reader: Reader, grader_id: str) -> tuple[GraderFacts, str] | None:
    """The grader config in force: from the in-force grader set holding this grader id,
    else the newest registered one (`queries.newest_grader_config`)."""
    # The newest registered of the sets in force holding it (as `queries.newest_grader_config`).
    for row in sorted(_grader_sets_in_force(reader), key=lambda r: -int(r["id"])):
        document = json.loads(row["document"])
        spec = StoredGraderSet.of(document)
        for position, grader in enumerate(spec.graders):
            if grader.id == grader_id:
                return grader, grader_config_digest(document["graders"][position])
    config = reader.first(
        "SELECT grader_set_row_id, grader_config_digest FROM grader_config "
        "WHERE grader_id = :grader ORDER BY id DESC LIMIT 1",
        {"grader": grader_id},
    )
    if config is None:
        return None
    document = reader.scalar(
        "SELECT document FROM grader_set WHERE id = :id", {"id": config["grader_set_row_id"]}
    )
    registered = StoredGraderSet.of(json.loads(document)).grader(grader_id)
    assert registered is not None
    return registered, config["grader_config_digest"]


def _configs(reader: Reader) -> dict[str, dict[str, Any]]:
    """Config digest -> the grader, the suites pinning it, and whether it is in force."""
    configs: dict[str, dict[str, Any]] = {}
    sets: dict[str, GraderSetDocument | None] = {}
    suite_ids = sorted(
        {r["suite_id"] for r in reader.rows("SELECT DISTINCT suite_id FROM suite_membership")}
    )
    for suite_id in suite_ids:
        for added, _ in suite_members(reader, suite_id, include_removed=False):
            digest = added["grader_set_digest"]
            if digest not in sets:
                sets[digest] = grader_set_by_digest(reader, digest)
            found = sets[digest]
            if found is None:
                continue
            for grader, config in model_configs(found):
                entry = configs.setdefault(
                    config, {"grader": grader, "pinned_by": set(), "in_force": False}
                )
                entry["pinned_by"].add(suite_id)
    # Every model config of every grader set in force: several sets may hold one grader,
    # configured differently, and each such config is one a suite could pin.
    seen_in_force: set[str] = set()
    for row in _grader_sets_in_force(reader):
        document = json.loads(row["document"])
        found = GraderSetDocument(StoredGraderSet.of(document), document["graders"])
        for grader, config in model_configs(found):
            entry = configs.setdefault(
                config, {"grader": grader, "pinned_by": set(), "in_force": False}
            )
            entry["in_force"] = True
            seen_in_force.add(grader.id)
    # A model grader of no set in force: its newest registered config (as before).
    model_ids = sorted(
        {
            r["grader_id"]
            for r in reader.rows(
                "SELECT DISTINCT grader_id FROM grader_config WHERE type = 'model'"
            )
        }
    )
    for grader_id in model_ids:
        if grader_id in seen_in_force:
            continue
        newest = newest_grader_config(reader, grader_id)
        if newest is None:
            continue
        entry = configs.setdefault(
            newest[1], {"grader": newest[0], "pinned_by": set(), "in_force": False}
        )
        entry["in_force"] = True
    return configs


def calibration_status(reader: Reader) -> list[dict[str, Any]]:
    """Every model grader config that matters: the one in force and each one a suite pins
    (`calibration.status`): `stale` marks a config in force that has no calibration of its
    own while an earlier config of the grader had one."""
    out = []
    for config_digest, entry in _configs(reader).items():
        grader: GraderFacts = entry["grader"]

        def older(grader: GraderFacts = grader, config_digest: str = config_digest) -> Any:
            return reader.scalar(
                "SELECT calibration_id FROM calibration WHERE grader_id = :grader "
                "AND grader_config_digest != :config ORDER BY id DESC LIMIT 1",
                {"grader": grader.id, "config": config_digest},
            )

        validity = config_validity(reader, grader, config_digest)
        out.append(status_row(grader, config_digest, entry, validity, older))
    return sorted_status(out)


def status_row(
    grader: Any,
    config_digest: str,
    entry: dict[str, Any],
    validity: Any,
    older_calibration: Callable[[], str | None],
) -> dict[str, Any]:
    """One row of `calibration status` (both readings): the config's validity, `stale`
    when the config in force has no calibration of its own and `older_calibration()` names
    one of an earlier config of the grader."""
    state, reasons = validity.state, list(validity.reasons)
    if state == "missing" and entry["in_force"]:
        older = older_calibration()
        if older is not None:
            state = "stale"
            reasons.insert(
                0,
                f"{older} calibrated an earlier config; the grader now has config "
                f"{config_digest} (prompt, model or rubric changed): recalibrate",
            )
    return {
        "grader_id": grader.id,
        "grader_version": grader.version,
        "grader_config_digest": config_digest,
        "blocking": grader.blocking,
        "in_force": entry["in_force"],
        "pinned_by": sorted(entry["pinned_by"]),
        "state": state,
        "reasons": reasons,
        "calibration_id": validity.calibration_id,
        "blockable_classes": sorted(validity.blockable_classes),
    }


def sorted_status(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows by grader, the config in force first, then by version."""
    return sorted(rows, key=lambda r: (r["grader_id"], not r["in_force"], r["grader_version"]))
