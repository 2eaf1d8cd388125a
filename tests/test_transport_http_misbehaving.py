"""The HTTP client against a raw-socket server that misbehaves on purpose (tests/support/http_fault_server.py).

Rules: "Transport behavior • HTTP" (one POST per request; JSON and event-stream responses; an
event stream read as it arrives, returning at the event that carries the response;
``max_response_bytes`` checked while the response arrives, for every status: a Content-Length
over the limit refused before the body is read, a chunked or close-delimited body at the read
that passes the limit, an event stream answering a request counted as one body, the error's
cause ``("max_response_bytes", limit)``), "Calls" (-32000 for a closed, unreachable or unusable
connection, -32001 for a timeout; decoded JSON-RPC errors keep the server's code, message and
data), the Elixir notes' "HTTP transport details" (RFC 9112 framing: interim 1xx responses are
skipped, a body without length runs until close; a JSON-RPC error body counts whatever the
status; a 1.5-million-digit integer is a -32000 error, not a crash) and exact integers
(docs/decisions/0004-exact-integers.md).

After every fault the same client sends one more request, which the fault server answers
normally: a fault never leaves a connection (or the client) unusable. Nothing may hang: every
call has a timeout and every test checks how long the failure took.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import snodo
from tests.support.http_fault_server import (
    ELICIT_FORM,
    JSON_HEADERS,
    LATEST,
    SSE_HEADERS,
    Exchange,
    FaultServer,
    McpResponder,
    Request,
    ask_on_stream,
    check_wire,
    error,
    event,
    fault_server,
    progress,
    result,
)

MiB = 1024 * 1024
LIMIT = 1 * MiB


@pytest.fixture
def server() -> Iterator[FaultServer]:
    with fault_server() as s:
        yield s


def connect(server: FaultServer, **options: Any) -> snodo.Client:
    options.setdefault("protocol", LATEST)
    options.setdefault("timeout", 10.0)
    return snodo.connect(snodo.Http(server.url), **options)


def elapsed(since: float) -> float:
    return time.monotonic() - since


def still_works(client: snodo.Client, server: FaultServer) -> None:
    """The same client's next request is answered normally (and was well formed)."""
    before = len(server.received())
    got = client.call_tool("echo", {"text": "after the fault"}, timeout=10.0)
    assert isinstance(got, dict)
    assert got["content"][0]["text"] == "after the fault"
    assert len(server.received()) == before + 1
    check_wire(server.received(), client.version)


def rid(request: Request) -> Any:
    return request.message["id"]


def fails(
    client: snodo.Client, *, timeout: float = 10.0, **kw: Any
) -> tuple[snodo.McpError, float]:
    """Call echo, expecting an McpError; (the error, seconds it took)."""
    started = time.monotonic()
    with pytest.raises(snodo.McpError) as caught:
        client.call_tool("echo", {"text": "x"}, timeout=timeout, **kw)
    return caught.value, elapsed(started)


class Writer:
    """A handler that keeps writing until the client goes (or a safety deadline)."""

    def __init__(self, deadline: float = 20.0) -> None:
        self.deadline = deadline
        self.client_gone = threading.Event()
        self.sent = 0

    def pump(self, exchange: Exchange, piece: Any) -> None:
        end = time.monotonic() + self.deadline
        while time.monotonic() < end:
            if not piece():
                break
        self.sent = exchange.sent
        if exchange.client_gone or exchange.wait_client_gone(5.0):
            self.client_gone.set()
        exchange.close()


# -- max_response_bytes --------------------------------------------------------------------


@pytest.mark.parametrize("status", [200, 500])
@pytest.mark.parametrize("content_type", ["application/json", "text/event-stream"])
def test_a_content_length_over_the_limit_is_refused_before_the_body_is_read(
    server: FaultServer, status: int, content_type: str
) -> None:
    """max_response_bytes, for every status: a Content-Length over the limit is refused before
    the body is read. The server sends the head and nothing more; a client that waited for
    the body would time out (-32001) instead of failing at once, and the server sees the
    client close the connection without reading."""
    gone = threading.Event()

    def huge(request: Request, ex: Exchange) -> None:
        ex.head(status, [("Content-Type", content_type), ("Content-Length", str(10**12))])
        if ex.wait_client_gone(8.0):
            gone.set()
        ex.close()

    server.once("tools/call", huge)
    client = connect(server, max_response_bytes=LIMIT)
    with client:
        err, took = fails(client, timeout=8.0)
        assert err.code == -32000 and err.kind == "transport"
        assert err.cause == ("max_response_bytes", LIMIT)
        assert took < 3.0
        assert gone.wait(5.0), "the client kept the connection open"
        still_works(client, server)


