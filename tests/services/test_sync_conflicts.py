"""`evalops sync` refuses a definition changed in place under a registered natural key
(docs/digests.md and docs/gate.md: an (id, revision) or (id, version) keeps one identity
digest, risk labels never change in place, a suite never changes kind), naming the row
registered under that very key, and reads what is registered one table at a time: a
registry of many files synced unchanged costs as many statements as one of a few.

Expected digests are read from the database with `sqlite3`, expected lines from the files'
text, and the number of statements is traced by the driver itself."""

from __future__ import annotations

import copy
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import event
from sqlalchemy.engine import Engine

from tests.conftest import Cli
from tests.helpers import MINI_TASK, commit_all, write_yaml

DB = Path(".evalops/registry.db")
TASKS = Path("registry/tasks")


def _task(task_id: str, revision: int = 1, goal: str | None = None) -> dict[str, Any]:
    spec = copy.deepcopy(MINI_TASK)
    spec["id"], spec["revision"] = task_id, revision
    spec["contract"]["goal"] = goal or f"goal_of_{task_id.replace('-', '_')}"
    return spec


def _write_task(ws: Path, spec: dict[str, Any]) -> None:
    write_yaml(ws / TASKS / f"{spec['id']}.yaml", spec)


def _registered(ws: Path, sql: str, *params: object) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(ws / DB)
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.close()


def _sql(ws: Path, statement: str, *params: object) -> None:
    """An edit of the registry by direct SQL, as an attacker or a careless admin makes it."""
    con = sqlite3.connect(ws / DB)
    try:
        con.execute(statement, params)
        con.commit()
    finally:
        con.close()


def _task_digest(ws: Path, task_id: str, revision: int) -> str:
    rows = _registered(
        ws,
        "SELECT DISTINCT task_digest FROM task_revision WHERE task_id = ? AND revision = ?",
        task_id,
        revision,
    )
    assert len(rows) == 1, rows
    return str(rows[0][0])


def _line_of(path: Path, key: str) -> int:
    """The 1-based line of the top-level `key:` in a YAML file, read from its text."""
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.startswith(f"{key}:"):
            return number
    raise AssertionError(f"{key} not in {path}")


def _counts(ws: Path) -> tuple[int, ...]:
    tables = ("task_revision", "grader_set", "suite", "audit_event", "sync_run")
    return tuple(_registered(ws, f"SELECT count(*) FROM {t}")[0][0] for t in tables)


#: What `validate` adds to each of `sync`'s refusals it warns of (docs/cli.md).
SYNC_REFUSES = "; `evalops sync` refuses the file as it is"


def _refusals(cli: Cli, ws: Path) -> list[dict[str, Any]]:
    """`sync`'s refusals, and `validate`'s warnings held to them: one rule, one wording,
    each refusal as `file:line: field: message` (the compiler-style line of docs/cli.md)."""
    validated = cli("validate", "--json", cwd=ws)
    assert validated.code == 0, validated.stdout + validated.stderr
    warned = [w for w in validated.json()["warnings"] if w.endswith(SYNC_REFUSES)]
    before = _counts(ws)
    refused = cli("sync", "--json", cwd=ws)
    assert refused.code == 2, refused.stdout + refused.stderr
    assert _counts(ws) == before, "a refused sync registers nothing"
    error = refused.json()["error"]
    errors = list(error.get("errors") or [error])
    assert sorted(w.removesuffix(SYNC_REFUSES) for w in warned) == sorted(
        f"{e['file']}:{e['line']}: {e['field']}: {e['message']}" for e in errors
    )

    # ... and `--json` lists them as `sync --json` does, field by field.
    def key(entry: dict[str, Any]) -> str:
        return str(entry["file"])

    assert sorted(validated.json()["refusals"], key=key) == sorted(errors, key=key)
    return errors


@pytest.fixture
def three(workspace: Path, cli: Cli) -> Path:
    """mini-task, task-b (revisions 1 and 2 registered) and task-c, synced."""
    for task_id in ("task-b", "task-c"):
        _write_task(workspace, _task(task_id))
    commit_all(workspace)
    assert cli("init", cwd=workspace).code == 0
    assert cli("sync", cwd=workspace).code == 0
    _write_task(workspace, _task("task-b", 2, goal="goal_of_task_b_two"))
    commit_all(workspace, "task-b revision 2")
    assert cli("sync", cwd=workspace).code == 0
    return workspace


