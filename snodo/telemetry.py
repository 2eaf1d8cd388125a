"""OpenTelemetry spans and metrics for requests, when ``opentelemetry-api`` is installed.

Nothing here imports OpenTelemetry until the first request asks (:func:`available`); without
it :data:`enabled` turns False and the drivers send as before, at the cost of one check of
that flag. With it: a CLIENT span per request (``snodo.calls.drive``, ``snodo.aio``), its
context injected into ``_meta`` unless the call gave ``trace_context=``, span events for
progress and input rounds, ``mcp.client.operation.duration`` per request and
``mcp.client.session.duration`` per connection; the ``Runtime`` opens a SERVER span per request
with the context it extracts from ``_meta``. Names and attributes: ``snodo.protocol.telemetry``.
Emits through the global providers, or those given to :func:`configure`; without an SDK the
API records nothing, so a call only passes a valid current context on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from snodo.log import get_logger
from snodo.protocol import telemetry as conv
from snodo.protocol.errors import McpError
from snodo.protocol.meta import PROTOCOL_VERSION_KEY
from snodo.transports.base import RequestOptions, Transport, session_id_of
from snodo.transports.targets import Http, Stdio

__all__ = [
    "INSTRUMENTATION_NAME",
    "RECHECK",
    "TracedRequester",
    "available",
    "configure",
    "enabled",
    "live",
    "request",
    "serve",
    "session_closed",
]

INSTRUMENTATION_NAME = "snodo"

#: None until the first request looks; then whether OpenTelemetry is installed.
enabled: bool | None = None

_loading = threading.Lock()

_PIPE: tuple[tuple[str, str | int], ...] = ((conv.NETWORK_TRANSPORT, "pipe"),)

# Set by _load: the API's modules and objects (Any: the package is optional for mypy too).
_trace: Any = None
_context: Any = None
_tracer: Any = None
_propagator: Any = None
_error_status: Any = None
_client_kind: Any = None
_server_kind: Any = None
_operation: Any = None
_session: Any = None
_served: Any = None
_metrics: Any = None
#: The API's stand-in providers while no SDK is set (None: a real one was set before us).
_unset_tracers: Any = None
_unset_meters: Any = None
#: Whether anything records: providers given to configure(), or global ones set since.
_live = False
_own = False
#: How often (seconds) the API is asked whether global providers were set since: asking costs
#: ~1.3 µs (it reads the environment), more than the rest of a no-op call.
RECHECK = 1.0
_checked_at = float("-inf")


def available() -> bool:
    """Whether OpenTelemetry is installed (imported on the first call, then remembered)."""
    if enabled is None:
        with _loading:
            if enabled is None:
                _load()
    return bool(enabled)


def live() -> bool:
    """Whether OpenTelemetry is installed and something records (an SDK is configured)."""
    return available() and _recording()


def _load() -> None:
    global enabled, _trace, _context, _propagator, _error_status, _client_kind, _server_kind
    global _metrics, _unset_tracers, _unset_meters
    try:
        from opentelemetry import context, metrics, trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
    except ImportError:
        enabled = False
        return
    except Exception as exc:  # a broken install must not break the calls
        get_logger(__name__).warning(
            "OpenTelemetry could not be imported; no spans", error=repr(exc)
        )
        enabled = False
        return
    _trace = trace
    _context = context
    _metrics = metrics
    tracers = trace.get_tracer_provider()
    _unset_tracers = tracers if isinstance(tracers, trace.ProxyTracerProvider) else None
    meters = metrics.get_meter_provider()
    # The API's stand-in has no public name; it is what get_meter_provider returns until set.
    _unset_meters = meters if type(meters).__name__ == "_ProxyMeterProvider" else None
    _propagator = TraceContextTextMapPropagator()
    _error_status = trace.Status(trace.StatusCode.ERROR)
    _client_kind = trace.SpanKind.CLIENT
    _server_kind = trace.SpanKind.SERVER
    _providers(None, None)
    enabled = True


def configure(tracer_provider: Any = None, meter_provider: Any = None) -> None:
    """Emit through these providers instead of the global ones (None: the global one again).

    For a program (or a test) that keeps its own providers; raises ImportError without
    OpenTelemetry.
    """
    if not available():
        raise ImportError("snodo.telemetry.configure needs opentelemetry-api (snodo[otel])")
    _providers(tracer_provider, meter_provider)


def _providers(tracer_provider: Any, meter_provider: Any) -> None:
    global _tracer, _operation, _session, _served, _own, _live, _checked_at
    _own = tracer_provider is not None or meter_provider is not None
    _live = False
    _checked_at = float("-inf")
    from opentelemetry import metrics, trace

    _tracer = trace.get_tracer(INSTRUMENTATION_NAME, tracer_provider=tracer_provider)
    meter = metrics.get_meter(INSTRUMENTATION_NAME, meter_provider=meter_provider)
    _operation = _histogram(
        meter, conv.CLIENT_OPERATION_DURATION, "Duration of an MCP request as the client sees it"
    )
    _session = _histogram(
        meter, conv.CLIENT_SESSION_DURATION, "How long an MCP client connection was open"
    )
    _served = _histogram(
        meter, conv.SERVER_OPERATION_DURATION, "Duration of an MCP request as the server sees it"
    )


def _histogram(meter: Any, name: str, description: str) -> Any:
    """A histogram in seconds with the conventions' buckets (advice the API takes from 1.23)."""
    buckets = list(conv.DURATION_BUCKETS)
    try:
        return meter.create_histogram(
            name, unit="s", description=description, explicit_bucket_boundaries_advisory=buckets
        )
    except TypeError:
        return meter.create_histogram(name, unit="s", description=description)


