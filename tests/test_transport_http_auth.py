"""Token providers over HTTP, against the raw-socket fault server (tests/support/http_fault_server.py).

Rules: the reference's "Authorization": before each request the transport asks the provider
for a token and sends ``Authorization: Bearer <token>`` when it gets one (``None`` sends none);
on a session-era connection that includes initialize, notifications/initialized, each
answer to a server request and the DELETE that ends the session. After a 401, or a 403 whose
challenge is insufficient_scope, the challenge is parsed into a ``snodo.auth.Challenge``, the
provider refreshes with it and the request is sent once more; a second 401 or 403 is -32000
with cause ("unauthorized", status, challenge); a provider error is returned as it is; no
token appears in an error. The request's timeout covers each HTTP attempt, not the provider
calls. Elixir notes "HTTP transport details • Authorization" (a 403 with another challenge is
an ordinary status error; tokens are checked; ``authorization`` is refused in headers= with a
provider; only the attempt that answered reports its response headers).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import snodo
from snodo.auth import Challenge
from tests.support.http_fault_server import (
    LATEST,
    SESSION_ERA,
    Exchange,
    FaultServer,
    McpResponder,
    Request,
    ask_on_stream,
    check_wire,
    error,
    fault_server,
)

SECRET = "s3cr3t-t0ken-value"
FRESH = "fr3sh-t0ken-value"
METADATA = "https://mcp.example.test/.well-known/oauth-protected-resource/mcp"
BEARER_401 = f'Bearer resource_metadata="{METADATA}", scope="a b", error="invalid_token"'
STEP_UP_403 = 'Bearer error="insufficient_scope", scope="a b admin", error_description="more"'


class Provider:
    """A scripted TokenProvider: ``token`` returns the current token; ``refresh`` records its
    arguments and switches to the next token. Optional pauses simulate a slow flow."""

    def __init__(
        self,
        token: str | None = SECRET,
        refreshed: str | None = FRESH,
        *,
        token_pause: float = 0.0,
        refresh_pause: float = 0.0,
    ) -> None:
        self.current = token
        self.refreshed = refreshed
        self.token_pause = token_pause
        self.refresh_pause = refresh_pause
        self.token_calls: list[str] = []
        self.refresh_calls: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def token(self, url: str) -> str | None:
        if self.token_pause:
            threading.Event().wait(self.token_pause)  # a slow authorization flow, not a sync
        with self.lock:
            self.token_calls.append(url)
            return self.current

    def refresh(
        self, challenge: Challenge | None, *, url: str, status: int, token: str | None
    ) -> str | None:
        if self.refresh_pause:
            threading.Event().wait(self.refresh_pause)
        with self.lock:
            self.refresh_calls.append(
                {"challenge": challenge, "url": url, "status": status, "token": token}
            )
            self.current = self.refreshed
            return self.refreshed


@pytest.fixture
def fake() -> Iterator[FaultServer]:
    with fault_server() as s:
        yield s


def http(url: str, provider: Any, **options: Any) -> snodo.Client:
    options.setdefault("timeout", 10.0)
    return snodo.connect(snodo.Http(url), token_provider=provider, **options)


def bearer(request: Request) -> str | None:
    return request.header("Authorization")


def refuse(status: int, challenge: str | None, body: bytes = b"") -> Any:
    """A handler answering ``status`` with ``challenge`` in WWW-Authenticate."""

    def handler(request: Request, ex: Exchange) -> None:
        headers = [] if challenge is None else [("WWW-Authenticate", challenge)]
        ex.respond(status, body, [("Content-Type", "text/plain"), *headers])

    return handler


def accept(params: dict[str, Any]) -> dict[str, Any]:
    return {"action": "accept", "content": {"ok": True}}


# -- the token on every request --------------------------------------------------------------


def test_the_token_goes_on_every_session_era_request() -> None:
    """Before each request the transport asks the provider and sends Authorization: Bearer:
    the probe, initialize, notifications/initialized, calls, the answer to a server request
    and the DELETE that ends the session. The provider is asked with the endpoint's URL,
    once per request."""
    with fault_server(McpResponder(SESSION_ERA, session_id="s-auth")) as fake:
        fake.once("tools/call", ask_on_stream("srv-1"))
        provider = Provider()
        with http(fake.url, provider, input_handlers={"form": accept}) as client:
            assert client.version == "2025-11-25"
            got = client.call_tool("echo", {"text": "x"})
            assert got["structuredContent"]["answer"]["result"] == accept({})
            client.call_tool("echo", {"text": "y"})
        requests = fake.received()
        assert [r.rpc or r.kind for r in requests if r.method != "GET"] == [
            "server/discover",
            "initialize",
            "notifications/initialized",
            "tools/call",
            "response",
            "tools/call",
            "DELETE",
        ]
        for request in requests:
            assert request.header_values("Authorization") == [f"Bearer {SECRET}"], request
        assert provider.token_calls == [fake.url] * len(requests)
        assert provider.refresh_calls == []
        check_wire(requests, "2025-11-25")


def test_the_token_goes_on_every_2026_request(fake: FaultServer) -> None:
    """2026-07-28: the probe and every call carry the provider's token; nothing is sent at
    close."""
    provider = Provider()
    with http(fake.url, provider) as client:
        assert client.version == LATEST
        client.list_tools()
        client.call_tool("echo", {"text": "x"})
    requests = fake.received()
    assert [r.rpc for r in requests] == ["server/discover", "tools/list", "tools/call"]
    assert all(bearer(r) == f"Bearer {SECRET}" for r in requests)
    assert len(provider.token_calls) == 3


def test_a_401_on_the_answer_to_a_server_request_refreshes_and_resends_it() -> None:
    """An answer to a server request is sent like any request: with the provider's token,
    and once more with the refreshed token after a 401."""
    with fault_server(McpResponder(session_id="s-ans")) as fake:
        fake.once("tools/call", ask_on_stream("srv-2", answers=2))
        fake.once(lambda r: r.kind == "response", refuse(401, BEARER_401))
        provider = Provider()
        with http(
            fake.url, provider, protocol="2025-11-25", input_handlers={"form": accept}
        ) as client:
            got = client.call_tool("echo", {"text": "x"})
            assert got["structuredContent"]["answer"]["result"] == accept({})
        refused, resent = fake.received(lambda r: r.kind == "response")
        assert bearer(refused) == f"Bearer {SECRET}"
        assert bearer(resent) == f"Bearer {FRESH}"
        assert resent.body == refused.body
        assert len(provider.refresh_calls) == 1


def test_a_none_token_sends_no_authorization_header(fake: FaultServer) -> None:
    """A provider returning None sends the request without Authorization (how a client learns
    the server's challenge)."""
    provider = Provider(token=None)
    with http(fake.url, provider, protocol=LATEST) as client:
        client.call_tool("echo", {"text": "x"})
    (call,) = fake.received()
    assert "authorization" not in call.header_names()
    assert provider.token_calls == [fake.url]


# -- refresh after a challenge ---------------------------------------------------------------


def test_a_401_refreshes_once_with_the_parsed_challenge_and_resends(fake: FaultServer) -> None:
    """After a 401 the WWW-Authenticate challenge is parsed into a Challenge (resource_metadata,
    scope split on spaces, error), refresh is called once with it, the status and the refused
    token, and the request is sent once more with the new token; later requests use the
    provider's current token."""
    fake.once("tools/call", refuse(401, BEARER_401))
    provider = Provider()
    with http(fake.url, provider, protocol=LATEST) as client:
        got = client.call_tool("echo", {"text": "again"})
        assert got["content"][0]["text"] == "again"
        client.call_tool("echo", {"text": "later"})
    (call,) = provider.refresh_calls
    challenge = call["challenge"]
    assert isinstance(challenge, Challenge)
    assert challenge.scheme == "bearer"
    assert challenge.resource_metadata == METADATA
    assert challenge.scope == ("a", "b")
    assert challenge.error == "invalid_token"
    assert (call["url"], call["status"], call["token"]) == (fake.url, 401, SECRET)
    first, resent, later = fake.received()
    assert bearer(first) == f"Bearer {SECRET}"
    assert bearer(resent) == f"Bearer {FRESH}"
    assert bearer(later) == f"Bearer {FRESH}"
    assert resent.body == first.body
    check_wire(fake.received(), LATEST)


def test_a_401_on_the_probe_refreshes_and_resends_it(fake: FaultServer) -> None:
    """The probe is a request like any other: a 401 on it is refreshed and resent, and the
    negotiation goes on with the server's discovery result."""
    fake.once("server/discover", refuse(401, 'Bearer error="invalid_token"'))
    provider = Provider()
    with http(fake.url, provider) as client:
        assert client.version == LATEST
    assert fake.rpc_methods() == ["server/discover", "server/discover"]
    assert len(provider.refresh_calls) == 1
    assert bearer(fake.received()[1]) == f"Bearer {FRESH}"


def test_a_403_insufficient_scope_refreshes_and_resends(fake: FaultServer) -> None:
    """A 403 whose challenge is insufficient_scope is a step-up: refresh with the challenge
    (its scope and error), then send once more."""
    fake.once("tools/call", refuse(403, STEP_UP_403))
    provider = Provider()
    with http(fake.url, provider, protocol=LATEST) as client:
        assert client.call_tool("echo", {"text": "up"})["content"][0]["text"] == "up"
    (call,) = provider.refresh_calls
    assert call["status"] == 403
    assert call["challenge"].error == "insufficient_scope"
    assert call["challenge"].scope == ("a", "b", "admin")
    assert call["challenge"].error_description == "more"
    assert [bearer(r) for r in fake.received()] == [f"Bearer {SECRET}", f"Bearer {FRESH}"]


@pytest.mark.parametrize(
    "challenge",
    ['Bearer error="invalid_request"', 'Basic realm="x"', None],
    ids=["bearer-other-error", "basic", "no-challenge"],
)
def test_a_403_with_another_challenge_is_an_ordinary_status_error(
    fake: FaultServer, challenge: str | None
) -> None:
    """A 403 whose challenge is not insufficient_scope (or that has none) is returned as an
    ordinary HTTP status error, without a refresh or a second attempt."""
    fake.once("tools/call", refuse(403, challenge, b"Forbidden: origin"))
    provider = Provider()
    with http(fake.url, provider, protocol=LATEST) as client:
        with pytest.raises(snodo.McpError) as caught:
            client.call_tool("echo", {"text": "x"})
        assert caught.value.code == -32000 and caught.value.kind == "transport"
        assert caught.value.cause == ("http_status", 403, b"Forbidden: origin")
        assert provider.refresh_calls == []
        assert len(fake.received("tools/call")) == 1
        assert client.call_tool("echo", {"text": "ok"})["content"][0]["text"] == "ok"


def test_a_403_with_a_json_rpc_error_body_is_the_servers_error(fake: FaultServer) -> None:
    """A 403 for an invalid Origin may carry a JSON-RPC error without id: it is the server's
    error (its code and message), not a refresh."""
    fake.once(
        "tools/call",
        lambda r, ex: ex.json(error(None, -32600, "Forbidden: invalid Origin"), status=403),
    )
    provider = Provider()
    with http(fake.url, provider, protocol=LATEST) as client:
        with pytest.raises(snodo.McpError) as caught:
            client.call_tool("echo", {"text": "x"})
    assert (caught.value.code, caught.value.message) == (-32600, "Forbidden: invalid Origin")
    assert provider.refresh_calls == []


def test_without_a_provider_a_401_is_an_ordinary_status_error(fake: FaultServer) -> None:
    """Without a token provider, 401 and 403 are ordinary status errors (no retry)."""
    fake.once("tools/call", refuse(401, BEARER_401, b"Unauthorized"))
    with snodo.connect(snodo.Http(fake.url), protocol=LATEST, timeout=10.0) as client:
        with pytest.raises(snodo.McpError) as caught:
            client.call_tool("echo", {"text": "x"})
    assert caught.value.code == -32000
    assert caught.value.cause == ("http_status", 401, b"Unauthorized")
    assert len(fake.received()) == 1


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ((401, BEARER_401), (401, 'Bearer error="invalid_token", error_description="still"')),
        ((403, STEP_UP_403), (403, STEP_UP_403)),
        ((401, BEARER_401), (403, STEP_UP_403)),
    ],
    ids=["401-401", "403-403", "401-403"],
)
def test_a_second_refusal_is_unauthorized_and_no_token_appears_anywhere(
    fake: FaultServer,
    caplog: pytest.LogCaptureFixture,
    first: tuple[int, str],
    second: tuple[int, str],
) -> None:
    """A second 401 or 403 returns -32000 with cause ("unauthorized", status, challenge) and
    no third attempt; neither token appears in str(error), repr(error) or any log record."""
    fake.once("tools/call", refuse(*first))
    fake.once("tools/call", refuse(*second))
    provider = Provider()
    with caplog.at_level(logging.DEBUG):
        with http(fake.url, provider, protocol=LATEST) as client:
            with pytest.raises(snodo.McpError) as caught:
                client.call_tool("echo", {"text": "x"})
            err = caught.value
            assert err.code == -32000 and err.kind == "transport"
            kind, status, challenge = err.cause
            assert (kind, status) == ("unauthorized", second[0])
            assert isinstance(challenge, Challenge)
            assert challenge.error == (
                "invalid_token" if second[0] == 401 else "insufficient_scope"
            )
            assert len(fake.received("tools/call")) == 2
            assert len(provider.refresh_calls) == 1
            # the client still works once the provider's token is accepted
            assert client.call_tool("echo", {"text": "ok"})["content"][0]["text"] == "ok"
    texts = [str(err), repr(err), repr(err.cause), repr(err.args)]
    texts += [r.getMessage() for r in caplog.records]
    texts += [repr(r.args) for r in caplog.records]
    for text in texts:
        assert SECRET not in text and FRESH not in text, text


