"""Server log messages (issue 17 item 1): ``log_handler=``, ``log_level=`` and ``name=``.

Against real servers: the project's Runtime with ``logging=True`` (tests/servers/
logging_runtime.py) over direct, stdio and HTTP on every version, the official SDK's stdio
server (tests/servers/sdk_logging_server.py: its ``chatter`` tool) on both eras, and ``@modelcontextprotocol/server-everything``
(its simulated logging) over stdio and HTTP. The session era asks with ``logging/setLevel``
after ``initialized``; 2026-07-28 puts ``_meta["io.modelcontextprotocol/logLevel"]`` on every
request (and a Runtime sends nothing without it).
"""

from __future__ import annotations

import asyncio
import logging
import queue
import select
import subprocess
import threading
from collections.abc import Iterator
from typing import Any

import pytest

import snodo
import snodo.aio
from snodo import LogMessage
from snodo.protocol.meta import LOG_LEVELS
from snodo.server.http_server import serve_http
from tests.servers.logging_runtime import build
from tests.support import everything_support as everything
from tests.support.stdio_support import ALL, PYTHON, ROOT, no_leaks, wait_until, warm_up

RUNTIME = "tests.servers.logging_runtime:runtime"
SDK_SERVER = ROOT / "tests" / "servers" / "sdk_logging_server.py"
SDK_HTTP_SERVER = ROOT / "tests" / "servers" / "sdk_http_server.py"
STATELESS = "2026-07-28"
LEVELS = ["debug", "info", "warning", "error"]
TRANSPORTS = ["direct", "stdio", "http"]


@pytest.fixture(scope="module", autouse=True)
def _warm() -> None:
    warm_up()


@pytest.fixture(autouse=True)
def _no_leaks() -> Iterator[None]:
    with no_leaks(pooled=True):
        yield


class Served:
    """A logging Runtime reachable over one transport (the HTTP server stops on ``close``)."""

    def __init__(self, transport: str) -> None:
        self.transport = transport
        self.http = serve_http(build()) if transport == "http" else None

    def connect(self, version: str, **options: Any) -> snodo.Client:
        if self.transport == "direct":
            return snodo.direct(build(), protocol=version, **options)
        if self.transport == "stdio":
            target = snodo.Stdio(PYTHON, ["-m", "snodo.server", RUNTIME])
            return snodo.connect(target, protocol=version, cwd=str(ROOT), **options)
        assert self.http is not None
        return snodo.connect(snodo.Http(self.http.url), protocol=version, **options)

    def close(self) -> None:
        if self.http is not None:
            self.http.close()


@pytest.fixture(params=TRANSPORTS)
def served(request: pytest.FixtureRequest) -> Iterator[Served]:
    server = Served(request.param)
    try:
        yield server
    finally:
        server.close()


def drained(q: queue.Queue[Any]) -> list[Any]:
    out = []
    while True:
        try:
            out.append(q.get_nowait())
        except queue.Empty:
            return out


# -- the project's Runtime, every transport and version ------------------------------------


@pytest.mark.parametrize("version", ALL)
def test_messages_reach_a_queue_with_level_logger_data_and_server(
    served: Served, version: str
) -> None:
    """Each ``ctx.log`` arrives before the call's result, in order, named after the server."""
    got: queue.Queue[LogMessage] = queue.Queue()
    with served.connect(version, log_handler=got, log_level="debug", name="logs-a") as client:
        assert client.name == "logs-a"
        assert client.call_tool("chatty")["content"][0]["text"] == "done"
        messages = drained(got)
    assert messages == [LogMessage(level, "chatty", {"level": level}, "logs-a") for level in LEVELS]


@pytest.mark.parametrize("version", ALL)
def test_log_level_warning_keeps_info_and_debug_away(served: Served, version: str) -> None:
    got: queue.Queue[LogMessage] = queue.Queue()
    with served.connect(version, log_handler=got, log_level="warning") as client:
        client.call_tool("chatty")
        assert [m.level for m in drained(got)] == ["warning", "error"]


@pytest.mark.parametrize("version", ALL)
def test_per_call_log_level_overrides_the_clients_on_2026(served: Served, version: str) -> None:
    """2026-07-28: the call's ``log_level`` wins; session era: the level is the session's."""
    got: queue.Queue[LogMessage] = queue.Queue()
    with served.connect(version, log_handler=got, log_level="error") as client:
        client.call_tool("chatty", log_level="debug")
        levels = [m.level for m in drained(got)]
    assert levels == (LEVELS if version == STATELESS else ["error"])


