"""The API tour's code blocks run as written (issue 18 item 4; the tour was the README's until
issue 23 moved it to docs/tour.md and docs/guides/many-workers.md): each ``python`` block of
those pages is executed here against the servers the page sets up, and what it prints or
leaves behind is checked. A block that names a server the reader has (``my_server.py``,
``my-server``, ``https://example.test/mcp``) runs against a real stand-in: a file of that name,
a command of that name on ``PATH`` or a served Runtime, substituted textually (``substituted``
fails when the page's text changed). Every block must be listed here
(``test_every_block_is_checked``). The map of the tour's claims to tests is docs/tour-claims.md.
The other pages' blocks (and the README's) run in tests/test_docs_examples.py.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import os
import queue
import re
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import snodo
from examples.example_runtime import build
from snodo.server import Runtime
from snodo.server.http_server import HttpServer, serve_http
from tests.support import stdio_support as support
from tests.support.stdio_support import PYTHON, ROOT

#: The pages whose blocks this module runs (test_docs_examples leaves them out).
TOUR_PAGES = (ROOT / "docs" / "tour.md", ROOT / "docs" / "guides" / "many-workers.md")

#: Autouse fixtures: process-wide parts started first; no child or fd left behind.
stdio_warm_up = support.stdio_warm_up
stdio_no_leaks = support.stdio_no_leaks

#: Blocks of features other issue-18 work documents (their own tests run them).
OTHERS = ("snodo.Sse", "notify(", "roots_changed", "validate_output", "2024-11-05", "2025-03-26")


def blocks() -> list[tuple[str, str]]:
    """The tour pages' python blocks: (page:line, code)."""
    found = []
    for page in TOUR_PAGES:
        text = page.read_text(encoding="utf-8")
        for match in re.finditer(r"^```python\n(.*?)^```$", text, re.M | re.S):
            line = text[: match.start()].count("\n") + 2
            found.append((f"{page.name}:{line}", match.group(1)))
    return found


def block(marker: str) -> str:
    """The code of the one tour block that contains ``marker``."""
    found = [code for _, code in blocks() if marker in code]
    assert len(found) == 1, f"{len(found)} tour python blocks contain {marker!r}"
    return found[0]


def substituted(code: str, *pairs: tuple[str, str]) -> str:
    """``code`` with each ``old`` replaced by ``new``; each ``old`` must be in it."""
    for old, new in pairs:
        assert old in code, f"the block no longer contains {old!r}"
        code = code.replace(old, new)
    return code