def test_each_conflict_names_the_row_registered_under_its_own_key(three: Path, cli: Cli) -> None:
    """task-b's revision 2 and task-c's revision 1 edited in place: each refusal names the
    digest registered for that (id, revision), not another revision's or task's."""
    b2, c1 = _task_digest(three, "task-b", 2), _task_digest(three, "task-c", 1)
    assert len({b2, c1, _task_digest(three, "task-b", 1)}) == 3
    _write_task(three, _task("task-b", 2, goal="edited_in_place"))
    _write_task(three, _task("task-c", 1, goal="edited_in_place_too"))
    commit_all(three, "edits in place")
    found = {e["file"]: e for e in _refusals(cli, three)}
    assert sorted(found) == ["registry/tasks/task-b.yaml", "registry/tasks/task-c.yaml"]
    for task_id, revision, digest in (("task-b", 2, b2), ("task-c", 1, c1)):
        error = found[f"registry/tasks/{task_id}.yaml"]
        assert error["message"].startswith(
            f"task {task_id} revision {revision} is registered with task_digest {digest}, "
            "this file has sha256:"
        ), error
        assert error["message"].endswith(": bump revision")
        assert error["field"] == "revision"
        assert error["line"] == _line_of(three / TASKS / f"{task_id}.yaml", "revision")


def test_labels_changed_in_place_are_refused_and_a_new_revision_carries_them(
    three: Path, cli: Cli
) -> None:
    lowered = _task("task-b", 2, goal="goal_of_task_b_two")
    lowered["meta"]["risk"] = "noncritical_regression"
    lowered["meta"]["protects"] = []
    _write_task(three, lowered)
    commit_all(three, "labels in place")
    (error,) = _refusals(cli, three)
    assert error["field"] == "meta.risk"
    assert error["file"] == "registry/tasks/task-b.yaml"
    assert error["message"].startswith(
        "task task-b revision 2 is registered with meta.risk critical, this file says "
        "noncritical_regression: risk labels never change in place"
    ), error
    text = (three / TASKS / "task-b.yaml").read_text(encoding="utf-8").splitlines()
    assert text[error["line"] - 1].strip() == "risk: noncritical_regression"
    # Only the protected effect dropped (the risk kept): the other label is named.
    kept = _task("task-b", 2, goal="goal_of_task_b_two")
    kept["meta"]["protects"] = []
    kept["meta"]["risk"] = "critical"
    _write_task(three, kept)
    commit_all(three, "protects in place")
    (error,) = _refusals(cli, three)
    assert error["field"] == "meta.protects"
    assert "meta.protects ['external_effect'], this file says []" in error["message"], error
    # A new revision may carry new labels.
    lowered["revision"] = 3
    _write_task(three, lowered)
    commit_all(three, "labels in a new revision")
    assert cli("sync", cwd=three).code == 0
    assert _registered(
        three, "SELECT risk FROM task_revision WHERE task_id = 'task-b' AND revision = 3"
    ) == [("noncritical_regression",)]


def test_a_grader_set_version_and_a_suite_kind_changed_in_place_are_refused(
    three: Path, cli: Cli
) -> None:
    suite = three / "registry" / "suites" / "core.yaml"
    declared = {"spec_schema_version": "suite/v1", "id": "regression/core", "kind": "regression"}
    write_yaml(suite, declared)
    commit_all(three, "a suite")
    assert cli("sync", cwd=three).code == 0
    graders_path = three / "registry" / "graders" / "mini-graders.yaml"
    (registered,) = _registered(
        three, "SELECT DISTINCT grader_set_digest FROM grader_set WHERE grader_set_id = ?",
        "mini-graders",
    )  # fmt: skip
    graders = yaml.safe_load(graders_path.read_text(encoding="utf-8"))
    graders["graders"][0]["covers"] = ["something_else"]
    write_yaml(graders_path, graders)
    write_yaml(suite, {**declared, "kind": "capability"})
    commit_all(three, "edits in place")
    found = {e["file"]: e for e in _refusals(cli, three)}
    graders_error = found["registry/graders/mini-graders.yaml"]
    assert graders_error["message"].startswith(
        f"grader set mini-graders version 1 is registered with grader_set_digest {registered[0]}"
    ), graders_error
    assert graders_error["field"] == "version"
    assert graders_error["line"] == _line_of(graders_path, "version")
    suite_error = found["registry/suites/core.yaml"]
    assert suite_error["message"].startswith(
        "suite regression/core is registered as kind regression; a suite never changes kind"
    ), suite_error
    assert (suite_error["field"], suite_error["line"]) == ("kind", _line_of(suite, "kind"))


