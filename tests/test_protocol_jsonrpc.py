"""The codec and JSON-RPC envelopes (snodo.protocol.jsonrpc).

Rules: JSON-RPC 2.0 envelopes (params and results are objects; batches, which only 2025-03-26
defines, are split by unbatch and each element checked alone); the reference's JSONValue decoder
(integer literals over 64 digits refused, every integer exact, a 1.5-million-digit integer an
error and not a crash); runtime-costs.md section 5 (orjson turns integer literals beyond
64 bits into floats, writes NaN as null, accepts duplicate keys, refuses nesting deeper than 1024).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import pickle
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from snodo.protocol import jsonrpc, streamable
from snodo.protocol.errors import INVALID_REQUEST, PARSE_ERROR, McpError
from snodo.protocol.jsonrpc import (
    MAX_DEPTH,
    MAX_ID_LENGTH,
    MAX_INT_DIGITS,
    MAX_MESSAGE_BYTES,
    DecodeError,
    ErrorResponse,
    Notification,
    Request,
    Response,
    classify,
    decode,
    decode_message,
    encode,
    encode_line,
    error_response,
    is_valid_id,
    notification,
    request,
    result_response,
)

EXAMPLES = Path(__file__).parent / "data" / "schema" / "2026-07-28" / "examples"
BIG = 123456789012345678901234  # beyond 64 bits: its presence sends decode down the exact path
BIG_TEXT = str(BIG).encode()


@pytest.fixture
def exact_calls(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Records every message that took the exact (non-orjson) decode path."""
    calls: list[bytes] = []
    original = jsonrpc._decode_exact

    def spy(raw: bytes | bytearray) -> Any:
        calls.append(bytes(raw))
        return original(raw)

    monkeypatch.setattr(jsonrpc, "_decode_exact", spy)
    return calls


def both_paths(doc: bytes) -> list[bytes]:
    """``doc`` as an array element, alone (orjson path) and next to a big int (exact path)."""
    return [b"[" + doc + b"]", b"[" + doc + b"," + BIG_TEXT + b"]"]


def refusal(data: bytes | str, **kwargs: Any) -> DecodeError:
    with pytest.raises(DecodeError) as info:
        decode(data, **kwargs)
    return info.value


# --------------------------------------------------------------------------------------------
# Round trips and encoding


def test_constants_match_the_brief() -> None:
    assert MAX_MESSAGE_BYTES == 16 * 1024 * 1024
    assert MAX_INT_DIGITS == 64
    assert MAX_ID_LENGTH == 256
    assert MAX_DEPTH == 1024


def test_round_trip_of_a_request_is_compact_utf8() -> None:
    message = request(7, "tools/call", {"name": "météo", "arguments": {"q": "東京"}})
    data = encode(message)
    assert (
        data
        == (
            '{"jsonrpc":"2.0","id":7,"method":"tools/call",'
            '"params":{"name":"météo","arguments":{"q":"東京"}}}'
        ).encode()
    )
    assert decode(data) == message


def test_encode_line_appends_exactly_one_newline() -> None:
    """Line framing: the only raw newline is the terminator, even with newlines in strings."""
    for message in ({"text": "a\nb\r\n"}, {"id": 2**70, "text": "x\ny"}):
        line = encode_line(message)
        assert line.endswith(b"\n")
        assert line.count(b"\n") == 1
        assert decode(line) == message


@given(st.recursive(st.text(), lambda c: st.lists(c, max_size=3), max_leaves=10))
def test_encode_line_never_holds_a_raw_newline(value: Any) -> None:
    for message in (value, [value, 2**64]):
        line = encode_line(message)
        assert line.count(b"\n") == 1 and line.endswith(b"\n")


@pytest.mark.parametrize("value", [2**64, -(2**63) - 1, 10**30, -(10**30), 10**63 * 9])
def test_big_ints_encode_exactly(value: int) -> None:
    """orjson raises for ints outside [-2**63, 2**64-1]; the fallback writes them exactly."""
    assert encode({"id": value, "n": [value]}) == f'{{"id":{value},"n":[{value}]}}'.encode()


def test_ints_at_the_orjson_bounds_encode_exactly() -> None:
    assert encode([2**64 - 1, -(2**63)]) == b"[18446744073709551615,-9223372036854775808]"


def test_encoding_an_int_longer_than_the_decoder_accepts_is_refused() -> None:
    """encode never writes what decode would refuse: > MAX_INT_DIGITS digits is a ValueError."""
    assert encode(10**64 - 1) == b"9" * 64
    with pytest.raises(ValueError, match="64 digits"):
        encode({"n": 10**64})
    with pytest.raises(ValueError, match="64 digits"):
        encode([-(10**64)])


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_floats_are_refused_on_both_encode_paths(bad: float) -> None:
    """orjson writes NaN/inf as null; encode refuses instead (plain and big-int paths)."""
    for message in (bad, {"a": [None, bad]}, {"a": (1, {"b": bad})}, {"a": bad, "id": 2**70}):
        with pytest.raises(ValueError, match="not JSON compliant"):
            encode(message)
        with pytest.raises(ValueError):
            encode_line(message)