@pytest.mark.parametrize("content_type", ["application/json", "text/event-stream"])
def test_an_endless_chunked_body_is_refused_at_the_read_that_passes_the_limit(
    server: FaultServer, content_type: str
) -> None:
    """max_response_bytes: a chunked body is refused at the read that passes the limit, with
    cause ("max_response_bytes", limit); the client closes the connection (the server's
    writes fail) and reads little past the limit. For an event stream the body is made of
    small progress events for the request: the stream counts as one body, notifications
    included."""
    writer = Writer()
    reports: list[dict[str, Any]] = []

    def endless(request: Request, ex: Exchange) -> None:
        ex.start_chunked(200, [("Content-Type", content_type)])
        if content_type == "application/json":
            piece = b'{"jsonrpc":"2.0","id":' + str(rid(request)).encode() + b',"result":{"a":"'
            ex.chunk(piece)
            filler = b"x" * 65536
            writer.pump(ex, lambda: ex.chunk(filler))
        else:
            note = event(progress(rid(request), 1))
            batch = note * (65536 // len(note))
            writer.pump(ex, lambda: ex.chunk(batch))

    server.once("tools/call", endless)
    with connect(server, max_response_bytes=LIMIT) as client:
        err, took = fails(client, progress=reports.append)
        assert err.code == -32000 and err.kind == "transport"
        assert err.cause == ("max_response_bytes", LIMIT)
        assert took < 5.0
        assert writer.client_gone.wait(10.0), "the client kept reading or kept the connection"
        if content_type == "text/event-stream":
            assert reports, "progress events before the limit are delivered as they come"
            assert len(reports) * len(event(progress(1, 1))) <= LIMIT + 65536
        still_works(client, server)


def test_a_close_delimited_body_over_the_limit_is_refused(server: FaultServer) -> None:
    """max_response_bytes: a body without Content-Length or chunking runs until the connection
    closes, and is refused at the read that passes the limit."""
    writer = Writer()

    def close_delimited(request: Request, ex: Exchange) -> None:
        ex.close()
        ex.head(200, [*JSON_HEADERS, ("Connection", "close")])
        ex.send(b'{"jsonrpc":"2.0","id":' + str(rid(request)).encode() + b',"result":{"a":"')
        filler = b"y" * 65536
        writer.pump(ex, lambda: ex.send(filler))

    server.once("tools/call", close_delimited)
    with connect(server, max_response_bytes=LIMIT) as client:
        err, took = fails(client)
        assert err.code == -32000
        assert err.cause == ("max_response_bytes", LIMIT)
        assert took < 5.0
        assert writer.client_gone.wait(10.0)
        still_works(client, server)


def test_a_close_delimited_body_within_the_limit_is_read_to_the_close(server: FaultServer) -> None:
    """RFC 9112 framing: a response with neither Content-Length nor chunking is read until the
    server closes the connection."""

    def close_delimited(request: Request, ex: Exchange) -> None:
        ex.close()
        ex.head(200, [*JSON_HEADERS, ("Connection", "close")])
        body = result(rid(request), {"content": [{"type": "text", "text": "until close"}]})
        ex.send(json.dumps(body).encode())

    server.once("tools/call", close_delimited)
    with connect(server) as client:
        got = client.call_tool("echo", {"text": "x"})
        assert got["content"][0]["text"] == "until close"
        still_works(client, server)


def test_a_response_within_the_limit_arrives_whole(server: FaultServer) -> None:
    """max_response_bytes refuses only what is over it: a response just under the limit (as
    JSON and as an event stream) arrives whole."""
    text = "z" * (LIMIT - 4096)

    def big_json(request: Request, ex: Exchange) -> None:
        ex.json(result(rid(request), {"content": [{"type": "text", "text": text}]}))

    def big_sse(request: Request, ex: Exchange) -> None:
        ex.sse([result(rid(request), {"content": [{"type": "text", "text": text}]})])

    server.once("tools/call", big_json)
    server.once("tools/call", big_sse)
    with connect(server, max_response_bytes=LIMIT) as client:
        for _ in range(2):
            got = client.call_tool("echo", {"text": "x"})
            assert got["content"][0]["text"] == text
        still_works(client, server)


def test_an_endless_header_section_is_refused(server: FaultServer) -> None:
    """max_response_bytes is checked while the response arrives, the head included: a server
    that sends header lines forever gets -32000 quickly, not a client reading without end."""
    writer = Writer()

    def endless_head(request: Request, ex: Exchange) -> None:
        ex.send(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n")
        line = b"X-Filler: " + b"f" * 1000 + b"\r\n"
        batch = line * 64
        writer.pump(ex, lambda: ex.send(batch))

    server.once("tools/call", endless_head)
    with connect(server, max_response_bytes=LIMIT) as client:
        err, took = fails(client)
        assert err.code == -32000 and err.kind == "transport"
        assert took < 5.0
        assert writer.client_gone.wait(10.0)
        still_works(client, server)


def test_a_head_larger_than_the_limit_is_refused(server: FaultServer) -> None:
    """max_response_bytes is checked while the response arrives, the status line and headers
    included: a head of 80 header lines of 20 KB each (1.6 MB, every line within HTTP
    parsers' line limits) is refused with cause ("max_response_bytes", limit)."""
    gone = threading.Event()

    def big_head(request: Request, ex: Exchange) -> None:
        lines = [(f"X-Filler-{i}", "h" * 20_000) for i in range(80)]
        body = json.dumps(result(rid(request), {"content": []})).encode()
        ex.head(200, [*JSON_HEADERS, *lines, ("Content-Length", str(len(body)))])
        ex.send(body)
        if ex.wait_client_gone(5.0):
            gone.set()
        ex.close()

    server.once("tools/call", big_head)
    with connect(server, max_response_bytes=LIMIT) as client:
        err, took = fails(client)
        assert err.code == -32000 and err.kind == "transport"
        assert err.cause == ("max_response_bytes", LIMIT)
        assert took < 5.0
        still_works(client, server)


def test_an_endless_chunk_size_line_is_refused(server: FaultServer) -> None:
    """RFC 9112 chunked framing: a chunk-size line that never ends is refused (-32000) rather
    than read without bound."""
    writer = Writer()

    def endless_size(request: Request, ex: Exchange) -> None:
        ex.start_chunked(200, JSON_HEADERS)
        zeros = b"0" * 65536
        writer.pump(ex, lambda: ex.send(zeros))

    server.once("tools/call", endless_size)
    with connect(server, max_response_bytes=LIMIT) as client:
        err, took = fails(client)
        assert err.code == -32000 and err.kind == "transport"
        assert took < 5.0
        assert writer.client_gone.wait(10.0)
        still_works(client, server)


def test_chunked_framing_wins_over_content_length(server: FaultServer) -> None:
    """RFC 9112 framing: with both Transfer-Encoding: chunked and Content-Length, the chunked
    framing delimits the body."""

    def both(request: Request, ex: Exchange) -> None:
        body = json.dumps(result(rid(request), {"content": [{"type": "text", "text": "chunked"}]}))
        ex.close()
        ex.head(
            200,
            [
                *JSON_HEADERS,
                ("Content-Length", "5"),
                ("Transfer-Encoding", "chunked"),
                ("Connection", "close"),
            ],
        )
        ex.chunk(body[:10])
        ex.chunk(body[10:])
        ex.end_chunks()

    server.once("tools/call", both)
    with connect(server) as client:
        assert client.call_tool("echo", {"text": "x"})["content"][0]["text"] == "chunked"
        still_works(client, server)


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json; charset=utf-8",
        "Application/JSON",
        "text/event-stream; charset=utf-8",
        "Text/Event-Stream",
    ],
)
def test_media_types_are_matched_without_case_or_parameters(
    server: FaultServer, content_type: str
) -> None:
    """JSON and event-stream responses are both accepted; the media type is matched ignoring
    case and parameters (RFC 9110 §8.3.1)."""

    def typed(request: Request, ex: Exchange) -> None:
        answer = result(rid(request), {"content": [{"type": "text", "text": content_type}]})
        if "json" in content_type.lower():
            ex.respond(200, json.dumps(answer), [("Content-Type", content_type)])
        else:
            ex.sse([answer], headers=[("Content-Type", content_type)])

    server.once("tools/call", typed)
    with connect(server) as client:
        assert client.call_tool("echo", {"text": "x"})["content"][0]["text"] == content_type
        still_works(client, server)


