"""The docs ship with the project and cover the whole CLI.

Like sqlite-utils' documentation tests: the commands, options and exit codes are read from
the Typer app itself, so a new command or option fails here until docs/cli.md says what
it does.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalops import errors
from evalops.cli.main import command_tree

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
CLI_DOC = DOCS / "cli.md"


def _walk(command: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
    yield path, command
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from _walk(sub, (*path, name))


ROOT_COMMAND = command_tree()
COMMANDS = [
    (path, cmd)
    for path, cmd in _walk(ROOT_COMMAND, ())
    if path and not getattr(cmd, "commands", None)  # leaf commands
]


def _options(command: Any) -> list[str]:
    """The long name of every option (`-o/--output` -> `--output`)."""
    names = []
    for param in command.params:
        if param.param_type_name != "option":
            continue
        longs = [o for o in param.opts if o.startswith("--")]
        names.append(longs[0] if longs else param.opts[0])
    return names


def _sections(text: str) -> dict[str, str]:
    """Heading text (without `#` and backticks) -> the text up to the next heading."""
    out: dict[str, str] = {}
    parts = re.split(r"^(#{2,4} .+)$", text, flags=re.M)
    for heading, body in zip(parts[1::2], parts[2::2], strict=True):
        out[heading.lstrip("#").strip().strip("`")] = body
    return out


SECTIONS = _sections(CLI_DOC.read_text(encoding="utf-8"))


def test_the_command_list_is_read_from_the_app() -> None:
    # The introspection must see the real tree, or every test below passes vacuously.
    names = {" ".join(p) for p, _ in COMMANDS}
    assert {"init", "gate check", "trials import inspect", "new task", "db downgrade"} <= names
    assert len(COMMANDS) > 50


@pytest.mark.parametrize("path", [" ".join(p) for p, _ in COMMANDS])
def test_every_command_has_a_section(path: str) -> None:
    assert f"evalops {path}" in SECTIONS, f"docs/cli.md has no '### evalops {path}' section"


@pytest.mark.parametrize(
    ("path", "option"),
    [(" ".join(p), o) for p, cmd in COMMANDS for o in _options(cmd) if o not in ("--json", "-h")],
)
def test_every_option_is_documented_in_its_command_section(path: str, option: str) -> None:
    body = SECTIONS.get(f"evalops {path}", "")
    assert re.search(rf"`{re.escape(option)}[ `=]", body), (
        f"option {option} of `evalops {path}` is not documented in its docs/cli.md section"
    )


@pytest.mark.parametrize("option", [o for o in _options(ROOT_COMMAND) if o != "-h"])
def test_every_global_option_is_documented(option: str) -> None:
    assert re.search(rf"`{re.escape(option)}[ `]", SECTIONS["Global options"]), option


def _exit_codes() -> list[int]:
    codes = {v for k, v in vars(errors).items() if k.startswith("EXIT_") and isinstance(v, int)}
    return sorted(codes | {130})  # 130: interrupted (Ctrl-C), set in evalops.cli.main


@pytest.mark.parametrize("code", _exit_codes())
def test_every_exit_code_is_documented(code: int) -> None:
    assert re.search(rf"^\| {code} \| \S", SECTIONS["Exit codes"], flags=re.M), code


def test_every_error_class_exit_code_is_in_the_table() -> None:
    # An error class with a code of its own (not an EXIT_ constant) must be documented too.
    classes = [c for c in vars(errors).values() if isinstance(c, type) and hasattr(c, "exit_code")]
    for cls in classes:
        assert re.search(rf"^\| {cls.exit_code} \| ", SECTIONS["Exit codes"], flags=re.M), cls


def test_docs_pages_link_to_pages_that_exist() -> None:
    for page in DOCS.glob("*.md"):
        for target in re.findall(r"\]\(([^)#:]+\.md)(?:#[^)]*)?\)", page.read_text("utf-8")):
            assert (page.parent / target).is_file(), f"{page.name} links to missing {target}"


def test_every_docs_page_is_reachable_from_the_index() -> None:
    index = (DOCS / "README.md").read_text(encoding="utf-8")
    for page in DOCS.glob("*.md"):
        if page.name != "README.md":
            assert f"({page.name})" in index, f"docs/README.md does not link {page.name}"


def _help_texts() -> Iterator[tuple[str, str]]:
    for path, cmd in _walk(ROOT_COMMAND, ()):
        texts = [cmd.help or ""] + [getattr(p, "help", None) or "" for p in cmd.params]
        yield " ".join(path) or "evalops", "\n".join(texts)


def test_nothing_a_user_reads_cites_a_file_that_does_not_ship() -> None:
    # The design document is not in the clone or the wheel: --help, README, docs, comments,
    # the example registry users copy, benchmarks and the CHANGELOG point at docs/ and
    # ARCHITECTURE.md instead. (The name is spelled in two pieces so this file passes too.)
    name = "DESIGN" + ".md"
    for where, text in _help_texts():
        assert "DESIGN" not in text, f"`evalops {where} --help` cites {name}"
    tracked = (
        subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=False)
        .stdout.decode()
        .split("\0")
    )
    if not any(tracked):  # an sdist without git: every text file of the tree instead
        tracked = [str(f.relative_to(ROOT)) for f in ROOT.rglob("*") if f.is_file()]
    suffixes = {".py", ".md", ".yaml", ".yml", ".toml", ".txt", ".cfg", ".j2", ".html", ""}
    citing = []
    for relative in tracked:
        path = ROOT / relative
        if not relative or path.suffix not in suffixes or not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            if name in line or re.search(r"\bDESIGN sections? \d", line):
                citing.append(f"{relative}:{number}")
    assert not citing, f"cite docs/ or ARCHITECTURE.md instead of {name}: {citing[:20]}"


def test_comments_give_reasons_not_issue_numbers() -> None:
    # An issue number means nothing to a reader of the code; the CHANGELOG may name them.
    tracked = (
        subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=False)
        .stdout.decode()
        .split("\0")
    )
    numbered = re.compile(r"\b[Ii]ssues? \d+|\b[Ii]ssue-\d+")
    found = []
    for relative in tracked:
        path = ROOT / relative
        if relative in ("", "CHANGELOG.md") or path.suffix not in {".py", ".md", ".yaml", ".toml"}:
            continue
        if not path.is_file():
            continue
        for number, line in enumerate(path.read_text("utf-8", errors="replace").splitlines(), 1):
            if numbered.search(line):
                found.append(f"{relative}:{number}")
    assert not found, found[:20]


def test_every_docs_page_the_code_cites_exists() -> None:
    cited = set()
    for source in (ROOT / "evalops").rglob("*.py"):
        cited |= set(re.findall(r"docs/([a-z_-]+\.md)", source.read_text(encoding="utf-8")))
    assert cited, "help texts and errors should point at docs/"
    for page in sorted(cited):
        assert (DOCS / page).is_file(), f"the code cites docs/{page}, which does not exist"


def test_the_readme_is_a_front_page_and_the_walkthrough_is_the_tutorial() -> None:
    # The README says what evalops is, the two commands, a five-minute tour and where to go
    # next; the executed walk-through, development notes and dated figures live elsewhere.
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 300
    for target in ("docs/tutorial.md", "CONTRIBUTING.md", "ARCHITECTURE.md", "docs/README.md"):
        assert f"]({target}" in readme, target
        assert (ROOT / target).is_file(), target
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b.*\b(min|ms|CPU)\b", readme), "dated timings"


# `pip install evalops` (or `'evalops[zstd]'`) resolves the name on PyPI, where it belongs to
# an unrelated project: evalops installs from a checkout, a wheel or its repository's URL.
_FROM_PYPI = re.compile(
    r"pip install\s+(?:-\S+\s+)*['\"]?evalops(?:\[[\w,-]*\])?['\"]?(?!\s*@)(?=[\s`)'\".,;:]|$)"
)


def test_nothing_tells_users_to_install_evalops_from_pypi() -> None:
    sources = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
    sources += sorted((ROOT / "evalops").rglob("*.py"))
    found = []
    for path in sources:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if _FROM_PYPI.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, found


def test_the_pypi_pattern_tells_a_pypi_install_from_this_project() -> None:
    for line in (
        "pip install evalops",
        "run: pip install -U evalops",
        "Needs: pip install 'evalops[inspect]'.",
    ):
        assert _FROM_PYPI.search(line), line
    for line in (
        'pip install "evalops @ git+https://example.com/evalops@v0.1.0"',
        'pip install "evalops[inspect] @ git+https://example.com/evalops@v0.1.0"',
        "pip install '.[inspect]'",
        "pip install dist/evalops-0.1.0-py3-none-any.whl",
        "pip install evalops-lint",
    ):
        assert not _FROM_PYPI.search(line), line
