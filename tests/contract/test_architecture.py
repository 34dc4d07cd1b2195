"""The import layers of ARCHITECTURE.md hold, and a layer that imports upwards is caught.

The contracts live in pyproject.toml (`[tool.importlinter]`) and run in `make check`; these
tests run the same `lint-imports` on this tree, then on a copy of it with one upward import
planted, so a contract that silently stopped checking anything would fail here too.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """Run import-linter with the contracts of `root`/pyproject.toml on `root`/evalops."""
    script = Path(sys.executable).with_name("lint-imports")
    command = str(script) if script.exists() else shutil.which("lint-imports")
    assert command, "lint-imports is not installed: pip install -e '.[dev]'"
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [command, "--no-cache"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _copy_of_the_tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    shutil.copytree(
        REPO / "evalops", root / "evalops", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    return root


def test_the_layer_contracts_hold_on_this_tree() -> None:
    done = _lint_imports(REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def test_every_package_of_evalops_is_in_a_layer() -> None:
    """A new package left out of the layers would be checked by nothing."""
    from tomllib import loads

    config = loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    layered: set[str] = set()
    for contract in config["contracts"]:
        for layer in contract.get("layers", []):
            layered.update(name.strip() for name in layer.replace(":", "|").split("|"))
    packages = {f"evalops.{path.parent.name}" for path in (REPO / "evalops").glob("*/__init__.py")}
    directories = {
        f"evalops.{path.name}"
        for path in (REPO / "evalops").iterdir()
        if path.is_dir() and any(path.glob("*.py"))
    }
    assert directories <= packages, (
        f"namespace packages import-linter cannot see: {directories - packages}"
    )
    assert packages <= layered, f"packages in no layer: {packages - layered}"


@pytest.mark.parametrize(
    ("module", "upward"),
    [
        ("evalops.services.planted", "evalops.cli.main"),
        ("evalops.store.planted", "evalops.cli.output"),
        ("evalops.registry.planted", "evalops.services.gate.check"),
        ("evalops.domain.planted", "evalops.store.tables"),
        ("evalops.report.planted", "evalops.cli.main"),
        ("evalops.importers.planted", "evalops.services.ingest.imports"),
        ("evalops.record", "evalops.cli.main"),
        # The services sub-packages' own layers and rules (ARCHITECTURE.md, "Services by
        # capability").
        ("evalops.services.authority.planted", "evalops.services.reports.audit"),
        ("evalops.services.registry.planted", "evalops.services.evidence.review"),
        ("evalops.services.gate.input_parts", "evalops.store.queries"),
        ("evalops.services.gate.policy_choice", "evalops.services.gate.policies"),
        ("evalops.services.reads.planted", "evalops.services.ingest.trials"),
        ("evalops.services.reads.planted", "evalops.store.tables"),
        # Sideways, not upwards: a frozen evaluator reaching a live rule (or anything else).
        ("evalops.domain.legacy.gate_v1", "evalops.domain.waivers"),
        ("evalops.domain.legacy.planted", "evalops.errors"),
    ],
)
def test_an_upward_import_breaks_the_contracts(tmp_path: Path, module: str, upward: str) -> None:
    root = _copy_of_the_tree(tmp_path)
    path = root.joinpath(*module.split(".")).with_suffix(".py")
    # Inside a function, as the CLI's lazy imports are: import-linter sees those too.
    planted = f"\n\ndef _planted() -> None:\n    import {upward}  # noqa: F401\n"
    path.write_text(
        (path.read_text(encoding="utf-8") if path.exists() else '"""Planted."""\n') + planted,
        encoding="utf-8",
    )
    done = _lint_imports(root)
    assert done.returncode != 0, done.stdout
    assert f"{module} -> {upward}" in done.stdout, done.stdout


def test_the_frozen_evaluators_import_only_each_other() -> None:
    """`evalops/domain/legacy/` imports nothing of evalops outside itself, read from the
    source (the contract above checks the same through import-linter's graph): a live rule
    changed later must not change what an old decision replays to (ARCHITECTURE.md, "Add an
    evaluator version")."""
    import ast

    legacy = REPO / "evalops" / "domain" / "legacy"
    modules = sorted(legacy.glob("*.py"))
    assert len(modules) >= 10
    outside: list[str] = []
    for path in modules:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                assert node.level == 0, f"{path.name}: a relative import"
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            outside += [
                f"{path.name}: {name}"
                for name in names
                if (name == "evalops" or name.startswith("evalops."))
                and not (name + ".").startswith("evalops.domain.legacy.")
            ]
    assert outside == []