# -- the provider's own failures and pace ---------------------------------------------------


class ProviderFailure(Exception):
    pass


@pytest.mark.parametrize("where", ["token", "refresh", "token-at-connect"])
def test_provider_exceptions_pass_through_unchanged(fake: FaultServer, where: str) -> None:
    """A provider error is returned as it is: the exception the provider raised (the same
    object) reaches the caller, from token() or refresh(), at connect or on a call."""
    failure = ProviderFailure("the user closed the browser")

    class Failing(Provider):
        def token(self, url: str) -> str | None:
            if where.startswith("token") and (where == "token-at-connect" or self.token_calls):
                raise failure
            return super().token(url)

        def refresh(self, challenge: Any, **kw: Any) -> str | None:
            raise failure

    provider = Failing()
    if where == "token-at-connect":
        with pytest.raises(ProviderFailure) as caught:
            http(fake.url, provider)
        assert caught.value is failure
        assert fake.received() == []
        return
    if where == "refresh":
        fake.once("tools/call", refuse(401, BEARER_401))
    with http(fake.url, provider, protocol=LATEST) as client:
        if where == "token":
            client.call_tool("echo", {"text": "first"})
        with pytest.raises(ProviderFailure) as raised:
            client.call_tool("echo", {"text": "x"})
        assert raised.value is failure


