"""snodo.Fleet over a fleet of real servers written by us and by others, with partial failure.

One ``mcpServers`` config holds: snodo's Runtime over stdio (``python -m snodo.server``) and over
HTTP (``serve_http`` on 127.0.0.1); the official Python SDK's server over stdio
(tests/servers/sdk_server.py) and over Streamable HTTP (tests/servers/sdk_http_server.py);
``@modelcontextprotocol/server-everything`` (npm, pinned, tests/support/everything_support.py)
over stdio and over HTTP; two servers that never start (a command that does not exist, and one
that says why on stderr and exits at once); and one that crashes a second after each start
(tests/servers/fleet_crasher.py) under a small restart intensity with a fast backoff. Between
them the three protocol versions are negotiated or pinned, on both transports.

The tests check that ``status()`` tells the truth (state, version, transport, pid equal to the
server's own, restarts, errors that say why), that the catalog and routed calls, prompts and
resources reach every good server, that the crasher ends ``"failed"`` past its intensity while
the others answer throughout, and that ``close()`` leaves no process behind. Every wait polls
real state against a deadline.

Each test opens its own fleet (the conftest's thread and actor check runs per test, and the
crasher and ``close()`` change a fleet for good); the HTTP servers that are separate processes
(the SDK's, server-everything's) start once for the module, snodo's ``serve_http`` once per
test. Lazy starts, idle stops, reloads and catalog refreshes: tests/test_fleet.py.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest

import snodo
from snodo import McpError
from snodo.server.http_server import HttpServer, serve_http
from tests.support import client_runtime
from tests.support import everything_support as everything
from tests.support.started_processes import announced_port, stop
from tests.support.stdio_support import (
    PYTHON,
    ROOT,
    SERVERS,
    gone,
    no_leaks,
    running,
    starts,
    wait_until,
)

STATELESS = "2026-07-28"
SESSION = "2025-11-25"
OLDEST = "2025-06-18"
SUBS = "tests.servers.subs_runtime:runtime"
FAST = {"initial": 0.01, "factor": 2.0, "cap": 0.05}
#: The crasher: its lifetime after its first answer, and its restart intensity.
LIFETIME = 1.0
CRASHER_RESTARTS = 3
#: Why the server that exits at once says it cannot start.
WHY = "fleet-exits: cannot read /etc/fleet-exits.toml"
NO_SUCH_COMMAND = str(SERVERS / "no-such-server-for-the-fleet")
STOP_DEADLINE = 10.0
WAIT = 30.0

GOOD = (
    "runtime-stdio",
    "runtime-http",
    "sdk-stdio",
    "sdk-http",
    "everything-stdio",
    "everything-http",
)
FAILING = ("missing", "exits")
STDIO = ("runtime-stdio", "sdk-stdio", "everything-stdio")
#: The version each good server negotiates (or is pinned to) in the config below.
VERSIONS = {
    "runtime-stdio": STATELESS,  # probed
    "runtime-http": SESSION,  # pinned
    "sdk-stdio": STATELESS,  # probed
    "sdk-http": OLDEST,  # pinned
    "everything-stdio": SESSION,  # probed, refused, initialize
    "everything-http": OLDEST,  # a list without 2025-11-25: probed, refused, initialize
}
SUBS_TOOLS = {"burst", "touch", "finish", "pid", "open_count"}
SDK_TOOLS = {"echo", "add", "fail", "count", "deploy", "summarize", "roots", "announce", "pid"}


@pytest.fixture(autouse=True)
def _no_leaks() -> Iterator[None]:
    """No child process (zombies included) or fd outlives a test (the idle keep-alive sockets
    of snodo's process-wide HTTP pool aside); threads and actors: the conftest."""
    with no_leaks(pooled=True):
        yield


# -- the servers that run apart from the fleet ---------------------------------------------------


@dataclass
class SdkHttp:
    """One running sdk_http_server.py on 127.0.0.1."""

    process: subprocess.Popen[bytes]
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"


@pytest.fixture(scope="module")
def sdk_http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SdkHttp]:
    """The SDK's dual-era server over Streamable HTTP, once for the module."""
    log = tmp_path_factory.mktemp("fleet-sdk-http") / "server.log"
    with open(log, "wb") as stderr:
        process = subprocess.Popen(
            [PYTHON, str(SERVERS / "sdk_http_server.py"), "0"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
            cwd=str(ROOT),
        )
    try:
        yield SdkHttp(process, announced_port(process, log, "sdk_http_server.py"))
    finally:
        stop(process)


@pytest.fixture(scope="module")
def node() -> str:
    """node, with the pinned server-everything installed (npm ci, once)."""
    return everything.ensure_installed()


@pytest.fixture(scope="module")
def everything_http(
    node: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[everything.HttpServer]:
    """``server-everything streamableHttp`` on 127.0.0.1, once for the module."""
    with everything.http_server(node, tmp_path_factory.mktemp("fleet-everything")) as server:
        yield server


@pytest.fixture
def runtime_http() -> Iterator[HttpServer]:
    """snodo's own HTTP server (in this process, so once per test: its threads are the test's)
    with the client tests' Runtime: tools, a prompt, a resource and a template."""
    server = serve_http(client_runtime.build())
    try:
        yield server
    finally:
        server.close()


# -- the fleet -----------------------------------------------------------------------------------


@dataclass
class World:
    """What one test's fleet was built from."""

    config: dict[str, Any]
    crasher_starts: Path
    sdk_http: SdkHttp


@pytest.fixture
def world(
    tmp_path: Path,
    node: str,
    runtime_http: HttpServer,
    sdk_http: SdkHttp,
    everything_http: everything.HttpServer,
) -> World:
    starts = tmp_path / "crasher-starts"
    servers: dict[str, Any] = {
        "runtime-stdio": {
            "command": PYTHON,
            "args": ["-m", "snodo.server", SUBS],
            "cwd": str(ROOT),
        },
        "runtime-http": {"type": "http", "url": runtime_http.url, "protocol": SESSION},
        # Probed: the SDK's start counts in the probe's time, which a loaded machine stretches.
        "sdk-stdio": {
            "command": PYTHON,
            "args": [str(SERVERS / "sdk_server.py")],
            "probe_timeout": 60,
        },
        "sdk-http": {"type": "streamable-http", "url": sdk_http.url, "protocol": OLDEST},
        "everything-stdio": {"command": node, "args": [str(everything.ENTRY), "stdio"]},
        "everything-http": {
            "type": "http",
            "url": everything_http.url,
            "protocol": [STATELESS, OLDEST],
        },
        "missing": {"command": NO_SUCH_COMMAND, "max_restarts": 1, "backoff": FAST},
        "exits": {
            "command": PYTHON,
            "args": [
                str(SERVERS / "broken_stderr_exit.py"),
                "--last-line",
                WHY,
                "--exit-at-start",
                "2",
            ],
            "max_restarts": 1,
            "backoff": FAST,
        },
        "crasher": {
            "command": PYTHON,
            "args": [
                str(SERVERS / "fleet_crasher.py"),
                "--lifetime",
                str(LIFETIME),
                "--starts",
                str(starts),
            ],
            "protocol": SESSION,
            "max_restarts": CRASHER_RESTARTS,
            "backoff": FAST,
        },
    }
    return World({"mcpServers": servers}, starts, sdk_http)


@pytest.fixture
def fleet(world: World) -> Iterator[snodo.Fleet]:
    opened = snodo.Fleet(world.config, max_parallel_starts=len(world.config["mcpServers"]))
    try:
        yield opened
    finally:
        opened.close()


# -- small pieces --------------------------------------------------------------------------------


def texts(result: Any) -> list[str]:
    assert isinstance(result, dict), result
    return [block["text"] for block in result["content"] if block["type"] == "text"]


def reported_pid(fleet: snodo.Fleet, server: str) -> int:
    """The pid the server itself reports (its ``pid`` tool), through a routed call."""
    return int(texts(fleet.call_tool(f"{server}_pid", {}))[0])


def cmdline(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]


def by_server(items: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for item in items:
        grouped.setdefault(item["fleet"]["server"], []).append(item)
    return grouped


def one_call_each(fleet: snodo.Fleet, round_: int, sdk_pid: int) -> None:
    """One routed call on every good server, each checked."""
    word = f"round {round_}"
    assert texts(fleet.call_tool("runtime-stdio_burst", {"first": round_, "count": 1})) == [
        "sent 1"
    ]
    assert texts(fleet.call_tool("runtime-http_echo", {"text": word})) == [word]
    added = fleet.call_tool("sdk-stdio_add", {"a": round_, "b": 1})
    assert isinstance(added, dict)
    assert added["structuredContent"] == {"result": round_ + 1}
    assert reported_pid(fleet, "sdk-http") == sdk_pid
    assert texts(fleet.call_tool("everything-stdio_echo", {"message": word})) == [f"Echo: {word}"]
    assert texts(fleet.call_tool("everything-http_get-sum", {"a": round_, "b": 2})) == [
        f"The sum of {round_} and 2 is {round_ + 2}."
    ]


# -- the tests -----------------------------------------------------------------------------------


def test_every_good_server_is_ready_with_its_version_transport_and_pid(
    fleet: snodo.Fleet, world: World
) -> None:
    """status() of each good server: "ready", the version it negotiated, its transport, a pid
    for stdio servers that is the server's own (as it reports it, or node running
    server-everything), no error, and its number of tools."""
    status = fleet.status()
    assert list(status) == list(world.config["mcpServers"])
    for name in GOOD:
        row = status[name]
        assert row["state"] == "ready", (name, row)
        assert row["version"] == VERSIONS[name], name
        assert row["version"] == fleet[name].version, name
        assert row["transport"] == ("stdio" if name in STDIO else "http"), name
        assert row["error"] is None, name
        assert row["restarts"] == 0, name
        assert row["since_success"] is not None and row["since_success"] >= 0, name
        assert row["tools"] == len(fleet[name].list_tools()), name
        if name in STDIO:
            assert isinstance(row["pid"], int) and running(row["pid"]), name
        else:
            assert row["pid"] is None, name
    assert status["runtime-stdio"]["pid"] == reported_pid(fleet, "runtime-stdio")
    assert status["sdk-stdio"]["pid"] == reported_pid(fleet, "sdk-stdio")
    assert str(everything.ENTRY) in cmdline(status["everything-stdio"]["pid"])
    assert reported_pid(fleet, "sdk-http") == world.sdk_http.process.pid
    table = str(status).splitlines()
    assert table[0].split()[:3] == ["server", "state", "transport"]
    rows = {line.split()[0]: line.split() for line in table[1:]}
    assert set(rows) == set(world.config["mcpServers"])
    for name in GOOD:
        assert rows[name][1:4] == ["ready", status[name]["transport"], VERSIONS[name]]
    for name in FAILING:
        assert rows[name][1] == "failed"


def test_the_catalog_holds_every_good_servers_tools_under_qualified_names(
    fleet: snodo.Fleet,
) -> None:
    """list_tools(): each good server's own tools (as its Client lists them), named
    ``server_tool``, with ``item["fleet"]`` naming the server and the tool; nothing of the
    servers that never started."""
    catalog = by_server(fleet.list_tools())
    assert set(GOOD) <= set(catalog)
    assert not set(FAILING) & set(catalog)
    for name in GOOD:
        own = {tool["name"]: tool for tool in fleet[name].list_tools()}
        items = catalog[name]
        assert sorted(item["name"] for item in items) == sorted(f"{name}_{t}" for t in own)
        for item in items:
            original = item["fleet"]["name"]
            assert item["fleet"] == {"server": name, "name": original}
            assert item["name"] == f"{name}_{original}"
            assert item["inputSchema"] == own[original]["inputSchema"]
    assert {i["fleet"]["name"] for i in catalog["runtime-stdio"]} == SUBS_TOOLS
    assert {i["fleet"]["name"] for i in catalog["sdk-stdio"]} >= SDK_TOOLS
    assert {i["fleet"]["name"] for i in catalog["sdk-http"]} >= SDK_TOOLS
    for name in ("everything-stdio", "everything-http"):
        assert {"echo", "get-sum", "get-structured-content"} <= {
            i["fleet"]["name"] for i in catalog[name]
        }
    prompts = by_server(fleet.list_prompts())
    assert {p["name"] for p in prompts["runtime-http"]} == {"runtime-http_review"}
    assert "sdk-stdio_review" in {p["name"] for p in prompts["sdk-stdio"]}
    assert "everything-http_args-prompt" in {p["name"] for p in prompts["everything-http"]}
    resources = by_server(fleet.list_resources())
    assert {r["uri"] for r in resources["runtime-stdio"]} == {"mem://0"}
    assert {r["uri"] for r in resources["runtime-http"]} == {"note://readme"}
    assert {r["uri"] for r in resources["sdk-stdio"]} == {"info://server", "bytes://all"}
    for item in fleet.list_resources():
        assert set(item["fleet"]) == {"server"}


def test_routed_calls_prompts_and_resources_reach_each_server(
    fleet: snodo.Fleet, world: World
) -> None:
    """call_tool, get_prompt and read_resource by qualified name (or URI) go to the right
    server with every call option; a URI two servers list needs ``server=``."""
    one_call_each(fleet, 1, world.sdk_http.process.pid)
    # An item of the catalog routes as its name does.
    (echo,) = [t for t in fleet.list_tools() if t["name"] == "sdk-http_echo"]
    echoed = fleet.call_tool(echo, {"text": "by item"})
    assert texts(echoed) == ["by item"]
    # Call options reach the server's Client: progress=, and timeout=.
    progress: list[dict[str, Any]] = []
    counted = fleet.call_tool("sdk-stdio_count", {"steps": 3}, progress=progress.append)
    assert texts(counted) == ["counted 3"]
    assert [p["progress"] for p in progress] == [1, 2, 3]
    started = time.monotonic()
    with pytest.raises(McpError) as slow:
        fleet.call_tool("runtime-http_forever", {}, timeout=0.3)
    assert slow.value.code == -32001
    assert time.monotonic() - started < WAIT
    # Prompts.
    review = fleet.get_prompt("runtime-http_review", {"name": "the fleet"})
    assert isinstance(review, dict)
    assert review["messages"][0]["content"]["text"] == "Please review the fleet"
    sdk_review = fleet.get_prompt("sdk-stdio_review", {"code": "x = 1", "language": "rust"})
    assert isinstance(sdk_review, dict)
    assert sdk_review["messages"][0]["content"]["text"] == "Review this rust code:\nx = 1"
    weather = fleet.get_prompt("everything-http_args-prompt", {"city": "Paris", "state": "Texas"})
    assert isinstance(weather, dict)
    assert weather["messages"][0]["content"]["text"] == "What's weather in Paris, Texas?"
    simple = fleet.get_prompt("everything-stdio_simple-prompt")
    assert isinstance(simple, dict)
    assert simple["messages"][0]["content"]["text"] == "This is a simple prompt without arguments."
    # Resources: a URI one server lists routes by itself.
    zero = fleet.read_resource("mem://0")
    assert isinstance(zero, dict)
    assert zero["contents"][0]["text"] == "zero"
    readme = fleet.read_resource("note://readme")
    assert isinstance(readme, dict)
    assert readme["contents"][0]["text"] == "hello from the readme"
    page = fleet.read_resource("note://pages/intro", server="runtime-http")
    assert isinstance(page, dict)
    assert page["contents"][0]["text"] == "page intro"
    # ... one that several list needs server=.
    with pytest.raises(McpError) as shared:
        fleet.read_resource("info://server")
    assert shared.value.code == -32602
    assert "sdk-stdio" in shared.value.message and "sdk-http" in shared.value.message
    for name in ("sdk-stdio", "sdk-http"):
        info = fleet.read_resource("info://server", server=name)
        assert isinstance(info, dict)
        assert info["contents"][0]["text"] == "snodo-interop-sdk on mcp 2.3.0"
    uri = "demo://resource/static/document/instructions.md"
    for name in ("everything-stdio", "everything-http"):
        document = fleet.read_resource(uri, server=name)
        assert isinstance(document, dict)
        assert document["contents"][0]["uri"] == uri
        assert document["contents"][0]["text"]


def test_a_resource_is_routed_by_its_uri_before_any_listing(fleet: snodo.Fleet) -> None:
    """read_resource(uri) as the fleet's first use lists the resources itself: a URI one server
    lists goes there, one that two servers list needs ``server=`` (as after list_resources())."""
    with pytest.raises(McpError) as shared:
        fleet.read_resource("info://server")
    assert shared.value.code == -32602
    assert "several servers" in shared.value.message, shared.value.message
    assert "sdk-stdio" in shared.value.message and "sdk-http" in shared.value.message
    zero = fleet.read_resource("mem://0")
    assert isinstance(zero, dict)
    assert zero["contents"][0]["text"] == "zero"


def test_a_server_that_cannot_start_is_failed_and_says_why(fleet: snodo.Fleet) -> None:
    """A command that does not exist and a server that exits at once: "failed" after their
    restart intensity, with an error naming the cause; calls on them fail at once with it; the
    others are ready."""
    status = fleet.status()
    for name in FAILING:
        row = status[name]
        assert row["state"] == "failed", (name, row)
        assert row["restarts"] == 1, (name, row)
        assert row["pid"] is None and row["version"] is None and row["tools"] is None, row
        assert row["since_success"] is None, row
    missing = status["missing"]["error"]
    assert "no-such-server-for-the-fleet" in missing or "No such file" in missing, missing
    assert WHY in status["exits"]["error"], status["exits"]
    for name in FAILING:
        started = time.monotonic()
        with pytest.raises(McpError) as refused:
            fleet.call_tool(f"{name}_anything", {})
        assert time.monotonic() - started < 5.0
        assert refused.value.code == -32000
        assert name in refused.value.message
        assert status[name]["error"] in refused.value.message
        with pytest.raises(McpError):
            fleet[name]
    assert [fleet.status()[name]["state"] for name in GOOD] == ["ready"] * len(GOOD)


def test_a_crashing_server_restarts_until_failed_while_the_others_serve(
    fleet: snodo.Fleet, world: World
) -> None:
    """The crasher exits a second after each start: it is restarted ``max_restarts`` times (a
    process each), then it is "failed" with the crash as its error and its restarts counted;
    meanwhile every other server answers every call, and their status stays "ready"."""
    sdk_pid = world.sdk_http.process.pid
    seen: list[tuple[str, int]] = []
    deadline = time.monotonic() + WAIT
    rounds = 0
    while rounds < 10_000:
        rounds += 1
        one_call_each(fleet, rounds, sdk_pid)
        status = fleet.status()
        crasher = status["crasher"]
        if not seen or seen[-1] != (crasher["state"], crasher["restarts"]):
            seen.append((crasher["state"], crasher["restarts"]))
        assert [status[name]["state"] for name in GOOD] == ["ready"] * len(GOOD), status
        if crasher["state"] == "ready":  # its pid is one of the processes it started
            assert crasher["pid"] in starts(world.crasher_starts), crasher
        if crasher["state"] == "failed":
            break
        assert time.monotonic() < deadline, f"the crasher never failed: {seen}\n{status}"
    assert any(state == "restarting" or restarts > 0 for state, restarts in seen), seen
    crashers = starts(world.crasher_starts)
    assert len(crashers) == CRASHER_RESTARTS + 1, (crashers, seen)
    status = fleet.status()
    crasher = status["crasher"]
    assert crasher["state"] == "failed", crasher
    assert crasher["restarts"] == CRASHER_RESTARTS, (crasher, seen)
    assert crasher["pid"] is None and crasher["version"] is None, crasher
    assert "fleet-crasher: crashing after" in crasher["error"], crasher
    assert not [t for t in fleet.list_tools() if t["fleet"]["server"] == "crasher"]
    with pytest.raises(McpError) as down:
        fleet.call_tool("crasher_echo", {"text": "anyone?"})
    assert down.value.code == -32000
    assert "crasher" in down.value.message
    for pid in crashers:
        assert wait_until(partial(gone, pid), timeout=STOP_DEADLINE), pid
    for name in GOOD:
        assert status[name]["state"] == "ready" and status[name]["restarts"] == 0, status
    one_call_each(fleet, rounds + 1, sdk_pid)


def test_a_server_that_dies_on_its_first_listing_is_not_reported_ready() -> None:
    """A server that answers initialize and dies on the fleet's first tools/list (and is not
    restarted): "failed", not "ready" with a dead connection; the other server serves."""
    config = {
        "mcpServers": {
            "good": {"command": PYTHON, "args": ["-m", "snodo.server", SUBS], "cwd": str(ROOT)},
            "dies": {
                "command": PYTHON,
                "args": [str(SERVERS / "fleet_crasher.py"), "--die-on", "tools/list"],
                "protocol": SESSION,
                "restart": "temporary",
            },
        }
    }
    with snodo.Fleet(config) as fleet:
        dies = wait_until(
            lambda: fleet.status()["dies"]["state"] != "starting" and fleet.status()["dies"],
            timeout=WAIT,
        )
        assert dies["state"] == "failed", dies
        assert dies["pid"] is None, dies
        assert "fleet-crasher: dying on tools/list" in (dies["error"] or ""), dies
        assert fleet.status()["good"]["state"] == "ready"
        assert reported_pid(fleet, "good") == fleet.status()["good"]["pid"]


def test_close_ends_every_server_process_in_bounded_time(fleet: snodo.Fleet, world: World) -> None:
    """close() stops every server within its timeout: no server process of the fleet is left
    (each stdio pid, the crasher's too, gone with its process group); afterwards calls fail
    with "closed" and every server is "stopped"; close() again is a no-op."""
    status = fleet.status()
    pids = [status[name]["pid"] for name in STDIO]
    assert all(isinstance(pid, int) for pid in pids), status
    crashers = starts(world.crasher_starts)
    assert crashers, "the crasher never started"
    started = time.monotonic()
    fleet.close(timeout=10.0)
    assert time.monotonic() - started < 12.0
    for pid in [*pids, *crashers]:
        assert wait_until(partial(gone, pid), timeout=STOP_DEADLINE), pid
    after = fleet.status()
    assert {row["state"] for row in after.values()} <= {"stopped", "failed"}, after
    assert [after[name]["state"] for name in GOOD] == ["stopped"] * len(GOOD)
    assert all(row["pid"] is None for row in after.values()), after
    with pytest.raises(McpError) as closed:
        fleet.call_tool("runtime-http_echo", {"text": "late"})
    assert "closed" in closed.value.message
    fleet.close()
