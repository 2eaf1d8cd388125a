"""How HTTP calls end against a raw-socket server that misbehaves on purpose (issue 12, items 3, 5,
7, 8 and 10; docs/decisions/0030).

- close() fails every call in flight at once with -32000, whatever it waits on (no answer yet,
  a JSON body half sent, an idle event stream, the wait before a resumption).
- A timeout on a session-era session POSTs ``notifications/cancelled`` with the request's id
  and the session's headers; 2026-07-28 cancels by closing the stream alone.
- A call whose deadline passed is -32001, even when the timer that enforces the deadline is late
  (a busy thread) and the socket's own timeout or the server's close is seen first.
- No credential the client sent survives in an error (message, data, cause, str, repr) or a log
  line, whatever the server echoes.
- A response that is not a valid JSON-RPC response (both "result" and "error") fails its call at
  once, and the next call works.
- A request written whole on a fresh connection that gets no answer is -32000 with
  ``data: {"outcome": "unknown"}``, sent once.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import snodo
from snodo.supervision.timers import call_later
from tests.support.http_fault_server import (
    JSON_HEADERS,
    LATEST,
    SESSION_ERA,
    Exchange,
    FaultServer,
    McpResponder,
    Request,
    check_wire,
    event,
    fault_server,
    progress,
    result,
)

ERAS = (LATEST, "2025-11-25")
SESSION = "session-7f3c9a1e5b2d4f60"


def connect(server: FaultServer, version: str, **options: Any) -> snodo.Client:
    options.setdefault("timeout", 10.0)
    return snodo.connect(snodo.Http(server.url), protocol=version, **options)


def rid(request: Request) -> Any:
    return request.message["id"]


def still_works(client: snodo.Client, server: FaultServer) -> None:
    """The same client's next call is answered normally."""
    got = client.call_tool("echo", {"text": "after the fault"}, timeout=10.0)
    assert isinstance(got, dict)
    assert got["content"][0]["text"] == "after the fault"
    check_wire(server.received(), client.version)


def fails(client: snodo.Client, **kw: Any) -> tuple[snodo.McpError, float]:
    """Call echo expecting an McpError: (the error, seconds it took)."""
    kw.setdefault("timeout", 10.0)
    started = time.monotonic()
    with pytest.raises(snodo.McpError) as caught:
        client.call_tool("echo", {"text": "x"}, **kw)
    return caught.value, time.monotonic() - started


class Outcome:
    """A call run in a thread of its own: its error (or result) and when it ended."""

    def __init__(self, client: snodo.Client, **kw: Any) -> None:
        self.error: snodo.McpError | None = None
        self.result: Any = None
        self.ended = 0.0
        self._thread = threading.Thread(target=self._run, args=(client, kw), daemon=True)
        self._thread.start()

    def _run(self, client: snodo.Client, kw: dict[str, Any]) -> None:
        try:
            self.result = client.call_tool("echo", {"text": "x"}, **kw)
        except snodo.McpError as error:
            self.error = error
        finally:
            self.ended = time.monotonic()

    def join(self, timeout: float) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()


# -- item 3: close() ends every call in flight ---------------------------------------------


def holding(answer: str, held: threading.Event) -> Any:
    """A tools/call handler that starts an answer (or none) and holds it until the client goes."""

    def handler(request: Request, ex: Exchange) -> None:
        if answer == "json-started":
            ex.head(200, [*JSON_HEADERS, ("Content-Length", "500")])
            ex.send(b'{"jsonrpc": "2.0", ')
        elif answer == "event-stream-idle":
            ex.start_chunked()
            ex.chunk(event(progress(rid(request), 1), event_id="e-1"))
        elif answer == "resume-wait":  # an event with an id and a long retry, then the cut
            ex.start_chunked()
            ex.chunk(b"id: e-1\nretry: 30000\ndata: \n\n")
            held.set()
            ex.close()
            return
        held.set()
        ex.wait_client_gone(10.0)
        ex.close()

    return handler


