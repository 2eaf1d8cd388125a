"""Every shell command the docs site and the README show runs as written (issue 23 item 2).

The python blocks run in tests/test_docs_examples.py and tests/test_tour_snippets.py; this
module takes the ``sh`` and ``console`` blocks (and the README's bare command block). Each
command line is one entry of ``COMMANDS``: it runs here, in a fresh working directory holding the
servers the page's reader has (a ``docs`` server in ``./mcp.json``, a ``uvx`` that starts a git
server, ``myapp/mcp.py`` and the page's own files such as ``shop.py``), with the fewest textual
substitutions (a remote URL becomes a served Runtime's, port 8000 becomes 0), and what it prints
is checked; or it names the test (or CI step) that runs it already. A command no entry names
fails ``test_every_command_is_checked``.
"""

from __future__ import annotations

import json
import os
import re
import selectors
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import snodo
from examples.example_runtime import build
from snodo.server.http_server import HttpServer, serve_http
from snodo.supervision.owner import green_mode
from tests.support.started_processes import START_DEADLINE, stop
from tests.support.stdio_support import PYTHON, ROOT
from tests.test_docs_examples import page_blocks, pages
from tests.test_tour_snippets import TOUR_PAGES, substituted

BIN = Path(sys.executable).parent
RUN_DEADLINE = 60.0
SHELLS = ("sh", "console", "")

DOCS_SERVER = """\
from snodo.server import Runtime

runtime = Runtime("docs", "1.0")
NOTES = {"welcome": "Welcome to the docs."}


@runtime.tool(
    description="Search the docs",
    input_schema={
        "type": "object",
        "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["query"],
    },
)
def search(args, ctx):
    return f"{args.get('limit', 10)} hits for {args['query']}"


@runtime.resource("notes://welcome", name="welcome", mime_type="text/plain")
def welcome(ctx):
    return NOTES["welcome"]


@runtime.prompt(arguments=[{"name": "name", "required": True}])
def review(arguments, ctx):
    text = f"Please review {arguments['name']}"
    return [{"role": "user", "content": {"type": "text", "text": text}}]
"""

GIT_SERVER = """\
from snodo.server import Runtime

runtime = Runtime("git", "1.0")


@runtime.tool(
    description="The working tree's status",
    input_schema={
        "type": "object",
        "properties": {"repo_path": {"type": "string"}},
        "required": ["repo_path"],
    },
)
def git_status(args, ctx):
    return f"clean: {args['repo_path']}"
"""

MYAPP = """\
from snodo.server import Runtime

runtime = Runtime("myapp", "1.0")


@runtime.tool(description="Add two numbers")
def add(args, ctx):
    return {"sum": args["a"] + args["b"]}
"""


@dataclass(frozen=True)
class Done:
    status: int
    stdout: str
    stderr: str