def _recording() -> bool:
    """Whether an SDK is configured (the API alone records nothing), asked at most every
    :data:`RECHECK` seconds; once one is set, the API does not let it be replaced, so a True
    is kept."""
    global _live, _checked_at
    if _live:
        return True
    now = time.monotonic()
    if now - _checked_at < RECHECK:
        return False
    _checked_at = now
    _live = (
        _own
        or _trace.get_tracer_provider() is not _unset_tracers
        or _metrics.get_meter_provider() is not _unset_meters
    )
    return _live


def _passed_on(message: dict[str, Any]) -> dict[str, Any]:
    """Without an SDK: ``message`` with the current span's context, when there is a valid one
    (a context propagated into this process), as the API's no-op span would pass it on."""
    if not _trace.get_current_span().get_span_context().is_valid:
        return message
    carrier: dict[str, str] = {}
    _propagator.inject(carrier)
    return conv.with_trace(message, carrier)


def _network(transport: object) -> tuple[tuple[str, str | int], ...]:
    target = getattr(transport, "target", None)
    if isinstance(target, Http):
        return conv.http_peer(target.url)
    if isinstance(target, Stdio):
        return _PIPE
    return ()


def _error_type(error: BaseException) -> str:
    return str(error.code) if isinstance(error, McpError) else type(error).__qualname__


class _Traced:
    """One request's CLIENT span, from the message sent to its answer."""

    __slots__ = ("attrs", "span", "started")

    def __init__(self, span: Any, attrs: conv.Attributes) -> None:
        self.span = span
        self.attrs = attrs
        self.started = time.perf_counter()

    def end(self, response: Mapping[str, Any]) -> None:
        span = self.span
        error_type = conv.error_type_of(response)
        if span.is_recording():
            if error_type is not None:
                span.set_attribute(conv.ERROR_TYPE, error_type)
                span.set_status(_error_status)
            event = conv.input_round_attributes(response)
            if event is not None:
                span.add_event(conv.INPUT_ROUND_EVENT, event)
        span.end()
        _operation.record(
            time.perf_counter() - self.started, conv.metric_attributes(self.attrs, error_type)
        )

    def fail(self, error: BaseException) -> None:
        span = self.span
        error_type = _error_type(error)
        if span.is_recording():
            span.set_attribute(conv.ERROR_TYPE, error_type)
            span.set_status(_trace.Status(_trace.StatusCode.ERROR, getattr(error, "message", None)))
        span.end()
        _operation.record(
            time.perf_counter() - self.started, conv.metric_attributes(self.attrs, error_type)
        )


def _begin(
    transport: Transport, message: dict[str, Any], options: RequestOptions
) -> tuple[_Traced, dict[str, Any]]:
    """Start the CLIENT span of ``message`` (a child of the current span, or of the caller's
    ``trace_context=``) and put its context in the message's ``_meta``."""
    method = message["method"]
    params = message.get("params")
    meta = params.get("_meta") if type(params) is dict else None
    given = conv.trace_carrier(meta)
    parent = _propagator.extract(given) if given else None
    attrs = conv.request_attributes(
        method,
        params,
        message.get("id"),
        options.dialect.version,
        session_id_of(transport),
        _network(transport),
    )
    span = _tracer.start_span(
        conv.span_name(method, conv.target_of(method, params)),
        context=parent,
        kind=_client_kind,
        attributes=attrs,
    )
    if not given:
        carrier: dict[str, str] = {}
        _propagator.inject(carrier, context=_trace.set_span_in_context(span))
        message = conv.with_trace(message, carrier)
    return _Traced(span, attrs), message


