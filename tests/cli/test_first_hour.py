"""Traps a new user met in the first hour: each test is the step that went wrong."""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _pytest.capture import CaptureIO
from rich.console import Console

from evalops.cli import progress as progress_module
from evalops.domain.next_steps import next_steps
from tests.conftest import Cli
from tests.helpers import REPO_ROOT, commit_all, wheelhouse_env
from tests.import_support import copy_workspace, import_base

TASK, EXECUTION = "support-refund-in-order", "candidate-b124"


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return import_base(tmp_path_factory)


@pytest.fixture
def ws(base: Path, tmp_path: Path) -> Path:
    return copy_workspace(base, tmp_path / "ws")


def test_a_redirected_template_is_one_line_that_ingests(ws: Path, cli: Cli) -> None:
    """`trials template > f.jsonl` then `trials ingest f.jsonl` (stdout is not a terminal)."""
    result = cli("trials", "template", "--task", TASK, "--execution", EXECUTION, cwd=ws)
    assert result.code == 0, result.stderr
    assert result.stdout.count("\n") == 1, "a redirected template must be one JSON line"
    (ws / "f.jsonl").write_text(result.stdout, encoding="utf-8")
    ingested = cli("trials", "ingest", "f.jsonl", "--json", cwd=ws)
    assert ingested.code == 0, ingested.stdout + ingested.stderr
    assert ingested.json()["ingested"] == 1


def test_a_template_of_three_trials_ingests_as_three(ws: Path, cli: Cli) -> None:
    """Repeated trials of one task in one run differ in trial_id and trial_index."""
    args = ("trials", "template", "--task", TASK, "--execution", EXECUTION)
    result = cli(*args, "--count", "3", "--run-id", "run-many", cwd=ws)
    assert result.code == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["trial_index"] for r in records] == [0, 1, 2]
    assert len({r["trial_id"] for r in records}) == 3
    assert {r["run_id"] for r in records} == {"run-many"}
    (ws / "three.jsonl").write_text(result.stdout, encoding="utf-8")
    ingested = cli("trials", "ingest", "three.jsonl", "--json", cwd=ws)
    assert ingested.code == 0, ingested.stdout + ingested.stderr
    assert ingested.json()["ingested"] == 3


def test_a_template_index_beyond_what_ingest_reads_is_refused(ws: Path, cli: Cli) -> None:
    """A template that says it is valid must ingest: trial_index stops at 2^53-1."""
    args = ("trials", "template", "--task", TASK, "--execution", EXECUTION)
    refused = cli(*args, "--index", str(2**53 - 1), "--count", "2", cwd=ws)
    assert refused.code == 2 and "--index" in refused.stderr, refused.stderr
    last = cli(*args, "--index", str(2**53 - 1), cwd=ws)
    assert last.code == 0, last.stderr
    (ws / "last.jsonl").write_text(last.stdout, encoding="utf-8")
    ingested = cli("trials", "ingest", "last.jsonl", "--json", cwd=ws)
    assert ingested.code == 0, ingested.stdout + ingested.stderr


def test_templates_concatenated_need_their_own_trial_ids(ws: Path, cli: Cli) -> None:
    args = ("trials", "template", "--task", TASK, "--execution", EXECUTION)
    first = cli(*args, cwd=ws).stdout
    second = cli(*args, "--index", "1", "--trial-prefix", "again", cwd=ws).stdout
    assert json.loads(second)["trial_id"] == "again-0002"
    (ws / "two.jsonl").write_text(first + second, encoding="utf-8")
    ingested = cli("trials", "ingest", "two.jsonl", "--json", cwd=ws)
    assert ingested.code == 0, ingested.stdout + ingested.stderr
    assert ingested.json()["ingested"] == 2
    # Another record under the first one's trial_id is refused with the way out.
    other = json.loads(first)
    other["usage"]["model_calls"] += 1
    (ws / "same.jsonl").write_text(json.dumps(other) + "\n", encoding="utf-8")
    refused = cli("trials", "ingest", "same.jsonl", "--json", cwd=ws)
    assert refused.code == 2
    message = refused.json()["error"]["message"]
    assert "already has record_digest" in message
    assert message.endswith(
        "each record needs its own trial_id "
        "(evalops trials template --trial-prefix P gives each batch its own)"
    )


def test_templates_of_two_builds_collide_and_the_refusal_names_trial_prefix(
    ws: Path, cli: Cli
) -> None:
    """Default template ids are the same for every task and build: concatenated batches
    collide. Skipping the collisions (--max-bad-records) would drop those records; the
    summary names giving each its own trial_id first. A mix of problems keeps the plain
    summary."""
    template = ("trials", "template", "--task", TASK, "--count", "2")
    first = cli(*template, "--execution", EXECUTION, cwd=ws).stdout
    second = cli(*template, "--execution", "baseline-b123", cwd=ws).stdout
    (ws / "both.jsonl").write_text(first + second, encoding="utf-8")
    refused = cli("trials", "ingest", "both.jsonl", cwd=ws)
    assert refused.code == 2, refused.stdout
    *rejected, summary = refused.stderr.strip().splitlines()
    assert len(rejected) == 2 and all("--trial-prefix P" in line for line in rejected)
    assert summary.startswith("error: 2 bad records; nothing was stored")
    assert "--trial-prefix" in summary and "--max-bad-records N" in summary
    assert summary.index("--trial-prefix") < summary.index("--max-bad-records")
    # With a prefix of its own, the second batch ingests beside the first.
    own = cli(*template, "--execution", "baseline-b123", "--trial-prefix", "b123", cwd=ws)
    (ws / "own.jsonl").write_text(first + own.stdout, encoding="utf-8")
    # A prefix given with its dash reads the same (not b123--0001).
    dashed = cli(*template, "--execution", "baseline-b123", "--trial-prefix", "b123-", cwd=ws)
    for made in (own, dashed):
        ids = [json.loads(line)["trial_id"] for line in made.stdout.splitlines()]
        assert ids == ["b123-0001", "b123-0002"]
    # Dashes alone are no prefix (they would give the default's colliding ids).
    dashes = cli("--json", *template, "--execution", "baseline-b123", "--trial-prefix", "--",
                 cwd=ws)  # fmt: skip
    assert dashes.code == 2, dashes.stdout
    assert dashes.json()["error"]["field"] == "--trial-prefix"
    ingested = cli("trials", "ingest", "own.jsonl", "--json", cwd=ws)
    assert ingested.code == 0, ingested.stdout + ingested.stderr
    assert ingested.json()["ingested"] == 4
    # One duplicate among other problems: the plain summary.
    (ws / "mixed.jsonl").write_text(second + "{}\n", encoding="utf-8")
    mixed = cli("trials", "ingest", "mixed.jsonl", cwd=ws)
    assert mixed.code == 2
    last = mixed.stderr.strip().splitlines()[-1]
    assert last.endswith("(all or nothing: fix them, or allow some with --max-bad-records N)")


