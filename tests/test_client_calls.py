"""The call pipeline (snodo.calls) on its own: no Client, a scripted transport. What one run
sends, how it reads the answers, and the cache wrapped around it."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from snodo.cache import ResponseCache
from snodo.cached_calls import CachedCalls
from snodo.calls import CallPipeline, Progress, progress_sink
from snodo.options import NO_CALL_OPTIONS, CallOptions, build_options
from snodo.protocol import dialects, inputs
from snodo.protocol.errors import McpError
from snodo.protocol.meta import PROGRESS_TOKEN_KEY, PROTOCOL_VERSION_KEY
from tests.support.client_support import ScriptedTransport, error, result

NEW = "2026-07-28"
ROOTS = {"a": {"method": "roots/list"}}


def pipeline(transport: ScriptedTransport, version: str = NEW, **options: Any) -> CallPipeline:
    return CallPipeline(
        transport, dialects.get(version), build_options(protocol=version, **options)
    )


def roots(params: dict[str, Any]) -> dict[str, Any]:
    return {"roots": []}


def asks(state: str = "s") -> Any:
    return result({"resultType": "input_required", "inputRequests": ROOTS, "requestState": state})


def test_one_run_sends_one_request_and_returns_its_outcome() -> None:
    transport = ScriptedTransport(result({"content": []}))
    done = pipeline(transport).run("tools/call", {"name": "t", "arguments": {}})
    assert done == inputs.Done({"content": []}, 0)
    (sent,) = transport.sent
    assert sent["jsonrpc"] == "2.0" and sent["method"] == "tools/call"
    assert sent["params"]["name"] == "t"
    assert sent["params"]["_meta"][PROTOCOL_VERSION_KEY] == NEW
    assert PROGRESS_TOKEN_KEY not in sent["params"]["_meta"]


def test_a_call_given_no_options_reuses_the_clients_request_options() -> None:
    transport = ScriptedTransport(result({}), result({}))
    calls = pipeline(transport, timeout=7.0)
    calls.run("tools/list")
    calls.run("tools/list", None, CallOptions(meta={"k": 1}))
    first, second = transport.options
    assert first is second  # nothing per call that the transport sees: one record
    assert first.timeout == 7.0
    assert calls.request_options(NO_CALL_OPTIONS) is first


def test_per_call_options_override_the_clients() -> None:
    calls = pipeline(ScriptedTransport(), timeout=7.0, reset_timeout_on_progress=True)
    merged = calls.request_options(CallOptions(timeout=1.0, max_total_timeout=9.0))
    assert (merged.timeout, merged.max_total_timeout, merged.reset_timeout_on_progress) == (
        1.0,
        9.0,
        True,
    )
    assert merged.on_server_request is not None  # the input handlers answer server requests
    with pytest.raises(ValueError, match="timeout must be a positive number"):
        calls.request_options(CallOptions(timeout=-1))


def test_the_progress_token_is_the_request_id() -> None:
    transport = ScriptedTransport(result({}))
    seen: list[dict[str, Any]] = []
    pipeline(transport).run("tools/call", {"name": "t"}, CallOptions(progress=seen.append))
    (sent,) = transport.sent
    assert sent["params"]["_meta"][PROGRESS_TOKEN_KEY] == sent["id"]
    sink = transport.options[0].on_progress
    assert sink is not None
    sink({"progress": 1})
    assert seen == [{"progress": 1}]


def test_input_rounds_are_answered_and_counted() -> None:
    """Each round runs the handlers and sends again with a fresh id, the answers and the state."""
    transport = ScriptedTransport(asks("s1"), asks("s2"), result({"content": []}))
    done = pipeline(transport, input_handlers={"roots": roots}).run("tools/call", {"name": "t"})
    assert done.rounds == 2
    assert len({m["id"] for m in transport.sent}) == 3
    assert [m["params"].get("requestState") for m in transport.sent] == [None, "s1", "s2"]
    assert transport.sent[1]["params"]["inputResponses"] == {"a": {"roots": []}}


def test_a_failure_after_a_round_carries_the_last_input_request() -> None:
    transport = ScriptedTransport(asks(), error(-32099, "gone"))
    with pytest.raises(McpError) as caught:
        pipeline(transport, input_handlers={"roots": roots}).run("tools/call", {"name": "t"})
    assert caught.value.code == -32099
    assert isinstance(caught.value.cause, tuple)
    assert caught.value.cause[-1].request_state == "s"


def test_a_32022_naming_the_version_is_sent_once_more_and_only_once() -> None:
    refused = error(-32022, "Unsupported protocol version", {"supported": [NEW]})
    transport = ScriptedTransport(refused, result({"tools": []}))
    assert pipeline(transport).run("tools/list").outcome == {"tools": []}
    assert len(transport.sent) == 2
    twice = ScriptedTransport(refused, refused)
    with pytest.raises(McpError) as caught:
        pipeline(twice).run("tools/list")
    assert caught.value.code == -32022
    assert len(twice.sent) == 2


def test_a_handler_that_answers_badly_is_32603_naming_the_request() -> None:
    transport = ScriptedTransport(asks())
    calls = pipeline(transport, input_handlers={"roots": lambda p: {"roots": "no"}})
    with pytest.raises(McpError) as caught:
        calls.run("tools/call", {"name": "t"})
    assert caught.value.code == -32603
    assert "'a'" in caught.value.message


def test_the_listen_request_carries_the_filter_and_the_listen_timeout() -> None:
    calls = pipeline(ScriptedTransport(), timeout=7.0)
    message, options = calls.listen_message({"toolsListChanged": True}, 3.0, {"k": 1}, None)
    assert message["method"] == "subscriptions/listen"
    assert message["params"]["notifications"] == {"toolsListChanged": True}
    assert message["params"]["_meta"]["k"] == 1
    assert options.timeout == 3.0


# -- the cache around the pipeline ----------------------------------------------------------

PUBLIC = {"tools": [], "ttlMs": 60_000, "cacheScope": "public"}


def cached(transport: ScriptedTransport, **options: Any) -> CachedCalls:
    return CachedCalls(pipeline(transport, **options), ResponseCache())


def test_the_cache_serves_a_stored_result_without_running_the_pipeline() -> None:
    transport = ScriptedTransport(result(PUBLIC))
    calls = cached(transport)
    assert calls.run("tools/list").outcome == PUBLIC
    again = calls.run("tools/list")
    assert again == inputs.Done(PUBLIC, 0)
    assert len(transport.sent) == 1


def test_a_call_with_options_or_bypass_runs_the_pipeline_every_time() -> None:
    transport = ScriptedTransport(result(PUBLIC), result(PUBLIC), result(PUBLIC))
    calls = cached(transport)
    calls.run("tools/list", None, CallOptions(meta={"k": 1}))
    calls.run("tools/list", None, CallOptions(bypass_cache=True))
    calls.run("tools/list", None, CallOptions(bypass_cache=True))
    assert len(transport.sent) == 3


def test_a_result_reached_through_input_rounds_is_never_stored() -> None:
    """The cache reads the rounds from the pipeline's Done: an answered round is not stored."""
    hinted = {"contents": [], "ttlMs": 60_000, "cacheScope": "public"}
    transport = ScriptedTransport(asks(), result(hinted), asks(), result(hinted))
    calls = cached(transport, input_handlers={"roots": roots})
    assert calls.run("resources/read", {"uri": "a://b"}).rounds == 1
    assert calls.run("resources/read", {"uri": "a://b"}).rounds == 1
    assert len(transport.sent) == 4