def run(code: str, namespace: dict[str, Any], name: str = "docs/tour.md") -> str:
    """Execute ``code`` in ``namespace``; what it printed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, name, "exec"), namespace)
    return out.getvalue()


#: A line of each block (found in that block only), and the test that runs it.
CHECKED = {
    'client = snodo.direct(runtime, protocol="2025-11-25")': "test_connecting_block",
    'snodo.Stdio("python", ["my_server.py"])': "test_connect_block",
    "client.discover()  # 2026-07-28 only": "test_calls_block",
    'client.call_tool("no-such-tool", {})': "test_errors_block",
    "# Called in the calling thread, before the call returns.": "test_progress_block",
    "def confirm(params):": "test_input_handlers_block",
    "pending = client.call_tool(": "test_input_required_block",
    "client = snodo.connect(snodo.Http(url), cache=True)": "test_cache_block",
    "for event in sub:  # next()": "test_subscriptions_block",
    'task = client.call_tool_task("build", {"target": "docs"})': "test_tasks_block",
    "on_state=states,": "test_restart_block",
    "messages = queue.Queue(maxsize=1000)": "test_log_messages_block",
    'print(error.data["stderr"])': "test_stderr_block",
    '"calls_abandoned": 0,': "test_stats_block",
    'snodo.Fleet.from_file("servers.json")': "test_fleet_block",
    "async def main():": "test_asyncio_block",
    "from snodo.actors import start_client": "test_actor_block",
    "stores = redis_oauth_stores(": "test_many_workers_block",
    "cache = snodo.RedisCache(": "test_many_workers_cache_block",
}


def test_every_block_is_checked() -> None:
    """Every python block of the tour pages is run by a test of this module."""
    unchecked = [
        line
        for line, code in blocks()
        if sum(marker in code for marker in CHECKED) != 1
        and not any(mark in code for mark in OTHERS)
    ]
    assert not unchecked, f"tour python blocks (page:line) no test here runs: {unchecked}"
    names = set(globals())
    assert all(test in names for test in CHECKED.values())


# -- servers the blocks use --------------------------------------------------------------


@pytest.fixture(scope="module")
def http_server() -> Iterator[HttpServer]:
    """The example Runtime over Streamable HTTP on 127.0.0.1, shared by the module."""
    server = serve_http(build())
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory first on ``PATH`` holding ``python`` (this interpreter); also the cwd."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python = bin_dir / "python"
    python.write_text(f'#!/bin/sh\nexec "{PYTHON}" "$@"\n', encoding="utf-8")
    python.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.chdir(tmp_path)
    return bin_dir


def command(bin_dir: Path, name: str, body: str) -> None:
    """An executable ``name`` on ``PATH``: a Python script run by this interpreter."""
    path = bin_dir / name
    path.write_text(f"#!{PYTHON}\n{textwrap.dedent(body)}", encoding="utf-8")
    path.chmod(0o755)


def close_all(namespace: dict[str, Any]) -> None:
    """Close every client a block left open (a block may rebind ``client`` several times)."""
    for value in namespace.values():
        if isinstance(value, snodo.Client):
            value.close()


# -- A tour of the API ---------------------------------------------------------------------


def test_connecting_block(monkeypatch: pytest.MonkeyPatch) -> None:
    """Connecting: the block runs alone; ``direct`` negotiates the newest version, a pin
    gives that version, a list allows those, and ``with`` closes the client."""
    code = block('client = snodo.direct(runtime, protocol="2025-11-25")')
    clients: list[snodo.Client] = []
    real_direct = snodo.direct

    def direct(*args: Any, **keys: Any) -> snodo.Client:
        clients.append(real_direct(*args, **keys))
        return clients[-1]

    monkeypatch.setattr(snodo, "direct", direct)  # the clients the block opens, to check them
    printed = run(code, {"__name__": "tour"})
    monkeypatch.undo()
    try:
        assert printed == "2026-07-28\n"
        versions = [c.version for c in clients]
        assert versions == ["2026-07-28", "2025-11-25", "2026-07-28", "2026-07-28"]
        assert clients[-1].closed and not clients[0].closed
        assert clients[0].call_tool("echo", {"text": "hi"})["content"][0]["text"] == "hi"
        assert clients[0].list_tools()[0]["description"] == "Echo the text back"
    finally:
        for client in clients:
            client.close()


class Provider:
    """A snodo.auth.TokenProvider: a fixed token, never refreshed."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def token(self, url: str) -> str | None:
        self.asked.append(url)
        return "token-1"

    def refresh(self, challenge: Any, *, url: str, status: int, token: str | None) -> str | None:
        return None


def test_connect_block(on_path: Path, http_server: HttpServer) -> None:
    """Connecting over stdio (``python my_server.py`` with ``env=``) and HTTP (with
    ``headers=``, a token provider and an OAuthClient), as the block is written; the stdio
    server sees the overlaid variable."""
    (Path.cwd() / "my_server.py").write_text(
        textwrap.dedent(
            """\
            import os, sys
            from examples.example_runtime import runtime
            from snodo.server.stdio_server import serve_stdio
            if os.environ.get("LOG_LEVEL") != "warn":
                sys.exit("LOG_LEVEL is not warn")
            sys.exit(serve_stdio(runtime))
            """
        ),
        encoding="utf-8",
    )
    url = http_server.url
    code = substituted(
        block('snodo.Stdio("python", ["my_server.py"])'), ('"https://example.test/mcp"', "url")
    )
    first = code.splitlines()[0]
    provider = Provider()
    namespace: dict[str, Any] = {
        "snodo": snodo,
        "url": url,
        "token": "token-0",
        "provider": provider,
        "webbrowser": __import__("webbrowser"),
    }
    opened: list[snodo.Client] = []
    try:
        for statement in code.split("\nclient = "):
            statement = statement if statement.startswith("client = ") else "client = " + statement
            run(statement, namespace)
            opened.append(namespace["client"])
        assert first.startswith("client = snodo.connect(snodo.Stdio")
        assert len(opened) == 4
        for client in opened:
            assert client.call_tool("echo", {"text": "hi"})["content"][0]["text"] == "hi"
        assert provider.asked and all(asked == url for asked in provider.asked)
        assert isinstance(namespace["oauth"], snodo.oauth.OAuthClient)
    finally:
        for client in opened:
            client.close()


