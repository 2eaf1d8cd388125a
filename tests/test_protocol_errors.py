"""McpError and the error factories (snodo.protocol.errors): codes, kinds, the wire form."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from snodo.protocol import errors
from snodo.protocol.errors import McpError


def test_a_known_code_without_a_message_gets_the_default_one() -> None:
    assert McpError(errors.METHOD_NOT_FOUND).message == "Method not found"
    assert McpError(-1).message == "Error"
    assert McpError(errors.INVALID_PARAMS).kind == "protocol"


def test_to_wire_keeps_code_message_and_data_and_never_the_cause() -> None:
    error = McpError(-32099, "refused", {"why": "test"}, cause=("secret",))
    assert error.to_wire() == {"code": -32099, "message": "refused", "data": {"why": "test"}}
    assert McpError(-32099, "refused").to_wire() == {"code": -32099, "message": "refused"}


def test_from_wire_keeps_the_peers_code_message_and_data() -> None:
    error = McpError.from_wire({"code": -32099, "message": "no", "data": [1]}, cause="c")
    assert (error.code, error.message, error.data, error.kind, error.cause) == (
        -32099,
        "no",
        [1],
        "protocol",
        "c",
    )
    assert McpError.from_wire({"code": -32601}).message == "Method not found"


@pytest.mark.parametrize(
    "wire", [None, "x", [], {}, {"code": "1"}, {"code": True}, {"message": "m"}, {"code": 1.5}]
)
def test_a_malformed_error_object_is_32000(wire: Any) -> None:
    error = McpError.from_wire(wire)
    assert (error.code, error.kind) == (errors.CONNECTION_CLOSED, "transport")
    assert error.cause == ("malformed_error", wire)


@given(st.dictionaries(st.text(), st.none() | st.integers() | st.text()) | st.integers())
def test_from_wire_never_raises_on_untrusted_values(wire: Any) -> None:
    assert isinstance(McpError.from_wire(wire), McpError)


def test_an_error_survives_pickling_whole() -> None:
    """Errors cross process and actor boundaries: every field comes back."""
    error = errors.timeout_error(1.5, cause=("subscription",))
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.code, copy.message, copy.data, copy.kind, copy.cause) == (
        error.code,
        error.message,
        error.data,
        error.kind,
        error.cause,
    )


def test_str_and_repr_name_the_code_message_and_data() -> None:
    error = McpError(-32602, "bad", {"k": 1})
    assert str(error) == "[-32602] bad data={'k': 1}"
    assert "kind='protocol'" in repr(error)


@pytest.mark.parametrize(
    ("error", "code", "kind", "data"),
    [
        (errors.connection_error(), -32000, "transport", None),
        (errors.timeout_error(0.25), -32001, "transport", {"timeoutMs": 250}),
        (errors.max_total_timeout_error(2), -32001, "transport", {"maxTotalTimeoutMs": 2000}),
        (errors.method_not_found("x/y", v=1), -32601, "protocol", {"method": "x/y", "v": 1}),
        (errors.invalid_params("bad", {"k": 1}), -32602, "protocol", {"k": 1}),
        (errors.internal_error(), -32603, "protocol", None),
        (errors.outcome_unknown_error("lost"), -32000, "transport", {"outcome": "unknown"}),
        (errors.broken_response_error("both"), -32000, "transport", None),
    ],
)
def test_each_factory_makes_its_code_kind_and_data(
    error: McpError, code: int, kind: str, data: Any
) -> None:
    assert (error.code, error.kind, error.data) == (code, kind, data)


def test_a_timeout_and_a_broken_response_say_what_happened() -> None:
    assert errors.timeout_error(1).message == "Request timed out"
    assert errors.broken_response_error("both").message == (
        "The server sent an invalid response: both"
    )
    assert errors.method_not_found("a/b").message == "Method not found: a/b"


def test_handler_error_carries_its_reason() -> None:
    assert errors.HandlerError({"why": 1}).reason == {"why": 1}
    assert errors.HandlerError().reason is None
