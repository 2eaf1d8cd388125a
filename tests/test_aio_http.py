"""The asyncio Streamable HTTP requester (``snodo.aio.streamable_http.AsyncHttp``, issue 15):
requests of a connected sync ``HttpTransport`` sent from the event loop, against snodo's own
HTTP server (behind a recording proxy), the raw-socket fault server and a TLS endpoint.

Rules: the same answers and the same errors as the sync transport for the same server
behaviour, on both eras; progress and server requests through ``AsyncCallbacks`` (coroutine
or plain callables); a timeout is -32001 and the server sees the cancellation; cancelling the
awaiting task closes the request's stream (session era: ``notifications/cancelled`` too) and
the connection keeps serving; 200 concurrent requests run with no thread per request; on the
default loop and on uvloop.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from snodo.aio.seam import AsyncCallbacks
from snodo.aio.streamable_http import MAX_IDLE
from snodo.auth import Challenge
from snodo.protocol.errors import McpError
from tests.support.aio_http_support import (
    LOOPS,
    Wrapped,
    call,
    run,
    tls_echo,
    wrap,
)
from tests.support.http_fault_server import LATEST, Exchange, Request, fault_server
from tests.test_oauth_transport import DpopProvider
from tests.test_oauth_transport import nonce_challenge as dpop_nonce_challenge
from tests.test_transport_http import served
from tests.test_transport_http_tls import certs  # noqa: F401 - the fixture

ERAS = [LATEST, "2025-11-25"]
ECHO_SERVER = Path(__file__).resolve().parent.parent / "benchmarks" / "_http_echo_server.py"
SESSION_ERA = "2025-11-25"


@pytest.fixture(params=LOOPS)
def loop(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def text_of(answer: dict[str, Any]) -> str:
    return str(answer["result"]["content"][0]["text"])


def same_error(got: McpError, expected: McpError) -> None:
    """The async error is the sync transport's: code, message, data, kind and cause."""
    assert (got.code, got.message, got.data, got.kind, got.cause) == (
        expected.code,
        expected.message,
        expected.data,
        expected.kind,
        expected.cause,
    )


def sync_error(w: Wrapped, tool: str, arguments: dict[str, Any], **options: Any) -> McpError:
    """The sync transport's error for the same request."""
    with pytest.raises(McpError) as caught:
        w.transport.request(call(w.client, tool, arguments), w.options(**options))
    return caught.value


# -- answers ------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ERAS)
def test_json_answers_reuse_one_connection(loop: str, version: str) -> None:
    """A JSON answer is read whole and its connection kept for the next request."""
    with served() as own, wrap(own.url, version) as w:

        async def main() -> None:
            first = await w.call("echo", {"text": "one"})
            assert text_of(first) == "one"
            assert w.requester.idle_count() == 1
            second = await w.call("echo", {"text": "two"})
            assert text_of(second) == "two"
            assert w.requester.idle_count() == 1
            await w.requester.aclose()
            assert w.requester.idle_count() == 0

        run(loop, main())
        assert own.proxy.rpc_methods().count("tools/call") == 2


@pytest.mark.parametrize("version", ERAS)
@pytest.mark.parametrize("kind", ["coroutine", "plain"])
def test_progress_from_an_event_stream(loop: str, version: str, kind: str) -> None:
    """Progress arrives on the request's event stream, to a coroutine or a plain callback."""
    seen: list[dict[str, Any]] = []

    async def on_progress_async(params: dict[str, Any]) -> None:
        await asyncio.sleep(0)
        seen.append(params)

    def on_progress(params: dict[str, Any]) -> None:
        seen.append(params)

    callbacks = AsyncCallbacks(progress=on_progress_async if kind == "coroutine" else on_progress)
    with served() as own, wrap(own.url, version) as w:
        message = call(w.client, "count", {"n": 3}, progress=True)

        async def main() -> dict[str, Any]:
            try:
                return await w.requester.request(message, w.options(), callbacks)
            finally:
                await w.requester.aclose()

        answer = run(loop, main())
    assert answer["result"]["structuredContent"] == {"counted": 3}
    assert [p["progress"] for p in seen] == [1, 2, 3]
    assert {p["progressToken"] for p in seen} == {message["id"]}


