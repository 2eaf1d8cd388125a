"""The ``snodo`` command (issue 20), run as the installed console script in a subprocess.

Against snodo's Runtime over stdio (``snodo serve``) and Streamable HTTP, the official Python
SDK's server (tests/servers/sdk_server.py, sdk_http_server.py) and
``@modelcontextprotocol/server-everything`` (npm, tests/support/everything_support.py), on the
versions each speaks: every command, ``--json`` parsed and checked, the exit statuses, and bad
input (an unknown server name, an unknown tool, arguments that do not match the schema, a
server that dies) giving one ``snodo: error:`` line and the right status.

The HTTP servers are subprocesses started once for the module; each command is one interpreter
start, so the cases are grouped: one test runs several commands. The terminal behaviour
(progress bar, forms, Ctrl-C under tmux) is tests/test_cli_terminal.py's.
"""

from __future__ import annotations

import json
import os
import selectors
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import snodo
from tests.support import everything_support as everything
from tests.support.started_processes import START_DEADLINE, announced_port, stop
from tests.support.stdio_support import PYTHON, ROOT, SERVERS

SNODO = str(Path(sys.executable).parent / "snodo")
STATELESS = "2026-07-28"
SESSION = ("2025-11-25", "2025-06-18")
VERSIONS = (STATELESS, *SESSION)
EXAMPLE = "examples.example_runtime:runtime"
#: snodo's Runtime over stdio, served by the command itself.
RUNTIME_STDIO = shlex.join([SNODO, "serve", EXAMPLE])
EXAMPLE_TOOLS = {
    "echo",
    "add",
    "slow_count",
    "deploy",
    "confirm_both",
    "summarize",
    "roots",
    "busy",
}
SDK_TOOLS = {"echo", "add", "fail", "count", "deploy", "summarize", "roots", "announce", "pid"}
RUN_DEADLINE = 60.0


@dataclass
class Done:
    status: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


def snodo_run(
    *args: str, stdin: str | None = None, cwd: Path = ROOT, env: dict[str, str] | None = None
) -> Done:
    """The console script with ``args``; its status and output."""
    environ = {**os.environ, **(env or {})}
    environ.pop("SNODO_CONFIG", None) if env is None or "SNODO_CONFIG" not in env else None
    done = subprocess.run(
        [SNODO, *args],
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=environ,
        timeout=RUN_DEADLINE,
    )
    return Done(done.returncode, done.stdout, done.stderr)


def ok(*args: str, **kwargs: Any) -> Done:
    done = snodo_run(*args, **kwargs)
    assert done.status == 0, (args, done)
    return done


def fails(status: int, fragment: str, *args: str, **kwargs: Any) -> str:
    """Run ``args``; it exits ``status`` with one ``snodo: error:`` line on stderr naming
    ``fragment``, and no traceback. The line."""
    done = snodo_run(*args, **kwargs)
    assert done.status == status, (args, done)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("snodo: error: ")]
    assert len(errors) == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert fragment in errors[0], errors[0]
    return errors[0]


