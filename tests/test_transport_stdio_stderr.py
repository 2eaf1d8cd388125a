"""A stdio server's stderr (``stderr=`` on connect): where its lines go, and the tail that the
error for a server that exited carries (issue 17 item 2). Real server processes throughout."""

from __future__ import annotations

import asyncio
import io
import logging
import subprocess
import sys
import textwrap
import threading
from typing import Any

import pytest

import snodo
import snodo.aio
from snodo.protocol.stderr_tail import MAX_TAIL_BYTES, MAX_TAIL_LINES, oversized_line
from snodo.server_logs import default_name
from snodo.supervision import green_mode
from snodo.transports.stdio import STDERR_LINE_BYTES
from tests.support import stdio_support as support
from tests.support.stdio_support import LATEST, ROOT, wait_until

#: Autouse fixtures: process-wide parts started first; no child or fd left behind.
stdio_warm_up = support.stdio_warm_up
stdio_no_leaks = support.stdio_no_leaks

SCRIPT = "broken_stderr_exit.py"
THREE = ["stderr line 0", "stderr line 1", "fatal: config.toml not found"]
PROTOCOLS = [None, LATEST, "2025-11-25"]
PROTOCOL_IDS = ["negotiate", "stateless", "initialize"]


def dying(last: str, *, before: int = 0, status: int = 1, newline: bool = True) -> snodo.Stdio:
    """A server that writes ``stderr line i`` for i < ``before``, then ``last``, to stderr and
    exits with ``status`` at start."""
    args = ["--stderr-lines", str(before), "--last-line", last]
    if not newline:
        args.append("--no-newline")
    return support.script(SCRIPT, *args, "--exit-at-start", str(status))


def serving() -> snodo.Stdio:
    return support.script(SCRIPT)


def connect_error(target: snodo.Stdio, **options: Any) -> snodo.McpError:
    with pytest.raises(snodo.McpError) as caught:
        snodo.connect(target, timeout=30.0, probe_timeout=30.0, **options)
    return caught.value


def say(client: snodo.Client, *lines: str) -> None:
    assert client.call_tool("say", {"lines": list(lines)})["content"][0]["text"] == "said"


def three_lines_server() -> snodo.Stdio:
    """THREE on stderr, then exit 1."""
    return dying(THREE[2], before=2)


# -- the exit error ----------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", [None, "2025-11-25"], ids=["negotiate", "initialize"])
def test_a_server_that_exits_at_start_names_its_last_stderr_line(protocol: str | None) -> None:
    """The acceptance line: 3 lines on stderr and exit 1 at start; connect raises -32000 whose
    message names status 1 and the last line and whose data carries the lines."""
    error = connect_error(three_lines_server(), protocol=protocol)
    assert error.code == -32000
    assert error.kind == "transport"
    assert error.cause == ("exit_status", 1)
    assert error.message == (
        "The server exited with status 1 at start: fatal: config.toml not found"
    )
    assert error.data["stderr"] == THREE


def test_a_last_line_without_a_newline_is_kept() -> None:
    error = connect_error(dying("half a line", status=4, newline=False), protocol="2025-11-25")
    assert error.cause == ("exit_status", 4)
    assert error.message == "The server exited with status 4 at start: half a line"
    assert error.data["stderr"] == ["half a line"]


def test_a_stateless_pin_gives_the_tail_on_the_first_call() -> None:
    """A stateless pin sends nothing at connect: the first call fails with the tail."""
    with snodo.connect(three_lines_server(), protocol=LATEST) as client:
        pid = client.transport.pid
        wait_until(lambda: not support.running(pid))
        with pytest.raises(snodo.McpError) as caught:
            client.list_tools()
    assert caught.value.cause == ("exit_status", 1)
    assert caught.value.message.endswith(": fatal: config.toml not found")
    assert caught.value.data["stderr"] == THREE


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=PROTOCOL_IDS)
def test_a_server_that_crashes_after_some_calls_gives_the_tail_to_the_pending_call(
    protocol: str | None,
) -> None:
    lines: list[str] = []
    with snodo.connect(serving(), protocol=protocol, stderr=lines.append) as client:
        say(client, "ready")
        assert client.call_tool("say", {"lines": []})["content"][0]["text"] == "said"
        with pytest.raises(snodo.McpError) as caught:
            client.call_tool("crash", {"lines": ["panic: index out of range"], "code": 2})
    error = caught.value
    assert error.code == -32000
    assert error.cause == ("exit_status", 2)
    assert error.message == "The server exited with status 2: panic: index out of range"
    assert error.data["stderr"][-2:] == ["ready", "panic: index out of range"]
    assert error.data["outcome"] == "unknown"
    assert lines[-2:] == ["ready", "panic: index out of range"]