def test_an_invalidating_notification_drops_the_stored_result() -> None:
    transport = ScriptedTransport(result(PUBLIC), result(PUBLIC))
    calls = cached(transport)
    calls.run("tools/list")
    calls.observe("notifications/tools/list_changed", {})
    calls.run("tools/list")
    assert len(transport.sent) == 2


def test_progress_goes_to_a_callable_a_queue_or_an_actor() -> None:
    import queue

    box: queue.Queue[Any] = queue.Queue(1)
    sink = progress_sink(box)
    assert sink is not None
    sink({"progress": 1})
    sink({"progress": 2})  # a full queue drops the report
    assert box.get_nowait() == Progress({"progress": 1})
    assert progress_sink(None) is None
    with pytest.raises(TypeError):
        progress_sink(42)


def test_the_pipeline_and_the_subscription_handle_need_no_client() -> None:
    """snodo.calls and snodo.subscription import nothing of snodo.client (no cycle)."""
    code = (
        "import sys, snodo.calls, snodo.subscription; "
        "sys.exit(1 if 'snodo.client' in sys.modules else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_calls_given_only_a_timeout_reuse_one_request_record_per_value() -> None:
    calls = pipeline(ScriptedTransport(), timeout=7.0, max_total_timeout=50.0)
    first = calls.request_options(CallOptions(timeout=2.0))
    assert calls.request_options(CallOptions(timeout=2.0)) is first
    assert (first.timeout, first.max_total_timeout) == (2.0, 50.0)
    assert calls.request_options(CallOptions(timeout=3.0)).timeout == 3.0