def test_jsonl_option_forces_one_line(ws: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdout.isatty", lambda: True, raising=False)
    pretty = cli("trials", "template", "--task", TASK, "--execution", EXECUTION, cwd=ws)
    compact = cli("trials", "template", "--task", TASK, "--execution", EXECUTION, "--jsonl", cwd=ws)
    assert pretty.code == compact.code == 0
    assert pretty.stdout.count("\n") > 10, "a terminal gets the indented record"
    assert compact.stdout.count("\n") == 1
    stamps = ("started_at", "completed_at")
    same = [
        {k: v for k, v in json.loads(o).items() if k not in stamps}
        for o in (compact.stdout, pretty.stdout)
    ]
    assert same[0] == same[1]


def test_a_pretty_printed_record_is_one_error_that_says_json_lines(ws: Path, cli: Cli) -> None:
    record = json.loads(
        cli("trials", "template", "--task", TASK, "--execution", EXECUTION, cwd=ws).stdout
    )
    (ws / "pretty.jsonl").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    before = (ws / ".evalops" / "registry.db").read_bytes()
    result = cli("trials", "ingest", "pretty.jsonl", "--json", cwd=ws)
    assert result.code == 2
    error = result.json()["error"]
    assert error["line"] == 1 and error["file"] == "pretty.jsonl"
    assert "JSON Lines" in error["message"] and "jq -c" in error["message"]
    # One error, not one per line of the document.
    bad = cli("trials", "ingest", "pretty.jsonl", "--max-bad-records", "1000", "--json", cwd=ws)
    assert len(bad.json()["rejected"]) == 1, bad.stdout
    assert (ws / ".evalops" / "registry.db").read_bytes() == before


def test_a_crlf_file_is_refused_with_the_command_that_converts_it(ws: Path, cli: Cli) -> None:
    line = cli("trials", "template", "--task", TASK, "--execution", EXECUTION, cwd=ws).stdout
    (ws / "crlf.jsonl").write_bytes(line.rstrip("\n").encode() + b"\r\n")
    result = cli("trials", "ingest", "crlf.jsonl", "--json", cwd=ws)
    assert result.code == 2
    message = result.json()["error"]["message"]
    assert "CR LF" in message and "`dos2unix crlf.jsonl`" in message, message
    assert "sed -i 's/\\r$//' crlf.jsonl" in message, message


def test_a_compressed_crlf_file_gets_a_fix_that_keeps_it_readable(ws: Path, cli: Cli) -> None:
    """`sed -i` on a .gz edits compressed bytes and corrupts the file: for a compressed
    file the fix decompresses, converts and compresses again; pasted, it works."""
    import gzip
    import re

    line = cli("trials", "template", "--task", TASK, "--execution", EXECUTION, cwd=ws).stdout
    (ws / "crlf.jsonl.gz").write_bytes(gzip.compress(line.rstrip("\n").encode() + b"\r\n"))
    result = cli("trials", "ingest", "crlf.jsonl.gz", "--json", cwd=ws)
    assert result.code == 2
    message = result.json()["error"]["message"]
    assert "sed -i" not in message and "dos2unix" not in message, message
    (command,) = re.findall(r"`([^`]*)`", message)
    assert command.startswith("gzip -dc crlf.jsonl.gz | "), command
    subprocess.run(["bash", "-eo", "pipefail", "-c", command], cwd=ws, check=True)
    converted = command.rsplit("> ", 1)[1]
    ingested = cli("trials", "ingest", converted, "--json", cwd=ws)
    assert ingested.code == 0, ingested.stdout + ingested.stderr
    assert ingested.json()["ingested"] == 1


def test_an_ingest_that_rejects_every_record_says_nothing_was_stored(ws: Path, cli: Cli) -> None:
    """Within --max-bad-records an ingest exits 0 even when every line was bad: a CI step
    would pass having stored nothing, so the output says so (the exit code is the
    documented one)."""
    line = cli("trials", "template", "--task", TASK, "--execution", EXECUTION, cwd=ws).stdout
    (ws / "crlf.jsonl").write_bytes(line.rstrip("\n").encode() + b"\r\n")
    result = cli("trials", "ingest", "crlf.jsonl", "--max-bad-records", "5", cwd=ws)
    assert result.code == 0, result.stderr
    assert "ingested 0" in result.stdout
    assert "every record was rejected, nothing was stored" in result.stderr
    good = ws / "good.jsonl"
    good.write_text(line, encoding="utf-8")
    fine = cli("trials", "ingest", "good.jsonl", "crlf.jsonl", "--max-bad-records", "5", cwd=ws)
    assert fine.code == 0 and "nothing was stored" not in fine.stderr, fine.stderr


def test_a_trailing_empty_line_is_refused_saying_remove_it(ws: Path, cli: Cli) -> None:
    line = cli("trials", "template", "--task", TASK, "--execution", EXECUTION, cwd=ws).stdout
    (ws / "blank.jsonl").write_text(line.rstrip("\n") + "\n\n", encoding="utf-8")
    result = cli("trials", "ingest", "blank.jsonl", "--json", cwd=ws)
    assert result.code == 2, "what is accepted does not change"
    error = result.json()["error"]
    assert error["line"] == 2 and "empty line: remove it" in error["message"], error


def test_the_progress_bar_shows_words_and_records(monkeypatch: pytest.MonkeyPatch) -> None:
    """The console prints with markup off: no column may rely on markup."""
    recorded = Console(
        file=io.StringIO(), force_terminal=True, width=120, markup=False, record=True
    )
    monkeypatch.setattr(progress_module, "console", lambda stderr=False: recorded)
    with progress_module.progress("bar", "ingesting", 3_000, "bytes") as advance:
        assert advance is not None
        for _ in range(3):
            advance(1_000)
    shown = recorded.export_text()
    assert "[progress.description]" not in shown
    assert "ingesting" in shown
    assert "3 records" in shown, shown


def _make_demo(
    clone: Path, demo_dir: Path, pip_env: dict[str, str], *make_args: str
) -> subprocess.CompletedProcess[str]:
    # A reader's shell: no virtualenv active, no PYTHONPATH into some checkout.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON"))}
    env.update(pip_env)
    done = subprocess.run(
        ["make", "demo", f"DEMO_DIR={demo_dir}", *make_args],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


@pytest.mark.slow
def test_make_demo_on_a_fresh_clone(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The README's first command: runtime dependencies only, and it says what to do next.

    The Makefile runs as a reader runs it (its own virtualenv, `pip install -e .` resolving
    pyproject.toml's dependencies); pip reads them from the run's wheelhouse, not the index
    (`wheelhouse_env`: resolving against PyPI cost more than the rest of the test)."""
    clone = tmp_path / "clone"
    subprocess.run(
        ["git", "clone", "--quiet", "--no-hardlinks", str(REPO_ROOT), str(clone)], check=True
    )
    demo_dir = tmp_path / "evalops-demo"
    pip_env = wheelhouse_env(tmp_path_factory)
    done = _make_demo(clone, demo_dir, pip_env)
    assert (demo_dir / "demo-summary.md").is_file()
    assert f". {clone}/.venv/bin/activate" in done.stdout
    assert f"cd {demo_dir}" in done.stdout
    installed = subprocess.run(
        [str(clone / ".venv" / "bin" / "python"), "-m", "pip", "list", "--format=json"],
        capture_output=True,
        text=True,
        check=True,
    )
    names = {p["name"].lower() for p in json.loads(installed.stdout)}
    assert "evalops" in names and "sqlmodel" in names
    # The development toolchain is for `make test`, not for the demo.
    assert not names & {"pytest", "mypy", "ruff", "inspect-ai", "scikit-learn", "hypothesis"}
    # A second `make demo` replaces the directory the first one wrote. What the Makefile
    # does is checked (the earlier directory removed, then `evalops demo --dir` into it)
    # with a stand-in for `evalops`: the real demo into a new directory ran just above, and
    # running it again cost 4.7 CPU-s.
    stray = demo_dir / "left-by-the-first-demo"
    stray.write_text("x", encoding="utf-8")
    stand_in = tmp_path / "stand-in-bin"
    stand_in.mkdir()
    (stand_in / "evalops").write_text(
        "#!/bin/sh\n"
        'printf "%s\\n" "$@" > "$0.args"\n'
        'if [ -e "$3" ]; then echo "$3 still exists" >&2; exit 1; fi\n'
        'mkdir -p "$3" && echo demo > "$3/demo-summary.md"\n',
        encoding="utf-8",
    )
    (stand_in / "evalops").chmod(0o755)
    _make_demo(clone, demo_dir, pip_env, f"BIN={stand_in}")
    assert (stand_in / "evalops.args").read_text(encoding="utf-8").split() == [
        "demo",
        "--dir",
        str(demo_dir),
    ]
    assert not stray.exists() and (demo_dir / "demo-summary.md").is_file()
    # A directory without the demo's summary is left to `evalops demo`, which refuses it
    # (tests/contract/test_demo_and_install.py).


def test_make_installs_without_byte_compiling_everything() -> None:
    """Both installs of the Makefile skip pip's byte-compilation of every module (half the
    CPU time of `make demo`'s install); a run compiles what it imports."""
    makefile = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")
    flags = next(
        line.split(":=", 1)[1].split()
        for line in makefile.splitlines()
        if line.startswith("PIP_FLAGS :=")
    )
    assert "--no-compile" in flags
    installs = [line for line in makefile.splitlines() if "pip install" in line]
    assert len(installs) == 2 and all("$(PIP_FLAGS)" in line for line in installs), installs


def test_from_a_subdirectory_the_repository_database_is_used(ws: Path, cli: Cli) -> None:
    """`cd registry && evalops gate list` used to say "run `evalops init` first", and doing
    so created a second, empty database hidden by .gitignore."""
    at_root = cli("trials", "list", "--json", cwd=ws)
    assert at_root.code == 0, at_root.stderr
    inside = ws / "registry" / "tasks"
    from_below = cli("trials", "list", "--json", cwd=inside)
    assert from_below.code == 0, from_below.stderr
    assert from_below.json() == at_root.json()
    assert cli("init", cwd=ws / "registry").code == 0
    assert not (ws / "registry" / ".evalops").exists(), "init must not make a second database"
    # The registry is found there too: validate from below reads the repository's registry.
    assert cli("validate", cwd=inside).code == 0


def test_in_a_fresh_clone_init_from_inside_the_registry_makes_the_projects_database(
    workspace: Path, cli: Cli
) -> None:
    """A fresh clone has no database to find: from `registry/`, "run `evalops init` first"
    used to create `registry/.evalops/registry.db`, a second project inside the registry.
    The project is the directory above the registry: the error names its database, init
    creates it there, and every command from below then uses it."""
    inside = workspace / "registry" / "tasks"
    expected = workspace / ".evalops" / "registry.db"
    missing = cli("task", "list", cwd=inside)
    assert missing.code == 2
    assert str(expected) in missing.stderr and "evalops init" in missing.stderr
    assert cli("init", cwd=workspace / "registry").code == 0
    assert expected.is_file()
    assert not (workspace / "registry" / ".evalops").exists()
    assert cli("sync", cwd=inside).code == 0
    listed = cli("task", "list", "--json", cwd=workspace / "registry")
    assert listed.code == 0 and listed.json(), listed.stderr
    assert listed.json() == cli("task", "list", "--json", cwd=workspace).json()


def test_starters_are_never_written_into_a_projects_registry(workspace: Path, cli: Cli) -> None:
    """`init --registry registry` from inside a fresh clone's registry would put the database
    at the project's root and the starter files inside its registry, ready to be synced into
    it for good: refused, nothing written."""
    inside = workspace / "registry"
    before = sorted(p.relative_to(workspace) for p in workspace.rglob("*") if ".git" not in p.parts)
    refused = cli("init", "--registry", "registry", cwd=inside)
    assert refused.code == 2, refused.stdout + refused.stderr
    assert "inside the registry of the project" in refused.stderr
    after = sorted(p.relative_to(workspace) for p in workspace.rglob("*") if ".git" not in p.parts)
    assert after == before


def test_a_directory_named_like_the_registry_elsewhere_is_not_a_project(
    tmp_path: Path, cli: Cli
) -> None:
    """Only a registry inside the same git work tree makes the directory above it the
    project: a `registry` directory in a repository of its own is its own project."""
    outer = tmp_path / "outer"
    inner = outer / "registry"
    inner.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(inner)], check=True)
    assert cli("init", cwd=inner).code == 0
    assert (inner / ".evalops" / "registry.db").is_file()
    assert not (outer / ".evalops").exists()


def test_a_project_directory_named_registry_keeps_its_own_database(
    tmp_path: Path, cli: Cli
) -> None:
    """A monorepo subproject `mono/registry` with its own database: the directory holding a
    database is the project, whatever its name."""
    mono = tmp_path / "mono"
    project = mono / "registry"
    project.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(mono)], check=True)
    assert cli("--db", "sqlite:///.evalops/registry.db", "init", cwd=project).code == 0
    assert (project / ".evalops" / "registry.db").is_file()
    listed = cli("task", "list", cwd=project)
    assert listed.code == 0, listed.stderr
    assert not (mono / ".evalops").exists()