def test_none_is_still_null() -> None:
    assert encode({"a": None, "b": [None, 1.5]}) == b'{"a":null,"b":[null,1.5]}'


@pytest.mark.parametrize(
    "message",
    [
        {1: "a"},
        {"a": object()},
        {"a": {1, 2}},
        {"a": "\ud800"},
        {"a": b"bytes"},
        {"a": datetime.datetime(2020, 1, 1)},
    ],
)
def test_non_json_values_raise_type_error_on_both_paths(message: dict[Any, Any]) -> None:
    """Non-str keys, lone surrogates and non-JSON objects are a TypeError, big int or not."""
    with pytest.raises(TypeError):
        encode(message)
    with pytest.raises(TypeError):
        encode({"wrapped": message, "id": 2**70})


def test_dataclasses_are_not_silently_serialized() -> None:
    @dataclasses.dataclass
    class Point:
        x: int

    with pytest.raises(TypeError):
        encode({"p": Point(1)})


def test_tuples_encode_as_arrays() -> None:
    assert encode({"a": (1, "b", 2**70)}) == b'{"a":[1,"b",1180591620717411303424]}'


def nested(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def unwrap(value: Any, depth: int) -> Any:
    """The leaf of ``depth`` nested one-element arrays (== on such values would recurse)."""
    for _ in range(depth):
        assert isinstance(value, list) and len(value) == 1
        value = value[0]
    return value


def test_encode_handles_the_depth_decode_accepts() -> None:
    """orjson alone refuses 255 levels; encode writes up to MAX_DEPTH and refuses beyond."""
    for depth in (254, 255, 1000, MAX_DEPTH):
        data = encode(nested(depth))
        assert data == b"[" * depth + b"1" + b"]" * depth
        assert unwrap(decode(data), depth) == 1
    with pytest.raises(ValueError, match="deeper than 1024"):
        encode(nested(MAX_DEPTH + 1))


def test_encode_refuses_a_reference_cycle() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(ValueError, match="cycle"):
        encode({"a": cycle})


def test_encode_keeps_deep_dicts_exact() -> None:
    value: Any = {"leaf": 2**70}
    for i in range(600):
        value = {f"k{i}": value, "n": i}
    assert decode(encode(value)) == value


# --------------------------------------------------------------------------------------------
# Big integers on decode


@pytest.mark.parametrize(
    "value", [2**64, -(2**63) - 1, 10**30, -(10**30), 2**64 - 1, -(2**63), 10**64 - 1]
)
def test_big_ints_decode_exactly_in_every_position(value: int) -> None:
    """orjson would return a float for these; snodo returns the exact int."""
    text = (
        f'{{"jsonrpc":"2.0","id":{value},"method":"tools/call","params":'
        f'{{"_meta":{{"progressToken":{value}}},"deep":[[{{"n":[{value}]}}]]}}}}'
    ).encode()
    decoded = decode(text)
    for found in (
        decoded["id"],
        decoded["params"]["_meta"]["progressToken"],
        decoded["params"]["deep"][0][0]["n"][0],
    ):
        assert type(found) is int
        assert found == value
    assert encode(decoded) == text
    assert classify(decoded) == Request(value, "tools/call", decoded["params"])


def test_a_response_id_beyond_64_bits_is_kept_exactly() -> None:
    raw, message = decode_message(b'{"jsonrpc":"2.0","id":18446744073709551616,"result":{}}')
    assert message == Response(18446744073709551616, {})
    assert type(raw["id"]) is int


def test_a_digit_run_inside_strings_is_left_alone(exact_calls: list[bytes]) -> None:
    """Long digit runs only inside strings (values, keys, after escapes) keep the orjson path."""
    text = (
        b'{"a":"12345678901234567890123","k12345678901234567890123":1,'
        b'"esc":"\\"-1234567890123456789012\\\\","n":123,"f":1.5}'
    )
    decoded = decode(text)
    assert decoded == {
        "a": "12345678901234567890123",
        "k12345678901234567890123": 1,
        "esc": '"-1234567890123456789012\\',
        "n": 123,
        "f": 1.5,
    }
    assert exact_calls == []


def test_a_digit_run_in_a_string_next_to_a_real_big_int(exact_calls: list[bytes]) -> None:
    text = b'["\\"12345678901234567890123\\"", 123456789012345678901234, "x99999999999999999999"]'
    assert decode(text) == ['"12345678901234567890123"', BIG, "x99999999999999999999"]
    assert len(exact_calls) == 1


def test_negative_19_digit_ints_are_exact() -> None:
    """-2**63 - 1 has 19 digits: the pre-scan catches '-' followed by 19 digits too."""
    assert decode(b"[-9223372036854775809]") == [-(2**63) - 1]
    assert decode(b"-9999999999999999999") == -9999999999999999999


def test_floats_with_long_digit_runs_stay_floats() -> None:
    assert decode(b"[0.12345678901234567890123, 1.5]") == [0.12345678901234567890123, 1.5]
    assert decode(b"[1e5, 123456789012345678901234e0]") == [1e5, 1.2345678901234568e23]


def test_int_literal_digit_limit_is_64() -> None:
    """The reference refuses integer literals over 64 digits; the sign is not counted."""
    assert decode(b"-" + b"9" * 64) == -(10**64 - 1)
    error = refusal(b"[" + b"9" * 65 + b"]")
    assert error.code == PARSE_ERROR
    assert "64 digits" in error.reason
    assert refusal(b"-" + b"1" * 65).code == PARSE_ERROR


@pytest.mark.parametrize("sign", [b"", b"-"])
def test_a_one_and_a_half_million_digit_integer_is_refused_fast(sign: bytes) -> None:
    """Reference: a 1.5-million-digit integer is an error, not a crash, and costs little."""
    text = b'{"jsonrpc":"2.0","id":' + sign + b"7" * 1_500_000 + b',"result":{}}'
    started = time.perf_counter()
    error = refusal(text)
    assert time.perf_counter() - started < 1.0
    assert error.code == PARSE_ERROR
    assert "64 digits" in error.reason


def test_a_huge_float_literal_is_refused_not_infinite() -> None:
    for doc in (b"1e400", b"-1e400", b"9" * 400 + b".5"):
        for wrapped in both_paths(doc):
            assert refusal(wrapped).code == PARSE_ERROR


# --------------------------------------------------------------------------------------------
# What decode refuses, on both paths


@pytest.mark.parametrize("depth", [1000, MAX_DEPTH])
def test_nesting_up_to_1024_is_accepted_on_both_paths(depth: int, exact_calls: list[bytes]) -> None:
    arrays = b"[" * depth + b"1" + b"]" * depth
    assert unwrap(decode(arrays), depth) == 1
    assert exact_calls == []
    exact = b"[" * depth + BIG_TEXT + b"]" * depth
    assert unwrap(decode(exact), depth) == BIG
    objects = b'{"a":' * (depth - 1) + b"[" + BIG_TEXT + b"]" + b"}" * (depth - 1)
    value = decode(objects)
    for _ in range(depth - 1):
        value = value["a"]
    assert value == [BIG]
    assert len(exact_calls) == 2


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 5000])
def test_nesting_deeper_than_1024_is_refused_on_both_paths(
    depth: int, exact_calls: list[bytes]
) -> None:
    """orjson's bound on the fast path; the exact path counts without recursing."""
    for leaf in (b"1", b"", BIG_TEXT):
        error = refusal(b"[" * depth + leaf + b"]" * depth)
        assert error.code == PARSE_ERROR
    objects = b'{"a":' * depth + BIG_TEXT + b"}" * depth
    assert "deeper than 1024" in refusal(objects).reason
    assert len(exact_calls) == 2