def test_the_tail_is_bounded_by_lines() -> None:
    """1,000 lines, then exit: the last 20 are kept."""
    error = connect_error(
        support.script(SCRIPT, "--stderr-lines", "1000", "--exit-at-start", "1"),
        protocol="2025-11-25",
    )
    kept = error.data["stderr"]
    assert len(kept) == MAX_TAIL_LINES == 20
    assert kept == [f"stderr line {i}" for i in range(980, 1000)]
    assert error.message.endswith(": stderr line 999")


def test_the_tail_is_bounded_by_bytes_and_long_lines_are_cut() -> None:
    long = "L" * 1500
    target = support.script(
        SCRIPT, "--stderr-lines", "1000", "--last-line", long, "--exit-at-start", "1"
    )
    error = connect_error(target, protocol="2025-11-25")
    kept = error.data["stderr"]
    assert sum(len(line.encode()) for line in kept) <= MAX_TAIL_BYTES
    assert kept[-1] == long
    assert kept[-2] == "stderr line 999"
    assert len(error.message) < 300  # the message names the line shortened
    error = connect_error(dying("H" * 6000), protocol="2025-11-25")
    assert error.data["stderr"] == ["H" * MAX_TAIL_BYTES]
    error = connect_error(dying("H" * (STDERR_LINE_BYTES + 10)), protocol="2025-11-25")
    assert error.data["stderr"] == [oversized_line(STDERR_LINE_BYTES + 10)]


# -- where the lines go ------------------------------------------------------------------------


def test_by_default_each_line_is_logged_on_the_server_stderr_logger(
    caplog: pytest.LogCaptureFixture,
) -> None:
    target = serving()
    name = f"snodo.server.{default_name(target)}.stderr"
    caplog.set_level(logging.INFO, logger=name)
    with snodo.connect(target, protocol=LATEST) as client:
        say(client, "hello from the server", "100% sure")
        pid = client.transport.pid

        def logged() -> list[logging.LogRecord]:
            return [r for r in caplog.records if r.name == name]

        wait_until(lambda: len(logged()) >= 2)
    records = logged()
    assert [r.getMessage() for r in records] == ["hello from the server", "100% sure"]
    assert all(r.levelno == logging.INFO for r in records)
    assert records[0].pid == pid  # type: ignore[attr-defined]
    assert records[0].server == default_name(target)  # type: ignore[attr-defined]


def test_the_default_logger_is_named_after_the_connection(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="snodo.server.files.stderr")
    error = connect_error(three_lines_server(), protocol="2025-11-25", name="files")
    assert error.data["stderr"] == THREE
    logged = [r.getMessage() for r in caplog.records if r.name == "snodo.server.files.stderr"]
    assert logged == THREE


def test_a_callable_gets_each_line_and_its_exceptions_are_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen: list[str] = []

    def sink(line: str) -> None:
        seen.append(line)
        raise RuntimeError("the sink is broken")

    caplog.set_level(logging.WARNING, logger="snodo.transports.stdio")
    with snodo.connect(serving(), protocol=LATEST, stderr=sink) as client:
        say(client, "one", "two")
        client.call_tool("say", {"lines": [], "hex": "746872656520c3a920ff"})
        wait_until(lambda: len(seen) >= 3)
        assert client.call_tool("say", {"lines": []})["content"][0]["text"] == "said"
    assert seen == ["one", "two", "three é \ufffd"]
    raised = [r for r in caplog.records if "stderr sink raised" in r.getMessage()]
    assert len(raised) == 1


def test_a_callable_sink_gets_the_lines_of_a_server_that_exits() -> None:
    seen: list[str] = []
    error = connect_error(three_lines_server(), protocol="2025-11-25", stderr=seen.append)
    assert seen == THREE
    assert error.data["stderr"] == THREE


