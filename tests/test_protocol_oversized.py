"""Which request an oversized stdio line answers (issue 18 item 3; docs/decisions/0038): the id
is read from the line's kept edges only when the line is recognisably a response."""

from __future__ import annotations

import pytest

from snodo.protocol import errors
from snodo.protocol.framing import LineFramer, Oversized
from snodo.protocol.oversized import answered_id, timeout_after_dropped_line

LIMIT = 4096
BODY = b"x" * 20_000


def oversized(line: bytes) -> Oversized:
    """The framer's event for ``line`` (over LIMIT), fed in uneven chunks as a pipe gives it."""
    framer = LineFramer(LIMIT)
    data = line + b"\n"
    events = [e for i in range(0, len(data), 7_001) for e in framer.feed(data[i : i + 7_001])]
    (event,) = events
    assert isinstance(event, Oversized)
    return event


def test_the_id_before_the_result_is_read_from_the_head() -> None:
    """The Python SDK's order (and snodo's): jsonrpc, id, result."""
    line = b'{"jsonrpc":"2.0","id":17,"result":{"content":[{"type":"text","text":"' + BODY
    assert answered_id(oversized(line + b'"}]}}')) == 17


def test_the_id_after_the_result_is_read_from_the_tail() -> None:
    """The TypeScript SDK's order: result, jsonrpc, id; a nested "id" in the result is not it."""
    line = b'{"result":{"id":99,"content":[{"type":"text","text":"' + BODY
    assert answered_id(oversized(line + b'"}]},"jsonrpc":"2.0","id":5}')) == 5
    assert answered_id(oversized(line + b'"}]} , "jsonrpc" : "2.0" , "id" : "r-5" }\r')) == "r-5"


def test_an_oversized_error_response_answers_its_id() -> None:
    line = b'{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"m","data":"' + BODY + b'"}}'
    assert answered_id(oversized(line)) == 3


def test_a_bom_and_spaces_before_the_members_are_allowed() -> None:
    line = b'\xef\xbb\xbf { "jsonrpc" : "2.0" , "id" : "a\\"b" , "result" : "' + BODY + b'"}'
    assert answered_id(oversized(line)) == 'a"b'


@pytest.mark.parametrize(
    "line",
    [
        # A server request: its id is the server's own, whatever it collides with.
        b'{"jsonrpc":"2.0","id":4,"method":"sampling/createMessage","params":{"t":"'
        + BODY
        + b'"}}',
        b'{"method":"sampling/createMessage","params":{"t":"'
        + BODY
        + b'"},"jsonrpc":"2.0","id":4}',
        # A notification.
        b'{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"' + BODY + b'"}}',
        # Not known to be a response: the head ends in another member before result or error.
        b'{"jsonrpc":"2.0","id":4,"extra":"' + BODY + b'","result":{}}',
        # The id in neither edge.
        b'{"result":{"text":"' + BODY + b'"},"id":4,"jsonrpc":"2.0"}',
        # The last member's nested "id" is not the line's.
        b'{"result":{"text":"' + BODY + b'","item":{"id":4}}}',
        # Ids that are no request id: null, a float, a boolean, an object.
        b'{"jsonrpc":"2.0","id":null,"result":"' + BODY + b'"}',
        b'{"jsonrpc":"2.0","id":4.5,"result":"' + BODY + b'"}',
        b'{"jsonrpc":"2.0","id":true,"result":"' + BODY + b'"}',
        b'{"jsonrpc":"2.0","id":{"n":4},"result":"' + BODY + b'"}',
        # Not a JSON object at all.
        b"[" + BODY + b"]",
        BODY,
    ],
)
def test_a_line_that_is_not_a_known_answer_has_no_id(line: bytes) -> None:
    assert answered_id(oversized(line)) is None


def test_members_that_the_head_cuts_are_not_read() -> None:
    """A member the head ends inside is never taken for a whole one: a cut string whose text
    looks like closing brackets, or an id number cut short."""
    cut = Oversized(5000, b'{"jsonrpc":"2.0","meta":"}]},"id":1,"result":' + b"x" * 100, b"")
    assert answered_id(cut) is None
    assert answered_id(Oversized(5000, b'{"jsonrpc":"2.0","result":{},"id":12', b"")) is None
    assert answered_id(Oversized(5000, b'{"jsonrpc":"2.0","id":12,"result":{', b"")) == 12


def test_the_timeout_after_a_dropped_line_says_so() -> None:
    """The -32001 keeps its code, data and cause; its message names the dropped line."""
    timeout = errors.timeout_error(1.5)
    said = timeout_after_dropped_line(timeout, 20_001, LIMIT)
    assert (said.code, said.data, said.kind, said.cause) == (
        -32001,
        {"timeoutMs": 1500},
        "transport",
        None,
    )
    assert said.message.startswith("Request timed out")
    assert "20001 bytes" in said.message and f"max_response_bytes ({LIMIT})" in said.message
