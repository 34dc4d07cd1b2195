"""Every command block of README.md and then docs/tutorial.md runs, in order, in a scratch
directory, and prints what the README shows (see tests/readme_commands.py for the rules;
`python -m tests.readme_commands --update` refreshes the outputs after an intended change).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import readme_commands as rc


@pytest.mark.slow  # several CPU seconds: `make test` runs it, `make test-fast` not
def test_readme_commands_print_what_the_readme_shows(tmp_path: Path) -> None:
    blocks = rc.parse_all()
    outcomes = rc.run_all(blocks, tmp_path)
    assert len(outcomes) >= 20, "the README should show real commands"
    failures = []
    for o in outcomes:
        if not o.ok:
            shown = "\n".join(o.output[-40:])
            what = "output differs" if o.step.compare else f"exit {o.code}"
            failures.append(f"{o.step.source}:{o.step.line}: {what}: $ {o.step.command}\n{shown}")
        for problem in rc.digest_mismatches(o.step.expected, o.output):
            failures.append(f"{o.step.source}:{o.step.line}: digest differs: {problem}")
    assert not failures, (
        "\n\n".join(failures)
        + "\n\n(after an intended output change: python -m tests.readme_commands --update)"
    )


def test_every_skipped_block_says_why() -> None:
    blocks = rc.parse_all()
    skipped = [b for b in blocks if b.skip is not None]
    assert all(b.skip.strip() for b in skipped)
    # Most of the README runs: only installing, servers, the reader's own files and
    # commands that would change what later examples show may not.
    assert len(skipped) < len(blocks) // 2, [b.line for b in skipped]


SAMPLE = """\
text
<!-- not run: needs a server -->
```sh
serve --forever
```

```console
$ echo one \\
    two
one two
$ printf 'a\\nb\\nc\\nd\\n'
a
...
d
$ echo sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef \
    at 2026-01-01T00:00:00Z
sha256:ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff at 2027-02-02T10:00:00.5Z
$ false
$ echo $?
1
```

```sh
true  # a comment
```
"""


def test_the_runner_parses_skips_elides_and_normalizes(tmp_path: Path) -> None:
    blocks = rc.parse(SAMPLE)
    assert [b.kind for b in blocks] == ["sh", "console", "sh"]
    assert blocks[0].skip == "needs a server"
    assert [s.command for s in blocks[1].steps][:2] == ["echo one two", "printf 'a\\nb\\nc\\nd\\n'"]
    outcomes = rc.run_all(blocks, tmp_path)
    assert [o.ok for o in outcomes] == [True, True, True, True, True, True]


@pytest.mark.parametrize(
    ("expected", "actual", "ok"),
    [
        (["a", "...", "d"], ["a", "b", "c", "d"], True),
        (["a", "...", "d"], ["a", "d"], True),
        (["a", "...", "d"], ["a", "b", "c"], False),
        (["a", "b"], ["a", "c"], False),
        (["x sha256:abcd1234abcd…"], ["x sha256:" + "0" * 64], True),
        (["at git 0123456789ab"], ["at git ba9876543210"], True),
        # A commit id of digits only (about one in 280) or of letters only is a commit id.
        (["at git 67c0e971418c"], ["at git 232121209746"], True),
        (["at git 67c0e971418c"], ["at git abcdefabcdef"], True),
        (["seen 1234567 times"], ["seen 7654321 times"], False),
        (["a   "], ["a"], True),
    ],
)
def test_matching(expected: list[str], actual: list[str], ok: bool) -> None:
    assert rc.matches(expected, actual) is ok


def test_a_whole_digest_is_checked_exactly_and_a_cut_one_is_not() -> None:
    digest = "sha256:" + "ab" * 32
    other = "sha256:" + "cd" * 32
    assert (
        rc.digest_mismatches(
            [f"registered task t: {digest}"], ["x", f"registered task t: {digest}"]
        )
        == []
    )
    assert rc.digest_mismatches([f"registered task t: {digest}"], [f"registered task t: {other}"])
    assert rc.digest_mismatches([f"registered task t: {digest}"], ["registered task u: x"])
    assert rc.digest_mismatches(["audit head 37:sha256:abab…"], [f"audit head 37:{other}"]) == []
    assert (
        rc.digest_mismatches(
            [f"at 2026-01-01T00:00:00Z {digest}"], [f"at 2027-02-02T10:00:00Z {digest}"]
        )
        == []
    )


def test_update_rewrites_only_what_differs_and_keeps_elisions(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(
        "```console\n$ printf 'a\\nb\\nc\\nd\\n'\na\n...\nd\n$ echo new\nold\n$ echo same\nsame\n"
        "$ printf '1\\n2\\n3\\n4\\n'\n0\n...\n```\n",
        encoding="utf-8",
    )
    assert rc.update((readme,)) == 2
    assert readme.read_text(encoding="utf-8") == (
        "```console\n$ printf 'a\\nb\\nc\\nd\\n'\na\n...\nd\n$ echo new\nnew\n$ echo same\nsame\n"
        "$ printf '1\\n2\\n3\\n4\\n'\n1\n...\n```\n"
    )


def test_an_excerpt_is_checked_against_the_output_before_it(tmp_path: Path) -> None:
    text = (
        "```console\n$ printf 'a\\nb\\nc\\nd\\n'\na\n...\n```\n\n"
        "<!-- excerpt of the output above -->\n```text\nb\nc\n```\n\n"
        "<!-- excerpt of the output above -->\n```text\nc\nb\n```\n\n"
        "```text\nnot checked\n```\n"
        "```console\n$ echo later\nlater\n```\n"
        "<!-- excerpt of the output of: printf -->\n```text\nc\n...\nd\n```\n"
        "<!-- excerpt of the output of: printf -->\n```text\nlater\n```\n"
    )
    blocks = rc.parse(text)
    assert [b.kind for b in blocks] == [
        "console",
        "excerpt",
        "excerpt",
        "console",
        "excerpt",
        "excerpt",
    ]
    assert [o.ok for o in rc.run_all(blocks, tmp_path)] == [True, True, False, True, True, False]


def test_a_command_redirected_to_a_file_runs_in_process_as_the_shell_would(
    tmp_path: Path,
) -> None:
    """`evalops ARGS > FILE`: stdout in the file, stderr printed, the exit code kept; any
    other redirection or shell word goes to bash."""
    assert rc.redirected_evalops("evalops a --b 'c d' > out.jsonl  # note") == (
        ["a", "--b", "c d"],
        "out.jsonl",
    )
    for command in ("evalops a 2> f", "evalops a >> f", "evalops a > f | cat", "git a > f"):
        assert rc.redirected_evalops(command) is None, command
    session = rc.Session(tmp_path)
    (tmp_path / "help.txt").write_text("stale", encoding="utf-8")
    code, printed = session.run("evalops --help > help.txt")
    assert (code, printed) == (0, [])
    assert (tmp_path / "help.txt").read_text(encoding="utf-8").startswith("Usage: evalops")
    code, printed = session.run("evalops no-such-command > none.txt")
    assert code == 2 and any("no-such-command" in line for line in printed)
    assert (tmp_path / "none.txt").read_text(encoding="utf-8") == ""
