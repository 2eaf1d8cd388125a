"""The same calls over every connection snodo offers, against the example Runtime.

    python examples/client_transports.py            # every leg
    python examples/client_transports.py direct     # only the legs named

For each leg (in process, over stdio, over HTTP, through a custom transport: one entry each in
LEGS) and each
protocol version, pinned with ``protocol=``, it opens a client and runs: the negotiated version,
``server/discover`` (2026-07-28) or the session-era session, the lists, a tool call, a call with
progress, a resource read, a prompt, a completion, the ``deploy`` tool answered by an input handler,
the manual ``InputRequired`` flow (2026-07-28), an error, and a call after close. It prints one line
per check and exits 1 if any check failed.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from example_runtime import build

import snodo

VERSIONS = ("2026-07-28", "2025-11-25", "2025-06-18")
CLIENT_INFO = {"name": "snodo-example", "version": snodo.__version__}

# What the example Runtime offers (examples/example_runtime.py).
ECHO_TOOL = "echo"
PROGRESS_TOOL = "slow_count"
PROGRESS_ARGS: dict[str, Any] = {"n": 3}
DEPLOY_TOOL = "deploy"
DEPLOY_ARGS: dict[str, Any] = {"env": "staging"}
RESOURCE = "notes://welcome"
PROMPT, PROMPT_ARGS = "review", {"name": "welcome"}
COMPLETE_PREFIX = "w"  # completes review's "name" argument


# -- the legs: one entry each -------------------------------------------------------------------

Opener = Callable[..., "snodo.Client"]


@dataclass(frozen=True)
class Leg:
    """A way to reach the example server: ``open(protocol=..., **options)`` returns a client."""

    name: str
    open: Opener


def open_direct(**options: Any) -> snodo.Client:
    """The Runtime in this process: no transport, no JSON text."""
    return snodo.direct(build(), **options)


EXAMPLES = Path(__file__).resolve().parent


def open_stdio(**options: Any) -> snodo.Client:
    """The same Runtime served by a child process: ``python -m snodo.server MODULE:ATTR``."""
    server = snodo.Stdio(sys.executable, ["-m", "snodo.server", "example_runtime:runtime"])
    return snodo.connect(server, cwd=str(EXAMPLES), **options)


_http_server: Any = None


def open_http(**options: Any) -> snodo.Client:
    """The same Runtime served over Streamable HTTP on 127.0.0.1 (started once, in process)."""
    global _http_server
    if _http_server is None:
        from snodo.server.http_server import serve_http

        _http_server = serve_http(build())
    return snodo.connect(snodo.Http(_http_server.url), **options)


def open_custom(**options: Any) -> snodo.Client:
    """The same Runtime through a custom transport (examples/custom_transport.py)."""
    from custom_transport import SocketPairTransport

    return snodo.connect((SocketPairTransport, build()), **options)


LEGS: list[Leg] = [
    Leg("direct", open_direct),
    Leg("stdio", open_stdio),
    Leg("http", open_http),
    Leg("custom", open_custom),
]


# -- the report ---------------------------------------------------------------------------------


class CheckFailed(Exception):
    """A check saw something other than what it expected."""


class NotApplicable(Exception):
    """The check does not apply to this leg or version."""


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise CheckFailed(message)


class Report:
    def __init__(self) -> None:
        self.ok = 0
        self.failed: list[str] = []
        self.skipped = 0

    def line(self, status: str, name: str, detail: str) -> None:
        print(f"  {status:<5} {name:<16} {detail}", flush=True)

    def run(self, where: str, name: str, check: Callable[[], str]) -> None:
        try:
            detail = check()
        except NotApplicable as why:
            self.skipped += 1
            self.line("n/a", name, str(why))
        except Exception as error:  # a check that fails is reported, the others still run
            self.failed.append(f"{where} {name}")
            self.line("FAIL", name, f"{type(error).__name__}: {error}")
        else:
            self.ok += 1
            self.line("ok", name, detail)


# -- helpers ------------------------------------------------------------------------------------


def deployed(result: object) -> str:
    """The deploy tool's status, from its structured result."""
    expect(isinstance(result, dict), f"a complete result, got {result!r}")
    assert isinstance(result, dict)
    expect(not result.get("isError"), f"isError: {result}")
    status = (result.get("structuredContent") or {}).get("status")
    expect(status == "deployed", f"status {status!r} in {result}")
    return str(status)


def texts(result: Mapping[str, Any]) -> str:
    """The text content of a tool result, joined."""
    content = result.get("content") or []
    return " ".join(str(c.get("text", "")) for c in content if c.get("type") == "text")