# -- timeouts ------------------------------------------------------------------------------


def _drip(ex: Exchange, data: bytes, interval: float = 0.2, for_at_most: float = 3.0) -> None:
    """Send ``data`` one byte every ``interval`` seconds for at most ``for_at_most`` seconds
    (which bounds this test when a client keeps reading), then wait for the client to go."""
    end = time.monotonic() + for_at_most
    for i in range(len(data)):
        if time.monotonic() > end or not ex.send(data[i : i + 1]) or not ex.pause(interval):
            break
    ex.wait_client_gone(5.0)
    ex.close()


@pytest.mark.parametrize(
    "where", ["body", "close-delimited-body", "head", "event-stream", "chunked-event-stream"]
)
def test_a_slow_drip_times_out_within_the_timeout(server: FaultServer, where: str) -> None:
    """-32001 for a timeout, within the request's timeout and not later: a server dripping one
    byte every 0.2 s (in a body framed by Content-Length or by the close, in the status line
    and headers, or as keep-alive comments of an event stream, close-delimited or chunked)
    cannot stretch a request past its timeout, and the failure is a timeout, not -32000."""

    def dripping(request: Request, ex: Exchange) -> None:
        body = json.dumps(result(rid(request), {"content": []})).encode()
        if where == "body":
            ex.head(200, [*JSON_HEADERS, ("Content-Length", str(len(body)))])
            _drip(ex, body)
        elif where == "head":
            head = (
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Slow: "
                + b"s" * 40
                + b"\r\nContent-Length: "
                + str(len(body)).encode()
                + b"\r\n\r\n"
            )
            _drip(ex, head + body)
        elif where == "close-delimited-body":
            ex.close()
            ex.head(200, [*JSON_HEADERS, ("Connection", "close")])
            _drip(ex, body)
        elif where == "chunked-event-stream":
            ex.start_chunked()
            end = time.monotonic() + 3.0
            while time.monotonic() < end and ex.chunk(b":") and ex.pause(0.2):
                pass
            ex.wait_client_gone(5.0)
            ex.close()
        else:
            ex.close()
            ex.head(200, [*SSE_HEADERS, ("Connection", "close")])
            _drip(ex, b":" * 200)

    server.once("tools/call", dripping)
    with connect(server) as client:
        err, took = fails(client, timeout=1.0)
        assert err.code == -32001 and err.kind == "transport"
        assert err.data == {"timeoutMs": 1000}
        assert 0.9 <= took < 2.0, took
        still_works(client, server)