def test_the_timeout_covers_each_attempt_not_the_provider(fake: FaultServer) -> None:
    """The request's timeout covers each HTTP attempt, not the provider calls before or
    between them: a provider that takes 1 s for token() and 1 s for refresh() inside a
    request with a 0.5 s timeout still succeeds."""
    fake.once("tools/call", refuse(401, BEARER_401))
    provider = Provider(token_pause=1.0, refresh_pause=1.0)
    with http(fake.url, provider, protocol=LATEST, timeout=0.5) as client:
        started = time.monotonic()
        got = client.call_tool("echo", {"text": "patient"})
        took = time.monotonic() - started
    assert got["content"][0]["text"] == "patient"
    assert took >= 2.0
    assert [bearer(r) for r in fake.received()] == [f"Bearer {SECRET}", f"Bearer {FRESH}"]


def test_an_attempt_past_the_timeout_still_times_out(fake: FaultServer) -> None:
    """... while each attempt is still bounded: after the refresh, a server that does not
    answer the resent request within the timeout gives -32001."""
    fake.once("tools/call", refuse(401, BEARER_401))

    def silent(request: Request, ex: Exchange) -> None:
        ex.wait_client_gone(10.0)
        ex.close()

    fake.once("tools/call", silent)
    provider = Provider(refresh_pause=0.6)
    with http(fake.url, provider, protocol=LATEST, timeout=0.5) as client:
        started = time.monotonic()
        with pytest.raises(snodo.McpError) as caught:
            client.call_tool("echo", {"text": "x"})
        took = time.monotonic() - started
        assert caught.value.code == -32001
        assert 1.0 <= took < 2.5


