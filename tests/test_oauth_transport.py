"""The HTTP transport's DPoP hooks (RFC 9449), on the exact wire of the fault server.

Rules: a provider with ``request_headers(method, url, token)`` sets each attempt's
authorization headers in place of ``Bearer`` (a fresh proof per attempt); every ``DPoP-Nonce``
response header reaches ``dpop_nonce(url, nonce)``; a 401 ``use_dpop_nonce`` is answered with the
same token and one more attempt, never more (the request then fails as unauthorized).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

import snodo
from snodo.auth import Challenge
from tests.support.http_fault_server import LATEST, Exchange, FaultServer, Request, fault_server

NONCE_401 = 'DPoP error="use_dpop_nonce", error_description="nonce required"'


class DpopProvider:
    """A scripted DPoP provider: proofs are numbered, nonces and refreshes recorded."""

    def __init__(self) -> None:
        self.proofs = 0
        self.nonces: list[tuple[str, str]] = []
        self.refreshes: list[tuple[str | None, int]] = []
        self.lock = threading.Lock()

    def token(self, url: str) -> str | None:
        return "bound-token"

    def refresh(
        self, challenge: Challenge | None, *, url: str, status: int, token: str | None
    ) -> str | None:
        with self.lock:
            self.refreshes.append((challenge.error if challenge else None, status))
        return token

    def request_headers(self, method: str, url: str, token: str) -> dict[str, str]:
        with self.lock:
            self.proofs += 1
            nonce = self.nonces[-1][1] if self.nonces else "none"
            return {"Authorization": f"DPoP {token}", "DPoP": f"proof-{self.proofs}-{nonce}"}

    def dpop_nonce(self, url: str, nonce: str) -> None:
        with self.lock:
            self.nonces.append((url, nonce))


def nonce_challenge(nonce: str) -> Any:
    def handler(request: Request, ex: Exchange) -> None:
        ex.respond(
            401,
            b"",
            [
                ("Content-Type", "text/plain"),
                ("WWW-Authenticate", NONCE_401),
                ("DPoP-Nonce", nonce),
            ],
        )

    return handler


@pytest.fixture
def fake() -> Iterator[FaultServer]:
    with fault_server() as s:
        yield s


def test_dpop_headers_and_one_nonce_retry(fake: FaultServer) -> None:
    fake.once("tools/call", nonce_challenge("n1"))
    provider = DpopProvider()
    with snodo.connect(
        snodo.Http(fake.url), token_provider=provider, protocol=LATEST, timeout=10.0
    ) as client:
        client.call_tool("echo", {"text": "x"})
    calls = fake.received(lambda r: r.rpc == "tools/call")
    assert [c.header("Authorization") for c in calls] == ["DPoP bound-token"] * 2
    assert [c.header("DPoP") for c in calls] == ["proof-1-none", "proof-2-n1"]
    assert all(c.header_values("DPoP") == [c.header("DPoP")] for c in calls)  # one proof each
    assert provider.nonces == [(fake.url, "n1")]
    assert provider.refreshes == [("use_dpop_nonce", 401)]


def test_a_server_that_keeps_asking_for_nonces_is_refused_after_bounded_attempts(
    fake: FaultServer,
) -> None:
    fake.always("tools/call", nonce_challenge("again"))
    provider = DpopProvider()
    with (
        snodo.connect(
            snodo.Http(fake.url), token_provider=provider, protocol=LATEST, timeout=10.0
        ) as client,
        pytest.raises(snodo.McpError) as caught,
    ):
        client.call_tool("echo", {"text": "x"})
    assert caught.value.cause[0] == "unauthorized"
    assert len(fake.received(lambda r: r.rpc == "tools/call")) == 3  # first, refreshed, nonce
    assert "bound-token" not in str(caught.value)