def test_no_log_level_on_2026_means_no_messages(served: Served) -> None:
    """A 2026-07-28 server sends log messages only when a request asks for a level."""
    got: queue.Queue[LogMessage] = queue.Queue()
    with served.connect(STATELESS, log_handler=got) as client:
        client.call_tool("chatty")
        assert drained(got) == []
        client.call_tool("chatty", log_level="info")
        assert [m.level for m in drained(got)] == ["info", "warning", "error"]


@pytest.mark.parametrize("version", ALL)
def test_without_a_handler_messages_go_to_the_servers_stdlib_logger(
    served: Served, version: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="snodo.server.logs-b")
    with served.connect(version, log_level="debug", name="logs-b") as client:
        client.call_tool("chatty")
    records = [r for r in caplog.records if r.name == "snodo.server.logs-b"]
    assert [r.levelno for r in records] == [
        logging.DEBUG,
        logging.INFO,
        logging.WARNING,
        logging.ERROR,
    ]
    for record, level in zip(records, LEVELS, strict=True):
        text = record.getMessage()
        assert f"severity='{level}'" in text
        assert "logger='chatty'" in text
        assert f"data={{'level': '{level}'}}" in text
        assert "server='logs-b'" in text


def test_the_default_names() -> None:
    """stdio: the command's basename; HTTP: host:port; direct: the Runtime's name."""
    with snodo.direct(build()) as client:
        assert client.name == "logs"
    http = serve_http(build())
    try:
        with snodo.connect(snodo.Http(http.url), protocol=STATELESS) as client:
            assert client.name == f"127.0.0.1:{http.url.split(':')[2].split('/')[0]}"
    finally:
        http.close()
    target = snodo.Stdio(PYTHON, ["-m", "snodo.server", RUNTIME])
    with snodo.connect(target, protocol=STATELESS, cwd=str(ROOT)) as client:
        assert client.name == PYTHON.rsplit("/", 1)[-1]


def test_a_dotted_name_is_used_as_it_is(caplog: pytest.LogCaptureFixture) -> None:
    """``snodo.server.<name>`` with the name unchanged, as the stderr logger has it."""
    caplog.set_level(logging.INFO, logger="snodo.server")
    with snodo.direct(build(), name="a.b", log_level="info") as client:
        client.call_tool("chatty")
    assert {r.name for r in caplog.records if r.name.startswith("snodo.server.a")} == {
        "snodo.server.a.b"
    }


# -- handlers -------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", ["direct", "stdio"])
def test_a_full_queue_drops_without_blocking_and_warns_once(
    transport: str, caplog: pytest.LogCaptureFixture
) -> None:
    server = Served(transport)
    got: queue.Queue[LogMessage] = queue.Queue(maxsize=3)
    caplog.set_level(logging.WARNING, logger="snodo.server_logs")
    with server.connect(STATELESS, log_handler=got, log_level="info") as client:
        assert client.call_tool("spam", {"count": 20})["content"][0]["text"] == "done"
        assert [m.data for m in drained(got)] == [{"n": 0}, {"n": 1}, {"n": 2}]
        client.call_tool("spam", {"count": 5})
        assert len(drained(got)) == 3
    warnings = [r for r in caplog.records if "queue is full" in r.getMessage()]
    assert len(warnings) == 1


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_slow_callable_does_not_hold_the_reading_thread(transport: str) -> None:
    """The call returns while the handler still blocks; the messages follow, in order."""
    server = Served(transport)
    release = threading.Event()
    seen: list[LogMessage] = []

    def slow(message: LogMessage) -> None:
        release.wait(10)
        seen.append(message)

    try:
        with server.connect(STATELESS, log_handler=slow, log_level="debug") as client:
            client.call_tool("chatty")
            client.call_tool("chatty")
            assert seen == []
            release.set()
            wait_until(lambda: len(seen) == 8)
        assert [m.level for m in seen] == LEVELS * 2
    finally:
        release.set()
        server.close()


def test_a_slow_callable_drops_beyond_the_bound_and_warns_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import snodo.server_logs

    monkeypatch.setattr(snodo.server_logs, "MAX_PENDING", 3)
    caplog.set_level(logging.WARNING, logger="snodo.server_logs")
    release = threading.Event()
    seen: list[LogMessage] = []

    def slow(message: LogMessage) -> None:
        release.wait(10)
        seen.append(message)

    try:
        with snodo.direct(build(), protocol=STATELESS, log_handler=slow, log_level="info") as c:
            assert c.call_tool("spam", {"count": 20})["content"][0]["text"] == "done"
            release.set()
            wait_until(
                lambda: (
                    len(seen) >= 3
                    and not any(t.name == "snodo-server-logs" for t in threading.enumerate())
                )
            )
    finally:
        release.set()
    # 3 waiting, and at most the one the worker had taken before the bound was reached
    assert [m.data["n"] for m in seen] in ([0, 1, 2], [0, 1, 2, 3])
    assert sum("log_handler is slow" in r.getMessage() for r in caplog.records) == 1


