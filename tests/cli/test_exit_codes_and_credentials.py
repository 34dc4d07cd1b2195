"""Exit codes, destructive operations and credentials (docs/verify.md,
"Destructive and failing operations").

- every bad database URL form exits 2 with the URL masked, never its secret; a missing
  database exits 2 with "run evalops init" and is not created;
- `--json` gives one JSON error document for every failure, internal errors included;
- `db downgrade` on a populated database exits 5 and changes nothing, and proceeds with
  `--force-destroy-data` (SQLite and PostgreSQL);
- git remotes and database URLs carrying secrets: no secret in any output, stored row or
  audit event.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import git
import pytest
from sqlalchemy import create_engine, text

from tests.conftest import Cli, pg_holding
from tests.helpers import sqlite_fingerprint

SECRET = "pw9Zq7xK"
DB = Path(".evalops") / "registry.db"

# Database URLs that cannot be used (unreachable, missing, malformed, unsupported), each
# with a secret in it; `masked` is what the message shows instead of the URL's secrets.
BAD_URLS = [
    pytest.param(f"postgresql://u:{SECRET}@127.0.0.1:1/db", "***", id="refused"),
    pytest.param(f"postgresql://u:{SECRET}@nohost.invalid/db", "***", id="unknown-host"),
    pytest.param(
        f"postgresql://postgres:{SECRET}@127.0.0.1:5432/evalops_no_such_db", "***",
        id="missing-pg-database",
    ),
    pytest.param(f"postgresql://u@127.0.0.1:1/db?password={SECRET}", "password=***",
                 id="query-password"),
    pytest.param(f"postgresql://127.0.0.1:1/db?sslmode=disable&password={SECRET}",
                 "password=***", id="query-password-second"),
    pytest.param(f"postgresql://u:{SECRET}@127.0.0.1:1/db?PASSWORD={SECRET}", "PASSWORD=***",
                 id="query-password-upper-case"),
    pytest.param(f"postgresql://127.0.0.1:1/db?sslpassword={SECRET}", "sslpassword=***",
                 id="query-sslpassword"),
    pytest.param(f"postgresql+psycopg://u:{SECRET}@127.0.0.1:1/db?token={SECRET}", "token=***",
                 id="query-token"),
    pytest.param(f"postgres://u:{SECRET}@127.0.0.1:1/db", "***", id="postgres-scheme"),
    pytest.param(f"POSTGRESQL://u:{SECRET}@127.0.0.1:1/db", "***", id="upper-case-scheme"),
    pytest.param(f"mysql://u:{SECRET}@h/db", "***", id="unsupported-backend"),
    pytest.param(f"nosuchdb://u:{SECRET}@h/db", "***", id="unknown-backend"),
    pytest.param(f"postgresql://u:{SECRET}@x/y@127.0.0.1:1/db", "***", id="slash-in-password"),
    pytest.param(f"postgresql://u:{SECRET}@127.0.0.1:99999/db", "***", id="port-out-of-range"),
    pytest.param(f"postgresql://u:{SECRET}@h:abc/db", "<unparseable URL>", id="port-not-a-number"),
    pytest.param(f"not a url {SECRET}", "<unparseable URL>", id="not-a-url"),
    # SQLite URL options: the driver warned and wrote anyway (mode=ro), or read a URI.
    pytest.param(f"sqlite:///elsewhere/registry.db?mode=ro&password={SECRET}", "password=***",
                 id="sqlite-options"),
    pytest.param(f"sqlite:///elsewhere/registry.db?mode=ro&uri=true&token={SECRET}",
                 "token=***", id="sqlite-uri-options"),
]  # fmt: skip

COMMANDS = [
    ("init",),
    ("task", "list"),
    ("gate", "list"),  # a read command: sqlite3 on a plain SQLite file, else SQLAlchemy
    ("sync",),
    ("verify",),
    ("db", "current"),
    ("db", "upgrade"),
    ("db", "downgrade", "base"),
    ("gate", "check", "--build", "b", "--suite", "s"),
]


def _no_leak(*texts: str) -> None:
    for text_ in texts:
        assert SECRET not in text_
        assert "Traceback" not in text_
        assert "internal error" not in text_


@pytest.mark.parametrize(("url", "masked"), BAD_URLS)
def test_a_bad_database_url_is_exit_2_with_the_url_masked(
    workspace: Path, cli: Cli, url: str, masked: str
) -> None:
    runs = [["--db", url, "--json", *c] for c in COMMANDS]
    runs += [["--db", url, *c] for c in (COMMANDS[0], COMMANDS[1])]  # human output too
    for args in runs:
        result = cli(*args, cwd=workspace)
        assert result.code == 2, (args, result.stdout, result.stderr)
        _no_leak(result.stdout, result.stderr)
        assert masked in result.stderr, (args, result.stderr)
        if "--json" in args:
            error = result.json()["error"]
            assert error["code"] == 2 and error["field"] == "--db"
            assert masked in error["message"]
    assert not (workspace / ".evalops").exists()


def test_a_sqlite_url_with_options_is_refused_before_anything_is_opened(
    synced: Path, cli: Cli
) -> None:
    """`?mode=ro` promised a read-only open the driver ignored (it warned and wrote): it is
    refused, naming the options, and the database is not touched."""
    db = synced / DB
    before = sqlite_fingerprint(db)
    for options, named in (("mode=ro", "(mode)"), ("mode=ro&uri=true", "(mode, uri)")):
        done = cli("--db", f"sqlite:///{db}?{options}", "verify", cwd=synced)
        assert done.code == 2, done.stdout + done.stderr
        assert f"SQLite URL options are not supported {named}" in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
    assert sqlite_fingerprint(db) == before
    assert not [p for p in synced.iterdir() if p.name.startswith("file:")]


def test_the_bad_url_forms_are_distinct_and_enough() -> None:
    urls = [p.values[0] for p in BAD_URLS]
    assert len(set(urls)) == len(urls) >= 15


def test_a_missing_database_is_exit_2_run_evalops_init_and_is_not_created(
    workspace: Path, cli: Cli
) -> None:
    for db in ("", "sqlite:///elsewhere/registry.db"):
        for command in [c for c in COMMANDS if c not in (("init",), ("db", "upgrade"))]:
            args = [*(["--db", db] if db else []), "--json", *command]
            result = cli(*args, cwd=workspace)
            assert result.code == 2, (args, result.stdout, result.stderr)
            assert "run `evalops init`" in result.json()["error"]["message"], args
            assert "Traceback" not in result.stderr
    assert not (workspace / ".evalops").exists()
    assert not (workspace / "elsewhere").exists()


# ------------------------------------------------------------- --json for every failure


def _one_json_error(stdout: str, code: int) -> dict[str, object]:
    document = json.loads(stdout)  # exactly one JSON document on stdout
    assert set(document) == {"error"}
    error: dict[str, object] = document["error"]
    assert set(error) == {"code", "message", "file", "line", "field"}
    assert error["code"] == code
    return error


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        pytest.param(["task", "list", "--bogus"], 2, "No such option", id="unknown-option"),
        pytest.param(["no-such-command"], 2, "No such command", id="unknown-command"),
        pytest.param(["--lock-timeout", "-1", "task", "list"], 2, "--lock-timeout",
                     id="bad-global-option"),
        pytest.param(["task", "show"], 2, "Missing argument", id="missing-argument"),
        pytest.param(["db", "upgrade", "nonsense"], 2, "nonsense", id="unknown-revision"),
        pytest.param(["db", "downgrade", "nonsense", "--force-destroy-data"], 2, "nonsense",
                     id="unknown-downgrade"),
        pytest.param(["task", "show", "no-such-task"], 2, "no-such-task", id="unknown-task"),
        pytest.param(["trials", "ingest", "missing.jsonl"], 2, "not found",
                     id="missing-file"),
        pytest.param(["db", "downgrade", "base"], 5, "--force-destroy-data", id="refused"),
    ],
)  # fmt: skip
def test_every_failure_gives_a_json_error(
    synced: Path, cli: Cli, args: list[str], code: int, says: str
) -> None:
    result = cli("--json", *args, cwd=synced)
    assert result.code == code, result.stdout + result.stderr
    error = _one_json_error(result.stdout, code)
    assert says in str(error["message"])
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("args", "field"),
    [
        pytest.param(["gate", "check", "--build", "build-1"], "--suite", id="missing-option"),
        pytest.param(["task", "list", "--bogus"], "--bogus", id="unknown-option"),
        pytest.param(["task", "show"], "ID", id="missing-argument"),
        pytest.param(["--lock-timeout", "-1", "task", "list"], "--lock-timeout",
                     id="bad-global-option"),
        pytest.param(["incident", "open", "--title", "t", "--severity", "bogus",
                      "--observed-at", "2026-01-01T00:00:00Z", "--trace-uri", "trace://x"],
                     "--severity", id="bad-choice"),
    ],
)  # fmt: skip
def test_a_usage_error_names_its_option_as_the_field(
    synced: Path, cli: Cli, args: list[str], field: str
) -> None:
    """Every error's JSON names the field it is about (docs/cli.md); click's own usage
    errors (a missing or unknown option, a bad value) too, by the option as typed."""
    result = cli("--json", *args, cwd=synced)
    assert result.code == 2, result.stdout + result.stderr
    assert _one_json_error(result.stdout, 2)["field"] == field


@pytest.mark.parametrize(
    ("args", "line"),
    [
        pytest.param(["gate", "check", "--build", "build-1"],
                     "error: Missing option '--suite'. (`evalops gate check -h` for help)",
                     id="missing-option"),
        pytest.param(["task", "list", "--bogus"],
                     "error: No such option: --bogus (`evalops task list -h` for help)",
                     id="unknown-option"),
        pytest.param(["task", "show"],
                     "error: Missing argument 'ID'. (`evalops task show -h` for help)",
                     id="missing-argument"),
        pytest.param(["gate", "check", "--suite", "regression/core", "--build"],
                     "error: Option '--build' requires an argument. (`evalops gate check -h`",
                     id="missing-value"),
        pytest.param(["--lock-timeout", "5", "gate", "check", "--build"],
                     "error: Option '--build' requires an argument. (`evalops gate check -h`",
                     id="missing-value-after-a-global-option"),
        # A global option's value that is also a command's name (`registry`) is a value.
        pytest.param(["--registry", "registry", "sync", "--track"],
                     "error: Option '--track' requires an argument. (`evalops sync -h`",
                     id="missing-value-after-a-value-named-like-a-command"),
    ],
)  # fmt: skip
def test_a_usage_error_is_one_line_naming_its_field_and_the_help(
    synced: Path, cli: Cli, args: list[str], line: str
) -> None:
    """As every other error (docs/cli.md, "Errors"): one line on stderr, the option named,
    and where the help is; click's own was four (usage, a hint, a blank line, the error)."""
    result = cli(*args, cwd=synced)
    assert result.code == 2
    assert result.stdout == ""
    (said,) = result.stderr.splitlines()
    assert said.startswith(line), said
    assert said.endswith(" -h` for help)"), said