def test_outside_git_a_directory_named_registry_is_not_a_project(tmp_path: Path, cli: Cli) -> None:
    """Outside any git work tree no directory above is searched: a `registry` somewhere
    above is not a project."""
    deep = tmp_path / "registry" / "a" / "b"
    deep.mkdir(parents=True)
    assert cli("init", cwd=deep).code == 0
    assert not (tmp_path / ".evalops").exists()
    assert (deep / ".evalops" / "registry.db").is_file()


def test_the_search_stops_at_the_git_work_tree(ws: Path, cli: Cli, tmp_path: Path) -> None:
    nested = ws / "nested-repo"
    nested.mkdir()
    subprocess.run(["git", "init", "-q", str(nested)], check=True)
    result = cli("trials", "list", cwd=nested)
    assert result.code == 2 and "evalops init" in result.stderr


def test_away_from_a_registry_a_missing_database_says_where_evalops_looked(
    tmp_path: Path, cli: Cli
) -> None:
    """From an unrelated directory, "run `evalops init` first" alone invited a stray
    database: the error names the directory and the ways to reach the real one first."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for args in (("task", "list"), ("db", "current")):
        result = cli(*args, cwd=elsewhere)
        assert result.code == 2
        message = result.stderr.strip()
        assert message.count("\n") == 0 and str(elsewhere) in message
        assert "registry's repository" in message
        assert "--db" in message and "EVALOPS_DATABASE_URL" in message
        assert message.index("EVALOPS_DATABASE_URL") < message.index("evalops init")
    assert not (elsewhere / ".evalops").exists()


def test_in_a_registry_clone_a_missing_database_says_what_git_does_not_hold(
    workspace: Path, cli: Cli
) -> None:
    """A clone holds the registry but not its (ignored) database: "run `evalops init`" alone
    started a separate, empty registry. The error says where trials, suite members and
    decisions live, how to reach the team's database, and init as the way to an empty one;
    from inside the registry too."""
    for args, cwd in (
        (("task", "list"), workspace),
        (("gate", "show", "GATE-3"), workspace),
        (("task", "list"), workspace / "registry"),
    ):
        result = cli(*args, cwd=cwd)
        assert result.code == 2, result.stdout
        message = result.stderr.strip()
        assert message.count("\n") == 0, message
        assert "trials, suite members and decisions" in message
        assert "not in git" in message
        assert "--db" in message and "EVALOPS_DATABASE_URL" in message
        assert message.index("EVALOPS_DATABASE_URL") < message.index("evalops init")
        assert "registry's repository" not in message


def test_the_first_init_of_a_committed_registry_is_not_taken_for_a_clone(
    workspace: Path, cli: Cli
) -> None:
    """A new project that committed its registry (and a .gitignore for `.evalops/`) before
    its first `init`, as the demo does, looks like a clone to git: init cannot tell them
    apart, so it says nothing of a team's database (the missing-database error of every
    other command in a clone does)."""
    done = cli("--json", "init", cwd=workspace)
    assert done.code == 0, done.stderr
    assert done.json()["warnings"] == []


def test_a_missing_database_named_by_db_is_not_searched_for(tmp_path: Path, cli: Cli) -> None:
    named = tmp_path / "named.db"
    result = cli("--db", f"sqlite:///{named}", "task", "list", cwd=tmp_path)
    assert result.code == 2 and str(named) in result.stderr
    assert "run `evalops init` first" in result.stderr


def test_validate_names_the_directory_it_tried(tmp_path: Path, cli: Cli) -> None:
    empty = tmp_path / "somewhere"
    empty.mkdir()
    result = cli("validate", cwd=empty)
    assert result.code == 2
    assert str(empty / "registry") in result.stderr and "--registry" in result.stderr


def test_sync_names_the_directory_it_tried_as_validate_does(synced: Path, cli: Cli) -> None:
    """`sync registry` run inside `registry/` looks for `registry/registry`: the error
    names it and the way out, as validate's does."""
    inside = synced / "registry"
    for args in (("sync", "registry"), ("validate", "registry")):
        result = cli(*args, cwd=inside)
        assert result.code == 2, result.stdout
        message = result.stderr.strip()
        assert message.count("\n") == 0, message
        assert str(inside / "registry") in message
        assert "run from the directory that holds registry/" in message
        assert "--registry DIR" in message


