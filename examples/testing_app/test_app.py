"""The notebook's tests: what it does when its server crashes, its stream is cut, its server
freezes and its owner is killed. Through ``snodo.testing``'s public kit only (the pytest plugin's
fixtures), with the leak check on every test (the module's marker).

Run: ``pytest examples/testing_app`` (snodo's plugin is loaded by its entry point; add
``-p snodo`` where plugin autoloading is off).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from app import Notebook, Unavailable

HERE = Path(__file__).resolve().parent
SERVER = "notes_server.py:runtime"

pytestmark = pytest.mark.snodo_leak_check


@pytest.fixture
def server(served_runtime: Any) -> Any:
    """The notes server over stdio: every connection (and restart) starts a fresh process."""
    return served_runtime(SERVER, "stdio", cwd=str(HERE))


def test_after_the_server_crashes_the_notebook_works_on_a_new_server(server: Any) -> None:
    with Notebook(server.target) as book:
        assert book.add("first") == 1
        server.kill(book.client)  # SIGKILL, as a crash would
        assert book.wait_for("restarting").error is not None
        assert book.wait_for("ready").restarts == 1
        assert book.add("second") == 1  # a new server: the first note died with the old one
        assert book.notes() == ["second"]
        assert book.states == ["connecting", "ready", "restarting", "ready"]


def test_a_call_whose_stream_is_cut_is_lost_and_the_next_one_works(
    server: Any, fault_proxy: Any
) -> None:
    proxy = fault_proxy.stdio(server.target)
    with Notebook(proxy.target) as book:
        assert book.add("kept") == 1
        proxy.cut("tools/call")  # the next answer stops half-way: the server's stream ends
        with pytest.raises(Unavailable) as lost:
            book.add("maybe")
        assert lost.value.kind == "lost"  # it may or may not have been kept
        book.wait_for("ready")
        assert book.add("after") == 1
        assert "restarting" in book.states


def test_a_frozen_server_times_out_and_answers_once_resumed(server: Any) -> None:
    with Notebook(server.target) as book:
        assert book.add("one") == 1
        server.stop(book.client)  # SIGSTOP: the process holds its pipes, answers nothing
        with pytest.raises(Unavailable) as frozen:
            book.add("two", timeout=0.3)
        assert frozen.value.kind == "timeout"
        server.resume(book.client)
        assert book.notes()[0] == "one"


def test_when_its_owner_is_killed_the_notebook_is_closed_for_good(
    server: Any, snodo_owner: Any, crash_owner: Any
) -> None:
    owner = snodo_owner()
    book = owner.run(Notebook, server.target)  # opened by (so owned by) that owner
    try:
        assert book.add("owned") == 1
        crash_owner(owner)
        assert book.wait_for("closed").state == "closed"
        with pytest.raises(Unavailable) as closed:
            book.add("too late")
        assert closed.value.kind == "closed"
        assert "ended" in closed.value.error.message
        assert book.closed
    finally:
        book.close()