def test_deep_unclosed_input_is_refused_without_recursion_error() -> None:
    for data in (b"[" * 100_000, b"[" * 100_000 + BIG_TEXT, b'{"a":' * 50_000 + BIG_TEXT):
        assert refusal(data).code == PARSE_ERROR


def test_size_limit_is_checked_before_parsing() -> None:
    doc = b'{"a":"' + b"x" * 90 + b'"}'
    assert len(doc) == 98
    assert decode(doc, max_bytes=98) == {"a": "x" * 90}
    error = refusal(doc, max_bytes=97)
    assert error.code == PARSE_ERROR
    assert "larger than 97 bytes" in error.reason
    # invalid JSON beyond the limit is still a size refusal: nothing was parsed
    assert "larger than" in refusal(b"{" * 100, max_bytes=50).reason


def test_size_limit_counts_utf8_bytes_for_str_and_memoryview() -> None:
    text = '"' + "é" * 10 + '"'  # 12 characters, 22 bytes
    assert decode(text, max_bytes=22) == "é" * 10
    assert "larger than" in refusal(text, max_bytes=21).reason
    with pytest.raises(DecodeError, match="larger than"):
        decode(memoryview(text.encode()), max_bytes=21)
    assert decode(memoryview(text.encode()), max_bytes=22) == "é" * 10


def test_default_size_limit_is_16_mib() -> None:
    doc = b'"' + b"a" * (MAX_MESSAGE_BYTES - 2) + b'"'
    assert len(decode(doc)) == MAX_MESSAGE_BYTES - 2
    assert "larger than" in refusal(doc + b" ").reason


def test_accepts_bytes_bytearray_memoryview_and_str() -> None:
    for data in (b"[1,2]", bytearray(b"[1,2]"), memoryview(b"[1,2]"), "[1,2]"):
        assert decode(data) == [1, 2]
    assert decode(bytearray(b"[" + BIG_TEXT + b"]")) == [BIG]
    with pytest.raises(TypeError):
        decode(12)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "doc",
    [b'"\xff"', b'"\xc0\xaf"', b'"\xed\xa0\x80"', b'"\xe2\x82"', b'"\xf8\x88\x80\x80\x80"'],
    ids=["ff", "overlong", "encoded-surrogate", "truncated", "five-byte"],
)
def test_invalid_utf8_is_refused_on_both_paths(doc: bytes) -> None:
    for wrapped in both_paths(doc):
        assert refusal(wrapped).code == PARSE_ERROR