@dataclass(frozen=True)
class Workspace:
    path: Path
    env: dict[str, str]
    url: str  # the stand-in for a remote server's URL

    def run(self, command: str, stdin: str = "") -> Done:
        """``command`` through ``bash -c`` in the workspace; its status and output."""
        done = subprocess.run(
            ["bash", "-c", command],
            input=stdin,
            capture_output=True,
            text=True,
            cwd=self.path,
            env=self.env,
            timeout=RUN_DEADLINE,
        )
        return Done(done.returncode, done.stdout, done.stderr)

    def start(self, command: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            ["bash", "-c", f"exec {command}"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=self.path,
            env=self.env,
        )


# -- the commands on the pages -------------------------------------------------------------


def fenced(text: str) -> Iterator[tuple[str, list[str]]]:
    """A page's fenced blocks, in order: (language, lines)."""
    language: str | None = None
    lines: list[str] = []
    for line in text.splitlines():
        if line.startswith("```"):
            if language is None:
                language, lines = line[3:].split(" ", 1)[0], []
            else:
                yield language, lines
                language = None
        elif language is not None:
            lines.append(line)


def commands() -> list[tuple[str, str]]:
    """Every command line of the shell blocks of the docs' pages and the README: (page, line),
    with a ``$`` prompt and a trailing ``# comment`` taken off. A bare block is a shell block
    when its lines start with ``./`` (otherwise it shows output, such as an error message)."""
    found = []
    for page in [*pages(), *TOUR_PAGES]:
        for language, lines in fenced(page.read_text(encoding="utf-8")):
            if language not in SHELLS:
                continue
            for line in lines:
                line = line.strip()
                if language == "console":
                    if not line.startswith("$ "):
                        continue  # output
                    line = line[2:]
                line = re.sub(r"\s+#\s.*$", "", line).strip()
                if line and (language or line.startswith("./")):
                    found.append((page.name, line))
    return found


def check_ok(*fragments: str) -> Callable[[Workspace, str], None]:
    """A check: the command exits 0 and its output holds each fragment."""

    def check(space: Workspace, command: str) -> None:
        done = space.run(command)
        assert done.status == 0, (command, done)
        for fragment in fragments:
            assert fragment in done.stdout, (command, fragment, done.stdout)

    return check


def check_call_json(space: Workspace, command: str) -> None:
    done = space.run(command)
    assert done.status == 0, (command, done)
    result = json.loads(done.stdout)
    assert result["content"][0]["text"] == "5 hits for json"


def check_remote(space: Workspace, command: str) -> None:
    """``--http`` to a remote server with a bearer token from the environment: the served
    Runtime stands in for it."""
    done = space.run(substituted(command, ("https://docs.example/mcp", space.url)))
    assert done.status == 0, (command, done)
    assert "2025-11-25" in done.stdout and "example" in done.stdout


def check_listen(space: Workspace, command: str) -> None:
    """It listens until Ctrl-C, then exits 130."""
    process = space.start(command)
    try:
        assert process.stderr is not None
        listening = process.stderr.readline().decode()
        assert listening.startswith("snodo: listening"), listening
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=RUN_DEADLINE)
    finally:
        stop(process)
    assert process.returncode == 130


def serving_url(process: subprocess.Popen[bytes]) -> str:
    """The URL a server announces on stderr (``serving URL``), within START_DEADLINE."""
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


def check_serves_http(tool: str) -> Callable[[Workspace, str], None]:
    """It serves over HTTP on 127.0.0.1 (on a free port in place of 8000) until SIGTERM."""

    def check(space: Workspace, command: str) -> None:
        process = space.start(substituted(command, ("--port 8000", "--port 0")))
        try:
            url = serving_url(process)
            assert url.startswith("http://127.0.0.1:")
            with snodo.connect(snodo.Http(url)) as client:
                assert tool in [t["name"] for t in client.list_tools()]
            process.send_signal(signal.SIGTERM)
            process.communicate(timeout=RUN_DEADLINE)
        finally:
            stop(process)
        assert process.returncode == 0

    return check


def check_serves_stdio(space: Workspace, command: str) -> None:
    """It answers JSON-RPC lines on stdin and exits 0 when stdin ends."""
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "docs", "version": "1"},
        },
    }
    done = space.run(command, stdin=json.dumps(initialize) + "\n")
    assert done.status == 0, (command, done)
    answer = json.loads(done.stdout.splitlines()[0])
    assert answer["id"] == 1 and answer["result"]["serverInfo"]["name"] == "shop"


def elsewhere(path: str, needle: str) -> Callable[[Workspace, str], None]:
    """A command another test or CI itself runs: the file ``path`` that does holds ``needle``
    (the test function, or the command line)."""

    def check(space: Workspace, command: str) -> None:
        assert needle in (ROOT / path).read_text(encoding="utf-8"), (path, needle)

    return check


def check_demo(space: Workspace, command: str) -> None:
    """The quickstart's demo, from the clone (it reuses the set-up ``./scripts/test`` made):
    every leg and version reported ok."""
    if green_mode():
        pytest.skip("a subprocess: the threads run already ran it")
    done = subprocess.run(
        [str(ROOT / "scripts" / "demo")],
        capture_output=True,
        text=True,
        cwd=space.path,
        stdin=subprocess.DEVNULL,
        timeout=RUN_DEADLINE * 3,
    )
    assert done.returncode == 0, done
    summary = done.stdout.strip().splitlines()[-1]
    assert summary.startswith("summary: OK:") and " 0 failed" in summary, summary