def test_a_server_that_never_answers_times_out(server: FaultServer) -> None:
    """-32001 when no response arrives within the request's timeout."""

    def silent(request: Request, ex: Exchange) -> None:
        ex.wait_client_gone(10.0)
        ex.close()

    server.once("tools/call", silent)
    with connect(server) as client:
        err, took = fails(client, timeout=0.5)
        assert err.code == -32001
        assert 0.45 <= took < 1.5
        still_works(client, server)


# -- broken bodies and streams -------------------------------------------------------------


@pytest.mark.parametrize("framing", ["chunked", "close-delimited", "json-short"])
def test_a_connection_cut_mid_response_is_a_transport_error(
    server: FaultServer, framing: str
) -> None:
    """-32000 for a connection that breaks: an event stream cut in the middle of an event
    (chunked, or delimited by the close), or a JSON body shorter than its Content-Length;
    the failure is immediate, not a timeout."""

    def cut(request: Request, ex: Exchange) -> None:
        partial = b'data: {"jsonrpc":"2.0","id":' + str(rid(request)).encode()
        ex.close()
        if framing == "chunked":
            ex.start_chunked()
            ex.chunk(event(progress(rid(request), 1)))
            ex.chunk(partial)
        elif framing == "close-delimited":
            ex.head(200, [*SSE_HEADERS, ("Connection", "close")])
            ex.send(event(progress(rid(request), 1)) + partial)
        else:
            ex.head(200, [*JSON_HEADERS, ("Content-Length", "500")])
            ex.send(b'{"jsonrpc":"2.0","id":' + str(rid(request)).encode())

    server.once("tools/call", cut)
    with connect(server) as client:
        err, took = fails(client, timeout=10.0)
        assert err.code == -32000 and err.kind == "transport"
        assert took < 3.0
        still_works(client, server)


@pytest.mark.parametrize(
    "body",
    [b"{not json", b'{"ok": true}', b"[1, 2, 3]", b'{"jsonrpc":"2.0","id":1,"result":'],
    ids=["invalid", "not-json-rpc", "array", "truncated"],
)
def test_a_body_that_is_not_a_json_rpc_response_is_a_transport_error(
    server: FaultServer, body: bytes
) -> None:
    """-32000 for an unusable connection: a 200 JSON body that is not JSON, or not a JSON-RPC
    response, gives cause ("http_status", 200, the body's first 512 bytes)."""
    server.once("tools/call", lambda request, ex: ex.json(body))
    with connect(server) as client:
        err, _ = fails(client)
        assert err.code == -32000 and err.kind == "transport"
        assert err.cause == ("http_status", 200, body)
        still_works(client, server)