def example_client(version: str = "2026-07-28") -> snodo.Client:
    return snodo.direct(build(), protocol=version)


#: Per era, the line of the Calls block that is the other era's, and its method.
OTHER_ERA = {
    "2026-07-28": ("client.ping()  # session-era only", "ping"),
    "2025-11-25": ("client.discover()  # 2026-07-28 only", "server/discover"),
}


@pytest.mark.parametrize("version", sorted(OTHER_ERA))
def test_calls_block(version: str) -> None:
    """Calls: the block runs on each era, without the one line its comment gives to the other
    era (which fails here with -32601 naming the method); ``close()`` closes the client."""
    line, method = OTHER_ERA[version]
    code = substituted(block("client.discover()  # 2026-07-28 only"), (line, "pass"))
    client = example_client(version)
    namespace: dict[str, Any] = {"client": client, "snodo": snodo}
    try:
        with pytest.raises(snodo.McpError, match=method) as raised:
            run(line, {"client": client})
        assert raised.value.code == -32601
        run(code, namespace)
        assert client.closed
        names = [t["name"] for t in namespace["tools"]]
        assert names[:3] == ["echo", "add", "slow_count"]
        page = namespace["page"]
        assert isinstance(page, snodo.Page)
        assert [t["name"] for t in page.items] == names and page.next_cursor is None
        assert namespace["more"].items == page.items  # a None cursor asks for the first page
        assert namespace["result"]["content"] == [{"type": "text", "text": "hi"}]
    finally:
        client.close()


def test_errors_block() -> None:
    """Errors: an unknown tool is the server's -32602, with its message and data."""
    client = example_client()
    try:
        printed = run(
            block('client.call_tool("no-such-tool", {})'), {"client": client, "snodo": snodo}
        )
        assert printed.startswith("-32602 "), printed
    finally:
        client.close()


def test_progress_block() -> None:
    """Progress: the callback runs in the calling thread before the call returns; a queue
    receives snodo.Progress items."""
    client = example_client()
    namespace: dict[str, Any] = {"client": client, "queue": queue}
    try:
        printed = run(block("# Called in the calling thread, before the call returns."), namespace)
        assert printed.splitlines() == [f"{i} of 3 step {i} of 3" for i in (1, 2, 3)]
        reports: queue.Queue[Any] = namespace["reports"]
        items = [reports.get_nowait() for _ in range(3)]
        assert all(isinstance(item, snodo.Progress) for item in items)
        assert [item.params["progress"] for item in items] == [1, 2, 3]
        threads: list[threading.Thread] = []
        client.call_tool(
            "slow_count", {"n": 1}, progress=lambda p: threads.append(threading.current_thread())
        )
        assert threads == [threading.current_thread()]
    finally:
        client.close()


def test_input_handlers_block() -> None:
    """Input handlers: the form handler answers inside the call, which returns the result."""
    namespace: dict[str, Any] = {"snodo": snodo, "runtime": build()}
    printed = run(block("def confirm(params):"), namespace)
    client = namespace["client"]
    try:
        assert printed == "Deploy to staging?\n"
        result = client.call_tool("deploy", {"env": "staging"})
        assert result["structuredContent"] == {"env": "staging", "status": "deployed"}
    finally:
        client.close()


def test_input_required_block() -> None:
    """InputRequired by hand: without a handler the call returns snodo.InputRequired, and the
    call again with the answers and request_state returns the result."""
    namespace: dict[str, Any] = {"snodo": snodo, "runtime": build()}
    run(block("pending = client.call_tool("), namespace)
    try:
        assert isinstance(namespace["pending"], snodo.InputRequired)
        assert namespace["result"]["structuredContent"] == {"env": "staging", "status": "deployed"}
    finally:
        namespace["client"].close()


def test_cache_block(http_server: HttpServer) -> None:
    """Response cache: the second list_tools is answered from the cache (not sent), and
    bypass_cache=True sends it."""
    namespace: dict[str, Any] = {"snodo": snodo, "url": http_server.url}
    code = block("client = snodo.connect(snodo.Http(url), cache=True)")
    lines = code.splitlines()
    run(lines[0], namespace)
    client: snodo.Client = namespace["client"]
    try:
        sent = []
        for line in lines[1:]:
            run(line, namespace)
            sent.append(client.stats()["calls_sent"])
        assert sent[1] == sent[0], "the second list_tools was sent"
        assert sent[2] == sent[1] + 1, "bypass_cache=True did not send"
        assert namespace["fresh"] == namespace["tools"]
    finally:
        client.close()


