"""A stateless-era request refused with -32022 that names the connection's version is sent once
more, with a fresh id ("choose a mutually supported version and retry"); a second refusal, or
one that does not name the version, is raised (``protocol/negotiation.retries_unsupported_version``).

Found by the conformance suite, scenario request-metadata.
"""

from __future__ import annotations

from typing import Any

import pytest

import snodo
from snodo.protocol import negotiation
from snodo.protocol.errors import McpError
from tests.support.http_fault_server import LATEST, Exchange, Request, error, fault_server


def _connect(url: str, **options: Any) -> snodo.Client:
    return snodo.connect(snodo.Http(url), timeout=10.0, **options)


def _unsupported(supported: list[str]) -> McpError:
    return McpError(-32022, "Unsupported protocol version", {"supported": supported})


def test_the_retry_rule_is_pure() -> None:
    """Retry only a stateless, allowed version that the server says it supports.

    Found by the conformance suite, scenario request-metadata.
    """
    allowed = ("2026-07-28", "2025-11-25")
    assert negotiation.retries_unsupported_version(LATEST, allowed, _unsupported([LATEST]))
    assert not negotiation.retries_unsupported_version(
        LATEST, allowed, _unsupported(["2099-01-01"])
    )
    assert not negotiation.retries_unsupported_version(
        LATEST, ("2025-11-25",), _unsupported([LATEST])
    )
    assert not negotiation.retries_unsupported_version(
        "2025-11-25", allowed, _unsupported(["2025-11-25"])
    )
    assert not negotiation.retries_unsupported_version(
        LATEST, allowed, McpError(-32602, "Invalid params", {"supported": [LATEST]})
    )
    assert not negotiation.retries_unsupported_version(
        LATEST, allowed, McpError(-32022, "Unsupported protocol version", None)
    )


def _refuse_version(supported: list[str]) -> Any:
    def handler(request: Request, ex: Exchange) -> None:
        message = request.message
        ex.json(
            error(
                message["id"],
                -32022,
                "Unsupported protocol version",
                {
                    "supported": supported,
                    "requested": LATEST,
                },
            ),
            status=400,
        )

    return handler


def test_a_refusal_naming_our_version_is_retried_once_with_a_fresh_id() -> None:
    """Found by the conformance suite, scenario request-metadata."""
    with fault_server() as server:
        server.once(lambda r: r.rpc == "tools/list", _refuse_version([LATEST]))
        with _connect(server.url, protocol=LATEST) as client:
            assert isinstance(client.list_tools(), list)
        first, second = server.received(lambda r: r.rpc == "tools/list")
        assert first.message["id"] != second.message["id"]
        assert second.header("MCP-Protocol-Version") == LATEST


def test_a_second_refusal_is_raised() -> None:
    """Found by the conformance suite, scenario request-metadata (the retry happens once)."""
    with fault_server() as server:
        server.always(lambda r: r.rpc == "tools/list", _refuse_version([LATEST]))
        with _connect(server.url, protocol=LATEST) as client, pytest.raises(McpError) as caught:
            client.list_tools()
        assert caught.value.code == -32022
        assert len(server.received(lambda r: r.rpc == "tools/list")) == 2


def test_a_refusal_without_our_version_is_raised_at_once() -> None:
    """Found by the conformance suite, scenario request-metadata (no retry to a version the
    server does not name)."""
    with fault_server() as server:
        server.always(lambda r: r.rpc == "tools/list", _refuse_version(["2099-01-01"]))
        with _connect(server.url, protocol=LATEST) as client, pytest.raises(McpError) as caught:
            client.list_tools()
        assert caught.value.code == -32022
        assert len(server.received(lambda r: r.rpc == "tools/list")) == 1
