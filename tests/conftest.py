from __future__ import annotations

import contextlib
import io
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from evalops.cli.main import main
from tests.helpers import (
    CliResult,
    built_once,
    commit_all,
    pack_repositories,
    write_mini_registry,
)

Cli = Callable[..., CliResult]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("EVALOPS_DATABASE_URL", "EVALOPS_REGISTRY", "EVALOPS_DEBUG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("EVALOPS_ACTOR", "tester@example.com")


# (audit head hash, decision row id) of every decision replayed cleanly in this process: a
# database whose chain ends in the same hash holds the same rows (the chain covers every
# row, docs/verify.md), so its decisions replay the same way. Tests that copy one fixture
# database and only read it do not replay its decisions again; a test that stores anything
# moves the head, and every decision of that database is replayed again.
_REPLAYED: set[tuple[str, int]] = set()


def _replay_all(databases: set[Path]) -> list[str]:
    """Replay every gate decision stored in these databases; list any that differ. Each
    decision of evaluator 4 is also decided by the frozen evaluator 3 over its trials
    loaded again, and each of evaluator 3 by evaluator 4; they must agree
    (`compact_differences`), and every decision's inputs, built by `gate check` through the
    ORM loader, must be what the plain-SQL loader `verify` uses rebuilds on `sqlite3`
    (evalops/services/verify/gate_inputs.py), byte for byte."""
    from sqlmodel import col, select

    from evalops.services.verify.decision_checks import rebuilt_inputs_problem, replay_row
    from evalops.store.engine import make_engine, read_session
    from evalops.store.queries import frozen_read
    from evalops.store.reader import open_sqlite
    from evalops.store.tables import AuditEvent, GateDecision

    problems = []
    for db in sorted(databases):
        engine = make_engine(f"sqlite:///{db}")
        # None for a database a test moved off the schema head: every command refuses it,
        # so no decision was stored there since; the ORM replay below still runs.
        plain = open_sqlite(f"sqlite:///{db}", lock_timeout=5)
        try:
            with read_session(engine) as session:
                # Nothing writes this database now: each decision's inputs look the
                # definitions in force up once per cutoff.
                frozen_read(session)
                head = session.exec(
                    select(AuditEvent.hash).order_by(col(AuditEvent.seq).desc()).limit(1)
                ).first()
                for row in session.exec(select(GateDecision)):
                    key = (str(head), int(row.id or 0))
                    if key in _REPLAYED:
                        continue
                    outcome = replay_row(row)
                    found = [f"{db}: {p}" for p in compact_differences(session, row)]
                    rebuilt = None if plain is None else rebuilt_inputs_problem(plain, row)
                    if rebuilt is not None:
                        found.append(f"{db}: {row.gate_id}: sqlite3 loader: {rebuilt}")
                    if not outcome["identical"]:
                        found.append(f"{db}: {row.gate_id}: {outcome['problems']}")
                    if not found:
                        _REPLAYED.add(key)
                    problems += found
        finally:
            if plain is not None:
                plain.close()
            engine.dispose()
    return problems


def compact_differences(session: Any, row: Any) -> list[str]:
    """The flat evaluator (4, per-task summaries: every new decision's) decides as the frozen
    evaluator 3 did, on every decision the tests store (docs/gate.md, "Evaluator 4").

    A stored evaluator-4 decision: its trials are loaded again from the registry at the
    decision's cutoff as evaluator 3 lists them; evaluator 3 over them decides what was
    stored (the only difference allowed is `firstResults` counted by class), and those
    listed inputs summarized (`compact_inputs`) are the stored inputs, byte for byte.
    A stored evaluator-3 decision: evaluator 4 decides it as stored from its inputs
    summarized, and from inputs loaded again by evaluator 4's streaming loader."""
    import json

    from evalops.domain.canonical import canonical_json
    from evalops.domain.gate_compact import compact_inputs, same_decision_as_evaluator_3
    from evalops.domain.gate_compact import evaluate as evaluate_compact
    from evalops.domain.legacy.gate_v3 import evaluate as evaluate_v3
    from evalops.services.gate.input_parts import GateRequest
    from evalops.services.gate.inputs import build_inputs, listed_inputs

    inputs = json.loads(row.inputs)
    if inputs.get("evaluator") == 4:
        if "request" not in inputs:
            return [f"{row.gate_id}: an evaluator-4 decision without its request"]
        listed = listed_inputs(
            session, GateRequest.from_dict(inputs["request"]), rebuild=True, evaluator=3
        )
        listed["gate_id"] = inputs["gate_id"]
        out = []
        stored = canonical_json(json.loads(row.result))
        if canonical_json(same_decision_as_evaluator_3(evaluate_v3(listed))) != stored:  # type: ignore[arg-type]
            out.append(f"{row.gate_id}: evaluator 3 over its listed trials decides otherwise")
        summarized = {**compact_inputs(listed), "evaluator": 4}
        if canonical_json(summarized) != canonical_json(inputs):
            out.append(f"{row.gate_id}: its listed trials summarized are not its inputs")
        return out
    if inputs.get("evaluator") != 3:
        return []
    expected = canonical_json(same_decision_as_evaluator_3(json.loads(row.result)))
    out = []
    if canonical_json(evaluate_compact(compact_inputs(inputs))) != expected:
        out.append(f"{row.gate_id}: evaluator 4 over its summarized inputs decides otherwise")
    if "request" in inputs:
        loaded = build_inputs(
            session, GateRequest.from_dict(inputs["request"]), rebuild=True, evaluator=4
        )
        loaded["gate_id"] = inputs["gate_id"]
        if canonical_json(evaluate_compact(loaded)) != expected:
            out.append(f"{row.gate_id}: evaluator 4 over its loaded inputs decides otherwise")
    return out


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest) -> Iterator[Cli]:
    """Run `evalops ARGS...` in-process (optionally in `cwd`); returns code, stdout, stderr.

    Afterwards every gate decision the test stored must replay byte for byte
    (docs/gate.md, "Replay"), unless the test is marked `tampers` (it damages decisions on purpose).
    """
    databases: set[Path] = set()

    def run(*args: str, cwd: Path | None = None) -> CliResult:
        before = Path.cwd()
        capsys.readouterr()
        if cwd is not None:
            os.chdir(cwd)
        try:
            code = main([str(a) for a in args])
            if "gate" in args and (Path.cwd() / ".evalops" / "registry.db").exists():
                databases.add((Path.cwd() / ".evalops" / "registry.db").resolve())
        finally:
            os.chdir(before)
        out, err = capsys.readouterr()
        return CliResult(code, out, err)

    yield run
    if databases and request.node.get_closest_marker("tampers") is None:
        problems = _replay_all(databases)
        assert not problems, f"stored gate decisions do not replay: {problems}"