def test_subscriptions_block() -> None:
    """Subscriptions: the accepted subset, an update matched by the pattern, and the loop's
    end after snodo.Closed(None) once the server ends the stream."""
    code = block("for event in sub:  # next()")
    head, loop = code.split("\nfor event in sub:")
    runtime = Runtime("notes", "1.0")
    runtime.add_resource("file:///notes.md", lambda ctx: "# notes")
    reloaded: list[str] = []

    def reload(uri: str) -> None:
        reloaded.append(uri)
        runtime.close_subscriptions()

    def resync() -> None:
        raise AssertionError("no event was dropped or lost")

    client = snodo.direct(runtime)
    namespace: dict[str, Any] = {"snodo": snodo, "client": client}
    namespace.update(reload=reload, resync=resync)
    try:
        run(head, namespace)
        assert namespace["sub"].accepted == {
            "toolsListChanged": True,
            "resourceSubscriptions": ["file:///notes.md"],
        }
        runtime.resource_updated("file:///notes.md")
        run("for event in sub:" + loop, namespace)
        assert reloaded == ["file:///notes.md"]
        assert namespace["event"] == snodo.Closed(None)
    finally:
        client.close()


def test_tasks_block() -> None:
    """Tasks: call_tool_task returns a handle; result() is the tool's result; a wait that times
    out is -32001 and cancel() leaves the job cancelled (examples/tasks.py's runtime)."""
    from examples.tasks import build_runtime

    runtime = build_runtime()
    namespace: dict[str, Any] = {"snodo": snodo, "runtime": runtime}
    try:
        run(block('task = client.call_tool_task("build", {"target": "docs"})'), namespace)
        assert isinstance(namespace["task"], snodo.Task) and namespace["task"].id
        assert namespace["result"]["content"][0]["text"] == "built docs"
        assert namespace["job"].status == "cancelled"
    finally:
        close_all(namespace)
        runtime.close_tasks()


# -- Long-running programs -----------------------------------------------------------------