def test_a_logger_gets_each_line_at_info(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("tests.stderr.mine")
    caplog.set_level(logging.INFO, logger="tests.stderr.mine")
    default = f"snodo.server.{default_name(serving())}.stderr"
    caplog.set_level(logging.INFO, logger=default)
    with snodo.connect(serving(), protocol=LATEST, stderr=logger) as client:
        say(client, "to my logger")
        wait_until(lambda: any(r.name == logger.name for r in caplog.records))
    mine = [r for r in caplog.records if r.name == logger.name]
    assert [(r.levelno, r.getMessage()) for r in mine] == [(logging.INFO, "to my logger")]
    assert not [r for r in caplog.records if r.name == default]


def test_a_file_gets_the_lines_as_they_come() -> None:
    out = io.StringIO()
    error = connect_error(three_lines_server(), protocol="2025-11-25", stderr=out)
    assert out.getvalue() == "".join(line + "\n" for line in THREE)
    assert error.data["stderr"] == THREE


def test_discard_keeps_and_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    name = f"snodo.server.{default_name(serving())}.stderr"
    caplog.set_level(logging.INFO, logger=name)
    error = connect_error(three_lines_server(), protocol="2025-11-25", stderr="discard")
    assert error.message == "The server exited with status 1 at start"
    assert error.cause == ("exit_status", 1)
    assert "stderr" not in (error.data or {})
    assert not [r for r in caplog.records if r.name == name]


INHERIT_CLIENT = textwrap.dedent(
    """
    import sys
    import snodo
    target = snodo.Stdio(sys.executable, [sys.argv[1], "--stderr-lines", "2",
                         "--last-line", "inherited", "--exit-at-start", "1"])
    try:
        snodo.connect(target, protocol="2025-11-25", timeout=30.0, stderr=sys.argv[2])
    except snodo.McpError as error:
        print(repr(error.message), repr(error.data), flush=True)
    """
)


@pytest.mark.parametrize("mode", ["inherit", "discard"])
def test_inherit_writes_to_the_parent_fd_2_and_discard_does_not(mode: str) -> None:
    """A client in a subprocess (its stderr captured): with "inherit" the server's lines reach
    the client's fd 2 and nothing is kept; with "discard" they reach nothing."""
    script = str(support.SERVERS / SCRIPT)
    done = subprocess.run(
        [sys.executable, "-c", INHERIT_CLIENT, script, mode],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.strip() == (
        "'The server exited with status 1 at start' {'outcome': 'unknown'}"
    )
    lines = ["stderr line 0", "stderr line 1", "inherited"]
    if mode == "inherit":
        assert done.stderr.splitlines() == lines
    else:
        assert not any(line in done.stderr for line in lines)


# -- checking the option -----------------------------------------------------------------------


def test_stderr_is_checked() -> None:
    with pytest.raises(ValueError, match="inherit"):
        snodo.connect(serving(), stderr="devnull")
    with pytest.raises(TypeError, match="stderr="):
        snodo.connect(serving(), stderr=42)
    with pytest.raises(ValueError, match="stdio servers only"):
        snodo.connect(snodo.Http("http://127.0.0.1:9/mcp"), stderr="discard")


def test_the_hub_thread_calls_the_sink() -> None:
    """The callable runs off the caller's thread (the I/O hub): it must not block."""
    threads: list[threading.Thread] = []
    with snodo.connect(
        serving(), protocol=LATEST, stderr=lambda line: threads.append(threading.current_thread())
    ) as client:
        say(client, "where")
        wait_until(lambda: threads)
    if not green_mode():
        assert threads[0] is not threading.current_thread()


@pytest.mark.skipif(green_mode(), reason="snodo.aio is for asyncio programs")
def test_aio_connect_passes_stderr_on() -> None:
    seen: list[str] = []

    async def run() -> snodo.McpError:
        with pytest.raises(snodo.McpError) as caught:
            await snodo.aio.connect(
                three_lines_server(), protocol="2025-11-25", timeout=30.0, stderr=seen.append
            )
        return caught.value

    error = asyncio.run(run())
    assert error.data["stderr"] == THREE
    assert seen == THREE