@pytest.mark.parametrize(
    ("version", "answer"),
    [
        *[
            (version, answer)
            for answer in ("none", "json-started", "event-stream-idle")
            for version in ERAS
        ],
        ("2025-11-25", "resume-wait"),  # 2026-07-28 streams are not resumed
    ],
)
def test_close_fails_a_call_in_flight_at_once(version: str, answer: str) -> None:
    """A call without a timeout, blocked on the server (no answer yet, a JSON body half sent, an
    event stream that started and went idle, the retry wait before resuming a broken stream),
    fails with -32000 within a second of close(), in both eras (resumption: session era)."""
    held = threading.Event()
    with fault_server(McpResponder(session_id=SESSION)) as server:
        server.once("tools/call", holding(answer, held))
        client = connect(server, version, timeout=None)
        call = Outcome(client)
        assert held.wait(10.0)
        closing = time.monotonic()
        client.close()
        assert call.join(5.0), "the call is still blocked after close()"
        assert call.error is not None, call.result
        assert call.error.code == -32000 and call.error.kind == "transport"
        assert call.error.message == "The connection was closed"
        assert call.ended - closing < 1.0
        with pytest.raises(snodo.McpError) as after:
            client.call_tool("echo", {"text": "x"})
        assert after.value.code == -32000


@pytest.mark.parametrize("version", ERAS)
def test_close_fails_every_call_in_flight(version: str) -> None:
    """Several callers blocked at once all fail with -32000 at close()."""
    callers = 6
    with fault_server(McpResponder(session_id=SESSION)) as server:
        server.once("tools/call", holding("none", threading.Event()), times=callers)
        client = connect(server, version, timeout=None)
        calls = [Outcome(client) for _ in range(callers)]
        server.wait_for("tools/call", callers, timeout=10.0)
        closing = time.monotonic()
        client.close()
        for call in calls:
            assert call.join(5.0)
            assert call.error is not None and call.error.code == -32000
            assert call.ended - closing < 1.0


# -- item 5: notifications/cancelled after a session-era timeout -----------------------


def silent(request: Request, ex: Exchange) -> None:
    ex.wait_client_gone(10.0)
    ex.close()


def idle_stream(request: Request, ex: Exchange) -> None:
    ex.start_chunked()
    ex.chunk(b": waiting\n\n")
    ex.wait_client_gone(10.0)
    ex.close()


@pytest.mark.parametrize("version", SESSION_ERA)
@pytest.mark.parametrize("answer", ["json", "event-stream"])
def test_a_session_era_timeout_sends_notifications_cancelled(version: str, answer: str) -> None:
    """After the client's -32001, the server receives notifications/cancelled naming the
    request, with the session's headers (Mcp-Session-Id, MCP-Protocol-Version, the
    credentials); the caller is not held long by it."""
    token = "Bearer cancel-token-0123456789"
    with fault_server(McpResponder(session_id=SESSION)) as server:
        server.once("tools/call", silent if answer == "json" else idle_stream)
        with connect(server, version, headers={"Authorization": token}) as client:
            started = time.monotonic()
            err, took = fails(client, timeout=0.3)
            assert err.code == -32001 and err.data == {"timeoutMs": 300}
            assert took < 0.3 + 1.0
            (call,) = server.received("tools/call")
            (note,) = server.wait_for("notifications/cancelled", timeout=5.0)
            assert note.message["params"]["requestId"] == rid(call)
            assert note.message["params"]["reason"] == "Request timed out"
            assert note.arrived >= started + 0.3  # after the deadline
            assert note.header("Mcp-Session-Id") == SESSION
            assert note.header("MCP-Protocol-Version") == version
            assert note.header("Authorization") == token
            still_works(client, server)


