"""OpenTelemetry (issue 17 item 3): CLIENT and SERVER spans, propagation through ``_meta``, the
metrics, and nothing at all without OpenTelemetry installed. The real SDK's in-memory exporters.

snodo emits through providers given to ``snodo.telemetry.configure`` (the global providers
stay unset: every other test file in the process keeps seeing the API's no-op).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import snodo
import snodo.aio
from snodo import telemetry
from snodo.server.http_server import serve_http
from tests.support import client_runtime
from tests.support.stdio_support import LATEST, PYTHON, ROOT, snodo_server

CLIENT_RUNTIME = "tests.support.client_runtime:build"
VERSIONS = [LATEST, "2025-11-25"]


class Telemetry:
    """The test's providers and what they collected."""

    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.tracer = self.tracer_provider.get_tracer("test")

    def finished(self, kind: SpanKind | None = None) -> list[ReadableSpan]:
        spans = list(self.spans.get_finished_spans())
        return [s for s in spans if kind is None or s.kind == kind]

    def client(self, method: str) -> list[ReadableSpan]:
        return [
            s
            for s in self.finished(SpanKind.CLIENT)
            if s.attributes is not None and s.attributes.get("mcp.method.name") == method
        ]

    def points(self, name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        found: list[Any] = []
        if data is None:
            return found
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        assert metric.unit == "s"
                        found.extend(metric.data.data_points)
        return found


@pytest.fixture(scope="module")
def providers() -> Iterator[Telemetry]:
    t = Telemetry()
    telemetry.configure(t.tracer_provider, t.meter_provider)
    try:
        yield t
    finally:
        telemetry.configure(None, None)
        t.meter_provider.shutdown()
        t.tracer_provider.shutdown()


@pytest.fixture
def otel(providers: Telemetry) -> Telemetry:
    providers.spans.clear()  # the metrics are cumulative: their tests compare counts
    return providers


def stdio() -> snodo.Stdio:
    return snodo.Stdio(snodo_server(CLIENT_RUNTIME).command, ["-m", "snodo.server", CLIENT_RUNTIME])


def exercise(client: snodo.Client) -> None:
    client.list_tools()
    client.call_tool("echo", {"text": "a"})
    client.read_resource("note://readme")
    client.get_prompt("review", {"name": "x"})


def check_client_spans(otel: Telemetry, version: str, network: dict[str, Any]) -> None:
    (listed,) = otel.client("tools/list")
    (called,) = [s for s in otel.client("tools/call") if s.name != "tools/call show_meta"]
    (read,) = otel.client("resources/read")
    (prompted,) = otel.client("prompts/get")
    assert listed.name == "tools/list"
    assert called.name == "tools/call echo"
    assert read.name == "resources/read note://readme"
    assert prompted.name == "prompts/get review"
    for span in (listed, called, read, prompted):
        attrs = dict(span.attributes or {})
        assert span.kind == SpanKind.CLIENT
        assert span.status.status_code == StatusCode.UNSET
        assert attrs["mcp.protocol.version"] == version
        assert attrs["jsonrpc.request.id"].isdigit()
        assert "error.type" not in attrs
        for key, value in network.items():
            assert attrs[key] == value
        if not network:
            assert "network.transport" not in attrs
    assert called.attributes is not None and called.attributes["gen_ai.tool.name"] == "echo"
    assert read.attributes is not None and read.attributes["mcp.resource.uri"] == "note://readme"
    assert prompted.attributes is not None
    assert prompted.attributes["gen_ai.prompt.name"] == "review"


def check_server_children(otel: Telemetry) -> None:
    """Every CLIENT span has exactly one SERVER span, its child (same trace, parent = it)."""
    servers = {
        (s.attributes or {}).get("jsonrpc.request.id"): s for s in otel.finished(SpanKind.SERVER)
    }
    clients = [s for s in otel.finished(SpanKind.CLIENT)]
    assert clients
    for client in clients:
        server = servers[(client.attributes or {})["jsonrpc.request.id"]]
        assert server.name == client.name
        assert server.parent is not None and client.context is not None
        assert server.context is not None
        assert server.parent.span_id == client.context.span_id
        assert server.context.trace_id == client.context.trace_id
        assert (server.attributes or {})["mcp.method.name"] == (client.attributes or {})[
            "mcp.method.name"
        ]


@pytest.mark.parametrize("version", VERSIONS)
def test_direct_spans_per_method_and_the_runtime_serves_their_children(
    otel: Telemetry, version: str
) -> None:
    with snodo.direct(client_runtime.build(), protocol=version) as client:
        exercise(client)
    check_client_spans(otel, version, {})
    check_server_children(otel)
    if version != LATEST:  # the session era: the server span knows the session's version
        (served,) = [s for s in otel.finished(SpanKind.SERVER) if s.name == "tools/call echo"]
        assert (served.attributes or {})["mcp.protocol.version"] == version


@pytest.mark.parametrize("version", VERSIONS)
def test_http_spans_carry_the_peer_and_the_in_process_server_spans_are_children(
    otel: Telemetry, version: str
) -> None:
    server = serve_http(client_runtime.build())
    try:
        with snodo.connect(snodo.Http(server.url), protocol=version) as client:
            exercise(client)
            session_id = client.session.session_id if client.session is not None else None
        port = int(server.url.rsplit(":", 1)[1].split("/")[0])
        check_client_spans(
            otel,
            version,
            {"network.transport": "tcp", "server.address": "127.0.0.1", "server.port": port},
        )
        check_server_children(otel)
        if session_id is not None:
            (called,) = otel.client("tools/call")
            assert (called.attributes or {})["mcp.session.id"] == session_id
    finally:
        server.close()


@pytest.mark.parametrize("version", VERSIONS)
def test_stdio_spans_and_the_client_span_context_reaches_the_server_in_meta(
    otel: Telemetry, version: str
) -> None:
    with snodo.connect(stdio(), cwd=str(ROOT), protocol=version) as client:
        exercise(client)
        with otel.tracer.start_as_current_span("caller") as caller:
            shown = client.call_tool("show_meta", {})
    check_client_spans(otel, version, {"network.transport": "pipe"})
    meta = shown["structuredContent"]["meta"] if "structuredContent" in shown else None
    if meta is None:
        meta = json.loads(shown["content"][0]["text"])["meta"]
    (span,) = [s for s in otel.client("tools/call") if s.name == "tools/call show_meta"]
    assert span.context is not None and span.parent is not None
    assert span.parent.span_id == caller.get_span_context().span_id  # the caller's child
    assert meta["traceparent"] == (
        f"00-{span.context.trace_id:032x}-{span.context.span_id:016x}"
        f"-{span.context.trace_flags:02x}"
    )  # the CLIENT span's own context, not the caller's


def test_a_caller_span_trace_id_reaches_the_runtime_server_span(otel: Telemetry) -> None:
    with snodo.direct(client_runtime.build()) as client:
        with otel.tracer.start_as_current_span("caller") as caller:
            client.call_tool("echo", {"text": "a"})
    trace_id = caller.get_span_context().trace_id
    (client_span,) = otel.client("tools/call")
    (server_span,) = otel.finished(SpanKind.SERVER)
    assert client_span.context is not None and server_span.context is not None
    assert client_span.context.trace_id == trace_id == server_span.context.trace_id
    assert client_span.parent is not None
    assert client_span.parent.span_id == caller.get_span_context().span_id
    assert server_span.parent is not None
    assert server_span.parent.span_id == client_span.context.span_id


def test_trace_context_given_to_a_call_is_sent_as_given_and_parents_the_span(
    otel: Telemetry,
) -> None:
    given = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    observed = client_runtime.Observed()
    with snodo.direct(client_runtime.build(observed=observed)) as client:
        client.call_tool("echo", {"text": "a"}, trace_context={"traceparent": given})
    assert observed.metas[-1]["traceparent"] == given
    (span,) = otel.client("tools/call")
    assert span.parent is not None and span.context is not None
    assert span.parent.span_id == 0xB7AD6B7169203331
    assert span.context.trace_id == 0x0AF7651916CD43DD8448EB211C80319C


@pytest.mark.parametrize("version", VERSIONS)
def test_errors_set_error_type_and_status(otel: Telemetry, version: str) -> None:
    with snodo.direct(client_runtime.build(), protocol=version) as client:
        with pytest.raises(snodo.McpError):
            client.call_tool("refuse", {})
        client.call_tool("broken", {})  # a tool error is a result
        with pytest.raises(snodo.McpError):
            client.get_prompt("no-such-prompt")
    refused, broken = otel.client("tools/call")
    assert (refused.attributes or {})["error.type"] == "-32099"
    assert refused.status.status_code == StatusCode.ERROR
    assert (broken.attributes or {})["error.type"] == "tool_error"
    assert broken.status.status_code == StatusCode.ERROR
    (missing,) = otel.client("prompts/get")
    assert (missing.attributes or {})["error.type"] == "-32602"
    assert missing.status.status_code == StatusCode.ERROR
    served = {s.name: s for s in otel.finished(SpanKind.SERVER)}
    assert (served["tools/call refuse"].attributes or {})["error.type"] == "-32099"
    assert served["tools/call refuse"].status.status_code == StatusCode.ERROR


def test_a_transport_failure_is_an_error_span(otel: Telemetry) -> None:
    client = snodo.direct(client_runtime.build())
    client.close()
    with pytest.raises(snodo.McpError):
        client.call_tool("echo", {"text": "a"})  # closed: refused before a request is made
    assert otel.client("tools/call") == []  # nothing was sent, so no span


def test_progress_reports_and_input_rounds_are_span_events(otel: Telemetry) -> None:
    reports: list[dict[str, Any]] = []

    def form(params: dict[str, Any]) -> dict[str, Any]:
        return {"action": "accept", "content": {"approved": True}}

    with snodo.direct(client_runtime.build(), input_handlers={"form": form}) as client:
        client.call_tool("count", {"n": 3}, progress=reports.append)
        done = client.call_tool("deploy", {})
    assert len(reports) == 3
    assert isinstance(done, dict) and done["structuredContent"]["action"] == "accept"
    counted, *deployed = otel.client("tools/call")
    events = [e for e in counted.events if e.name == "mcp.progress"]
    assert [(e.attributes or {})["mcp.progress.progress"] for e in events] == [1, 2, 3]
    assert (events[0].attributes or {})["mcp.progress.total"] == 3
    assert len(deployed) == 2  # one request per round
    asked = [e for e in deployed[0].events if e.name == "mcp.input_required"]
    assert len(asked) == 1 and (asked[0].attributes or {})["mcp.input_requests"]
    assert not [e for e in deployed[1].events if e.name == "mcp.input_required"]


def test_operation_and_session_durations_are_recorded(otel: Telemetry) -> None:
    def count(name: str, method: str | None = None) -> int:
        return sum(
            p.count
            for p in otel.points(name)
            if method is None or p.attributes.get("mcp.method.name") == method
        )

    calls, sessions = (
        count("mcp.client.operation.duration", "tools/call"),
        count("mcp.client.session.duration"),
    )
    served = count("mcp.server.operation.duration", "tools/call")
    with snodo.direct(client_runtime.build()) as client:
        client.call_tool("echo", {"text": "a"})
        with pytest.raises(snodo.McpError):
            client.call_tool("refuse", {})
        assert count("mcp.client.session.duration") == sessions  # recorded at close
    assert count("mcp.client.operation.duration", "tools/call") == calls + 2
    assert count("mcp.server.operation.duration", "tools/call") == served + 2
    assert count("mcp.client.session.duration") == sessions + 1
    failed = [
        p
        for p in otel.points("mcp.client.operation.duration")
        if p.attributes.get("error.type") == "-32099"
    ]
    assert failed and failed[0].sum > 0
    assert all(
        "jsonrpc.request.id" not in p.attributes
        for p in otel.points("mcp.client.operation.duration")
    )


def test_aio_calls_run_in_client_spans_with_the_caller_as_parent(otel: Telemetry) -> None:
    async def main() -> tuple[Any, dict[str, Any]]:
        async with await snodo.aio.direct(client_runtime.build()) as client:
            with otel.tracer.start_as_current_span("caller") as caller:
                shown = await client.call_tool("show_meta", {})
            return caller, shown

    caller, shown = asyncio.run(main())
    (span,) = otel.client("tools/call")
    assert span.name == "tools/call show_meta"
    assert span.parent is not None and span.context is not None
    assert span.parent.span_id == caller.get_span_context().span_id
    meta = shown["structuredContent"]["meta"]
    assert meta["traceparent"].startswith(
        f"00-{span.context.trace_id:032x}-{span.context.span_id:016x}-"
    )
    check_server_children(otel)


_BLOCKED = """
import sys

class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ImportError("blocked: " + name)
        return None

sys.meta_path.insert(0, Refuse())
"""

_CALLS = """
import json, sys
import snodo
from snodo.server.http_server import serve_http
from tests.support import client_runtime

loaded = [name for name in sys.modules if name.startswith("opentelemetry")]
with snodo.direct(client_runtime.build()) as client:
    shown = client.call_tool("show_meta", {})
server = serve_http(client_runtime.build())
try:
    with snodo.connect(snodo.Http(server.url)) as client:
        client.call_tool("echo", {"text": "a"})
finally:
    server.close()
from snodo import telemetry
print(json.dumps({
    "at_import": loaded,
    "after_calls": [name for name in sys.modules if name.startswith("opentelemetry")],
    "enabled": telemetry.enabled,
    "meta": shown["structuredContent"]["meta"],
}))
"""


def run_child(code: str) -> dict[str, Any]:
    out = subprocess.run(
        [PYTHON, "-c", textwrap.dedent(code)],
        cwd=str(ROOT),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def test_without_opentelemetry_nothing_is_imported_and_nothing_changes() -> None:
    seen = run_child(_BLOCKED + _CALLS)
    assert seen["at_import"] == []
    assert seen["after_calls"] == []
    assert seen["enabled"] is False
    assert "traceparent" not in seen["meta"]


def test_import_snodo_does_not_import_opentelemetry_and_without_an_sdk_nothing_is_sent() -> None:
    seen = run_child(_CALLS)
    assert seen["at_import"] == []
    assert seen["enabled"] is True  # the first call looked, and found the API
    assert "opentelemetry.trace" in seen["after_calls"]
    assert "opentelemetry.sdk" not in seen["after_calls"]
    assert "traceparent" not in seen["meta"]  # no SDK: no span, no context to send


def test_configure_without_opentelemetry_says_what_is_missing() -> None:
    seen = subprocess.run(
        [
            PYTHON,
            "-c",
            _BLOCKED
            + "from snodo import telemetry\n"
            + "try:\n    telemetry.configure()\nexcept ImportError as e:\n    print(e)\n",
        ],
        cwd=str(ROOT),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "snodo[otel]" in seen.stdout


def test_the_global_providers_are_left_alone(otel: Telemetry) -> None:
    assert not isinstance(trace.get_tracer_provider(), TracerProvider)


_LATE_PROVIDER = """
import json
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
import snodo
from snodo import telemetry
from tests.support import client_runtime

def traceparent(client):
    return client.call_tool("show_meta", {})["structuredContent"]["meta"].get("traceparent")

with snodo.direct(client_runtime.build()) as client:
    before = traceparent(client)
    remote = SpanContext(0xABC, 0xDEF, is_remote=True, trace_flags=TraceFlags(1))
    with trace.use_span(NonRecordingSpan(remote)):
        passed_on = traceparent(client)
    telemetry.RECHECK = 0.0  # ask the API on the next call
    trace.set_tracer_provider(TracerProvider())
    after = traceparent(client)
print(json.dumps({"before": before, "passed_on": passed_on, "after": after}))
"""


def test_without_an_sdk_a_valid_context_is_passed_on_and_a_provider_set_later_is_used() -> None:
    seen = run_child(_LATE_PROVIDER)
    assert seen["before"] is None
    assert seen["passed_on"] == f"00-{0xABC:032x}-{0xDEF:016x}-01"
    after = seen["after"]
    assert isinstance(after, str) and after.startswith("00-")
    assert after.split("-")[2] != f"{0xDEF:016x}"  # a span of its own