@contextlib.contextmanager
def evalops_test_env() -> Iterator[None]:
    """The environment `_clean_env` gives a test, for session fixtures (which precede it)."""
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("EVALOPS_")}
    os.environ["EVALOPS_ACTOR"] = "tester@example.com"
    try:
        yield
    finally:
        for name in [k for k in os.environ if k.startswith("EVALOPS_")]:
            del os.environ[name]
        os.environ.update(saved)


def run_quietly(args: list[str], cwd: Path) -> None:
    """`evalops ARGS` in `cwd` for a session fixture; it must succeed."""
    out = io.StringIO()
    before = Path.cwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            code = main(args)
    finally:
        os.chdir(before)
    assert code == 0, (args, out.getvalue())


@pytest.fixture(scope="session")
def workspace_master(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The `workspace` repository, written and committed once per test process."""
    root = tmp_path_factory.mktemp("workspace-master")
    write_mini_registry(root / "registry")
    commit_all(root)
    pack_repositories(root)
    return root


@pytest.fixture(scope="session")
def synced_master(workspace_master: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`workspace_master` after `evalops init` and `evalops sync`, once per test process.

    `init` and `sync` cost far more than copying their result, and most tests only
    need a synced registry to start from; the tests of `init` and `sync` themselves run
    them on a fresh `workspace`.
    """
    root = tmp_path_factory.mktemp("synced-master") / "ws"
    shutil.copytree(workspace_master, root, symlinks=True)
    with evalops_test_env():
        run_quietly(["init"], root)
        run_quietly(["sync"], root)
    return root


@pytest.fixture
def workspace(workspace_master: Path, tmp_path: Path) -> Path:
    """A git repository holding a small valid registry in `registry/` (committed).

    A private copy (git history included) of one repository per test process.
    """
    shutil.copytree(workspace_master, tmp_path, symlinks=True, dirs_exist_ok=True)
    return tmp_path


@pytest.fixture
def synced(workspace: Path, synced_master: Path) -> Iterator[Path]:
    """`workspace` with an initialized SQLite database and the registry synced.

    The database is a private copy of `synced_master`'s, made from the very same commit.
    """
    shutil.copytree(synced_master / ".evalops", workspace / ".evalops", symlinks=True)
    yield workspace


PG_ADMIN_URL = os.environ.get(
    "EVALOPS_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


def _pg_reachable() -> str | None:
    import psycopg

    try:
        with psycopg.connect(PG_ADMIN_URL.replace("+psycopg", ""), connect_timeout=3):
            return None
    except psycopg.Error as exc:
        return str(exc).strip()


def require_postgres() -> None:
    """Fail in CI (CI=true: PostgreSQL tests must run), skip elsewhere, when the server at
    PG_ADMIN_URL is unreachable."""
    problem = _pg_reachable()
    if problem is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"PostgreSQL is required in CI and unreachable: {problem}")
        pytest.skip(f"PostgreSQL not reachable at {PG_ADMIN_URL}: {problem}")


@pytest.fixture
def pg_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test, dropped afterwards.

    In CI (CI=true) an unreachable server is a failure, never a skip.
    """
    import uuid

    import psycopg

    require_postgres()
    name = f"evalops_test_{uuid.uuid4().hex[:12]}"
    admin = PG_ADMIN_URL.replace("+psycopg", "")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base, _, _ = PG_ADMIN_URL.rpartition("/")
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# Template databases built once per test process (`pg_holding`): content digest -> name.
_PG_TEMPLATES: dict[str, str] = {}


def pg_holding(url: str, root: Path) -> None:
    """Make the fresh PostgreSQL database at `url` (from `pg_url`) hold the rows of the
    SQLite registry of `root` (`.evalops/registry.db`), at head: what
    `evalops --db URL init` in `root` followed by `copy_rows` gives.

    Those two run once per test process for each content of the SQLite file, into a
    template database; each test's database is then created from it by the server
    (`CREATE DATABASE ... TEMPLATE`), which costs the tests' processes nothing. Before,
    every PostgreSQL test built its schema and inserted the demo's rows through SQLAlchemy
    (about a second of CPU)."""
    import hashlib
    import uuid

    import psycopg

    from tests.helpers import copy_rows, run_quiet

    db = root / ".evalops" / "registry.db"
    content = hashlib.sha256()
    for part in (db, Path(f"{db}-wal")):
        content.update(part.read_bytes() if part.exists() else b"<absent>")
    admin = PG_ADMIN_URL.replace("+psycopg", "")
    base, _, name = url.rpartition("/")
    template = _PG_TEMPLATES.get(content.hexdigest())
    if template is None:
        template = f"evalops_template_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{template}"')
        code, output = run_quiet(
            "--db", f"{base}/{template}", "init", cwd=root, actor="tester@example.com"
        )
        assert code == 0, output
        copy_rows(f"sqlite:///{db}", f"{base}/{template}")
        _PG_TEMPLATES[content.hexdigest()] = template
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE "{name}"')
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')


@pytest.fixture(scope="session", autouse=True)
def _drop_pg_templates() -> Iterator[None]:
    yield
    if _PG_TEMPLATES:
        import psycopg

        with psycopg.connect(PG_ADMIN_URL.replace("+psycopg", ""), autocommit=True) as conn:
            for template in _PG_TEMPLATES.values():
                conn.execute(f'DROP DATABASE IF EXISTS "{template}" WITH (FORCE)')
        _PG_TEMPLATES.clear()


PINNED_NOW = "2026-11-30T12:00:00Z"
"""The clock of the shared demo database (EVALOPS_NOW, test-only): reports are reproducible."""


DEMO_REGISTRY_ID = "0e7a1d5a-4c1e-4f00-9d3e-0000000000de"
"""The demo's registry id in tests: drawn at random by evalops, fixed here (with the clock)
so that the golden reports' audit heads are reproducible."""


def build_demo(directory: Path) -> Path:
    """Run `evalops demo` into `directory` with the pinned clock and registry id; returns
    the directory."""
    from unittest import mock

    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("EVALOPS_")}
    os.environ["EVALOPS_NOW"] = PINNED_NOW
    out = io.StringIO()
    try:
        with (
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(out),
            mock.patch("evalops.store.audit.draw_registry_id", return_value=DEMO_REGISTRY_ID),
        ):
            code = main(["demo", "--dir", str(directory)])
    finally:
        os.environ.pop("EVALOPS_NOW", None)
        os.environ.update(saved)
    assert code == 0, out.getvalue()
    return directory