def _starter_repo(tmp_path: Path, cli: Cli) -> Path:
    repo = tmp_path / "mine"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    assert cli("init", "--registry", "registry", cwd=repo).code == 0
    assert cli("new", "task", "refund-once", cwd=repo).code == 0
    return repo


def test_unedited_starters_are_named_before_they_are_registered(tmp_path: Path, cli: Cli) -> None:
    repo = _starter_repo(tmp_path, cli)
    checked = cli("validate", "--json", cwd=repo)
    assert checked.code == 0
    warned = " ".join(checked.json()["warnings"])
    assert "tasks/first-task.yaml" in warned and "tasks/refund-once.yaml" in warned
    # Both starters hash alike: that is the trap the warning is about.
    digests = cli("digest", "registry/tasks/first-task.yaml", "registry/tasks/refund-once.yaml",
                  "--json", cwd=repo).json()  # fmt: skip
    assert digests[0]["task_digest"] == digests[1]["task_digest"]
    human = cli("validate", cwd=repo)
    assert "warning: still as `evalops new` or `init --registry` wrote them" in human.stderr
    assert human.stderr.count("\n") == 1, "one line names every starter"
    # An edited task is no longer a starter.
    path = repo / "registry" / "tasks" / "refund-once.yaml"
    path.write_text(path.read_text().replace("goal: describe_the_goal", "goal: refund_once"))
    after = " ".join(cli("validate", "--json", cwd=repo).json()["warnings"])
    assert "refund-once.yaml" not in after and "first-task.yaml" in after


def test_sync_warns_about_starters_it_registers(tmp_path: Path, cli: Cli) -> None:
    repo = _starter_repo(tmp_path, cli)
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.email=a@b.c", "-c", "user.name=a", "commit",
         "-qm", "starter"], check=True,
    )  # fmt: skip
    synced = cli("sync", "--json", cwd=repo)
    assert synced.code == 0, synced.stdout + synced.stderr
    assert any("first-task.yaml" in w for w in synced.json()["warnings"])
    # A later sync names only what it registers, so the warning is not repeated forever.
    again = cli("sync", "--json", cwd=repo)
    assert again.code == 0 and again.json()["warnings"] == []


def test_new_execution_names_its_own_build(tmp_path: Path, cli: Cli) -> None:
    repo = _starter_repo(tmp_path, cli)
    assert cli("new", "execution", "candidate-b7", cwd=repo).code == 0
    assert cli("new", "execution", "a-profile-with-a-very-long-identifier", cwd=repo).code == 0
    rows = cli("digest", "registry/executions", "--json", cwd=repo).json()
    builds = {r["id"]: r["system_build"] for r in rows}
    assert builds["candidate-b7"] == "candidate-b7"
    assert (
        builds["a-profile-with-a-very-long-identifier"] == "a-profile-with-a-very-long-identifier"
    )
    assert len(set(builds.values())) == len(builds)


def test_validate_warns_when_profiles_share_a_build(tmp_path: Path, cli: Cli) -> None:
    repo = _starter_repo(tmp_path, cli)
    assert cli("new", "execution", "second", cwd=repo).code == 0
    path = repo / "registry" / "executions" / "second.yaml"
    path.write_text(path.read_text().replace("system_build: second", "system_build: dev-build"))
    warned = cli("validate", "--json", cwd=repo).json()["warnings"]
    assert any("dev-build, second share system_build dev-build" in w for w in warned), warned


def test_validate_warns_of_a_definition_edited_without_a_new_revision(
    synced: Path, cli: Cli
) -> None:
    """`validate` said "ok" for a registered task edited in place, and `sync` then refused
    it: with the database at hand, validate names the file and the field to bump."""
    import yaml

    assert cli("validate", "--json", cwd=synced).json()["warnings"] == []
    task = synced / "registry" / "tasks" / "mini-task.yaml"
    graders = synced / "registry" / "graders" / "mini-graders.yaml"
    spec = yaml.safe_load(task.read_text())
    spec["contract"]["goal"] = spec["contract"]["goal"] + "_edited"
    task.write_text(yaml.safe_dump(spec))
    grader_spec = yaml.safe_load(graders.read_text())
    grader_spec["graders"][0]["covers"] = ["something_else"]
    graders.write_text(yaml.safe_dump(grader_spec))
    checked = cli("validate", "--json", cwd=synced)
    assert checked.code == 0, checked.stderr
    warned = checked.json()["warnings"]
    task_line = 1 + next(
        n for n, line in enumerate(task.read_text().splitlines()) if line.startswith("revision:")
    )
    assert any(
        w.startswith(f"registry/tasks/mini-task.yaml:{task_line}: revision: ")
        and "task mini-task revision 1" in w
        and "bump revision" in w
        for w in warned
    ), warned
    assert any("graders/mini-graders.yaml" in w and "bump version" in w for w in warned), warned
    # ... and sync refuses exactly those files, as the warning says, in the same words.
    commit_all(synced)
    refused = cli("sync", cwd=synced)
    assert refused.code == 2 and "bump revision" in refused.stderr
    suffix = "; `evalops sync` refuses the file as it is"
    for warning in warned:
        assert warning.endswith(suffix) and warning.removesuffix(suffix) in refused.stderr, (
            warning,
            refused.stderr,
        )
    # Bumped, there is nothing to warn about.
    spec["revision"] = 2
    task.write_text(yaml.safe_dump(spec))
    grader_spec["version"] = 2
    graders.write_text(yaml.safe_dump(grader_spec))
    again = cli("validate", "--json", cwd=synced).json()["warnings"]
    assert not any("bump" in w for w in again), again
    # The human output says it too, on stderr, after "ok".
    spec["revision"] = 1
    task.write_text(yaml.safe_dump(spec))
    human = cli("validate", cwd=synced)
    assert human.code == 0 and human.stdout.startswith("ok:")
    assert human.stdout.splitlines()[0].endswith("; `evalops sync` would refuse 1 file (below)")
    where = f"registry/tasks/mini-task.yaml:{task_line}: revision"
    assert f"warning: {where}: task mini-task revision 1" in human.stderr


def test_validate_warns_of_labels_or_a_suite_kind_changed_in_place(synced: Path, cli: Cli) -> None:
    """What else `sync` refuses under an unchanged revision: risk labels (they are not in
    the task digest) and a suite's kind."""
    import yaml

    suite = synced / "registry" / "suites" / "core.yaml"
    suite.parent.mkdir(parents=True, exist_ok=True)
    suite.write_text(
        yaml.safe_dump(
            {"spec_schema_version": "suite/v1", "id": "regression/core", "kind": "regression"}
        )
    )
    commit_all(synced)
    assert cli("sync", cwd=synced).code == 0
    assert cli("validate", "--json", cwd=synced).json()["warnings"] == []
    task = synced / "registry" / "tasks" / "mini-task.yaml"
    spec = yaml.safe_load(task.read_text())
    spec["meta"]["risk"] = "critical" if spec["meta"]["risk"] != "critical" else "quality_signal"
    spec["meta"].pop("protects", None)
    task.write_text(yaml.safe_dump(spec))
    suite.write_text(
        yaml.safe_dump(
            {"spec_schema_version": "suite/v1", "id": "regression/core", "kind": "capability"}
        )
    )
    warned = cli("validate", "--json", cwd=synced).json()["warnings"]
    assert any("task mini-task revision 1" in w and "meta.risk" in w for w in warned), warned
    assert any("suite regression/core" in w and "never changes kind" in w for w in warned), warned
    commit_all(synced)
    refused = cli("sync", cwd=synced)
    assert refused.code == 2 and "never change" in refused.stderr, refused.stderr


