"""Plain option values without importing pydantic (so commands and `--help` start fast).

typer coerces every non-flag option through a pydantic TypeAdapter, built even for an option
left at its default, and importing pydantic costs more than importing typer itself. The
global options are parsed on every command, `evalops gate check --help` included, and most
commands take repeatable paths (`--sign-with`, `--anchors`), so their ordinary values (a
string, a path, a non-negative number of seconds, one of a few words, a list of strings or
paths) are taken here directly. Anything else (a malformed number,
a value out of range, a type this module does not know) goes to typer's own coercion, with
its usual error messages. If typer's internals ever change shape, nothing is replaced and
typer coerces everything as before.
"""

import functools
import math
import os
import re
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

_NUMBER = re.compile(r"[0-9]{1,15}(\.[0-9]{1,15})?")
_INTEGER = re.compile(r"[0-9]{1,15}")
_PATH_DEFAULTS = {
    "exists": False,
    "file_okay": True,
    "dir_okay": True,
    "writable": False,
    "resolve_path": False,
    "allow_dash": False,
    "path_type": None,
}


def _number(annotation: Any, minimum: Any, maximum: Any, value: Any) -> tuple[bool, Any]:
    if isinstance(value, bool):
        return False, None
    if isinstance(value, annotation):
        number = value
    elif isinstance(value, str) and (_INTEGER if annotation is int else _NUMBER).fullmatch(value):
        number = annotation(value)
    else:
        return False, None
    if math.isnan(number) or (minimum is not None and number < minimum):
        return False, None
    if maximum is not None and number > maximum:
        return False, None
    return True, number


def _items(item: Any, info: Any, values: Any) -> tuple[bool, Any]:
    """A repeatable option's values (a tuple from the parser), as typer's list."""
    if not isinstance(values, tuple | list):
        return False, None
    taken = []
    for value in values:
        ok, plain = _plain(item, info, value)
        if not ok:
            return False, None
        taken.append(plain)
    return True, taken


def _plain(annotation: Any, info: Any, value: Any) -> tuple[bool, Any]:
    """(True, the coerced value) when `value` is ordinary for `annotation`, else (False, _)."""
    if get_origin(annotation) is list:
        return _items(get_args(annotation)[0], info, value)
    if get_origin(annotation) is Literal:
        words = get_args(annotation)
        return (True, value) if isinstance(value, str) and value in words else (False, None)
    if annotation is bool:
        return (True, value) if isinstance(value, bool) else (False, None)
    if annotation is str or annotation == (str | None):
        return (True, value) if isinstance(value, str) else (False, None)
    if annotation in (int, float):
        return _number(annotation, info.min, info.max, value)
    if annotation is Path and isinstance(value, str | Path) and str(value):
        # typer's checks with default flags: a missing path is fine, an existing one must be
        # readable; anything else is left to typer.
        path = Path(value)
        if not os.path.lexists(path) or os.access(path, os.R_OK):
            return True, path
    return False, None


def _simple(descriptor: Any) -> bool:
    """A flag, or a plain string, optional string, number, path, word among a few, or a
    list of strings or paths (no extra checks)."""
    info = descriptor.parameter_info
    if descriptor.file_annotation is not None or getattr(info, "parser", None) is not None:
        return False
    if getattr(info, "clamp", False):
        return False
    annotation = descriptor.annotation
    if get_origin(annotation) is Literal:
        return all(isinstance(word, str) for word in get_args(annotation))
    if get_origin(annotation) is list:
        (annotation,) = get_args(annotation)
        if annotation not in (str, Path):
            return False
    if annotation in (bool, str, str | None, int, float):
        return True
    return annotation is Path and all(
        getattr(info, name, "?") == want for name, want in _PATH_DEFAULTS.items()
    )


@functools.cache
def _plain_first() -> type | None:
    """typer's runtime-coercion class extended with the plain path (None: another typer)."""
    try:
        from typer._coercion import RuntimeParam, build_runtime_param
    except ImportError:  # another typer: it coerces everything itself
        return None

    class PlainFirst(RuntimeParam):
        """Ordinary values directly; anything else through typer's own coercion."""

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            ok, plain = _plain(self.annotation, self.parameter_info, value)
            if ok:
                return plain
            return build_runtime_param(param.type_descriptor)._coerce_value(value, param, ctx)

    return PlainFirst


def install(params: list[Any]) -> None:
    """Give each of `params` (typer parameters of one command) the plain coercion."""
    plain_first = _plain_first()
    if plain_first is None:
        return
    for param in params:
        descriptor = getattr(param, "type_descriptor", None)
        if descriptor is None or getattr(param, "_runtime_param", False) is not None:
            continue
        if _simple(descriptor):
            param._runtime_param = plain_first(
                parameter_info=descriptor.parameter_info, annotation=descriptor.annotation
            )


def install_tree(command: Any, help_names: list[str]) -> None:
    """`install` on every command below `command` (itself included) and their help options.

    Only an optimization: if typer's internals do not have the expected shape, nothing is
    installed and typer parses every option itself.
    """
    try:
        from typer._click import Context
    except ImportError:
        return
    params = list(getattr(command, "params", []))
    try:
        if hasattr(command, "get_help_option"):
            helper = command.get_help_option(Context(command, help_option_names=help_names))
            if helper is not None:
                params.append(helper)
        install(params)
    except (TypeError, AttributeError):
        return
    for sub in getattr(command, "commands", {}).values():
        install_tree(sub, help_names)