def test_a_str_with_a_lone_surrogate_is_refused() -> None:
    assert "surrogate" in refusal('"\ud800"').reason


@pytest.mark.parametrize("doc", [b"NaN", b"Infinity", b"-Infinity", b"nan", b"inf"])
def test_nan_and_infinity_are_refused_on_both_paths(doc: bytes) -> None:
    """The stdlib accepts these constants; snodo refuses them everywhere."""
    for wrapped in both_paths(doc):
        assert refusal(wrapped).code == PARSE_ERROR


@pytest.mark.parametrize(
    "doc", [b'"\\ud800"', b'"\\udc00"', b'"a\\ud83d"', b'"\\udc00\\ud83d"', b'"\\uDFFF x"']
)
def test_lone_surrogate_escapes_are_refused_on_both_paths(doc: bytes) -> None:
    for wrapped in both_paths(doc):
        assert refusal(wrapped).code == PARSE_ERROR


def test_paired_surrogate_escapes_decode_the_same_on_both_paths() -> None:
    for wrapped in both_paths(b'"\\ud83d\\ude00 \\u00e9"'):
        assert decode(wrapped)[0] == "\U0001f600 é"


@pytest.mark.parametrize(
    "doc",
    [
        b"01",
        b"-01",
        b"+1",
        b".5",
        b"1.",
        b"1e",
        b"-",
        b"0x10",
        b"'a'",
        b'"\t"',
        b'"\\x41"',
        b'"abc',
        b"tru",
        b"nul",
        b"[1,]",
        b'{"a":1,}',
        b"{a:1}",
        b'{"a"}',
        b'{"a":}',
        b"[1 2]",
        b"/* c */ 1",
        b"\x0c1",
    ],
)
def test_invalid_json_is_refused_on_both_paths(doc: bytes) -> None:
    for wrapped in both_paths(doc):
        error = refusal(wrapped)
        assert error.code == PARSE_ERROR
        assert error.reason


@pytest.mark.parametrize("data", [b"", b" ", b"\n", ""])
def test_empty_input_is_refused(data: bytes | str) -> None:
    assert refusal(data).code == PARSE_ERROR


@pytest.mark.parametrize("tail", [b" x", b"{}", b"\x00", b"]", b"\n\n1"])
def test_trailing_garbage_is_refused_on_both_paths(tail: bytes) -> None:
    for doc in (b'{"a":1}', b'{"a":' + BIG_TEXT + b"}"):
        assert refusal(doc + tail).code == PARSE_ERROR


def test_surrounding_json_whitespace_is_accepted_on_both_paths() -> None:
    for doc in (b'{"a":1}', b'{"a":' + BIG_TEXT + b"}"):
        assert decode(b" \t\r\n" + doc + b"\r\n") == decode(doc)


def test_a_byte_order_mark_is_refused_on_both_paths() -> None:
    for doc in both_paths(b"1"):
        assert refusal(b"\xef\xbb\xbf" + doc).code == PARSE_ERROR


def test_duplicate_keys_last_one_wins_on_both_paths() -> None:
    """Documented: duplicate keys are accepted and the last value wins (orjson and JSON.parse
    behaviour), with the key in its first position; both paths agree."""
    fast = decode(b'{"a":1,"b":2,"a":3}')
    exact = decode(b'{"a":1,"b":' + BIG_TEXT + b',"a":3}')
    assert fast == {"a": 3, "b": 2}
    assert exact == {"a": 3, "b": BIG}
    assert list(fast) == list(exact) == ["a", "b"]


def test_decode_errors_do_not_keep_the_document_alive() -> None:
    """A refused 16 MiB message must not stay referenced from the exception chain."""
    error = refusal(b'{"a": 1,}')
    assert error.__context__ is None and error.__cause__ is None


# --------------------------------------------------------------------------------------------
# Properties over untrusted input

JSON_ALPHABET = st.sampled_from(
    [
        *'{}[]:,"\\ -+.eE0123456789tfrunlsaxNIy\t\n\r',
        *["\\u", "\\ud83d", "\\ude00", "12345678901234567890", "-1234567890123456789", "é"],
    ]
)
json_like = st.lists(JSON_ALPHABET, max_size=40).map("".join)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**64) + 1, max_value=10**64 - 1)
    | st.sampled_from([2**64, 2**64 - 1, -(2**63), -(2**63) - 1, 10**30])
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=25,
)


@given(st.binary(max_size=200))
def test_decode_of_arbitrary_bytes_raises_only_decode_error(data: bytes) -> None:
    try:
        decode(data)
    except DecodeError as error:
        assert error.code == PARSE_ERROR


@given(json_like)
@settings(max_examples=300)
def test_decode_of_json_like_text_raises_only_decode_error(text: str) -> None:
    for data in (text.encode(), ("[" + text + "," + str(BIG) + "]").encode()):
        try:
            decode(data)
        except DecodeError as error:
            assert error.code == PARSE_ERROR