@pytest.mark.parametrize("version", SESSION_ERA)
def test_a_max_total_timeout_sends_notifications_cancelled_too(version: str) -> None:
    """max_total_timeout ends a call whose progress keeps resetting its timeout: -32001
    "Maximum total timeout exceeded", then notifications/cancelled with that reason."""

    def reporting(request: Request, ex: Exchange) -> None:
        ex.start_chunked()
        token = request.message["params"]["_meta"]["progressToken"]
        for n in range(40):
            if not ex.chunk(event(progress(token, n))) or not ex.pause(0.05):
                break
        ex.wait_client_gone(5.0)
        ex.close()

    with fault_server(McpResponder(session_id=SESSION)) as server:
        server.once("tools/call", reporting)
        with connect(server, version) as client:
            err, _ = fails(
                client,
                timeout=0.3,
                progress=lambda params: None,
                reset_timeout_on_progress=True,
                max_total_timeout=0.6,
            )
            assert err.code == -32001 and err.data == {"maxTotalTimeoutMs": 600}
            (call,) = server.received("tools/call")
            (note,) = server.wait_for("notifications/cancelled", timeout=5.0)
            assert note.message["params"] == {
                "requestId": rid(call),
                "reason": "Maximum total timeout exceeded",
            }
            still_works(client, server)


@pytest.mark.parametrize("answer", ["json", "event-stream"])
def test_a_2026_timeout_sends_no_notification(answer: str) -> None:
    """2026-07-28 cancels by closing the stream: no notifications/cancelled is sent."""
    with fault_server() as server:
        server.once("tools/call", silent if answer == "json" else idle_stream)
        with connect(server, LATEST) as client:
            err, _ = fails(client, timeout=0.3)
            assert err.code == -32001
            still_works(client, server)  # anything sent after the timeout came before this
        assert server.received("notifications/cancelled") == []
        assert [r.kind for r in server.received() if r.method == "POST"].count("notification") == 0


@pytest.mark.parametrize("version", SESSION_ERA)
def test_a_server_that_refuses_the_cancellation_does_not_change_the_timeout(version: str) -> None:
    """The notification is best effort: a server that holds it past CANCEL_WAIT or refuses it
    leaves the caller's -32001 as it was, late by at most that bound."""
    with fault_server(McpResponder(session_id=SESSION)) as server:
        server.once("tools/call", silent)
        server.once("notifications/cancelled", silent)
        with connect(server, version) as client:
            err, took = fails(client, timeout=0.3)
            assert err.code == -32001 and err.data == {"timeoutMs": 300}
            assert took < 0.3 + 0.5 + 0.5
            still_works(client, server)


# -- item 7: a deadline that passed is a timeout -------------------------------------------


@contextlib.contextmanager
def late_timers(limit: float = 10.0) -> Iterator[None]:
    """Keep the shared timer thread busy for the block, as a thread holding the GIL would: every
    deadline timer fires late, after the socket's timeout or the server's close is seen."""
    busy, release = threading.Event(), threading.Event()

    def block() -> None:
        busy.set()
        release.wait(limit)

    call_later(0.0, block)
    assert busy.wait(5.0)
    try:
        yield
    finally:
        release.set()


def late_answer(kind: str, timeout: float, after: float | None = None) -> Any:
    """A tools/call handler that starts an answer and breaks it off only after the client's
    deadline (``arrived + timeout`` is later than the deadline, set before the request left),
    ``after`` seconds later."""
    margin = timeout / 6 if after is None else after
    hold = timeout + (0.3 if after is None else after)

    def handler(request: Request, ex: Exchange) -> None:
        deadline = request.arrived + timeout
        ex.close()
        if kind == "json-held":  # the socket's read timeout comes first
            ex.head(200, [*JSON_HEADERS, ("Content-Length", "500")])
            ex.send(b'{"jsonrpc": "2.0", ')
            ex.pause(hold)
            return
        if kind == "event-stream-held":
            ex.start_chunked()
            ex.chunk(b": primed\n\n")
            ex.pause(hold)
            return
        # The socket's timeout never comes: bytes arrive until just before the deadline, and
        # the connection closes just after it.
        pieces: Iterator[bytes]
        if kind == "json-closed":
            ex.head(200, [*JSON_HEADERS, ("Content-Length", "500")])
            pieces = iter(lambda: b" ", None)
        elif kind == "event-stream-closed":
            ex.start_chunked()
            pieces = iter(lambda: b"8\r\n: drip\n\n\r\n", None)  # one chunk each
        else:  # "head-closed": the status line and a header drip, then the close
            head = b"HTTP/1.1 200 OK\r\nX-Slow: " + b"s" * 500
            pieces = (head[i : i + 1] for i in range(len(head)))
        while time.monotonic() < deadline - timeout / 4:
            if not ex.send(next(pieces)) or not ex.pause(timeout / 10):
                return
        ex.pause(max(0.0, deadline - time.monotonic()) + margin)

    return handler