def test_a_json_response_for_another_request_id_is_not_the_answer(server: FaultServer) -> None:
    """Responses are correlated by ID: a JSON response carrying another request's id does not
    answer this request (-32000), and is not delivered as its result."""

    def wrong_id(request: Request, ex: Exchange) -> None:
        ex.json(result(rid(request) + 1000, {"content": [{"type": "text", "text": "not yours"}]}))

    server.once("tools/call", wrong_id)
    with connect(server) as client:
        err, _ = fails(client)
        assert err.code == -32000 and err.kind == "transport"
        still_works(client, server)


def test_extra_bytes_after_a_response_are_never_read_as_the_next_response(
    server: FaultServer,
) -> None:
    """RFC 9112 framing: bytes after a length-framed response (here a whole forged response to
    the next request id) are not a response to anything; the connection is not reused, and
    the next request gets the server's real answer."""

    def smuggle(request: Request, ex: Exchange) -> None:
        mine = json.dumps(result(rid(request), {"content": [{"type": "text", "text": "one"}]}))
        forged = json.dumps(
            result(rid(request) + 1, {"content": [{"type": "text", "text": "forged"}]})
        )
        ex.send(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
            % (len(mine), mine.encode(), len(forged), forged.encode())
        )

    server.once("tools/call", smuggle)
    with connect(server) as client:
        assert client.call_tool("echo", {"text": "x"})["content"][0]["text"] == "one"
        still_works(client, server)


@pytest.mark.parametrize(
    "interim",
    [
        [b"HTTP/1.1 100 Continue\r\n\r\n"],
        [b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload; as=style\r\n\r\n"],
        [
            b"HTTP/1.1 100 Continue\r\n\r\n",
            b"HTTP/1.1 103 Early Hints\r\nLink: </a.js>; rel=preload\r\n\r\n",
            b"HTTP/1.1 102 Processing\r\n\r\n",
        ],
    ],
    ids=["100", "103", "100-103-102"],
)
@pytest.mark.parametrize("body", ["json", "chunked-sse"])
def test_interim_1xx_responses_are_skipped(
    server: FaultServer, interim: list[bytes], body: str
) -> None:
    """RFC 9112 framing: interim 1xx responses (100 Continue, 103 Early Hints, 102) before the
    real one are skipped; the final response (JSON, or a chunked event stream) is the
    answer, and the connection stays usable."""

    def with_interim(request: Request, ex: Exchange) -> None:
        for head in interim:
            ex.send(head)
        answer = result(rid(request), {"content": [{"type": "text", "text": "final"}]})
        if body == "json":
            ex.json(answer)
        else:
            ex.sse([answer])

    server.once("tools/call", with_interim)
    with connect(server) as client:
        got = client.call_tool("echo", {"text": "x"})
        assert got["content"][0]["text"] == "final"
        still_works(client, server)


# -- status codes --------------------------------------------------------------------------


def test_a_502_with_an_html_body_keeps_its_first_512_bytes(server: FaultServer) -> None:
    """-32000 for a non-JSON-RPC error body: cause ("http_status", 502, the first 512 bytes)."""
    html = b"<html><head><title>502 Bad Gateway</title></head><body>" + b"p" * 2000 + b"</html>"
    server.once(
        "tools/call", lambda request, ex: ex.respond(502, html, [("Content-Type", "text/html")])
    )
    with connect(server) as client:
        err, _ = fails(client)
        assert err.code == -32000 and err.kind == "transport"
        assert err.cause == ("http_status", 502, html[:512])
        assert err.cause[2].startswith(b"<html>")
        still_works(client, server)


@pytest.mark.parametrize("status", [200, 400, 404, 500])
def test_a_json_rpc_error_body_is_the_servers_error_whatever_the_status(
    server: FaultServer, status: int
) -> None:
    """Decoded JSON-RPC errors keep the server's code, message and data, whatever the HTTP
    status of the response that carries them."""

    def refuse(request: Request, ex: Exchange) -> None:
        ex.json(error(rid(request), -32602, "Unknown tool: x", {"tool": "x"}), status=status)

    server.once("tools/call", refuse)
    with connect(server) as client:
        err, _ = fails(client)
        assert (err.code, err.message, err.data) == (-32602, "Unknown tool: x", {"tool": "x"})
        assert err.kind == "protocol"
        still_works(client, server)


@pytest.mark.parametrize("status", [202, 204])
def test_a_request_answered_without_a_body_is_a_transport_error(
    server: FaultServer, status: int
) -> None:
    """A request needs a JSON-RPC response: a 202 or 204 without a body is -32000."""
    server.once("tools/call", lambda request, ex: ex.respond(status))
    with connect(server) as client:
        err, _ = fails(client)
        assert err.code == -32000 and err.kind == "transport"
        still_works(client, server)


def test_an_unreachable_endpoint_is_a_transport_error_at_once() -> None:
    """-32000 for an unreachable connection: nothing listens on the port."""
    with fault_server() as probe:
        url = probe.url
    started = time.monotonic()
    with pytest.raises(snodo.McpError) as caught:
        snodo.connect(snodo.Http(url), protocol=LATEST, timeout=5.0).call_tool("echo", {})
    assert caught.value.code == -32000 and caught.value.kind == "transport"
    assert elapsed(started) < 3.0


# -- event streams -------------------------------------------------------------------------


def test_an_event_stream_after_keep_alives_and_split_across_reads(server: FaultServer) -> None:
    """An event stream is read as it arrives: keep-alive comments are ignored, events are put
    back together across reads (split every few bytes, CRLF and multi-line data included),
    unrelated notifications and other requests' responses are skipped, progress for the
    request is delivered, and the call returns at the event that carries its response."""
    reports: list[dict[str, Any]] = []

    def split(request: Request, ex: Exchange) -> None:
        me = rid(request)
        answer = json.dumps(result(me, {"content": [{"type": "text", "text": "pieced"}]}))
        cut = answer.index('"id"')  # between two tokens: a line break there is JSON whitespace
        first, second = answer[:cut], answer[cut:]
        stream = (
            b": keep-alive\n\n"
            + b":\r\n\r\n"
            + event(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/message",
                    "params": {"level": "info", "data": "hi"},
                }
            )
            + event(result(me + 1000, {"content": []}))
            + event(progress(me + 1000, 9))
            + b"event: message\r\nid: 7\r\n"
            + json_data(progress(me, 1, 2))
            + b"\r\n"
            + b"data: "
            + first.encode()
            + b"\ndata: "
            + second.encode()
            + b"\n\n"
        )
        ex.start_chunked()
        for i in range(0, len(stream), 7):
            ex.chunk(stream[i : i + 7])
            ex.pause(0.005)
        ex.end_chunks()

    server.once("tools/call", split)
    with connect(server) as client:
        got = client.call_tool("echo", {"text": "x"}, progress=reports.append)
        assert got["content"][0]["text"] == "pieced"
        assert [r["progress"] for r in reports] == [1]
        still_works(client, server)


