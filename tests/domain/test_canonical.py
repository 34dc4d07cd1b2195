"""The fast canonicalizer is byte-identical to rfc8785 (docs/digests.md)."""

from __future__ import annotations

import hashlib
import json
import struct
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from evalops.domain.canonical import (
    canonical_json,
    canonical_json_document,
    canonical_json_reference,
    canonical_text,
    digest,
    plain_floats,
    plain_number,
)

# RFC 8785 Appendix B: IEEE 754 bit patterns and their JCS spellings.
NUMBER_VECTORS = [
    ("0000000000000000", "0"),
    ("8000000000000000", "0"),
    ("0000000000000001", "5e-324"),
    ("8000000000000001", "-5e-324"),
    ("7fefffffffffffff", "1.7976931348623157e+308"),
    ("ffefffffffffffff", "-1.7976931348623157e+308"),
    ("4340000000000000", "9007199254740992"),
    ("c340000000000000", "-9007199254740992"),
    ("4430000000000000", "295147905179352830000"),
    ("44b52d02c7e14af5", "9.999999999999997e+22"),
    ("44b52d02c7e14af6", "1e+23"),
    ("44b52d02c7e14af7", "1.0000000000000001e+23"),
    ("444b1ae4d6e2ef4e", "999999999999999700000"),
    ("444b1ae4d6e2ef4f", "999999999999999900000"),
    ("444b1ae4d6e2ef50", "1e+21"),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
    ("3eb0c6f7a0b5ed8d", "0.000001"),
    ("41b3de4355555553", "333333333.3333332"),
    ("41b3de4355555554", "333333333.33333325"),
    ("41b3de4355555555", "333333333.3333333"),
    ("41b3de4355555556", "333333333.3333334"),
    ("41b3de4355555557", "333333333.33333343"),
    ("becbf647612f3696", "-0.0000033333333333333333"),
    ("43143ff3c1cb0959", "1424953923781206.2"),
]


@pytest.mark.parametrize(("bits", "expected"), NUMBER_VECTORS)
def test_rfc8785_number_vectors(bits: str, expected: str) -> None:
    (value,) = struct.unpack(">d", bytes.fromhex(bits))
    assert canonical_json(value).decode() == expected
    assert canonical_json_reference(value).decode() == expected


def test_rfc8785_section_3_2_2_example() -> None:
    value = json.loads(
        '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],'
        ' "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",'
        ' "literals": [null, true, false]}'
    )
    expected = (
        '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
        '"string":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
    )
    assert canonical_json(value).decode() == expected
    assert canonical_json_reference(value).decode() == expected


def test_rfc8785_section_3_2_3_sorting_example() -> None:
    value = {
        "\u20ac": "Euro Sign",
        "\r": "Carriage Return",
        "\ufb33": "Hebrew Letter Dalet With Dagesh",
        "1": "One",
        "\U0001f600": "Emoji: Grinning Face",
        "\u0080": "Control",
        "\u00f6": "Latin Small Letter O With Diaeresis",
    }
    order = ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001f600", "\ufb33"]
    assert list(json.loads(canonical_json(value))) == order
    assert canonical_json(value) == canonical_json_reference(value)


SAFE = 2**53 - 1
floats = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from(
    [0.1, 1e-4, 9.9999e-5, 1e16, 9.999999999999998e15, 1e21, 1e-7, 2.5, -0.0, 1e300]
)
keys = st.text(max_size=6) | st.sampled_from(["\U0001f600", "\ufb33", "\u20ac", "a\U0001f600"])
values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-SAFE, max_value=SAFE)
    | floats
    | st.text(max_size=10),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=4),
    max_leaves=25,
)


@pytest.mark.slow  # several CPU seconds: `make test` runs it, `make test-fast` not
@settings(max_examples=1500, deadline=None)
@given(value=values)
def test_fast_path_is_byte_identical_to_rfc8785(value: Any) -> None:
    assert canonical_json(value) == canonical_json_reference(value)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 2**53, {"k": "\ud800"}])