def test_a_server_request_is_answered_by_an_async_callback(loop: str) -> None:
    """Session era: an elicitation on the request's stream is answered by the awaited async
    callback and POSTed back before the call returns."""
    asked: list[tuple[str, dict[str, Any]]] = []

    async def answer(method: str, params: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0)
        asked.append((method, params))
        return {"action": "accept", "content": {"approved": True}}

    handlers = {"form": lambda params: {"action": "decline"}}
    with served() as own, wrap(own.url, SESSION_ERA, input_handlers=handlers) as w:

        async def main() -> dict[str, Any]:
            try:
                return await w.call("deploy", {}, AsyncCallbacks(server_request=answer))
            finally:
                await w.requester.aclose()

        got = run(loop, main())
        answers = own.proxy.received(lambda r: r.kind == "response")
    assert got["result"]["structuredContent"] == {"action": "accept", "given": {"approved": True}}
    assert [method for method, _ in asked] == ["elicitation/create"]
    assert len(answers) == 1
    assert answers[0].header("mcp-session-id") == w.transport.session_id


def test_a_server_request_refused_with_mcp_error(loop: str) -> None:
    """An McpError from the callback is the error answer the server gets."""

    async def refuse(method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise McpError(-32042, "not today")

    handlers = {"form": lambda params: {"action": "decline"}}
    with served() as own, wrap(own.url, SESSION_ERA, input_handlers=handlers) as w:

        async def main() -> dict[str, Any]:
            try:
                return await w.call("deploy", {}, AsyncCallbacks(server_request=refuse))
            finally:
                await w.requester.aclose()

        run(loop, main())
        answers = own.proxy.received(lambda r: r.kind == "response")
    assert answers[0].message["error"]["code"] == -32042


def test_a_broken_session_era_stream_is_resumed_with_last_event_id(loop: str) -> None:
    """A POST's stream that gives a priming event with an id and a retry, then closes, is
    resumed with a GET carrying Last-Event-ID after the delay; the answer comes from there."""
    with served(sse_retry_ms=50) as own, wrap(own.url, SESSION_ERA) as w:

        async def main() -> dict[str, Any]:
            try:
                return await w.call("echo", {"text": "resumed"})
            finally:
                await w.requester.aclose()

        answer = run(loop, main())
        gets = own.proxy.received(lambda r: r.method == "GET" and r.header("last-event-id"))
    assert text_of(answer) == "resumed"
    assert gets, "no GET carried Last-Event-ID"
    assert gets[-1].header("mcp-session-id") == w.transport.session_id


def test_a_server_request_without_a_callback_gets_the_sync_answer(loop: str) -> None:
    """No server_request callback: the answer the sync transport sends without a handler."""
    handlers = {"form": lambda params: {"action": "decline"}}
    with served() as own, wrap(own.url, SESSION_ERA, input_handlers=handlers) as w:

        async def main() -> dict[str, Any]:
            try:
                return await w.call("deploy", {})
            finally:
                await w.requester.aclose()

        run(loop, main())
        w.transport.request(call(w.client, "deploy", {}), w.options())
        answers = own.proxy.received(lambda r: r.kind == "response")
    assert len(answers) == 2
    got, expected = (a.message for a in answers)
    assert got["error"] == expected["error"]
    assert got["error"]["code"] == -32601


# -- timeouts and cancellation -------------------------------------------------------------------


@pytest.mark.parametrize("version", ERAS)
def test_a_timeout_is_the_sync_error_and_the_server_sees_it(loop: str, version: str) -> None:
    """-32001 as the sync transport gives it; the server's handler is cancelled (session era:
    notifications/cancelled; 2026-07-28: the closed stream); the next request works."""
    with served() as own, wrap(own.url, version) as w:

        async def main() -> McpError:
            try:
                with pytest.raises(McpError) as caught:
                    await w.call("forever", {}, progress=True, timeout=0.5)
                assert text_of(await w.call("echo", {"text": "after"})) == "after"
                return caught.value
            finally:
                await w.requester.aclose()

        started = time.monotonic()
        error = run(loop, main())
        assert time.monotonic() - started < 5.0
        assert own.observed.cancelled.wait(10.0)
        own.observed.cancelled.clear()
        expected = sync_error(w, "forever", {}, timeout=0.5)
        same_error(error, expected)
        assert error.code == -32001
        cancels = own.proxy.rpc_methods().count("notifications/cancelled")
        assert cancels == (2 if version == SESSION_ERA else 0)


@pytest.mark.parametrize("version", ERAS)
def test_cancelling_the_task_cancels_the_request(loop: str, version: str) -> None:
    """The task's CancelledError closes the request's stream at once (session era: a
    notifications/cancelled in the background); a request alongside and the next one work."""
    with served() as own, wrap(own.url, version) as w:

        async def main() -> None:
            first = asyncio.Event()

            def on_progress(params: dict[str, Any]) -> None:
                first.set()

            task = asyncio.ensure_future(
                w.call("forever", {}, AsyncCallbacks(progress=on_progress), progress=True)
            )
            alongside = asyncio.ensure_future(w.call("count", {"n": 2}, progress=True))
            await asyncio.wait_for(first.wait(), 10.0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert (await alongside)["result"]["structuredContent"] == {"counted": 2}
            assert text_of(await w.call("echo", {"text": "next"})) == "next"
            for _ in range(200):  # the background notifications/cancelled, within a bound
                if "notifications/cancelled" in own.proxy.rpc_methods():
                    break
                await asyncio.sleep(0.02)
            await w.requester.aclose()

        run(loop, main())
        assert own.observed.cancelled.wait(10.0)
        cancels = own.proxy.rpc_methods().count("notifications/cancelled")
        assert cancels == (1 if version == SESSION_ERA else 0)


def test_aclose_fails_requests_in_flight(loop: str) -> None:
    """aclose() fails a request in flight at once with -32000 (as the sync close), closes
    every connection, and is idempotent; a request after it is refused."""
    with served() as own, wrap(own.url, LATEST) as w:

        async def main() -> None:
            first = asyncio.Event()
            task = asyncio.ensure_future(
                w.call("forever", {}, AsyncCallbacks(progress=lambda p: first.set()), progress=True)
            )
            await asyncio.wait_for(first.wait(), 10.0)
            started = time.monotonic()
            await w.requester.aclose()
            with pytest.raises(McpError) as caught:
                await task
            assert time.monotonic() - started < 2.0
            assert (caught.value.code, caught.value.cause) == (-32000, ("closed",))
            await w.requester.aclose()
            with pytest.raises(McpError) as refused:
                await w.call("echo", {"text": "x"})
            assert refused.value.code == -32000
            assert w.requester.idle_count() == 0

        run(loop, main())
        assert own.observed.cancelled.wait(10.0)


# -- no thread per request ------------------------------------------------------------------------


@pytest.mark.parametrize("version", ERAS)
def test_200_concurrent_requests_on_our_server(loop: str, version: str) -> None:
    """200 requests in flight at once on snodo's server: every answer right, the idle set
    bounded after."""
    with served(max_concurrency=256) as own, wrap(own.url, version) as w:

        async def main() -> list[dict[str, Any]]:
            try:
                return await asyncio.gather(*(w.call("echo", {"text": str(i)}) for i in range(200)))
            finally:
                assert 1 <= w.requester.idle_count() <= MAX_IDLE
                await w.requester.aclose()

        answers = run(loop, main())
    assert [text_of(a) for a in answers] == [str(i) for i in range(200)]


@pytest.mark.parametrize("version", ERAS)
def test_200_concurrent_requests_use_no_thread_each(loop: str, version: str) -> None:
    """200 requests in flight at once against a server in another process: the client
    process's threads, sampled during them, stay within a few of the count before."""
    server = subprocess.Popen(
        [sys.executable, str(ECHO_SERVER), "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        assert line.startswith("PORT ")
        url = f"http://127.0.0.1:{int(line.split()[1])}/mcp"
        with wrap(url, version) as w:
            peak = 0
            stop = False

            async def sample() -> None:
                nonlocal peak
                while not stop:
                    peak = max(peak, threading.active_count())
                    await asyncio.sleep(0.001)

            async def main() -> list[dict[str, Any]]:
                nonlocal stop
                sampler = asyncio.ensure_future(sample())
                try:
                    return await asyncio.gather(
                        *(w.call("echo", {"text": str(i)}) for i in range(200))
                    )
                finally:
                    stop = True
                    await sampler
                    await w.requester.aclose()

            before = threading.active_count()
            answers = run(loop, main())
            assert [text_of(a) for a in answers] == [str(i) for i in range(200)]
            assert peak <= before + 2, (before, peak)
    finally:
        server.kill()
        server.wait(10.0)


# -- the same errors as the sync transport ---------------------------------------------------------


@pytest.mark.parametrize("version", ERAS)
def test_an_unreachable_server_is_not_sent(loop: str, version: str) -> None:
    """A refused connect: -32000 with outcome not_sent, as the sync transport says it."""
    with served() as own:
        w_cm = wrap(own.url, version)
        w = w_cm.__enter__()
    try:
        # the server and its proxy are gone: the port refuses connections
        expected = sync_error(w, "echo", {"text": "x"})

        async def main() -> McpError:
            try:
                with pytest.raises(McpError) as caught:
                    await w.call("echo", {"text": "x"})
                return caught.value
            finally:
                await w.requester.aclose()

        error = run(loop, main())
    finally:
        w_cm.__exit__(None, None, None)
    same_error(error, expected)
    assert error.data == {"outcome": "not_sent"}


def test_a_404_for_the_session_is_the_sync_error(loop: str) -> None:
    """Session era: a 404 for a request with a session id (the session ended) is the error the
    sync transport gives."""
    with served() as own, wrap(own.url, SESSION_ERA) as w:
        session = w.transport.session_id
        assert session is not None
        w.transport.delete_session()
        expected = sync_error(w, "echo", {"text": "x"})

        async def main() -> McpError:
            try:
                with pytest.raises(McpError) as caught:
                    await w.call("echo", {"text": "x"})
                return caught.value
            finally:
                await w.requester.aclose()

        error = run(loop, main())
    same_error(error, expected)
    assert error.cause is not None and error.cause[:2] == ("http_status", 404)


def test_an_answer_over_max_response_bytes(loop: str) -> None:
    """An answer larger than max_response_bytes: the sync transport's -32000."""
    with served() as own, wrap(own.url, LATEST, max_response_bytes=600) as w:
        expected = sync_error(w, "echo", {"text": "x" * 2000})

        async def main() -> McpError:
            try:
                with pytest.raises(McpError) as caught:
                    await w.call("echo", {"text": "x" * 2000})
                assert text_of(await w.call("echo", {"text": "small"})) == "small"
                return caught.value
            finally:
                await w.requester.aclose()

        error = run(loop, main())
    same_error(error, expected)


# -- TLS and credentials ------------------------------------------------------------------------------


def test_tls_with_the_test_ca(loop: str, certs: Path) -> None:  # noqa: F811
    """https:// with ca_certs: verified against the test CA, as the sync transport is."""
    with tls_echo(certs) as url, wrap(url, LATEST, ca_certs=str(certs / "ca.pem")) as w:

        async def main() -> list[str]:
            try:
                answers = await asyncio.gather(
                    *(w.call("echo", {"text": f"t{i}"}) for i in range(4))
                )
                return [text_of(a) for a in answers]
            finally:
                await w.requester.aclose()

        assert run(loop, main()) == ["t0", "t1", "t2", "t3"]


class Provider:
    """A token provider: ``token`` returns the current one; ``refresh`` switches to the fresh
    token and records the thread it ran in."""

    def __init__(self) -> None:
        self.current = "s3cr3t-t0ken-value"
        self.token_threads: list[int] = []
        self.refresh_threads: list[int] = []
        self.refreshed_with: list[tuple[int, str | None]] = []

    def token(self, url: str) -> str | None:
        self.token_threads.append(threading.get_ident())
        return self.current

    def refresh(
        self, challenge: Challenge | None, *, url: str, status: int, token: str | None
    ) -> str | None:
        self.refresh_threads.append(threading.get_ident())
        self.refreshed_with.append((status, token))
        self.current = "fr3sh-t0ken-value"
        return self.current


def test_a_bearer_token_and_one_refresh_after_a_401(loop: str) -> None:
    """The provider's cached token is read on the loop's thread; a 401 refreshes once in a
    worker thread and the request goes once more with the fresh token."""
    provider = Provider()

    def unauthorized(request: Request, ex: Exchange) -> None:
        challenge = 'Bearer error="invalid_token", scope="a"'
        ex.respond(401, b"", [("Content-Type", "text/plain"), ("WWW-Authenticate", challenge)])

    with fault_server() as fake, wrap(fake.url, LATEST, token_provider=provider) as w:
        fake.once("tools/call", unauthorized)
        loop_thread: list[int] = []

        async def main() -> dict[str, Any]:
            loop_thread.append(threading.get_ident())
            try:
                return await w.call("echo", {"text": "authorized"})
            finally:
                await w.requester.aclose()

        answer = run(loop, main())
        calls = fake.received(lambda r: r.rpc == "tools/call")
    assert text_of(answer) == "authorized"
    assert [r.header("authorization") for r in calls] == [
        "Bearer s3cr3t-t0ken-value",
        "Bearer fr3sh-t0ken-value",
    ]
    assert provider.refreshed_with == [(401, "s3cr3t-t0ken-value")]
    assert provider.token_threads[-1] == loop_thread[0]
    assert provider.refresh_threads[0] != loop_thread[0]


def test_a_second_401_is_the_sync_error(loop: str) -> None:
    """A 401 after the refresh: -32000 unauthorized as the sync transport raises it, with no
    token in it."""
    provider = Provider()

    def unauthorized(request: Request, ex: Exchange) -> None:
        ex.respond(401, b"", [("WWW-Authenticate", 'Bearer error="invalid_token"')])

    with fault_server() as fake, wrap(fake.url, LATEST, token_provider=provider) as w:
        fake.always("tools/call", unauthorized)
        expected = sync_error(w, "echo", {"text": "x"})

        async def main() -> McpError:
            try:
                with pytest.raises(McpError) as caught:
                    await w.call("echo", {"text": "x"})
                return caught.value
            finally:
                await w.requester.aclose()

        error = run(loop, main())
    same_error(error, expected)
    assert "s3cr3t" not in repr(error) and "fr3sh" not in repr(error)


def test_requests_after_an_earlier_loop(loop: str) -> None:
    """A requester used from one loop and then another drops the first loop's connections."""
    with served() as own, wrap(own.url, LATEST) as w:
        assert text_of(run(loop, w.call("echo", {"text": "a"}))) == "a"
        assert text_of(run(loop, w.call("echo", {"text": "b"}))) == "b"
        run(loop, w.requester.aclose())


def test_dpop_proofs_and_one_nonce_retry(loop: str) -> None:
    """A DPoP-bound token: a fresh proof per attempt, the server's nonce noted, one more
    attempt after a use_dpop_nonce 401 (as the sync transport does)."""
    provider = DpopProvider()
    with fault_server() as fake, wrap(fake.url, LATEST, token_provider=provider) as w:
        fake.once("tools/call", dpop_nonce_challenge("n1"))
        proofs_before = provider.proofs

        async def main() -> dict[str, Any]:
            try:
                return await w.call("echo", {"text": "bound"})
            finally:
                await w.requester.aclose()

        answer = run(loop, main())
        calls = fake.received(lambda r: r.rpc == "tools/call")
    assert text_of(answer) == "bound"
    assert [c.header("Authorization") for c in calls] == ["DPoP bound-token"] * 2
    assert [c.header("DPoP") for c in calls] == [
        f"proof-{proofs_before + 1}-none",
        f"proof-{proofs_before + 2}-n1",
    ]
    assert provider.nonces == [(fake.url, "n1")]
    assert provider.refreshes == [("use_dpop_nonce", 401)]


def test_aclose_while_a_server_request_is_answered(loop: str) -> None:
    """aclose() while the callback answers a server request: the request fails with -32000
    and the answer is never POSTed."""
    handlers = {"form": lambda params: {"action": "decline"}}
    with served() as own, wrap(own.url, SESSION_ERA, input_handlers=handlers) as w:

        async def main() -> McpError:
            entered = asyncio.Event()
            release = asyncio.Event()

            async def answer(method: str, params: dict[str, Any]) -> dict[str, Any]:
                entered.set()
                await release.wait()
                return {"action": "accept", "content": {"approved": True}}

            task = asyncio.ensure_future(
                w.call("deploy", {}, AsyncCallbacks(server_request=answer))
            )
            await asyncio.wait_for(entered.wait(), 10.0)
            await w.requester.aclose()
            release.set()
            with pytest.raises(McpError) as caught:
                await asyncio.wait_for(task, 10.0)
            return caught.value

        error = run(loop, main())
        answers = own.proxy.received(lambda r: r.kind == "response")
    assert (error.code, error.cause) == (-32000, ("closed",))
    assert answers == []


class Renewing(Provider):
    """A provider that holds no token it can give at once: ``token`` must be fetched."""

    def __init__(self) -> None:
        super().__init__()
        self.cached_asks = 0

    def cached_token(self, url: str) -> tuple[bool, str | None]:
        self.cached_asks += 1
        return False, None


def test_a_token_the_provider_must_fetch_is_got_off_the_loop(loop: str) -> None:
    """``CachingTokenProvider.cached_token`` says the token needs I/O: ``token`` runs on a
    worker thread, never on the event loop's."""
    provider = Renewing()
    with fault_server() as fake, wrap(fake.url, LATEST, token_provider=provider) as w:
        loop_thread: list[int] = []

        async def main() -> dict[str, Any]:
            loop_thread.append(threading.get_ident())
            try:
                return await w.call("echo", {"text": "fetched"})
            finally:
                await w.requester.aclose()

        answer = run(loop, main())
        calls = fake.received(lambda r: r.rpc == "tools/call")
    assert text_of(answer) == "fetched"
    assert [r.header("authorization") for r in calls] == ["Bearer s3cr3t-t0ken-value"]
    assert provider.cached_asks >= 1
    assert loop_thread[0] not in provider.token_threads[-1:]