def test_validate_without_a_database_says_nothing_of_registrations(
    workspace: Path, cli: Cli
) -> None:
    """validate needs no database: with none yet there is nothing to compare with."""
    checked = cli("validate", "--json", cwd=workspace)
    assert checked.code == 0, checked.stderr
    assert not (workspace / ".evalops").exists()
    assert not any("bump" in w for w in checked.json()["warnings"])


def test_a_hold_says_what_to_do_next_and_the_command_works(demo: Path, cli: Cli) -> None:
    """The demo's GATE-2 holds build-125 on a non-critical failure: its `next:` line is a
    waiver command that, with owner and reason filled in, the registry accepts."""
    shown = cli("gate", "show", "GATE-2", cwd=demo)
    assert shown.code == 0, shown.stderr  # showing a stored decision is not deciding
    nexts = [line for line in shown.stdout.splitlines() if line.startswith("next: ")]
    assert len(nexts) == 1, shown.stdout
    found = re.search(r"`evalops ([^`]+)`", nexts[0])
    assert found, "a command in a message is written in backticks"
    command = found.group(1)
    filled = command.replace("OWNER", "support-lead@example.com").replace("REASON", "known")
    granted = cli(*shlex.split(filled), cwd=demo)
    assert granted.code == 0, granted.stdout + granted.stderr


def _held(state: str, reason: str) -> dict[str, object]:
    return {
        "build": "build-9",
        "suite": "regression/core",
        "reasons": [],
        "regression": None,
        "tasks": [
            {"task_id": "ok-task", "state": "task_pass", "effect": "pass", "reason": "5/5"},
            {"task_id": "held-task", "state": state, "effect": "hold", "reason": reason},
        ],
    }


@pytest.mark.parametrize(
    ("state", "reason", "expected"),
    [
        ("ambiguous_external_effect", "ambiguous_external_effect in t-7", "trials reconcile t-7"),
        ("missing_required_evidence", "missing_required_evidence in t-7", "review resolve t-7"),
        ("missing_required_evidence", "no trials for this build", "ingest more trials"),
        ("grader_invalid", "grader_invalid in t-7", "calibration status"),
        ("infrastructure_invalid", "infrastructure_invalid in t-7", "rerun.parent_trial_id t-7"),
        ("agent_error", "2/5 trials failed", "--states agent_error --build build-9"),
    ],
)
def test_every_held_state_has_its_next_step(state: str, reason: str, expected: str) -> None:
    steps = next_steps(_held(state, reason))
    assert len(steps) == 1 and steps[0].startswith("held-task: ")
    assert expected in steps[0]


def test_gate_check_says_what_it_wrote(demo: Path, cli: Cli) -> None:
    result = cli(
        "gate", "check", "--build", "build-125", "--suite", "regression/core", "--dry-run",
        "--report", "out/r.md", "--junit", "out/j.xml", cwd=demo,
    )  # fmt: skip
    assert result.code == 0, result.stderr
    assert "wrote JUnit XML to out/j.xml" in result.stderr
    assert "wrote the audit report (md) to out/r.md" in result.stderr
    assert (demo / "out" / "r.md").is_file() and (demo / "out" / "j.xml").is_file()