def many(*commands: Sequence[str]) -> list[Done]:
    """Run several commands side by side (each is an interpreter start); their results in
    order."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        return list(pool.map(lambda args: snodo_run(*args), commands))


def all_ok(*commands: Sequence[str]) -> list[Done]:
    done = many(*commands)
    for args, one in zip(commands, done, strict=True):
        assert one.status == 0, (args, one)
    return done


def texts(result: dict[str, Any]) -> list[str]:
    return [block["text"] for block in result["content"] if block["type"] == "text"]


# -- the servers of the module -------------------------------------------------------------------


def _serving_url(process: subprocess.Popen[bytes]) -> str:
    """The URL ``snodo.server: serving URL`` announces on stderr, within START_DEADLINE."""
    assert process.stderr is not None
    fd = process.stderr.fileno()
    os.set_blocking(fd, False)
    deadline = time.monotonic() + START_DEADLINE
    seen = b""
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while b"serving " not in seen or not seen.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            if remaining <= 0 or process.poll() is not None:
                raise AssertionError(f"no URL within {START_DEADLINE}s: {seen!r}")
            if selector.select(remaining):
                seen += os.read(fd, 4096) or b""
    line = next(line for line in seen.decode().splitlines() if "serving " in line)
    return line.split("serving ", 1)[1].strip()


def _http_server(command: list[str]) -> Iterator[str]:
    process = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    try:
        yield _serving_url(process)
    finally:
        stop(process)
        assert process.stderr is not None
        process.stderr.close()


@pytest.fixture(scope="module")
def runtime_http() -> Iterator[str]:
    """The example Runtime over Streamable HTTP, served by ``snodo serve --http``."""
    yield from _http_server([SNODO, "serve", EXAMPLE, "--http", "--port", "0"])


@pytest.fixture(scope="module")
def subs_http() -> Iterator[str]:
    """tests/servers/subs_runtime.py over HTTP (``burst`` publishes resource updates)."""
    yield from _http_server(
        [
            PYTHON,
            "-m",
            "snodo.server",
            "--http",
            "--port",
            "0",
            "tests.servers.subs_runtime:runtime",
        ]
    )


@pytest.fixture(scope="module")
def sdk_http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The SDK's dual-era server over Streamable HTTP."""
    log = tmp_path_factory.mktemp("cli-sdk-http") / "server.log"
    with open(log, "wb") as stderr:
        process = subprocess.Popen(
            [PYTHON, str(SERVERS / "sdk_http_server.py"), "0"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
            cwd=str(ROOT),
        )
    try:
        yield f"http://127.0.0.1:{announced_port(process, log, 'sdk_http_server.py')}/mcp"
    finally:
        stop(process)


@pytest.fixture(scope="module")
def node() -> str:
    return everything.ensure_installed()


@pytest.fixture(scope="module")
def everything_http(node: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with everything.http_server(node, tmp_path_factory.mktemp("cli-everything")) as server:
        yield server.url


# -- every command against snodo's Runtime -------------------------------------------------------


def test_every_command_on_the_runtime_over_http(runtime_http: str) -> None:
    """info, the four listings, call, read, prompt and ping with --json, on 2026-07-28."""
    t = ["--http", runtime_http, "--json"]
    info, tools, resources, templates, prompts, added, echoed, read, prompt, ping = all_ok(
        ["info", *t],
        ["tools", *t],
        ["resources", *t],
        ["templates", *t],
        ["prompts", *t],
        ["call", *t, "add", "a=2", "b=0.5"],
        ["call", *t, "echo", "text=a b=c"],
        ["read", *t, "notes://todo"],
        ["prompt", *t, "review", "name=welcome"],
        ["ping", *t],
    )
    assert info.json()["protocolVersion"] == STATELESS
    assert info.json()["serverInfo"]["name"] == "snodo-example"
    assert "tools" in info.json()["capabilities"]
    assert info.json()["instructions"].startswith("Tools to echo")
    assert {tool["name"] for tool in tools.json()["tools"]} == EXAMPLE_TOOLS
    assert {r["uri"] for r in resources.json()["resources"]} == {"notes://welcome", "blobs://logo"}
    assert [t["uriTemplate"] for t in templates.json()["resourceTemplates"]] == ["notes://{name}"]
    assert [p["name"] for p in prompts.json()["prompts"]] == ["review"]
    assert added.json()["structuredContent"] == {"sum": 2.5}
    assert texts(echoed.json()) == ["a b=c"]
    assert read.json()["contents"][0]["text"].startswith("1. write the client")
    assert "Welcome to snodo." in prompt.json()["messages"][0]["content"]["text"]
    assert ping.json()["protocolVersion"] == STATELESS and ping.json()["seconds"] >= 0


def test_the_session_era_on_the_runtime_over_http(runtime_http: str) -> None:
    """The session-era versions over HTTP (over stdio: the next test)."""
    t = ["--http", runtime_http, "--json"]
    newer, older = all_ok(
        ["call", *t, "--protocol", "2025-11-25", "add", "a=1", "b=1"],
        ["info", *t, "--protocol", "2025-06-18"],
    )
    assert newer.json()["structuredContent"] == {"sum": 2}
    assert older.json()["protocolVersion"] == "2025-06-18"
    assert older.json()["serverInfo"]["name"] == "snodo-example"


def test_text_output_on_the_runtime_over_stdio() -> None:
    """The people's output (not a terminal: tab-separated rows, no colour), over stdio on every
    version, from a Runtime that ``snodo serve`` serves."""
    t = ["--stdio", RUNTIME_STDIO]
    tools, added, blob, prompt, counted, pinged = all_ok(
        ["tools", *t],
        ["call", *t, "add", "a=1", "b=2"],
        ["read", *t, "blobs://logo", "--protocol", "2025-11-25"],
        ["prompt", *t, "review", "name=todo", "--protocol", "2025-06-18"],
        ["call", *t, "slow_count", "--args", '{"n": 2}', "--protocol", "2025-11-25"],
        ["ping", *t, "--protocol", "2025-06-18"],
    )
    rows = [line.split("\t") for line in tools.stdout.splitlines()]
    assert ["add", "", "a,b", "Add two numbers (structured result)."] in rows
    assert "\x1b[" not in tools.stdout
    assert json.loads(added.stdout) == {"sum": 3}  # the text block repeating it is not printed
    assert blob.stdout == "[resource blobs://logo: image/png, 8 B]\n"
    assert prompt.stdout.startswith("Review a note.\nuser:\nPlease review todo:")
    assert counted.stdout == "counted to 2\n"
    assert pinged.stdout.startswith("ok: answered in ") and "(2025-06-18)" in pinged.stdout


def test_python_dash_m_snodo_and_args_from_stdin(runtime_http: str) -> None:
    done = subprocess.run(
        [PYTHON, "-m", "snodo", "call", "--http", runtime_http, "echo", "--args", "-", "--json"],
        input='{"text": "from stdin"}',
        capture_output=True,
        text=True,
        timeout=RUN_DEADLINE,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert texts(json.loads(done.stdout)) == ["from stdin"]


# -- other servers ---------------------------------------------------------------------------------


def test_the_sdk_server(sdk_http: str) -> None:
    """The official SDK's server over HTTP on every version (and 2025-03-26 when named), and
    over stdio; a tool result with isError exits 1."""
    t = ["--http", sdk_http, "--json"]
    stdio = ["--stdio", shlex.join([PYTHON, str(SERVERS / "sdk_server.py")])]
    done = many(
        ["info", *t],
        ["tools", *t],
        ["call", *t, "add", "a=2", "b=40"],
        ["read", *t, "info://server"],
        ["prompt", *t, "review", "code=x = 1", "language=perl"],
        ["info", *t, "--protocol", "2025-11-25"],
        ["call", *t, "--protocol", "2025-06-18", "echo", "text=old"],
        ["info", *t, "--protocol", "2025-03-26"],
        ["call", "--http", sdk_http, "fail", "reason=on purpose"],
        ["call", *stdio, "echo", "text=hi", "--json"],
    )
    info, tools, added, read, prompt, session, oldest, older, failed, over_stdio = done
    for one in done[:8] + done[9:]:
        assert one.status == 0, one
    assert (info.json()["protocolVersion"], info.json()["serverInfo"]["name"]) == (
        STATELESS,
        "snodo-interop-sdk",
    )
    assert {tool["name"] for tool in tools.json()["tools"]} == SDK_TOOLS
    assert texts(added.json()) == ["42"]
    assert read.json()["contents"][0]["text"] == "snodo-interop-sdk on mcp 2.3.0"
    assert prompt.json()["messages"][0]["content"]["text"] == "Review this perl code:\nx = 1"
    assert session.json()["protocolVersion"] == "2025-11-25"
    assert texts(oldest.json()) == ["old"]
    assert older.json()["protocolVersion"] == "2025-03-26"  # opt-in, named
    assert failed.status == 1, failed
    assert "failed: on purpose" in failed.stdout
    assert failed.stderr.strip() == "snodo: error: tool 'fail' returned an error (isError)"
    assert texts(over_stdio.json()) == ["hi"]


def test_server_everything(everything_http: str, node: str) -> None:
    """server-everything over HTTP on the session-era versions, and over stdio."""
    t = ["--http", everything_http]
    stdio = ["--stdio", shlex.join([node, str(everything.ENTRY), "stdio"])]
    info, tools, summed, image, read, prompt, oldest, echoed = all_ok(
        ["info", *t, "--json"],
        ["tools", *t, "--json"],
        ["call", *t, "get-sum", "a=2", "b=40.5", "--json"],
        ["call", *t, "get-tiny-image"],
        ["read", *t, "demo://resource/dynamic/text/7", "--json"],
        ["prompt", *t, "args-prompt", "city=Paris", "--json"],
        ["info", *t, "--protocol", "2025-06-18", "--json"],
        ["call", *stdio, "echo", "message=hello", "--json"],
    )
    assert info.json()["protocolVersion"] == "2025-11-25"
    assert info.json()["serverInfo"]["name"]
    assert {"echo", "get-sum", "get-tiny-image"} <= {t["name"] for t in tools.json()["tools"]}
    assert "42.5" in texts(summed.json())[0]
    assert "[image image/png, " in image.stdout
    assert read.json()["contents"][0]["uri"] == "demo://resource/dynamic/text/7"
    assert "Paris" in json.dumps(prompt.json()["messages"])
    assert oldest.json()["protocolVersion"] == "2025-06-18"
    assert texts(echoed.json()) == ["Echo: hello"]


# -- bad input -------------------------------------------------------------------------------------


def assert_one_error(done: Done, status: int, fragment: str) -> str:
    """``done`` exited ``status`` with one ``snodo: error:`` line naming ``fragment`` (and
    nothing else on stderr, no traceback). The line."""
    assert done.status == status, done
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("snodo: error: "), done.stderr
    assert fragment in lines[0], lines[0]
    return lines[0]


def test_usage_errors_exit_2_with_one_line(runtime_http: str) -> None:
    t = ["--http", runtime_http]
    cases = [
        (["call", *t, "nope"], "no tool 'nope' on http://"),
        (["call", *t, "add", "a=x", "b=1"], "argument 'a': expected number, got 'x'"),
        (["call", *t, "add", "a=1", "c=2"], "unknown argument 'c' (known: a, b)"),
        (["call", *t, "add", "a=1"], "missing required argument: b"),
        (["call", *t, "add", "a"], "expected KEY=VALUE, got 'a'"),
        (["call", *t, "add", "--args", "{"], "--args: not JSON"),
        (["prompt", *t, "nope"], "no prompt 'nope'"),
        (["prompt", *t, "review"], "missing required argument: name"),
        (["tools", *t, "--protocol", "1999-01-01"], "--protocol: unknown version '1999-01-01'"),
        (["tools", *t, "--bogus"], "unrecognized arguments: --bogus"),
        (["listen", *t], "nothing to listen to"),
        (["tools", *t, "--stdio", "x"], "--stdio and --http exclude each other"),
        (["tools"], "no server: give a server name"),
        ([], "a command is required"),
    ]
    for (_, fragment), done in zip(cases, many(*(args for args, _ in cases)), strict=True):
        assert_one_error(done, 2, fragment)


def test_config_targets(tmp_path: Path, runtime_http: str) -> None:
    """A server name from --config, $SNODO_CONFIG or ./mcp.json; an unknown one is a usage
    error naming the servers there; no config at all names where it looked."""
    config = {
        "mcpServers": {
            "demo": {"command": SNODO, "args": ["serve", EXAMPLE], "cwd": str(ROOT)},
            "web": {"type": "http", "url": runtime_http, "protocol": "2025-06-18"},
        }
    }
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(config))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    home = {"HOME": str(elsewhere), "XDG_CONFIG_HOME": str(elsewhere)}
    with ThreadPoolExecutor(max_workers=4) as pool:
        runs = [
            pool.submit(
                snodo_run, "call", "demo", "echo", "text=hi", "--config", str(path), "--json"
            ),
            pool.submit(snodo_run, "info", "web", "--json", cwd=tmp_path),
            pool.submit(
                snodo_run, "ping", "web", cwd=elsewhere, env={"SNODO_CONFIG": str(path), **home}
            ),
            pool.submit(snodo_run, "tools", "nope", "--config", str(path)),
            pool.submit(snodo_run, "tools", "nope", cwd=tmp_path),
            pool.submit(snodo_run, "tools", "demo", cwd=elsewhere, env=home),
            pool.submit(snodo_run, "tools", "demo", "--config", "/no/such.json"),
        ]
        called, info, pinged, unknown, unknown_here, nothing, no_file = (r.result() for r in runs)
    assert called.status == 0 and texts(called.json()) == ["hi"], called
    assert info.status == 0 and info.json()["protocolVersion"] == "2025-06-18", info
    assert pinged.status == 0 and pinged.stdout.startswith("ok: "), pinged
    assert_one_error(unknown, 2, f"no server 'nope' in {path} (servers: demo, web)")
    assert_one_error(unknown_here, 2, "(servers: demo, web)")
    assert_one_error(nothing, 2, "no mcpServers config found")
    assert_one_error(no_file, 2, "--config /no/such.json: no such file")


def test_connection_and_protocol_errors_exit_3(runtime_http: str, node: str) -> None:
    """A server that exits at start or dies in a call, a command that does not exist, a
    refused version, a server's own error, an unreachable URL: status 3, one line (a bearer
    token never in it)."""
    broken = shlex.join([PYTHON, str(SERVERS / "broken_exit.py")])
    everything_stdio = shlex.join([node, str(everything.ENTRY), "stdio"])
    cases = [
        (["tools", "--stdio", f"{broken} --exit-at-start 4"], "status 4 at start"),
        (["call", "--stdio", broken, "die", "code=5"], "(-32000)"),
        (["tools", "--stdio", "/no/such/server"], "/no/such/server"),
        (["info", "--http", runtime_http, "--protocol", "2025-03-26"], "does not allow"),
        (["info", "--stdio", everything_stdio, "--protocol", STATELESS], "(-32601)"),
        (["read", "--http", runtime_http, "nope://x"], ""),
    ]
    for (_, fragment), done in zip(cases, many(*(args for args, _ in cases)), strict=True):
        assert_one_error(done, 3, fragment)
    unreachable = snodo_run(
        "tools",
        "--http",
        "http://127.0.0.1:9/mcp",
        "--bearer-env",
        "TOKEN",
        env={"TOKEN": "s3cret-token"},
    )
    assert "s3cret-token" not in assert_one_error(unreachable, 3, "")


# -- listen, status, serve, help ----------------------------------------------------------------


@pytest.mark.parametrize("version", [STATELESS, "2025-11-25"])
def test_listen_prints_events(subs_http: str, version: str) -> None:
    """``listen --resource URI --count 1``: the event the server publishes once the stream is
    open, as a JSON line; then the command exits 0."""
    process = subprocess.Popen(
        [
            SNODO,
            "listen",
            "--http",
            subs_http,
            "--protocol",
            version,
            "--resource",
            "mem://0",
            "--count",
            "1",
            "--json",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    try:
        assert process.stderr is not None
        listening = process.stderr.readline().decode()
        assert listening.startswith("snodo: listening"), listening
        with snodo.connect(snodo.Http(subs_http), protocol=version) as client:
            client.call_tool("burst", {"first": 0, "count": 1})
        out, err = process.communicate(timeout=RUN_DEADLINE)
    finally:
        stop(process)
        assert process.stderr is not None
        process.stderr.close()
    assert process.returncode == 0, err
    event = json.loads(out.decode().splitlines()[0])
    assert event["method"] == "notifications/resources/updated"
    assert event["params"]["uri"] == "mem://0"


def test_listen_for_a_while(subs_http: str) -> None:
    began = time.monotonic()
    done = ok("listen", "--http", subs_http, "--tools", "--for", "0.3")
    assert done.stdout == "" and time.monotonic() - began >= 0.3


CTRL_C_ON_ANOTHER_THREAD = """\
import signal, sys, threading

from snodo.cli import main


def interrupt():  # the kernel may run the handler on any thread that does not block SIGINT
    sys.stdin.readline()
    signal.pthread_kill(threading.get_ident(), signal.SIGINT)


threading.Thread(target=interrupt, daemon=True).start()
sys.exit(main(sys.argv[1:]))
"""


def test_listen_ends_on_a_ctrl_c_that_another_thread_received(subs_http: str) -> None:
    """CPython runs the handler in the main thread only once that thread takes the GIL again:
    ``listen`` waits in slices, so it exits 130 (it waited for ever, ignoring the Ctrl-C)."""
    process = subprocess.Popen(
        [PYTHON, "-c", CTRL_C_ON_ANOTHER_THREAD, "listen", "--http", subs_http, "--tools"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    try:
        assert process.stdin is not None and process.stderr is not None
        listening = process.stderr.readline().decode()
        assert listening.startswith("snodo: listening"), listening
        process.stdin.write(b"interrupt now\n")
        process.stdin.flush()
        _, err = process.communicate(timeout=RUN_DEADLINE)
    finally:
        stop(process)
    assert process.returncode == 130, err
    assert b"interrupted" in err


def test_status_of_a_config(tmp_path: Path, runtime_http: str) -> None:
    """Every configured server's state, version and tools; a failed one makes it status 3."""
    servers = {
        "demo": {"command": SNODO, "args": ["serve", EXAMPLE], "cwd": str(ROOT)},
        "web": {"type": "http", "url": runtime_http, "protocol": "2025-11-25"},
    }
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"mcpServers": servers}))
    bad = tmp_path / "bad.json"
    missing = {"command": "/no/such/server", "restart": "temporary"}
    bad.write_text(json.dumps({"mcpServers": {**servers, "missing": missing}}))
    with_failure, table = many(
        ["status", "--config", str(bad), "--json"], ["status", "--config", str(good)]
    )
    assert with_failure.status == 3, with_failure
    status = with_failure.json()
    assert (status["demo"]["state"], status["demo"]["version"]) == ("ready", STATELESS)
    assert status["demo"]["tools"] == len(EXAMPLE_TOOLS)
    assert (status["web"]["state"], status["web"]["version"]) == ("ready", "2025-11-25")
    assert status["missing"]["state"] == "failed" and status["missing"]["error"]
    assert table.status == 0, table
    lines = table.stdout.splitlines()
    assert lines[0].split()[:4] == ["server", "state", "transport", "version"]
    assert sorted(line.split()[0] for line in lines[1:]) == ["demo", "web"]
    assert all(line.split()[1] == "ready" for line in lines[1:])


def test_serve_refuses_a_bad_target() -> None:
    done = snodo_run("serve", "no_such_module_here:runtime")
    assert done.status == 2, done
    assert "no_such_module_here" in done.stderr


def test_help_lists_examples(capsys: pytest.CaptureFixture[str]) -> None:
    """``snodo --help`` and each command's help end with examples (in process but the first:
    argparse's own output, one interpreter start spared per command)."""
    from snodo.cli import main

    done = ok("--help")
    assert "examples:" in done.stdout and "snodo tools --stdio" in done.stdout
    for command in (
        "info",
        "tools",
        "resources",
        "templates",
        "prompts",
        "call",
        "read",
        "prompt",
        "listen",
        "ping",
        "status",
    ):
        assert main([command, "--help"]) == 0
        out = capsys.readouterr().out
        assert f"usage: snodo {command}" in out and "examples:\n  snodo " + command in out
    assert main(["serve", "--help"]) == 0
    assert "usage: snodo serve" in capsys.readouterr().out
