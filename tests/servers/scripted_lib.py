"""A small MCP stdio server for the client tests: the standard library only, no snodo.

The scripts in this directory build on it (``scripted_*.py`` behave, ``broken_*.py`` misbehave on
purpose). It speaks newline-delimited JSON-RPC, answers ``initialize`` / ``server/discover`` for
the versions it is told to support, and serves tools that exercise the client: progress,
requests from server to client, out-of-order answers, and so on.

Options (shared by every script):

  --versions V,V,...     versions the server speaks (default: all three)
  --log FILE             append every line received on stdin to FILE (as received)
  --starts FILE          append this process's pid to FILE at start
  --init-version V       answer ``initialize`` with V whatever the client asked
  --discover MODE        how a server without 2026-07-28 answers server/discover:
                         method-not-found (default), not-initialized, no-versions, silent, garbage
  --strict-lifecycle     once the first request was not ``initialize``, refuse everything,
                         ``initialize`` included (a session-era server that applies the
                         lifecycle rules to the first request it sees)
  --reorder              answer ``echo`` calls in batches, in reverse order
  --advertise V,V,...    the supportedVersions a server/discover result lists (default: --versions)
  --ask-during-initialize METHOD
                         before answering initialize, send METHOD to the client and wait for
                         the answer (repeatable; tool ``answers`` returns what came back)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

ALL = ["2026-07-28", "2025-11-25", "2025-06-18"]
STATELESS = "2026-07-28"

Tool = Callable[["Server", Any, dict[str, Any], dict[str, Any]], "dict[str, Any] | None"]


def text(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}]}


def structured(value: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": json.dumps(value)}], "structuredContent": value}


class Server:
    """One server process: reads stdin on the main thread, runs slow tools on threads."""

    def __init__(self, argv: list[str] | None = None) -> None:
        parser = argparse.ArgumentParser()
        parser.add_argument("--versions", default=",".join(ALL))
        parser.add_argument("--log")
        parser.add_argument("--starts")
        parser.add_argument("--init-version")
        parser.add_argument("--discover", default="method-not-found")
        parser.add_argument("--strict-lifecycle", action="store_true")
        parser.add_argument("--reorder", action="store_true")
        parser.add_argument("--advertise")
        parser.add_argument("--ask-during-initialize", action="append", default=[])
        parser.add_argument("--name", default="scripted")
        self.args, self.extra = parser.parse_known_args(argv)
        self.versions = [v for v in self.args.versions.split(",") if v]
        self.out = sys.stdout.buffer
        self.out_lock = threading.Lock()
        self.log_lock = threading.Lock()
        self.log = open(self.args.log, "ab") if self.args.log else None  # noqa: SIM115
        self.state_lock = threading.Lock()
        self.waiting: dict[Any, list[Any]] = {}  # server request id -> [Event, response]
        self.next_id = 0
        self.cancelled: set[Any] = set()
        self.first_request_seen = False
        self.lifecycle_broken = False
        self.negotiated: str | None = None
        self.calls = 0
        self.reordered_batches = 0
        self.early_answers: list[dict[str, Any]] = []
        self.held: list[tuple[Any, dict[str, Any]]] = []
        self.held_cond = threading.Condition()
        self.tools: dict[str, Tool] = {}
        self.threaded: set[str] = set()
        self.before_response: Callable[[Server, Any], None] | None = None
        self.on_eof: Callable[[Server], None] = lambda server: os._exit(0)
        self._register_defaults()
        if self.args.starts:
            with open(self.args.starts, "a") as f:
                f.write(f"{os.getpid()}\n")

    # -- output --------------------------------------------------------------------------------

    def write_raw(self, data: bytes) -> None:
        """Write bytes to stdout as they are (the caller adds newlines)."""
        with self.out_lock:
            try:
                self.out.write(data)
                self.out.flush()
            except (BrokenPipeError, ValueError, OSError):
                os._exit(0)

    def send(self, message: dict[str, Any]) -> None:
        self.write_raw(json.dumps(message, separators=(",", ":")).encode() + b"\n")

    def respond(self, request_id: Any, result: dict[str, Any]) -> None:
        if self.before_response is not None:
            self.before_response(self, request_id)
        self.send({"jsonrpc": "2.0", "id": request_id, "result": result})

    def fail(self, request_id: Any, code: int, message: str, data: Any = None) -> None:
        error: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        if self.before_response is not None:
            self.before_response(self, request_id)
        self.send({"jsonrpc": "2.0", "id": request_id, "error": error})

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def progress(self, token: Any, done: int, total: int | None = None) -> None:
        params: dict[str, Any] = {"progressToken": token, "progress": done}
        if total is not None:
            params["total"] = total
            params["message"] = f"step {done} of {total}"
        self.notify("notifications/progress", params)

    # -- server-to-client requests ---------------------------------------------------------------

    def start_request(
        self, method: str, params: dict[str, Any] | None, request_id: Any = None
    ) -> Any:
        """Send a request to the client; returns its id (small integers, like the client's,
        unless ``request_id`` is given)."""
        with self.state_lock:
            if request_id is None:
                self.next_id += 1
                request_id = self.next_id
            self.waiting[request_id] = [threading.Event(), None]
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return request_id

    def await_response(self, request_id: Any, timeout: float = 20.0) -> dict[str, Any]:
        slot = self.waiting[request_id]
        if not slot[0].wait(timeout):
            return {"timeout": True}
        with self.state_lock:
            del self.waiting[request_id]
        response: dict[str, Any] = slot[1]
        return {k: v for k, v in response.items() if k != "jsonrpc"}

    # -- input ---------------------------------------------------------------------------------

    def record(self, line: bytes) -> None:
        if self.log is None:
            return
        with self.log_lock:
            self.log.write(line if line.endswith(b"\n") else line + b"\n")
            self.log.flush()

    def serve(self) -> None:
        if self.args.reorder:
            threading.Thread(target=self._flusher, daemon=True).start()
        stdin = sys.stdin.buffer
        while True:
            line = stdin.readline()
            if not line:
                break
            self.record(line)
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if isinstance(message, dict):
                self.handle(message)
        self.on_eof(self)

    def handle(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        if method is None:
            slot = self.waiting.get(message.get("id"))
            if slot is not None:
                slot[1] = message
                slot[0].set()
            return
        if "id" not in message:
            if method == "notifications/cancelled":
                with self.state_lock:
                    self.cancelled.add((message.get("params") or {}).get("requestId"))
            return
        request_id = message["id"]
        params = message.get("params") or {}
        if self.args.strict_lifecycle:
            if not self.first_request_seen and method != "initialize":
                self.lifecycle_broken = True
            self.first_request_seen = True
            if self.lifecycle_broken:
                self.fail(request_id, -32600, "Server not initialized")
                return
        handler = getattr(self, "on_" + method.replace("/", "_"), None)
        if handler is None:
            self.fail(request_id, -32601, f"Method not found: {method}")
            return
        handler(request_id, params)

    # -- lifecycle -------------------------------------------------------------------------------

    def server_info(self) -> dict[str, Any]:
        return {"name": self.args.name, "version": "9.9.9"}

    def on_initialize(self, request_id: Any, params: dict[str, Any]) -> None:
        if self.args.ask_during_initialize:
            threading.Thread(
                target=self._initialize_after_asking, args=(request_id, params)
            ).start()
            return
        self._initialize(request_id, params)

    def _initialize_after_asking(self, request_id: Any, params: dict[str, Any]) -> None:
        """Send each --ask-during-initialize method to the client and wait for its answer
        before answering initialize; the answers are kept for the ``answers`` tool."""
        for method in self.args.ask_during_initialize:
            sent = self.start_request(method, None)
            self.early_answers.append(self.await_response(sent, 10.0))
        self._initialize(request_id, params)

    def _initialize(self, request_id: Any, params: dict[str, Any]) -> None:
        session_era = [v for v in self.versions if v != STATELESS]
        requested = params.get("protocolVersion")
        if self.args.init_version:
            chosen = self.args.init_version
        elif requested in session_era:
            chosen = requested
        elif session_era:
            chosen = session_era[0]
        else:
            self.fail(request_id, -32602, "Unsupported protocol version", {"supported": []})
            return
        self.negotiated = chosen
        self.respond(
            request_id,
            {
                "protocolVersion": chosen,
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": self.server_info(),
                "instructions": "Scripted instructions.",
            },
        )

    def on_server_discover(self, request_id: Any, params: dict[str, Any]) -> None:
        if STATELESS in self.versions:
            self.respond(
                request_id,
                {
                    "resultType": "complete",
                    "supportedVersions": (
                        self.args.advertise.split(",") if self.args.advertise else self.versions
                    ),
                    "capabilities": {"tools": {}},
                    "serverInfo": self.server_info(),
                },
            )
            return
        mode = self.args.discover
        if mode == "silent":
            return
        if mode == "garbage":
            self.write_raw(b"this is not JSON\n")
        elif mode == "not-initialized":
            self.fail(request_id, -32600, "Server not initialized")
        elif mode == "no-versions":
            self.respond(request_id, {"capabilities": {}})
        else:
            self.fail(request_id, -32601, "Method not found: server/discover")

    def on_ping(self, request_id: Any, params: dict[str, Any]) -> None:
        self.respond(request_id, {})

    def on_tools_list(self, request_id: Any, params: dict[str, Any]) -> None:
        tools = [
            {"name": name, "inputSchema": {"type": "object"}, "description": f"scripted {name}"}
            for name in sorted(self.tools)
        ]
        self.respond(request_id, {"tools": tools})

    def on_tools_call(self, request_id: Any, params: dict[str, Any]) -> None:
        name = params.get("name")
        tool = self.tools.get(name) if isinstance(name, str) else None
        if tool is None:
            self.fail(request_id, -32602, f"Unknown tool: {name}")
            return
        with self.state_lock:
            self.calls += 1
        args = params.get("arguments") or {}
        meta = params.get("_meta") or {}
        if name in self.threaded:
            threading.Thread(
                target=self._run, args=(tool, request_id, args, meta), daemon=True
            ).start()
        else:
            self._run(tool, request_id, args, meta)

    def _run(self, tool: Tool, request_id: Any, args: dict[str, Any], meta: dict[str, Any]) -> None:
        result = tool(self, request_id, args, meta)
        if result is not None:
            self.respond(request_id, result)

    def tool(self, name: str, *, threaded: bool = False) -> Callable[[Tool], Tool]:
        def register(fn: Tool) -> Tool:
            self.tools[name] = fn
            if threaded:
                self.threaded.add(name)
            return fn

        return register

    def is_cancelled(self, request_id: Any) -> bool:
        with self.state_lock:
            return request_id in self.cancelled

    # -- reordering ----------------------------------------------------------------------------

    def hold(self, request_id: Any, result: dict[str, Any]) -> None:
        with self.held_cond:
            self.held.append((request_id, result))
            self.held_cond.notify()

    def _flusher(self) -> None:
        while True:
            with self.held_cond:
                while not self.held:
                    self.held_cond.wait()
                deadline = time.monotonic() + 0.003
                while len(self.held) < 8 and time.monotonic() < deadline:
                    self.held_cond.wait(max(0.0, deadline - time.monotonic()))
                batch, self.held = self.held, []
            if len(batch) > 1:
                with self.state_lock:
                    self.reordered_batches += 1
            data = b"".join(
                json.dumps({"jsonrpc": "2.0", "id": i, "result": r}, separators=(",", ":")).encode()
                + b"\n"
                for i, r in reversed(batch)
            )
            self.write_raw(data)

    # -- the default tools -----------------------------------------------------------------------

    def _register_defaults(self) -> None:
        @self.tool("echo")
        def echo(server: Server, rid: Any, args: dict[str, Any], meta: dict[str, Any]) -> Any:
            result = text(str(args.get("text", "")))
            if server.args.reorder:
                server.hold(rid, result)
                return None
            return result

        @self.tool("env")
        def env(server: Server, rid: Any, args: dict[str, Any], meta: dict[str, Any]) -> Any:
            names = args.get("names", [])
            return structured(
                {
                    "env": {n: os.environ.get(n) for n in names},
                    "cwd": os.getcwd(),
                    "pid": os.getpid(),
                    "pgid": os.getpgid(0),
                }
            )

        @self.tool("answers")
        def answers(server: Server, rid: Any, args: dict[str, Any], meta: dict[str, Any]) -> Any:
            return structured({"answers": server.early_answers})

        @self.tool("stats")
        def stats(server: Server, rid: Any, args: dict[str, Any], meta: dict[str, Any]) -> Any:
            return structured({"calls": server.calls, "reordered": server.reordered_batches})

        @self.tool("progress", threaded=True)
        def progress(server: Server, rid: Any, args: dict[str, Any], meta: dict[str, Any]) -> Any:
            n = int(args.get("n", 3))
            token = meta.get("progressToken")
            for i in range(1, n + 1):
                if token is not None:
                    server.progress(token, i, n)
            return structured({"counted": n, "token": token})

        @self.tool("pulse", threaded=True)
        def pulse(server: Server, rid: Any, args: dict[str, Any], meta: dict[str, Any]) -> Any:
            """Progress every interval_ms, count times (forever without count), then a result."""
            interval = float(args.get("interval_ms", 100)) / 1000
            count = args.get("count")
            token = meta.get("progressToken")
            done = 0
            stop = time.monotonic() + 60
            while (count is None or done < count) and time.monotonic() < stop:
                if server.is_cancelled(rid):
                    return None
                time.sleep(interval)  # the server's own pacing
                done += 1
                if token is not None:
                    server.progress(token, done)
            return structured({"pulses": done})

        @self.tool("never")
        def never(server: Server, rid: Any, args: dict[str, Any], meta: dict[str, Any]) -> Any:
            return None

        @self.tool("crash")
        def crash(server: Server, rid: Any, args: dict[str, Any], meta: dict[str, Any]) -> Any:
            """Exit at once with status ``code`` (no response)."""
            os._exit(int(args.get("code", 1)))

        @self.tool("answer_and_exit")
        def answer_and_exit(
            server: Server, rid: Any, args: dict[str, Any], meta: dict[str, Any]
        ) -> Any:
            """Write this call's response (after ``notes`` notifications), then exit at once."""
            for i in range(int(args.get("notes", 0))):
                server.notify("notifications/message", {"level": "info", "data": f"bye {i}"})
            server.respond(rid, text("last words"))
            os._exit(int(args.get("code", 0)))

        @self.tool("respond_for")
        def respond_for(
            server: Server, rid: Any, args: dict[str, Any], meta: dict[str, Any]
        ) -> Any:
            """Answer another (earlier) request id first, then this one."""
            server.respond(args["id"], text("a late answer"))
            return text("answered for " + str(args["id"]))

        @self.tool("ask", threaded=True)
        def ask(server: Server, rid: Any, args: dict[str, Any], meta: dict[str, Any]) -> Any:
            """Send one request to the client and return its answer. ``id``: the request id
            to use; ``"same"`` reuses the id of this tools/call (pending on the client)."""
            wanted = args.get("id")
            sent = server.start_request(
                args["method"], args.get("params"), rid if wanted == "same" else wanted
            )
            return structured({"answer": server.await_response(sent)})

        @self.tool("ask_many", threaded=True)
        def ask_many(server: Server, rid: Any, args: dict[str, Any], meta: dict[str, Any]) -> Any:
            """Send ``count`` requests at once, then wait for every answer."""
            ids = [
                server.start_request(args["method"], args.get("params"))
                for _ in range(int(args["count"]))
            ]
            return structured({"answers": [server.await_response(i, 30.0) for i in ids]})


def main(configure: Callable[[Server], None] | None = None) -> None:
    server = Server(sys.argv[1:])
    if configure is not None:
        configure(server)
    server.serve()