@given(json_like)
@settings(max_examples=300)
def test_exact_path_accepts_and_refuses_exactly_what_orjson_does(text: str) -> None:
    """Differential: where orjson is exact (no long digit runs), both parsers agree."""
    data = text.encode()
    if jsonrpc._LONG_RUN in data.translate(jsonrpc._SCAN_TABLE):
        return
    try:
        expected = orjson.loads(data)
    except orjson.JSONDecodeError:
        with pytest.raises(DecodeError):
            jsonrpc._decode_exact(data)
        return
    assert orjson.dumps(jsonrpc._decode_exact(data)) == orjson.dumps(expected)


@given(json_values, st.sampled_from([None, 1, "\t"]), st.booleans())
def test_both_paths_agree_on_any_json_document(value: Any, indent: Any, ascii_only: bool) -> None:
    """Any JSON text (pretty or compact, escaped or not) decodes the same on the exact path."""
    text = json.dumps(value, indent=indent, ensure_ascii=ascii_only).encode()
    assert jsonrpc._decode_exact(text) == value
    assert decode(text) == value


def assert_same_json(left: Any, right: Any) -> None:
    """Equal and with the same types (an int never comes back as a float)."""
    assert type(left) is type(right)
    if isinstance(left, dict):
        assert list(left) == list(right)
        for key in left:
            assert_same_json(left[key], right[key])
    elif isinstance(left, list):
        assert len(left) == len(right)
        for a, b in zip(left, right, strict=True):
            assert_same_json(a, b)
    else:
        assert left == right


@given(json_values)
def test_decode_of_encode_is_identity(value: Any) -> None:
    """Every JSON value, big ints included, survives encode then decode exactly."""
    data = encode(value)
    assert_same_json(decode(data), value)
    assert encode(decode(data)) == data


@given(json_values)
def test_encode_matches_the_stdlib_compact_form(value: Any) -> None:
    """Same bytes as json.dumps(separators=(",", ":"), ensure_ascii=False) modulo float spelling."""
    expected = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    assert json.loads(encode(value)) == json.loads(expected)


# --------------------------------------------------------------------------------------------
# Envelopes


def example_envelopes() -> list[Path]:
    """The spec example files that hold a whole envelope (others hold only params/results)."""
    paths = []
    for path in sorted(EXAMPLES.glob("*/*.json")):
        obj = json.loads(path.read_text())
        if isinstance(obj, dict) and "jsonrpc" in obj:
            paths.append(path)
    return paths


ENVELOPES = list(example_envelopes())


def test_the_spec_examples_hold_envelopes_of_every_kind() -> None:
    names = {path.parent.name for path in ENVELOPES}
    assert len(ENVELOPES) >= 30
    assert any(n.endswith("Request") for n in names)
    assert any(n.endswith("Notification") for n in names)
    assert any(n.endswith("ResultResponse") for n in names)
    assert any(n.endswith("Error") for n in names)


@pytest.mark.parametrize("path", ENVELOPES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_spec_examples_classify_by_their_schema_name(path: Path) -> None:
    raw, message = decode_message(path.read_bytes())
    name = path.parent.name
    if name.endswith("ResultResponse"):
        assert message == Response(raw["id"], raw["result"])
    elif name.endswith("Error"):
        assert message == ErrorResponse(raw["id"], raw["error"])
    elif name.endswith("Notification"):
        assert message == Notification(raw["method"], raw.get("params"))
    else:
        assert name.endswith("Request")
        assert message == Request(raw["id"], raw["method"], raw.get("params"))
    assert decode(encode(raw)) == raw


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (
            {"jsonrpc": "2.0", "id": 1, "method": "ping"},
            Request(1, "ping", None),
        ),
        (
            {"jsonrpc": "2.0", "id": "a", "method": "tools/list", "params": {"cursor": "c"}},
            Request("a", "tools/list", {"cursor": "c"}),
        ),
        (
            {"jsonrpc": "2.0", "id": "", "method": "ping"},
            Request("", "ping", None),
        ),
        (
            {"jsonrpc": "2.0", "id": -(2**63) - 1, "method": "ping"},
            Request(-(2**63) - 1, "ping", None),
        ),
        (
            {"jsonrpc": "2.0", "id": "x" * MAX_ID_LENGTH, "method": "ping"},
            Request("x" * MAX_ID_LENGTH, "ping", None),
        ),
        (
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            Notification("notifications/initialized", None),
        ),
        (
            {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}},
            Notification("notifications/progress", {"progress": 1}),
        ),
        (
            {"jsonrpc": "2.0", "id": 3, "result": {}},
            Response(3, {}),
        ),
        (
            {"jsonrpc": "2.0", "id": "r", "result": {"tools": []}, "extra": 1},
            Response("r", {"tools": []}),
        ),
        (
            {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}},
            ErrorResponse(None, {"code": -32700, "message": "Parse error"}),
        ),
        (
            {"jsonrpc": "2.0", "id": 4, "error": {"code": 1, "message": "m", "data": [1]}},
            ErrorResponse(4, {"code": 1, "message": "m", "data": [1]}),
        ),
    ],
)
def test_classify_valid_shapes(obj: dict[str, Any], expected: Any) -> None:
    assert classify(obj) == expected


