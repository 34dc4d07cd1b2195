"""The maintainer's map holds: services grouped by capability behind faces, no import cycle,
no private name crossing a module.

- `evalops/services/` holds sub-packages and only the agreed flat helpers;
- each sub-package's `__init__.py` has a docstring and a literal `__all__` naming its face,
  and a module outside the sub-package imports only modules of that face;
- no import cycle anywhere in `evalops/`, imports inside functions included (import-linter's
  layers see neither cycles within a layer nor function-level imports as cycles);
- no private name (`_x`) imported from another module, nor read as `module._x`.

Each check also runs on a tiny planted package, so a check that stopped finding anything
fails here too. The checks read source with `ast` (tests/contract/import_map.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.contract.import_map import (
    Layout,
    cycles,
    graph,
    layout_problems,
    modules,
    private_imports,
)

REPO = Path(__file__).resolve().parents[2]

SERVICES = Layout("evalops.services", frozenset({"database", "destroy", "placeholders"}))


def _relative(problem: str) -> str:
    return problem.replace(f"{REPO}/", "")


# --- the real tree ----------------------------------------------------------------------


def test_services_holds_only_sub_packages_with_faces_and_the_agreed_helpers() -> None:
    assert layout_problems(REPO, "evalops", SERVICES) == []


def test_no_import_cycle_in_evalops() -> None:
    found = cycles(graph(modules(REPO, "evalops")))
    assert found == [], found


def test_no_private_name_crosses_a_module_in_evalops() -> None:
    found = [_relative(p) for p in private_imports(modules(REPO, "evalops"))]
    assert found == [], found


def test_the_graph_sees_the_layers() -> None:
    """A sanity check of the reader itself: edges the code is known to have are found, both
    module-level (`from pkg import module`) and inside a function."""
    edges = graph(modules(REPO, "evalops"))
    assert "evalops.cli.context" in edges["evalops.cli.verify"]
    assert "evalops.cli.demo" in edges["evalops.cli.verify"]  # inside `demo`
    assert "evalops.services.gate.check" in edges["evalops.cli.gate"]
    assert sum(len(e) for e in edges.values()) > 500


# --- planted violations -----------------------------------------------------------------


def _plant(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


FACE = '"""A capability."""\n__all__ = ["a"]\n'
HEALTHY = {
    "pkg/__init__.py": "",
    "pkg/services/__init__.py": '"""Services."""\n',
    "pkg/services/database.py": "",
    "pkg/services/one/__init__.py": FACE,
    "pkg/services/one/a.py": "from pkg.services.one import b\n",
    "pkg/services/one/b.py": "",
    "pkg/services/two/__init__.py": FACE,
    "pkg/services/two/a.py": "from pkg.services.one import a\n",
    "pkg/cli.py": "from pkg.services.two.a import x\nimport pkg.services.one.a\n",
}
PLANTED_LAYOUT = Layout("pkg.services", frozenset({"database"}))


def test_a_healthy_planted_package_passes_every_check(tmp_path: Path) -> None:
    root = _plant(tmp_path, HEALTHY)
    known = modules(root, "pkg")
    assert layout_problems(root, "pkg", PLANTED_LAYOUT) == []
    assert cycles(graph(known)) == []
    assert private_imports(known) == []


def test_a_flat_module_outside_the_helpers_is_caught(tmp_path: Path) -> None:
    root = _plant(tmp_path, {**HEALTHY, "pkg/services/stray.py": ""})
    [problem] = layout_problems(root, "pkg", PLANTED_LAYOUT)
    assert "stray.py: flat module in pkg.services" in problem


@pytest.mark.parametrize(
    ("init", "expected"),
    [
        ('__all__ = ["a"]\n', "without a docstring"),
        ('"""A capability."""\n', "without a literal __all__"),
        ('"""A capability."""\n__all__ = ["a", "gone"]\n', "names no such module: ['gone']"),
    ],
)
def test_a_sub_package_without_a_face_is_caught(tmp_path: Path, init: str, expected: str) -> None:
    root = _plant(tmp_path, {**HEALTHY, "pkg/services/two/__init__.py": init})
    problems = layout_problems(root, "pkg", PLANTED_LAYOUT)
    assert any(expected in p for p in problems), problems


def test_a_sub_package_without_init_is_caught(tmp_path: Path) -> None:
    root = _plant(tmp_path, {**HEALTHY, "pkg/services/three/c.py": ""})
    problems = layout_problems(root, "pkg", PLANTED_LAYOUT)
    assert any("three: sub-package without __init__.py" in p for p in problems), problems


@pytest.mark.parametrize(
    "importer",
    [
        "from pkg.services.one import b\n",
        "from pkg.services.one.b import thing\n",
        "import pkg.services.one.b\n",
        "def later():\n    from pkg.services.one import b\n",
        "from ..one import b\n",
    ],
)
def test_an_import_behind_another_sub_package_s_face_is_caught(
    tmp_path: Path, importer: str
) -> None:
    root = _plant(tmp_path, {**HEALTHY, "pkg/services/two/a.py": importer})
    [problem] = layout_problems(root, "pkg", PLANTED_LAYOUT)
    assert "pkg.services.two.a imports pkg.services.one.b" in problem


def test_an_import_behind_a_face_from_outside_services_is_caught(tmp_path: Path) -> None:
    root = _plant(tmp_path, {**HEALTHY, "pkg/cli.py": "from pkg.services.one.b import x\n"})
    [problem] = layout_problems(root, "pkg", PLANTED_LAYOUT)
    assert "pkg.cli imports pkg.services.one.b" in problem


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        # module level, both ways
        ({"pkg/x.py": "import pkg.y\n", "pkg/y.py": "from pkg import x\n"}, ["pkg.x", "pkg.y"]),
        # the cli one fixed here: the second edge inside a function
        (
            {
                "pkg/x.py": "from pkg.y import f\n",
                "pkg/y.py": "from pkg import z\n",
                "pkg/z.py": "def run():\n    from pkg.x import g\n",
            },
            ["pkg.x", "pkg.y", "pkg.z"],
        ),
        # relative imports, and one under `if TYPE_CHECKING`
        (
            {
                "pkg/sub/x.py": "from . import y\n",
                "pkg/sub/y.py": "if TYPE_CHECKING:\n    from .x import T\n",
            },
            ["pkg.sub.x", "pkg.sub.y"],
        ),
        # through a package's __init__
        (
            {"pkg/sub/__init__.py": "from pkg.x import f\n", "pkg/x.py": "import pkg.sub\n"},
            ["pkg.sub", "pkg.x"],
        ),
    ],
)
def test_an_import_cycle_is_caught(
    tmp_path: Path, files: dict[str, str], expected: list[str]
) -> None:
    root = _plant(tmp_path, {**HEALTHY, **files})
    assert cycles(graph(modules(root, "pkg"))) == [expected]


def test_a_long_chain_without_a_cycle_is_not_one(tmp_path: Path) -> None:
    """Four hundred modules in a line: no false cycle, and no recursion limit hit."""
    chain = {f"pkg/m{i}.py": f"from pkg import m{i + 1}\n" for i in range(400)}
    root = _plant(tmp_path, {**HEALTHY, **chain, "pkg/m400.py": ""})
    assert cycles(graph(modules(root, "pkg"))) == []
    closed = _plant(tmp_path, {"pkg/m400.py": "from pkg import m0\n"})
    [cycle] = cycles(graph(modules(closed, "pkg")))
    assert len(cycle) == 401


@pytest.mark.parametrize(
    ("importer", "expected"),
    [
        ("from pkg.helpers import _secret\n", "imports _secret of pkg.helpers"),
        ("from .helpers import _secret\n", "imports _secret of pkg.helpers"),
        ("def f():\n    from pkg.helpers import _secret\n", "imports _secret of pkg.helpers"),
        ("from pkg import helpers\nhelpers._secret()\n", "uses _secret of pkg.helpers"),
        ("import pkg.helpers as h\nh._secret()\n", "uses _secret of pkg.helpers"),
        ("import pkg.helpers\npkg.helpers._secret()\n", "uses _secret of pkg.helpers"),
        ("from pkg.sub import _impl\n", "imports _impl of pkg.sub._impl"),
    ],
)
def test_a_private_name_crossing_modules_is_caught(
    tmp_path: Path, importer: str, expected: str
) -> None:
    root = _plant(
        tmp_path,
        {
            **HEALTHY,
            "pkg/helpers.py": "def _secret(): ...\n",
            "pkg/sub/__init__.py": "",
            "pkg/sub/_impl.py": "",
            "pkg/user.py": importer,
        },
    )
    [problem] = private_imports(modules(root, "pkg"))
    assert expected in problem and "pkg.user" in problem


def test_a_private_module_used_inside_its_own_package_and_dunders_are_fine(
    tmp_path: Path,
) -> None:
    root = _plant(
        tmp_path,
        {
            **HEALTHY,
            "pkg/sub/__init__.py": "",
            "pkg/sub/_impl.py": "",
            "pkg/sub/user.py": "from pkg.sub import _impl\nfrom pkg import __version__\n",
            "pkg/other.py": "import os\nos._exit\nfrom pkg.sub import user\nuser.__name__\n",
        },
    )
    assert private_imports(modules(root, "pkg")) == []
