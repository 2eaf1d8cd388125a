"""W3C Trace Context level 1 checks (snodo.protocol.trace).

Rules: the reference's trace_context option (a valid traceparent and optional tracestate, malformed
values rejected with ArgumentError, here ValueError; version ff invalid, ids not all zeros,
tracestate at most 32 members and 512 bytes with unique keys) and the W3C grammar
(https://www.w3.org/TR/trace-context-1/): lowercase hex, version 00 exactly 55 characters, the
forward-compatibility rule for higher versions, tracestate key/value grammar with OWS and empty
list-members.
"""

from __future__ import annotations

import types
from collections import OrderedDict
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from snodo.protocol.trace import (
    MAX_TRACEPARENT_LENGTH,
    MAX_TRACESTATE_BYTES,
    MAX_TRACESTATE_MEMBERS,
    valid_traceparent,
    valid_tracestate,
    validate_trace_context,
)

# The W3C specification's examples.
SPEC_TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
SPEC_TRACEPARENT_UNSAMPLED = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
SPEC_TRACESTATE = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"


def parent(version: str = "00", trace_id: str = TRACE_ID, parent_id: str = PARENT_ID) -> str:
    return f"{version}-{trace_id}-{parent_id}-01"


# --------------------------------------------------------------------------------------------
# traceparent


@pytest.mark.parametrize(
    "value",
    [
        SPEC_TRACEPARENT,
        SPEC_TRACEPARENT_UNSAMPLED,
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "00-00000000000000000000000000000001-0000000000000001-ff",
        parent("01"),
        parent("fe"),
        parent("cc") + "-what-the-future-will-be-like",
        parent("01") + "-",
    ],
)
def test_valid_traceparents(value: str) -> None:
    """Spec examples; any flags byte; higher versions may carry more fields after a '-'."""
    assert valid_traceparent(value)
    assert validate_trace_context({"traceparent": value}) == {"traceparent": value}


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (SPEC_TRACEPARENT.upper(), "lowercase hex"),
        (SPEC_TRACEPARENT.replace("4bf9", "4BF9"), "lowercase hex"),
        (SPEC_TRACEPARENT[:-2] + "0G", "lowercase hex"),
        (parent("ff"), "version ff"),
        (parent("0g"), "lowercase hex"),
        (SPEC_TRACEPARENT + "-00", "exactly 55"),
        (SPEC_TRACEPARENT + "0", "lowercase hex"),
        (parent("01") + "x", "lowercase hex"),
        (parent("01") + "-\n", "lowercase hex"),
        (SPEC_TRACEPARENT[:-1], "lowercase hex"),
        (parent(trace_id="0" * 32), "trace-id must not be all zeros"),
        (parent(parent_id="0" * 16), "parent-id must not be all zeros"),
        (parent(trace_id=TRACE_ID[:-1]), "lowercase hex"),
        (parent(parent_id=PARENT_ID + "0"), "lowercase hex"),
        (SPEC_TRACEPARENT.replace("-", "_"), "lowercase hex"),
        (SPEC_TRACEPARENT + "\n", "lowercase hex"),
        (" " + SPEC_TRACEPARENT, "lowercase hex"),
        (SPEC_TRACEPARENT.replace("4", "\u0664"), "lowercase hex"),  # Arabic-Indic four
        (SPEC_TRACEPARENT.replace("a", "\uff41"), "lowercase hex"),  # fullwidth a
        ("", "lowercase hex"),
        (parent("01") + "-" + "a" * MAX_TRACEPARENT_LENGTH, "longer than 512"),
        (parent("01") + "-\x7f", "lowercase hex"),
    ],
)
def test_invalid_traceparents(value: str, problem: str) -> None:
    assert not valid_traceparent(value)
    with pytest.raises(ValueError, match=problem):
        validate_trace_context({"traceparent": value})


def test_traceparent_length_bound_for_future_versions() -> None:
    """A higher version's tail is bounded: 512 characters accepted, 513 refused."""
    value = parent("01") + "-" + "a" * (MAX_TRACEPARENT_LENGTH - 56)
    assert len(value) == MAX_TRACEPARENT_LENGTH
    assert valid_traceparent(value)
    assert not valid_traceparent(value + "a")


# --------------------------------------------------------------------------------------------
# tracestate