@pytest.mark.parametrize(
    ("obj", "reason"),
    [
        ([{"jsonrpc": "2.0", "id": 1, "method": "ping"}], "batch"),
        ([], "batch"),
        ("ping", "not a JSON object"),
        (None, "not a JSON object"),
        ({"id": 1, "method": "ping"}, "jsonrpc"),
        ({"jsonrpc": "1.0", "id": 1, "method": "ping"}, "jsonrpc"),
        ({"jsonrpc": 2.0, "id": 1, "method": "ping"}, "jsonrpc"),
        ({"jsonrpc": "2.0", "id": True, "method": "ping"}, "id"),
        ({"jsonrpc": "2.0", "id": 1.0, "method": "ping"}, "id"),
        ({"jsonrpc": "2.0", "id": None, "method": "ping"}, "id"),
        ({"jsonrpc": "2.0", "id": [1], "method": "ping"}, "id"),
        ({"jsonrpc": "2.0", "id": "x" * (MAX_ID_LENGTH + 1), "method": "ping"}, "id"),
        ({"jsonrpc": "2.0", "id": 10**64, "method": "ping"}, "id"),
        ({"jsonrpc": "2.0", "id": 1, "method": 5}, "method"),
        ({"jsonrpc": "2.0", "method": None}, "method"),
        ({"jsonrpc": "2.0", "id": 1, "method": "m", "params": [1, 2]}, "params"),
        ({"jsonrpc": "2.0", "method": "m", "params": None}, "params"),
        ({"jsonrpc": "2.0", "method": "m", "params": "p"}, "params"),
        ({"jsonrpc": "2.0", "id": 1, "method": "m", "result": {}}, "result"),
        ({"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1, "message": "m"}}, "both"),
        ({"jsonrpc": "2.0", "id": 1}, "neither"),
        ({"jsonrpc": "2.0"}, "neither"),
        ({"jsonrpc": "2.0", "result": {}}, "id"),
        ({"jsonrpc": "2.0", "error": {"code": 1, "message": "m"}}, "id"),
        ({"jsonrpc": "2.0", "id": None, "result": {}}, "id"),
        ({"jsonrpc": "2.0", "id": True, "result": {}}, "id"),
        ({"jsonrpc": "2.0", "id": 1.5, "error": {"code": 1, "message": "m"}}, "id"),
        ({"jsonrpc": "2.0", "id": 1, "result": []}, "result"),
        ({"jsonrpc": "2.0", "id": 1, "result": None}, "result"),
        ({"jsonrpc": "2.0", "id": 1, "error": "boom"}, "error"),
        ({"jsonrpc": "2.0", "id": 1, "error": {"message": "m"}}, "code"),
        ({"jsonrpc": "2.0", "id": 1, "error": {"code": True, "message": "m"}}, "code"),
        ({"jsonrpc": "2.0", "id": 1, "error": {"code": 1.0, "message": "m"}}, "code"),
        ({"jsonrpc": "2.0", "id": 1, "error": {"code": "1", "message": "m"}}, "code"),
        ({"jsonrpc": "2.0", "id": 1, "error": {"code": 1}}, "message"),
        ({"jsonrpc": "2.0", "id": 1, "error": {"code": 1, "message": None}}, "message"),
    ],
)
def test_classify_refuses_invalid_shapes(obj: Any, reason: str) -> None:
    with pytest.raises(DecodeError) as info:
        classify(obj)
    assert info.value.code == INVALID_REQUEST
    assert reason in info.value.reason.replace('"', "")


def test_both_result_and_error_reason_says_so() -> None:
    with pytest.raises(DecodeError, match='both "result" and "error"'):
        classify({"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1, "message": "m"}})
    with pytest.raises(DecodeError, match='neither "result" nor "error"'):
        classify({"jsonrpc": "2.0", "id": 1})


def test_invalid_envelope_keeps_a_valid_id_for_the_answer() -> None:
    """A server answers an invalid request with its id when it could read one (else null)."""
    with pytest.raises(DecodeError) as info:
        classify({"jsonrpc": "2.0", "id": 9, "method": "m", "params": [1]})
    assert info.value.id == 9
    with pytest.raises(DecodeError) as info:
        classify({"jsonrpc": "2.0", "id": True, "method": "m"})
    assert info.value.id is None


def test_decode_message_reports_parse_and_envelope_errors_by_code() -> None:
    assert decode_message(b'{"jsonrpc":"2.0","method":"m"}') == (
        {"jsonrpc": "2.0", "method": "m"},
        Notification("m", None),
    )
    with pytest.raises(DecodeError) as info:
        decode_message(b'{"jsonrpc":"2.0",')
    assert info.value.code == PARSE_ERROR
    with pytest.raises(DecodeError) as info:
        decode_message(b'[{"jsonrpc":"2.0","method":"m"}]')
    assert info.value.code == INVALID_REQUEST
    with pytest.raises(DecodeError) as info:
        decode_message(b"[1]", max_bytes=2)
    assert info.value.code == PARSE_ERROR


envelope_like = st.dictionaries(
    st.sampled_from(["jsonrpc", "id", "method", "params", "result", "error", "x"]),
    st.one_of(
        json_values,
        st.just("2.0"),
        st.fixed_dictionaries(
            {"code": st.one_of(st.integers(), st.booleans()), "message": st.text()}
        ),
    ),
)


@given(st.one_of(envelope_like, json_values))
def test_classify_raises_only_decode_error_on_any_json(obj: Any) -> None:
    try:
        message = classify(obj)
    except DecodeError as error:
        assert error.code == INVALID_REQUEST
        assert error.id is None or is_valid_id(error.id)
    else:
        assert isinstance(message, (Request, Notification, Response, ErrorResponse))


def test_envelopes_are_frozen_slotted_dataclasses() -> None:
    message = Request(1, "ping", None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        message.id = 2  # type: ignore[misc]
    assert not hasattr(message, "__dict__")


# --------------------------------------------------------------------------------------------
# Ids and builders


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        (0, True),
        (-1, True),
        (2**64, True),
        (10**64 - 1, True),
        (-(10**64) + 1, True),
        (10**64, False),
        ("", True),
        ("x" * 256, True),
        ("x" * 257, False),
        (True, False),
        (False, False),
        (1.0, False),
        (None, False),
        ([1], False),
        ({"a": 1}, False),
    ],
)
def test_is_valid_id(value: object, valid: bool) -> None:
    """Ids are str (<= 256 chars) or int (not bool, <= 64 digits like every decoded int)."""
    assert is_valid_id(value) is valid


def test_request_and_notification_builders_omit_params_when_none() -> None:
    assert request(1, "ping") == {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    assert request("a", "m", {}) == {"jsonrpc": "2.0", "id": "a", "method": "m", "params": {}}
    assert notification("n") == {"jsonrpc": "2.0", "method": "n"}
    assert notification("n", {"a": 1}) == {"jsonrpc": "2.0", "method": "n", "params": {"a": 1}}
    assert classify(request(1, "m", {"a": 1})) == Request(1, "m", {"a": 1})
    assert classify(notification("n")) == Notification("n", None)


def test_response_builders() -> None:
    assert result_response(2, {"ok": True}) == {"jsonrpc": "2.0", "id": 2, "result": {"ok": True}}
    error = McpError(-32602, "Invalid params: x", {"field": "x"}, cause=("secret", 1))
    assert error_response(3, error) == {
        "jsonrpc": "2.0",
        "id": 3,
        "error": {"code": -32602, "message": "Invalid params: x", "data": {"field": "x"}},
    }
    assert error_response(None, {"code": -32700, "message": "Parse error"}) == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "Parse error"},
    }
    assert classify(error_response(None, McpError(-32700))) == ErrorResponse(
        None, {"code": -32700, "message": "Parse error"}
    )
    assert classify(result_response("r", {})) == Response("r", {})


@pytest.mark.parametrize("bad", [True, 1.0, "x" * 257, 10**64])
def test_builders_refuse_invalid_ids(bad: Any) -> None:
    with pytest.raises(ValueError, match="invalid JSON-RPC id"):
        request(bad, "m")
    with pytest.raises(ValueError, match="invalid JSON-RPC id"):
        result_response(bad, {})
    with pytest.raises(ValueError, match="invalid JSON-RPC id"):
        error_response(bad, {"code": 1, "message": "m"})


def test_decode_error_is_a_value_error_that_pickles_and_converts() -> None:
    error = DecodeError(INVALID_REQUEST, "bad envelope", id="r1")
    assert isinstance(error, ValueError)
    assert str(error) == "[-32600] bad envelope"
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.code, copy.reason, copy.id) == (INVALID_REQUEST, "bad envelope", "r1")
    wire = error.to_mcp_error().to_wire()
    assert wire == {"code": -32600, "message": "Invalid Request: bad envelope"}
    parse = refusal(b"{").to_mcp_error()
    assert parse.code == PARSE_ERROR and parse.message.startswith("Parse error: ")


# -- refused_response_id: an invalid answer to one of our requests ------------------------------


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ({"jsonrpc": "2.0", "id": 7, "result": {}, "error": {"code": 1, "message": "x"}}, 7),
        ({"jsonrpc": "2.0", "id": "a-1", "result": "not an object"}, "a-1"),
        ({"jsonrpc": "1.0", "id": 3, "result": {}}, 3),
        ({"id": 4, "result": {}}, 4),
        ({"jsonrpc": "2.0", "id": 5}, 5),
        ({"jsonrpc": "2.0", "id": 6, "error": "not an object"}, 6),
        ({"jsonrpc": "2.0", "id": 8, "error": {"code": "x", "message": "m"}}, 8),
    ],
)
def test_refused_response_id_names_the_request_of_a_refused_response(
    message: dict[str, Any], expected: Any
) -> None:
    """A message classify() refuses but shaped as a response (no "method", a valid id) names the
    request it answers, so that call fails at once instead of at its timeout."""
    with pytest.raises(jsonrpc.DecodeError):
        jsonrpc.classify(message)
    assert jsonrpc.refused_response_id(message) == expected


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "id": 7, "method": 9},  # request-shaped: never an answer
        {"jsonrpc": "2.0", "id": 7, "method": "x", "result": {}},
        {"jsonrpc": "2.0", "id": True, "result": {}, "error": {}},  # bool is no id
        {"jsonrpc": "2.0", "id": 1.5, "result": {}},
        {"jsonrpc": "2.0", "id": None, "result": {}, "error": {}},
        {"jsonrpc": "2.0", "result": {}, "error": {}},  # no id at all
        {"jsonrpc": "2.0", "id": "x" * 100_000, "result": {}, "error": {}},  # over MAX_ID_LENGTH
        {"jsonrpc": "2.0", "id": 10**100, "result": {}, "error": {}},  # too many digits
        [{"jsonrpc": "2.0", "id": 1, "result": {}}],  # a batch
        "a string",
        None,
    ],
)
def test_refused_response_id_is_none_for_anything_else(message: Any) -> None:
    """No valid id, or a "method": nothing to fail (the line is only skipped)."""
    assert jsonrpc.refused_response_id(message) is None


