"""Mutation testing of the domain rules: `make mutate` (mutmut 3, configured in pyproject.toml).

    python tools/mutation_report.py run [--max-children N] [MODULE ...]   # mutmut, then report
    python tools/mutation_report.py report             # tests/MUTATION.md from the last results

MODULE is a module of `[tool.mutmut] only_mutate`: one of evalops/domain/ by its name (`reruns`,
`audit_chain`...), any other by its dotted path under evalops (`services.gate.input_parts`,
`importers.promptfoo`); or `module:function` for one function's mutants (`gate:summarize_task`),
or a mutant's full name; without one, every module in `only_mutate` runs (slow: hours on two
cores). A mutant of a module outside evalops/domain/, or of `gate_compact` or `gate_rules`, runs
only the tests of that module's fast files (tests/mutation_fast.py `FAST_TESTS`), never a CLI
or workspace test. Results accumulate in `mutants/` (git-ignored), so modules can be run one
at a time and the report covers all of them. Naming only survivors of a module measured in the
committed report reruns just those: the module keeps its committed row, each survivor caught
now counted as killed (an expensive module need not run whole again to check a new test).
Every surviving mutant must be killed by a test or explained in tests/mutation_equivalents.toml
(mutant name -> why no test can tell it from the original); the report lists the rest as
unexplained and the command exits 1.

`--max-children N` (`make mutate JOBS=N`) caps mutmut's parallel test processes (default: one
per CPU); on a machine shared with other work, 1 keeps mutation testing to one core.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MUTANTS = ROOT / "mutants"
REPORT = ROOT / "tests" / "MUTATION.md"
EQUIVALENTS = ROOT / "tests" / "mutation_equivalents.toml"
TARGET = 0.90
NOT_AT_TARGET = "## Not at the target yet"
PACKAGE = "evalops."
DOMAIN = "evalops/domain/"
RUNS = "## Runs"

# What counts as caught, of mutmut's statuses (mutmut.stats.status_by_exit_code).
CAUGHT = {"killed", "caught by type check", "segfault"}
SURVIVED = {"survived", "no tests", "suspicious"}


@dataclass
class ModuleResult:
    name: str
    total: int = 0
    killed: int = 0
    timeout: int = 0
    survived: list[str] = field(default_factory=list)
    not_checked: int = 0
    caught: list[str] = field(default_factory=list)
    """The names of the killed mutants."""
    timed_out: list[str] = field(default_factory=list)

    @property
    def tested(self) -> int:
        return self.total - self.not_checked

    @property
    def score(self) -> float | None:
        """Killed (a timeout counts as killed) over tested, equivalent mutants excluded."""
        return (self.killed + self.timeout) / self.tested if self.tested else None


def rule_paths() -> dict[str, str]:
    """Each module of `[tool.mutmut] only_mutate` by its name -> its path: a module of
    evalops/domain/ is named by its stem (`gate`), as the report always named them; any other
    by its dotted path under evalops (`services.gate.input_parts`)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    paths: list[str] = config["tool"]["mutmut"]["only_mutate"]
    out: dict[str, str] = {}
    for path in paths:
        dotted = path.removeprefix("evalops/").removesuffix(".py").replace("/", ".")
        is_domain = path.startswith(DOMAIN) and "/" not in path.removeprefix(DOMAIN)
        out[Path(path).stem if is_domain else dotted] = path
    return out


def rule_modules() -> list[str]:
    return list(rule_paths())


def mutant_prefix(module: str) -> str:
    """What the names of a module's mutants start with (`evalops.domain.gate.`)."""
    return rule_paths()[module].removesuffix(".py").replace("/", ".") + "."


def module_of(mutant: str) -> str:
    """The module a mutant's full name belongs to (the longest matching prefix)."""
    found = [m for m in rule_modules() if mutant.startswith(mutant_prefix(m))]
    if found:
        return max(found, key=lambda m: len(mutant_prefix(m)))
    return mutant.removeprefix(PACKAGE).split(".", 1)[0]