@pytest.mark.parametrize(
    "value",
    [
        SPEC_TRACESTATE,
        "congo=t61rcWkgMzE",
        "",
        " ",
        ",",
        " , ,\t,",
        "rojo=00f067aa0ba902b7 ,\tcongo=t61rcWkgMzE\t",
        "a=b c",
        "a= b",
        "a-b_c*d/e=1",
        "tenant1@system=v",
        "0tenant@sys=v",
        "t@s_1-2*3/4=v",
        "k=" + "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) not in ",="),
        "k=" + "v" * 256,
        "a" * 256 + "=v",
        "t" * 241 + "@" + "s" * 14 + "=v",
    ],
)
def test_valid_tracestates(value: str) -> None:
    """Spec grammar: simple and multi-tenant keys, OWS and empty list-members allowed."""
    assert valid_tracestate(value)
    context = {"traceparent": SPEC_TRACEPARENT, "tracestate": value}
    assert validate_trace_context(context) == context


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("rojo", "no '='"),
        ("=v", "key '' is invalid"),
        ("Rojo=1", "key 'Rojo' is invalid"),
        ("1rojo=1", "key '1rojo' is invalid"),
        ("ro jo=1", "is invalid"),
        ("rojo =1", "key 'rojo ' is invalid"),
        ("a.b=1", "is invalid"),
        ("a" * 257 + "=v", "is invalid"),
        ("t" * 242 + "@s=v", "is invalid"),
        ("t@" + "s" * 15 + "=v", "is invalid"),
        ("t@1s=v", "is invalid"),
        ("t@S=v", "is invalid"),
        ("@s=v", "is invalid"),
        ("t@=v", "is invalid"),
        ("t@s@x=v", "is invalid"),
        ("a=", "value for key 'a' is invalid"),
        ("a=   ", "value for key 'a' is invalid"),
        ("a=b=c", "value for key 'a' is invalid"),
        ("a=b\x7f", "value for key 'a' is invalid"),
        ("a=b\x1f", "value for key 'a' is invalid"),
        ("a=b\tc", "value for key 'a' is invalid"),
        ("a=" + "v" * 257, "value for key 'a' is invalid"),
        ("a=é", "ASCII"),
        ("a=1,a=2", "more than once"),
        ("a=1, b=2 ,a=3", "more than once"),
        ("a=1\n", "value for key 'a' is invalid"),
    ],
)
def test_invalid_tracestates(value: str, problem: str) -> None:
    assert not valid_tracestate(value)
    with pytest.raises(ValueError, match=problem):
        validate_trace_context({"traceparent": SPEC_TRACEPARENT, "tracestate": value})


def test_tracestate_member_limit_is_32() -> None:
    members = [f"k{i}=v" for i in range(MAX_TRACESTATE_MEMBERS)]
    assert valid_tracestate(",".join(members))
    assert valid_tracestate(",".join(members) + ",,  ,")  # empty members do not count
    with pytest.raises(ValueError, match="more than 32 list-members"):
        validate_trace_context(
            {"traceparent": SPEC_TRACEPARENT, "tracestate": ",".join([*members, "k32=v"])}
        )


def test_tracestate_size_limit_is_512_bytes() -> None:
    value = "a=" + "v" * 254 + ",b=" + "w" * 253
    assert len(value) == MAX_TRACESTATE_BYTES
    assert valid_tracestate(value)
    assert not valid_tracestate(value + "w")
    with pytest.raises(ValueError, match="longer than 512 bytes"):
        validate_trace_context({"traceparent": SPEC_TRACEPARENT, "tracestate": value + "w"})
    assert not valid_tracestate("," * 513)


# --------------------------------------------------------------------------------------------
# validate_trace_context


def test_result_is_a_fresh_plain_dict_in_wire_order() -> None:
    given_context = OrderedDict(
        [("tracestate", SPEC_TRACESTATE), ("traceparent", SPEC_TRACEPARENT)]
    )
    checked = validate_trace_context(given_context)
    assert type(checked) is dict
    assert list(checked.items()) == [
        ("traceparent", SPEC_TRACEPARENT),
        ("tracestate", SPEC_TRACESTATE),
    ]
    assert checked is not given_context


def test_any_mapping_is_accepted() -> None:
    proxy = types.MappingProxyType({"traceparent": SPEC_TRACEPARENT})
    assert validate_trace_context(proxy) == {"traceparent": SPEC_TRACEPARENT}