def json_data(message: Any) -> bytes:
    return b"data: " + json.dumps(message).encode() + b"\r\n"


def test_the_call_returns_at_the_response_event_without_waiting_for_the_stream_to_end(
    server: FaultServer,
) -> None:
    """The request returns at the event that carries its response, even when the server keeps
    the stream open after it; that stream is then closed by the client (it is never reused:
    the next request goes on another connection)."""
    closed = threading.Event()

    def linger(request: Request, ex: Exchange) -> None:
        ex.start_chunked()
        ex.chunk(event(result(rid(request), {"content": [{"type": "text", "text": "early"}]})))
        if ex.wait_client_gone(5.0):
            closed.set()
        ex.close()

    server.once("tools/call", linger)
    with connect(server) as client:
        started = time.monotonic()
        got = client.call_tool("echo", {"text": "x"})
        assert got["content"][0]["text"] == "early"
        assert elapsed(started) < 3.0
        assert closed.wait(5.0), "the client left the answered stream open"
        still_works(client, server)
        first, after = server.received("tools/call")
        assert after.connection != first.connection


def test_progress_is_delivered_as_it_comes_before_the_response(server: FaultServer) -> None:
    """Progress over an event stream is delivered as it arrives: the server sends the response
    only after the client's progress function has run (it waits for it, with a deadline)."""
    delivered = threading.Event()
    seen_before_response: list[bool] = []

    def gated(request: Request, ex: Exchange) -> None:
        ex.start_chunked()
        ex.chunk(event(progress(rid(request), 1, 2)))
        seen_before_response.append(delivered.wait(10.0))
        ex.chunk(event(progress(rid(request), 2, 2)))
        ex.chunk(event(result(rid(request), {"content": [{"type": "text", "text": "done"}]})))
        ex.end_chunks()

    def on_progress(params: dict[str, Any]) -> None:
        delivered.set()

    server.once("tools/call", gated)
    with connect(server) as client:
        got = client.call_tool("echo", {"text": "x"}, progress=on_progress)
        assert got["content"][0]["text"] == "done"
        assert seen_before_response == [True]
        (call,) = server.received("tools/call")
        assert call.message["params"]["_meta"]["progressToken"] == call.message["id"]
        still_works(client, server)


