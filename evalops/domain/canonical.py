"""Canonical JSON (RFC 8785, JCS) and sha256 digests (docs/digests.md).

`canonical_json` takes a fast path through the standard library's C encoder when the
value is one whose JCS form it is known to produce byte for byte, and `rfc8785` otherwise:
- every object key is in the Basic Multilingual Plane (then sorting by code point equals
  JCS's sorting by UTF-16 code units);
- every float is either integral and within +-(2^53-1) (written as an integer, as JCS
  does) or of magnitude in [1e-4, 1e16), where Python's shortest round-trip repr and
  ECMAScript's Number.prototype.toString agree digit for digit and both use plain
  notation;
- strings: `json.dumps(ensure_ascii=False)` escapes exactly what JCS escapes (", \\ and
  U+0000..U+001F, with the same short forms and lowercase \\u00xx).
tests/domain/test_canonical.py proves the equality on RFC 8785's published examples and on
Hypothesis-generated values.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, overload

if TYPE_CHECKING:
    from hashlib import sha256 as _builtin_sha256
else:
    try:
        # hashlib loads OpenSSL, which costs a command that hashes a few small documents
        # (`validate`) more than the hashing: CPython's own SHA-256 first, as the standard
        # library's random.py does for SHA-512; the same digest either way
        # (tests/domain/test_canonical.py).
        from _sha256 import sha256 as _builtin_sha256
    except ImportError:  # not CPython 3.11 (3.12 calls it _sha2)
        from hashlib import sha256 as _builtin_sha256

DIGEST_PREFIX = "sha256:"
GENESIS_HASH = DIGEST_PREFIX + "0" * 64
MAX_SAFE_INTEGER = 2**53 - 1

_ENCODER = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, sort_keys=True, separators=(",", ":")
)


_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


class _NotFast(Exception):
    pass


def _plain_float(value: float) -> int | float:
    """A finite float as a value the C encoder writes in JCS form: integral floats as ints
    (JCS writes 1.0 as 1), plain-notation magnitudes as they are; else _NotFast."""
    if value.is_integer():
        if abs(value) > MAX_SAFE_INTEGER:
            raise _NotFast
        return int(value)
    if not 1e-4 <= abs(value) < 1e16:
        raise _NotFast
    return value


def _fast_form(value: Any) -> Any:
    """The value with integral floats as ints, or _NotFast when JCS needs rfc8785."""
    if isinstance(value, str) or value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if abs(value) > MAX_SAFE_INTEGER:
            raise _NotFast
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _NotFast
        return _plain_float(value)
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str) or (not key.isascii() and _ASTRAL.search(key)):
                raise _NotFast
            out[key] = _fast_form(item)
        return out
    if isinstance(value, list | tuple):
        return [_fast_form(item) for item in value]
    raise _NotFast


def canonical_json_reference(value: Any) -> bytes:
    """RFC 8785 canonical bytes via the `rfc8785` package (the reference).

    Imported when first needed: most values take the encoder's path below, and a command
    that only hashes a few files (`validate`) then starts without it."""
    import rfc8785

    return rfc8785.dumps(value)


def canonical_json(value: Any) -> bytes:
    """RFC 8785 canonical bytes of a JSON value (dicts, lists, str, int, float, bool, None)."""
    try:
        fast = _fast_form(value)
    except _NotFast:
        return canonical_json_reference(value)
    try:
        return _ENCODER.encode(fast).encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate: let the reference raise its own, well-defined error.
        return canonical_json_reference(value)


# The C encoder's bytes differ from JCS's only in these forms (module docstring). They are
# found in the encoded bytes with substring searches (memchr speed, where a regex costs
# 30 ns a character): a match inside a string only costs a slower path, never a wrong byte.
# In `shape` every digit reads 0 and every ":", "," and "[" (what precedes a value) reads |.
_SHAPE = bytes.maketrans(b"123456789:,[", b"000000000|||")
# The end of a number token of 16 digits or more (maybe beyond 2^53); `_long_integer` then
# looks back for its start: a string's digits, a float's fraction are not one.
_LONG_INTEGER_ENDS = (b"0" * 16 + b"|", b"0" * 16 + b"]", b"0" * 16 + b"}")
_EXPONENT = (b"0e-0", b"0e+0")  # 1e-05, 1.5e+16: JCS writes 0.00001 and 15000000000000000
_INTEGRAL_FLOAT = (b".0,", b".0]", b".0}")  # 1.0, -0.0: JCS writes 1 and 0
_ASTRAL_LEADS = (b"\xf0", b"\xf1", b"\xf2", b"\xf3", b"\xf4")  # keys sort by UTF-16 units


_FLOAT_DECODER = json.JSONDecoder(parse_float=lambda token: _plain_float(float(token)))


def canonical_json_document(value: Mapping[str, Any] | list[Any]) -> bytes:
    """`canonical_json` of a large object or array whose object keys are all `str` (parsed
    JSON, or built by evalops): the C encoder's bytes, searched for the only forms in which
    they can differ from RFC 8785, instead of a Python walk over every node. Where only
    float forms may differ (1.0 for 1), the C decoder reads the text back with its floats in
    JCS form and the C encoder writes it again: its tokenizer, not a pattern, tells numbers
    from strings. tests/domain/test_canonical.py proves it byte-identical to `rfc8785`."""
    try:
        data = _ENCODER.encode(value).encode("utf-8")
    except (ValueError, TypeError, UnicodeEncodeError):
        # NaN, Infinity, a non-JSON type or a lone surrogate: as the reference does.
        return canonical_json(value)
    if any(lead in data for lead in _ASTRAL_LEADS):
        return canonical_json(value)
    long_integer, exponent = _shape_forms(data)
    if long_integer:
        return canonical_json(value)
    if exponent or any(form in data for form in _INTEGRAL_FLOAT):
        try:
            return _ENCODER.encode(_FLOAT_DECODER.decode(data.decode("utf-8"))).encode("utf-8")
        except _NotFast:
            return canonical_json(value)
    return data


_SHAPE_CHUNK = 1 << 20
_SHAPE_OVERLAP = 16  # the longest form's length minus one: no form is split unseen
_LOOK_BACK = 64  # digits before a chunk that `_long_integer` may walk back over


def _long_integer(shape: bytes, first: int) -> bool:
    """Whether a long integer token ends in `shape` at or after `first` (earlier bytes are
    look-back): a run of 16 or more digits that a delimiter ends and "|" or "|-" begins.
    A run longer than the look-back counts as one (the reference decides)."""
    for end in _LONG_INTEGER_ENDS:
        at = shape.find(end, first)
        while at != -1:
            i = at
            while i > 0 and shape[i - 1] == 0x30:  # "0": every digit
                i -= 1
            if i > 0 and shape[i - 1] == 0x2D:  # "-"
                i -= 1
            if i == 0 or shape[i - 1] == 0x7C:  # "|": ":", "," or "["
                return True
            at = shape.find(end, at + 1)
    return False


def _shape_forms(data: bytes) -> tuple[bool, bool]:
    """(a long integer, an exponent) seen in `data`'s shape, translated a chunk at a time
    so that a large document is never copied whole."""
    exponent = False
    for start in range(0, len(data), _SHAPE_CHUNK):
        back = min(start, _LOOK_BACK)
        shape = data[start - back : start + _SHAPE_CHUNK + _SHAPE_OVERLAP].translate(_SHAPE)
        if _long_integer(shape, back):
            return True, exponent
        exponent = exponent or any(form in shape for form in _EXPONENT)
    return False, exponent


def encode_trusted(value: Any) -> bytes:
    """The C encoder's bytes of a value the caller has vouched is on the fast path (finite
    floats of plain magnitude or integral ones already ints, safe ints, keys in the BMP):
    then they are its RFC 8785 form (tests/domain/test_canonical.py)."""
    return _ENCODER.encode(value).encode("utf-8")


@overload
def plain_number(value: float) -> float: ...
@overload
def plain_number(value: None) -> None: ...
@overload
def plain_number(value: float | None) -> float | None: ...
def plain_number(value: float | None) -> float | None:
    """A score as canonical JSON writes it (an integral float as an int), so a document
    built from stored floats takes `canonical_json_document`'s first path. Its bytes are
    the same either way."""
    if isinstance(value, float) and value.is_integer() and abs(value) <= MAX_SAFE_INTEGER:
        return int(value)
    return value


def plain_floats(value: Any) -> Any:
    """`value` with every integral float of safe magnitude an int (`plain_number` all
    through, a copy; everything else as it is): canonical JSON writes both alike, and a
    document built from stored floats then takes `canonical_json_document`'s first path
    instead of being decoded and encoded again. Its bytes are the same either way."""
    kind = type(value)
    if kind is float:
        return int(value) if value.is_integer() and abs(value) <= MAX_SAFE_INTEGER else value
    if kind is dict:
        return {key: plain_floats(item) for key, item in value.items()}
    if kind is list:
        return [plain_floats(item) for item in value]
    return value


_BUILTIN_BYTES = 1 << 20
"""How much a process hashes with CPython's SHA-256 before it loads OpenSSL's: from 300
bytes on, OpenSSL's is 2 to 6 times faster (SHA extensions), and loading it costs what the
builtin spends on about a megabyte. An ingest hashes every record twice, a gate decision
its 12 MB of inputs and result."""

_builtin_left = [_BUILTIN_BYTES]


def sha256_digest(data: bytes) -> str:
    """`"sha256:"` and the hex SHA-256 of `data`: by OpenSSL once hashlib is loaded (by
    anything) or once this process has hashed `_BUILTIN_BYTES`, else by CPython's own."""
    # Read off the module, not its presence: another thread may be importing hashlib, and
    # a module is in `sys.modules` before its `sha256` is defined.
    openssl: Any = getattr(sys.modules.get("hashlib"), "sha256", None)
    if openssl is None:
        _builtin_left[0] -= len(data)
        if _builtin_left[0] >= 0:
            return DIGEST_PREFIX + _builtin_sha256(data).hexdigest()
        openssl = __import__("hashlib").sha256  # the import lock waits for a whole module
    return DIGEST_PREFIX + str(openssl(data).hexdigest())


def digest(value: Any) -> str:
    """`"sha256:" + hex(SHA-256(canonical_json(value)))`."""
    return sha256_digest(canonical_json(value))


def canonical_text(value: Any) -> str:
    """Canonical JSON as text, for storing a value so that it re-hashes to the same digest."""
    return canonical_json(value).decode("utf-8")
