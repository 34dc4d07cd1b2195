"""Test helpers: run the CLI in-process, build small registries and git repositories."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import json
import os
import shutil
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import git
import pytest
import yaml

if TYPE_CHECKING:
    from evalops.store.reader import Reader

REPO_ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_REGISTRY = REPO_ROOT / "registry"


# (base temporary directory, name) -> what `built_once` returned in this process: a process
# that runs several pytest sessions (mutmut does) never reuses an earlier session's directory.
_BUILT_HERE: dict[tuple[Path, str], Path] = {}


def built_once(factory: pytest.TempPathFactory, name: str, build: Callable[[Path], object]) -> Path:
    """A fixture directory built once per test run, even across xdist workers.

    `build(path)` creates `path` (it does not exist yet). Under pytest-xdist the first
    worker to arrive builds it under a lock; every worker then takes its own copy (so that
    a SQLite reader in one worker never races a copy in another), once: later calls in the
    same process return that copy, and without xdist the one build. Tests must copy the
    returned directory before changing anything in it.
    """
    key = (factory.getbasetemp(), name)
    if key not in _BUILT_HERE:
        _BUILT_HERE[key] = _built_once(factory, name, build)
    return _BUILT_HERE[key]


def _built_once(
    factory: pytest.TempPathFactory, name: str, build: Callable[[Path], object]
) -> Path:
    mine = factory.mktemp(name) / name
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        build(mine)
        pack_repositories(mine)
        return mine
    shared = factory.getbasetemp().parent  # common to every worker of this run
    path = shared / f"built-{name}" / name
    marker = shared / f"built-{name}.done"
    with open(shared / f"built-{name}.lock", "w", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not marker.exists():
                if path.parent.exists():
                    shutil.rmtree(path.parent)  # a build that failed half-way
                path.parent.mkdir()
                build(path)
                pack_repositories(path)
                marker.touch()
            shutil.copytree(path, mine, symlinks=True)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return mine


def children_of(pid: int) -> set[int]:
    """The child processes of `pid`, zombies included (/proc: every pid's parent)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == pid:
                found.add(int(entry.name))
    return found


def pack_repositories(root: Path) -> None:
    """Every git repository below `root` with its objects in one pack and no sample hooks,
    for a fixture directory that tests copy: a copy then creates a few dozen files instead
    of a directory and a file per loose object (half the CPU of copying the demo). What
    git reads from the repository is unchanged."""
    import subprocess

    for git_dir in root.rglob(".git"):
        if not git_dir.is_dir():
            continue
        for sample in (git_dir / "hooks").glob("*.sample"):
            sample.unlink()
        for args in (["repack", "-a", "-d", "-q"], ["prune-packed"]):
            subprocess.run(["git", *args], cwd=git_dir.parent, check=True, capture_output=True)


def _download_wheelhouse(path: Path) -> None:
    import subprocess
    import sys
    import tomllib

    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    wanted = [*pyproject["project"]["dependencies"], *pyproject["build-system"]["requires"]]
    # What hatchling asks for besides itself to build an editable install (`make demo`'s
    # `pip install -e .`: its get_requires_for_build_editable).
    wanted.append("editables~=0.3")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--dest", str(path), *wanted],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def wheelhouse_env(factory: pytest.TempPathFactory) -> dict[str, str]:
    """pip's environment for installing evalops (`make demo`, `pip install .`) from the
    wheels of its runtime dependencies and build backend, downloaded once per run.

    pip resolves them from the configured index as a user's pip would, once: a resolution
    against PyPI evaluates every file of every release of scipy, numpy and the rest (40,000
    links, about 11 CPU-s, most of an install's cost), and each install test paid it again.
    The installs then read only this directory (`PIP_NO_INDEX`). What they install is what
    pyproject.toml asks for (read here, so a dependency added there is downloaded too).
    """
    path = built_once(factory, "wheelhouse", _download_wheelhouse)
    return {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(path)}


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


def commit_all(repo_dir: Path, message: str = "registry") -> str:
    """git init (if needed), add everything, commit; returns the commit sha."""
    repo = git.Repo.init(repo_dir)
    try:
        with repo.config_writer() as config:
            config.set_value("user", "name", "evalops tests")
            config.set_value("user", "email", "tests@evalops.invalid")
        gitignore = repo_dir / ".gitignore"
        if not gitignore.exists():
            gitignore.write_text(".evalops/\n", encoding="utf-8")
        repo.git.add(A=True)
        repo.index.commit(message)
        return repo.head.commit.hexsha
    finally:
        repo.close()


def write_yaml(path: Path, value: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(value, sort_keys=False), encoding="utf-8")
    return path


# The entry rules of the example suite policy (docs/formats.md and docs/promotion.md), in order.
CAPABILITY_REQUIREMENTS = [
    "reproducible_fixture",
    "task_digest",
    "minimum_grader_coverage",
    "review_owner",
]
REGRESSION_REQUIREMENTS = [
    *CAPABILITY_REQUIREMENTS,
    "confirmed_failure_or_invariant",
    "stable_success_state",
    "calibrated_graders",
    "versioned_fixture",
    "grader_set_digest",
    "failure_owner",
]
ESTIMATION_REQUIREMENTS = [
    "frozen_sampling_frame",
    "production_population_definition",
    "weights",
    "update_policy",
]


MINI_TASK: dict[str, Any] = {
    "spec_schema_version": "eval-task/v1",
    "id": "mini-task",
    "revision": 1,
    "meta": {
        "title": "A minimal task",
        "owner": "owner@example.com",
        "risk": "critical",
        "protects": ["external_effect"],
        "failure_owner": "team-a",
    },
    "contract": {
        "goal": "do_the_thing",
        "environment": {"clock": "2026-09-06T00:00:00Z", "network_policy": "deny"},
        "success_state": {"done": True},
        "forbidden_effects": ["do_it_twice"],
    },
    "fixtures": {"onMiss": "fail", "toolResponses": []},
    "grader_set": "mini-graders",
}

MINI_GRADERS: dict[str, Any] = {
    "spec_schema_version": "grader-set/v1",
    "id": "mini-graders",
    "version": 1,
    "graders": [
        {
            "id": "outcome",
            "version": 1,
            "layer": "outcome",
            "type": "deterministic",
            "produces": ["task_pass", "task_fail"],
            "blocking": True,
            "covers": ["done"],
        },
        {
            "id": "no-twice",
            "version": 1,
            "layer": "hard_constraint",
            "type": "deterministic",
            "produces": ["hard_constraint_fail", "pass"],
            "blocking": True,
            "covers": ["do_it_twice"],
        },
    ],
}

MINI_EXECUTION: dict[str, Any] = {
    "spec_schema_version": "execution-profile/v1",
    "id": "mini-b1",
    "system_build": "build-1",
    "model": {"provider": "example", "name": "model-1"},
}


def write_mini_registry(root: Path) -> Path:
    """A small valid registry: one task, one grader set, one execution profile."""
    write_yaml(root / "tasks" / "mini-task.yaml", MINI_TASK)
    write_yaml(root / "graders" / "mini-graders.yaml", MINI_GRADERS)
    path = root / "executions" / "mini-b1.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(MINI_EXECUTION, indent=2), encoding="utf-8")
    return root


def copy_example_registry(dest: Path) -> Path:
    shutil.copytree(EXAMPLE_REGISTRY, dest)
    return dest


def sqlite_fingerprint(db_path: Path) -> str:
    """Bytes of the database and its WAL, plus a logical dump: equal means unchanged."""
    h = hashlib.sha256()
    for suffix in ("", "-wal"):
        p = Path(str(db_path) + suffix)
        h.update(p.read_bytes() if p.exists() else b"<absent>")
    con = sqlite3.connect(db_path)
    try:
        for line in con.iterdump():
            h.update(line.encode("utf-8"))
    finally:
        con.close()
    return h.hexdigest()


def _build_real_clock_demo(root: Path) -> None:
    from evalops.cli.demo import run_demo
    from evalops.cli.main import main

    with contextlib.redirect_stdout(io.StringIO()):
        run_demo(root, run_cli=main)


def real_clock_demo(factory: pytest.TempPathFactory) -> Path:
    """The finished demo on the real clock, built once per run: copy it before changing it."""
    return built_once(factory, "demo-real-clock", _build_real_clock_demo)


def run_quiet(*args: str, cwd: Path, db: str | None = None, actor: str) -> tuple[int, str]:
    """Run the CLI in-process outside a test function (module-scoped setup), with no
    EVALOPS_* environment; returns (code, stdout + stderr)."""
    from evalops.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    before = Path.cwd()
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("EVALOPS_")}
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main([*(["--db", db] if db else []), "--actor", actor, *args])
    finally:
        os.chdir(before)
        os.environ.update(saved)
    return code, out.getvalue() + err.getvalue()