def test_an_event_stream_that_ends_without_the_response_is_a_transport_error(
    server: FaultServer,
) -> None:
    """-32000 when the event stream ends (cleanly) without the event that carries the
    response."""

    def no_answer(request: Request, ex: Exchange) -> None:
        ex.sse([progress(rid(request), 1)])

    server.once("tools/call", no_answer)
    with connect(server) as client:
        err, took = fails(client)
        assert err.code == -32000 and err.kind == "transport"
        assert took < 3.0
        still_works(client, server)


@pytest.mark.parametrize("content_type", ["text/event-stream", "Text/Event-Stream; charset=utf-8"])
def test_a_resumed_stream_is_matched_without_case_or_parameters(content_type: str) -> None:
    """A session-era stream cut after an event with an id is resumed with a GET carrying
    Last-Event-ID (and the session headers, no Mcp-Method); the resumed answer's media type is
    matched as a POST answer's is, ignoring case and parameters (RFC 9110 §8.3.1)."""
    cut = threading.Event()

    def cut_after_an_id(request: Request, ex: Exchange) -> None:
        ex.start_chunked()
        ex.chunk(b"id: e-1\nretry: 10\ndata: \n\n")
        cut.set()
        ex.close()

    def resumed(request: Request, ex: Exchange) -> None:
        (call,) = [r for r in server.received("tools/call")]
        answer = result(rid(call), {"content": [{"type": "text", "text": "resumed"}]})
        ex.sse([answer], headers=[("Content-Type", content_type)])

    with fault_server(McpResponder(session_id="sess-r")) as server:
        server.once("tools/call", cut_after_an_id)
        server.once(lambda r: r.method == "GET" and r.header("last-event-id") is not None, resumed)
        with connect(server, protocol="2025-11-25") as client:
            got = client.call_tool("echo", {"text": "x"})
            assert got["content"][0]["text"] == "resumed"
            assert cut.is_set()
            (get,) = server.received(lambda r: r.header("last-event-id") is not None)
            assert get.header("last-event-id") == "e-1"
            assert get.header("mcp-session-id") == "sess-r"
            assert get.header("mcp-protocol-version") == "2025-11-25"
            assert get.header("mcp-method") is None
            still_works(client, server)


def test_an_event_that_is_not_json_is_skipped(server: FaultServer) -> None:
    """An event whose data is not a JSON-RPC message is skipped; the response event after it
    answers the request."""

    def noisy(request: Request, ex: Exchange) -> None:
        ex.sse([b"data: not json\n\n", b"data: {}\n\n", result(rid(request), {"content": []})])

    server.once("tools/call", noisy)
    with connect(server) as client:
        assert client.call_tool("echo", {"text": "x"}) == {"content": []}
        still_works(client, server)


# -- integers ------------------------------------------------------------------------------


def test_integers_beyond_64_bits_are_exact(server: FaultServer) -> None:
    """Exact integers: values past 64 bits in a result and in progress params arrive exactly
    (never as floats)."""
    big = 2**70 + 1
    negative = -(2**65) - 3
    reports: list[dict[str, Any]] = []

    def exact(request: Request, ex: Exchange) -> None:
        me = rid(request)
        ex.sse(
            [
                b'data: {"jsonrpc":"2.0","method":"notifications/progress","params":'
                b'{"progressToken":%d,"progress":%d}}\n\n' % (me, big),
                b'data: {"jsonrpc":"2.0","id":%d,"result":{"content":[],'
                b'"structuredContent":{"big":%d,"negative":%d}}}\n\n' % (me, big, negative),
            ]
        )

    def exact_json(request: Request, ex: Exchange) -> None:
        ex.json(
            b'{"jsonrpc":"2.0","id":%d,"result":{"content":[],"structuredContent":{"big":%d}}}'
            % (rid(request), big)
        )

    server.once("tools/call", exact)
    server.once("tools/call", exact_json)
    with connect(server) as client:
        got = client.call_tool("echo", {"text": "x"}, progress=reports.append)
        assert got["structuredContent"] == {"big": big, "negative": negative}
        assert type(got["structuredContent"]["big"]) is int
        assert [r["progress"] for r in reports] == [big]
        assert type(reports[0]["progress"]) is int
        assert client.call_tool("echo", {"text": "x"})["structuredContent"] == {"big": big}
        still_works(client, server)


@pytest.mark.parametrize("framing", ["json", "event-stream"])
def test_a_million_digit_integer_is_a_transport_error_quickly(
    server: FaultServer, framing: str
) -> None:
    """A 1.5-million-digit integer is a -32000 error, quickly, rather than a crash or a
    seconds-long parse."""
    digits = b"7" * 1_500_000

    def huge_int(request: Request, ex: Exchange) -> None:
        body = b'{"jsonrpc":"2.0","id":%d,"result":{"n":%s}}' % (rid(request), digits)
        if framing == "json":
            ex.json(body)
        else:
            ex.sse([b"data: " + body + b"\n\n"])

    server.once("tools/call", huge_int)
    with connect(server) as client:
        err, took = fails(client)
        assert err.code == -32000 and err.kind == "transport"
        assert took < 2.0
        assert len(str(err)) < 2000 and len(repr(err)) < 4000
        still_works(client, server)


