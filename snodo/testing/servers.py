"""Runtimes served in tests, with a handle to crash, freeze, resume and restart them.

:func:`serve_http` serves a Runtime over Streamable HTTP on 127.0.0.1, in a child process
(``python -m snodo.server --http``, its own process group) or, with ``in_process=True``, in a
thread of this process (``snodo.server.serve_http``). :func:`serve_stdio` gives the command that
runs a Runtime as a stdio server; the client starts that process, so its kill/stop/resume take
the client and act on :func:`server_process` (``client.transport.pid``, the stdio transport's
public pid). A runtime is a ``Runtime`` (thread only), ``"module:attribute"`` (importable from
``cwd``) or ``"path/to/file.py:attribute"``.

Every wait has a deadline; a server binds 127.0.0.1 unless ``host=`` says otherwise.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import snodo

if TYPE_CHECKING:
    from snodo.server import Runtime
    from snodo.server.http_server import HttpServer

__all__ = [
    "START_DEADLINE",
    "STOP_DEADLINE",
    "ServedRuntime",
    "empty_runtime",
    "serve_http",
    "serve_stdio",
    "server_process",
    "warm_up",
]

#: Longest a served process takes to listen (a cold Python start on a loaded machine).
START_DEADLINE = 30.0
#: Longest a server takes to end once told to (then it is killed).
STOP_DEADLINE = 10.0

_LOOPBACK = "127.0.0.1"
_POLL = 0.01


def empty_runtime() -> Runtime:
    """A Runtime with one ``echo`` tool (what :func:`warm_up` serves)."""
    from snodo.server import Context, Runtime

    runtime = Runtime("snodo-testing")

    @runtime.tool(
        input_schema={
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        }
    )
    def echo(arguments: dict[str, Any], ctx: Context) -> str:
        """Say the text back."""
        return str(arguments["text"])

    return runtime


def _command_target(runtime: str, cwd: str | None) -> tuple[str, str | None]:
    """``"module:attr"`` as it is; ``"dir/file.py:attr"`` as ``"file:attr"`` run from ``dir``."""
    where, sep, attr = runtime.rpartition(":")
    if not sep:
        raise ValueError(f"a runtime is 'module:attribute' or 'path.py:attribute', not {runtime!r}")
    if where.endswith(".py"):
        path = Path(where if cwd is None else Path(cwd, where)).resolve()
        return f"{path.stem}:{attr}", str(path.parent)
    return runtime, cwd


def _pythonpath(directory: str | None) -> dict[str, str]:
    env = dict(os.environ)
    if directory is not None:
        parts = [directory, *filter(None, [env.get("PYTHONPATH")])]
        env["PYTHONPATH"] = os.pathsep.join(parts)
    return env


def _check_host(host: str | None) -> str:
    return _LOOPBACK if host is None else host


def _running(pid: int) -> bool:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return False
    return raw[raw.rindex(")") + 2] not in ("Z", "X")


def wait_until(predicate: Any, deadline: float, what: str) -> None:
    """Look at ``predicate()`` every few ms until it holds, for a state no event announces
    (a process gone, a client closed); ``AssertionError("{what} within {deadline}s")`` if not."""
    end = time.monotonic() + deadline
    pause = threading.Event()
    while not predicate():
        if time.monotonic() >= end:
            raise AssertionError(f"{what} within {deadline}s")
        pause.wait(_POLL)


def server_process(client: snodo.Client) -> int:
    """The pid of the stdio server process ``client`` talks to now (after a restart: the new
    one). ``TypeError`` for a client that has no server process (HTTP, direct)."""
    pid = getattr(client.transport, "pid", None)
    if not isinstance(pid, int):
        msg = f"{client!r} has no server process (only stdio connections have one)"
        raise TypeError(msg)
    return pid


class ServedRuntime:
    """A Runtime served for a test. ``target`` is what to pass to ``snodo.connect``; ``url``
    (HTTP) where it listens; ``pid`` the served process (None in a thread, or for stdio, where
    the client starts the process: pass the client to :meth:`kill`, :meth:`stop`,
    :meth:`resume`). A context manager: leaving it closes the server."""

    def __init__(
        self,
        kind: str,
        target: snodo.Stdio | snodo.Http,
        *,
        command: list[str] | None = None,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        runtime: Runtime | None = None,
        host: str = _LOOPBACK,
        port: int = 0,
        path: str = "/mcp",
        options: dict[str, Any] | None = None,
    ) -> None:
        self.kind = kind
        self.target = target
        self._command = command
        self._env = env
        self._cwd = cwd
        self._runtime = runtime
        self._host = host
        self._port = port
        self._path = path
        self._options = options or {}
        self._process: subprocess.Popen[bytes] | None = None
        self._log: Any = None
        self._server: HttpServer | None = None
        self._stopped = False
        self._closed = False

    # -- what it is ------------------------------------------------------------------------

    @property
    def url(self) -> str | None:
        """The HTTP server's URL (None for stdio)."""
        return self.target.url if isinstance(self.target, snodo.Http) else None

    @property
    def pid(self) -> int | None:
        """The served process (HTTP in a child process), None otherwise."""
        process = self._process
        return process.pid if process is not None and process.poll() is None else None

    @property
    def running(self) -> bool:
        """True while the HTTP server is up (a stopped process counts as up)."""
        if self._server is not None:
            return True
        return self._process is not None and self._process.poll() is None

    def __repr__(self) -> str:
        return f"<ServedRuntime {self.kind} {self.target!r}>"

    def __enter__(self) -> ServedRuntime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- starting ----------------------------------------------------------------------------

    def start(self) -> ServedRuntime:
        """Start the HTTP server (on the same port as before, once it had one)."""
        if self._closed:
            raise RuntimeError("this ServedRuntime is closed")
        if self.kind == "http-thread":
            from snodo.server.http_server import serve_http as serve

            assert self._runtime is not None
            self._server = serve(self._runtime, self._host, self._port, self._path, **self._options)
            self._port = self._server.port
        elif self.kind == "http-process":
            self._spawn()
        else:
            raise TypeError("a stdio server is started by the client that connects to it")
        self.target = snodo.Http(f"http://{self._host}:{self._port}{self._path}")
        return self

    def _spawn(self) -> None:
        assert self._command is not None
        command = [*self._command, "--port", str(self._port)]
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in _reap
        group: dict[str, Any] = (
            {"process_group": 0} if sys.version_info >= (3, 11) else {"start_new_session": True}
        )
        process = subprocess.Popen(
            command,
            cwd=self._cwd,
            env=self._env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._log,
            **group,
        )
        self._process = process
        try:
            self._port = self._announced_port(process)
        except BaseException:
            self._reap(signal.SIGKILL)
            raise

    def _announced_port(self, process: subprocess.Popen[bytes]) -> int:
        """The port of ``snodo.server: serving URL`` on the server's stderr, within
        START_DEADLINE (an AssertionError with what it wrote when it exits or says nothing)."""
        end = time.monotonic() + START_DEADLINE
        pause = threading.Event()
        while True:
            text = self._log_text()
            for line in text.splitlines():
                if "serving http://" in line:
                    url = line.rsplit(" ", 1)[1]
                    return int(url.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])
            if process.poll() is not None or time.monotonic() >= end:
                msg = (
                    f"the served runtime did not listen within {START_DEADLINE}s "
                    f"(exit {process.poll()}): {text[-2000:]}"
                )
                raise AssertionError(msg)
            pause.wait(_POLL)

    def _log_text(self) -> str:
        if self._log is None:
            return ""
        data = os.pread(self._log.fileno(), 1 << 20, 0)
        return data.decode("utf-8", "replace")

    @property
    def log(self) -> str:
        """What the served process wrote on stderr (HTTP in a child process)."""
        return self._log_text()

    # -- faults ------------------------------------------------------------------------------

    def kill(self, client: snodo.Client | None = None) -> None:
        """Crash the server now: SIGKILL for a process (stdio: the one ``client`` talks to),
        an abrupt close for a thread. Returns once it is dead."""
        if self.kind == "stdio":
            pid = self._client_pid(client)
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGKILL)
            wait_until(lambda: not _running(pid), STOP_DEADLINE, f"server {pid} did not die")
        elif self.kind == "http-thread":
            server, self._server = self._server, None
            if server is not None:
                server.close()
        else:
            self._reap(signal.SIGKILL)

    def stop(self, client: snodo.Client | None = None) -> None:
        """Freeze the server process (SIGSTOP): it holds its connections and answers nothing."""
        self._signal(client, signal.SIGSTOP)
        self._stopped = True

    def resume(self, client: snodo.Client | None = None) -> None:
        """Let a frozen server run again (SIGCONT)."""
        self._signal(client, signal.SIGCONT)
        self._stopped = False

    def restart(self) -> None:
        """Kill the HTTP server and start it again on the same port (a server that forgot its
        sessions). A stdio server is restarted by the client's restart policy: :meth:`kill`."""
        if self.kind == "stdio":
            raise TypeError("a stdio server restarts through its client: kill(client)")
        self.kill()
        self.start()

    def close(self) -> None:
        """End the server (SIGTERM, then SIGKILL past STOP_DEADLINE) and free what it held."""
        self._closed = True
        if self.kind == "http-thread":
            server, self._server = self._server, None
            if server is not None:
                server.close()
        elif self.kind == "http-process":
            self._reap(signal.SIGTERM)

    # -- helpers -----------------------------------------------------------------------------

    def _client_pid(self, client: snodo.Client | None) -> int:
        if client is None:
            raise TypeError("a stdio server is the client's child: pass the client")
        return server_process(client)

    def _signal(self, client: snodo.Client | None, signo: int) -> None:
        if self.kind == "stdio":
            os.kill(self._client_pid(client), signo)
        elif self.kind == "http-process" and self._process is not None:
            os.killpg(self._process.pid, signo)
        else:
            raise TypeError("a server in a thread cannot be stopped: serve_http(in_process=False)")

    def _reap(self, signo: int) -> None:
        process, self._process = self._process, None
        if process is not None:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGCONT)
                os.killpg(process.pid, signo)
                try:
                    process.wait(STOP_DEADLINE)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait(STOP_DEADLINE)
            _kill_group(process.pid)
        self._stopped = False
        if self._log is not None and self._closed:
            self._log.close()
            self._log = None


