"""`evalops validate` reports everything in one run (docs/formats.md).

- Every error of every file, each at file:line and field, in one run, up to a stated cap
  (MAX_REPORTED_ERRORS; the rest are counted); `--json` lists them under `errors` inside
  the contract's `error` object, whose own fields are the first problem.
- No follow-on "grader set ... is not in the registry" for a task whose grader-set file
  exists but is invalid (it is reported once, as itself); a grader set that is really
  missing is still reported.
- A gate policy may omit `decision_precedence` and `waivers.forbidden_states`: their one
  allowed value (the canonical order; the five states) is the default. `policy_digest`
  stays the digest of the file's whole object as written (docs/digests.md), so a file
  that writes the defaults out keeps its digest and one that omits them has its own.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import rfc8785
import yaml

from evalops.domain.specs import CANONICAL_PRECEDENCE, MIN_FORBIDDEN_WAIVER_STATES, GatePolicy
from evalops.registry.snapshot import MAX_REPORTED_ERRORS
from tests.conftest import Cli
from tests.helpers import EXAMPLE_REGISTRY

GRADERS = "graders/article-publish-graders.yaml"
TASK = "tasks/support-reply-tone.yaml"
GATE_POLICY = "policies/gate-policy.yaml"


def registry(tmp_path: Path) -> Path:
    root = tmp_path / "registry"
    shutil.copytree(EXAMPLE_REGISTRY, root)
    return root


def edit(root: Path, rel: str, pattern: str, replacement: str, count: int = 0) -> None:
    path = root / rel
    text, n = re.subn(pattern, replacement, path.read_text(encoding="utf-8"), count=count)
    assert n, f"{pattern!r} not in {rel}"
    path.write_text(text, encoding="utf-8")


def line_of(root: Path, rel: str, needle: str) -> int:
    lines = (root / rel).read_text(encoding="utf-8").splitlines()
    return next(i for i, line in enumerate(lines, 1) if needle in line)


def validate(cli: Cli, root: Path) -> tuple[int, dict[str, Any], str]:
    as_json = cli("validate", str(root), "--json", cwd=root.parent)
    human = cli("validate", str(root), cwd=root.parent)
    assert human.code == as_json.code
    return as_json.code, as_json.json(), human.stderr


def break_two_files(root: Path) -> None:
    edit(root, TASK, r"(?m)^revision: 1$", "revision: x")
    edit(root, GRADERS, r"(?m)^version: \d+$", "version: five")
    edit(root, GRADERS, r"layer: hard_constraint", "layer: hard-constraint", count=1)
    edit(root, GRADERS, r"(?m)^graders:$", "colour: blue\ngraders:")


def test_every_error_of_every_file_in_one_run(tmp_path: Path, cli: Cli) -> None:
    root = registry(tmp_path)
    break_two_files(root)

    code, data, stderr = validate(cli, root)

    assert code == 2
    found = {(Path(e["file"]).name, e["line"], e["field"]) for e in data["error"]["errors"]}
    assert found == {
        ("support-reply-tone.yaml", line_of(root, TASK, "revision: x"), "revision"),
        ("article-publish-graders.yaml", line_of(root, GRADERS, "version: five"), "version"),
        ("article-publish-graders.yaml", line_of(root, GRADERS, "colour: blue"), "colour"),
        (
            "article-publish-graders.yaml",
            line_of(root, GRADERS, "layer: hard-constraint"),
            "graders[3].layer",
        ),
    }
    assert all(e["code"] == 2 for e in data["error"]["errors"])
    headline = data["error"]
    found_line = data["error"]["errors"][0]["line"]
    assert (headline["file"], headline["line"]) == (data["error"]["errors"][0]["file"], found_line)
    assert headline["message"].endswith("(and 3 more)")
    # Human output: one `error:` line per problem, each with its file:line.
    lines = [ln for ln in stderr.splitlines() if ln.startswith("error: ")]
    assert len(lines) == len(data["error"]["errors"]) == 4
    assert any("article-publish-graders.yaml" in ln and ": colour: " in ln for ln in lines)


def test_no_follow_on_error_for_a_grader_set_file_already_reported(
    tmp_path: Path, cli: Cli
) -> None:
    """Three tasks name the broken grader set: it is reported once, as itself."""
    root = registry(tmp_path)
    break_two_files(root)

    _, data, stderr = validate(cli, root)

    assert not [e for e in data["error"]["errors"] if "not in the registry" in e["message"]]
    assert "not in the registry" not in stderr


def test_no_follow_on_error_for_an_unparseable_grader_set_file(tmp_path: Path, cli: Cli) -> None:
    root = registry(tmp_path)
    (root / GRADERS).write_text("id: [unclosed\n", encoding="utf-8")

    code, data, _ = validate(cli, root)

    assert code == 2
    assert [Path(e["file"]).name for e in data["error"].get("errors", [data["error"]])] == [
        "article-publish-graders.yaml"
    ]


def test_a_grader_set_that_is_really_missing_is_still_reported(tmp_path: Path, cli: Cli) -> None:
    root = registry(tmp_path)
    break_two_files(root)
    edit(root, "tasks/support-refund-in-order.yaml", r"(?m)^grader_set: .*$", "grader_set: nope")

    _, data, _ = validate(cli, root)

    missing = [e for e in data["error"]["errors"] if "not in the registry" in e["message"]]
    assert [(Path(e["file"]).name, e["field"]) for e in missing] == [
        ("support-refund-in-order.yaml", "grader_set")
    ]
    assert "'nope'" in missing[0]["message"]


def test_a_misspelt_grader_set_names_the_one_meant(tmp_path: Path, cli: Cli) -> None:
    root = registry(tmp_path)
    edit(root, "tasks/support-refund-in-order.yaml", r"(?m)^grader_set: .*$",
         "grader_set: support_graders")  # fmt: skip
    code, data, said = validate(cli, root)
    assert code == 2
    assert data["error"]["message"] == (
        "grader set 'support_graders' is not in the registry; did you mean 'support-graders'?"
    )
    assert "did you mean 'support-graders'?" in said


@pytest.mark.parametrize(
    ("line", "hint"),
    [
        ("goal: refund: the whole order", "a ': ' inside an unquoted value (quote it)"),
        ("goal: `refund`", "a tab or a reserved character (@, `) opens the value"),
    ],
)
def test_a_yaml_slip_says_where_to_look(tmp_path: Path, cli: Cli, line: str, hint: str) -> None:
    root = registry(tmp_path)
    edit(root, TASK, r"(?m)^  goal: .*$", "  " + line, count=1)
    code, data, said = validate(cli, root)
    assert code == 2
    assert data["error"]["message"].startswith("invalid YAML: ")
    assert f"; likely {hint}" in data["error"]["message"] and hint in said


def test_errors_beyond_the_cap_are_counted_not_listed(tmp_path: Path, cli: Cli) -> None:
    root = registry(tmp_path)
    doc = yaml.safe_load((root / GRADERS).read_text(encoding="utf-8"))
    template = doc["graders"][0]
    doc["graders"] = [
        {**template, "id": f"g{i}", "typo": i} for i in range(MAX_REPORTED_ERRORS + 50)
    ]
    (root / GRADERS).write_text(yaml.safe_dump(doc), encoding="utf-8")

    code, data, stderr = validate(cli, root)

    assert code == 2
    assert len(data["error"]["errors"]) == MAX_REPORTED_ERRORS + 1
    last = data["error"]["errors"][-1]["message"]
    assert last.startswith("50 more errors not listed")
    assert f"at most {MAX_REPORTED_ERRORS}" in last
    assert "50 more errors not listed" in stderr


# ------------------------------------------------------------- optional policy fields


def test_a_gate_policy_may_omit_precedence_and_forbidden_states(tmp_path: Path, cli: Cli) -> None:
    root = registry(tmp_path)
    full = yaml.safe_load((root / GATE_POLICY).read_text(encoding="utf-8"))
    full_digest = cli("digest", str(root / GATE_POLICY), "--json").json()[0]["policy_digest"]
    short = dict(full)
    del short["decision_precedence"]
    short["waivers"] = {k: v for k, v in full["waivers"].items() if k != "forbidden_states"}
    (root / GATE_POLICY).write_text(yaml.safe_dump(short, sort_keys=False), encoding="utf-8")

    code, data, _ = validate(cli, root)

    assert code == 0, data
    policy = GatePolicy.model_validate(short)
    assert tuple(policy.decision_precedence) == CANONICAL_PRECEDENCE
    assert tuple(policy.waivers.forbidden_states) == tuple(MIN_FORBIDDEN_WAIVER_STATES)
    # The digest is over the file as written: the omitted defaults are not filled in.
    digest = cli("digest", str(root / GATE_POLICY), "--json").json()[0]["policy_digest"]
    assert digest == "sha256:" + hashlib.sha256(rfc8785.dumps(short)).hexdigest()
    assert full_digest == "sha256:" + hashlib.sha256(rfc8785.dumps(full)).hexdigest()
    assert digest != full_digest


def test_the_cap_is_stated_in_the_help(cli: Cli) -> None:
    shown = " ".join(cli("validate", "--help").stdout.split())
    assert f"at most {MAX_REPORTED_ERRORS}" in shown