@pytest.mark.parametrize("token", ["has space", "line\r\nbreak", "nul\x00", "", "tab\tin"])
def test_an_unusable_token_is_refused_before_anything_is_sent(
    fake: FaultServer, token: str
) -> None:
    """Tokens are checked to be non-empty, without spaces, CR, LF or NUL: an unusable one is
    -32000 before anything is sent, and the error does not contain it."""
    provider = Provider(token=token)
    with pytest.raises(snodo.McpError) as caught:
        http(fake.url, provider, protocol=LATEST).call_tool("echo", {})
    assert caught.value.code == -32000 and caught.value.kind == "transport"
    assert fake.received() == []
    if token:
        assert token not in str(caught.value) and token not in repr(caught.value)


def test_authorization_in_headers_is_refused_with_a_provider(fake: FaultServer) -> None:
    """With a token provider the transport owns Authorization: headers= may not set it."""
    with pytest.raises(snodo.McpError) as caught:
        http(fake.url, Provider(), headers={"Authorization": "Bearer other"})
    assert caught.value.code == -32000
    assert fake.received() == []


def test_only_the_attempt_that_answered_gives_the_session_id() -> None:
    """On initialize, the session id comes from the attempt that answered: a 401 carrying an
    Mcp-Session-Id is not the session; the resent initialize's is."""
    with fault_server(McpResponder(session_id="s-real")) as fake:

        def stale(request: Request, ex: Exchange) -> None:
            ex.respond(401, b"", [("WWW-Authenticate", BEARER_401), ("Mcp-Session-Id", "s-stale")])

        fake.once("initialize", stale)
        provider = Provider()
        with http(fake.url, provider, protocol="2025-11-25") as client:
            assert client.transport.session_id == "s-real"  # type: ignore[attr-defined]
            client.call_tool("echo", {"text": "x"})
        later = fake.received()[2:]
        assert all(r.header("Mcp-Session-Id") == "s-real" for r in later)
        assert later[-1].method == "DELETE"
        assert bearer(later[-1]) == f"Bearer {FRESH}"
