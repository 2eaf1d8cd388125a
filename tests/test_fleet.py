"""snodo.Fleet with real servers: snodo Runtimes over stdio (``python -m snodo.server``) and HTTP
(``serve_http`` on 127.0.0.1). Lazy starts and idle stops counted in child processes, reloads
that keep an unchanged server's pid, catalog refreshes on list-changed notifications on both
eras, tool filters, routing, a restart after a crash, and nothing left after ``close()``.

Servers from others, a server that never starts and one that keeps crashing:
tests/test_fleet_interop.py. The config rules alone: tests/test_protocol_fleet_config.py.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import snodo
from snodo import McpError
from snodo.server.http_server import serve_http
from tests.servers.subs_runtime import build
from tests.support.stdio_support import (
    PYTHON,
    ROOT,
    children,
    gone,
    no_leaks,
    wait_until,
)

LATEST = "2026-07-28"
SESSION_ERA = "2025-11-25"
SUBS = "tests.servers.subs_runtime:runtime"
RESTART = "tests.servers.restart_runtime:runtime"


@pytest.fixture(autouse=True)
def _no_leaks() -> Iterator[None]:
    """No child process or fd outlives a test (threads and actors: conftest)."""
    with no_leaks(pooled=True):
        yield


def stdio(runtime: str = SUBS, **keys: Any) -> dict[str, Any]:
    """A config entry for a snodo Runtime over stdio."""
    return {"command": PYTHON, "args": ["-m", "snodo.server", runtime], "cwd": str(ROOT), **keys}


def pid_of(fleet: snodo.Fleet, name: str) -> int:
    pid = fleet.status()[name]["pid"]
    assert isinstance(pid, int)
    return pid


def reported_pid(fleet: snodo.Fleet, name: str) -> int:
    """The pid the server itself reports (its ``pid`` tool), through a routed call."""
    result = fleet.call_tool(f"{name}_pid", {})
    assert isinstance(result, dict)
    return int(result["content"][0]["text"])


def tool_names(fleet: snodo.Fleet) -> set[str]:
    return {tool["name"] for tool in fleet.list_tools()}


# -- eager start, catalog, routing --------------------------------------------------------------


def test_an_eager_fleet_is_ready_with_one_catalog_under_qualified_names() -> None:
    config = {"mcpServers": {"a": stdio(), "b": stdio(protocol=SESSION_ERA)}}
    with snodo.Fleet(config) as fleet:
        status = fleet.status()
        assert [status[n]["state"] for n in ("a", "b")] == ["ready", "ready"]
        assert status["a"]["version"] == LATEST
        assert status["b"]["version"] == SESSION_ERA
        assert status["a"]["transport"] == "stdio"
        assert status["a"]["tools"] == 5
        assert status["a"]["since_success"] is not None
        assert pid_of(fleet, "a") == reported_pid(fleet, "a")
        assert pid_of(fleet, "b") == reported_pid(fleet, "b")

        tools = fleet.list_tools()
        by_name = {tool["name"]: tool for tool in tools}
        assert {"a_burst", "a_pid", "b_burst", "b_pid"} <= set(by_name)
        assert by_name["b_touch"]["fleet"] == {"server": "b", "name": "touch"}
        assert "inputSchema" in by_name["a_touch"]
        # An item of list_tools() routes as well as its name, and every call option passes.
        result = fleet.call_tool(by_name["a_touch"], {"kind": "prompts"}, timeout=5.0)
        assert isinstance(result, dict)
        assert result["content"][0]["text"] == "prompts"
        before = time.monotonic()
        fleet.call_tool("b_pid", {})
        assert fleet.status()["b"]["since_success"] <= time.monotonic() - before
        assert isinstance(fleet["a"], snodo.Client)
        assert fleet["a"].version == LATEST
        assert set(fleet) == {"a", "b"}
        assert len(fleet) == 2
        assert "a" in fleet
        table = str(fleet.status())
        assert table.splitlines()[0].split()[:3] == ["server", "state", "transport"]
        assert any(line.startswith("a ") and "ready" in line for line in table.splitlines())
        pids = [pid_of(fleet, "a"), pid_of(fleet, "b")]
    for pid in pids:
        assert wait_until(lambda pid=pid: gone(pid), timeout=10.0)


def test_routing_errors_name_what_is_wrong() -> None:
    with snodo.Fleet({"mcpServers": {"a": stdio()}}) as fleet:
        with pytest.raises(McpError) as unknown:
            fleet.call_tool("nobody_echo", {})
        assert unknown.value.code == -32602
        assert "nobody_echo" in unknown.value.message
        with pytest.raises(KeyError):
            fleet["nobody"]
        # A name with a known server prefix goes to that server, which refuses the tool.
        with pytest.raises(McpError) as refused:
            fleet.call_tool("a_no_such_tool", {})
        assert refused.value.code == -32602
        with pytest.raises(McpError) as foreign:
            fleet.call_tool({"name": "pid"}, {})
        assert "not an item of this fleet" in foreign.value.message
        # The connection keeps serving after the refusals.
        assert reported_pid(fleet, "a") == pid_of(fleet, "a")


def test_resources_and_prompts_belong_to_their_server() -> None:
    config = {"mcpServers": {"a": stdio(), "b": stdio(protocol=SESSION_ERA)}}
    with snodo.Fleet(config) as fleet:
        fleet.call_tool("b_touch", {"kind": "resources"})
        fleet.call_tool("b_touch", {"kind": "prompts"})
        resources = fleet.list_resources()
        servers = {(item["uri"], item["fleet"]["server"]) for item in resources}
        assert {("mem://0", "a"), ("mem://0", "b"), ("mem://extra", "b")} <= servers
        # mem://extra is b's alone; mem://0 is both servers': the caller says which.
        read = fleet.read_resource("mem://extra")
        assert isinstance(read, dict)
        assert read["contents"][0]["text"] == "extra"
        with pytest.raises(McpError) as shared:
            fleet.read_resource("mem://0")
        assert "a, b" in shared.value.message
        assert fleet.read_resource("mem://0", server="b")["contents"][0]["text"] == "zero"  # type: ignore[index]
        prompts = {item["name"]: item for item in fleet.list_prompts()}
        assert prompts["b_extra"]["fleet"] == {"server": "b", "name": "extra"}
        got = fleet.get_prompt("b_extra")
        assert isinstance(got, dict)
        assert "messages" in got


def test_a_tool_filter_hides_and_refuses_tools() -> None:
    config = {
        "a": stdio(tools={"allow": ["p*", "touch"], "deny": ["pid"]}),
        "b": stdio(tools={"deny": ["burst", "finish"]}),
    }
    with snodo.Fleet(config) as fleet:
        names = tool_names(fleet)
        assert {name for name in names if name.startswith("a_")} == {"a_touch"}
        assert {"b_pid", "b_touch", "b_open_count"} <= names
        assert "b_burst" not in names
        with pytest.raises(McpError) as refused:
            fleet.call_tool("a_pid", {})
        assert refused.value.code == -32602
        assert "not allowed by the fleet config" in refused.value.message
        assert fleet.status()["a"]["tools"] == 1


def test_from_file_reads_the_mcp_servers_format_with_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLEET_RUNTIME", SUBS)
    path = tmp_path / "fleet.json"
    entry = stdio()
    entry["args"] = ["-m", "snodo.server", "${FLEET_RUNTIME}"]
    entry["env"] = {"FLEET_NOTE": "${FLEET_NOTE:-none}"}
    path.write_text(json.dumps({"mcpServers": {"a": entry}}))
    with snodo.Fleet.from_file(path) as fleet:
        assert fleet.status()["a"]["state"] == "ready"
    path.write_text(json.dumps({"mcpServers": {"a": {"command": "${FLEET_MISSING_COMMAND}"}}}))
    with pytest.raises(ValueError, match="FLEET_MISSING_COMMAND") as missing:
        snodo.Fleet.from_file(path)
    assert "'a'" in str(missing.value)
    path.write_text("{not json")
    with pytest.raises(ValueError, match="not JSON"):
        snodo.Fleet.from_file(path)


def test_a_bad_config_is_refused_naming_the_server_and_the_key() -> None:
    with pytest.raises(ValueError, match=r"server 'a'.*'comand'"):
        snodo.Fleet({"mcpServers": {"a": {"command": PYTHON, "comand": "x"}}})
    assert not children()


# -- lazy starts and idle stops -----------------------------------------------------------------


def test_lazy_servers_start_on_first_use_and_idle_ones_stop() -> None:
    before = children()
    # c's own idle timeout keeps it up; a and b have the fleet's, long enough that a loaded
    # machine checks a's state before it is stopped.
    config = {"a": stdio(), "b": stdio(), "c": stdio(start="eager", idle_timeout=600)}
    with snodo.Fleet(config, start="lazy", idle_timeout=1.5) as fleet:
        assert len(children() - before) == 1  # only c, eager by its own entry
        status = fleet.status()
        assert (status["a"]["state"], status["b"]["state"]) == ("stopped", "stopped")

        first = reported_pid(fleet, "a")  # the first use starts a
        assert fleet.status()["a"]["state"] == "ready"
        assert len(children() - before) == 2

        # a, with no calls, is stopped after its idle timeout; its catalog stays known.
        wait_until(lambda: fleet.status()["a"]["state"] == "idle", timeout=10.0)
        assert wait_until(lambda: gone(first), timeout=10.0)
        assert "a_pid" in tool_names(fleet)

        second = reported_pid(fleet, "a")  # the next use starts it again
        assert second != first
        assert fleet.status()["a"]["state"] == "ready"


def test_listing_a_lazy_fleet_starts_the_servers_whose_catalog_is_unknown() -> None:
    before = children()
    with snodo.Fleet({"a": stdio(), "b": stdio()}, start="lazy") as fleet:
        assert not children() - before
        names = tool_names(fleet)
        assert {"a_pid", "b_pid"} <= names
        assert len(children() - before) == 2


def test_a_busy_server_is_not_stopped_as_idle() -> None:
    config = {"a": stdio(RESTART, idle_timeout=1.0)}
    with snodo.Fleet(config) as fleet:
        pid = pid_of(fleet, "a")
        # A call that lasts longer than the idle timeout holds the server up.
        fleet.call_tool("a_slow", {"seconds": 2.5})
        assert fleet.status()["a"]["state"] == "ready"
        assert pid_of(fleet, "a") == pid


# -- reload ---------------------------------------------------------------------------------------


def test_reload_adds_removes_restarts_and_leaves_the_rest() -> None:
    config: dict[str, Any] = {"keep": stdio(), "drop": stdio(), "change": stdio()}
    with snodo.Fleet(config) as fleet:
        keep, drop, change = (pid_of(fleet, name) for name in ("keep", "drop", "change"))
        new = {"keep": stdio(), "change": stdio(timeout=20.0), "add": stdio()}
        done = fleet.reload({"mcpServers": new})
        assert done == {
            "added": ["add"],
            "removed": ["drop"],
            "changed": ["change"],
            "unchanged": ["keep"],
        }
        assert list(fleet) == ["keep", "change", "add"]
        assert pid_of(fleet, "keep") == keep
        assert reported_pid(fleet, "keep") == keep
        assert wait_until(lambda: gone(drop), timeout=10.0)
        assert wait_until(lambda: gone(change), timeout=10.0)
        assert pid_of(fleet, "change") not in (change, keep)
        assert fleet.status()["add"]["state"] == "ready"
        assert "drop_pid" not in tool_names(fleet)
        assert "add_pid" in tool_names(fleet)
        with pytest.raises(McpError):
            fleet.call_tool("drop_pid", {})


# -- catalog refresh on list-changed --------------------------------------------------------------


@pytest.mark.parametrize("version", [LATEST, SESSION_ERA])
@pytest.mark.parametrize("kind", ["stdio", "http"])
def test_the_catalog_follows_list_changed_notifications(version: str, kind: str) -> None:
    server = serve_http(build()) if kind == "http" else None
    entry = {"url": server.url, "type": "http"} if server is not None else stdio()
    try:
        with snodo.Fleet({"s": {**entry, "protocol": version}}, debounce=0.05) as fleet:
            assert "s_extra" not in tool_names(fleet)
            assert [item["uri"] for item in fleet.list_resources()] == ["mem://0"]
            fleet.call_tool("s_touch", {"kind": "tools"})
            wait_until(lambda: "s_extra" in tool_names(fleet), timeout=10.0)
            assert fleet.status()["s"]["tools"] == 6
            fleet.call_tool("s_touch", {"kind": "resources"})
            wait_until(lambda: len(fleet.list_resources()) == 2)
            assert fleet.read_resource("mem://extra")["contents"][0]["text"] == "extra"  # type: ignore[index]
            result = fleet.call_tool("s_extra", {})
            assert isinstance(result, dict)
            assert result["content"][0]["text"] == "extra"
    finally:
        if server is not None:
            server.close()


# -- a crash --------------------------------------------------------------------------------------


def test_a_crashed_server_restarts_and_its_catalog_comes_back() -> None:
    config = {"a": stdio(RESTART, backoff={"initial": 0.01, "jitter": False}), "b": stdio()}
    with snodo.Fleet(config) as fleet:
        first = pid_of(fleet, "a")
        os.kill(first, signal.SIGKILL)  # a crash: "transient" restarts it (a clean exit: no)
        wait_until(
            lambda: fleet.status()["a"]["state"] == "ready" and fleet.status()["a"]["pid"] != first,
            timeout=15.0,
        )
        assert fleet.status()["a"]["restarts"] == 1
        assert reported_pid(fleet, "a") == pid_of(fleet, "a")
        wait_until(lambda: "a_pid" in tool_names(fleet))
        assert fleet.status()["b"]["restarts"] == 0
        fleet.restart("a")  # a new connection: the restarts of the old one stay counted
        assert fleet.status()["a"]["restarts"] == 1


def test_a_temporary_server_that_ends_is_failed_and_the_others_serve() -> None:
    config = {"a": stdio(RESTART, restart="temporary"), "b": stdio()}
    with snodo.Fleet(config) as fleet:
        with pytest.raises(McpError):
            fleet.call_tool("a_exit", {})
        wait_until(lambda: fleet.status()["a"]["state"] == "failed", timeout=10.0)
        assert fleet.status()["a"]["error"]
        assert "a_pid" not in tool_names(fleet)
        with pytest.raises(McpError) as down:
            fleet.call_tool("a_pid", {})
        assert "not available" in down.value.message
        assert reported_pid(fleet, "b") == pid_of(fleet, "b")
        # An operator starts it again.
        fleet.restart("a")
        assert fleet.status()["a"]["state"] == "ready"
        assert fleet.status()["a"]["error"] is None
        assert reported_pid(fleet, "a") == pid_of(fleet, "a")
        with pytest.raises(KeyError):
            fleet.restart("nobody")


def test_close_is_bounded_and_idempotent() -> None:
    fleet = snodo.Fleet({"a": stdio(), "b": stdio(protocol=SESSION_ERA)})
    pids = [pid_of(fleet, "a"), pid_of(fleet, "b")]
    fleet.close(timeout=10.0)
    fleet.close()
    for pid in pids:
        assert wait_until(lambda pid=pid: gone(pid), timeout=10.0)
    with pytest.raises(McpError, match="closed"):
        fleet.call_tool("a_pid", {})
    assert "closed" in repr(fleet)


@pytest.mark.parametrize(
    ("key", "value"),
    [("timeout", "soon"), ("max_restarts", -1), ("protocol", "1999-01-01"), ("cache", "yes")],
)
def test_a_bad_connect_option_value_is_refused_before_anything_starts(key: str, value: Any) -> None:
    before = children()
    with pytest.raises(ValueError, match=r"server 'b'.*") as refused:
        snodo.Fleet({"a": stdio(), "b": stdio(**{key: value})})
    assert key in str(refused.value) or "protocol" in str(refused.value)
    assert not children() - before


def test_connect_options_and_server_options_reach_each_connection() -> None:
    """What a JSON file cannot hold (a log handler here) comes from connect_options for every
    server and from server_options for one; the entry's own keys win over connect_options."""
    common: list[Any] = []
    own: list[Any] = []
    logging_runtime = "tests.servers.logging_runtime:runtime"
    config = {
        "a": stdio(logging_runtime, log_level="warning"),
        "b": stdio(logging_runtime),
    }
    with snodo.Fleet(
        config,
        connect_options={"log_handler": common.append, "log_level": "debug", "headers": {"x": "1"}},
        server_options={"b": {"log_handler": own.append}},
    ) as fleet:
        fleet.call_tool("a_chatty", {})
        fleet.call_tool("b_chatty", {})
        wait_until(lambda: len(common) == 2 and len(own) == 4)
        assert [message.level for message in common] == ["warning", "error"]  # a's own level
        assert {message.server for message in common} == {"a"}
        assert [message.level for message in own] == ["debug", "info", "warning", "error"]
    with pytest.raises(ValueError, match="the fleet's own"):
        snodo.Fleet(config, connect_options={"owner": None})
    with pytest.raises(ValueError, match=r"not a keyword of snodo\.connect"):
        snodo.Fleet(config, connect_options={"colour": "blue"})
    with pytest.raises(ValueError, match="not in the config"):
        snodo.Fleet(config, server_options={"c": {"timeout": 1.0}})
    with pytest.raises(ValueError, match=r"server 'b'.*other transport"):
        snodo.Fleet(config, server_options={"b": {"headers": {"x": "1"}}})