@pytest.fixture(scope="session")
def demo_master(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One demo database per test run (the demo takes seconds); never modified."""
    return built_once(tmp_path_factory, "demo", build_demo)


@pytest.fixture
def demo(demo_master: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private copy of the demo directory (registry, git, database), clock pinned."""
    copy = tmp_path / "demo"
    shutil.copytree(demo_master, copy, symlinks=True)
    monkeypatch.setenv("EVALOPS_NOW", PINNED_NOW)
    return copy


# ----------------------------------------------------------- parallel runs (pytest-xdist)
#
# `make test` runs `pytest -n auto --dist loadgroup`: tests go one by one to whichever worker
# is free, except that the tests sharing a module- or class-scoped fixture stay together
# (one worker builds that fixture once). The longest groups and the tests marked slow or
# load are handed out first, so no worker is left with a long one at the end.

_WIDE_SCOPES = ("module", "class", "package")


def _group_of(item: pytest.Item) -> str | None:
    """The module whose shared (module- or class-scoped) fixture this test uses, if any."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    for defs in info.name2fixturedefs.values():
        if any(d.scope in _WIDE_SCOPES for d in defs):
            return item.nodeid.split("::", 1)[0]
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    groups: dict[str, int] = {}
    for item in items:
        group = _group_of(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
            groups[group] = groups.get(group, 0) + 1

    def weight(item: pytest.Item) -> int:
        if item.get_closest_marker("slow") or item.get_closest_marker("load"):
            return 0
        return 1 if _group_of(item) is not None else 2

    items.sort(key=weight)  # stable: the order within a group and a module is kept


@pytest.fixture(params=["sqlite", "postgres"])
def synced_store(request: pytest.FixtureRequest, workspace: Path, cli: Cli) -> Iterator[list[str]]:
    """`--db` arguments of an initialized, synced store of `workspace` on either engine."""
    args: list[str] = []
    if request.param == "postgres":
        args = ["--db", request.getfixturevalue("pg_url")]
    assert cli(*args, "init", cwd=workspace).code == 0
    assert cli(*args, "sync", cwd=workspace).code == 0
    yield args
