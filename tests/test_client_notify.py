"""``Client.notify`` and ``Client.roots_changed`` (issue 18 item 5, docs/decisions/0042).

Rules: a notification is checked against the negotiated dialect's catalog as ``request()`` is
(session era: only the version's client notifications, -32601 before anything is sent; 2026-07-28:
an unlisted method, an extension's, is sent); ``notifications/initialized`` and
``notifications/cancelled`` are snodo's own and refused on every version; roots list changes need
the declared ``roots.listChanged`` (-32021) and a version that has them (-32601); a closed
connection is -32000. Over stdio the server's own log (tests/servers/scripted_lib.py ``--log``)
shows what arrived; over HTTP the official Python SDK's server (tests/servers/sdk_http_server.py)
records each POST and the 202 it answered; direct and custom transports record what they hand
the Runtime. asyncio and the actor proxy take the same path.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import snodo
import snodo.aio
from snodo.actors import start_direct
from snodo.protocol import dialects
from snodo.protocol.dialects.base import MANAGED_NOTIFICATIONS
from snodo.protocol.inputs import ROOTS_LIST_CHANGED, roots_changed_refusal
from snodo.protocol.meta import notification_params
from snodo.supervision import stop
from snodo.transports.base import ConnectOptions, RequestOptions
from tests.support import client_runtime
from tests.support import stdio_support as support
from tests.support.client_support import Wire
from tests.support.pipe_transport import PipeTransport
from tests.support.started_processes import announced_port
from tests.support.started_processes import stop as stop_process

#: Autouse fixtures: process-wide parts started first; no child or fd left behind.
stdio_warm_up = support.stdio_warm_up
stdio_no_leaks = support.stdio_no_leaks

ROOT = Path(__file__).resolve().parent.parent
SDK_SERVER = ROOT / "tests" / "servers" / "sdk_http_server.py"
STATELESS = "2026-07-28"
SESSION_ERA = [v for v, d in dialects.DIALECTS.items() if not d.stateless]
LISTED_ROOTS = {"roots": {"listChanged": True}}
EXTENSION = "notifications/x-snodo/hello"
TRACE = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}


def no_roots(params: dict[str, Any]) -> dict[str, Any]:
    return {"roots": []}


def listed_roots_options() -> dict[str, Any]:
    """A client that declared ``roots.listChanged`` next to its roots handler."""
    return {"input_handlers": {"roots": no_roots}, "client_capabilities": LISTED_ROOTS}


# -- the pure rules ------------------------------------------------------------------------


@pytest.mark.parametrize("version", SESSION_ERA)
def test_a_session_era_dialect_allows_only_its_client_notifications(version: str) -> None:
    """Session era: the version's client notifications pass; a request, a server notification
    and an unknown method are -32601 naming the method and the version."""
    dialect = dialects.get(version)
    allowed = dialect.client_notifications - set(MANAGED_NOTIFICATIONS)
    assert ROOTS_LIST_CHANGED in allowed
    for method in allowed:
        dialect.check_client_notification(method)
    for method in ("tools/list", "notifications/message", EXTENSION):
        with pytest.raises(snodo.McpError) as refused:
            dialect.check_client_notification(method)
        assert refused.value.code == -32601
        assert refused.value.data == {"method": method, "protocolVersion": version}


def test_the_stateless_dialect_sends_extension_notifications() -> None:
    """2026-07-28: an unlisted method is an extension's and passes; what the catalog lists as a
    request or a server notification is -32601."""
    dialect = dialects.get(STATELESS)
    dialect.check_client_notification(EXTENSION)
    for method in ("tools/call", "elicitation/create", "notifications/progress"):
        with pytest.raises(snodo.McpError) as refused:
            dialect.check_client_notification(method)
        assert refused.value.code == -32601


@pytest.mark.parametrize("version", list(dialects.DIALECTS))
@pytest.mark.parametrize("method", sorted(MANAGED_NOTIFICATIONS))
def test_the_notifications_snodo_sends_itself_are_refused_on_every_version(
    version: str, method: str
) -> None:
    """notifications/initialized and notifications/cancelled are snodo's own: a ValueError
    that says why, whether or not the version lists them."""
    with pytest.raises(ValueError, match="cannot be sent with notify\\(\\): snodo sends it"):
        dialects.get(version).check_client_notification(method)


def test_roots_changed_needs_the_declared_capability_and_a_version_that_has_it() -> None:
    session = dialects.get("2025-11-25")
    assert roots_changed_refusal(LISTED_ROOTS, session) is None
    for undeclared in ({}, {"roots": {}}, {"roots": {"listChanged": False}}, {"roots": True}):
        refusal = roots_changed_refusal(undeclared, session)
        assert refusal is not None and refusal.code == -32021
        assert refusal.data == {"requiredCapabilities": LISTED_ROOTS}
        assert "roots.listChanged" in refusal.message
    stateless = roots_changed_refusal(LISTED_ROOTS, dialects.get(STATELESS))
    assert stateless is not None and stateless.code == -32601
    assert stateless.message.startswith("Protocol 2026-07-28 has no " + ROOTS_LIST_CHANGED)


def test_notification_params_merge_meta_and_trace_without_mutating() -> None:
    given = {"a": 1, "_meta": {"k": "params"}}
    out = notification_params(given, meta={"k": "meta", "m": 2}, trace=TRACE)
    assert out == {"a": 1, "_meta": {"k": "meta", "m": 2, **TRACE}}
    assert given == {"a": 1, "_meta": {"k": "params"}}
    assert notification_params(None) is None
    assert notification_params({"_meta": {}}) is None


# -- direct and a custom transport --------------------------------------------------------


class RecordingPipe(PipeTransport):
    """The pipe transport, keeping every notification it is handed."""

    notes: list[dict[str, Any]] = []

    @classmethod
    def connect(cls, runtime: Any, options: ConnectOptions) -> RecordingPipe:
        return cls(runtime)

    def notify(self, message: dict[str, Any], options: RequestOptions) -> None:
        RecordingPipe.notes.append(message)
        super().notify(message, options)


class RequestOnly:
    """A custom transport without ``notify``."""

    def __init__(self, runtime: Any) -> None:
        self._inner = PipeTransport(runtime)

    @classmethod
    def connect(cls, runtime: Any, options: ConnectOptions) -> RequestOnly:
        return cls(runtime)

    def request(self, message: dict[str, Any], options: RequestOptions) -> dict[str, Any]:
        return self._inner.request(message, options)

    def close(self) -> None:
        self._inner.close()


def test_direct_notify_reaches_the_runtime_and_refusals_send_nothing(wire: Wire) -> None:
    """Direct: the notification goes to the Runtime with its params, meta= and trace_context=;
    an undefined one is -32601 and nothing is sent; after close() it is -32000."""
    with snodo.direct(
        client_runtime.build(), protocol="2025-11-25", **listed_roots_options()
    ) as client:
        client.notify(
            "notifications/progress",
            {"progressToken": "t", "progress": 1},
            meta={"seen": True},
            trace_context=TRACE,
        )
        client.roots_changed()
        with pytest.raises(snodo.McpError) as refused:
            client.notify(EXTENSION, {})
        assert refused.value.code == -32601
        client.ping()  # the connection is still good
    notes = [m for m in wire.sent if "id" not in m]
    assert notes[1:] == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": "t", "progress": 1, "_meta": {"seen": True, **TRACE}},
        },
        {"jsonrpc": "2.0", "method": ROOTS_LIST_CHANGED},
    ]
    assert notes[0]["method"] == "notifications/initialized"
    with pytest.raises(snodo.McpError) as closed:
        client.notify("notifications/progress", {"progressToken": "t", "progress": 2})
    assert closed.value.code == -32000
    assert len([m for m in wire.sent if "id" not in m]) == 3


def test_a_custom_transport_carries_notifications_and_one_without_notify_says_so() -> None:
    """A custom transport's notify() gets the message; one without it is a TypeError on
    2026-07-28 (the only version it can open), before anything is sent."""
    RecordingPipe.notes = []
    with snodo.connect((RecordingPipe, client_runtime.build()), protocol=STATELESS) as client:
        client.notify(EXTENSION, {"n": 1})
        assert client.call_tool("echo", {"text": "after"})["content"][0]["text"] == "after"
    assert RecordingPipe.notes == [{"jsonrpc": "2.0", "method": EXTENSION, "params": {"n": 1}}]
    with snodo.connect((RequestOnly, client_runtime.build()), protocol=STATELESS) as client:
        with pytest.raises(TypeError, match="cannot send notifications"):
            client.notify(EXTENSION)


# -- stdio: the server's own log ----------------------------------------------------------


def notes_in(log: Path) -> list[dict[str, Any]]:
    return [m for m in support.read_messages(log) if "id" not in m]


@pytest.mark.parametrize("version", ["2025-11-25", STATELESS])
def test_stdio_notify_reaches_the_server(tmp_path: Path, version: str) -> None:
    """Over stdio the server reads the notification, with its params, before the next request;
    a refused one never reaches it; a closed client is -32000."""
    log = tmp_path / "wire.jsonl"
    target = support.script("scripted_server.py", "--log", str(log))
    client = snodo.connect(target, protocol=version, **listed_roots_options())
    try:
        method = ROOTS_LIST_CHANGED if version != STATELESS else EXTENSION
        client.notify(method, {"n": 1}, meta={"m": 2})
        with pytest.raises(snodo.McpError) as refused:
            client.notify("notifications/message" if version == STATELESS else EXTENSION)
        assert refused.value.code == -32601
        if version == STATELESS:
            with pytest.raises(snodo.McpError) as no_roots_changes:
                client.roots_changed()
            assert no_roots_changes.value.code == -32601
        client.call_tool("echo", {"text": "after"})  # stdin is ordered: all before it is logged
        sent = [m for m in notes_in(log) if m["method"] != "notifications/initialized"]
        assert sent == [{"jsonrpc": "2.0", "method": method, "params": {"n": 1, "_meta": {"m": 2}}}]
    finally:
        client.close()
    with pytest.raises(snodo.McpError) as closed:
        client.notify(method)
    assert closed.value.code == -32000
    support.check_wire(log, version)


def test_roots_changed_without_the_declared_capability_sends_nothing(tmp_path: Path) -> None:
    """A roots handler alone declares listChanged false: roots_changed() is -32021, the server
    sees nothing, and the connection keeps working."""
    log = tmp_path / "wire.jsonl"
    target = support.script("scripted_server.py", "--log", str(log))
    with snodo.connect(target, protocol="2025-11-25", input_handlers={"roots": no_roots}) as client:
        assert client.options.client_capabilities["roots"] == {"listChanged": False}
        with pytest.raises(snodo.McpError) as refused:
            client.roots_changed()
        assert refused.value.code == -32021
        assert refused.value.cause == ("undeclared_capability", "roots.listChanged")
        with pytest.raises(snodo.McpError):
            client.notify(ROOTS_LIST_CHANGED)  # the same rule by its method name
        client.call_tool("echo", {"text": "after"})
    assert [m["method"] for m in notes_in(log)] == ["notifications/initialized"]


# -- HTTP: the official SDK's server records each POST ------------------------------------


class SdkServer:
    """One sdk_http_server.py (both eras on one endpoint), started for this module."""

    def __init__(self, process: subprocess.Popen[bytes], port: int) -> None:
        self.process = process
        self.url = f"http://127.0.0.1:{port}/mcp"
        self.port = port

    def requests(self, tag: str) -> list[dict[str, Any]]:
        address = f"http://127.0.0.1:{self.port}/_requests?tag={tag}"
        with urllib.request.urlopen(address, timeout=10.0) as answer:
            recorded: list[dict[str, Any]] = json.loads(answer.read())
        return recorded


@pytest.fixture(scope="module")
def sdk_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SdkServer]:
    log = tmp_path_factory.mktemp("sdk-notify") / "server.log"
    with open(log, "wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, str(SDK_SERVER), "0"],
            stdout=subprocess.PIPE,
            stderr=stderr,
            cwd=str(ROOT),
        )
    try:
        yield SdkServer(process, announced_port(process, log, "sdk_http_server.py"))
    finally:
        stop_process(process)


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18", STATELESS])
def test_http_notify_is_a_post_the_server_accepts(sdk_server: SdkServer, version: str) -> None:
    """Over HTTP a notification is one POST with the session's headers, answered 202 by the
    SDK's server; a refused one is never posted; a closed client is -32000."""
    tag = uuid.uuid4().hex
    client = snodo.connect(
        snodo.Http(sdk_server.url),
        protocol=version,
        headers={"X-Interop-Tag": tag},
        **listed_roots_options(),
    )
    try:
        if version == STATELESS:
            client.notify(EXTENSION, {"n": 1}, trace_context=TRACE)
            expected = {"jsonrpc": "2.0", "method": EXTENSION, "params": {"n": 1, "_meta": TRACE}}
        else:
            client.roots_changed()
            expected = {"jsonrpc": "2.0", "method": ROOTS_LIST_CHANGED}
        with pytest.raises(snodo.McpError) as refused:
            client.notify("tools/list")
        assert refused.value.code == -32601
        assert client.list_tools()  # still serving
    finally:
        client.close()
    with pytest.raises(snodo.McpError) as closed:
        client.notify(expected["method"])
    assert closed.value.code == -32000
    posted = [r for r in sdk_server.requests(tag) if r["method"] == "POST"]
    notes = [r for r in posted if r["rpc"] not in ("notifications/initialized", None)]
    notes = [r for r in notes if "id" not in (r["message"] or {})]
    assert [(r["message"], r["status"]) for r in notes] == [(expected, 202)]
    if version != STATELESS:
        assert notes[0]["session"] is not None and notes[0]["version"] == version