#: Each command line of the pages, and how it is checked.
COMMANDS: dict[str, Callable[[Workspace, str], None]] = {
    'snodo tools --stdio "python -m snodo.server examples.example_runtime:runtime"': check_ok(
        "echo", "slow_count"
    ),
    'snodo call --stdio "uvx mcp-server-git" git_status repo_path=.': check_ok("clean: ."),
    """snodo call docs search --args '{"query": "json", "limit": 5}' --json""": check_call_json,
    "snodo info --http https://docs.example/mcp --bearer-env DOCS_TOKEN --protocol 2025-11-25": (
        check_remote
    ),
    "snodo read docs notes://welcome; snodo prompt docs review name=welcome": check_ok(
        "Welcome to the docs.", "Please review welcome"
    ),
    "snodo listen docs --tools --resource notes://welcome": check_listen,
    "snodo status": check_ok("docs"),
    "snodo serve myapp.mcp:runtime --http --port 8000": check_serves_http("add"),
    "python -m snodo.server shop:runtime": check_serves_stdio,
    "python -m snodo.server --http --port 8000 shop:runtime": check_serves_http("price"),
    "snodo serve shop:runtime --http --port 8000": check_serves_http("price"),
    # the example suite in a subprocess, expecting its 4 tests passed
    "pytest examples/testing_app": elsewhere(
        "tests/test_example_testing_app.py", '"examples/testing_app"]'
    ),
    # the option on a suite of tests (not this suite: that is CI's own run)
    "pytest --snodo-leak-check tests/": elsewhere(
        "tests/test_testing_plugin.py",
        "def test_the_entry_point_with_snodo_leak_check_checks_every_test(",
    ),
    "./scripts/demo": check_demo,
    "./scripts/test": elsewhere(".ci/run", "./scripts/test "),
}


def test_every_command_is_checked() -> None:
    """Every command line on the pages has an entry, and every entry is still on a page."""
    shown = {line for _, line in commands()}
    unchecked = sorted(f"{page}: {line}" for page, line in commands() if line not in COMMANDS)
    assert not unchecked, f"commands on the pages no entry checks: {unchecked}"
    assert set(COMMANDS) <= shown, f"entries for commands no page shows: {set(COMMANDS) - shown}"


# -- running them --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def remote() -> Iterator[HttpServer]:
    """The example Runtime over Streamable HTTP: the stand-in for a remote server."""
    server = serve_http(build())
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory, remote: HttpServer) -> Workspace:
    """A directory with what the pages' reader has, and an environment whose ``python`` is
    this interpreter and whose ``snodo`` is this venv's."""
    path = tmp_path_factory.mktemp("docs-commands")
    bin_dir = path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").write_text(f'#!/bin/sh\nexec "{PYTHON}" "$@"\n', encoding="utf-8")
    # uvx mcp-server-git: a git server of the reader's, played by a small Runtime
    (bin_dir / "uvx").write_text(
        f'#!/bin/sh\nexec "{PYTHON}" -m snodo.server git_server:runtime\n', encoding="utf-8"
    )
    for program in bin_dir.iterdir():
        program.chmod(0o755)
    (path / "docs_server.py").write_text(DOCS_SERVER, encoding="utf-8")
    (path / "git_server.py").write_text(GIT_SERVER, encoding="utf-8")
    (path / "myapp").mkdir()
    (path / "myapp" / "__init__.py").write_text("", encoding="utf-8")
    (path / "myapp" / "mcp.py").write_text(MYAPP, encoding="utf-8")
    docs = {"command": "python", "args": ["-m", "snodo.server", "docs_server:runtime"]}
    config = {"mcpServers": {"docs": {**docs, "cwd": str(path)}}}
    (path / "mcp.json").write_text(json.dumps(config), encoding="utf-8")
    for page in pages():  # the files the pages ask the reader to save (shop.py, ...)
        for _, title, code in page_blocks(page):
            if title is not None and title.endswith(".py"):
                (path / title).write_text(textwrap.dedent(code), encoding="utf-8")
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("SNODO_", "PYTEST_", "COV_"))
    }
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        PYTHONPATH=f"{path}{os.pathsep}{ROOT}",
        DOCS_TOKEN="a-token-for-the-docs",
        HOME=str(path),
        NO_COLOR="1",
    )
    return Workspace(path, env, remote.url)


@pytest.mark.parametrize("command", list(COMMANDS))
def test_command(command: str, workspace: Workspace) -> None:
    """The command runs as the page shows it and does what the page says."""
    COMMANDS[command](workspace, command)
