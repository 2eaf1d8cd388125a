"""Interop: ``Client.roots_changed()`` with ``@modelcontextprotocol/server-filesystem`` (pinned in
tests/interop), which started with no directory argument takes the client's roots and follows
``notifications/roots/list_changed`` by asking ``roots/list`` again (issue 18 item 5).

The server runs behind tests/servers/scripted_tee.py, which logs every line the client writes,
so a test can also see what was (not) sent. Waits are on the handler's calls and the server's
answers, each with a deadline.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import snodo
from tests.support import everything_support as everything
from tests.support import stdio_support as support
from tests.support.stdio_support import wait_until

#: Autouse fixtures: process-wide parts started first; no child or fd left behind.
stdio_warm_up = support.stdio_warm_up
stdio_no_leaks = support.stdio_no_leaks

ENTRY = everything.INTEROP / "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
TEE = support.SERVERS / "scripted_tee.py"
LISTED_ROOTS = {"roots": {"listChanged": True}}


@pytest.fixture(scope="module")
def node() -> str:
    return everything.ensure_installed()


class Roots:
    """The roots handler: answers with the current directory and counts the server's asks."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.asked = 0
        self.changed = threading.Condition()

    def __call__(self, params: dict[str, Any]) -> dict[str, Any]:
        with self.changed:
            self.asked += 1
            self.changed.notify_all()
            return {"roots": [{"uri": self.directory.as_uri(), "name": self.directory.name}]}

    def wait_asked(self, times: int, timeout: float = 10.0) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: self.asked >= times, timeout), self.asked


def allowed(client: snodo.Client) -> str:
    result = client.call_tool("list_allowed_directories", {})
    return str(result["content"][0]["text"])


def target(node: str, log: Path) -> snodo.Stdio:
    return snodo.Stdio(support.PYTHON, [str(TEE), str(log), node, str(ENTRY)])


@pytest.fixture
def dirs(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    yield Path(os.path.realpath(a)), Path(os.path.realpath(b))


def test_the_server_follows_the_clients_roots(
    node: str, dirs: tuple[Path, Path], tmp_path: Path
) -> None:
    """Roots declared with listChanged: the server lists A; the handler's answer becomes B,
    roots_changed(), and the server asks again and lists B."""
    a, b = dirs
    roots = Roots(a)
    log = tmp_path / "wire.jsonl"
    with snodo.connect(
        target(node, log),
        protocol="2025-11-25",
        input_handlers={"roots": roots},
        client_capabilities=LISTED_ROOTS,
        stderr="discard",
    ) as client:
        roots.wait_asked(1)  # the server asks once initialized
        assert wait_until(lambda: str(a) in allowed(client))
        roots.directory = b
        client.roots_changed()
        roots.wait_asked(2)
        assert wait_until(lambda: str(b) in allowed(client))
        assert str(a) not in allowed(client)
    sent = [m["method"] for m in support.read_messages(log) if "id" not in m and "method" in m]
    assert sent == ["notifications/initialized", "notifications/roots/list_changed"]


def test_without_list_changed_declared_nothing_is_sent(
    node: str, dirs: tuple[Path, Path], tmp_path: Path
) -> None:
    """A roots handler alone declares listChanged false: roots_changed() is -32021 saying
    what to declare, the server hears nothing and keeps its roots."""
    a, b = dirs
    roots = Roots(a)
    log = tmp_path / "wire.jsonl"
    with snodo.connect(
        target(node, log), protocol="2025-11-25", input_handlers={"roots": roots}, stderr="discard"
    ) as client:
        roots.wait_asked(1)
        assert wait_until(lambda: str(a) in allowed(client))
        roots.directory = b
        with pytest.raises(snodo.McpError) as refused:
            client.roots_changed()
        assert refused.value.code == -32021
        assert "listChanged" in refused.value.message
        assert str(a) in allowed(client)  # a round trip after the refusal: stdin is ordered
    assert roots.asked == 1
    assert "notifications/roots/list_changed" not in log.read_text()
