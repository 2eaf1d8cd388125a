"""The call pipeline: one request, from a method and its params to its outcome, rounds included.

The seam. A :class:`CallPipeline` is built from a transport, the negotiated dialect and the
:class:`~snodo.options.ClientOptions`; it knows no ``Client``. Whoever drives calls (the sync
``Client``, ``snodo.aio``, the fleet) holds one and calls :meth:`CallPipeline.run` with the
method, the params and the call's :class:`~snodo.options.CallOptions`; ``run`` returns
``protocol.inputs.Done`` (the outcome and the input rounds answered to get it) or raises
``McpError``. One ``run``:

1. merges the call's options with the client's into the transport's ``RequestOptions``;
2. sends the request: a fresh id, the params and ``_meta`` from ``protocol.meta``, the message
   from ``protocol.jsonrpc.request``; the progress token is the request id
   (``protocol.exchange.progress_token``, the rule the transports route progress by);
3. reads the answer (``protocol.results.interpret``); a -32022 naming the connection's version
   sends it once more as it was (``protocol.negotiation``);
4. drives the input rounds (``protocol.inputs.next_round``): runs the input handlers of a round
   in the calling thread, one at a time, and sends again.

What it leaves to its driver: checking the method against the dialect and whether the
connection is closed, paging, and the -32020 re-list. The response cache wraps ``run``
(:class:`snodo.cached_calls.CachedCalls` has the same ``run``), and :func:`answer_server_request` answers the
server-to-client requests that arrive during a call, or outside one, through the same handlers.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar, cast

from snodo import telemetry
from snodo.options import NO_CALL_OPTIONS, CallOptions, ClientOptions, ProgressTarget, check_timeout
from snodo.protocol import errors, inputs, jsonrpc, negotiation, results
from snodo.protocol.dialects import Dialect
from snodo.protocol.errors import HandlerError, McpError
from snodo.protocol.exchange import progress_token
from snodo.protocol.inputs import Done, InputTask
from snodo.protocol.meta import build_params, check_log_level
from snodo.protocol.results import InputRequired
from snodo.protocol.trace import validate_trace_context
from snodo.stats import CallStats
from snodo.transports.base import (
    RequestOptions,
    ServerRequestHandler,
    Transport,
)

if TYPE_CHECKING:
    from snodo.protocol.negotiation import Session

T = TypeVar("T")

#: Request ids are fresh integers, unique in the process, so one client can be shared freely.
_ids = itertools.count(1)

#: Per-call timeouts whose request options a pipeline keeps (programs use a few).
_TIMED_MAX = 8

#: The input handlers, by kind.
Handlers = Mapping[str, Callable[[dict[str, Any]], Any]]


def next_request_id() -> int:
    """A fresh request id."""
    return next(_ids)


@dataclass(frozen=True, slots=True)
class Progress:
    """A progress report delivered to a queue or an actor: the ``notifications/progress`` params."""

    params: dict[str, Any]


class CallPipeline:
    """Sends calls on one connection and drives their input rounds (see the module docstring)."""

    __slots__ = (
        "_answer",
        "_base",
        "_handlers",
        "_rounds",
        "_timed",
        "dialect",
        "options",
        "stats",
        "transport",
    )

    def __init__(
        self,
        transport: Transport,
        dialect: Dialect,
        options: ClientOptions,
        on_server_request: ServerRequestHandler | None = None,
        stats: CallStats | None = None,
    ) -> None:
        self.transport = transport
        #: The client's counters (``Client.stats()``); they outlive a restart's new pipeline.
        self.stats = stats if stats is not None else CallStats()
        self.dialect = dialect
        self.options = options
        self._handlers: Handlers = options.input_handlers
        #: Answers the server's requests through the input handlers (the one the transport was
        #: given, when the connection passed it in).
        self._answer = on_server_request or partial(answer_server_request, options.input_handlers)
        #: The options of a call given none of its own (most calls).
        self._base = RequestOptions(
            dialect=dialect,
            timeout=options.timeout,
            on_server_request=self._answer,
            reset_timeout_on_progress=options.reset_timeout_on_progress,
            max_total_timeout=options.max_total_timeout,
        )
        self._rounds = inputs.start_rounds(options.max_input_rounds, options.input_handlers)
        #: The options of calls given only a timeout, by value (at most _TIMED_MAX).
        self._timed: dict[float | None, RequestOptions] = {}

    def request_options(self, call: CallOptions) -> RequestOptions:
        """The transport's options for a call: the client's, with what the call overrides."""
        timed_only = (
            call.progress is None
            and call.tool is None
            and call.reset_timeout_on_progress is None
            and call.max_total_timeout is None
        )
        if timed_only and call.timeout is None:
            return self._base
        check_timeout("timeout", call.timeout)
        client = self.options
        if timed_only:  # only a timeout: one record per value, as for the client's own
            timed = self._timed.get(call.timeout)
            if timed is None:
                timed = RequestOptions(
                    dialect=self.dialect,
                    timeout=call.timeout,
                    on_server_request=self._answer,
                    reset_timeout_on_progress=client.reset_timeout_on_progress,
                    max_total_timeout=client.max_total_timeout,
                )
                if len(self._timed) < _TIMED_MAX:
                    self._timed[call.timeout] = timed
            return timed
        return RequestOptions(
            dialect=self.dialect,
            timeout=call.timeout if call.timeout is not None else client.timeout,
            on_progress=progress_sink(call.progress),
            on_server_request=self._answer,
            reset_timeout_on_progress=(
                call.reset_timeout_on_progress
                if call.reset_timeout_on_progress is not None
                else client.reset_timeout_on_progress
            ),
            max_total_timeout=(
                call.max_total_timeout
                if call.max_total_timeout is not None
                else client.max_total_timeout
            ),
            tool=call.tool,
        )

    def run(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        call: CallOptions = NO_CALL_OPTIONS,
    ) -> Done:
        """Send ``method`` and drive it to its outcome in the calling thread."""
        return drive(self.steps(method, params, call))

    def steps(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        call: CallOptions = NO_CALL_OPTIONS,
    ) -> Steps[Done]:
        """The call as steps (see the module docstring): what ``run`` and ``snodo.aio`` drive."""
        if call is NO_CALL_OPTIONS:
            options = self._base
            rounds = self._rounds
            trace = None
        else:
            trace = (
                validate_trace_context(call.trace_context)
                if call.trace_context is not None
                else None
            )
            options = self.request_options(call)
            if call.log_level is not None:
                check_log_level("log_level", call.log_level)
            rounds = self._rounds
            if call.max_input_rounds is not None:
                rounds = inputs.start_rounds(call.max_input_rounds, self._handlers)
        dialect = self.dialect
        client = self.options
        transport = self.transport
        progress = options.on_progress is not None
        responses = call.input_responses
        request_state = call.request_state
        retried = False
        stats = self.stats
        stats.sent += 1
        try:
            while True:
                request_id = next(_ids)
                message = jsonrpc.request(
                    request_id,
                    method,
                    build_params(
                        dialect,
                        params,
                        client_info=client.client_info,
                        client_capabilities=client.client_capabilities,
                        meta=call.meta,
                        trace=trace,
                        progress_token=progress_token(request_id) if progress else None,
                        input_responses=responses,
                        request_state=request_state,
                        log_level=call.log_level or client.log_level,
                    ),
                )
                try:
                    response = yield _new_step(Send, (transport, message, options))
                    outcome = results.interpret(dialect, method, response)
                except McpError as error:
                    if not retried and negotiation.retries_unsupported_version(
                        dialect.version, client.protocol, error
                    ):
                        retried = True  # -32022 naming our version: send it once more
                        continue
                    raise inputs.with_last(error, rounds.last) from None
                step = inputs.next_round(rounds, outcome)
                if isinstance(step, Done):
                    stats.completed += 1
                    return step
                rounds = step.state
                responses = (
                    (yield Answer(step.tasks, self._handlers, rounds.last)) if step.tasks else None
                )
                request_state = step.request_state
                if step.pause:
                    yield Pause(step.pause)
        except McpError as error:
            stats.fail(error.code)
            raise
        except BaseException:
            stats.abandoned += 1  # the caller stopped waiting (cancelled, interrupted)
            raise

    def listen_message(
        self,
        notifications: dict[str, Any],
        timeout: float | None,
        meta: Mapping[str, Any] | None,
        trace_context: Mapping[str, Any] | None,
    ) -> tuple[dict[str, Any], RequestOptions]:
        """The ``subscriptions/listen`` request (2026-07-28) and the options to send it with."""
        trace = validate_trace_context(trace_context) if trace_context is not None else None
        client = self.options
        params = build_params(
            self.dialect,
            {"notifications": notifications},
            client_info=client.client_info,
            client_capabilities=client.client_capabilities,
            meta=meta,
            trace=trace,
        )
        message = jsonrpc.request(next(_ids), "subscriptions/listen", params)
        return message, replace(self._base, timeout=timeout)


class Send(NamedTuple):
    """Step: send ``message`` on ``transport``; the reply is its response dict (an ``McpError``
    is thrown back in instead)."""

    transport: Transport
    message: dict[str, Any]
    options: RequestOptions


class Answer(NamedTuple):
    """Step: run the input handlers of one round in order; the reply is the answers by key."""

    tasks: tuple[InputTask, ...]
    handlers: Handlers
    pending: InputRequired | None


class Pause(NamedTuple):
    """Step: wait ``seconds`` (the pacing of a round that carried only state); no reply."""

    seconds: float


class Calls(Protocol):
    """What a call runs on: the pipeline, or the response cache around it."""

    def steps(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        call: CallOptions = NO_CALL_OPTIONS,
    ) -> Steps[Done]:
        """The call as steps."""
        ...


class ReadySource(Protocol):
    """A connection that may be restarting: what a call waits on (``snodo.lifecycle``)."""

    def ready_now(self, after: int) -> tuple[Calls, Session | None, int] | None:
        """The connection to call on when it is ready and newer than ``after``, else None
        (raises the closed error when it is closed)."""
        ...

    def wait_ready(
        self, deadline: float, timeout: float | None, after: int
    ) -> tuple[Calls, Session | None, int]:
        """Block until ``ready_now`` has an answer, or the deadline (-32001)."""
        ...

    def on_change(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` (from any thread, without blocking) at the next state change;
        returns a canceller."""
        ...


