"""`evalops init --registry DIR` and `evalops new KIND ID` write
commented starter files that `validate` accepts at once, and `init` keeps `.evalops/` out
of git."""

from __future__ import annotations

from pathlib import Path

import git
import pytest

from tests.conftest import Cli
from tests.helpers import commit_all

STARTER = {
    "tasks/first-task.yaml": ("task", "first-task"),
    "graders/first-task-graders.yaml": ("grader_set", "first-task-graders"),
    "executions/dev-build.yaml": ("execution_profile", "dev-build"),
    "suites/regression-main.yaml": ("suite", "regression/main"),
    "policies/release-gate.yaml": ("gate_policy", "release-gate"),
    "policies/default-suite-policy.yaml": ("suite_policy", "default-suite-policy"),
}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    git.Repo.init(tmp_path).close()
    return tmp_path


def _kinds(cli: Cli, cwd: Path) -> dict[str, str]:
    done = cli("validate", "registry", "--json", cwd=cwd)
    assert done.code == 0, done.stdout + done.stderr
    return {row["id"]: row["kind"] for row in done.json()["definitions"]}


def test_init_registry_writes_a_starter_that_validates_and_syncs(cli: Cli, repo: Path) -> None:
    done = cli("init", "--registry", "registry", cwd=repo)
    assert done.code == 0, done.stderr
    for rel in STARTER:
        text = (repo / "registry" / rel).read_text(encoding="utf-8")
        assert text.lstrip().startswith("#"), f"{rel} starts without a comment"
        assert f"wrote registry/{rel}" in done.stdout
    assert _kinds(cli, repo) == {i: kind for kind, i in STARTER.values()}
    commit_all(repo)
    synced = cli("sync", "registry", cwd=repo)
    assert synced.code == 0, synced.stderr
    assert "6 registered, 0 unchanged" in synced.stdout


def test_init_registry_json_lists_the_files(cli: Cli, repo: Path) -> None:
    done = cli("--json", "init", "--registry", "reg", cwd=repo)
    assert done.code == 0, done.stderr
    written = done.json()["written"]
    assert {(w["kind"], w["id"]) for w in written} == set(STARTER.values())
    assert all(Path(repo / w["file"]).is_file() for w in written)


def test_init_registry_refuses_to_overwrite(cli: Cli, repo: Path) -> None:
    task = repo / "registry" / "tasks" / "first-task.yaml"
    task.parent.mkdir(parents=True)
    task.write_text("# mine\n", encoding="utf-8")
    done = cli("init", "--registry", "registry", cwd=repo)
    assert done.code == 2
    assert "already exists: nothing was written" in done.stderr
    assert task.read_text(encoding="utf-8") == "# mine\n"
    assert not (repo / "registry" / "graders").exists()
    assert not (repo / ".evalops").exists()


def test_init_registry_in_a_clone_of_a_registry_points_at_plain_init(
    cli: Cli, tmp_path: Path
) -> None:
    """A teammate's fresh clone holds the registry but no database (it is ignored)."""
    repo, clone = tmp_path / "origin", tmp_path / "clone"
    git.Repo.init(repo).close()
    assert cli("init", "--registry", "registry", cwd=repo).code == 0
    commit_all(repo)
    git.Repo.clone_from(repo, clone).close()
    refused = cli("init", "--registry", "registry", cwd=clone)
    assert refused.code == 2
    assert "plain `evalops init` creates just the database" in refused.stderr
    assert cli("init", cwd=clone).code == 0
    assert cli("sync", "registry", cwd=clone).code == 0


def test_init_adds_dot_evalops_to_gitignore_once(cli: Cli, repo: Path) -> None:
    (repo / ".gitignore").write_text("*.pyc", encoding="utf-8")  # no final newline
    assert cli("init", cwd=repo).code == 0
    assert (repo / ".gitignore").read_text(encoding="utf-8") == "*.pyc\n.evalops/\n"
    assert cli("init", cwd=repo).code == 0
    assert (repo / ".gitignore").read_text(encoding="utf-8") == "*.pyc\n.evalops/\n"
    # The database is ignored: `git add -A` does not stage it.
    with git.Repo(repo) as r:
        r.git.add(A=True)
        staged = r.git.diff("--cached", "--name-only").split()
    assert staged == [".gitignore"]