def test_a_report_printed_in_a_terminal_is_markdown(
    demo: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    piped = cli("report", "audit", "--gate", "GATE-3", cwd=demo)
    assert piped.code == 0 and piped.stdout.lstrip().lower().startswith("<!doctype html")
    monkeypatch.setattr("sys.stdout.isatty", lambda: True, raising=False)
    terminal = cli("report", "audit", "--gate", "GATE-3", cwd=demo)
    assert terminal.code == 0
    assert "<html" not in terminal.stdout.lower() and "GATE-3" in terminal.stdout


def test_a_record_of_an_unsynced_edit_names_the_file(ws: Path, cli: Cli) -> None:
    record = json.loads(
        cli("trials", "template", "--task", TASK, "--execution", EXECUTION, cwd=ws).stdout
    )
    task_file = ws / "registry" / "tasks" / f"{TASK}.yaml"
    text = task_file.read_text(encoding="utf-8")
    assert "timeout_s: 120" in text
    task_file.write_text(text.replace("timeout_s: 120", "timeout_s: 121"), encoding="utf-8")
    edited = cli("digest", str(task_file), "--json", cwd=ws).json()[0]["task_digest"]
    assert edited != record["task_digest"], "the test must edit the task's contract"
    record["task_digest"] = edited
    record.pop("eval_case_digest", None)
    (ws / "edited.jsonl").write_text(json.dumps(record) + "\n", encoding="utf-8")
    result = cli("trials", "ingest", "edited.jsonl", "--json", cwd=ws)
    assert result.code == 2
    message = result.json()["error"]["message"]
    assert f"registry/tasks/{TASK}.yaml" in message and "evalops sync" in message, message


def test_an_unknown_build_lists_the_builds_in_force(demo: Path, cli: Cli) -> None:
    result = cli("gate", "check", "--build", "build-999", "--suite", "regression/core", cwd=demo)
    assert result.code == 2
    assert "build-123" in result.stderr and "build-125" in result.stderr


def test_a_mistyped_build_suggests_the_build_meant(demo: Path, cli: Cli) -> None:
    result = cli("gate", "check", "--build", "bulid-124", "--suite", "regression/core", cwd=demo)
    assert result.code == 2 and result.stderr.count("\n") == 1
    assert "did you mean 'build-124'?" in result.stderr, result.stderr


def test_a_profile_id_given_for_a_build_names_its_build_under_the_option_used(
    demo: Path, cli: Cli
) -> None:
    """Profile ids and builds look alike (`baseline-b123` is the profile of `build-123`):
    the error names the build meant, under the option that named the profile, which for
    `compare` is --baseline or --candidate (it has no --build)."""
    suite = ("--suite", "regression/core")
    cases = [
        (("gate", "check", "--build", "baseline-b123", *suite), "--build", "build-123"),
        (
            ("compare", "--baseline", "build-123", "--candidate", "candidate-b124", *suite),
            "--candidate",
            "build-124",
        ),
        (
            ("compare", "--baseline", "baseline-b123", "--candidate", "build-124", *suite),
            "--baseline",
            "build-123",
        ),
        (
            ("gate", "check", "--build", "build-124", "--baseline", "baseline-b123", *suite),
            "--baseline",
            "build-123",
        ),
    ]
    for args, option, build in cases:
        result = cli(*args, "--json", cwd=demo)
        assert result.code == 2, result.stdout
        error = result.json()["error"]
        assert error["field"] == option, (args, error)
        given = args[args.index(option) + 1]
        assert f"{given!r} is an execution profile id, whose build is {build}" in error["message"]
        assert f"pass {option} {build}" in error["message"]
        assert option == "--build" or "--build" not in error["message"]


def test_an_execution_that_is_not_the_builds_says_what_it_is(demo: Path, cli: Cli) -> None:
    """`--execution` naming a build, or another build's profile: "profile X in force is not
    for build B" claimed a profile X that may not exist."""
    check = ("gate", "check", "--build", "build-124", "--suite", "regression/core")
    a_build = cli(*check, "--execution", "build-124", cwd=demo)
    assert a_build.code == 2 and a_build.stderr.count("\n") == 1
    assert "--execution: no execution profile 'build-124' is in force" in a_build.stderr
    assert "build-124 is a build" in a_build.stderr and "candidate-b124" in a_build.stderr
    another = cli(*check, "--execution", "baseline-b123", cwd=demo)
    assert another.code == 2
    assert "'baseline-b123' in force is for build build-123, not build-124" in another.stderr
    typo = cli(*check, "--execution", "candidate-b12", cwd=demo)
    assert typo.code == 2
    assert "did you mean 'candidate-b124'?" in typo.stderr, typo.stderr


def test_a_baseline_with_two_profiles_is_not_sent_to_execution(demo: Path, cli: Cli) -> None:
    """--execution picks the candidate's profile: for a baseline build with two profiles in
    force, "pick one with --execution" was no way out."""
    executions = demo / "registry" / "executions"
    text = (executions / "baseline-b123.yaml").read_text(encoding="utf-8")
    second = text.replace("id: baseline-b123", "id: baseline-b123-bis").replace(
        'adapter_version: "2.4.0"', 'adapter_version: "2.4.1"'
    )
    assert second.count("baseline-b123-bis") == 1 and "2.4.1" in second
    (executions / "baseline-b123-bis.yaml").write_text(second, encoding="utf-8")
    commit_all(demo, "a second profile of build-123")
    assert cli("sync", cwd=demo).code == 0
    suite = ("--suite", "regression/core")
    for args in (
        ("gate", "check", "--build", "build-124", "--baseline", "build-123", *suite),
        ("compare", "--baseline", "build-123", "--candidate", "build-124", *suite),
    ):
        result = cli(*args, "--json", cwd=demo)
        assert result.code == 2, result.stdout
        error = result.json()["error"]
        assert error["field"] == "--baseline", error
        assert "baseline-b123, baseline-b123-bis" in error["message"]
        assert "--execution" not in error["message"]


def test_an_execution_given_by_its_build_names_the_profile_with_it(demo: Path, cli: Cli) -> None:
    result = cli("trials", "template", "--task", TASK, "--execution", "build-124", cwd=demo)
    assert result.code == 2
    assert result.stderr.count("\n") == 1, "one line"
    assert "system_build of execution profile 'candidate-b124'" in result.stderr, result.stderr
    assert "evalops sync" not in result.stderr, "syncing is not the fix"


def test_an_unknown_id_lists_what_exists_and_suggests_the_close_one(demo: Path, cli: Cli) -> None:
    missing = cli("promote", "frist-task", "--to", "regression/core", cwd=demo)
    assert missing.code == 2 and missing.stderr.count("\n") == 1
    assert "tasks registered: article-citation-format, " in missing.stderr, missing.stderr
    assert re.search(r", \S+ and \d+ more \(", missing.stderr), "a handful, then a count"
    assert "commit it and run `evalops sync`" in missing.stderr
    typo = cli("promote", "support-refund-in-ordr", "--to", "regression/core", cwd=demo)
    assert typo.code == 2
    assert "did you mean 'support-refund-in-order'?" in typo.stderr, typo.stderr
    suite = cli("gate", "check", "--build", "build-124", "--suite", "main", cwd=demo)
    assert suite.code == 2
    assert "suites in force: " in suite.stderr and "regression/core" in suite.stderr
    close = cli("gate", "check", "--build", "build-124", "--suite", "regression/cor", cwd=demo)
    assert "did you mean 'regression/core'?" in close.stderr, close.stderr
    unsynced = cli("trials", "template", "--task", "nope", "--execution", EXECUTION, cwd=demo)
    assert "`evalops sync`" in unsynced.stderr and "run evalops" not in unsynced.stderr


def test_an_unknown_numbered_id_is_named_in_words_with_the_id_meant(demo: Path, cli: Cli) -> None:
    for args, words in [
        (("gate", "show", "2"), "unknown gate decision '2'; did you mean GATE-2?"),
        (("report", "audit", "--gate", "gate-3"), "unknown gate decision 'gate-3'; did you"),
        (("incident", "show", "1"), "unknown incident '1'; did you mean INC-1?"),
        (("trials", "show", "2"), "unknown trial '2' (list them with `evalops trials list`)"),
        (("gate", "show", "GATE-99"), "unknown gate decision 'GATE-99' (list them with"),
    ]:
        result = cli(*args, cwd=demo)
        assert result.code == 2
        shown = result.stderr.removeprefix("error: ").removeprefix("--gate: ")
        assert shown.startswith(words), result.stderr
    as_json = cli("gate", "show", "2", "--json", cwd=demo).json()["error"]
    assert as_json["field"] is None, "no metavar (ID, TRIAL, INCIDENT) stands for a field"


def test_a_suite_not_yet_in_force_at_t_says_when_it_was(demo: Path, cli: Cli) -> None:
    result = cli(
        "gate", "check", "--build", "build-125", "--suite", "regression/core",
        "--at", "2000-01-01T00:00:00Z", "--dry-run", cwd=demo,
    )  # fmt: skip
    assert result.code == 2
    assert "was not yet in force at the --at time" in result.stderr
    assert "first synced at 20" in result.stderr


def test_an_empty_listing_is_a_line_of_words(tmp_path: Path, cli: Cli) -> None:
    assert cli("init", cwd=tmp_path).code == 0
    for args, words in [
        (("incident", "list"), "no incidents; record one with `evalops incident open"),
        (("waiver", "list"), "no waivers; `--all` lists expired and revoked ones too"),
        (("trials", "list"), "no trials; ingest some with `evalops trials ingest FILE`"),
        (("review", "list"), "no trials waiting for review; nothing awaits a human verdict"),
        (("calibration", "status"), "no model graders; add a grader of type model"),
    ]:
        result = cli(*args, cwd=tmp_path)
        assert result.code == 0, result.stderr
        assert result.stdout.startswith(words) and result.stdout.count("\n") == 1, result.stdout
        assert "┏" not in result.stdout, "no empty table"
        assert cli(*args, "--json", cwd=tmp_path).json() == []


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (
            ("trials", "list", "--task", "support-refund-in-ordr"),
            "no trials match --task support-refund-in-ordr; task 'support-refund-in-ordr' is "
            "not registered; did you mean 'support-refund-in-order'?",
        ),
        (
            ("gate", "list", "--build", "buld-124"),
            "no gate decisions match --build buld-124; build 'buld-124' is not registered; "
            "did you mean 'build-124'?",
        ),
        (
            ("trials", "list", "--task", "support-reply-tone", "--class", "hard_constraint_fail"),
            "no trials match --task support-reply-tone --class hard_constraint_fail\n",
        ),
        (
            ("incident", "list", "--state", "open"),
            "no incidents match --state open; 1 incident in other states (`evalops incident "
            "list` lists every state)",
        ),
    ],
)
def test_an_empty_filtered_listing_names_its_filters_and_any_naming_nothing(
    demo: Path, cli: Cli, args: tuple[str, ...], words: str
) -> None:
    """A typo in a filter answered "no trials; ingest some" while the registry held them:
    an empty filtered listing names its filters, and a filter naming nothing that exists
    is said as an unknown id is. Still exit 0 and `[]` in JSON: matching nothing is no error."""
    result = cli(*args, cwd=demo)
    assert result.code == 0, result.stderr
    assert result.stdout.startswith(words), result.stdout
    assert "ingest some" not in result.stdout and "record one" not in result.stdout
    assert cli(*args, "--json", cwd=demo).json() == []


def test_gate_show_says_it_shows_a_stored_decision(demo: Path, cli: Cli) -> None:
    shown = cli("gate", "show", "GATE-1", cwd=demo)
    assert shown.code == 0, "showing a block is not deciding one"
    assert shown.stdout.rstrip().splitlines()[-1].startswith("stored decision GATE-1")


def test_a_dry_run_promotion_of_a_member_says_already_a_member(demo: Path, cli: Cli) -> None:
    def events() -> int:
        con = sqlite3.connect(demo / ".evalops" / "registry.db")
        try:
            return int(con.execute("select count(*) from audit_event").fetchone()[0])
        finally:
            con.close()

    before = events()
    result = cli(
        "promote", "support-refund-in-order", "--to", "regression/core", "--dry-run", cwd=demo
    )
    assert result.code == 0, result.stderr
    assert "already a member with this pin" in result.stdout
    as_json = cli(
        "promote", "support-refund-in-order", "--to", "regression/core", "--dry-run", "--json",
        cwd=demo,
    )  # fmt: skip
    assert as_json.json()["outcome"] == "dry_run_noop"
    assert events() == before, "a dry run records nothing"