# A blocking model grader guarding the mini task's forbidden effect (needs a calibration).
MINI_JUDGE: dict[str, Any] = {
    "id": "judge",
    "version": 1,
    "layer": "hard_constraint",
    "type": "model",
    "produces": ["hard_constraint_fail", "pass", "abstain"],
    "blocking": True,
    "covers": ["do_it_twice"],
    "model": {
        "provider": "example",
        "name": "judge-1",
        "prompt_hash": "sha256:" + "ab" * 32,
        "rubric_version": 1,
    },
    "calibration_requirements": {
        "min_holdout_items": 50,
        "min_precision_lower_bound": 0.8,
        "min_recall_lower_bound": 0.8,
        "min_human_agreement": 0.6,
    },
}


def copy_rows(source: str, target: str) -> None:
    """Every row of one registry database into another at the same revision (empty), with
    foreign keys off on PostgreSQL; its id sequences are moved past the copied rows."""
    from sqlalchemy import create_engine, select, text
    from sqlmodel import SQLModel

    import evalops.store.tables  # noqa: F401  (registers every table)

    src = create_engine(source.replace("postgresql://", "postgresql+psycopg://"))
    dst = create_engine(target.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with src.connect() as s, dst.begin() as d:
            postgres = dst.dialect.name == "postgresql"
            if postgres:
                d.execute(text("SET session_replication_role = replica"))
            for table in SQLModel.metadata.sorted_tables:
                rows = [dict(r._mapping) for r in s.execute(select(table))]
                if rows:
                    d.execute(table.insert(), rows)
                column = table.c.get("id")
                if postgres and rows and column is not None and column.autoincrement is not False:
                    d.execute(
                        text(
                            f"SELECT setval(pg_get_serial_sequence('{table.name}', 'id'), "
                            f"(SELECT max(id) FROM {table.name}))"
                        )
                    )
    finally:
        src.dispose()
        dst.dispose()


def store_state(workspace: Path, db_args: list[str], tables: tuple[str, ...]) -> object:
    """What must not change when a command is refused: the SQLite file's fingerprint, or on
    PostgreSQL (`db_args` = `["--db", URL]`) the row counts of `tables`."""
    import sqlalchemy as sa

    if not db_args:
        return sqlite_fingerprint(workspace / ".evalops" / "registry.db")
    engine = sa.create_engine(db_args[1].replace("postgresql://", "postgresql+psycopg://"))
    try:
        with engine.connect() as conn:
            return [conn.execute(sa.text(f"SELECT count(*) FROM {t}")).scalar() for t in tables]
    finally:
        engine.dispose()


@contextlib.contextmanager
def sqlite3_reader(db: Path) -> Iterator[Reader]:
    """The registry file `db` through the plain `sqlite3` reader the read commands use."""
    from evalops.store.reader import open_sqlite

    reader = open_sqlite(f"sqlite:///{db}", lock_timeout=5)
    assert reader is not None, "the plain sqlite3 path must open the registry"
    try:
        yield reader
    finally:
        reader.close()


@contextlib.contextmanager
def sqlalchemy_reader(url: str) -> Iterator[Reader]:
    """The database at `url` through a SQLAlchemy connection (the path PostgreSQL takes)."""
    from evalops.services.database import open_database
    from evalops.store.reader import engine_reader

    engine = open_database(url)
    try:
        with engine_reader(engine) as reader:
            yield reader
    finally:
        engine.dispose()