class AwaitReady(NamedTuple):
    """Step: wait until ``source`` is ready and newer than ``after``; the reply is
    ``(calls, session, generation)``."""

    source: ReadySource
    deadline: float
    timeout: float | None
    after: int


#: ``Send(...)`` at C speed: a NamedTuple's ``__new__`` is Python code, and a call makes one
#: ``Send`` per request (~0.2 µs saved on the sync hot path).
_new_step = tuple.__new__

#: One step of a call (what a driver carries out).
Step = Send | Answer | Pause | AwaitReady

#: A call as steps: a generator of :data:`Step` returning ``T``.
Steps = Generator[Step, Any, T]


def drive(steps: Steps[T]) -> T:
    """Carry ``steps`` out in the calling thread (the sync driver): requests block, input
    handlers run here in order, pauses sleep."""
    try:
        step = next(steps)
        while True:
            kind = type(step)
            if kind is Send:
                assert isinstance(step, Send)
                try:
                    if telemetry.enabled is False:
                        reply: Any = step.transport.request(step.message, step.options)
                    else:  # OpenTelemetry installed, or not looked for yet
                        reply = telemetry.request(step.transport, step.message, step.options)
                except McpError as error:
                    step = steps.throw(error)
                    continue
            elif kind is Answer:
                assert isinstance(step, Answer)
                try:
                    reply = answer_round(step.tasks, step.handlers, step.pending)
                except McpError as error:
                    step = steps.throw(error)  # the call fails with it (and counts it)
                    continue
            elif kind is Pause:
                assert isinstance(step, Pause)
                _pause(step.seconds)
                reply = None
            else:
                assert isinstance(step, AwaitReady)
                try:
                    reply = step.source.wait_ready(step.deadline, step.timeout, step.after)
                except McpError as error:
                    step = steps.throw(error)
                    continue
            step = steps.send(reply)
    except StopIteration as stop:
        result: T = stop.value
        return result
    except BaseException:
        steps.close()  # interrupted here (not by the steps): they end now, and count it
        raise