def test_restart_block(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a caller should do: the block runs from the repository's root and prints the
    tool's answer and the states connecting, ready, closed."""
    monkeypatch.chdir(ROOT)
    namespace: dict[str, Any] = {"__name__": "tour"}
    printed = run(block("on_state=states,"), namespace)
    lines = printed.splitlines()
    assert lines[0] == "hi"
    assert [line.split()[0] for line in lines[1:]] == ["connecting", "ready", "closed"], lines


def test_log_messages_block(on_path: Path) -> None:
    """Server log messages: ``name=`` names the server in each LogMessage, ``log_level=`` asks
    for info and above, and a call's own ``log_level="debug"`` asks for debug for that call."""
    server = on_path.parent / "logging_app.py"
    server.write_text(
        textwrap.dedent(
            """\
            from snodo.server import Runtime
            runtime = Runtime("logging-app", "1.0", logging=True)

            @runtime.tool
            def sync(args, ctx):
                ctx.log("info", "synced")
                ctx.log("debug", "details")
                return "ok"
            """
        ),
        encoding="utf-8",
    )
    command(
        on_path,
        "my-server",
        f"""\
        import runpy, sys
        sys.path.insert(0, {str(on_path.parent)!r})
        sys.argv = ["snodo.server", "logging_app:runtime"]
        runpy.run_module("snodo.server", run_name="__main__")
        """,
    )
    namespace: dict[str, Any] = {"snodo": snodo, "queue": queue}
    code = block("messages = queue.Queue(maxsize=1000)")
    run(code, namespace)
    client: snodo.Client = namespace["client"]
    try:
        message = namespace["message"]
        assert isinstance(message, snodo.LogMessage)
        assert (message.level, message.data, message.server) == ("info", "synced", "files")
        second = namespace["messages"].get(timeout=5.0)
        assert (second.level, second.data) == ("debug", "details"), "the call's own level"
        client.call_tool("sync", {})
        message = namespace["messages"].get(timeout=5.0)
        assert (message.level, message.data) == ("info", "synced"), "info and above only"
    finally:
        client.close()


def test_stderr_block(on_path: Path) -> None:
    """A server's stderr: a server that exits at start fails connect with its status and last
    stderr line, and ``data["stderr"]`` holds the kept lines."""
    command(
        on_path,
        "my-server",
        """\
        import sys
        print("starting", file=sys.stderr)
        print("fatal: config.toml not found", file=sys.stderr)
        sys.exit(1)
        """,
    )
    code = block('print(error.data["stderr"])')
    printed = run(code, {"snodo": snodo})
    shown = [line.split("  # ", 1)[1] for line in code.splitlines() if "print(" in line]
    assert printed.splitlines() == shown  # what the block's comments say it prints


def test_stats_block() -> None:
    """Stats: client.stats() has exactly the block's keys, with values of the same types."""
    shown = ast.literal_eval(block('"calls_abandoned": 0,'))
    client = example_client()
    try:
        client.call_tool("echo", {"text": "hi"})
        stats = client.stats()
        assert set(stats) == set(shown)
        for key, value in shown.items():
            assert isinstance(stats[key], type(value)) or (
                key.startswith("bytes") and stats[key] is None
            )
        assert stats["calls_sent"] >= 1 and stats["calls_completed"] >= 1
    finally:
        client.close()


# -- Fleets, asyncio, actors ---------------------------------------------------------------


GITLIKE = """\
from snodo.server import Runtime

runtime = Runtime("gitlike", "1.0")


@runtime.tool
def status(args, ctx):
    return "clean: " + args["repo_path"]


@runtime.prompt
def commit_message(args, ctx):
    return "Write a commit message"
"""


def test_fleet_block(on_path: Path) -> None:
    """Fleets: the block's calls on a fleet whose ``git`` is a Runtime with a ``status`` tool:
    the catalog names it ``git_status``, the call is routed, ``fleet["git"]`` is its Client and
    a reload reports what it changed."""
    workdir = on_path.parent
    (workdir / "gitlike.py").write_text(GITLIKE, encoding="utf-8")
    entry = {"command": "python", "args": ["-m", "snodo.server", "gitlike:runtime"]}
    (workdir / "servers.json").write_text(json.dumps({"mcpServers": {"git": entry}}))
    new_config = {"mcpServers": {"git": entry, "more": dict(entry, start="lazy")}}
    namespace: dict[str, Any] = {"snodo": snodo, "new_config": new_config}
    code = block('snodo.Fleet.from_file("servers.json")')
    code = substituted(
        code,
        (
            'fleet.call_tool("git_status", {"repo_path": "."}, timeout=10.0)',
            'called = fleet.call_tool("git_status", {"repo_path": "."}, timeout=10.0)',
        ),
        ('fleet["git"].list_prompts()', 'prompts = fleet["git"].list_prompts()'),
        ("fleet.reload(new_config)", "reloaded = fleet.reload(new_config)"),
    )
    printed = run(code, namespace)
    assert "git" in printed and "ready" in printed
    assert [t["name"] for t in namespace["tools"]] == ["git_status"]
    assert namespace["tools"][0]["fleet"] == {"server": "git", "name": "status"}
    assert namespace["called"]["content"][0]["text"] == "clean: ."
    assert [p["name"] for p in namespace["prompts"]] == ["commit_message"]
    assert namespace["reloaded"]["added"] == ["more"]


def test_fleet_json_block() -> None:
    """Fleets: the block's JSON config is accepted as it is (variables set), and a missing
    variable is an error that names it."""
    text = TOUR_PAGES[0].read_text(encoding="utf-8")
    found = re.search(r'^```json\n(\{\n  "mcpServers".*?)^```$', text, re.M | re.S)
    assert found is not None
    config = json.loads(found.group(1))
    from snodo.protocol import fleet_config

    env = {"DOCS_TOKEN": "t", "HOME": "/home/someone"}
    parsed = fleet_config.parse_config(config, env)
    assert [spec.name for spec in parsed] == ["git", "docs", "notes"]
    with pytest.raises((ValueError, snodo.McpError), match="DOCS_TOKEN"):
        fleet_config.parse_config(config, {"HOME": "/home/someone"})


MYAPP = """\
import threading, time
from snodo.server import Runtime

runtime = Runtime("myapp", "1.0")


@runtime.tool
def add(args, ctx):
    return {"sum": args["a"] + args["b"]}


def end_when_listened():
    # The tour's block listens until the stream ends: list a change, then end the stream.
    deadline = time.monotonic() + 30.0
    while runtime.subscription_source.count == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    runtime.add_tool("extra", lambda args, ctx: "")
    runtime.close_subscriptions()


threading.Thread(target=end_when_listened, daemon=True).start()
"""


def test_asyncio_block(on_path: Path) -> None:
    """asyncio: ``python -m snodo.server myapp.mcp:runtime`` from the cwd; 100 calls gathered,
    a listen whose ``async for`` sees the list change and ends with snodo.Closed."""
    package = on_path.parent / "myapp"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "mcp.py").write_text(MYAPP, encoding="utf-8")
    code = substituted(
        block("async def main():"),
        ("asyncio.run(main())", "asyncio.run(asyncio.wait_for(main(), 60.0))"),
        ("            ...", "            seen.append(event)"),
        (
            "        sums = await asyncio.gather(",
            "        global sums\n        sums = await asyncio.gather(",
        ),
    )
    namespace: dict[str, Any] = {"__name__": "tour", "seen": []}
    run(code, namespace)
    sums = namespace["sums"]
    assert [s["structuredContent"]["sum"] for s in sums] == list(range(1, 101))
    methods = [getattr(e, "method", None) for e in namespace["seen"]]
    assert methods[0] == "notifications/tools/list_changed"
    assert isinstance(namespace["seen"][-1], snodo.Closed)