def _progress_events(span: Any, target: Callable[[dict[str, Any]], Any]) -> Any:
    def on_progress(params: dict[str, Any]) -> Any:
        span.add_event(conv.PROGRESS_EVENT, conv.progress_attributes(params))
        return target(params)

    return on_progress


def request(
    transport: Transport, message: dict[str, Any], options: RequestOptions
) -> dict[str, Any]:
    """``transport.request(message, options)`` in a CLIENT span (the sync driver's hook)."""
    if not available():
        return transport.request(message, options)
    if not _recording():
        return transport.request(_passed_on(message), options)
    traced, message = _begin(transport, message, options)
    if options.on_progress is not None and traced.span.is_recording():
        options = replace(options, on_progress=_progress_events(traced.span, options.on_progress))
    try:
        response = transport.request(message, options)
    except BaseException as error:
        traced.fail(error)
        raise
    traced.end(response)
    return response


class TracedRequester:
    """An ``snodo.aio`` requester whose requests run in CLIENT spans (wraps the real one)."""

    __slots__ = ("inner", "transport")

    def __init__(self, inner: Any, transport: Transport) -> None:
        self.inner = inner
        self.transport = transport

    async def request(
        self, message: dict[str, Any], options: RequestOptions, callbacks: Any
    ) -> dict[str, Any]:
        """The inner requester's ``request``, traced."""
        if not _recording():
            sent: dict[str, Any] = await self.inner.request(_passed_on(message), options, callbacks)
            return sent
        traced, message = _begin(self.transport, message, options)
        progress = getattr(callbacks, "progress", None)
        if progress is not None and traced.span.is_recording():
            callbacks = replace(callbacks, progress=_progress_events(traced.span, progress))
        try:
            response: dict[str, Any] = await self.inner.request(message, options, callbacks)
        except BaseException as error:
            traced.fail(error)
            raise
        traced.end(response)
        return response

    async def aclose(self) -> None:
        """The inner requester's ``aclose``."""
        await self.inner.aclose()


def session_closed(transport: Transport, version: str, opened: float) -> None:
    """Record ``mcp.client.session.duration`` for a connection opened at ``opened``
    (``time.monotonic()``) and closing now."""
    if not available() or not _recording():
        return
    attrs: conv.Attributes = {conv.PROTOCOL_VERSION: version}
    for key, value in _network(transport):
        attrs[key] = value
    _session.record(time.monotonic() - opened, attrs)


def serve(
    run: Callable[[], dict[str, Any] | None],
    rid: str | int,
    method: str,
    params: Mapping[str, Any],
    version: str | None,
) -> dict[str, Any] | None:
    """``run()`` (the dispatch of one request) in a SERVER span whose parent is the context
    in the request's ``_meta``; the span is current while the handler runs."""
    if not available() or not _recording():
        return run()
    carrier = conv.trace_carrier(params.get("_meta"))
    parent = _propagator.extract(carrier) if carrier else None
    if version is None:
        meta = params.get("_meta")
        found = meta.get(PROTOCOL_VERSION_KEY) if isinstance(meta, Mapping) else None
        version = found if type(found) is str else None
    attrs = conv.request_attributes(method, params, rid, version, None)
    span = _tracer.start_span(
        conv.span_name(method, conv.target_of(method, params)),
        context=parent,
        kind=_server_kind,
        attributes=attrs,
    )
    started = time.perf_counter()
    token = _context.attach(_trace.set_span_in_context(span))
    error_type: str | None = None
    try:
        reply = run()
    except BaseException as error:
        error_type = _error_type(error)
        raise
    else:
        error_type = None if reply is None else conv.error_type_of(reply)
        return reply
    finally:
        _context.detach(token)
        if error_type is not None and span.is_recording():
            span.set_attribute(conv.ERROR_TYPE, error_type)
            span.set_status(_error_status)
        span.end()
        _served.record(time.perf_counter() - started, conv.metric_attributes(attrs, error_type))