@pytest.mark.parametrize(
    "kind",
    ["json-held", "event-stream-held", "json-closed", "event-stream-closed", "head-closed"],
)
def test_a_call_past_its_deadline_is_a_timeout_when_the_timer_is_late(kind: str) -> None:
    """The timer that cuts a call at its deadline may run late (a busy thread holds the GIL):
    whatever ends the read first (the socket's own timeout, the server's close of a JSON body,
    an event stream or a response head), a call whose deadline passed is -32001, never -32000
    "broke off"."""
    timeout = 0.4
    with fault_server() as server:
        server.once("tools/call", late_answer(kind, timeout))
        with connect(server, LATEST) as client:
            with late_timers():
                err, took = fails(client, timeout=timeout)
            assert (err.code, err.message, err.data) == (
                -32001,
                "Request timed out",
                {"timeoutMs": 400},
            ), repr(err)
            assert took >= timeout
            still_works(client, server)


def _os_thread(target: Callable[[], None]) -> Callable[[float], bool]:
    """Run ``target`` on an OS thread, even under gevent (where a greenlet that never yields
    would stop the hub); returns its join(timeout)."""
    import sys

    monkey = sys.modules.get("gevent.monkey")
    if monkey is None or not monkey.is_module_patched("threading"):
        thread = threading.Thread(target=target, daemon=True)
        thread.start()

        def join(timeout: float) -> bool:
            thread.join(timeout)
            return not thread.is_alive()

        return join
    start = monkey.get_original("_thread", "start_new_thread")
    done = monkey.get_original("_thread", "allocate_lock")()
    done.acquire()

    def run() -> None:
        try:
            target()
        finally:
            done.release()

    start(run, ())
    return lambda timeout: bool(done.acquire(timeout=timeout))


