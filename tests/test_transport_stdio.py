"""The client over stdio, against real subprocesses: our Runtime served by ``python -m
snodo.server`` and scripted servers (tests/servers/scripted_*.py).

Rules: the reference's "Protocol versions", "Calls", "Progress", "Input handlers", the
session-era bullets about server requests, and "Transport behavior • Stdio". Every message
the client writes is logged by the server (or a tee in front of it) and checked against its
version's schema.json.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

import snodo
from tests.support import stdio_support as support
from tests.support.stdio_support import (
    ALL,
    LATEST,
    ROOT,
    SESSION_ERA,
    wait_until,
)

#: Autouse fixtures: process-wide parts started first; no child or fd left behind.
stdio_warm_up = support.stdio_warm_up
stdio_no_leaks = support.stdio_no_leaks


def scripted(tmp_path: Path, *options: str, name: str = "scripted_server.py") -> tuple[Any, Path]:
    """A scripted server logging every line it receives; returns (target, log path)."""
    log = tmp_path / "wire.jsonl"
    return support.script(name, "--log", str(log), *options), log


def example(tmp_path: Path, runtime: str = support.EXAMPLE_RUNTIME) -> tuple[Any, Path]:
    """Our Runtime over stdio behind a tee that logs what the client writes."""
    log = tmp_path / "wire.jsonl"
    return support.snodo_server(runtime, log=log), log


def accept(params: dict[str, Any]) -> dict[str, Any]:
    return {"action": "accept", "content": {"approved": True, "ok": True}}


def sampler(params: dict[str, Any]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": {"type": "text", "text": "a summary"},
        "model": "test-model",
    }


def rooter(params: dict[str, Any]) -> dict[str, Any]:
    return {"roots": [{"uri": "file:///home/me/project", "name": "project"}]}


COMPLETION = {
    "ref": {"type": "ref/prompt", "name": "review"},
    "argument": {"name": "name", "value": "t"},
}


# -- Protocol versions -----------------------------------------------------------------------


def test_without_protocol_the_client_probes_with_discover_and_picks_2026(tmp_path: Path) -> None:
    """Protocol versions: both eras allowed -> probe with server/discover; 2026-07-28 wins."""
    target, log = example(tmp_path)
    with snodo.connect(target, cwd=str(ROOT)) as client:
        assert client.version == LATEST
        assert client.session is None
        client.list_tools()
    methods = [m.get("method") for m in support.check_wire(log, LATEST)]
    assert methods == ["server/discover", "tools/list"]


def test_a_stateless_pin_sends_nothing_at_connect(tmp_path: Path) -> None:
    """A stateless pin sends nothing at connect time: the first line is the first call."""
    target, log = example(tmp_path)
    with snodo.connect(target, cwd=str(ROOT), protocol=LATEST) as client:
        assert client.version == LATEST
        assert client.session is None
        client.call_tool("echo", {"text": "first"})
    methods = [m.get("method") for m in support.check_wire(log, LATEST)]
    assert methods == ["tools/call"]


@pytest.mark.parametrize("version", SESSION_ERA)
def test_a_session_era_pin_sends_initialize_at_once(tmp_path: Path, version: str) -> None:
    """A session-era pin sends initialize at once (no probe), then notifications/initialized;
    the session carries the version, serverInfo, capabilities and instructions."""
    target, log = example(tmp_path)
    info = {"name": "stdio-test", "version": "7.0"}
    with snodo.connect(
        target,
        cwd=str(ROOT),
        protocol=version,
        client_info=info,
        input_handlers={"form": accept, "roots": rooter},
    ) as client:
        assert client.version == version
        session = client.session
        assert isinstance(session, snodo.Session)
        assert session.version == version
        assert session.session_id is None
        assert session.server_info is not None
        assert session.server_info["name"] == "snodo-example"
        assert {"tools", "resources", "prompts"} <= set(session.capabilities)
        assert session.instructions is not None and "echo" in session.instructions
        client.ping()
    messages = support.check_wire(log, version)
    assert [m.get("method") for m in messages] == [
        "initialize",
        "notifications/initialized",
        "ping",
    ]
    init = messages[0]["params"]
    assert init["protocolVersion"] == version
    assert init["clientInfo"] == info
    assert init["capabilities"]["elicitation"] == {"form": {}}
    assert init["capabilities"]["roots"] == {"listChanged": False}
    assert "sampling" not in init["capabilities"]


def test_a_single_era_list_initializes_with_its_highest_version(tmp_path: Path) -> None:
    """A list from one era skips the probe; initialize proposes the highest allowed version."""
    target, log = example(tmp_path)
    with snodo.connect(target, cwd=str(ROOT), protocol=["2025-06-18", "2025-11-25"]) as client:
        assert client.version == "2025-11-25"
    messages = support.check_wire(log, "2025-11-25")
    assert messages[0]["method"] == "initialize"
    assert messages[0]["params"]["protocolVersion"] == "2025-11-25"


@pytest.mark.parametrize(
    "discover",
    ["method-not-found", "not-initialized", "no-versions", "garbage", "silent"],
)
def test_a_session_era_server_falls_back_by_starting_the_server_again(
    tmp_path: Path, discover: str
) -> None:
    """Any answer to the probe but a discovery result (whatever the error, a result without
    supportedVersions, no answer within probe_timeout) closes the transport and, on stdio,
    starts the server again; initialize then carries the highest allowed session-era
    version. The server here refuses everything once its first request was not initialize."""
    starts = tmp_path / "starts"
    target, log = scripted(
        tmp_path,
        "--versions",
        ",".join(SESSION_ERA),
        "--strict-lifecycle",
        "--discover",
        discover,
        "--starts",
        str(starts),
    )
    with snodo.connect(
        target, protocol=[LATEST, "2025-06-18", "2025-11-25"], probe_timeout=0.5
    ) as client:
        assert client.version == "2025-11-25"
        assert client.session is not None and client.session.version == "2025-11-25"
        pids = support.starts(starts)
        assert len(pids) == 2 and pids[0] != pids[1]
        assert client.transport.pid == pids[1]
        wait_until(lambda: not support.running(pids[0]), 10.0)
        assert client.call_tool("echo", {"text": "after fallback"})["content"][0]["text"] == (
            "after fallback"
        )
    messages = support.check_wire(log, "2025-11-25")
    assert [m.get("method") for m in messages] == [
        "server/discover",
        "initialize",
        "notifications/initialized",
        "tools/call",
    ]
    assert messages[1]["params"]["protocolVersion"] == "2025-11-25"


def test_fallback_against_our_session_era_only_runtime(tmp_path: Path) -> None:
    """The same fallback against snodo's own server with only session-era versions enabled:
    two starts, then initialize with the highest allowed session-era version."""
    starts = tmp_path / "starts"
    target, log = example(tmp_path, "tests.servers.scripted_runtimes:session_era")
    with snodo.connect(
        target,
        cwd=str(ROOT),
        env={"SNODO_TEST_STARTS": str(starts)},
        protocol=[LATEST, "2025-06-18"],
    ) as client:
        assert client.version == "2025-06-18"
        pids = support.starts(starts)
        assert len(pids) == 2 and pids[0] != pids[1]
    messages = support.check_wire(log, "2025-06-18")
    assert [m.get("method") for m in messages] == [
        "server/discover",
        "initialize",
        "notifications/initialized",
    ]


@pytest.mark.parametrize(
    ("protocol", "answered"),
    [
        ("2025-11-25", "2025-06-18"),
        (SESSION_ERA, "2024-11-05"),
        ([LATEST, "2025-06-18"], "2025-11-25"),
    ],
)
def test_an_initialize_result_with_a_version_not_allowed_is_invalid_params(
    tmp_path: Path, protocol: Any, answered: str
) -> None:
    """The server's protocolVersion must be one the client allows; otherwise the client closes
    the connection and returns -32602 with negotiated and requested in data."""
    starts = tmp_path / "starts"
    target, _ = scripted(
        tmp_path,
        "--versions",
        ",".join(SESSION_ERA),
        "--init-version",
        answered,
        "--starts",
        str(starts),
    )
    with pytest.raises(snodo.McpError) as caught:
        snodo.connect(target, protocol=protocol, probe_timeout=2.0)
    allowed = [v for v in ALL if v in ([protocol] if isinstance(protocol, str) else protocol)]
    assert caught.value.code == -32602
    assert caught.value.data == {"negotiated": answered, "requested": allowed}
    for pid in support.starts(starts):
        wait_until(lambda pid=pid: support.gone(pid), 10.0)


def test_a_discovery_without_a_common_version_is_invalid_params(tmp_path: Path) -> None:
    """A server that supports none of the allowed versions: -32602 with requested and
    supported; the connection is closed."""
    starts = tmp_path / "starts"
    target, _ = scripted(tmp_path, "--advertise", "2025-11-25,2099-01-01", "--starts", str(starts))
    with pytest.raises(snodo.McpError) as caught:
        snodo.connect(target, protocol=[LATEST, "2025-06-18"])
    assert caught.value.code == -32602
    assert caught.value.data == {
        "requested": [LATEST, "2025-06-18"],
        "supported": ["2025-11-25", "2099-01-01"],
    }
    (pid,) = support.starts(starts)
    wait_until(lambda: support.gone(pid), 10.0)


def test_an_unspoken_version_is_refused_before_starting_anything(tmp_path: Path) -> None:
    """A version the client does not speak at all is refused before connecting."""
    starts = tmp_path / "starts"
    target, _ = scripted(tmp_path, "--starts", str(starts))
    with pytest.raises(snodo.McpError) as caught:
        snodo.connect(target, protocol="2023-01-01")
    assert caught.value.code == -32602
    assert not starts.exists()


# -- Calls, on every version, pinned and negotiated ----------------------------------------


CASES = [
    pytest.param(LATEST, "pinned", id="2026-07-28-pinned"),
    pytest.param(LATEST, "negotiated", id="2026-07-28-negotiated"),
    *[pytest.param(v, "pinned", id=f"{v}-pinned") for v in SESSION_ERA],
    *[pytest.param(v, "negotiated", id=f"{v}-negotiated") for v in SESSION_ERA],
]


@pytest.mark.parametrize(("version", "how"), CASES)
def test_calls_work_over_stdio(tmp_path: Path, version: str, how: str) -> None:
    """Calls: list_tools, call_tool, read_resource, get_prompt, completion and the other lists
    work over stdio on each version, pinned or negotiated (a session-era version is
    negotiated against a session-era-only server, through the fallback)."""
    if version == LATEST or how == "pinned":
        target, log = example(tmp_path)
        protocol: Any = version if how == "pinned" else None
    else:
        target, log = example(tmp_path, "tests.servers.scripted_runtimes:session_era")
        protocol = [LATEST, version]
    with snodo.connect(target, cwd=str(ROOT), protocol=protocol) as client:
        assert client.version == version
        names = {t["name"] for t in client.list_tools()}
        assert {"echo", "add", "slow_count", "deploy", "summarize", "roots"} <= names
        assert client.call_tool("echo", {"text": "json"})["content"] == [
            {"type": "text", "text": "json"}
        ]
        assert client.call_tool("add", {"a": 2, "b": 3})["structuredContent"] == {"sum": 5}
        read = client.read_resource("notes://welcome")
        assert read["contents"][0]["text"] == "Welcome to snodo."
        blob = client.read_resource("blobs://logo")
        assert blob["contents"][0]["blob"] == "iVBORw0KGgo="
        assert "ship" in client.read_resource("notes://todo")["contents"][0]["text"]
        prompt = client.get_prompt("review", {"name": "todo"})
        assert "Please review todo" in prompt["messages"][0]["content"]["text"]
        completion = client.request("completion/complete", COMPLETION)
        assert completion["completion"]["values"] == ["todo"]
        assert {r["uri"] for r in client.list_resources()} == {"notes://welcome", "blobs://logo"}
        assert [t["uriTemplate"] for t in client.list_resource_templates()] == ["notes://{name}"]
        assert [p["name"] for p in client.list_prompts()] == ["review"]
        with pytest.raises(snodo.McpError) as caught:
            client.call_tool("no-such-tool", {})
        assert caught.value.code == -32602
        assert caught.value.kind == "protocol"
        if version == LATEST:
            assert version in client.discover()["supportedVersions"]
            pending = client.call_tool("busy", {})  # no handlers: returned, not answered
            assert isinstance(pending, snodo.InputRequired)
            assert pending.input_requests == {} and pending.request_state
            done = client.call_tool("busy", {}, request_state=pending.request_state)
            assert done["content"][0]["text"] == "done after 1 retries"
        else:
            assert client.ping() == {}
            with pytest.raises(snodo.McpError) as refused:
                client.discover()
            assert refused.value.code == -32601
    methods = [m.get("method") for m in support.check_wire(log, version)]
    if version != LATEST:  # discover was refused before anything was sent
        assert methods[:3] == (
            ["initialize", "notifications/initialized", "tools/list"]
            if how == "pinned"
            else ["server/discover", "initialize", "notifications/initialized"]
        )
        assert "server/discover" not in methods[1:]


def test_a_closed_client_fails_at_once_with_connection_closed(tmp_path: Path) -> None:
    """Connection failures: -32000 (kind transport) for a closed connection; close/1 is
    idempotent and the server process ends."""
    target, _ = scripted(tmp_path)
    client = snodo.connect(target, protocol=LATEST)
    pid = client.transport.pid
    assert support.running(pid)
    client.close()
    client.close()
    assert not support.running(pid)
    with pytest.raises(snodo.McpError) as caught:
        client.call_tool("echo", {"text": "x"})
    assert caught.value.code == -32000
    assert caught.value.kind == "transport"


def test_env_and_cwd_reach_the_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """connect(env=...) adds and overrides variables and None removes one; cwd= is the server's
    working directory; the server runs in a process group of its own (pgid == pid)."""
    monkeypatch.setenv("SNODO_T_INHERITED", "inherited")
    monkeypatch.setenv("SNODO_T_UNSET", "should not be seen")
    monkeypatch.setenv("SNODO_T_OVERRIDE", "old")
    target, _ = scripted(tmp_path)
    workdir = tmp_path / "work"
    workdir.mkdir()
    env = {"SNODO_T_NEW": "v", "SNODO_T_UNSET": None, "SNODO_T_OVERRIDE": "new"}
    with snodo.connect(target, env=env, cwd=str(workdir), protocol=LATEST) as client:
        names = ["SNODO_T_NEW", "SNODO_T_UNSET", "SNODO_T_OVERRIDE", "SNODO_T_INHERITED"]
        seen = client.call_tool("env", {"names": names})["structuredContent"]
        assert seen["env"] == {
            "SNODO_T_NEW": "v",
            "SNODO_T_UNSET": None,
            "SNODO_T_OVERRIDE": "new",
            "SNODO_T_INHERITED": "inherited",
        }
        assert Path(seen["cwd"]).resolve() == workdir.resolve()
        assert seen["pid"] == client.transport.pid
        assert seen["pgid"] == client.transport.pid


# -- Progress --------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ALL)
def test_progress_is_delivered_in_the_calling_thread_with_the_request_id_as_token(
    tmp_path: Path, version: str
) -> None:
    """Progress: the client sends the request ID as _meta.progressToken; the function is called
    in the requesting thread with each notification's params before the request returns."""
    target, log = example(tmp_path)
    seen: list[tuple[int, dict[str, Any]]] = []
    with snodo.connect(target, cwd=str(ROOT), protocol=version) as client:
        result = client.call_tool(
            "slow_count",
            {"n": 4},
            progress=lambda params: seen.append((threading.get_ident(), params)),
        )
        assert result["content"][0]["text"] == "counted to 4"
    assert len(seen) == 4
    assert {ident for ident, _ in seen} == {threading.get_ident()}
    (call,) = [m for m in support.check_wire(log, version) if m.get("method") == "tools/call"]
    assert call["params"]["_meta"]["progressToken"] == call["id"]
    assert [p["progress"] for _, p in seen] == [1, 2, 3, 4]
    assert all(p["progressToken"] == call["id"] and p["total"] == 4 for _, p in seen)
    assert seen[0][1]["message"] == "step 1 of 4"


