"""The digest recipes of docs/digests.md, each over the exact object the recipe names.

They take the file's JSON value (what the file says), never a model dump, so that anyone
can recompute them with `rfc8785` and `hashlib` from the file alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from evalops.domain.canonical import digest

TASK_DIGEST_KEYS = ("spec_schema_version", "contract", "fixtures")


def task_digest(task: Mapping[str, Any]) -> str:
    """`{"spec_schema_version", "contract", "fixtures"}` of the task file (absent keys omitted)."""
    return digest({k: task[k] for k in TASK_DIGEST_KEYS if k in task})


def execution_digest(profile: Mapping[str, Any]) -> str:
    """The execution profile without `id` and `meta`."""
    return digest({k: v for k, v in profile.items() if k not in ("id", "meta")})


def grader_set_digest(grader_set: Mapping[str, Any]) -> str:
    """The grader set without `meta` (it keeps `id`, `version`, `graders`)."""
    return digest({k: v for k, v in grader_set.items() if k != "meta"})


def grader_config_digest(grader: Mapping[str, Any]) -> str:
    """One grader entry of a grader set, whole."""
    return digest(dict(grader))


def eval_case_digest(task_digest: str, execution_digest: str, grader_set_digest: str) -> str:
    return digest(
        {
            "task_digest": task_digest,
            "execution_digest": execution_digest,
            "grader_set_digest": grader_set_digest,
        }
    )


def suite_digest(suite_id: str, kind: str, members: Iterable[Mapping[str, str]]) -> str:
    """Members are membership pins `{task_id, task_digest, grader_set_digest}`."""
    pins = sorted(
        (
            {
                "task_id": m["task_id"],
                "task_digest": m["task_digest"],
                "grader_set_digest": m["grader_set_digest"],
            }
            for m in members
        ),
        key=lambda m: m["task_id"],
    )
    return digest({"suite": suite_id, "kind": kind, "members": pins})


def policy_digest(policy: Mapping[str, Any]) -> str:
    """The policy file's whole object."""
    return digest(dict(policy))


def record_digest(record: Mapping[str, Any]) -> str:
    """A TrialRecord as ingested, whole."""
    return digest(dict(record))


def document_digest(document: Mapping[str, Any]) -> str:
    """The whole file object: what `verify` re-hashes for every stored definition."""
    return digest(dict(document))


def spec_digest(kind: str, value: Mapping[str, Any]) -> str:
    """The identity digest of a definition file of `kind` (its document digest for a kind
    without a recipe of its own)."""
    if kind == "task":
        return task_digest(value)
    if kind == "execution_profile":
        return execution_digest(value)
    if kind == "grader_set":
        return grader_set_digest(value)
    if kind in ("suite_policy", "gate_policy", "authority"):
        return policy_digest(value)
    return document_digest(value)
