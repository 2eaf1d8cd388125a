"""snodo.testing.servers: a Runtime served over HTTP (in a process or a thread) and over stdio,
killed, frozen, resumed and restarted, as a client with ``restart="transient"`` sees it.

Real servers: ``python -m snodo.server --http`` in its own process group, ``serve_http`` in a
thread of this process, and stdio servers the client starts. Every server is on 127.0.0.1.
"""

from __future__ import annotations

import os
import queue
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import snodo
from snodo.testing import ServedRuntime, serve_http, serve_stdio, server_process
from snodo.testing.leaks import command_line
from snodo.testing.servers import empty_runtime
from tests.support.stdio_support import stdio_no_leaks, stdio_warm_up

__all__ = ["stdio_no_leaks", "stdio_warm_up"]

RUNTIME = "snodo.testing.servers:empty_runtime"
FAST = {"initial": 0.01, "factor": 2.0, "cap": 0.1}
SESSION = "2025-11-25"
STATELESS = "2026-07-28"


def echo(client: snodo.Client, text: str, timeout: float = 5.0) -> str:
    answer: Any = client.call_tool("echo", {"text": text}, timeout=timeout)
    return str(answer["content"][0]["text"])


def transient(target: Any, protocol: str = STATELESS) -> snodo.Client:
    return snodo.connect(
        target, protocol=protocol, restart="transient", backoff=FAST, max_restarts=100, timeout=5
    )


@pytest.fixture
def served() -> Iterator[ServedRuntime]:
    with serve_http(RUNTIME) as server:
        yield server


def states_until(states: queue.Queue[snodo.StateChange], wanted: str) -> list[snodo.StateChange]:
    """The state changes up to the first ``wanted`` one (each within 10 s)."""
    seen = []
    while not seen or seen[-1].state != wanted:
        seen.append(states.get(timeout=10.0))
    return seen


def test_an_http_process_listens_on_127_0_0_1_in_its_own_process_group(
    served: ServedRuntime,
) -> None:
    assert served.url is not None and served.url.startswith("http://127.0.0.1:")
    assert served.url.endswith("/mcp")
    assert served.target == snodo.Http(served.url)
    assert served.pid is not None and os.getpgid(served.pid) == served.pid
    assert "snodo.server --http --host 127.0.0.1" in command_line(served.pid)
    with snodo.connect(served.target) as client:
        assert echo(client, "hello") == "hello"


def test_killed_the_calls_fail_and_started_again_on_the_same_port_they_work(
    served: ServedRuntime,
) -> None:
    url, pid = served.url, served.pid
    with transient(served.target) as client:
        assert echo(client, "before") == "before"
        served.kill()
        assert served.pid is None and not served.running
        with pytest.raises(snodo.McpError) as down:
            echo(client, "while down", timeout=0.5)
        assert down.value.code in (-32000, -32001)
        served.start()
        assert served.url == url and served.pid != pid
        assert echo(client, "after") == "after"


def test_stopped_it_answers_nothing_and_resumed_it_answers_again(served: ServedRuntime) -> None:
    with transient(served.target) as client:
        assert echo(client, "one") == "one"
        served.stop()
        with pytest.raises(snodo.McpError) as frozen:
            echo(client, "frozen", timeout=0.3)
        assert frozen.value.code == -32001  # timed out: the server holds the connection
        served.resume()
        assert echo(client, "two") == "two"


def test_a_restarted_session_era_server_forgot_the_session_and_the_client_starts_another(
    served: ServedRuntime,
) -> None:
    with transient(served.target, SESSION) as client:
        assert client.session is not None
        first = client.session.session_id
        pid = served.pid
        served.restart()
        assert served.pid != pid
        assert echo(client, "again") == "again"
        assert client.session is not None and client.session.session_id != first


def test_a_runtime_in_a_thread_is_served_and_restarted_on_the_same_port() -> None:
    with serve_http(empty_runtime(), in_process=True) as served:
        assert served.pid is None and served.url is not None
        assert served.url.startswith("http://127.0.0.1:")
        url = served.url
        with transient(served.target, SESSION) as client:
            assert echo(client, "thread") == "thread"
            served.restart()
            assert served.url == url
            assert echo(client, "back") == "back"
        with pytest.raises(TypeError, match="in_process=False"):
            served.stop()


def test_a_runtime_named_by_its_file_is_served(tmp_path: Path) -> None:
    source = tmp_path / "my_app_runtime.py"
    source.write_text(
        textwrap.dedent(
            """
            from snodo.testing.servers import empty_runtime
            runtime = empty_runtime()
            """
        )
    )
    with serve_http(f"{source}:runtime") as served, snodo.connect(served.target) as client:
        assert echo(client, "from a file") == "from a file"


def test_a_process_needs_the_runtime_by_name() -> None:
    with pytest.raises(TypeError, match="module:attribute"):
        serve_http(empty_runtime())


def test_a_stdio_server_is_the_clients_child_and_is_killed_stopped_and_resumed() -> None:
    served = serve_stdio(RUNTIME)
    assert isinstance(served.target, snodo.Stdio) and served.pid is None
    states: queue.Queue[snodo.StateChange] = queue.Queue()
    with snodo.connect(
        served.target, protocol=SESSION, restart="transient", backoff=FAST, on_state=states
    ) as client:
        first = server_process(client)
        assert RUNTIME in command_line(first)
        served.kill(client)
        assert [c.state for c in states_until(states, "restarting")][-1] == "restarting"
        assert states_until(states, "ready")[-1].restarts == 1
        assert echo(client, "restarted") == "restarted"
        second = server_process(client)
        assert second != first
        served.stop(client)
        with pytest.raises(snodo.McpError) as frozen:
            echo(client, "frozen", timeout=0.3)
        assert frozen.value.code == -32001
        served.resume(client)
        assert echo(client, "thawed") == "thawed"
        with pytest.raises(TypeError, match="pass the client"):
            served.kill()
        with pytest.raises(TypeError, match="restarts through its client"):
            served.restart()


def test_server_process_is_only_for_stdio_clients(served: ServedRuntime) -> None:
    with snodo.connect(served.target) as client, pytest.raises(TypeError, match="no server"):
        server_process(client)


def test_close_ends_the_process_and_its_group() -> None:
    served = serve_http(RUNTIME)
    pid = served.pid
    assert pid is not None
    served.close()
    assert served.pid is None
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)