def test_progress_to_a_queue_over_stdio(tmp_path: Path) -> None:
    """Progress: a queue.Queue receives snodo.Progress(params) for each report."""
    import queue

    target, _ = scripted(tmp_path)
    reports: queue.Queue[Any] = queue.Queue(100)
    with snodo.connect(target, protocol=LATEST) as client:
        result = client.call_tool("progress", {"n": 3}, progress=reports)
    token = result["structuredContent"]["token"]
    got = [reports.get_nowait() for _ in range(3)]
    assert all(isinstance(r, snodo.Progress) for r in got)
    assert [r.params["progress"] for r in got] == [1, 2, 3]
    assert {r.params["progressToken"] for r in got} == {token}
    assert reports.empty()


# -- Input handlers: input_required rounds (2026) and server requests (session era) -------


@pytest.mark.parametrize("version", ALL)
def test_input_handlers_answer_form_sampling_and_roots(tmp_path: Path, version: str) -> None:
    """The same input_handlers answer 2026-07-28 input requests (in the calling thread, one at a
    time) and session-era server requests (over stdio, each in a task of its own)."""
    target, log = example(tmp_path)
    calls: list[tuple[str, int]] = []

    def record(kind: str, fn: Any) -> Any:
        def handler(params: dict[str, Any]) -> Any:
            calls.append((kind, threading.get_ident()))
            return fn(params)

        return handler

    handlers = {
        "form": record("form", accept),
        "sampling": record("sampling", sampler),
        "roots": record("roots", rooter),
    }
    with snodo.connect(target, cwd=str(ROOT), protocol=version, input_handlers=handlers) as client:
        deployed = client.call_tool("deploy", {"env": "prod"})
        assert deployed["structuredContent"] == {"env": "prod", "status": "deployed"}
        summary = client.call_tool("summarize", {"text": "long text"})
        assert summary["content"][0]["text"] == "a summary"
        roots = client.call_tool("roots", {})
        assert roots["structuredContent"] == {"roots": ["file:///home/me/project"]}
        both = client.call_tool("confirm_both", {})
        assert both["structuredContent"] == {"confirmed": True, "opinion": "a summary"}
    kinds = [kind for kind, _ in calls]
    assert kinds[:3] == ["form", "sampling", "roots"]
    if version == LATEST:  # one at a time, in the sort order of the request keys
        assert kinds[3:] == ["form", "sampling"]
    else:  # two server requests, each answered in a task of its own
        assert sorted(kinds[3:]) == ["form", "sampling"]
    me = threading.get_ident()
    if version == LATEST:
        assert {ident for _, ident in calls} == {me}
    else:
        assert me not in {ident for _, ident in calls}
    messages = support.check_wire(log, version)
    answers = [m for m in messages if "method" not in m]
    if version == LATEST:
        assert answers == []
        retries = [m for m in messages if m.get("method") == "tools/call"]
        assert any("inputResponses" in m["params"] for m in retries)
    else:
        assert len(answers) == 5
        assert all("result" in m for m in answers)