def test_values_outside_json_are_refused_like_the_reference(value: Any) -> None:
    with pytest.raises(Exception) as reference:
        canonical_json_reference(value)
    with pytest.raises(type(reference.value)):
        canonical_json(value)


# Strings that look like the number tokens the scan looks for, so that both of its answers
# (C encoder text as is, or the walk) are exercised inside strings as well as outside.
tricky_text = st.text(max_size=10) | st.sampled_from(
    [":1.0,", "[2e-05]", ",1234567890123456}", "x:-0.0]", "\U0001f600", "a:1.5,b"]
)
documents = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-SAFE, max_value=SAFE) | floats | tricky_text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=4),
    max_leaves=25,
).filter(lambda v: isinstance(v, dict | list))


@pytest.mark.slow  # several CPU seconds: `make test` runs it, `make test-fast` not
@settings(max_examples=1500, deadline=None)
@given(value=documents)
def test_scanned_document_path_is_byte_identical_to_rfc8785(value: Any) -> None:
    assert canonical_json_document(value) == canonical_json_reference(value)


@pytest.mark.parametrize(
    "value",
    [
        {"a": 1.0},
        {"a": [-0.0]},
        {"a": 1e-05},
        {"a": 1e16},
        {"a": 9007199254740991},
        {"b": 2, "\U0001f600": 1, "\ufb33": 0},
        [0.0001, 123456789.5, 1e-07],
        {"s": ":1.0,", "n": 0.5},
        {"s": ":1.0,", "n": 1.0, "t": "[2.0]"},
        [1.0, "x:2.0]", {"k": -0.0, "e": 2.5e-05}],
        {"big": 1e16, "small": 1.0},
        {"n": 1.0, "int16": 1234567890123456},
        {"n": 1.0, "\U0001f600": "astral key", "\ufb33": 2.0},
    ],
)
def test_scanned_document_path_on_every_form_it_must_notice(value: Any) -> None:
    assert canonical_json_document(value) == canonical_json_reference(value)


@pytest.mark.parametrize("value", [[float("nan")], {"k": float("inf")}, [2**53], {"k": "\ud800"}])
def test_scanned_document_path_refuses_like_the_reference(value: Any) -> None:
    with pytest.raises(Exception) as reference:
        canonical_json_reference(value)
    with pytest.raises(type(reference.value)):
        canonical_json_document(value)


@pytest.mark.parametrize("value", [1.0, -0.0, 0.5, 2.0**53, 3, None, 1e-7])
def test_plain_number_keeps_the_canonical_bytes(value: Any) -> None:
    assert canonical_json(plain_number(value)) == canonical_json_reference(value)


@settings(max_examples=400, deadline=None)
@given(value=documents, chunk=st.integers(min_value=1, max_value=40))
def test_the_shape_scan_sees_forms_across_chunk_boundaries(value: Any, chunk: int) -> None:
    """Large documents are scanned a chunk at a time; with chunks of a few bytes every form
    (a 16-digit integer, an exponent) straddles some boundary."""
    from evalops.domain import canonical

    saved = canonical._SHAPE_CHUNK
    canonical._SHAPE_CHUNK = chunk
    try:
        assert canonical_json_document(value) == canonical_json_reference(value)
        for form in ([1e-05, "x" * chunk, 9007199254740991], {"a" * chunk: [2**53]}):
            try:
                expected = canonical_json_reference(form)
            except Exception as reference:
                with pytest.raises(type(reference)):
                    canonical_json_document(form)  # type: ignore[arg-type]
            else:
                assert canonical_json_document(form) == expected  # type: ignore[arg-type]
    finally:
        canonical._SHAPE_CHUNK = saved


