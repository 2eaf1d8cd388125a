"""README "Every call takes ``timeout=``, ``meta=`` and ``trace_context=``" for the listing
calls, ``discover`` and ``ping`` too (issue 18 item 4), on the sync and async clients, over
direct, stdio and HTTP; a call with extra ``_meta`` is sent, never served from the response
cache nor stored in it (docs/decisions/0019)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import snodo
import snodo.aio
from examples.example_runtime import build
from snodo.server.http_server import serve_http
from tests.support import stdio_support as support
from tests.support.client_support import Wire

LATEST = "2026-07-28"
SESSION = "2025-11-25"
PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

#: Autouse fixtures: process-wide parts started first; no child or fd left behind.
stdio_warm_up = support.stdio_warm_up
stdio_no_leaks = support.stdio_no_leaks

#: (method on the wire, how the client calls it with the three keywords).
CALLS: list[tuple[str, Callable[..., Any]]] = [
    ("tools/list", lambda c, **k: c.list_tools(**k)),
    ("resources/list", lambda c, **k: c.list_resources(**k)),
    ("resources/templates/list", lambda c, **k: c.list_resource_templates(**k)),
    ("prompts/list", lambda c, **k: c.list_prompts(**k)),
    ("tools/list", lambda c, **k: c.list_page("tools", None, **k)),
    ("server/discover", lambda c, **k: c.discover(**k)),
    ("ping", lambda c, **k: c.ping(**k)),
]


def applies(method: str, version: str) -> bool:
    """discover is 2026-07-28 only; ping is the session era's."""
    if method == "server/discover":
        return version == LATEST
    if method == "ping":
        return version != LATEST
    return True


def keywords(tag: str) -> dict[str, Any]:
    return {
        "timeout": 7.5,
        "meta": {"example.com/tag": tag},
        "trace_context": {"traceparent": PARENT},
    }


def check_meta(sent: list[dict[str, Any]], method: str, tag: str) -> None:
    """The last ``method`` sent carries the caller's ``_meta`` entry and its trace context."""
    requests = [m for m in sent if m.get("method") == method]
    assert requests, f"no {method} was sent"
    meta = requests[-1]["params"]["_meta"]
    assert meta["example.com/tag"] == tag
    assert meta["traceparent"] == PARENT


@pytest.fixture
def http_url() -> Iterator[str]:
    server = serve_http(build())
    try:
        yield server.url
    finally:
        server.close()


@pytest.mark.parametrize("version", [LATEST, SESSION])
def test_every_call_takes_the_three_keywords_over_direct(version: str, wire: Wire) -> None:
    """Each listing call, discover and ping accept timeout=, meta= and trace_context=, and the
    request carries the extra ``_meta`` and the trace context."""
    with snodo.direct(build(), protocol=version) as client:
        for i, (method, call) in enumerate(CALLS):
            if applies(method, version):
                call(client, **keywords(f"d{i}"))
                check_meta(wire.sent, method, f"d{i}")


@pytest.mark.parametrize("version", [LATEST, SESSION])
def test_every_call_takes_the_three_keywords_over_stdio(tmp_path: Path, version: str) -> None:
    """Over stdio the server reads the extra ``_meta`` (its stdin is teed to a log)."""
    log = tmp_path / "stdin.jsonl"
    target = support.snodo_server(log=log)
    with snodo.connect(target, cwd=str(support.ROOT), protocol=version, timeout=10.0) as client:
        for i, (method, call) in enumerate(CALLS):
            if applies(method, version):
                call(client, **keywords(f"s{i}"))
                check_meta(support.read_messages(log), method, f"s{i}")


@pytest.mark.parametrize("version", [LATEST, SESSION])
def test_every_call_takes_the_three_keywords_over_http(http_url: str, version: str) -> None:
    """Over HTTP: the same keywords are accepted and the calls are answered."""
    with snodo.connect(snodo.Http(http_url), protocol=version, timeout=10.0) as client:
        for i, (method, call) in enumerate(CALLS):
            if applies(method, version):
                assert call(client, **keywords(f"h{i}")) is not None


@pytest.mark.parametrize("version", [LATEST, SESSION])
def test_the_async_client_takes_the_three_keywords(version: str, wire: Wire) -> None:
    """snodo.aio repeats the sync signatures: the same keywords, the same ``_meta``."""

    async def main() -> None:
        client = await snodo.aio.direct(build(), protocol=version)
        try:
            for i, (method, call) in enumerate(CALLS):
                if applies(method, version):
                    await call(client, **keywords(f"a{i}"))
                    check_meta(wire.sent, method, f"a{i}")
        finally:
            await client.aclose()

    asyncio.run(main())


def test_a_cached_list_with_meta_is_sent_and_not_stored(wire: Wire) -> None:
    """Cache: a list with meta= is never served from the cache, and its result is not stored
    (the plain call after it is sent); a plain list is stored and served as before."""
    with snodo.direct(build(), protocol=LATEST, cache=True) as client:
        tagged = keywords("c")
        client.list_tools(**tagged)
        assert len(wire.requests("tools/list")) == 1
        client.list_tools()  # the tagged result was not stored
        assert len(wire.requests("tools/list")) == 2
        client.list_tools()  # the plain one was
        assert len(wire.requests("tools/list")) == 2
        client.list_tools(meta={"example.com/tag": "c"})  # never answered from the cache
        client.list_page("tools", meta={"example.com/tag": "c"})
        assert len(wire.requests("tools/list")) == 4
        client.discover()
        client.discover(meta={"example.com/tag": "c"})
        client.discover()
        assert len(wire.requests("server/discover")) == 2
