"""The typer internals evalops/cli/fastparams.py relies on are still there, with their shape.

fastparams falls back to typer's own option parsing whenever an internal is missing, so a
typer upgrade that changes them would not break the CLI: it would silently make every start
slower (pydantic imported on every `--help`). These tests fail loudly instead, saying what to
check. pyproject.toml bounds typer below its next minor version for the same reason.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import inspect
import tomllib
from pathlib import Path
from typing import Any

import pytest
import typer

from evalops.cli import fastparams
from evalops.cli.main import HELP_NAMES, app, command_tree

REPO = Path(__file__).resolve().parents[2]
WHAT_TO_CHECK = (
    "typer {version} changed an internal that evalops/cli/fastparams.py patches: compare "
    "typer/_coercion.py (RuntimeParam, build_runtime_param) and typer/core.py "
    "(_TyperParameter._runtime_param, get_runtime_param, type_descriptor) with what "
    "fastparams expects, adapt fastparams, then move typer's upper bound in pyproject.toml"
)


def _fail(detail: str) -> str:
    return f"{WHAT_TO_CHECK.format(version=typer.__version__)}. {detail}"


def _patched_tree() -> Any:
    # The CLI's own tree: every sub-command built as invoking it would (fastparams installed).
    return command_tree()


def _params(command: Any) -> list[Any]:
    found = list(getattr(command, "params", []))
    for sub in getattr(command, "commands", {}).values():
        found.extend(_params(sub))
    return found


def _option(command: Any, name: str) -> Any:
    for param in command.params:
        if name in getattr(param, "opts", ()):
            return param
    raise AssertionError(f"the CLI has no global option {name}")


def test_the_installed_typer_is_within_the_declared_bound() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    (spec,) = [d for d in project["project"]["dependencies"] if d.startswith("typer")]
    lower, upper = (part.strip() for part in spec.removeprefix("typer").split(","))
    installed = importlib.metadata.version("typer")

    def as_tuple(version: str) -> tuple[int, ...]:
        return tuple(int(part) for part in version.split(".")[:3])

    assert lower.startswith(">=") and upper.startswith("<"), spec
    assert as_tuple(lower[2:]) <= as_tuple(installed) < as_tuple(upper[1:]), (
        f"typer {installed} is outside {spec}: run tests/cli/test_typer_internals.py against it "
        "before moving the bound"
    )


def test_typer_still_has_the_coercion_classes_fastparams_extends() -> None:
    try:
        from typer._coercion import RuntimeParam, build_runtime_param
    except ImportError as missing:
        pytest.fail(_fail(f"import failed: {missing}"))
    assert fastparams._plain_first() is not None, _fail("fastparams found no RuntimeParam")
    fields = {field.name for field in dataclasses.fields(RuntimeParam)}
    assert {"parameter_info", "annotation"} <= fields, _fail(f"RuntimeParam fields: {fields}")
    coerce = inspect.signature(RuntimeParam._coerce_value)
    assert list(coerce.parameters) == ["self", "value", "param", "ctx"], _fail(
        f"RuntimeParam._coerce_value{coerce}"
    )
    assert list(inspect.signature(build_runtime_param).parameters) == ["descriptor"], _fail(
        "build_runtime_param no longer takes one type descriptor"
    )


def test_every_simple_option_of_the_cli_gets_the_plain_coercion() -> None:
    plain_first = fastparams._plain_first()
    assert plain_first is not None, _fail("typer._coercion is missing")
    params = _params(_patched_tree())
    for param in params:
        descriptor = getattr(param, "type_descriptor", None)
        assert descriptor is not None, _fail(f"{param.name} has no type_descriptor")
        for name in ("parameter_info", "annotation", "file_annotation"):
            assert hasattr(descriptor, name), _fail(f"the type descriptor has no {name}")
    patched = [p for p in params if isinstance(p._runtime_param, plain_first)]
    # Most options of the CLI are plain strings, flags, numbers and paths.
    assert len(patched) > len(params) // 2, _fail(f"only {len(patched)} of {len(params)} patched")


def test_typer_consults_the_patched_coercion_and_falls_back_for_the_rest() -> None:
    command = _patched_tree()
    lock_timeout = _option(command, "--lock-timeout")
    plain_first = fastparams._plain_first()
    assert plain_first is not None, _fail("typer._coercion is missing")
    runtime = lock_timeout.get_runtime_param()
    assert isinstance(runtime, plain_first), _fail(
        "typer's parameter no longer reads its coercion from _runtime_param"
    )
    from typer._click import Context

    ctx = Context(command)
    assert lock_timeout.process_value(ctx, "2.5") == 2.5
    # A value the plain path does not take goes to typer's own coercion and its error.
    with pytest.raises(typer.BadParameter, match="valid number"):
        lock_timeout.process_value(ctx, "soon")


def test_the_help_option_is_patched_through_typers_context() -> None:
    try:
        from typer._click import Context
    except ImportError as missing:
        pytest.fail(_fail(f"typer._click.Context: {missing}"))
    command = typer.main.get_command(app)
    helper = command.get_help_option(Context(command, help_option_names=HELP_NAMES))
    assert helper is not None, _fail("the root command has no help option")
    assert set(HELP_NAMES) <= set(helper.opts), _fail(f"help option names: {helper.opts}")


def test_typer_still_has_what_the_lazy_root_group_calls() -> None:
    """evalops/cli/main.py builds one sub-command at a time with typer's own conversion and
    resolves a command name with typer's copy of click's lookup (`EvalopsGroup`)."""
    from typer.core import TyperGroup

    resolve = getattr(TyperGroup, "_click_resolve_command", None)
    assert resolve is not None, "TyperGroup._click_resolve_command is gone: adapt EvalopsGroup"
    assert list(inspect.signature(resolve).parameters) == ["self", "ctx", "args"]
    command_kw = set(inspect.signature(typer.main.get_command_from_info).parameters)
    assert {"command_info", "pretty_exceptions_short", "rich_markup_mode"} <= command_kw
    group_kw = set(inspect.signature(typer.main.get_group_from_info).parameters)
    assert {
        "group_info",
        "pretty_exceptions_short",
        "suggest_commands",
        "rich_markup_mode",
    } <= group_kw