@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize(
    ("kind", "method", "params", "handler"),
    [
        (
            "form",
            "elicitation/create",
            {
                "mode": "form",
                "message": "Name?",
                "requestedSchema": {"type": "object", "properties": {"n": {"type": "string"}}},
            },
            lambda p: {"action": "accept", "content": {"n": p["message"]}},
        ),
        (
            "url",
            "elicitation/create",
            {
                "mode": "url",
                "message": "Visit",
                "url": "https://example.test/consent",
                "elicitationId": "e-1",
            },
            lambda p: {"action": "accept"},
        ),
        (
            "sampling",
            "sampling/createMessage",
            {
                "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
                "maxTokens": 5,
            },
            sampler,
        ),
        ("roots", "roots/list", None, rooter),
    ],
)
def test_server_requests_are_answered_by_the_handlers_on_every_version(
    tmp_path: Path, version: str, kind: str, method: str, params: Any, handler: Any
) -> None:
    """Requests the server sends (elicitation/create by mode, sampling/createMessage, roots/list)
    are answered by the same input_handlers on any connection, whatever the negotiated version;
    the answer is a well-formed JSON-RPC response with the kind's result (a URL elicitation
    too on 2025-06-18, which does not define it: the client answers by kind, not by version)."""
    target, log = scripted(tmp_path)
    seen: list[Any] = []

    def recording(p: dict[str, Any]) -> Any:
        seen.append(p)
        return handler(p)

    with snodo.connect(target, protocol=version, input_handlers={kind: recording}) as client:
        result = client.call_tool("ask", {"method": method, "params": params})
    answer = result["structuredContent"]["answer"]
    assert "result" in answer, answer
    assert answer["result"] == handler(seen[0])
    assert len(seen) == 1
    (reply,) = [m for m in support.check_wire(log, version) if "method" not in m]
    support.check_response(version, reply, method)


