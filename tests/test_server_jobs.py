"""``snodo.server.jobs``: the job table the stdio and HTTP servers share, the in-flight
registration that closes the cancellation race, and the server-to-client requests.

No sockets; the only threads are the table's own workers (``spawn``), joined by deadline.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

import pytest

from snodo.protocol import jsonrpc
from snodo.protocol.errors import McpError, connection_error
from snodo.server.jobs import (
    Inflight,
    Job,
    JobTable,
    PendingAnswer,
    ServerRequests,
    cancelled_error,
    notification_bytes,
)

DEADLINE = 10.0


class Mark:
    """A Context stand-in: it only records that it was cancelled."""

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


def table(max_concurrency: int = 2, **kw: Any) -> JobTable:
    return JobTable(threading.Lock(), max_concurrency, **kw)


# -- slots, workers, the end of a job --------------------------------------------------------


def test_admission_takes_a_slot_until_the_job_releases_it() -> None:
    jobs = table(max_concurrency=1)
    scope: dict[Any, Job] = {}
    first, second = Job(1, "tools/call", scope), Job(2, "tools/call", scope)
    with jobs.lock:
        assert jobs.admit(first)
        assert not jobs.admit(second)  # every slot is taken
    assert scope == {1: first} and jobs.running == 1
    jobs.release_slot(first)
    jobs.release_slot(first)  # once only
    assert jobs.busy == 0 and jobs.running == 1
    with jobs.lock:
        assert jobs.admit(second)
    assert jobs.finish(first) == 1
    assert scope == {2: second} and first not in jobs.jobs


def test_finish_tells_the_server_with_the_lock_held() -> None:
    seen: list[tuple[Any, int, bool]] = []
    jobs = table(finished=lambda job, running: seen.append((job.id, running, jobs.lock.locked())))
    job = Job("a", "x")
    with jobs.lock:
        jobs.admit(job)
    assert jobs.finish(job) == 0
    assert seen == [("a", 0, True)]


def test_a_worker_knows_its_job_and_finishes_it() -> None:
    jobs = table()
    job = Job(7, "tools/call")
    seen: list[Job | None] = []
    with jobs.lock:
        jobs.admit(job)
    assert jobs.spawn(job, lambda j: seen.append(jobs.current()), "test-worker")
    assert job.thread is not None
    job.thread.join(DEADLINE)
    assert seen == [job] and jobs.current() is None
    assert jobs.running == 0 and not jobs.threads


# -- the cancellation race -------------------------------------------------------------------


def test_a_job_cancelled_before_its_context_registers_cancels_it_at_registration() -> None:
    jobs = table()
    job = Job(1, "tools/call")
    inflight = Inflight(jobs)
    mark = Mark()
    with jobs.lock:
        jobs.admit(job)

    def work(j: Job) -> None:
        assert jobs.cancel(j)  # the client cancels before dispatch registered the Context
        inflight.contexts[1] = mark
        jobs.attach(1, mark)

    jobs.spawn(job, work, "test-worker")
    assert job.thread is not None
    job.thread.join(DEADLINE)
    assert mark.cancelled and job.context is mark


def test_a_job_cancelled_after_its_context_registered_cancels_it_at_once() -> None:
    jobs = table()
    job = Job(1, "tools/call")
    mark = Mark()
    registered = threading.Event()
    release = threading.Event()
    with jobs.lock:
        jobs.admit(job)

    def work(j: Job) -> None:
        jobs.attach(1, mark)
        registered.set()
        release.wait(DEADLINE)

    jobs.spawn(job, work, "test-worker")
    assert registered.wait(DEADLINE)
    assert not mark.cancelled
    assert jobs.cancel(job) and mark.cancelled
    assert not jobs.cancel(job)  # once only
    release.set()
    assert job.thread is not None
    job.thread.join(DEADLINE)


def test_a_registration_outside_its_jobs_worker_attaches_nothing() -> None:
    jobs = table()
    mark = Mark()
    jobs.attach(1, mark)  # no current job: an inline request
    assert not mark.cancelled


def test_inflight_marks_a_registered_context() -> None:
    inflight = Inflight()
    mark = Mark()
    inflight.contexts["r"] = mark
    assert "r" in inflight and list(inflight) == ["r"] and len(inflight) == 1
    inflight.cancel("other")
    assert not mark.cancelled
    inflight.cancel("r")
    assert mark.cancelled


def test_a_notification_about_a_cancelled_job_is_refused() -> None:
    job = Job(1, "tools/call")
    data = notification_bytes(job, "notifications/progress", {"progress": 1}, jsonrpc.encode)
    assert data is not None and jsonrpc.decode(data)["method"] == "notifications/progress"
    assert notification_bytes(job, "x", {"v": {1, 2}}, jsonrpc.encode) is None  # not JSON
    job.cancelled = True
    with pytest.raises(McpError) as info:
        notification_bytes(job, "notifications/progress", {}, jsonrpc.encode)
    assert info.value.code == cancelled_error().code


# -- server-to-client requests ---------------------------------------------------------------


def requests(timeout: float = DEADLINE, **kw: Any) -> ServerRequests:
    return ServerRequests(
        threading.Lock(),
        itertools.count(1),
        timeout=timeout,
        closed_message="Connection closed: gone",
        **kw,
    )


def test_a_server_request_gets_the_clients_answer() -> None:
    asks = requests()
    job = Job(1, "tools/call")
    sent: list[dict[str, Any]] = []

    def send(message: dict[str, Any]) -> None:
        sent.append(message)
        assert job.asking == {message["id"]}
        assert asks.answer(message["id"], {"action": "accept"}, None)

    assert asks.ask(job, "elicitation/create", {"message": "m"}, send) == {"action": "accept"}
    assert sent[0]["id"] == "srv-1" and sent[0]["method"] == "elicitation/create"
    assert not job.asking and not asks.pending
    assert not asks.answer("srv-1", {}, None)  # nothing waits any more
    assert not asks.answer(1, {}, None)  # our ids are strings


def test_an_error_answer_is_raised() -> None:
    asks = requests()

    def send(message: dict[str, Any]) -> None:
        asks.answer(message["id"], None, McpError(-32601, "no"))

    with pytest.raises(McpError) as info:
        asks.ask(None, "roots/list", {}, send)
    assert info.value.code == -32601


def test_a_server_request_that_is_not_answered_in_time_is_cancelled() -> None:
    asks = requests(timeout=0.01)
    sent: list[dict[str, Any]] = []
    with pytest.raises(McpError) as info:
        asks.ask(None, "roots/list", {}, sent.append)
    assert info.value.code == -32001
    assert [m["method"] for m in sent] == ["roots/list", "notifications/cancelled"]
    assert sent[1]["params"] == {"requestId": sent[0]["id"], "reason": "timed out"}
    assert not asks.pending


def test_a_way_out_that_is_gone_or_params_that_are_not_json_fail_the_request() -> None:
    asks = requests()

    def gone(message: dict[str, Any]) -> None:
        raise connection_error("Connection closed: stdout is closed")

    with pytest.raises(McpError) as info:
        asks.ask(None, "roots/list", {}, gone)
    assert info.value.code == -32000 and not asks.pending

    def encode(message: dict[str, Any]) -> None:
        jsonrpc.encode(message)  # raises for params that are not JSON

    with pytest.raises(McpError) as info:
        asks.ask(None, "roots/list", {"v": {1, 2}}, encode)
    assert info.value.code == -32603 and not asks.pending


def test_cancelling_the_asking_job_fails_its_requests_and_tells_the_client() -> None:
    asks = requests()
    job = Job(1, "tools/call")
    notes: list[dict[str, Any]] = []
    waiting = PendingAnswer(job)
    asks.pending["srv-9"] = waiting
    job.asking.add("srv-9")
    asks.fail_job(job, notes.append)
    assert waiting.done.is_set() and waiting.error is not None
    assert waiting.error.code == cancelled_error().code
    assert notes == [
        jsonrpc.cancelled_notification("srv-9", "the request that asked was cancelled")
    ]
    job.cancelled = True
    with pytest.raises(McpError):  # a cancelled job asks nothing more
        asks.ask(job, "roots/list", {}, notes.append)


def test_closing_fails_every_waiting_request_and_refuses_new_ones() -> None:
    refused = False
    asks = requests(refused=lambda: refused)
    waiting = PendingAnswer(None)
    asks.pending["srv-1"] = waiting
    asks.close(connection_error("Connection closed: stdin ended"))
    assert waiting.done.is_set() and waiting.error is not None
    with pytest.raises(McpError) as info:
        asks.ask(None, "roots/list", {}, lambda m: None)
    assert info.value.message == "Connection closed: gone"
    other = requests(refused=lambda: True)
    with pytest.raises(McpError):
        other.ask(None, "roots/list", {}, lambda m: None)
