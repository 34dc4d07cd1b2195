"""The test process's collector (tests/gc_tuning.py): cycles are collected and survivors
frozen at the end of each test module, not between the tests of one module."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

FILES = {
    "shared.py": "",
    "test_a.py": """
        import gc
        import weakref

        import shared


        class Node:
            pass


        def test_a_cycle_made_with_the_collector_off():
            gc.disable()  # no young collection may take the cycle: only the plugin's
            node = Node()
            node.self = node
            shared.cycle = weakref.ref(node)
            del node
            shared.survivor = Node()
            assert shared.cycle() is not None


        def test_the_same_module_next():
            assert shared.cycle() is not None  # not collected between two tests of a module
            assert any(o is shared.survivor for o in gc.get_objects())  # nor frozen
    """,
    "test_b.py": """
        import gc

        import shared


        def test_the_next_module():
            try:
                assert shared.cycle() is None  # collected when test_a.py ended
                # Frozen: the collector's generations no longer hold it.
                assert not any(o is shared.survivor for o in gc.get_objects())
            finally:
                gc.enable()
    """,
}


def test_cycles_are_collected_and_survivors_frozen_at_each_module_end(tmp_path: Path) -> None:
    for name, text in FILES.items():
        (tmp_path / name).write_text(textwrap.dedent(text), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    # Only the plugin under test; `addopts` would load the suite's others.
    argv = ["-q", "-p", "tests.gc_tuning", "-p", "no:cacheprovider", "-o", "addopts="]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *argv, "test_a.py", "test_b.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed" in done.stdout, done.stdout
