"""Errors that say what is wrong (issue 18 item 7): an input handler's answer that does not fit
its kind is -32603 naming the field (``inputs.response_problem``), over stdio and HTTP, in both
eras, and the connection keeps serving; a server that exits at start names its exit status or
the signal that killed it, and ``snodo.Fleet`` shows that message unchanged.

The seed: "A sampling or roots response is checked for its result shape ... before it is sent,
so a handler bug is a -32603 error on the client rather than a -32602 from the server."
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from typing import Any

import pytest

import snodo
from examples import example_runtime
from snodo.protocol import errors
from snodo.protocol.inputs import response_problem
from snodo.server.http_server import serve_http
from tests.support import stdio_support as support
from tests.support.stdio_support import wait_until

#: Autouse fixtures: process-wide parts started first; no child or fd left behind.
stdio_warm_up = support.stdio_warm_up
stdio_no_leaks = support.stdio_no_leaks

STATELESS = "2026-07-28"
VERSIONS = [STATELESS, "2025-11-25"]


# -- the pure rule: the first problem, by its path ----------------------------------------


@pytest.mark.parametrize(
    ("kind", "answer", "problem"),
    [
        ("roots", {"roots": [{"uri": "file:///a"}, {"name": "b"}]}, "roots[1].uri: missing"),
        (
            "roots",
            {"roots": [{"uri": "http://x"}]},
            "roots[0].uri: 'http://x' is not a file:// URI",
        ),
        ("roots", {"roots": "file:///a"}, "roots: must be an array, got a string"),
        ("roots", {}, "roots: missing"),
        (
            "sampling",
            {"role": "bot", "content": {"type": "text", "text": "x"}, "model": "m"},
            "role: 'bot' is not one of user, assistant",
        ),
        (
            "sampling",
            {"role": "assistant", "content": {"type": "foo"}, "model": "m"},
            "content.type: 'foo' is not one of text, image, audio, tool_use, tool_result",
        ),
        (
            "sampling",
            {"role": "assistant", "content": [{"type": "text", "text": 1}], "model": "m"},
            "content[0].text: must be a string, got a number",
        ),
        ("sampling", {"role": "user", "content": {"type": "text", "text": "x"}}, "model: missing"),
        (
            "sampling",
            {"role": "user", "content": {"type": "image", "data": "AA=="}, "model": "m"},
            "content.mimeType: missing",
        ),
        ("form", {"action": "maybe"}, "action: 'maybe' is not one of accept, decline, cancel"),
        ("form", {"action": "accept", "content": []}, "content: must be an object, got an array"),
        (
            "url",
            {"action": "accept", "_meta": {"k": b"x"}},
            "_meta.k: a Python bytes is not JSON data",
        ),
    ],
)
def test_the_problem_names_the_field(kind: str, answer: Any, problem: str) -> None:
    assert response_problem(kind, answer) == problem


# -- over stdio and HTTP ------------------------------------------------------------------


def bad_roots(params: dict[str, Any]) -> dict[str, Any]:
    return {"roots": [{"uri": "file:///ok"}, {"name": "no uri"}]}


def bad_sampling(params: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": {"type": "foo"}, "model": "m"}


def bad_form(params: dict[str, Any]) -> dict[str, Any]:
    return {"action": "maybe"}


BAD = [
    ("roots", {}, bad_roots, "roots[1].uri: missing"),
    ("summarize", {"text": "t"}, bad_sampling, "content.type: 'foo' is not one of"),
    ("deploy", {}, bad_form, "action: 'maybe' is not one of accept, decline, cancel"),
]
KIND = {"roots": "roots", "summarize": "sampling", "deploy": "form"}


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    with serve_http(example_runtime.build()) as server:
        yield server.url


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("version", VERSIONS)
def test_an_invalid_answer_names_the_field_and_the_connection_keeps_serving(
    transport: str, version: str, http_url: str
) -> None:
    """Each kind's invalid answer fails its call -32603 with the field in the message (on the
    session era the server is answered that error and passes it on); the next call works."""
    handlers = {KIND[tool]: handler for tool, _, handler, _ in BAD}
    target: Any = support.snodo_server() if transport == "stdio" else snodo.Http(http_url)
    options: dict[str, Any] = {"cwd": str(support.ROOT)} if transport == "stdio" else {}
    with snodo.connect(target, protocol=version, input_handlers=handlers, **options) as client:
        for tool, arguments, _, field in BAD:
            with pytest.raises(snodo.McpError) as caught:
                client.call_tool(tool, arguments, timeout=10.0)
            assert caught.value.code == -32603, caught.value
            assert "returned an invalid" in caught.value.message
            assert field in caught.value.message
            assert client.call_tool("echo", {"text": "still here"})["content"][0]["text"] == (
                "still here"
            )


# -- a server that exits at start ---------------------------------------------------------


def test_exit_messages_name_the_status_or_the_signal() -> None:
    assert errors.exit_message(3) == "The server exited with status 3"
    assert errors.exit_message(-9) == "The server was killed by signal 9 (SIGKILL)"
    exited = errors.server_exit_error(-signal.SIGTERM)
    assert exited.cause == ("exit_status", -signal.SIGTERM) and exited.code == -32000
    tailed = errors.connection_error("The server exited with status 3: boom", cause=exited.cause)
    tailed.cause = ("exit_status", 3)
    before = errors.exited_at_start(tailed)
    assert before.message == "The server exited with status 3 at start: boom"
    assert errors.exited_at_start(before) is before
    other = errors.connection_error("Connection closed")
    assert errors.exited_at_start(other) is other


KILL_SELF = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"


@pytest.mark.parametrize(
    ("command", "said", "cause"),
    [
        (
            [str(support.SERVERS / "broken_exit.py"), "--exit-at-start", "3"],
            "The server exited with status 3 at start",
            ("exit_status", 3),
        ),
        (
            ["-c", KILL_SELF],
            "The server was killed by signal 9 (SIGKILL) at start",
            ("exit_status", -9),
        ),
    ],
    ids=["status-3", "sigkill"],
)
@pytest.mark.parametrize("protocol", [None, "2025-11-25"], ids=["negotiated", "pinned"])
def test_a_server_that_exits_at_start_says_so(
    command: list[str], said: str, cause: tuple[str, int], protocol: str | None
) -> None:
    """connect() fails -32000 saying the server exited (with its status, or the signal) before
    it answered initialize; the cause keeps the status."""
    with pytest.raises(snodo.McpError) as caught:
        snodo.connect(snodo.Stdio(support.PYTHON, command), protocol=protocol, timeout=30.0)
    assert caught.value.code == -32000 and caught.value.kind == "transport"
    assert caught.value.message.startswith(said), caught.value.message
    assert caught.value.cause == cause


def test_the_fleet_shows_the_exit_message_unchanged() -> None:
    """Fleet.status() carries the clearer message as connect() gives it."""
    args = [str(support.SERVERS / "broken_exit.py"), "--exit-at-start", "3"]
    with pytest.raises(snodo.McpError) as connecting:
        snodo.connect(snodo.Stdio(support.PYTHON, args), protocol="2025-11-25")
    entry = {"command": support.PYTHON, "args": args, "protocol": "2025-11-25"}
    with snodo.Fleet({"mcpServers": {"quits": {**entry, "restart": "temporary"}}}) as fleet:

        def failed() -> dict[str, Any] | None:
            row: dict[str, Any] = fleet.status()["quits"]
            return row if row["state"] == "failed" else None

        row = wait_until(failed)
    assert row["error"] == str(connecting.value)
    assert "The server exited with status 3 at start" in row["error"]