def short(value: object, limit: int = 70) -> str:
    text = value if isinstance(value, str) else repr(value)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def fill_form(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Answers for a form elicitation's requestedSchema, as a user pressing "yes" would give them."""
    answers: dict[str, Any] = {}
    for key, prop in (schema.get("properties") or {}).items():
        kind = prop.get("type")
        if "default" in prop:
            answers[key] = prop["default"]
        elif prop.get("enum"):
            answers[key] = prop["enum"][0]
        elif kind == "boolean":
            answers[key] = True
        elif kind in ("integer", "number"):
            answers[key] = prop.get("minimum", 1)
        else:
            answers[key] = "example"
    return answers


class FormHandler:
    """An input handler for form elicitations that accepts and remembers what it was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def __call__(self, params: dict[str, Any]) -> dict[str, Any]:
        self.asked.append(str(params.get("message", "")))
        return {"action": "accept", "content": fill_form(params.get("requestedSchema") or {})}


@contextmanager
def opened(leg: Leg, version: str, **options: Any) -> Iterator[snodo.Client]:
    client = leg.open(protocol=version, client_info=CLIENT_INFO, **options)
    try:
        yield client
    finally:
        client.close()


# -- the checks ---------------------------------------------------------------------------------


def run_leg(leg: Leg, version: str, report: Report) -> None:
    where = f"{leg.name} {version}"
    print(f"{leg.name} · {version}", flush=True)
    stateless = version == "2026-07-28"
    try:
        client = leg.open(protocol=version, client_info=CLIENT_INFO)
    except Exception as error:
        report.failed.append(f"{where} open")
        report.line("FAIL", "open", f"{type(error).__name__}: {error}")
        return

    with client:

        def negotiated() -> str:
            expect(client.version == version, f"negotiated {client.version}, pinned {version}")
            return f"negotiated {client.version}"

        def server() -> str:
            if stateless:
                found = client.discover()
                versions = found.get("supportedVersions") or []
                expect(version in versions, f"supportedVersions {versions} lacks {version}")
                info = (found.get("_meta") or {}).get("io.modelcontextprotocol/serverInfo") or {}
                caps = sorted(found.get("capabilities") or {})
                return (
                    f"versions {', '.join(versions)}; server {info.get('name')} "
                    f"{info.get('version')}; capabilities {', '.join(caps)}"
                )
            session = client.session
            expect(session is not None, "a session-era client has a session")
            assert session is not None
            expect(session.version == version, f"session.version is {session.version}")
            info = session.server_info or {}
            caps = sorted(session.capabilities)
            return (
                f"server {info.get('name')} {info.get('version')}; capabilities {', '.join(caps)}"
            )

        def tools() -> str:
            names = [tool["name"] for tool in client.list_tools()]
            for needed in (ECHO_TOOL, PROGRESS_TOOL, DEPLOY_TOOL):
                expect(needed in names, f"{needed!r} missing from {names}")
            return ", ".join(names)

        def echo() -> str:
            result = client.call_tool(ECHO_TOOL, {"text": "hello from snodo"}, timeout=5.0)
            expect(isinstance(result, dict), f"a complete result, got {result!r}")
            assert isinstance(result, dict)
            expect(not result.get("isError"), f"isError: {result}")
            expect("hello from snodo" in texts(result), f"echoed {texts(result)!r}")
            return repr(texts(result))

        def progress() -> str:
            seen: list[dict[str, Any]] = []
            result = client.call_tool(PROGRESS_TOOL, PROGRESS_ARGS, progress=seen.append)
            expect(isinstance(result, dict), f"a complete result, got {result!r}")
            assert isinstance(result, dict)
            expect(len(seen) > 0, "no progress notifications arrived")
            steps = ", ".join(
                f"{p.get('progress')}/{p.get('total', '?')}" for p in seen if "progress" in p
            )
            return f"{len(seen)} reports ({steps}) then {texts(result)!r}"

        def resource() -> str:
            uris = [r["uri"] for r in client.list_resources()]
            expect(RESOURCE in uris, f"{RESOURCE} missing from {uris}")
            result = client.read_resource(RESOURCE)
            expect(isinstance(result, dict), f"a complete result, got {result!r}")
            assert isinstance(result, dict)
            contents = result.get("contents") or []
            expect(len(contents) > 0, f"{RESOURCE} has no contents")
            text = contents[0].get("text")
            expect(isinstance(text, str) and text != "", f"no text in {contents[0]}")
            return f"{RESOURCE} -> {short(text, 50)!r} (of {len(uris)} resources)"

        def prompt() -> str:
            names = [p["name"] for p in client.list_prompts()]
            expect(PROMPT in names, f"{PROMPT} missing from {names}")
            result = client.get_prompt(PROMPT, PROMPT_ARGS)
            expect(isinstance(result, dict), f"a complete result, got {result!r}")
            assert isinstance(result, dict)
            messages = result.get("messages") or []
            expect(len(messages) > 0, "the prompt has no messages")
            text = messages[0].get("content", {}).get("text", "")
            expect(PROMPT_ARGS["name"] in text, f"the argument is not in {text!r}")
            return f"{PROMPT}({PROMPT_ARGS}) -> {short(text, 40)!r}"

        def completion() -> str:
            result = client.request(
                "completion/complete",
                {
                    "ref": {"type": "ref/prompt", "name": PROMPT},
                    "argument": {"name": "name", "value": COMPLETE_PREFIX},
                },
            )
            expect(isinstance(result, dict), f"a complete result, got {result!r}")
            assert isinstance(result, dict)
            values = (result.get("completion") or {}).get("values")
            expect(isinstance(values, list) and len(values) > 0, f"no values: {result}")
            assert isinstance(values, list)
            expect(all(str(v).startswith(COMPLETE_PREFIX) for v in values), f"values {values}")
            return f"{PROMPT}.name {COMPLETE_PREFIX!r}* -> {', '.join(map(str, values))}"

        def unknown_tool() -> str:
            try:
                client.call_tool("no-such-tool", {})
            except snodo.McpError as failure:
                expect(failure.kind == "protocol", f"kind {failure.kind}")
                return f"unknown tool -> McpError {failure.code} {failure.message!r}"
            raise CheckFailed("calling an unknown tool did not raise McpError")

        checks: list[tuple[str, Callable[[], str]]] = [
            ("version", negotiated),
            ("discover" if stateless else "session", server),
            ("list_tools", tools),
            ("call_tool echo", echo),
            ("progress", progress),
            ("read_resource", resource),
            ("get_prompt", prompt),
            ("completion", completion),
            ("error", unknown_tool),
        ]
        for name, check in checks:
            report.run(where, name, check)

    def deploy_with_handler() -> str:
        form = FormHandler()
        with opened(leg, version, input_handlers={"form": form}) as asking:
            result = asking.call_tool(DEPLOY_TOOL, DEPLOY_ARGS, timeout=10.0)
        status = deployed(result)
        expect(len(form.asked) > 0, "the form handler was never asked")
        return f"the form handler was asked {short(form.asked[0], 30)!r} -> {status}"

    def deploy_by_hand() -> str:
        if not stateless:
            raise NotApplicable("session-era: the server asks with elicitation/create instead")
        capabilities: dict[str, Any] = {"elicitation": {"form": {}}}
        with opened(leg, version, client_capabilities=capabilities) as manual:
            pending = manual.call_tool(DEPLOY_TOOL, DEPLOY_ARGS)
            expect(
                isinstance(pending, snodo.InputRequired), f"InputRequired expected, got {pending!r}"
            )
            assert isinstance(pending, snodo.InputRequired)
            answers = {
                key: {
                    "action": "accept",
                    "content": fill_form(request.get("params", {}).get("requestedSchema") or {}),
                }
                for key, request in pending.input_requests.items()
            }
            result = manual.call_tool(
                DEPLOY_TOOL,
                DEPLOY_ARGS,
                input_responses=answers,
                request_state=pending.request_state,
            )
        status = deployed(result)
        return f"InputRequired {sorted(pending.input_requests)}, answered by hand -> {status}"

    def after_close() -> str:
        try:
            client.call_tool(ECHO_TOOL, {"text": "too late"})
        except snodo.McpError as failure:
            expect(failure.code == -32000, f"code {failure.code}")
            expect(failure.kind == "transport", f"kind {failure.kind}")
            return f"call after close -> McpError {failure.code} ({failure.kind})"
        raise CheckFailed("a call on a closed client did not raise McpError")

    report.run(where, "deploy (handler)", deploy_with_handler)
    report.run(where, "deploy (by hand)", deploy_by_hand)
    report.run(where, "closed", after_close)


def main(argv: list[str]) -> int:
    wanted = set(argv)
    unknown = wanted - {leg.name for leg in LEGS}
    if unknown:
        print(f"unknown leg(s): {', '.join(sorted(unknown))}; legs: {[leg.name for leg in LEGS]}")
        return 2
    legs = [leg for leg in LEGS if not wanted or leg.name in wanted]
    print(f"snodo {snodo.__version__}: the same calls over {', '.join(leg.name for leg in legs)}\n")
    report = Report()
    started = time.perf_counter()
    try:
        for leg in legs:
            for version in VERSIONS:
                run_leg(leg, version, report)
    finally:
        if _http_server is not None:
            _http_server.close()
    elapsed = time.perf_counter() - started
    status = "OK" if not report.failed else "FAILED"
    print(
        f"\nsummary: {status}: {report.ok} ok, {len(report.failed)} failed, {report.skipped} n/a "
        f"over {len(legs)} leg(s) x {len(VERSIONS)} versions in {elapsed:.2f} s"
    )
    for failure in report.failed:
        print(f"  failed: {failure}")
    return 0 if not report.failed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