@pytest.mark.parametrize(
    "value",
    [
        {"digest": "sha256:3593587338658119" + "87f6cf16aa17" * 4, "n": 1},
        {"mean": 0.30000000000000004, "third": [0.6666666666666666, 1e-4]},
        [{"id": "run:12345678901234567890"}, {"id": "12345678901234567890]"}],
        {"n": 1.0, "digest": "sha256:" + "1" * 64},
    ],
)
def test_digests_and_long_fractions_stay_on_the_fast_path(
    value: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hex digests often begin with 16 decimal digits and scores often have 16 fraction
    digits; neither is a long integer, so neither may cost the walk over every node."""
    from evalops.domain import canonical

    def walk(_: Any) -> bytes:
        raise AssertionError("took the walk")

    monkeypatch.setattr(canonical, "canonical_json", walk)
    assert canonical_json_document(value) == canonical_json_reference(value)


@pytest.mark.parametrize(
    "value", [{"a": 1234567890123456}, [-1234567890123456], {"a": [1, 9007199254740991]}]
)
def test_a_long_integer_token_is_seen(value: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from evalops.domain import canonical

    seen: list[Any] = []
    walk = canonical.canonical_json

    def counted(v: Any) -> bytes:
        seen.append(v)
        return walk(v)

    monkeypatch.setattr(canonical, "canonical_json", counted)
    assert canonical_json_document(value) == canonical_json_reference(value)
    assert seen == [value]


@pytest.mark.parametrize(
    ("value", "expected"),
    [(9007199254740991.0, 9007199254740991), (-9007199254740991.0, -9007199254740991), (4.0, 4)],
)
def test_plain_number_makes_every_safe_integral_float_an_int(value: float, expected: int) -> None:
    """An integral float within JCS's safe integer range (+-(2^53-1), the bound included) is
    written as an integer, so `plain_number` hands it over as an int; beyond it stays a float."""
    shown = plain_number(value)
    assert type(shown) is int and shown == expected
    assert type(plain_number(2.0**53)) is float


@pytest.mark.parametrize("chunk", [80, 100, 128])
def test_digits_inside_a_string_stay_on_the_fast_path_across_chunks(
    chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long run of digits inside a string, ending near a chunk boundary, is not a long
    integer token in any chunk: the look-back bytes before a chunk were already judged, with
    more context, by the chunk before, so they never cost the walk over every node."""
    from evalops.domain import canonical

    value = {"s": "x" + "1" * 80 + ",", "n": 1}

    def walk(_: Any) -> bytes:
        raise AssertionError("took the walk")

    monkeypatch.setattr(canonical, "_SHAPE_CHUNK", chunk)
    monkeypatch.setattr(canonical, "canonical_json", walk)
    assert canonical_json_document(value) == canonical_json_reference(value)


@pytest.mark.parametrize(
    "value",
    [
        {"small": 1e-4, "half": 0.5, "long": 123456789.125, "neg": -0.25},
        [9007199254740991.0, -9007199254740991.0, 1.0, -0.0],
        [9007199254740991, -9007199254740991, 0, True, False, None],
        {"\u00e9": 1, "\ufb33": "BMP keys", "v": "astral values are fine: \U0001f600"},
        ("a tuple", ["nested", {"k": (1, 2.5)}]),
    ],
)
def test_values_the_fast_path_covers_never_reach_the_reference(
    value: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The module's documented fast path: keys in the Basic Multilingual Plane, safe
    integers, integral floats within +-(2^53-1) and other floats of magnitude in
    [1e-4, 1e16) are written by the C encoder, never handed to `rfc8785`."""
    expected = canonical_json_reference(value)

    def reference(_: Any) -> bytes:
        raise AssertionError("took the reference path")

    monkeypatch.setattr(rfc8785, "dumps", reference)
    assert canonical_json(value) == expected


@pytest.mark.parametrize("value", [{"b": [1.0, "\u00e9\U0001f600"], "a": None}, "text", 0.5])
def test_canonical_text_and_digest_follow_the_documented_recipe(value: Any) -> None:
    """docs/digests.md: a digest is "sha256:" + lowercase hex of SHA-256 of the RFC 8785
    bytes; the stored text is those bytes as UTF-8, so it re-hashes to the same digest."""
    reference = rfc8785.dumps(value)
    assert digest(value) == "sha256:" + hashlib.sha256(reference).hexdigest()
    assert canonical_text(value) == reference.decode("utf-8")
    assert canonical_text(value).encode("utf-8") == reference


BEYOND_SAFE_DOCUMENTS = [
    {"a": 10**16},
    {"a": 2**60},
    {"a": -(2**60)},
    [2**60, "x1111111111111111,"],
    ["x1111111111111111,", 2**60, "y1111111111111111,"],
    [10**100, -1, -22, -333, "-"],
    [10**100, "a-"],
    [10**100, 2.5e-07],
    {"k": -(10**100), "l": [-4, -55]},
]


@pytest.mark.parametrize("value", BEYOND_SAFE_DOCUMENTS)
def test_an_integer_beyond_2_53_is_refused_at_every_chunk_size(value: Any) -> None:
    """RFC 8785 (I-JSON) has no integer beyond +-(2^53-1): the reference refuses one, of
    any length (17, 19 or 101 digits, a run longer than the scan's look-back), after any
    key or sign, beside strings that end in digits or a sign, wherever the scan's chunks cut it."""
    from evalops.domain import canonical

    with pytest.raises(Exception) as reference:
        canonical_json_reference(value)
    saved = canonical._SHAPE_CHUNK
    try:
        for chunk in [*range(1, 101), saved]:
            canonical._SHAPE_CHUNK = chunk
            with pytest.raises(type(reference.value)):
                canonical_json_document(value)
    finally:
        canonical._SHAPE_CHUNK = saved


@pytest.mark.parametrize(
    "value",
    [
        {"score": 0.5, "n": 3, "id": "sha256:" + "ab" * 32, "tags": ["x.5", "e-0"]},
        [0.25, -7, {"k": None, "t": True}],
    ],
)
def test_a_document_without_float_forms_to_fix_is_not_read_back(
    value: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only an integral float (1.0) or an exponent (1e-05) makes the C encoder's bytes
    differ from RFC 8785 outside keys and long integers; a document with neither is the
    encoder's bytes as they are, never decoded and encoded again."""
    from evalops.domain import canonical

    class Refuse:
        def decode(self, _: str) -> Any:
            raise AssertionError("read the document back")

    monkeypatch.setattr(canonical, "_FLOAT_DECODER", Refuse())
    assert canonical_json_document(value) == canonical_json_reference(value)


@settings(max_examples=600, deadline=None)
@given(value=documents)
def test_plain_floats_keeps_the_canonical_bytes(value: Any) -> None:
    """Integral floats made ints, nothing else changed: the same RFC 8785 bytes."""
    plain = plain_floats(value)
    assert canonical_json_document(plain) == canonical_json_reference(value)
    assert json.loads(json.dumps(plain)) == value  # the same values (1 == 1.0)


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _leaves(item)]
    if isinstance(value, list):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]


@settings(max_examples=300, deadline=None)
@given(value=documents)
def test_plain_floats_leaves_no_safe_integral_float_and_changes_no_input(value: Any) -> None:
    before = json.dumps(value)
    plain = plain_floats(value)
    assert json.dumps(value) == before  # a copy: the caller's document is not changed
    assert not [
        leaf
        for leaf in _leaves(plain)
        if type(leaf) is float and leaf.is_integer() and abs(leaf) <= 2**53 - 1
    ]


def test_a_gate_result_of_rates_made_plain_is_not_read_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A decision's rows hold rates and means as floats (`passAtK` 1.0): made plain, its
    document takes the encoder's first path."""
    from evalops.domain import canonical

    row = {"passAtK": 1.0, "passHatK": 0.4, "efficiency": {"inputTokens": 1200.0}, "n": 5}
    document = {"tasks": [row, dict(row, passHatK=1.0)], "trialStats": {"scoreStderr": 0.0}}
    expected = canonical_json_reference(document)

    class Refuse:
        def decode(self, _: str) -> Any:
            raise AssertionError("read the document back")

    monkeypatch.setattr(canonical, "_FLOAT_DECODER", Refuse())
    assert canonical_json_document(plain_floats(document)) == expected


def test_plain_floats_takes_the_largest_safe_integer_and_nothing_above() -> None:
    """A safe integer is one of magnitude at most 2**53 - 1 (ECMAScript's
    Number.MAX_SAFE_INTEGER, the bound RFC 8785 inherits); 2**53 is the first unsafe one."""
    largest = 9_007_199_254_740_991.0
    assert plain_floats([largest, -largest]) == [9_007_199_254_740_991, -9_007_199_254_740_991]
    assert [type(v) for v in plain_floats([largest, -largest])] == [int, int]
    unsafe = plain_floats([9_007_199_254_740_992.0, -9_007_199_254_740_992.0])
    assert [type(v) for v in unsafe] == [float, float]


def _in_a_fresh_interpreter(lines: list[str]) -> None:
    """Run `lines` in a fresh interpreter, where nothing has loaded hashlib yet: they print
    "ok" at the end, or an assertion fails."""
    import subprocess
    import sys
    from pathlib import Path

    done = subprocess.run(
        [sys.executable, "-c", "\n".join(lines)],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_digests_are_sha256_by_cpython_s_own_then_by_openssl_past_a_megabyte() -> None:
    """`sha256_digest` hashes with CPython's SHA-256 while a process has hashed little (a
    `validate` need not load OpenSSL), then with OpenSSL's, 2 to 6 times faster for what an
    ingest or a gate decision hashes: the same digests either way, each checked here
    against hashlib in a fresh interpreter, where nothing has loaded hashlib yet."""
    _in_a_fresh_interpreter(
        [
            "import sys",
            "from evalops.domain.canonical import sha256_digest",
            "assert 'hashlib' not in sys.modules",
            "small = [bytes([n]) * (1000 + n) for n in range(200)]",
            "digests = [sha256_digest(d) for d in small]",
            "assert 'hashlib' not in sys.modules, 'hashlib loaded for 220 kB'",
            "big = bytes(range(256)) * 8192",
            "digests += [sha256_digest(big), sha256_digest(big[:-1])]",
            "assert 'hashlib' in sys.modules, 'OpenSSL not loaded past a megabyte'",
            "import hashlib",
            "every = [*small, big, big[:-1]]",
            "expected = ['sha256:' + hashlib.sha256(d).hexdigest() for d in every]",
            "assert digests == expected",
            "print('ok')",
        ]
    )


def test_a_digest_made_while_another_thread_imports_hashlib_is_made() -> None:
    """A module is in `sys.modules` before its import ends: a thread hashing while another
    imports hashlib must not take the half-made module for OpenSSL's SHA-256 (a library
    caller may hash on several threads). Each digest is checked against hashlib after; the
    race is run three times."""
    script = [
        "import sys, threading",
        "from evalops.domain.canonical import sha256_digest",
        "assert 'hashlib' not in sys.modules",
        "made, errors, stop = [], [], []",
        "def hasher():",
        "    while not stop:",
        "        try:",
        "            made.append(sha256_digest(b'x'))",
        "        except Exception as exc:",
        "            errors.append(repr(exc))",
        "            return",
        "thread = threading.Thread(target=hasher)",
        "thread.start()",
        "sys.setswitchinterval(1e-6)",
        "import hashlib",
        "stop.append(True)",
        "thread.join()",
        "assert not errors, errors[:1]",
        "assert made and set(made) == {'sha256:' + hashlib.sha256(b'x').hexdigest()}",
        "print('ok')",
    ]
    for _ in range(3):
        _in_a_fresh_interpreter(script)
