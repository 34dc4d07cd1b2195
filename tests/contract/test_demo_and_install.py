"""The two things a new user does first: `evalops demo`, and `pip install .` elsewhere."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Cli
from tests.helpers import EXAMPLE_REGISTRY, REPO_ROOT, commit_all, wheelhouse_env


def test_demo_runs_to_the_end(tmp_path: Path, cli: Cli) -> None:
    result = cli("demo", "--dir", str(tmp_path / "demo"))
    assert result.code == 0, result.stdout + result.stderr
    assert "demo complete" in result.stdout
    summary = (tmp_path / "demo" / "demo-summary.md").read_text(encoding="utf-8")
    assert "| `evalops verify` | 0 |" in summary
    demo = tmp_path / "demo"
    assert cli("verify", cwd=demo).code == 0
    decisions = cli("gate", "list", "--json", cwd=demo).json()
    assert [d["decision"] for d in decisions] == ["block", "hold", "pass"]
    for d in decisions:
        assert cli("gate", "replay", d["gate_id"], "--json", cwd=demo).json()["identical"]
    # The estimation suite: an estimate, a comparison against the baseline, a plan.
    estimates = cli("estimate", "list", "--json", cwd=demo).json()["estimates"]
    assert [(e["estimate_id"], e["build"], e["baseline"]) for e in estimates] == [
        ("EST-1", "build-124", None),
        ("EST-2", "build-125", "build-124"),
    ]
    assert "| `evalops estimate plan --suite estimation/eu-sessions" in summary
    assert (demo / "reports" / "estimate-EST-2.html").is_file()
    incident = cli("incident", "show", "INC-1", "--json", cwd=demo).json()
    assert incident["state"] == "promoted"
    report = (demo / "gate-report.md").read_text(encoding="utf-8").splitlines()
    assert report[0].startswith("<!-- evalops-audit-head:")
    assert report[1].startswith("## evalops gate: **PASS**")
    # The demo ends with the paths of the reports of its final decision and of its
    # comparison estimate, the Markdown its passing `gate check` wrote, then the site's index.
    lines = result.stdout.strip().splitlines()
    tail = lines[-7:-2]
    names = [
        "audit-GATE-3.html", "audit-GATE-3.md", "suite-regression-core.html",
        "estimate-EST-2.html", "gate-report.md",
    ]  # fmt: skip
    assert [Path(line.strip()).name for line in tail] == names
    for line in tail[:-1]:
        assert Path(line.strip()).is_file()
        assert Path(line.strip()).parent == (demo / "reports").resolve()
    assert Path(tail[-1].strip()) == (demo / "gate-report.md").resolve()
    index = Path(lines[-1].strip())
    assert index == (demo / "site" / "index.html").resolve() and index.is_file()
    # Written last, the reports and the site show the registry as the demo leaves it.
    with sqlite3.connect(demo / ".evalops" / "registry.db") as con:
        ((seq, digest),) = con.execute(
            "SELECT seq, hash FROM audit_event ORDER BY seq DESC LIMIT 1"
        )
    for page in (index, *(Path(line.strip()) for line in tail if line.strip().endswith("html"))):
        text = page.read_text(encoding="utf-8")
        assert f'name="evalops-audit-head" content="{seq}:{digest}"' in text, page


def test_demo_refuses_a_non_empty_directory(tmp_path: Path, cli: Cli) -> None:
    (tmp_path / "keep.txt").write_text("mine", encoding="utf-8")
    result = cli("demo", "--dir", str(tmp_path))
    assert result.code == 2
    assert (tmp_path / "keep.txt").read_text(encoding="utf-8") == "mine"
    assert "earlier evalops demo" not in result.stderr


def test_demo_over_an_earlier_demo_says_how_to_replace_it(demo: Path, cli: Cli) -> None:
    """The README's `evalops demo --dir /tmp/evalops-demo` after `make demo` wrote there:
    nothing is deleted (the reader may have worked in it), and the error says how."""
    before = sorted(p.relative_to(demo) for p in demo.rglob("*"))
    result = cli("demo", "--dir", str(demo))
    assert result.code == 2
    assert "earlier evalops demo" in result.stderr and "make demo" in result.stderr
    assert f"rm -rf {demo}" in result.stderr
    assert sorted(p.relative_to(demo) for p in demo.rglob("*")) == before


@pytest.mark.slow
def test_wheel_install_runs_from_another_directory(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """`pip install .` (not editable) ships migrations/, templates/ and the example registry.

    pip builds the wheel (hatchling, in its isolated build environment) and installs it with
    its dependencies, read from the run's wheelhouse (`wheelhouse_env`) rather than resolved
    against the index again."""
    venv = tmp_path / "venv"
    # No pip of its own (its ensurepip step cost 4.5 CPU-s): this pip installs into it.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    # --no-compile: what is shipped is checked, not pip's byte-compilation (half its time).
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install"]
    subprocess.run(
        [*pip, "--quiet", "--no-compile", str(REPO_ROOT)],
        env={**os.environ, **wheelhouse_env(tmp_path_factory)},
        check=True,
        timeout=900,
    )
    work = tmp_path / "elsewhere"
    shutil.copytree(EXAMPLE_REGISTRY, work / "registry")
    commit_all(work)
    # Neither the checkout (PYTHONPATH) nor a pinned database may leak into the wheel's run.
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("EVALOPS_") and k != "PYTHONPATH"
    }
    env["EVALOPS_ACTOR"] = "installer@example.com"
    # Installed without byte-compiling (as `make demo` installs): Python compiles what a
    # run imports and keeps it, as for a user, instead of compiling again in each process.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    evalops = str(venv / "bin" / "evalops")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [evalops, *args], cwd=work, env=env, capture_output=True, text=True, check=False
        )

    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import evalops; print(evalops.__file__)"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert str(venv) in where, "evalops must come from the wheel, not the checkout"
    # The user documentation ships too (nothing cites a file the user lacks).
    assert (Path(where.strip()).parent / "_docs" / "cli.md").is_file()
    for args in (["init"], ["sync", "registry"], ["verify"]):
        done = run(*args)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
    demo = run("demo", "--dir", str(tmp_path / "demo"))
    assert demo.returncode == 0, demo.stdout + demo.stderr


@pytest.mark.slow
def test_report_check_sees_csp_violations(tmp_path: Path) -> None:
    """`make report-check` is only as good as its eyes: a page that breaks the CSP fails."""
    if shutil.which("chromium") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is required in CI (.ci/run installs it)")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    done = subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "tools" / "report_check.py"),
            "--self-test",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Content Security Policy" in done.stdout


def test_demo_part_two_signs_under_an_authority(demo: Path, cli: Cli) -> None:
    """The demo's second part: keys made by ssh-keygen in its directory, a signed ingest,
    calibration and waiver, and an unsigned waiver and a self-waiver refused (exit 5)."""
    summary = (demo / "demo-summary.md").read_text(encoding="utf-8")
    refused = [line for line in summary.splitlines() if line.endswith("| 5 |")]
    signed_refusals = [line for line in refused if "cd signed && evalops waiver grant" in line]
    assert len(signed_refusals) == 2
    assert "--sign-with ../keys/release-eng" in signed_refusals[1]
    assert "--sign-with" not in signed_refusals[0]
    signed = demo / "signed"

    def fingerprint(name: str) -> str:
        out = subprocess.run(
            ["ssh-keygen", "-l", "-E", "sha256", "-f", str(demo / "keys" / f"{name}.pub")],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        return out.stdout.split()[1]

    waivers = cli("waiver", "list", "--all", "--json", cwd=signed).json()
    assert [w["signers"] for w in waivers] == [
        [{"principal": "support-lead", "fingerprint": fingerprint("support-lead")}]
    ]
    calibrations = cli("calibration", "list", "--json", cwd=signed).json()
    assert [c["signers"][0]["principal"] for c in calibrations] == ["quality-lead"]
    with sqlite3.connect(signed / ".evalops" / "registry.db") as con:
        refusals = con.execute(
            "SELECT payload FROM audit_event WHERE kind = 'authority.refused' ORDER BY seq"
        ).fetchall()
    refused_acts = [(json.loads(p)["act"], json.loads(p)["refusal"]["rule"]) for (p,) in refusals]
    # An unsigned promotion, an unsigned waiver, then a self-waiver.
    assert refused_acts == [
        ("suite.promote", "authority"),
        ("waiver.grant", "authority"),
        ("waiver.grant", "no_self_waiver"),
    ]
    assert cli("verify", cwd=signed).code == 0
    # Part one's registry has no authority: its acts stay unsigned.
    assert cli("waiver", "list", "--all", "--json", cwd=demo).json()[0]["signers"] == []


def test_report_check_names_each_page_s_screenshots_apart(tmp_path: Path) -> None:
    """Two sites each have an index.html and an audit-GATE-3.html: the second page of a
    name gets its path as its name, so no page's screenshots overwrite another's."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "report_check", REPO_ROOT / "tools" / "report_check.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    used: set[str] = set()
    demo, big = tmp_path / "demo", tmp_path / "big"
    names = [
        module._unique_stem("index", demo / "site" / "index.html", demo, used),
        module._unique_stem("index", big / "site" / "index.html", big, used),
        module._unique_stem("index", big / "site" / "index.html", big, used),
    ]
    assert names == ["index", "big_site_index", "big_site_index_"]