@pytest.mark.parametrize("version", ALL)
def test_a_server_ping_is_answered_without_a_handler(tmp_path: Path, version: str) -> None:
    """A server ping is answered {} without a handler, on every version over stdio."""
    target, log = scripted(tmp_path)
    with snodo.connect(target, protocol=version) as client:
        result = client.call_tool("ask", {"method": "ping"})
    assert result["structuredContent"]["answer"]["result"] == {}
    (reply,) = [m for m in support.check_wire(log, version) if "method" not in m]
    support.check_response(version, reply, "ping")


@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize("request_id", ["same", "srv-1", 0])
def test_server_request_ids_are_the_servers_own(
    tmp_path: Path, version: str, request_id: Any
) -> None:
    """A request from the server is told from a response by its method, whatever its id: one
    reusing the id of the client's pending request, a string id and id 0 are answered with that
    id, and the client's own request still gets its response."""
    target, log = scripted(tmp_path)
    with snodo.connect(target, protocol=version, input_handlers={"roots": rooter}) as client:
        result = client.call_tool("ask", {"method": "roots/list", "id": request_id})
        assert result["structuredContent"]["answer"]["result"] == rooter({})
    messages = support.check_wire(log, version)
    (call,) = [m for m in messages if m.get("method") == "tools/call"]
    (reply,) = [m for m in messages if "method" not in m]
    assert reply["id"] == (call["id"] if request_id == "same" else request_id)
    support.check_response(version, reply, "roots/list")