def test_init_creates_gitignore_at_the_work_tree_root(cli: Cli, repo: Path) -> None:
    sub = repo / "evals"
    sub.mkdir()
    assert cli("init", cwd=sub).code == 0
    assert (repo / ".gitignore").read_text(encoding="utf-8") == ".evalops/\n"
    assert not (sub / ".gitignore").exists()


def test_init_outside_git_warns_that_sync_needs_git_and_ignores_the_database(
    cli: Cli, tmp_path: Path
) -> None:
    """Outside git, `sync` cannot read the starter: init says so before the user finds out,
    and the `git init && git add -A` it asks for must not commit the database."""
    done = cli("init", "--registry", "registry", cwd=tmp_path)
    assert done.code == 0, done.stderr
    warning = next(line for line in done.stderr.splitlines() if line.startswith("warning:"))
    assert str(tmp_path) in warning and "not in a git work tree" in warning
    assert "git init" in warning and "evalops sync" in warning
    next_step = next(line for line in done.stdout.splitlines() if line.startswith("next:"))
    assert next_step.index("git init") < next_step.index("evalops sync registry")
    assert (tmp_path / ".gitignore").read_text(encoding="utf-8") == ".evalops/\n"
    with git.Repo.init(tmp_path) as r:
        r.git.add(A=True)
        staged = r.git.diff("--cached", "--name-only").split()
    assert ".gitignore" in staged and "registry/tasks/first-task.yaml" in staged
    assert not [name for name in staged if name.startswith(".evalops")], staged
    again = cli("--json", "init", cwd=tmp_path)
    assert again.code == 0 and again.json()["warnings"] == []


def test_init_outside_git_leaves_gitignore_alone_for_a_database_elsewhere(
    cli: Cli, tmp_path: Path
) -> None:
    here = tmp_path / "here"
    here.mkdir()
    done = cli("--db", f"sqlite:///{tmp_path / 'elsewhere.db'}", "--json", "init", cwd=here)
    assert done.code == 0, done.stderr
    assert not (here / ".gitignore").exists()
    (warning,) = done.json()["warnings"]
    assert "not in a git work tree" in warning


def test_init_inside_git_has_no_warning(cli: Cli, repo: Path) -> None:
    done = cli("--json", "init", cwd=repo)
    assert done.code == 0 and done.json()["warnings"] == []
    assert "warning" not in done.stderr


def test_every_new_kind_validates_and_syncs(cli: Cli, repo: Path) -> None:
    steps = [
        ("new", "task", "refund-once"),  # brings refund-once-graders along
        ("new", "grader-set", "support-graders"),
        ("new", "task", "reply-tone", "--grader-set", "support-graders"),
        ("new", "execution", "candidate-b7"),
        ("new", "suite", "regression/payments"),
        ("new", "policy", "release-gate"),
        ("new", "policy", "entry-rules", "--type", "suite"),
    ]
    for args in steps:
        done = cli("--registry", "registry", *args, cwd=repo)
        assert done.code == 0, (args, done.stderr)
    assert _kinds(cli, repo) == {
        "refund-once": "task",
        "refund-once-graders": "grader_set",
        "support-graders": "grader_set",
        "reply-tone": "task",
        "candidate-b7": "execution_profile",
        "regression/payments": "suite",
        "release-gate": "gate_policy",
        "entry-rules": "suite_policy",
    }
    assert (repo / "registry" / "suites" / "regression-payments.yaml").is_file()
    assert cli("init", cwd=repo).code == 0
    commit_all(repo)
    synced = cli("sync", "registry", cwd=repo)
    assert synced.code == 0, synced.stderr


def test_new_takes_its_own_registry_option_and_json(cli: Cli, repo: Path) -> None:
    done = cli("new", "execution", "b1", "--registry", "elsewhere", "--json", cwd=repo)
    assert done.code == 0, done.stderr
    assert done.json() == {
        "written": [
            {"file": "elsewhere/executions/b1.yaml", "kind": "execution_profile", "id": "b1"}
        ]
    }