@pytest.mark.parametrize(
    ("context", "problem"),
    [
        (None, "must be a mapping"),
        (SPEC_TRACEPARENT, "must be a mapping"),
        ([("traceparent", SPEC_TRACEPARENT)], "must be a mapping"),
        ({}, "needs a 'traceparent'"),
        ({"tracestate": SPEC_TRACESTATE}, "needs a 'traceparent'"),
        ({"traceparent": SPEC_TRACEPARENT, "baggage": "a=b"}, "unknown keys: 'baggage'"),
        ({"traceparent": SPEC_TRACEPARENT, 1: "x"}, "unknown keys: 1"),
        ({"Traceparent": SPEC_TRACEPARENT}, "unknown keys: 'Traceparent'"),
        ({"traceparent": None}, "traceparent must be a str, not NoneType"),
        ({"traceparent": SPEC_TRACEPARENT.encode()}, "traceparent must be a str, not bytes"),
        ({"traceparent": SPEC_TRACEPARENT, "tracestate": None}, "tracestate must be a str"),
        ({"traceparent": SPEC_TRACEPARENT, "tracestate": ["a=b"]}, "tracestate must be a str"),
    ],
)
def test_validate_trace_context_names_the_problem(context: Any, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        validate_trace_context(context)


def test_a_huge_unknown_key_is_not_echoed_in_full() -> None:
    with pytest.raises(ValueError) as info:
        validate_trace_context({"traceparent": SPEC_TRACEPARENT, "x" * 100_000: 1})
    assert len(str(info.value)) < 200


def test_valid_checks_take_non_str_without_raising() -> None:
    for value in (None, 1, b"x", SPEC_TRACEPARENT.encode(), ["a=b"]):
        assert valid_traceparent(value) is False  # type: ignore[arg-type]
        assert valid_tracestate(value) is False  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# Properties

hex_lower = st.text(alphabet="0123456789abcdef", min_size=1, max_size=1)


def hex_digits(n: int) -> st.SearchStrategy[str]:
    return st.text(alphabet="0123456789abcdef", min_size=n, max_size=n)


@given(
    hex_digits(2).filter(lambda v: v != "ff"),
    hex_digits(32).filter(lambda v: v != "0" * 32),
    hex_digits(16).filter(lambda v: v != "0" * 16),
    hex_digits(2),
)
def test_every_well_formed_traceparent_is_accepted(
    version: str, trace_id: str, parent_id: str, flags: str
) -> None:
    value = f"{version}-{trace_id}-{parent_id}-{flags}"
    assert valid_traceparent(value)


@given(hex_digits(32).filter(lambda v: v != "0" * 32), st.integers(min_value=0, max_value=31))
def test_any_uppercase_hex_digit_is_refused(trace_id: str, index: int) -> None:
    upper = "ABCDEF"[index % 6]
    value = parent(trace_id=trace_id[:index] + upper + trace_id[index + 1 :])
    assert not valid_traceparent(value)


keys = st.from_regex(r"[a-z][_0-9a-z\-*/]{0,10}", fullmatch=True) | st.from_regex(
    r"[a-z0-9][_0-9a-z\-*/]{0,5}@[a-z][_0-9a-z\-*/]{0,5}", fullmatch=True
)
values = st.from_regex(
    r"[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,8}[\x21-\x2b\x2d-\x3c\x3e-\x7e]", fullmatch=True
)


@given(
    st.dictionaries(keys, values, max_size=MAX_TRACESTATE_MEMBERS),
    st.sampled_from([",", " , ", ",\t"]),
)
def test_every_grammatical_tracestate_within_limits_is_accepted(
    members: dict[str, str], separator: str
) -> None:
    value = separator.join(f"{k}={v}" for k, v in members.items())
    assert valid_tracestate(value) is (len(value) <= MAX_TRACESTATE_BYTES)


json_like = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text() | st.binary(),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=8,
)
trace_text = st.text() | st.text(alphabet="0123456789abcdefABCDEF-=,@ \t_*/x\n", max_size=80)


@given(
    st.one_of(
        json_like,
        st.dictionaries(
            st.sampled_from(["traceparent", "tracestate", "other"]) | st.integers(),
            trace_text | json_like,
            max_size=3,
        ),
        st.fixed_dictionaries(
            {"traceparent": st.just(SPEC_TRACEPARENT) | trace_text},
            optional={"tracestate": trace_text},
        ),
    )
)
@settings(max_examples=300)
def test_validate_trace_context_raises_only_value_error(context: Any) -> None:
    try:
        checked = validate_trace_context(context)
    except ValueError as error:
        assert str(error)
    else:
        assert valid_traceparent(checked["traceparent"])
        assert set(checked) <= {"traceparent", "tracestate"}
        assert checked == dict(context)


@given(trace_text)
@settings(max_examples=300)
def test_valid_checks_never_raise_on_arbitrary_text(value: str) -> None:
    assert valid_traceparent(value) in (True, False)
    assert valid_tracestate(value) in (True, False)