@pytest.mark.parametrize("version", SESSION_ERA)
def test_server_requests_before_the_initialize_result_are_answered(
    tmp_path: Path, version: str
) -> None:
    """A server may ping the client (and ask for roots) before it answers initialize: the
    requests are answered at once, through the handlers, so connect completes."""
    target, _ = scripted(
        tmp_path, "--ask-during-initialize", "ping", "--ask-during-initialize", "roots/list"
    )
    with snodo.connect(
        target, protocol=version, input_handlers={"roots": rooter}, timeout=10.0
    ) as client:
        answers = client.call_tool("answers", {})["structuredContent"]["answers"]
    assert [a.get("result") for a in answers] == [{}, rooter({})]


# -- Concurrency -------------------------------------------------------------------------------


def test_sixteen_threads_share_one_client_and_responses_are_correlated_by_id(
    tmp_path: Path,
) -> None:
    """One process owns the port and correlates responses by ID: 16 threads x 50 calls on one
    client, against a server that answers in batches in reverse order. Request IDs are fresh
    integers."""
    target, log = scripted(tmp_path, "--reorder")
    failures: list[BaseException] = []
    with snodo.connect(target, protocol=LATEST, timeout=30.0) as client:

        def work(n: int) -> None:
            try:
                for i in range(50):
                    text = f"{n}-{i}"
                    got = client.call_tool("echo", {"text": text})
                    assert got["content"][0]["text"] == text, (text, got)
            except BaseException as exc:
                failures.append(exc)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not any(t.is_alive() for t in threads)
        assert not failures, failures[:3]
        stats = client.call_tool("stats", {})["structuredContent"]
    assert stats["reordered"] > 0, "the server never had two answers to reorder"
    calls = [m for m in support.check_wire(log, LATEST) if m.get("method") == "tools/call"]
    ids = [m["id"] for m in calls]
    assert len(ids) == 801 and len(set(ids)) == 801
    assert all(isinstance(i, int) and not isinstance(i, bool) for i in ids)


def test_threads_share_one_client_of_our_runtime(tmp_path: Path) -> None:
    """Request IDs are fresh integers, so one client can be shared: 8 threads against our own
    server, on a session-era session, with progress for some calls."""
    target, _ = example(tmp_path)
    failures: list[BaseException] = []
    with snodo.connect(target, cwd=str(ROOT), protocol="2025-11-25") as client:

        def work(n: int) -> None:
            try:
                for i in range(20):
                    if i % 5 == 0:
                        got: list[Any] = []
                        client.call_tool("slow_count", {"n": 2}, progress=got.append)
                        assert [p["progress"] for p in got] == [1, 2]
                    else:
                        text = f"{n}/{i}"
                        assert client.call_tool("echo", {"text": text})["content"][0]["text"] == (
                            text
                        )
            except BaseException as exc:
                failures.append(exc)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert not failures, failures[:3]