def test_new_refuses_an_existing_file_and_a_bad_id(cli: Cli, repo: Path) -> None:
    assert cli("new", "suite", "s1", "--registry", "r", cwd=repo).code == 0
    before = (repo / "r" / "suites" / "s1.yaml").read_bytes()
    again = cli("new", "suite", "s1", "--registry", "r", cwd=repo)
    assert again.code == 2
    assert "r/suites/s1.yaml" in again.stderr
    assert (repo / "r" / "suites" / "s1.yaml").read_bytes() == before
    bad = cli("new", "task", "Bad Id", "--registry", "r", cwd=repo)
    assert bad.code == 2
    assert "invalid id 'Bad Id'" in bad.stderr
    assert not (repo / "r" / "tasks").exists()


def test_new_task_reuses_a_grader_set_kept_under_another_file_name(cli: Cli, repo: Path) -> None:
    graders = repo / "registry" / "graders"
    graders.mkdir(parents=True)
    text = (Path(__file__).parents[2] / "registry" / "graders" / "support-graders.yaml").read_text(
        encoding="utf-8"
    )
    (graders / "support.yaml").write_text(text, encoding="utf-8")
    done = cli("new", "task", "t1", "--grader-set", "support-graders", "--registry", "registry",
               cwd=repo)  # fmt: skip
    assert done.code == 0, done.stderr
    assert sorted(p.name for p in graders.iterdir()) == ["support.yaml"]
    assert "grader_set" not in done.stdout


def _suite_doc(path: Path) -> dict[str, object]:
    import yaml

    doc: dict[str, object] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return doc


def test_starter_and_new_suites_name_their_policies(cli: Cli, repo: Path) -> None:
    """A new user's suites name the policies that govern them, so a second gate policy
    added later is never what silently decides their releases."""
    assert cli("init", "--registry", "registry", cwd=repo).code == 0
    starter = _suite_doc(repo / "registry" / "suites" / "regression-main.yaml")
    assert (starter["gate_policy"], starter["suite_policy"]) == (
        "release-gate",
        "default-suite-policy",
    )
    done = cli("--registry", "registry", "new", "policy", "zzz-lax", cwd=repo)
    assert done.code == 0, done.stderr
    assert cli("--registry", "registry", "new", "suite", "regression/more", cwd=repo).code == 0
    more = _suite_doc(repo / "registry" / "suites" / "regression-more.yaml")
    assert more["gate_policy"] == "release-gate"  # the starter's, not the newest file
    assert _kinds(cli, repo)["regression/more"] == "suite"


def test_a_new_suite_names_the_registrys_only_policies(cli: Cli, repo: Path) -> None:
    for args in (("new", "policy", "gate-b"), ("new", "policy", "rules-b", "--type", "suite")):
        assert cli("--registry", "registry", *args, cwd=repo).code == 0
    assert cli("--registry", "registry", "new", "suite", "capability/x", cwd=repo).code == 0
    doc = _suite_doc(repo / "registry" / "suites" / "capability-x.yaml")
    assert (doc["gate_policy"], doc["suite_policy"]) == ("gate-b", "rules-b")


@pytest.mark.parametrize(
    ("suite_id", "kind"),
    [
        ("capability/tickets", "capability"),
        ("estimation/eu-sessions", "estimation"),
        ("incidents/support", "incident_corpus"),
        ("regression/payments", "regression"),
        ("payments", "regression"),
    ],
)
def test_new_suite_takes_its_kind_from_its_id(
    cli: Cli, repo: Path, suite_id: str, kind: str
) -> None:
    """`evalops new suite capability/tickets` writes a capability suite (a newcomer who
    keeps the starter would otherwise get the stricter regression entry rules); an id that
    names no kind is a regression suite, as before. The file validates as written."""
    import yaml

    done = cli("--registry", "registry", "new", "suite", suite_id, cwd=repo)
    assert done.code == 0, done.stderr
    written = list((repo / "registry" / "suites").glob("*.yaml"))
    assert len(written) == 1, written
    assert yaml.safe_load(written[0].read_text("utf-8"))["kind"] == kind, written
    checked = cli("--registry", "registry", "validate", cwd=repo)
    assert checked.code == 0, checked.stderr
