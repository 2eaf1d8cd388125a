"""Claims of the API tour (docs/tour.md) that no other test checked (issue 18 item 4, moved from
the README by issue 23): the connect options table is
every keyword of ``connect`` and ``direct`` with its default, the logging table names every
logger snodo logs to, owners (interpreter exit, a dropped client, the owner-ended error),
state (``repr``, a full ``on_state`` queue), what snodo writes (never stdout, never logging's
configuration), a stdio server's stderr lines, the asyncio worker pool and uvloop, a fleet's
shared names, and an async subscription read to its end. The map of every claim of the tour to
its test is docs/tour-claims.md; the tour's code blocks run in tests/test_tour_snippets.py.
"""

from __future__ import annotations

import ast
import asyncio
import gc
import inspect
import logging
import os
import queue
import re
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import snodo
import snodo.aio
from examples.example_runtime import build
from snodo.server import Runtime
from snodo.server.http_server import serve_http
from snodo.supervision import registry
from snodo.supervision.owner import green_mode
from tests.support import stdio_support as support
from tests.support.stdio_support import PYTHON, ROOT, wait_until

TOUR = ROOT / "docs" / "tour.md"
LATEST = "2026-07-28"

#: Autouse fixtures: process-wide parts started first; no child or fd left behind.
stdio_warm_up = support.stdio_warm_up
stdio_no_leaks = support.stdio_no_leaks


def section(title: str) -> str:
    """The tour's text under ``title`` (a heading line), up to the next heading."""
    text = TOUR.read_text(encoding="utf-8")
    start = text.index(f"\n{title}\n") + len(title) + 2
    end = re.search(r"^#{2,3} ", text[start:], re.M)
    return text[start : start + end.start()] if end else text[start:]


def table_rows(text: str) -> list[list[str]]:
    """The cells of each body row of the first Markdown table in ``text``."""
    rows = [line for line in text.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[2:]]


# -- the connect options table -------------------------------------------------------------


def documented_options() -> dict[str, tuple[str, bool]]:
    """Each keyword of the "connect options" table: (its Default cell, marked "both")."""
    options: dict[str, tuple[str, bool]] = {}
    for keyword, default, what in table_rows(section("### connect options")):
        names = re.findall(r"`(\w+)=`", keyword)
        defaults = [d.strip() for d in default.split(",")] if len(names) > 1 else [default]
        assert names and len(defaults) == len(names), keyword
        for name, value in zip(names, defaults, strict=True):
            options[name] = (value, what.startswith("both"))
    return options


def parameters(opener: Any, first: str) -> dict[str, Any]:
    found = dict(inspect.signature(opener).parameters)
    assert found.pop(first).kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in found.values())
    return {name: p.default for name, p in found.items()}


def test_every_keyword_of_connect_and_direct_is_in_the_options_table() -> None:
    """The tour: "Every keyword of connect and direct is in the connect options below", and
    ``direct`` takes exactly those marked "both"."""
    documented = documented_options()
    assert set(parameters(snodo.connect, "target")) == set(documented)
    both = {name for name, (_, is_both) in documented.items() if is_both}
    assert set(parameters(snodo.direct, "runtime")) == both


def literal(cell: str) -> tuple[bool, Any]:
    """(True, value) for a Default cell that is a value; (False, None) for a description."""
    cell = cell.strip("`")
    if cell in ("none", "None"):
        return True, None
    if re.fullmatch(r"\d+ MiB", cell):
        return True, int(cell.split()[0]) * 2**20
    if re.fullmatch(r"\d+(\.\d+)?|True|False|\"\w+\"", cell):
        return True, ast.literal_eval(cell)
    return False, None


@pytest.mark.parametrize("opener,first", [(snodo.connect, "target"), (snodo.direct, "runtime")])
def test_the_options_table_gives_each_default(opener: Any, first: str) -> None:
    """Each Default cell that is a value is the keyword's default; one that describes what is
    derived (every version, the handlers, the opening thread, ...) is left to connect: None."""
    documented = documented_options()
    for name, default in parameters(opener, first).items():
        is_value, value = literal(documented[name][0])
        if is_value:
            assert default == value and type(default) is type(value), name
        else:
            assert default is None, f"{name}: {documented[name][0]} but {default!r}"


def test_the_derived_defaults_are_what_the_table_says() -> None:
    """protocol: every supported version; client_info: snodo's name and version; backoff:
    0.1 s, factor 2, cap 30 s, full jitter; name: a Runtime's name."""
    client = snodo.direct(build())
    try:
        assert client.options.protocol == snodo.SUPPORTED_VERSIONS
        assert client.options.client_info["name"] == "snodo"
        assert client.name == "snodo-example"
    finally:
        client.close()
    assert snodo.Backoff() == snodo.Backoff(initial=0.1, factor=2.0, cap=30.0, jitter=True)


