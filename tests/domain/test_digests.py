"""Digests (docs/digests.md): independent recomputation, pinned values, invariants."""

from __future__ import annotations

import hashlib
import json
import random
import re
from pathlib import Path
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from evalops.domain import digests
from evalops.domain.canonical import canonical_json, digest
from evalops.registry.load import parse_json, parse_yaml
from tests.conftest import Cli
from tests.golden_digests import GOLDEN, current_digests
from tests.helpers import REPO_ROOT

EXAMPLE_FILES = sorted(
    p.relative_to(REPO_ROOT)
    for sub in ("tasks", "executions", "graders", "suites", "policies")
    for p in (REPO_ROOT / "registry" / sub).glob("*")
    if p.suffix in (".yaml", ".yml", ".json")
)


# ---------------------------------------------------------------- independent recipes


def _sha(value: Any) -> str:
    """The recipe's hash, written from the text of section 4 with rfc8785 and hashlib only."""
    return "sha256:" + hashlib.sha256(rfc8785.dumps(value)).hexdigest()


def _independent_load(path: Path) -> Any:
    """ruamel.yaml in YAML 1.2 mode: an implementation independent of evalops' loader."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        return json.loads(text)
    yaml = YAML(typ="safe", pure=True)
    yaml.version = (1, 2)
    return yaml.load(text)


def _independent_digests(value: dict[str, Any]) -> dict[str, str]:
    version = value["spec_schema_version"]
    if version == "eval-task/v1":
        part = {k: value[k] for k in ("spec_schema_version", "contract", "fixtures") if k in value}
        return {"task_digest": _sha(part)}
    if version == "execution-profile/v1":
        return {
            "execution_digest": _sha({k: v for k, v in value.items() if k not in ("id", "meta")})
        }
    if version == "grader-set/v1":
        return {"grader_set_digest": _sha({k: v for k, v in value.items() if k != "meta"})}
    if version in ("suite-policy/v1", "gate-policy/v1"):
        return {"policy_digest": _sha(value)}
    return {"declaration_digest": _sha(value)}


def test_example_registry_has_every_kind() -> None:
    kinds = {str(p.parent.name) for p in EXAMPLE_FILES}
    assert kinds == {"tasks", "executions", "graders", "suites", "policies"}


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=str)
def test_cli_digests_equal_independent_recomputation(path: Path, cli: Cli) -> None:
    result = cli("digest", "--json", str(path), cwd=REPO_ROOT)
    assert result.code == 0, result.stderr
    (row,) = result.json()
    value = _independent_load(REPO_ROOT / path)
    for key, expected in _independent_digests(value).items():
        assert row[key] == expected
    if value["spec_schema_version"] == "grader-set/v1":
        assert row["grader_config_digests"] == {g["id"]: _sha(g) for g in value["graders"]}


def test_eval_case_and_suite_digests_follow_their_recipes() -> None:
    t, e, g = ("sha256:" + c * 64 for c in "abc")
    assert digests.eval_case_digest(t, e, g) == _sha(
        {"task_digest": t, "execution_digest": e, "grader_set_digest": g}
    )
    members = [
        {"task_id": "b-task", "task_digest": t, "grader_set_digest": g},
        {"task_id": "a-task", "task_digest": e, "grader_set_digest": g},
    ]
    assert digests.suite_digest("regression/core", "regression", members) == _sha(
        {"suite": "regression/core", "kind": "regression", "members": members[::-1]}
    )


def test_pinned_golden_digests() -> None:
    """Must not change without a spec_schema_version bump (regenerate: `make golden`)."""
    assert current_digests() == json.loads(GOLDEN.read_text(encoding="utf-8"))


# --------------------------------------------------------------------------- invariants

_SAFE = 2**53 - 1
# Spec strings hold no control characters but tab and newline (docs/formats.md).
spec_text = st.text(
    st.characters(
        blacklist_categories=("Cs",),
        blacklist_characters=[
            chr(c) for c in [*range(0x20), *range(0x7F, 0xA0)] if c not in (9, 10)
        ],
    ),
    max_size=12,
)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-_SAFE, max_value=_SAFE)
    | st.floats(allow_nan=False, allow_infinity=False)
    | spec_text
)
spec_keys = spec_text.filter(lambda k: "\t" not in k and "\n" not in k)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(spec_keys, children, max_size=4)
    ),
    max_leaves=20,
)


def _shuffled(value: Any, rng: random.Random) -> Any:
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: _shuffled(v, rng) for k, v in items}
    if isinstance(value, list):
        return [_shuffled(v, rng) for v in value]
    return value


_PLAIN_OK = re.compile(r"^[a-z][a-z0-9_-]{0,20}$")
_CORE_NON_STRING = re.compile(r"^(null|Null|NULL|true|True|TRUE|false|False|FALSE)$")


def _yaml_string(text: str, rng: random.Random) -> str:
    """Plain when the core schema keeps it a string (`on`, `yes` included), else quoted."""
    if _PLAIN_OK.match(text) and not _CORE_NON_STRING.match(text) and rng.random() < 0.5:
        return text
    out = []
    for ch in text:
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif 0x20 <= code <= 0x7E:
            out.append(ch)
        elif code <= 0xFFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    return '"' + "".join(out) + '"'


def _yaml_scalar(value: Any, rng: random.Random) -> str:
    if value is None:
        return rng.choice(["null", "~", "Null"])
    if isinstance(value, bool):
        return rng.choice(["true", "True"]) if value else rng.choice(["false", "FALSE"])
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    return _yaml_string(value, rng)


def _to_yaml(value: Any, rng: random.Random, indent: int = 0) -> str:
    """Block or flow style at random, so many spellings of one value are tried."""
    pad = " " * indent
    if isinstance(value, dict) and value and rng.random() < 0.7:
        lines = []
        for k, v in value.items():
            key = _yaml_string(k, rng)
            if isinstance(v, dict | list) and v:
                lines.append(f"{pad}{key}:\n{_to_yaml(v, rng, indent + 2)}")
            else:
                lines.append(f"{pad}{key}: {_flow(v, rng)}")
        return "\n".join(lines)
    if isinstance(value, list) and value and rng.random() < 0.7:
        lines = []
        for v in value:
            if isinstance(v, dict | list) and v:
                lines.append(f"{pad}-\n{_to_yaml(v, rng, indent + 2)}")
            else:
                lines.append(f"{pad}- {_flow(v, rng)}")
        return "\n".join(lines)
    return pad + _flow(value, rng)


def _flow(value: Any, rng: random.Random) -> str:
    if isinstance(value, dict):
        inner = ", ".join(f"{_yaml_string(k, rng)}: {_flow(v, rng)}" for k, v in value.items())
        return "{" + inner + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_flow(v, rng) for v in value) + "]"
    return _yaml_scalar(value, rng)


@pytest.mark.slow  # several CPU seconds: `make test` runs it, `make test-fast` not
@settings(max_examples=300, deadline=None)
@given(value=st.dictionaries(st.text(max_size=8), json_values, max_size=6), seed=st.integers())
def test_key_order_never_changes_a_digest(value: dict[str, Any], seed: int) -> None:
    assert digest(_shuffled(value, random.Random(seed))) == digest(value)


@pytest.mark.slow  # several CPU seconds: `make test` runs it, `make test-fast` not
@settings(max_examples=300, deadline=None)
@given(value=st.dictionaries(spec_keys, json_values, max_size=6), seed=st.integers())
def test_yaml_and_json_spellings_give_the_same_digest(value: dict[str, Any], seed: int) -> None:
    rng = random.Random(seed)
    yaml_text = _to_yaml(value, rng) + "\n"
    json_text = json.dumps(_shuffled(value, rng), indent=rng.choice([None, 2]))
    from_yaml = parse_yaml(yaml_text, "generated.yaml").value
    from_json = parse_json(json_text, "generated.json").value
    assert canonical_json(from_yaml) == canonical_json(from_json) == canonical_json(value)


def test_yaml_core_schema_keeps_dates_and_on_as_strings() -> None:
    doc = parse_yaml("a: 2026-09-06\nb: on\nc: yes\nd: 0o17\ne: 1e3\n", "x.yaml").value
    assert doc == {"a": "2026-09-06", "b": "on", "c": "yes", "d": 15, "e": 1000.0}
    assert digest({"n": 1}) == digest({"n": 1.0})