def _edit_stored_document(ws: Path, task_id: str, revision: int, edit: Any) -> None:
    """Change a registered task's stored document by direct SQL, its digests left alone."""
    con = sqlite3.connect(ws / DB)
    try:
        rows = con.execute(
            "SELECT id, document FROM task_revision WHERE task_id = ? AND revision = ?",
            (task_id, revision),
        ).fetchall()
        for row_id, document in rows:
            con.execute(
                "UPDATE task_revision SET document = ? WHERE id = ?",
                (edit(document), row_id),
            )
        con.commit()
    finally:
        con.close()


def test_labels_edited_in_the_database_are_refused_though_its_digest_matches_the_file(
    three: Path, cli: Cli
) -> None:
    """The gate reads a task's labels from its stored document: a document whose labels
    were lowered by SQL, its digest left as the file's, is no file's labels (verify names
    the edit; sync refuses to build on it)."""
    import json

    def lowered(document: str) -> str:
        value = json.loads(document)
        value["meta"]["risk"], value["meta"]["protects"] = "quality_signal", []
        return json.dumps(value)

    _edit_stored_document(three, "task-c", 1, lowered)
    commit_all(three, "nothing changed in the files")
    (error,) = _refusals(cli, three)
    assert error["file"] == "registry/tasks/task-c.yaml"
    assert error["field"] == "meta.risk"
    assert error["message"].startswith(
        "task task-c revision 1 is registered with meta.risk quality_signal, this file says "
        "critical"
    ), error


@pytest.mark.parametrize(
    "document",
    [
        "[]",
        '{"meta": 1}',
        "null",
        "not json",
        # Labels, but no trial plan: the gate could not read it either.
        '{"meta": {"risk": "critical", "protects": ["external_effect"]}}',
    ],
)
def test_a_stored_document_that_is_no_task_is_named_not_a_crash(
    three: Path, cli: Cli, document: str
) -> None:
    _edit_stored_document(three, "task-c", 1, lambda _old: document)
    commit_all(three, "nothing changed in the files")
    (error,) = _refusals(cli, three)
    assert error["file"] == "registry/tasks/task-c.yaml"
    assert error["message"] == (
        "task task-c revision 1 is registered with a document that is not a task's: the "
        "database was changed outside evalops (run `evalops verify`)"
    )


def test_a_json_task_s_refusal_names_the_line_in_its_json_text(workspace: Path, cli: Cli) -> None:
    """A JSON file's line map is built when a message needs one: the line is still the
    line of the field in the file as written."""
    import json

    path = workspace / TASKS / "task-j.json"
    path.write_text(json.dumps(_task("task-j"), indent=3), encoding="utf-8")
    commit_all(workspace)
    assert cli("init", cwd=workspace).code == 0
    assert cli("sync", cwd=workspace).code == 0
    path.write_text(json.dumps(_task("task-j", goal="edited"), indent=3), encoding="utf-8")
    commit_all(workspace, "edited in place")
    (error,) = _refusals(cli, workspace)
    lines = path.read_text(encoding="utf-8").splitlines()
    expected = next(n for n, line in enumerate(lines, 1) if line.strip().startswith('"revision"'))
    assert (error["file"], error["line"], error["field"]) == (
        "registry/tasks/task-j.json",
        expected,
        "revision",
    )
    assert expected > 1