def test_refused_response_id_does_not_check_the_envelope_itself() -> None:
    """It does not repeat classify(): a valid response names its id too, so callers ask only
    after classify() refused the message."""
    message = {"jsonrpc": "2.0", "id": 9, "result": {}}
    assert isinstance(jsonrpc.classify(message), jsonrpc.Response)
    assert jsonrpc.refused_response_id(message) == 9


# -- batches (2025-03-26; read on every version: docs/decisions/0039) ----------------------------


def test_unbatch_gives_one_message_or_a_batchs_elements_in_order() -> None:
    one = {"jsonrpc": "2.0", "id": 1, "result": {}}
    two = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {}}
    assert jsonrpc.unbatch(one) == [one]
    assert jsonrpc.unbatch(jsonrpc.decode(jsonrpc.encode([two, one]))) == [two, one]
    assert [type(jsonrpc.classify(m)) for m in jsonrpc.unbatch([two, one])] == [
        jsonrpc.Notification,
        jsonrpc.Response,
    ]


def test_an_empty_batch_is_an_invalid_request() -> None:
    with pytest.raises(DecodeError) as caught:
        jsonrpc.unbatch(jsonrpc.decode(b"[]"))
    assert caught.value.code == INVALID_REQUEST
    assert "empty batch" in caught.value.reason