def test_a_verification_failure_gives_a_json_error(synced: Path, cli: Cli) -> None:
    con = sqlite3.connect(synced / DB)
    con.execute("UPDATE audit_event SET actor = 'mallory' WHERE seq = 1")
    con.commit()
    con.close()
    result = cli("verify", "--json", cwd=synced)
    assert result.code == 6
    assert "audit seq 1" in str(_one_json_error(result.stdout, 6)["message"])


def test_an_internal_error_gives_a_json_error_without_a_traceback(
    synced: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    import evalops.services.database

    def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("simulated failure")

    monkeypatch.setattr(evalops.services.database, "make_engine", broken)
    result = cli("--json", "task", "list", cwd=synced)
    assert result.code == 1
    error = _one_json_error(result.stdout, 1)
    assert "internal error: RuntimeError: simulated failure" in str(error["message"])
    assert "Traceback" not in result.stderr and "this is a bug" in result.stderr


# ------------------------------------------------------------------ db downgrade


def _pg_state(url: str) -> list[tuple[str, int, str]]:
    """Every table with its row count and a digest of its rows: equal means unchanged."""
    import hashlib

    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with engine.connect() as conn:
            tables = conn.execute(
                text("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1")
            ).scalars()
            state = []
            for table in list(tables):
                rows = conn.execute(text(f'SELECT * FROM "{table}" ORDER BY 1')).all()
                digest = hashlib.sha256(repr(rows).encode()).hexdigest()
                state.append((table, len(rows), digest))
            return state
    finally:
        engine.dispose()


def _downgrade_is_refused_then_forced(cli: Cli, cwd: Path, db: list[str]) -> None:
    refused = cli(*db, "--json", "db", "downgrade", "base", cwd=cwd)
    assert refused.code == 5, refused.stdout + refused.stderr
    message = str(_one_json_error(refused.stdout, 5)["message"])
    assert "--force-destroy-data" in message
    assert "would be lost:" in refused.stderr and "audit events" in refused.stderr
    assert cli(*db, "verify", cwd=cwd).code == 0
    one_step = cli(*db, "db", "downgrade", "0001", cwd=cwd)
    assert one_step.code == 5, one_step.stdout + one_step.stderr
    forced = cli(*db, "--json", "db", "downgrade", "base", "--force-destroy-data", cwd=cwd)
    assert forced.code == 0, forced.stdout + forced.stderr
    data = forced.json()
    assert data["revision"] is None and data["destroyed"]["audit events"] >= 37  # the demo's
    assert cli(*db, "task", "list", cwd=cwd).code == 2  # gone: run evalops init


def test_a_one_step_downgrade_names_what_it_drops_and_that_upgrade_refuses_after(
    demo: Path, cli: Cli
) -> None:
    """`db downgrade -1` (no `--` needed) from 0005 drops the estimate table only: the
    warning named every audit event, trial and decision, which stay, and not the estimates,
    which go; and the registry could never be upgraded again, which it did not say."""
    import sqlite3

    with sqlite3.connect(demo / DB) as con:
        (estimates,) = con.execute("SELECT count(*) FROM estimate").fetchone()
    assert estimates > 0
    refused = cli("db", "downgrade", "-1", cwd=demo)
    assert refused.code == 5, refused.stdout + refused.stderr
    plural = "estimate" if estimates == 1 else "estimates"
    assert f"would be lost: {estimates} {plural}\n" in refused.stderr, refused.stderr
    assert "`verify` would fail from then on" in refused.stderr
    forced = cli("--json", "db", "downgrade", "--force-destroy-data", "-1", cwd=demo)
    assert forced.code == 0, forced.stdout + forced.stderr
    assert forced.json()["destroyed"] == {"estimates": estimates}
    with sqlite3.connect(demo / DB) as con:
        (trials,) = con.execute("SELECT count(*) FROM trial").fetchone()
    assert trials > 0  # what the old warning called lost is still there
    again = cli("db", "upgrade", cwd=demo)
    assert again.code == 6
    assert "dropped by a forced `db downgrade`" in again.stderr, again.stderr


def test_a_downgrade_dropping_empty_tables_is_refused_and_upgrade_brings_it_back(
    synced: Path, cli: Cli
) -> None:
    """A registry holding audit events but no estimate: one step down drops the empty
    estimate table. Refused all the same (the chain is there), saying `db upgrade` brings it
    back, which it does, verified; and a downgrade to the revision it is at changes nothing."""
    import sqlite3

    with sqlite3.connect(synced / DB) as con:
        assert con.execute("SELECT count(*) FROM estimate").fetchone() == (0,)
        (head,) = con.execute("SELECT version_num FROM alembic_version").fetchone()
    same = cli("db", "downgrade", head, cwd=synced)
    assert same.code == 0 and f"at {head}" in same.stdout, same.stdout + same.stderr
    refused = cli("db", "downgrade", "-1", cwd=synced)
    assert refused.code == 5, refused.stdout + refused.stderr
    assert "would be lost: no recorded row" in refused.stderr
    assert "`evalops db upgrade` brings it back as it was" in refused.stderr
    assert cli("db", "downgrade", "-1", "--force-destroy-data", cwd=synced).code == 0
    assert cli("db", "upgrade", cwd=synced).code == 0
    assert cli("verify", cwd=synced).code == 0


def test_downgrade_of_the_populated_demo_is_refused_on_sqlite(demo: Path, cli: Cli) -> None:
    before = sqlite_fingerprint(demo / DB)
    refused = cli("db", "downgrade", "base", cwd=demo)
    assert refused.code == 5
    assert sqlite_fingerprint(demo / DB) == before
    _downgrade_is_refused_then_forced(cli, demo, [])


@pytest.mark.postgres
def test_downgrade_of_a_populated_registry_is_refused_on_postgresql(
    demo: Path, cli: Cli, pg_url: str
) -> None:

    pg_holding(pg_url, demo)
    assert cli("--db", pg_url, "verify", cwd=demo).code == 0
    before = _pg_state(pg_url)
    refused = cli("--db", pg_url, "db", "downgrade", "base", cwd=demo)
    assert refused.code == 5
    assert _pg_state(pg_url) == before
    _downgrade_is_refused_then_forced(cli, demo, ["--db", pg_url])


# ----------------------------------------------------------- credentials in git remotes

# (remote, what provenance keeps); every secret fragment below must appear nowhere.
FRAGMENTS = (SECRET, "Zq7x", "tok3nABC", "p4ss@w0rd", "w0rd", "p4ss/w0rd", "p4ss%40w0rd")
REMOTES = [
    (f"https://user:{SECRET}@github.com/org/repo.git", "https://github.com/org/repo.git"),
    (f"HTTPS://user:{SECRET}@github.com/org/repo.git", "https://github.com/org/repo.git"),
    (f"HtTpS://user:{SECRET}@github.com:8443/org/repo", "https://github.com:8443/org/repo"),
    ("https://user:p4ss@w0rd@github.com/org/repo.git", "https://github.com/org/repo.git"),
    ("https://user:p4ss/w0rd@github.com/org/repo.git", "https://github.com/org/repo.git"),
    ("https://user:p4ss%40w0rd@github.com/org/repo.git", "https://github.com/org/repo.git"),
    ("https://github.com/org/repo.git?access_token=tok3nABC", "https://github.com/org/repo.git"),
    ("https://github.com/org/repo.git?ref=main&token=tok3nABC#frag",
     "https://github.com/org/repo.git"),
    ("https://github.com/org/repo.git#tok3nABC", "https://github.com/org/repo.git"),
    ("https://tok3nABC@github.com/org/repo.git", "https://github.com/org/repo.git"),
    ("https://x-access-token:tok3nABC@github.com/org/repo", "https://github.com/org/repo"),
    (f"ssh://git:{SECRET}@git.example.com:2222/org/repo.git",
     "ssh://git.example.com:2222/org/repo.git"),
    (f"git+ssh://user:{SECRET}@git.example.com/org/repo.git",
     "git+ssh://git.example.com/org/repo.git"),
    (f"user:{SECRET}@git.example.com:org/repo.git", "git.example.com:org/repo.git"),
    ("user:p4ss@w0rd@git.example.com:org/repo.git", "git.example.com:org/repo.git"),
    (f"ssh://user:{SECRET}@[::1]:2222/org/repo.git", "ssh://[::1]:2222/org/repo.git"),
]  # fmt: skip


def test_the_remote_forms_are_distinct_and_enough() -> None:
    assert len({r for r, _ in REMOTES}) == len(REMOTES) >= 15


def _everything_stored(db: Path) -> str:
    con = sqlite3.connect(db)
    try:
        return "\n".join(con.iterdump())
    finally:
        con.close()


@pytest.mark.parametrize(("remote", "kept"), REMOTES, ids=[f"remote-{i}" for i in range(16)])
def test_no_git_credential_reaches_output_rows_or_the_audit_chain(
    workspace: Path, cli: Cli, remote: str, kept: str
) -> None:
    repo = git.Repo(workspace)
    repo.create_remote("origin", remote)
    repo.close()
    outputs = []
    for args in (("init",), ("sync", "--json"), ("task", "list", "--json"),
                 ("task", "show", "mini-task"), ("task", "show", "mini-task", "--json"),
                 ("verify", "--json")):  # fmt: skip
        result = cli(*args, cwd=workspace)
        assert result.code == 0, (args, result.stdout, result.stderr)
        outputs += [result.stdout, result.stderr]
    stored = _everything_stored(workspace / DB)
    for fragment in FRAGMENTS:
        for where in (*outputs, stored):
            assert fragment not in where
    con = sqlite3.connect(workspace / DB)
    try:
        (git_remote,) = con.execute("SELECT git_remote FROM sync_run").fetchone()
    finally:
        con.close()
    assert git_remote == kept


# ------------------------------------------------------- secrets in working database URLs


@pytest.mark.postgres
def test_no_database_secret_reaches_output_rows_or_the_audit_chain(
    workspace: Path, cli: Cli, pg_url: str
) -> None:
    """The server trusts local connections, so URLs holding a password still connect."""
    rest = pg_url.split("://", 1)[1].split("@", 1)[1]
    forms = [
        f"postgresql://postgres:{SECRET}@{rest}",
        f"postgresql+psycopg://postgres:{SECRET}@{rest}",
        f"postgres://postgres:{SECRET}@{rest}",
        f"postgresql://postgres@{rest}?password={SECRET}",
        f"postgresql://postgres:{SECRET}@{rest}?sslmode=disable&password={SECRET}",
    ]
    outputs = []
    for n, url in enumerate(forms):
        for args in (("init",), ("db", "current"), ("db", "current", "--json"),
                     ("sync", "--json"), ("verify",), ("task", "list")):  # fmt: skip
            result = cli("--db", url, *args, cwd=workspace)
            assert result.code == 0, (n, args, result.stdout, result.stderr)
            outputs += [result.stdout, result.stderr]
        assert "***" in "".join(outputs[-12:])  # the URL is shown, masked
    for output in outputs:
        assert SECRET not in output
    engine = create_engine(pg_url)
    try:
        with engine.connect() as conn:
            tables = conn.execute(
                text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
            ).scalars()
            for table in list(tables):
                dump = repr(conn.execute(text(f'SELECT * FROM "{table}"')).all())
                assert SECRET not in dump, table
    finally:
        engine.dispose()


@pytest.mark.tampers
def test_gate_check_on_an_edited_membership_pin_points_to_verify(demo: Path, cli: Cli) -> None:
    """An edited pin made `gate check` die with an AssertionError (exit 1)."""
    con = sqlite3.connect(demo / DB)
    con.execute(
        "UPDATE suite_membership SET task_digest = 'sha256:' || substr(task_digest, 8, 63) "
        "|| '0' WHERE task_id = 'support-refund-in-order'"
    )
    con.commit()
    con.close()
    gate = cli("--json", "gate", "check", "--build", "build-124", "--suite", "regression/core",
               cwd=demo)  # fmt: skip
    assert gate.code == 2, gate.stdout + gate.stderr
    assert "evalops verify" in str(_one_json_error(gate.stdout, 2)["message"])
    verified = cli("verify", cwd=demo)
    assert verified.code == 6
    assert "suite_membership row" in verified.stderr


def test_a_waiver_for_a_build_no_execution_profile_names_is_exit_2(demo: Path, cli: Cli) -> None:
    before = sqlite_fingerprint(demo / DB)
    result = cli("--json", "waiver", "grant", "--task", "support-refund-policy-explanation",
                 "--suite", "regression/core", "--states", "task_fail", "--build", "no-such",
                 "--owner", "o", "--reason", "r", "--expires", "7d",
                 cwd=demo)  # fmt: skip
    assert result.code == 2
    assert _one_json_error(result.stdout, 2)["field"] == "--build"
    assert sqlite_fingerprint(demo / DB) == before


@pytest.mark.parametrize("args", [[], ["trials"], ["void"]], ids=["root", "trials", "void"])
def test_a_group_without_a_command_prints_its_help(synced: Path, cli: Cli, args: list[str]) -> None:
    """Not an error line: `evalops` alone, the first command most people type, prints the
    help page (click's "no args is help" is one of its usage errors, told apart here)."""
    result = cli(*args, cwd=synced)
    said = result.stdout + result.stderr
    assert said.startswith(f"Usage: evalops{''.join(' ' + a for a in args)} [OPTIONS]"), said
    assert "\\n" not in said and "error:" not in said
    assert len(said.splitlines()) > 5


@pytest.mark.parametrize("password", ["ion", "1", "ostg", "on"])
def test_a_short_password_is_masked_as_itself_not_inside_the_driver_s_words(
    tmp_path: Path, cli: Cli, password: str
) -> None:
    """The cause stays readable ("connection to server at "127.0.0.1", port 1 failed:
    Connection refused") and no `***` inside a word tells which letters the password has;
    the password itself, in the URL, is still masked."""
    url = f"postgresql+psycopg://bob:{password}@127.0.0.1:1/x"
    result = cli("--db", url, "gate", "list", cwd=tmp_path)
    assert result.code == 2, result.stdout + result.stderr
    assert "bob:***@127.0.0.1:1/x" in result.stderr
    assert f"bob:{password}@" not in result.stderr
    assert 'connection to server at "127.0.0.1", port 1 failed' in result.stderr
    assert result.stderr.count("***") == 1, result.stderr


@pytest.mark.postgres
def test_a_role_the_server_does_not_have_is_named_not_a_missing_database(
    tmp_path: Path, cli: Cli
) -> None:
    """PostgreSQL says `role "nobody" does not exist`: creating the database would not
    help, so the hint says to create the role or name another user."""
    from tests.conftest import require_postgres

    require_postgres()
    result = cli("--db", "postgresql+psycopg://nobody:pw@127.0.0.1:5432/postgres", "gate",
                 "list", cwd=tmp_path)  # fmt: skip
    assert result.code == 2, result.stdout + result.stderr
    assert 'role "nobody" does not exist' in result.stderr
    assert "create that role on the server, or name an existing user" in result.stderr
    assert "create the database" not in result.stderr