def answer_round(
    tasks: tuple[InputTask, ...], handlers: Handlers, pending: InputRequired | None
) -> dict[str, Any]:
    """Run the handlers of one planned round, in order; the answers keyed like the requests.

    A failing handler is -32603 with the input request's key and ``pending`` (the result that
    asked) in its cause; so is an answer that does not fit the kind.
    """
    answers: dict[str, Any] = {}
    for task in tasks:
        try:
            response = handlers[task.kind](task.params)
        except HandlerError as failure:
            raise round_handler_failed(task, failure, pending) from None
        answers[task.key] = checked_round_answer(task, response, pending)
    return answers


def round_handler_failed(
    task: InputTask, failure: HandlerError, pending: InputRequired | None
) -> McpError:
    """The -32603 for an input handler of a round that raised HandlerError."""
    return errors.internal_error(
        f"Input handler for {task.key!r} failed",
        cause=("input_handler", task.key, failure.reason, pending),
    )


def checked_round_answer(task: InputTask, response: Any, pending: InputRequired | None) -> Any:
    """A round handler's answer, or the -32603 naming what does not fit the kind."""
    problem = inputs.response_problem(task.kind, response)
    if problem is not None:
        raise errors.internal_error(
            f"Input handler for {task.key!r} returned an invalid {task.kind} response: {problem}",
            cause=("input_handler", task.key, ("invalid_response", response), pending),
        )
    return response