# -- the logging table ---------------------------------------------------------------------


def test_every_logger_snodo_names_is_in_the_logging_table() -> None:
    """The tour's Logging: the table says what each logger says; every logger name in snodo's
    source is in it (itself, or a parent's row)."""
    named = set(re.findall(r"`(snodo[\w.<>]*)`", section("### Logging")))
    found: set[str] = set()
    for path in (ROOT / "snodo").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        found.update(re.findall(r"get(?:_l|L)ogger\(\"(snodo[\w.]*)\"", text))
        if "get_logger(__name__)" in text:
            found.add(".".join(path.relative_to(ROOT).with_suffix("").parts))
    missing = sorted(
        name
        for name in found
        if not any(name == row or name.startswith(row + ".") for row in named)
    )
    assert not missing, f"loggers the tour's logging table does not name: {missing}"


# -- owners and state ----------------------------------------------------------------------


def test_a_main_thread_client_closes_at_interpreter_exit() -> None:
    """Owners: "The main thread's clients close at interpreter exit": a program that never
    calls close() leaves no stdio server behind."""
    program = (
        "import snodo, sys\n"
        "client = snodo.connect(snodo.Stdio(sys.executable, "
        "['-m', 'snodo.server', 'examples.example_runtime:runtime']))\n"
        "client.call_tool('echo', {'text': 'hi'})\n"
        "print(client.transport.pid, flush=True)\n"
    )
    done = subprocess.run(
        [PYTHON, "-c", program], cwd=ROOT, capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 0, done.stderr
    pid = int(done.stdout)
    wait_until(lambda: not support.exists(pid), 10.0)


def test_a_dropped_client_is_collected_and_its_owner_actor_stops() -> None:
    """Owners: "A client dropped without close() is still garbage-collected; its owner actor
    stops with it"."""
    before = {ref.actor_urn for ref in registry.all()}
    client = snodo.direct(build())
    client.call_tool("echo", {"text": "hi"})
    owners = [ref for ref in registry.all() if ref.actor_urn not in before]
    assert owners, "the client's owner actor is not registered"
    del client
    gc.collect()
    wait_until(lambda: not any(ref.is_alive() for ref in owners), 5.0)


def test_repr_shows_the_state() -> None:
    """State: ``repr(client)`` shows the state."""
    client = snodo.direct(build())
    assert "ready" in repr(client) and client.state == "ready"
    client.close()
    assert "closed" in repr(client) and client.state == "closed" and client.closed


def test_on_state_a_full_queue_drops_the_change_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """State: on_state= a queue.Queue gets StateChange(state, reason, error, restarts) by
    put_nowait; "a full queue drops the change with a warning"."""
    changes: queue.Queue[snodo.StateChange] = queue.Queue(maxsize=1)
    with caplog.at_level(logging.WARNING, logger="snodo.connection"):
        client = snodo.direct(build(), on_state=changes)
        client.close()
        wait_until(lambda: "on_state queue is full" in caplog.text, 5.0)
    first = changes.get_nowait()
    assert isinstance(first, snodo.StateChange)
    assert first.state in ("connecting", "ready") and (first.error, first.restarts) == (None, 0)
    assert changes.empty()


def test_the_owner_ended_error_names_the_owner_and_was_never_sent() -> None:
    """Owners: when the owner ends every later call fails -32000 "Connection closed because
    its owner thread 'worker-3' ended; pass owner= to choose another", cause ("owner_ended",
    "worker-3"); and "the last two -32000 errors say not_sent too"."""
    if green_mode():
        pytest.skip("under gevent a greenlet owns what it opens (test_supervision_owner)")
    opened: list[snodo.Client] = []
    worker = threading.Thread(target=lambda: opened.append(snodo.direct(build())), name="worker-3")
    worker.start()
    worker.join(10.0)
    client = opened[0]
    wait_until(lambda: client.closed, 5.0)
    with pytest.raises(snodo.McpError) as raised:
        client.call_tool("echo", {"text": "hi"})
    error = raised.value
    assert error.code == -32000
    assert error.message == (
        "Connection closed because its owner thread 'worker-3' ended; pass owner= to choose another"
    )
    assert error.cause == ("owner_ended", "worker-3")
    assert error.data == {"outcome": "not_sent"}


# -- what snodo writes ---------------------------------------------------------------------


def test_snodo_never_writes_to_stdout_nor_configures_logging() -> None:
    """Logging: "snodo never configures logging and never writes to stdout", even for a
    server whose output it must log (lines that are not JSON-RPC)."""
    program = (
        "import logging, sys, snodo\n"
        "client = snodo.connect(snodo.Stdio(sys.executable, "
        "['tests/servers/broken_noise.py']), protocol='2025-11-25')\n"
        "client.call_tool('echo', {'text': 'hi'})\n"
        "client.close()\n"
        "snodo_loggers = [name for name in logging.root.manager.loggerDict "
        "if name.startswith('snodo')]\n"
        "assert snodo_loggers\n"
        "configured = [name for name in snodo_loggers "
        "if getattr(logging.getLogger(name), 'handlers', [])]\n"
        "sys.stderr.write(repr((logging.root.handlers, logging.root.level, configured)))\n"
    )
    done = subprocess.run(
        [PYTHON, "-c", program], cwd=ROOT, capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert done.stderr.endswith(f"([], {logging.WARNING}, [])"), done.stderr


SERVER_WITH_STDERR = (
    "import sys\n"
    "sys.stderr.buffer.write(b'caf\\xe9 ok\\n' + b'x' * 9000 + b'\\nend\\r\\n')\n"
    "sys.stderr.flush()\n"
    "from snodo.server.stdio_server import serve_stdio\n"
    "from examples.example_runtime import runtime\n"
    "sys.exit(serve_stdio(runtime))\n"
)


def test_stderr_lines_are_decoded_with_bad_bytes_replaced_and_long_ones_dropped() -> None:
    """A server's stderr: "read line by line (decoded as UTF-8, bad bytes replaced, the
    newline removed; a line over 8 KiB is dropped)", each to the callable ``stderr=``."""
    lines: list[str] = []
    client = snodo.connect(
        snodo.Stdio(PYTHON, ["-c", SERVER_WITH_STDERR]), cwd=ROOT, stderr=lines.append
    )
    try:
        wait_until(lambda: "end" in lines, 10.0)
        assert lines == ["caf\ufffd ok", "end"]
    finally:
        client.close()


def test_stdio_records_carry_the_connection_name_with_the_servers_pid(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Logging: a connection's records carry ``connection`` ("stdio-<n>-<pid>" on stdio),
    rendered as key=value in the message."""
    with caplog.at_level(logging.INFO, logger="snodo.transports.stdio"):
        client = snodo.connect(support.script("broken_noise.py"), protocol="2025-11-25")
        try:
            client.call_tool("echo", {"text": "hi"})
            pid = client.transport.pid
            wait_until(lambda: f"-{pid}" in caplog.text, 5.0)
        finally:
            client.close()
    records = [r.getMessage() for r in caplog.records if r.name == "snodo.transports.stdio"]
    assert any(re.search(rf"connection='stdio-\d+-{pid}'", m) for m in records), records


# -- asyncio -------------------------------------------------------------------------------


def workers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "snodo-aio-worker" and t.is_alive()]


def test_blocking_requests_share_at_most_32_workers_that_end_with_the_last_client() -> None:
    """asyncio: direct requests "run on a shared pool of at most 32 worker threads"; "the
    pool's threads end when the last AsyncClient closes"."""
    release = threading.Event()
    runtime = Runtime("blocking", "1.0")
    runtime.add_tool("wait", lambda arguments, ctx: str(release.wait(30.0)))

    async def main() -> list[Any]:
        client = await snodo.aio.direct(runtime)
        try:
            calls = [asyncio.ensure_future(client.call_tool("wait", {})) for _ in range(40)]
            await asyncio.to_thread(wait_until, lambda: len(workers()) >= 32, 10.0)
            running = len(workers())
            release.set()
            results = await asyncio.gather(*calls)
            return [running, results]
        finally:
            release.set()
            await client.aclose()

    running, results = asyncio.run(main())
    assert running == 32
    assert [r["content"][0]["text"] for r in results] == ["True"] * 40
    wait_until(lambda: not workers(), 5.0)


UVLOOP_PROGRAM = """\
import sys, uvloop, snodo, snodo.aio
from examples.example_runtime import build


async def main():
    texts = []
    server = snodo.Stdio(sys.executable, ["-m", "snodo.server", "examples.example_runtime:runtime"])
    async with await snodo.aio.connect(server) as client:
        texts.append((await client.call_tool("echo", {"text": "stdio"}))["content"][0]["text"])
    async with await snodo.aio.direct(build()) as client:
        texts.append((await client.call_tool("echo", {"text": "direct"}))["content"][0]["text"])
    return texts


loop = uvloop.new_event_loop()
print(type(loop).__module__, loop.run_until_complete(main()))
loop.close()
"""


def test_the_async_client_runs_on_uvloop() -> None:
    """asyncio: "Runs on the default loop and on uvloop" (stdio and direct), in a program of
    its own (uvloop's loop keeps process-wide descriptors)."""
    pytest.importorskip("uvloop")
    done = subprocess.run(
        [PYTHON, "-c", UVLOOP_PROGRAM],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split(maxsplit=1) == ["uvloop", "['stdio', 'direct']\n"]


@pytest.fixture
def no_workers_left() -> Iterator[None]:
    yield
    wait_until(lambda: not workers(), 5.0)


def test_an_async_subscription_read_to_its_end_leaves_no_owner_watch(
    no_workers_left: None,
) -> None:
    """asyncio: ``async for event in sub`` gives every event, ending with snodo.Closed; the
    stream read to its end no longer watches its owner (a stream the server ended, never
    aclose()d, kept the owner-watch thread of its client's owner running)."""
    runtime = Runtime("notes", "1.0")
    runtime.add_resource("file:///notes.md", lambda ctx: "# notes")

    async def main() -> tuple[list[Any], Any]:
        async with await snodo.aio.direct(runtime) as client:
            sub = await client.listen({"resourceSubscriptions": ["file:///notes.md"]})
            runtime.resource_updated("file:///notes.md")
            runtime.close_subscriptions()
            return [event async for event in sub], sub

    events, sub = asyncio.run(main())
    assert [type(e) for e in events] == [snodo.Notification, snodo.Closed]
    assert events[-1] == snodo.Closed(None)
    assert sub.subscription._watch is None


# -- fleets --------------------------------------------------------------------------------


def test_a_name_two_fleet_servers_give_goes_to_the_first_in_config_order(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Fleets: "A name two servers give goes to the first in config order (logged)": server
    "a"'s tool "b_c" and server "a_b"'s tool "c" are both "a_b_c"."""
    for module, tool in (("first_server", "b_c"), ("second_server", "c")):
        (tmp_path / f"{module}.py").write_text(
            "from snodo.server import Runtime\n"
            f"runtime = Runtime({module!r}, '1.0')\n"
            f"runtime.add_tool({tool!r}, lambda arguments, ctx: {module!r})\n",
            encoding="utf-8",
        )

    def entry(module: str) -> dict[str, Any]:
        return {"command": PYTHON, "args": ["-m", "snodo.server", f"{module}:runtime"]}

    config = {"mcpServers": {"a": entry("first_server"), "a_b": entry("second_server")}}
    with caplog.at_level(logging.WARNING, logger="snodo.fleet"):
        with snodo.Fleet(config, connect_options={"cwd": str(tmp_path)}) as fleet:
            tools = fleet.list_tools()
            result = fleet.call_tool("a_b_c", {})
    assert [(t["name"], t["fleet"]["server"]) for t in tools] == [("a_b_c", "a")]
    assert result["content"][0]["text"] == "first_server"
    assert "two servers give the same name" in caplog.text


# -- ping_interval -------------------------------------------------------------------------


def test_under_temporary_a_failed_ping_is_only_logged(caplog: pytest.LogCaptureFixture) -> None:
    """Restart policies: ping_interval under "temporary": "a failed or timed-out ping ... is
    only logged, and the connection stays open" (here: a server stopped with SIGSTOP, then
    continued, answers the next call)."""
    client = snodo.connect(
        support.snodo_server(), cwd=ROOT, protocol="2025-11-25", ping_interval=0.2
    )
    pid = client.transport.pid
    try:
        with caplog.at_level(logging.WARNING, logger="snodo.connection"):
            os.kill(pid, signal.SIGSTOP)
            try:
                wait_until(lambda: "ping failed" in caplog.text, 10.0)
            finally:
                os.kill(pid, signal.SIGCONT)
        assert client.state == "ready" and not client.closed
        assert client.call_tool("echo", {"text": "hi"})["content"][0]["text"] == "hi"
        assert client.transport.pid == pid
    finally:
        client.close()


# -- limits --------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [LATEST, "2025-11-25"])
def test_an_event_stream_answering_a_call_is_one_body_notifications_included(version: str) -> None:
    """Limits: "An event stream that answers a request counts as one body, notifications
    included": fifty progress reports of 200 bytes pass a 4 KiB limit that the answer alone
    does not (the same call without progress= succeeds)."""
    runtime = Runtime("chatty", "1.0")

    def chatty(arguments: dict[str, Any], ctx: Any) -> str:
        for i in range(50):
            ctx.progress(i, 50, "x" * 200)
        return "done"

    runtime.add_tool("chatty", chatty)
    server = serve_http(runtime)
    try:
        client = snodo.connect(snodo.Http(server.url), protocol=version, max_response_bytes=4096)
        try:
            with pytest.raises(snodo.McpError) as raised:
                client.call_tool("chatty", {}, progress=lambda params: None)
            assert raised.value.code == -32000
            assert raised.value.cause == ("max_response_bytes", 4096)
            assert client.call_tool("chatty", {})["content"][0]["text"] == "done"
        finally:
            client.close()
    finally:
        server.close()