def test_a_missing_policy_file_is_named_as_missing(demo: Path, cli: Cli) -> None:
    result = cli(
        "gate", "check", "--build", "build-125", "--suite", "regression/core",
        "--policy", "lax.yaml", "--dry-run", cwd=demo,
    )  # fmt: skip
    assert result.code == 2
    assert "policy file not found: lax.yaml" in result.stderr
    assert "with --dry-run" not in result.stderr


# ------------------------------------------------------------------ tables and words

NARROW = 80
ANSI = re.compile(r"\x1b\[[0-9;]*m")
TABLE_EDGES = ("┏", "┃", "┡", "│", "└")


@pytest.fixture
def terminal_80(monkeypatch: pytest.MonkeyPatch) -> None:
    """A terminal of 80 columns (what rich reads from COLUMNS), without colour."""
    monkeypatch.setenv("COLUMNS", str(NARROW))
    monkeypatch.setenv("NO_COLOR", "1")
    # The class, not today's instance: the capture stream may be replaced between phases.
    monkeypatch.setattr(CaptureIO, "isatty", lambda self: True)


def _ids(rows: list[dict[str, Any]], *keys: str) -> set[str]:
    return {str(r[k]) for r in rows for k in keys if r.get(k)}


NARROW_LISTINGS: list[tuple[tuple[str, ...], Callable[[Any], set[str]]]] = [
    (("gate", "show", "GATE-1"), lambda d: _ids(d["tasks"], "task_id", "state")),
    (("gate", "show", "GATE-3"), lambda d: _ids(d["tasks"], "task_id", "state", "waiver_id")),
    (("trials", "list", "--limit", "12"), lambda d: _ids(d, "trial_id", "classification")),
    (("task", "list"), lambda d: _ids(d, "task_id")),
    (("suite", "show", "regression/core"), lambda d: _ids(d["members"], "task_id")),
    (("suite", "list"), lambda d: _ids(d, "suite")),
    (("suite", "coverage", "regression/core"), lambda d: _ids(d["rows"], "task_id", "item")),
    (("calibration", "status"), lambda d: _ids(d, "grader_id", "state")),
    (("incident", "list"), lambda d: _ids(d, "incident_id")),
]


@pytest.mark.parametrize(
    ("args", "ids_of"), NARROW_LISTINGS, ids=[" ".join(a) for a, _ in NARROW_LISTINGS]
)
def test_at_80_columns_no_identifier_is_cut(
    demo: Path,
    cli: Cli,
    terminal_80: None,
    args: tuple[str, ...],
    ids_of: Callable[[Any], set[str]],
) -> None:
    """Every table line fits 80 columns, and every id the listing shows is there whole, on
    one line (rich would fold `support-refund-policy-explanation` over two)."""
    from rich.cells import cell_len

    ids = ids_of(cli(*args, "--json", cwd=demo).json())
    assert ids, args
    result = cli(*args, cwd=demo)
    assert result.code == 0, result.stderr
    lines = ANSI.sub("", result.stdout).splitlines()
    too_wide = [line for line in lines if line.startswith(TABLE_EDGES) and cell_len(line) > NARROW]
    assert not too_wide, "\n".join(too_wide)
    words = {w.strip(";,") for line in lines for w in line.replace("│", " ").split()}
    missing = sorted(i for i in ids if i not in words)
    assert not missing, f"cut or missing: {missing}\n{result.stdout}"


def test_a_narrow_table_says_what_it_left_out(demo: Path, cli: Cli, terminal_80: None) -> None:
    result = cli("task", "list", cwd=demo)
    assert "left out git" in result.stderr and "--json has every field" in result.stderr
    digests = _ids(cli("task", "list", "--json", cwd=demo).json(), "task_digest")
    shown = ANSI.sub("", result.stdout)
    # A digest is shortened as git shortens a commit: its prefix, never a middle part.
    assert all(d[: len("sha256:") + 12] in shown for d in digests)


def test_the_narrow_note_fits_and_the_revision_outlasts_the_labels(
    demo: Path, cli: Cli, terminal_80: None
) -> None:
    """After a revision bump the revision is what a reader looks for in `task list`: it is
    the last column left out (it is narrow), after the grader set and the risk label; and
    the note saying what was left out is itself wrapped to the terminal."""
    result = cli("task", "list", cwd=demo)
    header = next(line for line in ANSI.sub("", result.stdout).splitlines() if "task" in line)
    assert "rev" in header.replace("┃", " ").split()
    assert "risk" not in header and "grader set" not in header
    note = result.stderr.split("showing")[0]
    assert "left out" in note
    assert all(len(line) <= NARROW for line in note.splitlines()), note
    assert "--json has every field" in " ".join(note.split())


def test_a_decisions_digest_lines_fit_80_columns(demo: Path, cli: Cli, terminal_80: None) -> None:
    """The policy and suite-digest lines of a decision held whole digests (136 columns): in
    a narrow terminal their digests are shortened as a table's are (a pipe keeps them whole,
    below)."""
    shown = ANSI.sub("", cli("gate", "show", "GATE-1", cwd=demo).stdout).splitlines()
    for start in ("  gate policy ", "  evaluated at "):
        (line,) = [line for line in shown if line.startswith(start)]
        assert len(line) <= NARROW and "sha256:" in line, line


def test_a_decisions_digest_lines_are_whole_in_a_pipe(demo: Path, cli: Cli) -> None:
    shown = cli("gate", "show", "GATE-1", cwd=demo).stdout
    whole = cli("gate", "show", "GATE-1", "--json", cwd=demo).json()
    assert f"suite_digest {whole['suite_digest']}" in shown


def test_piped_tables_keep_every_column(demo: Path, cli: Cli) -> None:
    """A pipe has no width: nothing is left out, shortened or reflowed."""
    result = cli("task", "list", cwd=demo)
    header = next(line for line in result.stdout.splitlines() if line.startswith("┃"))
    assert [c.strip() for c in header.strip("┃").split("┃")] == [
        "task", "rev", "risk", "task_digest", "grader set", "git",
    ]  # fmt: skip
    for digest in _ids(cli("task", "list", "--json", cwd=demo).json(), "task_digest"):
        assert digest in result.stdout
    assert "left out" not in result.stderr


@pytest.mark.parametrize("gate_id", ["GATE-1", "GATE-2", "GATE-3"])
def test_a_decision_lists_failing_tasks_first(demo: Path, cli: Cli, gate_id: str) -> None:
    tasks = cli("gate", "show", gate_id, "--json", cwd=demo).json()["tasks"]

    def rank(t: dict[str, Any]) -> int:
        if t["effect"] in ("block", "hold"):
            return ["block", "hold"].index(t["effect"])
        return 2 if t["waiver_id"] else 3

    expected = [t["task_id"] for t in sorted(tasks, key=rank)]
    assert len({rank(t) for t in tasks}) > 1 or gate_id == "GATE-3", "the demo mixes effects"
    shown = cli("gate", "show", gate_id, cwd=demo).stdout
    rows = [line.split("│")[1].strip() for line in shown.splitlines() if line.startswith("│")]
    assert rows == expected


def test_numbers_for_people_have_one_format(demo: Path, cli: Cli) -> None:
    """`pass^k 0.40`, `p=0.25`, `alpha 0.05`; a measure stored as an integer is `1.00`."""
    blocked = cli("gate", "show", "GATE-1", cwd=demo).stdout
    cells = [
        [c.strip() for c in line.split("│")[1:-1]]
        for line in blocked.splitlines()
        if line.startswith("│")
    ]
    header = next(line for line in blocked.splitlines() if line.startswith("┃"))
    columns = [c.strip() for c in header.strip("┃").split("┃")]
    for name in ("pass@k", "pass^k"):
        values = [row[columns.index(name)] for row in cells]
        assert all(re.fullmatch(r"\d\.\d\d+", v) for v in values), (name, values)
    assert "0.40" in [row[columns.index("pass^k")] for row in cells]
    assert re.search(r"p=\d\.\d\d", blocked)


# ------------------------------------------------------------------ colour

COLOUR = re.compile(r"\x1b\[[0-9;]*3[0-7]m")  # an SGR sequence that sets a foreground colour


