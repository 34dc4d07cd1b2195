"""Every rejected line listed; a closed stdout keeps the
exit code; progress outside a terminal and Ctrl-C; stdin, gzip and zstd input."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Cli
from tests.helpers import sqlite_fingerprint
from tests.trial_factory import mini_case, record, write_jsonl

REPO_ROOT = Path(__file__).resolve().parents[2]


def _records(workspace: Path, n: int, prefix: str = "t") -> list[dict[str, Any]]:
    case = mini_case(workspace)
    return [record(case, trial_id=f"{prefix}-{i:05d}", trial_index=i) for i in range(n)]


def _lines(records: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def _stored(cli: Cli, workspace: Path) -> list[str]:
    return [r["trial_id"] for r in cli("trials", "list", "--json", cwd=workspace).json()]


def _evalops(*args: str, cwd: Path, **kwargs: Any) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.Popen([sys.executable, "-m", "evalops", *args], cwd=cwd, env=env, **kwargs)


# --- finding 2: every bad line, a stated cap, all or nothing ---------------------------


def _bad_file(synced: Path) -> Path:
    good = _records(synced, 2)
    bad_status = {**good[0], "trial_id": "bad-status", "runtime": {"status": "bogus"}}
    bad_task = {**good[0], "trial_id": "bad-task", "task_digest": "sha256:" + "0" * 64}
    no_id = {k: v for k, v in good[1].items() if k != "trial_id"}
    lines = [
        json.dumps(good[0]),
        "{not json",
        json.dumps(bad_status),
        json.dumps(good[1]),
        json.dumps(bad_task),
        json.dumps(no_id),
    ]
    path = synced / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_ingest_json_lists_every_rejected_line_and_stores_nothing(synced: Path, cli: Cli) -> None:
    path = _bad_file(synced)
    result = cli("trials", "ingest", str(path), "--json", cwd=synced)
    assert result.code == 2
    doc = result.json()
    assert doc["error"]["code"] == 2
    # The headline is the first bad line itself, nothing appended.
    assert (doc["error"]["file"], doc["error"]["line"]) == (str(path), 2)
    assert doc["error"]["message"] == doc["rejected"][0]["error"]
    assert [(e["file"], e["line"]) for e in doc["rejected"]] == [
        (str(path), 2),
        (str(path), 3),
        (str(path), 5),
        (str(path), 6),
    ]
    fields = [e["field"] for e in doc["rejected"]]
    assert fields[1] == "runtime.status"
    assert fields[2] == "task_digest"
    assert fields[3] == "trial_id"
    assert doc["rejected_total"] == 4
    assert doc["rejected_cap"] == 1000
    assert doc["ingested"] == 0
    # No "(and N more)" glued onto a message (it read as more allowed values).
    assert "more)" not in result.stdout
    assert _stored(cli, synced) == []


def test_ingest_human_output_lists_every_rejected_line(synced: Path, cli: Cli) -> None:
    path = _bad_file(synced)
    result = cli("trials", "ingest", str(path), cwd=synced)
    assert result.code == 2
    listed = [line for line in result.stderr.splitlines() if line.startswith("rejected: ")]
    assert [line.split(":")[2] for line in listed] == ["2", "3", "5", "6"]
    assert f"rejected: {path}:3: runtime.status: " in result.stderr
    assert "error: 4 bad records; nothing was stored" in result.stderr
    assert "more)" not in result.stderr


def test_a_misspelt_required_field_is_named_as_the_typo_not_as_missing(
    synced: Path, cli: Cli
) -> None:
    """`stauts` for `status`: pydantic reports the required field missing first and the
    unknown one second, so the headline said "required field 'status' is missing (and 1
    more)" and hid the typo. The typo is the one problem; a key that is no typo of a
    missing field is still reported beside it."""
    good = _records(synced, 3)
    typo = {**good[0], "runtime": {"stauts": "ok"}}
    unrelated = {**good[1], "runtime": {"zzz": "ok"}}
    both = {**good[2], "runtime": {"stauts": "ok"}, "trial_index": "one"}
    path = synced / "typos.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in (typo, unrelated, both)), "utf-8")
    doc = cli("trials", "ingest", str(path), "--json", cwd=synced).json()
    rejected = [(e["line"], e["field"], e["error"]) for e in doc["rejected"]]
    assert rejected[0] == (
        1,
        "runtime.stauts",
        "unknown field 'stauts': did you mean 'status'? (a required field)",
    )
    assert rejected[1][:2] == (2, "runtime.status")
    assert rejected[1][2].startswith("required field 'status' is missing")
    # With another problem in the record, the typo comes first, the rest counted.
    assert rejected[2] == (
        3,
        "runtime.stauts",
        "unknown field 'stauts': did you mean 'status'? (a required field) (and 1 more)",
    )
    assert _stored(cli, synced) == []


def test_each_typo_is_paired_with_its_closest_missing_sibling_only(synced: Path, cli: Cli) -> None:
    """Two missing ids and two misspelt keys pair by closeness (`tasks_id` is `task_id`,
    `tril_id` is `trial_id`), not first come first served; a misspelt key one level away
    from the missing field is no typo of it."""
    good = _records(synced, 2)
    two = {k: v for k, v in good[0].items() if k not in ("trial_id", "task_id")}
    two = {**two, "tasks_id": good[0]["task_id"], "tril_id": "t-x"}
    elsewhere = {**good[1], "stauts": "ok", "runtime": {}}
    path = synced / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in (two, elsewhere)), "utf-8")
    doc = cli("trials", "ingest", str(path), "--json", cwd=synced).json()
    first, second = doc["rejected"]
    assert first["error"].startswith(
        "unknown field 'tasks_id': did you mean 'task_id'? (a required field) (and 1 more)"
    ), first
    assert second["field"] == "runtime.status", second
    assert second["error"] == "required field 'status' is missing (and 1 more)", second
    assert _stored(cli, synced) == []


def test_ingest_states_the_report_cap(synced: Path, cli: Cli) -> None:
    path = synced / "many.jsonl"
    # Broken lines, each its own error (a lone "{" on line 1 would be read as one
    # pretty-printed document instead).
    path.write_text('{"a"\n' * 1003, encoding="utf-8")
    doc = cli("trials", "ingest", str(path), "--json", cwd=synced).json()
    assert len(doc["rejected"]) == 1000
    assert doc["rejected_total"] == 1003
    assert doc["rejected_cap"] == 1000
    human = cli("trials", "ingest", str(path), cwd=synced)
    assert "3 more bad records not listed (the report stops at 1000)" in human.stderr


def test_max_bad_records_reports_the_total(synced: Path, cli: Cli) -> None:
    path = _bad_file(synced)
    doc = cli("trials", "ingest", str(path), "--max-bad-records", "4", "--json", cwd=synced)
    assert doc.code == 0, doc.stderr
    assert doc.json()["ingested"] == 2
    assert doc.json()["rejected_total"] == 4
    assert len(doc.json()["rejected"]) == 4


# --- finding 8: stdin, /dev/stdin, .jsonl.gz, .jsonl.zst ----------------------------


def test_ingest_reads_standard_input(
    synced: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _lines(_records(synced, 3))
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(io.BytesIO(data))))
    result = cli("trials", "ingest", "-", "--json", cwd=synced)
    assert result.code == 0, result.stderr
    assert result.json()["ingested"] == 3
    assert _stored(cli, synced) == ["t-00000", "t-00001", "t-00002"]


def test_ingest_stdin_errors_name_stdin_line_and_field(
    synced: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = _records(synced, 1)[0]
    data = _lines([good, {**good, "trial_id": "x", "runtime": {"status": "bogus"}}])
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(io.BytesIO(data))))
    result = cli("trials", "ingest", "-", cwd=synced)
    assert result.code == 2
    assert "rejected: <stdin>:2: runtime.status: " in result.stderr


def test_ingest_reads_dev_stdin(synced: Path) -> None:
    data = _lines(_records(synced, 2))
    proc = _evalops(
        "trials", "ingest", "/dev/stdin", "--json", cwd=synced, stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    out, err = proc.communicate(data, timeout=60)
    assert proc.returncode == 0, err.decode()
    assert json.loads(out)["ingested"] == 2


def _zstd(data: bytes) -> bytes:
    import zstandard  # the zstd extra (in the dev extras too)

    compressed: bytes = zstandard.ZstdCompressor().compress(data)
    return compressed


@pytest.mark.parametrize("suffix", [".jsonl.gz", ".jsonl.zst"])
def test_ingest_reads_compressed_files(synced: Path, cli: Cli, suffix: str) -> None:
    records = _records(synced, 3)
    good, bad = _lines(records), _lines([records[0], {**records[1], "runtime": {"status": "x"}}])
    pack = gzip.compress if suffix == ".jsonl.gz" else _zstd
    bad_path = synced / f"bad{suffix}"
    bad_path.write_bytes(pack(bad))
    refused = cli("trials", "ingest", str(bad_path), cwd=synced)
    assert refused.code == 2
    assert f"rejected: {bad_path}:2: runtime.status: " in refused.stderr
    path = synced / f"trials{suffix}"
    path.write_bytes(pack(good))
    result = cli("trials", "ingest", str(path), "--json", cwd=synced)
    assert result.code == 0, result.stderr
    assert result.json()["ingested"] == 3


def test_zstd_input_without_the_extra_says_how_to_get_it(
    synced: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = synced / "trials.jsonl.zst"
    path.write_bytes(_zstd(_lines(_records(synced, 1))))
    monkeypatch.setitem(sys.modules, "zstandard", None)  # as if not installed
    result = cli("trials", "ingest", str(path), "--json", cwd=synced)
    assert result.code == 2
    # evalops is not on PyPI under its name: the extra comes from the checkout.
    message = result.json()["error"]["message"]
    assert "pip install '.[zstd]' in the evalops checkout" in message
    assert "'evalops[" not in message


def test_ingest_refuses_a_corrupt_gzip_file_naming_it(synced: Path, cli: Cli) -> None:
    path = synced / "broken.jsonl.gz"
    path.write_bytes(gzip.compress(_lines(_records(synced, 50)))[:-40])
    result = cli("trials", "ingest", str(path), cwd=synced)
    assert result.code == 2
    assert f"{path}: cannot decompress (gzip)" in result.stderr
    assert _stored(cli, synced) == []


# --- finding 7: progress outside a terminal; Ctrl-C -------------------------------


def test_progress_auto_prints_plain_lines_outside_a_terminal(
    synced: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVALOPS_PROGRESS_INTERVAL", "0")
    path = write_jsonl(synced / "t.jsonl", _records(synced, 5))
    result = cli("trials", "ingest", str(path), cwd=synced)
    assert result.code == 0, result.stderr
    assert "ingesting: 5 lines" in result.stderr
    assert "(done)" in result.stderr


def test_progress_none_and_a_bad_mode(
    synced: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVALOPS_PROGRESS_INTERVAL", "0")
    path = write_jsonl(synced / "t.jsonl", _records(synced, 2))
    quiet = cli("trials", "ingest", str(path), "--progress", "none", cwd=synced)
    assert quiet.code == 0
    assert "ingesting" not in quiet.stderr
    also_quiet = cli("--progress", "none", "trials", "ingest", str(path), cwd=synced)
    assert also_quiet.code == 0
    assert "ingesting" not in also_quiet.stderr
    bad = cli("trials", "ingest", str(path), "--progress", "loud", cwd=synced)
    assert bad.code == 2
    assert "auto, bar, plain, none" in bad.stderr


def test_sigint_during_ingest_stores_nothing(synced: Path) -> None:
    db = synced / ".evalops" / "registry.db"
    before = sqlite_fingerprint(db)
    path = write_jsonl(synced / "big.jsonl", _records(synced, 2000))
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "EVALOPS_PROGRESS_INTERVAL": "0"}
    # The records arrive on a pipe that stays open, so the ingest is still under way (it
    # waits for more input) however fast it is: the interrupt never races its commit.
    # A pytest-xdist worker ignores SIGINT and a child inherits that: restore the default,
    # as in a shell, so that Ctrl-C reaches evalops as it would a user's.
    proc = subprocess.Popen(
        [sys.executable, "-m", "evalops", "trials", "ingest", "-", "--progress", "plain"],
        cwd=synced, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # noqa: PLW1509
    )  # fmt: skip
    # Never hang the suite: a child still running after two minutes is killed (and fails).
    watchdog = threading.Timer(120, proc.kill)
    watchdog.start()
    assert proc.stdin is not None and proc.stderr is not None
    stdin = proc.stdin

    def feed() -> None:  # a thread: the child's stderr is read below while it is fed
        with contextlib.suppress(BrokenPipeError):
            stdin.write(path.read_bytes())
            stdin.flush()

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    # Wait until the ingest is under way (a progress line past the first hundred lines).
    for raw in proc.stderr:
        match = re.match(rb"ingesting: ([\d,]+) lines, ", raw)
        if match and int(match.group(1).replace(b",", b"")) > 100:
            break
    proc.send_signal(signal.SIGINT)
    err = proc.stderr.read()
    proc.wait(timeout=60)
    watchdog.cancel()
    feeder.join(timeout=60)
    with contextlib.suppress(BrokenPipeError):
        stdin.close()
    proc.stderr.close()
    if proc.stdout is not None:
        proc.stdout.close()
    assert proc.returncode == 130, err.decode()[-2000:]
    assert b"interrupted: nothing was stored" in err
    assert b"Traceback" not in err
    assert sqlite_fingerprint(db) == before


def _count_trials(workspace: Path) -> int:
    import sqlite3

    with contextlib.closing(sqlite3.connect(workspace / ".evalops" / "registry.db")) as db:
        return int(db.execute("SELECT count(*) FROM trial").fetchone()[0])


def test_an_interrupt_after_the_commit_says_the_change_was_stored(
    synced: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while the summary prints: the trials are stored, and the one line says so
    instead of "nothing was stored" (docs/cli.md, exit 130)."""
    import evalops.cli.trials as trials_cli

    path = write_jsonl(synced / "few.jsonl", _records(synced, 3))

    def interrupted(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(trials_cli, "emit", interrupted)
    done = cli("trials", "ingest", str(path), cwd=synced)
    assert done.code == 130
    assert (
        done.stderr.strip().splitlines()[-1].startswith("interrupted after the change was stored")
    ), done.stderr
    assert _count_trials(synced) == 3
    # The next command of the same process starts afresh: an interrupt before its commit
    # is "nothing was stored", and is.
    import evalops.services.ingest.records as ingest

    monkeypatch.setattr(ingest, "append_event", interrupted)
    more = [record(mini_case(synced), trial_id=f"u-{i}", trial_index=10 + i) for i in range(2)]
    again = cli("trials", "ingest", str(write_jsonl(synced / "more.jsonl", more)), cwd=synced)
    assert again.code == 130
    assert again.stderr.strip().splitlines()[-1] == "interrupted: nothing was stored"
    assert _count_trials(synced) == 3


@pytest.mark.parametrize(
    ("interrupts", "steps", "line"),
    [
        (1, "committed,noted,interrupted", "interrupted after the change was stored"),
        (2, "interrupted", "interrupted during the commit: the change may or may not be"),
    ],
)
def test_an_interrupt_during_the_commit_is_delivered_after_it_unless_repeated(
    interrupts: int, steps: str, line: str
) -> None:
    """`interrupts_held`: a first SIGINT inside the block is raised right after it, so a
    commit and the note that it happened are never split by one Ctrl-C; a second one
    stops at once (a commit may wait on a slow server), and the line says so."""
    script = (
        "import os, signal, sys\n"
        "from evalops.store import interrupts\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "steps = []\n"
        "try:\n"
        "    with interrupts.interrupts_held():\n"
        f"        for _ in range({interrupts}):\n"
        "            os.kill(os.getpid(), signal.SIGINT)\n"
        "        steps.append('committed')\n"
        "        interrupts.note_committed()\n"
        "        steps.append('noted')\n"
        "    steps.append('after')\n"
        "except KeyboardInterrupt:\n"
        "    steps.append('interrupted')\n"
        "print(','.join(steps))\n"
        "print(interrupts.interrupted_line())\n"
        "assert signal.getsignal(signal.SIGINT) is signal.default_int_handler\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )  # fmt: skip
    said = done.stdout.strip().splitlines()
    assert said[0] == steps
    assert said[1].startswith(line)
    assert "finishing the commit; Ctrl-C again to stop at once" in done.stderr


# --- finding 6: a reader that stops early keeps the gate's exit code ----------------------


@pytest.mark.parametrize("as_json", [False, True], ids=["human", "json"])
def test_gate_check_keeps_its_exit_code_when_stdout_closes(demo: Path, as_json: bool) -> None:
    args = ["gate", "check", "--build", "build-124", "--suite", "regression/core", "--dry-run"]
    proc = _evalops(
        *args, *(["--json"] if as_json else []), cwd=demo,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None
    proc.stdout.close()  # the reader is gone before evalops writes a byte (`| head -0`)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 4, err.decode()  # build-124 is blocked in the demo
    assert b"Traceback" not in err
    assert b"Broken pipe" not in err


def test_gate_check_piped_to_head_under_pipefail(demo: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    command = (
        f"{sys.executable} -m evalops gate check --build build-124 --suite regression/core "
        "--dry-run | head -1"
    )
    done = subprocess.run(
        ["bash", "-o", "pipefail", "-c", command],
        check=False,
        cwd=demo,
        env=env,
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 4, done.stderr.decode()
    assert done.stdout.decode().startswith("BLOCK")


def test_verify_prints_its_stages_outside_a_terminal(
    synced: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    quiet = cli("verify", cwd=synced)  # shorter than the 10 s interval: nothing printed
    assert quiet.code == 0, quiet.stderr
    assert "verifying" not in quiet.stderr
    monkeypatch.setenv("EVALOPS_PROGRESS_INTERVAL", "0")
    result = cli("verify", "--progress", "plain", cwd=synced)
    assert result.code == 0, result.stderr
    stages = re.findall(r"^verifying: ([a-z ]+) \(\d+s\)$", result.stderr, re.MULTILINE)
    assert stages == [
        "storage",
        "audit chain",
        "definitions",
        "trials",
        "rows",
        "signed acts",
        "separation of duties",
        "gate decisions",
        "estimates",
        "syncs against git history",
    ]


@pytest.mark.parametrize("source", ["inspect", "promptfoo"])
def test_imports_take_the_progress_option(cli: Cli, source: str) -> None:
    result = cli("trials", "import", source, "--help")
    assert result.code == 0
    assert "--progress" in result.stdout


def test_a_table_written_to_a_closed_pipe_is_quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rich's own broken-pipe handling exits 1; ours drops the rest of the output instead,
    so a gate decision printed as a table keeps its exit code."""
    from evalops.cli.context import console

    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone
    stream = os.fdopen(write_end, "w")
    monkeypatch.setattr(sys, "stdout", stream)
    try:
        out = console()
        out.print("a row of the decision table\n" * 100)  # raised SystemExit(1) before
        out.print("and more")
        assert out.quiet
    finally:
        monkeypatch.undo()
        stream.close()