def _kill_group(pgid: int) -> None:
    """End what is left of a served process's group (its children), by group id."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return


def serve_http(
    runtime: Runtime | str,
    *,
    in_process: bool = False,
    host: str | None = None,
    port: int = 0,
    path: str = "/mcp",
    cwd: str | None = None,
    env: dict[str, str] | None = None,
    **options: Any,
) -> ServedRuntime:
    """Serve ``runtime`` over Streamable HTTP on 127.0.0.1 (``host=`` for another address),
    started: in a child process by default (``runtime`` a ``"module:attribute"`` or
    ``"file.py:attribute"`` string), or in a thread of this process with ``in_process=True``
    (``runtime`` may then be a ``Runtime``; ``options`` go to ``snodo.server.serve_http``)."""
    bind = _check_host(host)
    if in_process:
        if isinstance(runtime, str):
            from snodo.server.targets import load_runtime

            target, directory = _command_target(runtime, cwd)
            added = directory is not None and directory not in sys.path
            if added:
                sys.path.insert(0, str(directory))
            try:
                runtime = load_runtime(target)
            finally:
                if added:
                    sys.path.remove(str(directory))
        served = ServedRuntime(
            "http-thread",
            snodo.Http(f"http://{bind}:{port or 1}{path}"),
            runtime=runtime,
            host=bind,
            port=port,
            path=path,
            options=options,
        )
        return served.start()
    if not isinstance(runtime, str):
        raise TypeError(
            "a served process needs the runtime as 'module:attribute' or 'file.py:attribute' "
            "(or pass in_process=True)"
        )
    if path != "/mcp" or options:
        raise TypeError("a served process takes no path or server options (in_process=True does)")
    target, directory = _command_target(runtime, cwd)
    command = [sys.executable, "-m", "snodo.server", "--http", "--host", bind, target]
    base = _pythonpath(directory) if env is None else {**_pythonpath(directory), **env}
    served = ServedRuntime(
        "http-process",
        snodo.Http(f"http://{bind}:{port or 1}{path}"),
        command=command,
        env=base,
        cwd=cwd if directory is None else directory,
        host=bind,
        port=port,
    )
    return served.start()


def serve_stdio(runtime: str, *, cwd: str | None = None) -> ServedRuntime:
    """The stdio server of ``runtime`` (``"module:attribute"`` importable from ``cwd``, or
    ``"file.py:attribute"``): ``target`` is a ``snodo.Stdio`` to connect to (each connection,
    and each restart, starts its own process)."""
    target, directory = _command_target(runtime, cwd)
    args = ["-c", _STDIO_MAIN, directory or cwd or os.getcwd(), target]
    return ServedRuntime("stdio", snodo.Stdio(sys.executable, args))


# ``python -m snodo.server`` run from a directory, without the client having to pass cwd=/env=.
_STDIO_MAIN = (
    "import os, sys; os.chdir(sys.argv[1]); sys.path.insert(0, sys.argv[1]); "
    "from snodo.server.__main__ import main; sys.exit(main([sys.argv[2]]))"
)


def warm_up() -> None:
    """Start what snodo starts once per process on first use (the supervision root, the I/O
    hub, the stdio reaper, gevent's child watcher) by opening and closing one stdio
    connection, so that a leak check's baseline already holds them."""
    from snodo.supervision import connections

    connections()
    served = serve_stdio("snodo.testing.servers:empty_runtime")
    with snodo.connect(served.target, protocol="2026-07-28") as client:
        client.call_tool("echo", {"text": "warm"})