def test_timeouts_under_a_busy_thread_are_always_timeouts() -> None:
    """A CPU-bound thread competes for the GIL while calls time out on an idle event stream
    (the socket's read timeout and the deadline's timer race, as in the field report), or on
    a stream the server breaks right after the deadline: every trial is -32001."""
    trials, timeout = 30, 0.08
    stop = [False]

    def hog() -> None:
        total = 0
        while not stop[0]:
            total += sum(range(2000))

    with fault_server() as server:
        server.once("tools/call", late_answer("event-stream-held", timeout, 0.1), trials // 2)
        server.always("tools/call", late_answer("event-stream-closed", timeout, after=0.001))
        with connect(server, LATEST) as client:
            join = _os_thread(hog)
            try:
                got = []
                ends = time.monotonic() + 30.0
                for _ in range(trials):
                    if time.monotonic() > ends:
                        break
                    err, _ = fails(client, timeout=timeout)
                    got.append((err.code, err.message))
            finally:
                stop[0] = True
                assert join(5.0)
            assert len(got) == trials
            assert set(got) == {(-32001, "Request timed out")}, got


# -- item 8: no credential in an error or a log line ---------------------------------------

TOKEN = "tok-Zq8/v+Wm3=Lx_aYp.42~fault"
API_KEY = "key-5d1e8b0c7a9f"
COOKIE_VALUE = "cookie-4b8a2e6f1c3d"


class Provider:
    """A token provider with one token."""

    def token(self, url: str) -> str | None:
        return TOKEN

    def refresh(self, challenge: Any, *, url: str, status: int, token: str | None) -> str | None:
        return TOKEN


def echo_headers(status: int, shape: str) -> Any:
    """A debug page that echoes every request header: HTML, or a JSON-RPC error whose message
    and data carry them (URL-encoded and JSON-escaped too)."""

    def handler(request: Request, ex: Exchange) -> None:
        lines = [f"{name}: {value}" for name, value in request.headers]
        if shape == "html":
            page = "<html><body><h1>Debug</h1><pre>" + "\n".join(lines) + "</pre></body></html>"
            ex.respond(status, page, [("Content-Type", "text/html")])
            return
        from urllib.parse import quote

        text = "; ".join(lines)
        data = {"headers": dict(request.headers), "encoded": quote(text, safe="")}
        body = {"jsonrpc": "2.0", "id": rid(request), "error": {"code": -32603, "message": text}}
        body["error"]["data"] = data
        ex.respond(status, json.dumps(body).replace("/", "\\/"), JSON_HEADERS)

    return handler


def secrets_in(text: str, session: str | None = None) -> list[str]:
    found = [s for s in (TOKEN, API_KEY, COOKIE_VALUE) if s in text]
    from urllib.parse import quote

    found += [s for s in (TOKEN,) if quote(s, safe="") in text]
    if session is not None and session in text:
        found.append(session)
    return found


@pytest.mark.parametrize("version", ERAS)
@pytest.mark.parametrize("status", [400, 500])
@pytest.mark.parametrize("shape", ["html", "json-rpc"])
def test_an_echoed_credential_never_reaches_the_error_or_the_logs(
    version: str, status: int, shape: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A server whose error page echoes the request's headers: the McpError's str, repr,
    message, data and cause hold none of the credentials sent (the provider's token, an API
    key, a cookie, the session id), and neither does any log line at DEBUG."""
    headers = {"X-Api-Key": API_KEY, "Cookie": f"sid={COOKIE_VALUE}; theme=dark"}
    with fault_server(McpResponder(session_id=SESSION)) as server:
        server.once("tools/call", echo_headers(status, shape))
        with caplog.at_level(logging.DEBUG):
            with connect(server, version, headers=headers, token_provider=Provider()) as client:
                err, _ = fails(client)
                still_works(client, server)
        call = server.received("tools/call")[0]
        assert call.header("Authorization") == f"Bearer {TOKEN}"  # it was sent
        assert err.code in (-32000, -32603)
        session = SESSION if version != LATEST else None
        for text in (str(err), repr(err), err.message, repr(err.data), repr(err.cause)):
            assert secrets_in(text, session) == [], text
        assert "[redacted]" in repr(err)
        logged = "\n".join(r.getMessage() for r in caplog.records)
        assert secrets_in(logged, session) == []


def test_an_echoed_credential_in_a_header_line_the_client_refuses_is_redacted() -> None:
    """A broken response head that echoes the token (which the HTTP parser quotes in its
    error) leaves no token in the error."""

    def broken(request: Request, ex: Exchange) -> None:
        ex.send(f"HTTP/1.1 500 Oops\r\nEcho {request.header('Authorization')}\r\n\r\n")
        ex.close()

    with fault_server() as server:
        server.once("tools/call", broken)
        with connect(server, LATEST, token_provider=Provider()) as client:
            err, _ = fails(client)
            assert err.code == -32000
            assert secrets_in(repr(err)) == []
            still_works(client, server)


# -- item 10: an invalid response fails its call at once -----------------------------------

BROKEN = {
    "both": lambda i: {"jsonrpc": "2.0", "id": i, "result": {"content": []}, "error": {}},
    "result-not-an-object": lambda i: {"jsonrpc": "2.0", "id": i, "result": [1, 2]},
    "neither": lambda i: {"jsonrpc": "2.0", "id": i},
}


@pytest.mark.parametrize("shape", sorted(BROKEN))
@pytest.mark.parametrize("answer", ["json", "event-stream"])
@pytest.mark.parametrize("version", ERAS)
def test_an_invalid_response_fails_its_call_at_once(shape: str, answer: str, version: str) -> None:
    """A response to our request that classify refuses (both "result" and "error", a result
    that is not an object, neither) is -32000 "The server sent an invalid response" at once,
    not a wait for the timeout; the next call on the same client works."""

    def invalid(request: Request, ex: Exchange) -> None:
        message = BROKEN[shape](rid(request))
        if answer == "json":
            ex.json(message)
            return
        ex.start_chunked()
        ex.chunk(event(progress(rid(request), 1)))
        ex.chunk(event(message))
        ex.wait_client_gone(10.0)  # the stream stays open: only the event can end the call
        ex.close()

    with fault_server(McpResponder(session_id=SESSION)) as server:
        server.once("tools/call", invalid)
        with connect(server, version) as client:
            err, took = fails(client, timeout=10.0)
            assert err.code == -32000 and err.kind == "transport"
            assert err.message.startswith("The server sent an invalid response: "), err.message
            assert took < 2.0
            still_works(client, server)


def test_a_valid_response_to_another_id_on_a_stream_is_still_ignored() -> None:
    """Only our request's id fails the call: an invalid message for another id is skipped."""

    def other(request: Request, ex: Exchange) -> None:
        ex.start_chunked()
        ex.chunk(event(BROKEN["both"](987654)))
        ex.chunk(event(result(rid(request), {"content": [{"type": "text", "text": "mine"}]})))
        ex.end_chunks()

    with fault_server() as server:
        server.once("tools/call", other)
        with connect(server, LATEST) as client:
            got = client.call_tool("echo", {"text": "x"})
            assert isinstance(got, dict) and got["content"][0]["text"] == "mine"


# -- NoResponse: a request written whole that got no answer --------------------------------


def test_a_request_that_got_no_answer_on_a_fresh_connection_has_an_unknown_outcome() -> None:
    """The server reads the POST and closes without a byte on a fresh connection: -32000 saying
    the request may have been processed (data outcome unknown), and it was sent once."""
    with fault_server() as server:

        def closing(request: Request, ex: Exchange) -> None:
            ex.close()  # Connection: close, so the next request opens a fresh connection
            server.responder(request, ex)

        def vanish(request: Request, ex: Exchange) -> None:
            ex.close()

        server.once("tools/call", vanish)
        server.always(lambda r: r.rpc != "tools/call", closing)
        with connect(server, LATEST) as client:
            err, took = fails(client, timeout=10.0)
            assert err.code == -32000 and err.kind == "transport"
            assert err.data == {"outcome": "unknown"}
            assert "may have been processed" in err.message
            assert took < 3.0
            assert len(server.received("tools/call")) == 1


def test_a_token_endpoint_that_echoes_the_request_leaves_no_secret_in_the_error() -> None:
    """An authorization server whose refusal echoes the refresh token and the client secret in
    its OAuth error code: the authorization error carries neither."""
    from snodo.oauth.authorization_http import OAuthHttp, basic_credentials
    from snodo.oauth.endpoints import post_token

    refresh, secret = "refresh-9c2b7e1d4a6f", "client-secret-3e8d1f0a"
    form = {"grant_type": "refresh_token", "refresh_token": refresh, "client_secret": secret}
    headers = {"Authorization": basic_credentials("client-1", secret)}

    def echo(request: Request, ex: Exchange) -> None:
        body = request.body.decode() + " " + (request.header("Authorization") or "")
        ex.json({"error": body, "error_description": body}, status=400)

    with fault_server() as server:
        server.always(lambda r: True, echo)
        http = OAuthHttp(timeout=5.0)
        try:
            with pytest.raises(snodo.McpError) as caught:
                post_token(http, server.url, form, headers, "token request")
        finally:
            http.close()
    err = caught.value
    assert err.kind == "authorization" and "HTTP 400" in err.message
    for text in (str(err), repr(err), repr(err.cause)):
        assert refresh not in text and secret not in text, text
        assert headers["Authorization"].split()[1] not in text
    assert "[redacted]" in repr(err.cause)