@pytest.fixture
def a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setattr(CaptureIO, "isatty", lambda self: True)


def test_verdicts_and_effects_are_coloured_on_a_terminal(
    demo: Path, cli: Cli, a_terminal: None
) -> None:
    shown = cli("gate", "show", "GATE-1", cwd=demo).stdout
    assert shown.startswith("\x1b[1;31mBLOCK\x1b[0m: build-124"), shown[:80]
    effects = [line for line in shown.splitlines() if line.startswith("│")]
    assert all(COLOUR.search(line) for line in effects), effects
    listed = cli("gate", "list", cwd=demo).stdout.splitlines()
    verdicts = {"block": "31", "hold": "33", "pass": "32"}
    for line in listed:
        verdict = ANSI.sub("", line).split()[1]
        assert f"\x1b[1;{verdicts[verdict]}m{verdict}" in line, line


@pytest.mark.parametrize("no_color", [False, True], ids=["piped", "NO_COLOR"])
def test_no_colour_in_a_pipe_or_with_no_color(
    demo: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch, no_color: bool
) -> None:
    if no_color:
        monkeypatch.setenv("NO_COLOR", "1")
        monkeypatch.setattr(CaptureIO, "isatty", lambda self: True)
    for args in [
        ("gate", "show", "GATE-1"),
        ("gate", "list"),
        ("gate", "check", "--build", "build-125", "--suite", "regression/core", "--dry-run"),
    ]:
        result = cli(*args, cwd=demo)
        assert result.code in (0, 3, 4), result.stderr
        assert not COLOUR.search(result.stdout + result.stderr), args
        if not no_color:
            assert "\x1b" not in result.stdout + result.stderr, args


def test_a_real_terminal_gets_colour_and_a_pipe_none(demo: Path) -> None:
    """The same command in a pseudo-terminal and through a pipe (no patched isatty)."""
    import pty

    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    env.update(TERM="xterm", PYTHONPATH=str(REPO_ROOT))
    command = [sys.executable, "-m", "evalops", "gate", "list"]
    leader, follower = pty.openpty()
    try:
        subprocess.run(command, cwd=demo, env=env, stdout=follower, stderr=follower, check=True)
        os.close(follower)
        through_pty = b""
        while chunk := _read_available(leader):
            through_pty += chunk
    finally:
        os.close(leader)
    assert b"\x1b[1;31mblock" in through_pty, through_pty
    piped = subprocess.run(command, cwd=demo, env=env, capture_output=True, check=True)
    assert b"\x1b" not in piped.stdout + piped.stderr
    assert b"block" in piped.stdout


def _read_available(fd: int) -> bytes:
    try:
        return os.read(fd, 65536)
    except OSError:  # EIO: the terminal's other side is closed and drained
        return b""


# ------------------------------------------------------------------ help at 80 columns


def _help_pages() -> dict[tuple[str, ...], str]:
    """Every command's `--help` page, rendered as `--help` renders it (one command tree,
    not one CLI run per page)."""
    from evalops.cli.helpformat import click_module
    from evalops.cli.main import command_tree

    context = click_module().Context
    pages: dict[tuple[str, ...], str] = {}

    def walk(command: Any, path: tuple[str, ...], parent: Any) -> None:
        ctx = context(command, info_name=path[-1] if path else "evalops", parent=parent)
        pages[path] = command.get_help(ctx)
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            if not getattr(sub, "hidden", False):
                walk(sub, (*path, name), ctx)

    walk(command_tree(), (), None)
    return pages


def test_help_at_80_columns_never_breaks_a_word(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every help page at 80 columns holds the same words as at an unlimited width: no id
    is split at a hyphen (`build-` / `124`) or cut (`sqlite:///.eval` / `ops`)."""
    from evalops.cli.helpformat import click_module

    monkeypatch.setenv("COLUMNS", str(NARROW))
    narrow = _help_pages()
    assert len(narrow) > 40, sorted(narrow)
    monkeypatch.setattr(click_module().formatting, "FORCED_WIDTH", 10_000)
    wide = _help_pages()
    for path, page in narrow.items():
        assert all(len(line) <= NARROW for line in page.splitlines() if " " in line.strip()), path
        # A command's one-line summary may end early with `...` (click, at a word's end).
        wide_words = {w.removesuffix("...") for w in wide[path].split()}
        words = {w.removesuffix("...") for w in page.split()} - {"\\", ""}
        split = sorted(words - wide_words)
        assert not split, (path, split)


def test_a_help_example_is_a_pasteable_command(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", str(NARROW))
    result = cli("gate", "check", "--help")
    assert result.code == 0, result.stderr
    page = result.stdout
    example = page.split("Example:\n", 1)[1].split("\n\n", 1)[0]
    command = example.replace("\\\n", " ")
    assert shlex.split(command) == shlex.split(
        "evalops gate check --build build-124 --suite regression/core --baseline build-123"
    )
    assert all(len(line) <= NARROW for line in example.splitlines())
    assert all(line.endswith(" \\") for line in example.splitlines()[:-1]), (
        "a continued line ends with a backslash"
    )


def test_the_root_help_example_starts_a_registry_in_an_empty_directory(
    tmp_path: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`evalops --help` ends with one example: pasted into an empty directory, each of its
    commands succeeds (git run as a process, evalops in-process) and the registry is synced."""
    monkeypatch.setenv("COLUMNS", "200")
    page = cli("--help").stdout
    example = page.split("Example:", 1)[1].split("\n\n", 1)[0].replace("\\\n", " ")
    env = {**os.environ, "GIT_AUTHOR_NAME": "n", "GIT_AUTHOR_EMAIL": "n@example.com",
           "GIT_COMMITTER_NAME": "n", "GIT_COMMITTER_EMAIL": "n@example.com"}  # fmt: skip
    commands = [shlex.split(part) for part in example.split("&&")]
    assert [c[0] for c in commands] == ["git", "evalops", "evalops", "git", "git", "evalops"]
    for command in commands:
        if command[0] == "git":
            done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, check=False)
            assert done.returncode == 0, (command, done.stderr)
        else:
            result = cli(*command[1:], cwd=tmp_path)
            assert result.code == 0, (command, result.stdout + result.stderr)
    assert "first-task" in cli("task", "list", cwd=tmp_path).stdout
    # The first sync chose the tracked branch, and says so (docs/tutorial.md): a newcomer
    # trying things on a branch learns it before a sync from main changes nothing.
    branch = subprocess.run(
        ["git", "rev-parse", "--abbrev-ref", "HEAD"], cwd=tmp_path, capture_output=True,
        text=True, check=True,
    ).stdout.strip()  # fmt: skip
    tracking = (
        f"tracking {branch} at registry/: from now on only its commits change what is in "
        "force (`evalops registry track --branch B` changes that)"
    )
    assert tracking in result.stdout.splitlines(), result.stdout
    again = cli("sync", "registry", cwd=tmp_path)
    assert again.code == 0 and "tracking" not in again.stdout, again.stdout


def test_trials_show_puts_the_trajectory_in_words(demo: Path, cli: Cli) -> None:
    trial = "trial-b124-support-refund-in-order-2"
    block = cli("trials", "show", trial, "--json", cwd=demo).json()["trajectory"]
    assert block["mode"] == "in-order", block
    shown = cli("trials", "show", trial, cwd=demo).stdout
    line = next(x for x in shown.splitlines() if x.strip().startswith("trajectory:"))
    assert "{" not in line and '"' not in line, line
    verdict = "matched" if block["matched"] else "NOT matched"
    expected = (
        f"trajectory: {verdict} ({block['mode']}): {block['matchedCount']} of "
        f"{block['expectedCount']} expected calls matched, {block['observedCount']} observed, "
        f"{block['forbiddenCount']} forbidden"
    )
    assert line.strip() == expected


def test_gate_show_documents_its_exit_code(cli: Cli) -> None:
    page = " ".join(cli("gate", "show", "--help").stdout.split())
    assert "Exits 0 whatever the stored decision says" in page, page
