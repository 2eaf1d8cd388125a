"""snodo.protocol.endings: which call errors say the connection ended, and how."""

from __future__ import annotations

import pytest

from snodo.protocol import errors
from snodo.protocol.endings import ending_of, is_abnormal
from snodo.protocol.errors import McpError


@pytest.mark.parametrize(
    ("cause", "ending"),
    [
        (("exit_status", 1), "exited"),
        (("exit_status", 0), "exited"),
        (("stdout_closed",), "broken"),
        (("port_exit", "epipe"), "broken"),
        (("write", "EIO"), "broken"),
        (("http", "connection refused"), "broken"),
        (("sse_ended",), "broken"),
        (("closed",), None),
        (("max_response_bytes", 10), None),
        (None, None),
    ],
)
def test_transport_errors_name_their_ending(cause: object, ending: str | None) -> None:
    assert ending_of(errors.connection_error("gone", cause=cause), False) == ending


def test_a_timeout_or_a_servers_error_is_no_ending() -> None:
    timeout = errors.timeout_error(1.0, cause=("http", "deadline"))
    assert ending_of(timeout, True) is None
    assert ending_of(McpError(-32602, "bad params"), True) is None


def test_a_404_is_an_expired_session_only_when_a_session_was_sent() -> None:
    refused = McpError(-32600, "Session not found", cause=("http_status", 404))
    assert ending_of(refused, True) == "expired"
    assert ending_of(refused, False) is None
    other = McpError(-32600, "Bad request", cause=("http_status", 400))
    assert ending_of(other, True) is None


def test_only_a_clean_exit_is_normal() -> None:
    assert not is_abnormal(errors.connection_error("bye", cause=("exit_status", 0)))
    assert is_abnormal(errors.connection_error("killed", cause=("exit_status", -9)))
    assert is_abnormal(errors.connection_error("broken", cause=("stdout_closed",)))
    assert not is_abnormal(None)


def test_with_outcome_marks_and_keeps() -> None:
    marked = errors.with_outcome(errors.connection_error("gone"), "not_sent")
    assert marked.data == {"outcome": "not_sent"}
    kept = errors.with_outcome(errors.outcome_unknown_error("lost"), "not_sent")
    assert kept.data == {"outcome": "unknown"}
    merged = errors.with_outcome(McpError(-32000, "x", {"a": 1}, kind="transport"), "unknown")
    assert merged.data == {"a": 1, "outcome": "unknown"}