def test_protects_reordered_in_place_registers_the_document_under_the_same_digest(
    three: Path, cli: Cli
) -> None:
    """`protects` is a set: the same labels in another order are no change of labels, and
    the document (not its task_digest) is new."""
    both = _task("task-c")
    both["meta"]["protects"] = ["external_effect", "secrets"]
    _write_task(three, {**both, "revision": 2})
    commit_all(three, "task-c revision 2 protects two")
    assert cli("sync", cwd=three).code == 0
    both["meta"]["protects"] = ["secrets", "external_effect"]
    _write_task(three, {**both, "revision": 2})
    commit_all(three, "the same two, reordered")
    synced = cli("sync", "--json", cwd=three)
    assert synced.code == 0, synced.stdout + synced.stderr
    assert synced.json()["same_digest"] == [{"kind": "task", "id": "task-c"}]
    assert len(_registered(three, "SELECT id FROM task_revision WHERE task_id = 'task-c'")) == 3


@pytest.fixture
def statements() -> Iterator[list[str]]:
    """Every statement `sqlite3` runs on a connection an engine opens meanwhile."""
    seen: list[str] = []

    def trace(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.set_trace_callback(seen.append)

    event.listen(Engine, "connect", trace)
    yield seen
    event.remove(Engine, "connect", trace)


def _unchanged_sync_statements(ws: Path, cli: Cli, seen: list[str], tasks: int) -> int:
    for number in range(tasks):
        _write_task(ws, _task(f"task-{number:03d}"))
    commit_all(ws)
    assert cli("init", cwd=ws).code == 0
    assert cli("sync", cwd=ws).code == 0
    commit_all(ws, "nothing changed")  # an empty commit: the same files
    seen.clear()
    unchanged = cli("sync", "--json", cwd=ws)
    assert unchanged.code == 0, unchanged.stderr
    assert unchanged.json()["unchanged"] == tasks + 3
    return len(seen)


def test_an_unchanged_sync_costs_the_same_statements_for_3_or_30_tasks(
    workspace: Path, tmp_path: Path, cli: Cli, statements: list[str]
) -> None:
    """One query per table registered, not one per file (30,000 files: 30,000 queries)."""
    import shutil

    other = tmp_path / "other"
    shutil.copytree(workspace, other, symlinks=True)
    few = _unchanged_sync_statements(workspace, cli, statements, 3)
    many = _unchanged_sync_statements(other, cli, statements, 30)
    assert few == many, (few, many)


def test_validate_reads_what_is_registered_in_as_many_statements_for_3_or_30_tasks(
    workspace: Path, tmp_path: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`validate` compares with the registry by `sync`'s rule, one query per table (it made
    one per file), on its own `sqlite3` connection: every statement traced by the driver."""
    import shutil

    seen: list[str] = []
    real_connect = sqlite3.connect

    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        con: sqlite3.Connection = real_connect(*args, **kwargs)
        con.set_trace_callback(seen.append)
        return con

    other = tmp_path / "other"
    shutil.copytree(workspace, other, symlinks=True)
    counted = []
    for ws, tasks in ((workspace, 3), (other, 30)):
        for number in range(tasks):
            _write_task(ws, _task(f"task-{number:03d}"))
        commit_all(ws)
        assert cli("init", cwd=ws).code == 0
        assert cli("sync", cwd=ws).code == 0
        _write_task(ws, _task("task-000", goal="edited_in_place"))
        with monkeypatch.context() as patched:
            patched.setattr(sqlite3, "connect", traced)
            seen.clear()
            validated = cli("validate", "--json", cwd=ws)
        assert validated.code == 0, validated.stderr
        (warning,) = validated.json()["warnings"]
        assert warning.startswith("registry/tasks/task-000.yaml:") and "bump revision" in warning
        assert any("task_revision" in statement for statement in seen), seen
        counted.append(len(seen))
    assert counted[0] == counted[1], counted


@pytest.mark.postgres
def test_on_postgresql_each_refusal_names_its_own_row_and_a_sql_edit_of_labels(
    workspace: Path, cli: Cli, pg_url: str
) -> None:
    """The same rule on PostgreSQL (the rows read through the sync's own transaction): a
    task edited in place under each of two registered revisions, a grader set under its
    version, a suite's kind, and labels lowered by SQL under a matching digest; each
    registered value read back with psycopg."""
    import json

    import psycopg

    db = ("--db", pg_url)
    plain = pg_url.replace("+psycopg", "")
    suite = workspace / "registry" / "suites" / "core.yaml"
    declared = {"spec_schema_version": "suite/v1", "id": "regression/core", "kind": "regression"}
    write_yaml(suite, declared)
    for task_id in ("task-b", "task-c"):
        _write_task(workspace, _task(task_id))
    commit_all(workspace)
    assert cli(*db, "init", cwd=workspace).code == 0
    assert cli(*db, "sync", cwd=workspace).code == 0
    _write_task(workspace, _task("task-b", 2, goal="goal_of_task_b_two"))
    commit_all(workspace, "task-b revision 2")
    assert cli(*db, "sync", cwd=workspace).code == 0

    def registered(sql: str, *params: object) -> list[tuple[Any, ...]]:
        with psycopg.connect(plain) as conn:
            return conn.execute(sql, params).fetchall()

    digest_sql = (
        "SELECT DISTINCT task_digest FROM task_revision WHERE task_id = %s AND revision = %s"
    )
    b2, c1 = (registered(digest_sql, t, r)[0][0] for t, r in (("task-b", 2), ("task-c", 1)))
    _write_task(workspace, _task("task-b", 2, goal="edited_in_place"))
    _write_task(workspace, _task("task-c", 1, goal="edited_in_place_too"))
    write_yaml(suite, {**declared, "kind": "capability"})
    commit_all(workspace, "edits in place")
    counts = "SELECT (SELECT count(*) FROM task_revision), (SELECT count(*) FROM audit_event)"
    before = registered(counts)
    refused = cli(*db, "sync", "--json", cwd=workspace)
    assert refused.code == 2, refused.stdout + refused.stderr
    assert registered(counts) == before
    error = refused.json()["error"]
    found = {e["file"]: e for e in error.get("errors") or [error]}
    assert sorted(found) == [
        "registry/suites/core.yaml",
        "registry/tasks/task-b.yaml",
        "registry/tasks/task-c.yaml",
    ]
    for task_id, revision, digest in (("task-b", 2, b2), ("task-c", 1, c1)):
        assert found[f"registry/tasks/{task_id}.yaml"]["message"].startswith(
            f"task {task_id} revision {revision} is registered with task_digest {digest}, "
        )
    assert "never changes kind" in found["registry/suites/core.yaml"]["message"]

    # The files put back; task-c's stored labels lowered by SQL, its digests left alone.
    _write_task(workspace, _task("task-b", 2, goal="goal_of_task_b_two"))
    _write_task(workspace, _task("task-c"))
    write_yaml(suite, declared)
    commit_all(workspace, "the files as registered")
    assert cli(*db, "sync", cwd=workspace).code == 0
    with psycopg.connect(plain) as conn:
        row_id, document = conn.execute(
            "SELECT id, document FROM task_revision WHERE task_id = 'task-c'"
        ).fetchone() or (None, "")
        value = json.loads(document)
        value["meta"]["risk"], value["meta"]["protects"] = "quality_signal", []
        conn.execute(
            "UPDATE task_revision SET document = %s WHERE id = %s", (json.dumps(value), row_id)
        )
    commit_all(workspace, "nothing changed in the files")
    refused = cli(*db, "sync", "--json", cwd=workspace)
    assert refused.code == 2, refused.stdout + refused.stderr
    error = refused.json()["error"]
    assert (error["file"], error["field"]) == ("registry/tasks/task-c.yaml", "meta.risk")
    assert error["message"].startswith(
        "task task-c revision 1 is registered with meta.risk quality_signal, this file says "
        "critical"
    ), error


def _two_documents_of_task_c_revision_2(ws: Path, cli: Cli) -> tuple[Path, dict[str, Any]]:
    """task-c revision 2 registered twice under one task_digest: `protects` in one order,
    then the other (a new document, the same identity); the file left as the first."""
    first = _task("task-c", 2)
    first["meta"]["protects"] = ["external_effect", "secrets"]
    _write_task(ws, first)
    commit_all(ws, "task-c revision 2")
    assert cli("sync", cwd=ws).code == 0
    _write_task(
        ws, {**first, "meta": {**first["meta"], "protects": ["secrets", "external_effect"]}}
    )
    commit_all(ws, "reordered")
    assert cli("sync", cwd=ws).code == 0
    _write_task(ws, first)
    commit_all(ws, "back to the first document")
    rows = _registered(ws, "SELECT id FROM task_revision WHERE task_id = 'task-c' AND revision = 2")
    assert len(rows) == 2, rows
    return ws / TASKS / "task-c.yaml", first


def test_a_file_back_at_an_earlier_document_of_its_key_is_unchanged(three: Path, cli: Cli) -> None:
    """Any registered row holding the file's document makes it unchanged, not only the
    latest: a file put back to its first document registers nothing and says so."""
    _two_documents_of_task_c_revision_2(three, cli)
    before = _counts(three)
    synced = cli("sync", "--json", cwd=three)
    assert synced.code == 0, synced.stdout + synced.stderr
    files = [p for p in (three / "registry").rglob("*") if p.suffix in (".yaml", ".json")]
    assert synced.json()["unchanged"] == len(files), files  # every file, task-c's included
    assert _counts(three)[0] == before[0]


@pytest.mark.parametrize("which", ["earlier", "later"])
def test_every_row_of_a_key_is_compared_and_the_one_that_differs_is_named(
    three: Path, cli: Cli, which: str
) -> None:
    """Two rows registered under (task-c, 2); one of them edited by SQL (its labels
    lowered, its task_digest replaced): whichever it is, the refusal names what that row
    holds. A rule that read only the first or only the last row misses one of the two."""
    import json

    _two_documents_of_task_c_revision_2(three, cli)
    ids = [r[0] for r in _registered(
        three, "SELECT id FROM task_revision WHERE task_id = 'task-c' AND revision = 2 ORDER BY id"
    )]  # fmt: skip
    target = ids[0] if which == "earlier" else ids[1]
    ((document,),) = _registered(three, "SELECT document FROM task_revision WHERE id = ?", target)
    value = json.loads(document)
    value["meta"]["risk"] = "quality_signal"
    _sql(three, "UPDATE task_revision SET document = ? WHERE id = ?", json.dumps(value), target)
    (error,) = _refusals(cli, three)
    assert error["field"] == "meta.risk", error
    assert (
        "is registered with meta.risk quality_signal, this file says critical" in (error["message"])
    )
    forged = "sha256:" + "0" * 64
    _sql(three, "UPDATE task_revision SET task_digest = ? WHERE id = ?", forged, target)
    (error,) = _refusals(cli, three)
    assert error["field"] == "revision", error
    assert error["message"].startswith(
        f"task task-c revision 2 is registered with task_digest {forged}, this file has "
    ), error


def test_the_latest_registered_row_of_a_suite_gives_its_kind(three: Path, cli: Cli) -> None:
    """A suite's kind is its latest registered row's (the one in force): the file agreeing
    with it is no change of kind, whatever an older row says; disagreeing, it is refused."""
    suite = three / "registry" / "suites" / "core.yaml"
    declared = {"spec_schema_version": "suite/v1", "id": "regression/core", "kind": "regression"}
    write_yaml(suite, declared)
    commit_all(three, "a suite")
    assert cli("sync", cwd=three).code == 0
    write_yaml(suite, {**declared, "description": "the core regressions"})
    commit_all(three, "described")
    assert cli("sync", cwd=three).code == 0
    ids = [r[0] for r in _registered(three, "SELECT id FROM suite ORDER BY id")]
    assert len(ids) == 2, ids

    def kind_of(row_id: int, kind: str) -> None:
        _sql(three, "UPDATE suite SET kind = ? WHERE id = ?", kind, row_id)

    kind_of(ids[0], "capability")  # the older row only
    commit_all(three, "nothing changed in the files")
    unchanged = cli("sync", "--json", cwd=three)
    assert unchanged.code == 0, unchanged.stdout + unchanged.stderr
    kind_of(ids[0], "regression")
    kind_of(ids[1], "capability")  # the latest row
    (error,) = _refusals(cli, three)
    assert error["file"] == "registry/suites/core.yaml", error
    assert error["message"].startswith(
        "suite regression/core is registered as kind capability; a suite never changes kind"
    ), error