def test_a_bad_element_is_refused_alone_and_a_nested_batch_too() -> None:
    good = {"jsonrpc": "2.0", "id": 2, "result": {}}
    elements = jsonrpc.unbatch([7, [good], good])
    assert len(elements) == 3
    for bad in elements[:2]:
        with pytest.raises(DecodeError) as caught:
            jsonrpc.classify(bad)
        assert caught.value.code == INVALID_REQUEST
    assert jsonrpc.classify(elements[2]) == jsonrpc.Response(2, {})


def test_messages_in_splits_a_body_or_an_events_batch() -> None:
    response = {"jsonrpc": "2.0", "id": 3, "result": {"ok": True}}
    note = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info"}}
    assert streamable.messages_in(jsonrpc.encode(response)) == ([response], None)
    assert streamable.messages_in(jsonrpc.encode([note, response]).decode()) == (
        [note, response],
        None,
    )
    assert streamable.messages_in("") == ([], None)  # a priming event


@pytest.mark.parametrize(
    ("data", "kept", "reason"),
    [
        (b"[]", 0, "empty batch"),
        (b"not json", 0, "invalid JSON"),
        (b'{"id": 1}', 0, "not a JSON-RPC 2.0 object"),
        (b'[{"jsonrpc": "2.0", "method": "a"}, 7, {"jsonrpc": "1.0"}]', 1, "2 of the batch's 3"),
    ],
)
def test_messages_in_says_what_it_skipped_and_keeps_the_rest(
    data: bytes, kept: int, reason: str
) -> None:
    messages, skipped = streamable.messages_in(data)
    assert len(messages) == kept
    assert skipped is not None and reason in skipped


def test_a_post_answer_that_is_a_batch_gives_our_response() -> None:
    ours = {"jsonrpc": "2.0", "id": 5, "result": {"mine": True}}
    other = {"jsonrpc": "2.0", "id": 6, "result": {}}
    note = {"jsonrpc": "2.0", "method": "notifications/message", "params": {}}
    assert streamable.read_post_answer(5, jsonrpc.encode([other, note, ours])) == ours
    assert streamable.read_post_answer(5, jsonrpc.encode([note, ours])) == ours
    assert streamable.read_post_answer(5, jsonrpc.encode(ours)) == ours
    assert streamable.read_post_answer(5, b"[]") is None
    with pytest.raises(McpError) as caught:
        streamable.read_post_answer(5, jsonrpc.encode([other]))
    assert caught.value.cause == ("unexpected_id", 6)
