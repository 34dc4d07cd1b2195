"""PyYAML, imported without compiling its slowest regular expression (a start-up optimization).

PyYAML's reader compiles `Reader.NON_PRINTABLE`, a negated class running up to U+10FFFF, when
the module is imported; Python's regular-expression compiler takes about 4 ms of CPU for it,
more than the rest of PyYAML's import and a twentieth of `evalops validate`
(benchmarks/RESULTS.md). The same set of characters, written as the short list of what it
matches (every character below U+10000, so the compiler has no astral range to map),
compiles ten times faster. Here `re.compile` is given that equivalent for exactly that
pattern, only while PyYAML is imported, and restored at once.

The two patterns match the same characters, every code point checked
(tests/integrity/test_yaml_fast_path.py); a PyYAML whose pattern differs, or a process that
imported PyYAML before this module, simply compiles its own as usual.
"""

from __future__ import annotations

import re
import sys
from typing import Any

#: `yaml.reader.Reader.NON_PRINTABLE`'s pattern (PyYAML 5 and 6): what YAML may not hold.
PYYAML_NON_PRINTABLE = "[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"
#: The characters it matches, listed: C0 controls but tab, LF and CR; DEL to U+0084; U+0086
#: to U+009F; the surrogates; U+FFFE and U+FFFF.
NON_PRINTABLE = "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x84\x86-\x9f\ud800-\udfff\ufffe\uffff]"


def _import_yaml() -> None:
    if "yaml" in sys.modules:
        return
    compile_ = re.compile

    def quick(pattern: Any, flags: Any = 0) -> re.Pattern[Any]:
        if flags == 0 and type(pattern) is str and pattern == PYYAML_NON_PRINTABLE:
            return compile_(NON_PRINTABLE)
        return compile_(pattern, flags)

    re.compile = quick
    try:
        import yaml  # noqa: F401  (imported here, under the quick compile)
    finally:
        re.compile = compile_


_import_yaml()

import yaml  # noqa: E402  (after the import above: already loaded, this only binds it)

__all__ = ["yaml"]