# -- session era: server requests on the stream, notifications ---------------------------


def accept(params: dict[str, Any]) -> dict[str, Any]:
    return {"action": "accept", "content": {"ok": True}}


def test_a_server_request_id_beyond_64_bits_is_answered_exactly() -> None:
    """Exact integers: a server request whose id is past 64 bits is answered with exactly that
    id (on its own POST, with the session headers)."""
    big_id = 12345678901234567890123456789
    with fault_server(McpResponder(session_id="sess-1")) as server:
        server.once("tools/call", ask_on_stream(big_id))
        with connect(server, protocol="2025-11-25", input_handlers={"form": accept}) as client:
            got = client.call_tool("echo", {"text": "x"})
            assert got["structuredContent"]["answer"]["id"] == big_id
            (answer,) = server.received(lambda r: r.kind == "response")
            assert answer.message == {"jsonrpc": "2.0", "id": big_id, "result": accept({})}
            assert b"%d" % big_id in answer.body
            assert answer.header("Mcp-Session-Id") == "sess-1"
            assert answer.header("MCP-Protocol-Version") == "2025-11-25"
            still_works(client, server)
        check_wire(server.received(), "2025-11-25")


def test_a_failing_answer_post_fails_the_request_in_flight() -> None:
    """A server request answered on its own POST: when that POST fails (here 500), the request
    in flight fails with -32000; the client then still works."""
    with fault_server(McpResponder(session_id="sess-1")) as server:
        server.once("tools/call", ask_on_stream("q-1"))
        server.once(lambda r: r.kind == "response", lambda r, ex: ex.respond(500, b"down"))
        with connect(server, protocol="2025-11-25", input_handlers={"form": accept}) as client:
            err, took = fails(client)
            assert err.code == -32000 and err.kind == "transport"
            assert took < 5.0
            still_works(client, server)


def test_a_handler_exception_propagates_to_the_caller_over_http() -> None:
    """On HTTP a handler that raises propagates its exception to the caller (as it does for an
    embedded request); the client still works afterwards."""

    class Boom(Exception):
        pass

    def explode(params: dict[str, Any]) -> dict[str, Any]:
        raise Boom("the handler broke")

    with fault_server(McpResponder(session_id="sess-1")) as server:

        def ask_then_wait(request: Request, ex: Exchange) -> None:
            ex.start_chunked()
            ex.chunk(
                event(
                    {
                        "jsonrpc": "2.0",
                        "id": 5,
                        "method": "elicitation/create",
                        "params": ELICIT_FORM,
                    }
                )
            )
            ex.wait_client_gone(10.0)
            ex.close()

        server.once("tools/call", ask_then_wait)
        with connect(server, protocol="2025-11-25", input_handlers={"form": explode}) as client:
            with pytest.raises(Boom):
                client.call_tool("echo", {"text": "x"})
            still_works(client, server)


def test_handler_time_counts_against_the_request_timeout() -> None:
    """The time an input handler takes counts against the request's timeout, which is not
    extended: a handler that takes 1.5 s inside a request with timeout 1 s ends in -32001."""
    with fault_server(McpResponder(session_id="sess-1")) as server:
        server.once("tools/call", ask_on_stream("slow"))

        def slow(params: dict[str, Any]) -> dict[str, Any]:
            threading.Event().wait(1.5)  # a user taking their time, not synchronisation
            return accept(params)

        with connect(server, protocol="2025-11-25", input_handlers={"form": slow}) as client:
            err, took = fails(client, timeout=1.0)
            assert err.code == -32001
            assert took < 3.0
            still_works(client, server)


def test_a_refused_notifications_initialized_fails_connect() -> None:
    """notifications/initialized is a POST answered with 202; a server that refuses it (400
    with a JSON-RPC error body) fails connect with the server's error."""
    with fault_server(McpResponder()) as server:
        server.once(
            "notifications/initialized",
            lambda r, ex: ex.json(
                {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "nope"}},
                status=400,
            ),
        )
        with pytest.raises(snodo.McpError) as caught:
            connect(server, protocol="2025-11-25")
        assert caught.value.code == -32600
        assert caught.value.message == "nope"
        assert server.rpc_methods()[:2] == ["initialize", "notifications/initialized"]