def answer_server_request(handlers: Handlers, method: str, params: Any) -> dict[str, Any]:
    """Answer a request the server sent the client, through the input handlers.

    ``ping`` is answered ``{}`` without a handler; a kind without a handler is -32601, params
    lacking the kind's keys -32602, a handler that fails (HandlerError) or returns an invalid
    response -32603. Any other exception a handler raises propagates to the caller.
    """
    checked = inputs.check_server_request(method, params, handlers)
    if checked is None:
        return {}
    kind, handler_params = checked
    try:
        response = handlers[kind](handler_params)
    except HandlerError as failure:
        raise server_handler_failed(method, failure) from None
    return checked_server_answer(method, kind, response)


def server_handler_failed(method: str, failure: HandlerError) -> McpError:
    """The -32603 for an input handler of a server request that raised HandlerError."""
    return errors.internal_error(
        f"Input handler for {method} failed", cause=("input_handler", failure.reason)
    )


def checked_server_answer(method: str, kind: str, response: Any) -> dict[str, Any]:
    """A server request handler's answer, or the -32603 naming what does not fit the kind."""
    problem = inputs.response_problem(kind, response)
    if problem is not None:
        raise errors.internal_error(
            f"Input handler for {method} returned an invalid response: {problem}",
            cause=("input_handler", ("invalid_response", response)),
        )
    return cast("dict[str, Any]", response)


def progress_sink(target: ProgressTarget) -> Callable[[dict[str, Any]], None] | None:
    """Turn ``progress=`` (a callable, a queue, or an actor ref) into a params consumer."""
    if target is None:
        return None
    if isinstance(target, queue.Queue):
        q: queue.Queue[Any] = target

        def to_queue(params: dict[str, Any]) -> None:
            try:
                q.put_nowait(Progress(params))
            except queue.Full:
                pass  # the caller's own bounded queue; a full one drops the report

        return to_queue
    tell = getattr(target, "tell", None)
    if callable(tell) and hasattr(target, "actor_urn"):

        def to_actor(params: dict[str, Any]) -> None:
            tell(Progress(params))

        return to_actor
    if callable(target):
        return cast("Callable[[dict[str, Any]], None]", target)
    raise TypeError("progress must be a callable, a queue.Queue or a Pykka ActorRef")


def _pause(seconds: float) -> None:
    """Wait ``seconds`` (the state-only round's pacing)."""
    threading.Event().wait(seconds)


__all__ = [
    "Answer",
    "AwaitReady",
    "CallPipeline",
    "Calls",
    "Handlers",
    "Pause",
    "Progress",
    "ReadySource",
    "Send",
    "Step",
    "Steps",
    "answer_round",
    "answer_server_request",
    "checked_round_answer",
    "checked_server_answer",
    "drive",
    "next_request_id",
    "progress_sink",
    "round_handler_failed",
    "server_handler_failed",
]