def run(modules: list[str], children: int) -> int:
    named = [m for m in modules if m.startswith(PACKAGE)]  # mutant names, run again as they are
    modules = [m for m in modules if not m.startswith(PACKAGE)]
    unknown = sorted({m.partition(":")[0] for m in modules} - set(rule_modules()))
    if unknown:
        print(f"not a rule module of [tool.mutmut] only_mutate: {', '.join(unknown)}")
        return 2
    env = dict(os.environ)
    # A private pytest temp root: other pytest runs on the machine prune the shared one.
    env["PYTEST_DEBUG_TEMPROOT"] = tempfile.mkdtemp(prefix="evalops-mutmut-")
    env.pop("PYTHONPATH", None)  # mutmut puts mutants/ first itself
    mutmut = Path(sys.executable).parent / "mutmut"
    # One mutmut run for every pattern: each run first runs the whole clean selection.
    # `module:function` runs one function's mutants (a module split by function).
    patterns = [
        f"{mutant_prefix(name)}x_{function}__mutmut_*" if function else f"{mutant_prefix(name)}*"
        for name, _, function in (m.partition(":") for m in modules)
    ] + named
    print(f"mutmut: {' '.join(patterns)}", flush=True)
    done = subprocess.run(
        [str(mutmut), "run", "--max-children", str(children), *patterns],
        cwd=ROOT, env=env, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        print(f"mutmut run exited {done.returncode}")
        return done.returncode
    return report(_run_entry(modules, named, children))


def _run_entry(modules: list[str], named: list[str], children: int) -> tuple[str, list[str]]:
    """The run log's line for this run (when and the command; the scores are added by the
    report) and the modules it measured."""
    by_module: dict[str, int] = {}
    for name in named:
        module = module_of(name)
        by_module[module] = by_module.get(module, 0) + 1
    what = " ".join(
        [*modules, *(f"{n} named mutants of {m}" for m, n in sorted(by_module.items()))]
    )
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    touched = sorted({m.partition(":")[0] for m in modules} | set(by_module))
    return f'- {when}: `make mutate MODULES="{what}" JOBS={children}`', touched


def _runs() -> list[str]:
    """The run log as committed (newest last)."""
    if not REPORT.exists():
        return []
    text = REPORT.read_text(encoding="utf-8")
    if f"\n{RUNS}\n" not in text:
        return []
    section = text.split(f"\n{RUNS}\n", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("- ")]


def results() -> dict[str, ModuleResult]:
    """Every module's results so far, from mutmut's per-file `.meta` files."""
    from mutmut.stats import status_by_exit_code

    out: dict[str, ModuleResult] = {}
    for module, path in rule_paths().items():
        meta = MUTANTS / f"{path}.meta"
        if not meta.exists():
            continue
        codes: dict[str, int | None] = json.loads(meta.read_text())["exit_code_by_key"]
        result = ModuleResult(module, total=len(codes))
        for name, code in sorted(codes.items(), key=lambda kv: _natural(kv[0])):
            status = status_by_exit_code[code]
            if status in CAUGHT:
                result.killed += 1
                result.caught.append(name)
            elif status == "timeout":
                result.timeout += 1
                result.timed_out.append(name)
            elif status in SURVIVED:
                result.survived.append(name)
            else:  # not checked, skipped, interrupted
                result.not_checked += 1
        out[module] = result
    return _with_committed(out)


def _committed_tables() -> tuple[dict[str, list[str]], dict[str, str]]:
    """The committed report's measured rows (cells by module) and survivors' diffs."""
    text = REPORT.read_text(encoding="utf-8") if REPORT.exists() else ""
    rows: dict[str, list[str]] = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 9 and cells[1] in rule_modules() and cells[2] != "not run yet":
            rows[cells[1]] = cells
    diffs: dict[str, str] = {}
    for section in text.split("\n### `")[1:]:
        name = section.split("`", 1)[0]
        if "```diff\n" in section:
            diffs[name] = section.split("```diff\n", 1)[1].split("\n```", 1)[0]
    return rows, diffs


def _with_committed(found: dict[str, ModuleResult]) -> dict[str, ModuleResult]:
    """A module of which this machine ran only survivors of the committed report (`MODULES=`
    with their names: an expensive module need not be run whole again to check new tests)
    keeps the committed measurement, with each survivor caught here counted as killed.

    Only when it is the same module: as many mutants, and each mutant run here the same
    change as the committed survivor of that name. The committed row and survivors are kept
    in `mutants/` the first time, so writing the report again counts each kill once."""
    rows, diffs = _committed_tables()
    for module, r in found.items():
        saved = MUTANTS / f"committed-{module}.json"
        if not r.tested or not r.not_checked or (module not in rows and not saved.exists()):
            continue
        prefix = mutant_prefix(module)
        base: dict[str, Any] = (
            json.loads(saved.read_text(encoding="utf-8"))
            if saved.exists()
            else {
                "row": rows[module],
                "survivors": {n: d for n, d in diffs.items() if n.startswith(prefix)},
            }
        )
        cells: list[str] = base["row"]
        committed: dict[str, str] = base["survivors"]
        total, _, rest = cells[2].partition(" (")
        run_here = {*r.caught, *r.timed_out, *r.survived}
        if (
            int(total) != r.total
            or len(committed) != int(cells[6])
            or not run_here <= set(committed)
            or any(_diff(name) != committed[name] for name in sorted(run_here))
        ):
            continue  # not a rerun of the committed survivors: this machine's results alone
        if not saved.exists():
            saved.write_text(json.dumps(base), encoding="utf-8")
        found[module] = ModuleResult(
            module,
            total=int(total),
            killed=int(cells[4]) + len(r.caught),
            timeout=int(cells[5]) + len(r.timed_out),
            survived=sorted(set(committed) - {*r.caught, *r.timed_out}, key=_natural),
            not_checked=int(rest.split(" ", 1)[0]) if rest else 0,
        )
    return found
    text = REPORT.read_text(encoding="utf-8")
    survivors: dict[str, set[str]] = {}
    for section in text.split("\n### `")[1:]:
        name = section.split("`", 1)[0]
        survivors.setdefault(module_of(name), set()).add(name)
    for line in text.splitlines():
        cells = [c.strip() for c in line.split("|")]
        r = found.get(cells[1]) if len(cells) > 9 else None
        if r is None or not r.tested or not r.not_checked or cells[2] == "not run yet":
            continue
        run_here = {*r.caught, *r.timed_out, *r.survived}
        committed = survivors.get(r.name, set())
        total, _, rest = cells[2].partition(" (")
        not_run = int(rest.split(" ", 1)[0]) if rest else 0
        if not run_here <= committed or len(committed) != int(cells[6]):
            continue  # not a rerun of committed survivors: this machine's results alone
        found[r.name] = ModuleResult(
            r.name,
            total=int(total),
            killed=int(cells[4]) + len(r.caught),
            timeout=int(cells[5]) + len(r.timed_out),
            survived=sorted(committed - {*r.caught, *r.timed_out}, key=_natural),
            not_checked=not_run,
        )
    return found


def _natural(name: str) -> tuple[str, int]:
    stem, _, number = name.rpartition("_")
    return stem, int(number) if number.isdigit() else 0


def _diff(name: str) -> str:
    done = subprocess.run(
        [str(Path(sys.executable).parent / "mutmut"), "show", name],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    lines = [
        line
        for line in done.stdout.splitlines()
        if line.startswith(("-", "+")) and not line.startswith(("---", "+++"))
    ]
    return "\n".join(lines) or done.stdout.strip()


def _earlier(found: dict[str, ModuleResult]) -> tuple[dict[str, str], dict[str, str]]:
    """The rows and surviving mutants' diffs of the modules this machine has no results for,
    from the report as committed: `mutants/` is not kept, and a module measured elsewhere
    keeps its measurement until it is run again here."""
    if not REPORT.exists():
        return {}, {}
    text = REPORT.read_text(encoding="utf-8")
    rows: dict[str, str] = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.split("|")]
        measured = len(cells) > 3 and cells[2] != "not run yet"
        here = found.get(cells[1]) if len(cells) > 1 else None
        if measured and cells[1] in rule_modules() and (here is None or here.tested == 0):
            rows[cells[1]] = line
    diffs: dict[str, str] = {}
    for section in text.split("\n### `")[1:]:
        name = section.split("`", 1)[0]
        module = module_of(name)
        if module in rows and "```diff\n" in section:
            diffs[name] = section.split("```diff\n", 1)[1].split("\n```", 1)[0]
    return rows, diffs


def report(run: tuple[str, list[str]] | None = None) -> int:
    """Write tests/MUTATION.md; `run` (a line of the run log and the modules it measured)
    is added to the log kept from the committed report."""
    runs = _runs()
    equivalents: dict[str, str] = (
        tomllib.loads(EQUIVALENTS.read_text(encoding="utf-8")) if EQUIVALENTS.exists() else {}
    )
    found = results()
    earlier_rows, earlier_diffs = _earlier(found)
    lines = [
        "# Mutation testing of the domain rules",
        "",
        "Written by `make mutate` (`python tools/mutation_report.py run [MODULE ...]`; mutmut 3,",
        "configured in `pyproject.toml` `[tool.mutmut]`); do not edit by hand. `make mutate",
        'MODULES="reruns waivers"` runs some modules; results accumulate in `mutants/`',
        "(git-ignored) and `python tools/mutation_report.py report` rewrites this file from them.",
        "It is not part of `make test`. `JOBS=1` keeps mutmut to one test process; a module too",
        "slow to run whole can be run a function at a time (`MODULES=gate:summarize_task`): its",
        "row then counts the mutants not run yet. Naming only survivors of a module measured",
        "here before reruns those: the row keeps that measurement, each caught survivor killed.",
        "",
        "A mutant is one small change to a module of `[tool.mutmut] only_mutate` (a domain",
        "module by its name, any other by its dotted path under `evalops`); for each, mutmut runs",
        "the tests of the fast selection (the tests of the files listed in `[tool.mutmut]`;",
        "`tests/mutation_fast.py` leaves out CLI and workspace tests, and runs a mutant of a",
        "module outside `evalops/domain/`, or of `gate_compact` or `gate_rules`, with that",
        "module's own fast files only: for those two, the gate's pure tests, never verify's or",
        "the integrity tests over stored decisions) that reach the changed function, and the",
        "mutant is killed when one fails. Score: killed (timeouts included) over tested; the",
        "last column leaves out the survivors explained as equivalent in",
        "`tests/mutation_equivalents.toml`. Target: at least 90% per module, every survivor",
        "killed by a test or explained there. A module not run on the machine that",
        "wrote this file keeps the row and survivors of the run that measured it. The run log",
        "lists the runs that wrote this file: when, the command, and per module run the mutants",
        "caught (killed or timed out) over those tested. A module with 0 mutants holds constants",
        "only (mutmut mutates functions); the modules whose functions read them are measured.",
        "",
        "| module | mutants | tested | killed | timeout | survived | equivalent | score"
        " | score without equivalents |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    unexplained: list[str] = []
    unmet: list[str] = []
    for module in rule_modules():
        r = found.get(module)
        if module in earlier_rows:  # not run here: the committed measurement
            lines.append(earlier_rows[module])
            unmet += short_of_target(module, earlier_rows[module])
            unexplained += [
                s
                for s in earlier_diffs
                if s.startswith(mutant_prefix(module)) and s not in equivalents
            ]
            continue
        if r is not None and r.total == 0:  # constants only: mutmut mutates functions
            lines.append(f"| {module} | 0 | 0 | 0 | 0 | 0 | 0 | - | - |")
            continue
        if r is None or r.tested == 0:
            lines.append(f"| {module} | not run yet | | | | | | | |")
            unmet.append(f"{module}: not measured")
            continue
        eq = sum(1 for s in r.survived if s in equivalents)
        score = f"{r.score:.1%}" if r.score is not None else "-"
        caught = (r.killed + r.timeout) / (r.tested - eq) if r.tested > eq else 1.0
        partial = f" ({r.not_checked} not run yet)" if r.not_checked else ""
        lines.append(
            f"| {module} | {r.total}{partial} | {r.tested} | {r.killed} | {r.timeout} | "
            f"{len(r.survived)} | {eq} | {score} | {caught:.1%} |"
        )
        unexplained += [s for s in r.survived if s not in equivalents]
        unmet += short_of_target(module, lines[-1])
    if run is not None:
        line, touched = run
        scores = []
        for module in touched:
            r = found.get(module)
            if r is not None and r.tested:
                scores.append(f"{module} {r.killed + r.timeout}/{r.tested} caught")
        runs.append(f"{line}: {', '.join(scores) or 'nothing measured'}")
    lines += ["", RUNS, ""]
    lines += runs or ["None recorded."]
    lines += ["", NOT_AT_TARGET, ""]
    lines += [f"- {m}" for m in unmet] or [
        "None: every module measured whole, each at 90% or more."
    ]
    lines += ["", "## Surviving mutants", ""]
    survivors = [s for r in found.values() for s in r.survived] + list(earlier_diffs)
    if not survivors:
        lines.append("None.")
    for name in sorted(survivors, key=_natural):
        why = equivalents.get(name, "UNEXPLAINED: write a test that kills it, or explain it")
        diff = earlier_diffs[name] if name in earlier_diffs else _diff(name)
        lines += [f"### `{name}`", "", "```diff", diff, "```", "", why, ""]
    REPORT.write_text("\n".join(lines).rstrip() + "\n", encoding="utf-8")
    print(f"wrote {REPORT.relative_to(ROOT)}")
    for name in unexplained:
        print(f"unexplained surviving mutant: {name}")
    for m in unmet:
        print(f"not at the target: {m}")
    return 1 if unexplained or unmet else 0


def short_of_target(module: str, row: str) -> list[str]:
    """Why a module's table row does not meet the target yet: mutants not run, or a score
    under 90% (a module with no mutants holds constants only and meets it)."""
    cells = [c.strip() for c in row.split("|")]
    if cells[2] == "not run yet":
        return [f"{module}: not measured"]
    out = []
    _, _, rest = cells[2].partition(" (")
    if rest:
        out.append(
            f"{module}: {rest.split(' ', 1)[0]} of {cells[2].split(' ', 1)[0]} mutants not run yet"
        )
    if cells[8].endswith("%") and float(cells[8].rstrip("%")) < TARGET * 100:
        out.append(f"{module}: score {cells[8]}, under {TARGET:.0%}")
    return out


def main(argv: list[str]) -> int:
    if argv[:1] == ["run"]:
        args = argv[1:]
        children = os.cpu_count() or 1
        if args[:1] == ["--max-children"] and len(args) > 1 and args[1].isdigit():
            children, args = max(1, int(args[1])), args[2:]
        return run(args or rule_modules(), children)
    if argv == ["report"]:
        return report()
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
