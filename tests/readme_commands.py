"""Run the command blocks of README.md, then docs/tutorial.md, in order, in a scratch
directory, and compare the output shown (the way cog and sqlite-utils keep their docs true).

- A ```console block is a terminal session: each `$ ` line is a command (a line ending in
  `\\` continues on the next), the lines after it up to the next `$ ` are its output
  (stdout and stderr together). A line `...` in the output stands for any number of lines.
- A ```sh block is a list of commands; each must exit 0 (their output is not compared).
- A ```text block right after a line `<!-- excerpt of the output above -->` is part of the
  output of the last command run before it (its lines in order, `...` for any lines, and
  any lines before and after): for long outputs shown in pieces. After
  `<!-- excerpt of the output of: PREFIX -->` it is part of the output of the latest
  command starting with PREFIX (e.g. `evalops demo`).
- A block right after a line `<!-- not run: REASON -->` is skipped (installing, a server,
  files that exist only on the reader's machine); the reason is required.

A command that is `evalops` with plain or quoted words runs in this process (the same
directory, environment and merged output as in the shell, without a new Python importing
evalops each time); anything else (pipes, redirections, globs, other programs) runs in
bash. Commands run one after another in one scratch directory, as a reader would type them:
`cd DIR` changes the directory for the commands after it, and `echo $?` prints the exit
code of the command before. `/tmp/` in a command means the scratch directory, and the
scratch directory prints as `/tmp/`.

Before comparing, both sides are normalized: digests (`sha256:` + hex, whole or cut),
RFC 3339 timestamps, git commit ids, SSH key fingerprints (`SHA256:` + base64: the demo
makes new keys every run), and trailing spaces. A digest shown whole (64 hex
digits) is then checked exactly as well (`digest_mismatches`): digests of specs and files do
not depend on the clock, so the README shows the ones a reader gets. Cut digests (an audit
head shown as `sha256:cbc7…`) stay normalized.

`python -m tests.readme_commands --update` runs every block and rewrites the output of the
console commands whose output no longer matches (keeping each `...` elision's first and
last lines), for when an output format changes on purpose. Review the diff.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
# Run in this order, in one scratch directory: the tutorial goes on from the README's demo.
DOCUMENTS = (README, ROOT / "docs" / "tutorial.md")
ELLIPSIS = "..."
NOT_RUN = re.compile(r"^<!-- not run: (?P<reason>\S.*?) -->$")
EXCERPT = re.compile(r"^<!-- excerpt of the output (?:above|of: (?P<prefix>\S.*?)) -->$")


@dataclass
class Step:
    command: str
    expected: list[str]  # console output lines (None-like empty for sh)
    line: int  # 1-based line of the command in its document
    output_span: tuple[int, int] = (0, 0)  # line indexes [start, end) of the output
    compare: bool = True
    source: str = "README.md"  # the document, relative to the repository


@dataclass
class Block:
    kind: str
    line: int
    steps: list[Step] = field(default_factory=list)
    skip: str | None = None
    excerpt_of: str = ""  # an excerpt: the command prefix whose output it shows ("": last)


def _source(document: Path) -> str:
    """How messages name a document: relative to the repository when it is in it."""
    try:
        return document.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return document.name


def parse_all(documents: tuple[Path, ...] = DOCUMENTS) -> list[Block]:
    """The blocks of every document, in the order they run; each step knows its source."""
    blocks: list[Block] = []
    for document in documents:
        found = parse(document.read_text(encoding="utf-8"))
        for block in found:
            for step in block.steps:
                step.source = _source(document)
        blocks.extend(found)
    return blocks


def parse(text: str) -> list[Block]:
    lines = text.split("\n")
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        fence = re.fullmatch(r"```(console|sh|text)\s*", lines[i])
        before = lines[i - 1].strip() if i else ""
        excerpt = EXCERPT.match(before)
        if not fence or (fence.group(1) == "text" and not excerpt):
            i += 1
            continue
        skip = NOT_RUN.match(before)
        block = Block(fence.group(1), i + 1, skip=skip.group("reason") if skip else None)
        j = i + 1
        body: list[tuple[int, str]] = []
        while j < len(lines) and not lines[j].startswith("```"):
            body.append((j, lines[j]))
            j += 1
        if block.kind == "text":
            block.kind = "excerpt"
            of = (excerpt.group("prefix") or "") if excerpt else ""
            block.steps = [Step("", [ELLIPSIS, *(t for _, t in body), ELLIPSIS], i + 1)]
            block.excerpt_of = of
        elif block.kind == "console":
            block.steps = _console_steps(body)
        else:
            block.steps = _sh_steps(body)
        blocks.append(block)
        i = j + 1
    return blocks


def _join(body: list[tuple[int, str]], k: int) -> tuple[str, int]:
    """The command starting at body[k] with its `\\` continuations; the next index."""
    command = body[k][1]
    while command.rstrip().endswith("\\") and k + 1 < len(body):
        k += 1
        command = command.rstrip()[:-1].rstrip() + " " + body[k][1].strip()
    return command, k + 1


def _console_steps(body: list[tuple[int, str]]) -> list[Step]:
    steps: list[Step] = []
    k = 0
    while k < len(body):
        index, text = body[k]
        if not text.startswith("$ "):
            k += 1  # text before the first prompt: not a command
            continue
        command, k = _join(body, k)
        start = body[k - 1][0] + 1
        expected = []
        while k < len(body) and not body[k][1].startswith("$ "):
            expected.append(body[k][1])
            k += 1
        end = start + len(expected)
        steps.append(Step(command[2:], expected, index + 1, (start, end)))
    return steps


def _sh_steps(body: list[tuple[int, str]]) -> list[Step]:
    steps: list[Step] = []
    k = 0
    while k < len(body):
        index, text = body[k]
        if not text.strip() or text.lstrip().startswith("#"):
            k += 1
            continue
        command, k = _join(body, k)
        steps.append(Step(command, [], index + 1, compare=False))
    return steps


_NORMALIZE = [
    (re.compile(r"sha256:[0-9a-f]{64}"), "sha256:<digest>"),
    (re.compile(r"sha256:[0-9a-f]{4,63}(?:…|\.\.\.)?"), "sha256:<digest>"),
    (
        re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})"),
        "<time>",
    ),
    (re.compile(r"\b[0-9a-f]{40}\b"), "<commit>"),
    # An SSH key fingerprint: the demo's keys are new every run.
    (re.compile(r"SHA256:[A-Za-z0-9+/]{43}"), "SHA256:<fingerprint>"),
    # evalops's short commit id: 12 hex digits, whatever they are. One in about 280 is
    # digits only (5/8 to the 12th), and the tutorial shows several: requiring a letter
    # made the test fail now and then.
    (re.compile(r"\b[0-9a-f]{12}\b"), "<commit>"),
    # git's short commit id: 7 to 11 hex digits, letters and digits both (so that a count
    # or a word is left alone).
    (re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,11}\b"), "<commit>"),
]


def normalize(lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        text = line
        for pattern, placeholder in _NORMALIZE:
            text = pattern.sub(placeholder, text)
        out.append(text.rstrip())
    while out and not out[-1]:
        out.pop()
    return out


def matches(expected: list[str], actual: list[str]) -> bool:
    """Normalized lines equal, a line `...` in `expected` standing for any lines."""
    want, got = normalize(expected), normalize(actual)
    pattern = "".join(
        r"(?:[^\n]*\n)*?" if line.strip() == ELLIPSIS else re.escape(line) + r"\n" for line in want
    )
    return re.fullmatch(pattern, "".join(line + "\n" for line in got)) is not None


FULL_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def digest_mismatches(expected: list[str], actual: list[str]) -> list[str]:
    """Expected lines showing a whole digest that no actual line shows with the same digests.

    A line is found by its normalized text (digests, times and commits as placeholders),
    then its whole digests must be the very ones printed.
    """
    printed: dict[str, list[list[str]]] = {}
    for line in actual:
        printed.setdefault(normalize([line])[0] if line.strip() else "", []).append(
            FULL_DIGEST.findall(line)
        )
    problems = []
    for line in expected:
        shown = FULL_DIGEST.findall(line)
        if not shown:
            continue
        candidates = printed.get(normalize([line])[0], [])
        if shown not in candidates:
            problems.append(f"shown {line.strip()!r}; printed {candidates or 'no such line'}")
    return problems


@dataclass
class Outcome:
    step: Step
    code: int
    output: list[str]
    ok: bool


class Session:
    """One reader at one shell: a working directory and the last exit code."""

    def __init__(self, scratch: Path) -> None:
        self.scratch = scratch
        self.cwd = scratch
        self.last = 0
        bin_dir = str(Path(sys.executable).parent)
        env = {k: v for k, v in os.environ.items() if not k.startswith("EVALOPS_")}
        env.update(
            PATH=bin_dir + os.pathsep + env.get("PATH", ""),
            PYTHONUNBUFFERED="1",
            EVALOPS_ACTOR="you@example.com",
            GIT_AUTHOR_NAME="You",
            GIT_AUTHOR_EMAIL="you@example.com",
            GIT_COMMITTER_NAME="You",
            GIT_COMMITTER_EMAIL="you@example.com",
            TZ="UTC",
        )
        env.pop("COLUMNS", None)
        self.env = env

    def run(self, command: str) -> tuple[int, list[str]]:
        command = command.replace("/tmp/", f"{self.scratch}/")
        if command.strip() == "echo $?":
            return 0, [str(self.last)]
        cd = re.fullmatch(r"cd (\S+)", command.strip())
        if cd:
            target = (self.cwd / cd.group(1)).resolve()
            if not target.is_dir():
                self.last = 1
                return 1, [f"cd: {cd.group(1)}: No such file or directory"]
            self.cwd = target
            self.last = 0
            return 0, []
        plain = _plain_evalops(command)
        if plain is not None:
            return self._in_process(plain)
        redirected = redirected_evalops(command)
        if redirected is not None:
            return self._in_process(*redirected)
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=self.cwd,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=600,
            check=False,
        )
        self.last = done.returncode
        output = done.stdout.replace(f"{self.scratch}/", "/tmp/").replace(str(self.scratch), "/tmp")
        lines = output.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        return done.returncode, lines

    def _in_process(self, args: list[str], stdout_to: str | None = None) -> tuple[int, list[str]]:
        """`evalops ARGS` run in this process, in the session's directory and environment,
        stdout and stderr together: what the shell would print, for a tenth of the CPU (a
        new Python process imports evalops and its dependencies again, every command).
        With `stdout_to` (`evalops ARGS > FILE`), stdout goes to that file instead, as the
        shell sends it: the file is made empty first, stderr is what is printed."""
        import contextlib
        import io
        import time

        from evalops.cli.main import main

        out = io.StringIO()
        to_file = io.StringIO() if stdout_to is not None else out
        saved_env, saved_cwd = dict(os.environ), Path.cwd()
        os.environ.clear()
        os.environ.update(self.env)
        time.tzset()
        os.chdir(self.cwd)
        try:
            if stdout_to is not None:
                Path(stdout_to).write_text("", encoding="utf-8")
            with contextlib.redirect_stdout(to_file), contextlib.redirect_stderr(out):
                code = main(args)
            if stdout_to is not None:
                Path(stdout_to).write_text(to_file.getvalue(), encoding="utf-8")
        finally:
            os.chdir(saved_cwd)
            os.environ.clear()
            os.environ.update(saved_env)
            time.tzset()
        self.last = code
        text = (
            out.getvalue().replace(f"{self.scratch}/", "/tmp/").replace(str(self.scratch), "/tmp")
        )
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        return code, lines


# What makes a command need the shell: pipes, redirections, variables, globs, chaining.
_SHELL = re.compile(r"[|&;<>$`*?(){}\[\]~!\\]")
_COMMENT = re.compile(r"\s+#.*$")


def _plain_evalops(command: str) -> list[str] | None:
    """The arguments of a command that is `evalops` and plain (or quoted) words only, a
    trailing comment aside; else None (bash runs it)."""
    import shlex

    command = _COMMENT.sub("", command)
    if _SHELL.search(command) or "#" in command:
        return None
    words = shlex.split(command)
    return words[1:] if words and words[0] == "evalops" else None


_TO_FILE = re.compile(r"(?P<command>[^>]+?)\s+>\s*(?P<file>[\w./-]+)")


def redirected_evalops(command: str) -> tuple[list[str], str] | None:
    """`evalops ARGS > FILE` with plain ARGS and a plain file name, a trailing comment
    aside: the arguments and the file; else None."""
    found = _TO_FILE.fullmatch(_COMMENT.sub("", command).strip())
    if found is None:
        return None
    args = _plain_evalops(found["command"])
    return None if args is None else (args, found["file"])


def run_all(blocks: list[Block], scratch: Path) -> list[Outcome]:
    session = Session(scratch)
    outcomes: list[Outcome] = []
    last: list[str] = []
    outputs: list[tuple[str, list[str]]] = []
    for block in blocks:
        if block.skip is not None:
            continue
        if block.kind == "excerpt":
            step = block.steps[0]
            source = last
            if block.excerpt_of:
                found = [out for cmd, out in outputs if cmd.startswith(block.excerpt_of)]
                source = found[-1] if found else []
            outcomes.append(Outcome(step, 0, source, matches(step.expected, source)))
            continue
        for step in block.steps:
            code, output = session.run(step.command)
            last = output
            outputs.append((step.command, output))
            ok = matches(step.expected, output) if step.compare else code == 0
            outcomes.append(Outcome(step, code, output, ok))
    return outcomes


def _elided(expected: list[str], actual: list[str]) -> list[str]:
    """The new output, keeping an elision: as many first and last lines as were shown."""
    if ELLIPSIS not in [line.strip() for line in expected]:
        return actual
    marks = [i for i, line in enumerate(expected) if line.strip() == ELLIPSIS]
    head, tail = marks[0], len(expected) - marks[-1] - 1
    if head + tail >= len(actual):
        return actual
    return actual[:head] + [ELLIPSIS] + (actual[len(actual) - tail :] if tail else [])


def update(documents: tuple[Path, ...] = DOCUMENTS) -> int:
    """Rewrite the output of every console command that no longer matches; the count."""
    blocks = parse_all(documents)
    with tempfile.TemporaryDirectory(prefix="readme-") as scratch:
        outcomes = run_all(blocks, Path(scratch))
    changed = 0
    for document in documents:
        source = _source(document)
        lines = document.read_text(encoding="utf-8").split("\n")
        mine = [o for o in outcomes if o.step.source == source]
        for outcome in reversed(mine):  # bottom up: earlier line numbers stay valid
            step = outcome.step
            if not outcome.ok and not step.command:
                print(f"{source}:{step.line}: this excerpt no longer matches: update it by hand")
                continue
            if outcome.ok or not step.compare:
                if not step.compare and not outcome.ok:
                    print(f"{source}:{step.line}: exit {outcome.code}: {step.command}")
                continue
            start, end = step.output_span
            lines[start:end] = _elided(step.expected, outcome.output)
            changed += 1
        document.write_text("\n".join(lines), encoding="utf-8")
    return changed


if __name__ == "__main__":
    if sys.argv[1:] == ["--update"]:
        print(f"rewrote the output of {update()} command(s) in README.md and docs/tutorial.md")
    else:
        sys.exit("usage: python -m tests.readme_commands --update")