def test_a_failing_callable_is_logged_and_the_call_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls: list[str] = []

    def broken(message: LogMessage) -> None:
        calls.append(message.level)
        raise RuntimeError("handler broke")

    with snodo.direct(build(), log_handler=broken, log_level="warning") as client:
        assert client.call_tool("chatty")["content"][0]["text"] == "done"
        wait_until(lambda: len(calls) == 2)
    wait_until(lambda: sum("log_handler failed" in r.getMessage() for r in caplog.records) == 2)


def test_an_actor_receives_log_messages() -> None:
    import pykka

    got: queue.Queue[LogMessage] = queue.Queue()

    class Sink(pykka.ThreadingActor):
        def on_receive(self, message: Any) -> None:
            got.put(message)

    ref = Sink.start()
    try:
        with snodo.direct(build(), log_handler=ref, log_level="error") as client:
            client.call_tool("chatty")
        assert got.get(timeout=10) == LogMessage("error", "chatty", {"level": "error"}, "logs")
    finally:
        ref.stop()


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"log_level": "loud"}, ValueError),
        ({"log_level": "WARNING"}, ValueError),
        ({"name": ""}, ValueError),
        ({"name": "x" * 65}, ValueError),
        ({"log_handler": 42}, TypeError),
    ],
)
def test_bad_options_are_refused(options: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        snodo.direct(build(), **options)


def test_a_bad_per_call_log_level_is_refused() -> None:
    with snodo.direct(build(), protocol=STATELESS) as client, pytest.raises(ValueError):
        client.call_tool("chatty", log_level="verbose")


@pytest.mark.parametrize("version", [STATELESS, "2025-11-25"])
def test_aio_client_delivers_log_messages(served: Served, version: str) -> None:
    """snodo.aio passes the options through: the same messages over its own HTTP driver."""
    got: queue.Queue[LogMessage] = queue.Queue()
    options: dict[str, Any] = {"protocol": version, "log_handler": got, "log_level": "info"}

    async def main() -> list[str]:
        if served.transport == "direct":
            client = await snodo.aio.direct(build(), name="aio", **options)
        elif served.transport == "stdio":
            target = snodo.Stdio(PYTHON, ["-m", "snodo.server", RUNTIME])
            client = await snodo.aio.connect(target, cwd=str(ROOT), name="aio", **options)
        else:
            assert served.http is not None
            client = await snodo.aio.connect(snodo.Http(served.http.url), name="aio", **options)
        try:
            assert client.name == "aio"
            await client.call_tool("chatty", log_level="warning")
        finally:
            await client.aclose()
        return [m.level for m in drained(got)]

    expected = ["warning", "error"] if version == STATELESS else ["info", "warning", "error"]
    assert asyncio.run(main()) == expected


# -- secrets ----------------------------------------------------------------------------------


class _Tokens:
    def token(self, url: str) -> str | None:
        return "TOKEN-provided-7f3a"

    def refresh(self, challenge: Any, *, url: str, status: int, token: str | None) -> str | None:
        return "TOKEN-refreshed-9c1d"


class _Everything(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.mark.parametrize("version", ALL)
def test_no_token_or_authorization_value_in_any_snodo_record(version: str) -> None:
    """Every ``snodo*`` record of a connection's life, at DEBUG, names no secret."""
    capture = _Everything()
    root = logging.getLogger("snodo")
    before = root.level
    root.addHandler(capture)
    root.setLevel(logging.DEBUG)
    http = serve_http(build())
    try:
        for options in (
            {"headers": {"Authorization": "Bearer HEADER-secret-41bd"}},
            {"token_provider": _Tokens()},
        ):
            with snodo.connect(
                snodo.Http(http.url), protocol=version, log_level="debug", **options
            ) as client:
                client.call_tool("chatty")
                client.list_tools()
                with pytest.raises(snodo.McpError):
                    client.call_tool("missing")
    finally:
        http.close()
        root.removeHandler(capture)
        root.setLevel(before)
    assert capture.records
    assert any(
        r.name == "snodo.server.127.0.0.1:" + http.url.split(":")[2].split("/")[0]
        for r in capture.records
    )
    for record in capture.records:
        text = record.getMessage() + repr(record.args) + repr(record.__dict__)
        for secret in ("HEADER-secret-41bd", "TOKEN-provided-7f3a", "TOKEN-refreshed-9c1d"):
            assert secret not in text, record


# -- the official SDK's server ---------------------------------------------------------------


@pytest.mark.parametrize("version", ALL)
def test_sdk_server_log_messages_arrive(version: str) -> None:
    got: queue.Queue[LogMessage] = queue.Queue()
    target = snodo.Stdio(PYTHON, [str(SDK_SERVER)])
    with snodo.connect(target, protocol=version, log_handler=got, log_level="debug") as client:
        assert client.call_tool("chatter")["content"][0]["text"] == "chattered"
        messages = drained(got)
    assert messages == [
        LogMessage(level, "chatter", f"at {level}", client.name) for level in LEVELS
    ]


def test_sdk_server_honours_the_2026_log_level() -> None:
    got: queue.Queue[LogMessage] = queue.Queue()
    target = snodo.Stdio(PYTHON, [str(SDK_SERVER)])
    with snodo.connect(target, protocol=STATELESS, log_handler=got) as client:
        client.call_tool("chatter")
        assert drained(got) == []
        client.call_tool("chatter", log_level="warning")
        assert [m.level for m in drained(got)] == ["warning", "error"]


@pytest.fixture(scope="module")
def sdk_http() -> Iterator[str]:
    """tests/servers/sdk_http_server.py --logging on 127.0.0.1: its URL."""
    process = subprocess.Popen(
        [PYTHON, str(SDK_HTTP_SERVER), "0", "--logging"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], 30)
        line = process.stdout.readline().decode() if ready else ""
        assert line.startswith("PORT "), f"sdk_http_server.py gave no port: {line!r}"
        yield f"http://127.0.0.1:{int(line.split()[1])}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        if process.stdout is not None:
            process.stdout.close()


@pytest.mark.parametrize("version", ALL)
def test_sdk_http_server_log_messages_arrive(sdk_http: str, version: str) -> None:
    """Over Streamable HTTP the messages come on the POST's event stream, before the result."""
    got: queue.Queue[LogMessage] = queue.Queue()
    with snodo.connect(
        snodo.Http(sdk_http), protocol=version, log_handler=got, log_level="debug", name="sdk"
    ) as client:
        assert client.call_tool("chatter")["content"][0]["text"] == "chattered"
        messages = drained(got)
        if version == STATELESS:
            client.call_tool("chatter", log_level="error")
            assert [m.level for m in drained(got)] == ["error"]
    assert messages == [LogMessage(level, "chatter", f"at {level}", "sdk") for level in LEVELS]


# -- @modelcontextprotocol/server-everything -------------------------------------------------


@pytest.fixture(scope="module")
def node() -> str:
    return everything.ensure_installed()


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18"])
@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_everything_simulated_logging_reaches_the_handler(
    node: str, transport: str, version: str, tmp_path: Any
) -> None:
    """Its simulated logging sends one message at once, outside any request (over HTTP, on
    the standalone GET stream)."""
    got: queue.Queue[LogMessage] = queue.Queue()
    if transport == "stdio":
        with snodo.connect(
            snodo.Stdio(node, [str(everything.ENTRY), "stdio"]),
            protocol=version,
            log_handler=got,
            log_level="debug",
            name="everything",
        ) as client:
            _toggle_and_take(client, got)
        return
    with (
        everything.http_server(node, tmp_path) as server,
        snodo.connect(
            snodo.Http(server.url),
            protocol=version,
            log_handler=got,
            log_level="debug",
            name="everything",
        ) as client,
    ):
        _toggle_and_take(client, got)


def _toggle_and_take(client: snodo.Client, got: queue.Queue[LogMessage]) -> None:
    client.call_tool("toggle-simulated-logging")
    try:
        message = got.get(timeout=15)
    finally:
        client.call_tool("toggle-simulated-logging")
    assert message.server == "everything"
    assert message.level in LOG_LEVELS
    assert isinstance(message.data, str) and "message" in message.data


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18"])
def test_log_level_to_a_server_without_logging_is_not_sent(
    version: str, caplog: pytest.LogCaptureFixture
) -> None:
    """No ``logging`` capability: no ``logging/setLevel`` (it would be refused), and the
    connection opens as usual."""
    from snodo.server import Runtime

    caplog.set_level(logging.INFO, logger="snodo.server_logs")
    quiet = Runtime("quiet", "1.0", logging=False)
    quiet.add_tool("noop", lambda arguments, ctx: "ok")
    with snodo.direct(quiet, protocol=version, log_level="info") as client:
        assert client.session is not None and "logging" not in client.session.capabilities
        assert client.call_tool("noop")["content"][0]["text"] == "ok"
    assert any("offers no logging" in r.getMessage() for r in caplog.records)