def test_actor_block(on_path: Path) -> None:
    """Embedding in an actor application: 20 futures back at once, their results, and
    ``ref.stop()`` closes the connection."""
    command(
        on_path,
        "my-server",
        f"""\
        import runpy, sys
        sys.path.insert(0, {str(ROOT)!r})
        sys.argv = ["snodo.server", "examples.example_runtime:runtime"]
        runpy.run_module("snodo.server", run_name="__main__")
        """,
    )
    namespace: dict[str, Any] = {"__name__": "tour"}
    run(block("from snodo.actors import start_client"), namespace)
    sums = namespace["sums"]
    assert [s["structuredContent"]["sum"] for s in sums] == [2 * i for i in range(20)]
    assert not namespace["ref"].is_alive()


def test_many_workers_block(monkeypatch: pytest.MonkeyPatch, http_server: HttpServer) -> None:
    """Running many workers: the block's stores are sealed RedisStores on a real redis-server
    (tests/support/redis_server.py) that the OAuthClient uses; a token round-trips."""
    from tests.support.redis_server import redis_server

    with redis_server() as server:
        monkeypatch.setenv("SNODO_OAUTH_KEY", os.urandom(32).hex())
        code = substituted(
            block("stores = redis_oauth_stores("),
            ("redis://127.0.0.1:6379/0", server.url),
            ("https://example.test/mcp", http_server.url),
        )
        namespace: dict[str, Any] = {}
        run(code, namespace)
        oauth, client = namespace["oauth"], namespace["client"]
        try:
            assert oauth.tokens is namespace["stores"]["token_store"]
            assert client.list_tools()  # a server that asks no token: none is sent
            oauth.tokens.put("k", {"access_token": "t"})
            assert oauth.tokens.get("k") == {"access_token": "t"}
            raw = oauth.tokens.client.get(oauth.tokens.redis_key("k"))
            assert raw.startswith(b"snodo-sealed-1:") and b"my-daemon" not in raw
        finally:
            client.close()
            oauth.tokens.client.close()


def test_many_workers_cache_block(http_server: HttpServer) -> None:
    """Running many workers, the cache: the block's RedisCache on a real redis-server stores
    the listing in Redis, and a second client with its own RedisCache (another worker) hits it."""
    from tests.support.redis_server import redis_server

    with redis_server() as server:
        code = substituted(
            block("cache = snodo.RedisCache("),
            ("redis://127.0.0.1:6379/0", server.url),
            ("https://example.test/mcp", http_server.url),
        )
        namespace: dict[str, Any] = {"snodo": snodo}
        run(code, namespace)
        client, cache = namespace["client"], namespace["cache"]
        try:
            assert namespace["tools"]
            import redis

            with redis.Redis.from_url(server.url) as r:
                stored = list(r.scan_iter(match="my-daemon:cache:e:*"))
            assert stored  # the example Runtime's listing is public for a minute
            other = snodo.RedisCache(server.url, prefix="my-daemon:cache:")
            with snodo.connect(snodo.Http(http_server.url), cache=other) as second:
                sent = second.stats()
                assert second.list_tools() == namespace["tools"]
                assert second.stats()["calls_sent"] == sent["calls_sent"]  # a hit: not sent
            other.close()
        finally:
            client.close()
            cache.close()