# -- asyncio and the actor proxy ----------------------------------------------------------


def test_async_client_notify_and_roots_changed(tmp_path: Path) -> None:
    """``await client.notify(...)`` and ``await client.roots_changed()``: the same rules and
    errors as the sync client's."""
    log = tmp_path / "wire.jsonl"
    target = support.script("scripted_server.py", "--log", str(log))

    async def main() -> None:
        async with await snodo.aio.connect(
            target, protocol="2025-11-25", **listed_roots_options()
        ) as client:
            await client.roots_changed()
            await client.notify("notifications/progress", {"progressToken": 7, "progress": 1})
            with pytest.raises(snodo.McpError) as refused:
                await client.notify(EXTENSION)
            assert refused.value.code == -32601
            with pytest.raises(ValueError):
                await client.notify("notifications/cancelled", {"requestId": 1})
            await client.call_tool("echo", {"text": "after"})

    asyncio.run(main())
    assert [m["method"] for m in notes_in(log)] == [
        "notifications/initialized",
        ROOTS_LIST_CHANGED,
        "notifications/progress",
    ]


def test_the_actor_proxy_notifies_off_the_mailbox(wire: Wire) -> None:
    """``ref.proxy().notify(...)`` returns a future whose value is None once sent."""
    ref = start_direct(client_runtime.build(), protocol="2025-11-25", **listed_roots_options())
    try:
        proxy = ref.proxy()
        assert proxy.roots_changed().get(timeout=10.0) is None
        refused = proxy.notify(EXTENSION)
        with pytest.raises(snodo.McpError):
            refused.get(timeout=10.0)
    finally:
        stop(ref, timeout=10.0)
    assert [m["method"] for m in wire.sent if "id" not in m] == [
        "notifications/initialized",
        ROOTS_LIST_CHANGED,
    ]
