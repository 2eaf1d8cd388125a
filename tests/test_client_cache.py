"""The response cache (the reference's "Response caching"): one test per rule, over real
Runtimes and real clients (direct, HTTP, stdio and a custom transport)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import snodo
from snodo.cache import shared_cache
from snodo.protocol.caching import MAX_ENTRIES, MAX_ENTRY_BYTES
from snodo.server import CacheHint, Context, Runtime
from tests.support import client_runtime
from tests.support import stdio_support as support
from tests.support.client_support import Wire
from tests.support.pipe_transport import PipeTransport

LATEST = "2026-07-28"
MINUTE = 60_000


@pytest.fixture(scope="session", autouse=True)
def _warm() -> None:
    support.warm_up()  # the process-wide stdio parts exist before any test's leak baseline


@pytest.fixture(autouse=True)
def _empty_cache() -> Iterator[None]:
    shared_cache().clear()
    yield
    shared_cache().clear()


class Clock:
    """A clock the test moves by hand (the cache's expiry clock)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(shared_cache(), "clock", fake)
    return fake


class Counted:
    """A runtime whose ``count://{name}`` reads say how often the server produced them."""

    def __init__(
        self,
        *,
        scope: str = "public",
        ttl_ms: int = MINUTE,
        size: int = 0,
        during: Any = None,
        **runtime_options: Any,
    ) -> None:
        hint = CacheHint(ttl_ms, scope)  # type: ignore[arg-type]
        self.reads: Counter[str] = Counter()
        self.lock = threading.Lock()
        self.runtime = Runtime(
            "cache-test",
            "1.0",
            cache_hints={"discover": hint, "tools": hint, "prompts": hint, "resources": hint},
            **runtime_options,
        )
        self.runtime.add_tool("echo", lambda args, ctx: "echo", description="echo")

        @self.runtime.resource_template("count://{name}", name="count")
        def count(uri: str, variables: dict[str, str], ctx: Context) -> str:
            if during is not None:
                during(variables["name"])
            with self.lock:
                self.reads[variables["name"]] += 1
                n = self.reads[variables["name"]]
            return f"{variables['name']} #{n}" + "x" * size

        @self.runtime.resource("count://listed", name="listed")
        def listed(ctx: Context) -> str:
            return "listed"

        @self.runtime.prompt(description="p")
        def greet(args: dict[str, str], ctx: Context) -> str:
            return "hi"


def text(result: Any) -> str:
    return str(result["contents"][0]["text"])


# -- storing ---------------------------------------------------------------------------------


def test_caching_is_off_by_default(wire: Wire) -> None:
    """Caching is off by default: every call is sent."""
    rt = client_runtime.build()
    with snodo.direct(rt) as client:
        client.list_tools()
        client.list_tools()
    assert len(wire.requests("tools/list")) == 2
    assert len(shared_cache()) == 0


def test_discover_list_pages_and_reads_are_stored(wire: Wire) -> None:
    """cache: true stores complete server/discover, list-page and resources/read results; each
    page is stored under its own cursor."""
    counted = Counted(page_size=1)
    with snodo.direct(counted.runtime, cache=True) as client:
        for _ in range(2):
            client.discover()
            assert [t["name"] for t in client.list_tools()] == ["echo"]
            assert [r["uri"] for r in client.list_resources()] == ["count://listed"]
            assert len(client.list_resource_templates()) == 1
            assert [p["name"] for p in client.list_prompts()] == ["greet"]
            assert text(client.read_resource("count://a")) == "a #1"
            first = client.list_page("resources")
            assert first.next_cursor is None
    assert counted.reads["a"] == 1
    assert wire.methods() == [
        "server/discover",
        "tools/list",
        "resources/list",
        "resources/templates/list",
        "prompts/list",
        "resources/read",
    ]


def test_pages_are_stored_per_cursor(wire: Wire) -> None:
    """Each page of a paginated list is its own entry (keyed by its cursor)."""
    rt = client_runtime.build(page_size=3, tools=4)
    with snodo.direct(rt, cache=True) as client:
        everything = client.list_tools()
        pages = len(wire.requests("tools/list"))
        assert client.list_tools() == everything
        second = client.list_page("tools", client.list_page("tools").next_cursor)
    assert len(wire.requests("tools/list")) == pages > 1
    assert second.items == everything[3:6]


@pytest.mark.parametrize("ttl_ms", [0])
def test_a_result_without_a_positive_ttl_is_not_stored(ttl_ms: int, wire: Wire) -> None:
    """A result is stored only with a positive ttlMs (the server default 0 means no caching)."""
    counted = Counted(ttl_ms=ttl_ms)
    with snodo.direct(counted.runtime, cache=True) as client:
        assert text(client.read_resource("count://a")) == "a #1"
        assert text(client.read_resource("count://a")) == "a #2"
    assert len(shared_cache()) == 0


class Canned:
    """A custom transport answering every request with one canned result."""

    def __init__(self, result: dict[str, Any]) -> None:
        self.result = result
        self.sent = 0

    @classmethod
    def connect(cls, result: dict[str, Any], options: Any) -> Canned:
        return cls(result)

    def request(self, message: dict[str, Any], options: Any) -> dict[str, Any]:
        self.sent += 1
        return {"jsonrpc": "2.0", "id": message["id"], "result": dict(self.result)}

    def close(self) -> None:
        pass


@pytest.mark.parametrize(
    ("hints", "stored"),
    [
        ({"ttlMs": 1000, "cacheScope": "public"}, True),
        ({"ttlMs": 1000, "cacheScope": "private"}, False),  # custom transport: public only
        ({"ttlMs": 1000, "cacheScope": "shared"}, False),
        ({"ttlMs": 1000}, False),
        ({"ttlMs": 0, "cacheScope": "public"}, False),
        ({"ttlMs": -5, "cacheScope": "public"}, False),
        ({"ttlMs": 1.5, "cacheScope": "public"}, False),
        ({"ttlMs": True, "cacheScope": "public"}, False),
        ({"cacheScope": "public"}, False),
    ],
)
def test_stored_only_with_positive_ttl_and_public_or_private_scope(
    hints: dict[str, Any], stored: bool
) -> None:
    """Stored only with a positive integer ttlMs and cacheScope public or private; custom
    transports keep public results only (the client cannot identify their credentials)."""
    result = {"resultType": "complete", "tools": [], **hints}
    with snodo.connect((Canned, result), protocol=LATEST, cache=True) as client:
        client.list_tools()
        client.list_tools()
        transport = client.transport
        assert isinstance(transport, Canned)
        assert transport.sent == (1 if stored else 2)


def test_entries_expire_ttl_after_the_response_arrives(clock: Clock) -> None:
    """An entry expires ttlMs after the response arrives (not after the request was sent)."""

    def slow(name: str) -> None:
        clock.now += 5.0  # the server takes 5 s to answer

    counted = Counted(ttl_ms=10_000, during=slow)
    with snodo.direct(counted.runtime, cache=True) as client:
        sent_at = clock.now
        assert text(client.read_resource("count://a")) == "a #1"
        clock.now = sent_at + 14.9  # 9.9 s after the response arrived
        assert text(client.read_resource("count://a")) == "a #1"
        clock.now = sent_at + 15.0  # 10 s after it arrived
        assert text(client.read_resource("count://a")) == "a #2"


def test_at_most_256_results_least_recently_used_first(wire: Wire) -> None:
    """The shared cache holds at most 256 results; the least recently used goes first."""
    counted = Counted()
    with snodo.direct(counted.runtime, cache=True) as client:
        for i in range(MAX_ENTRIES):
            client.read_resource(f"count://{i}")
        assert len(shared_cache()) == MAX_ENTRIES
        client.read_resource("count://0")  # now the most recently used
        client.read_resource("count://new")
        assert len(shared_cache()) == MAX_ENTRIES
        assert text(client.read_resource("count://0")) == "0 #1"  # kept
        assert text(client.read_resource("count://1")) == "1 #2"  # evicted, fetched again


def test_at_most_16_mib_and_a_larger_result_is_never_stored() -> None:
    """16 MiB in all (least recently used evicted) and a single result over 16 MiB not stored."""
    big = Counted(size=9 * 1024 * 1024)
    with snodo.direct(big.runtime, cache=True) as client:
        client.read_resource("count://a")
        client.read_resource("count://b")  # 18 MiB in all: a is evicted
        assert shared_cache().total_bytes <= MAX_ENTRY_BYTES
        assert len(shared_cache()) == 1
        assert text(client.read_resource("count://b")).startswith("b #1")
        assert text(client.read_resource("count://a")).startswith("a #2")
    huge = Counted(size=MAX_ENTRY_BYTES)
    with snodo.direct(huge.runtime, cache=True) as client:
        client.read_resource("count://h")
        assert text(client.read_resource("count://h")).startswith("h #2")
    assert huge.reads["h"] == 2


# -- keys ------------------------------------------------------------------------------------


def test_public_results_are_shared_by_clients_of_the_same_endpoint_and_metadata(
    wire: Wire,
) -> None:
    """Public results are shared by clients of the same endpoint, protocol and client
    metadata; another runtime, clientInfo or capabilities is another key."""
    rt = client_runtime.build()
    with snodo.direct(rt, cache=True) as first, snodo.direct(rt, cache=True) as second:
        first.list_tools()
        second.list_tools()
        assert len(wire.requests("tools/list")) == 1
    others = [
        snodo.direct(client_runtime.build(), cache=True),
        snodo.direct(rt, cache=True, client_info={"name": "other", "version": "1"}),
        snodo.direct(rt, cache=True, client_capabilities={"elicitation": {}}),
    ]
    for client in others:
        with client:
            client.list_tools()
    assert len(wire.requests("tools/list")) == 4


def test_private_results_on_direct_are_kept_per_runtime(wire: Wire) -> None:
    """Private results are stored (a direct client has no credentials and no session id)."""
    counted = Counted(scope="private")
    with snodo.direct(counted.runtime, cache=True) as client:
        client.read_resource("count://a")
        assert text(client.read_resource("count://a")) == "a #1"


class Tokens:
    """A token provider whose token the test changes."""

    def __init__(self, token: str) -> None:
        self.current = token

    def token(self, url: str) -> str | None:
        return self.current

    def refresh(self, challenge: Any, *, url: str, status: int, token: str | None) -> str | None:
        return self.current


def test_http_private_results_are_partitioned_by_credentials_hashed() -> None:
    """Private results are partitioned by the credentials used; public results are shared
    across credentials but not across non-credential headers; keys hold no raw token or
    authorization header."""
    from snodo.server.http_server import serve_http

    private = Counted(scope="private")
    public = Counted(scope="public")
    servers = [serve_http(private.runtime), serve_http(public.runtime)]
    try:
        private_url, public_url = (snodo.Http(server.url) for server in servers)

        def read(url: snodo.Http, **options: Any) -> str:
            with snodo.connect(url, protocol=LATEST, cache=True, **options) as client:
                return text(client.read_resource("count://a"))

        alpha = {"Authorization": "Bearer alpha-secret"}
        assert read(private_url, headers=alpha) == "a #1"
        assert read(private_url, headers=alpha) == "a #1"  # same credentials: stored
        assert read(private_url, headers={"Authorization": "Bearer beta-secret"}) == "a #2"
        assert read(private_url) == "a #3"  # no credentials at all: another partition
        tokens = Tokens("gamma-secret")
        assert read(private_url, token_provider=tokens) == "a #4"
        assert read(private_url, token_provider=tokens) == "a #4"
        tokens.current = "delta-secret"  # the provider's token changed: another partition
        assert read(private_url, token_provider=tokens) == "a #5"

        assert read(public_url, headers=alpha) == "a #1"
        assert read(public_url, headers={"Authorization": "Bearer beta-secret"}) == "a #1"
        assert read(public_url, headers={"X-Tenant": "north"}) == "a #2"
        assert read(public_url, headers={"X-Tenant": "north"}) == "a #2"

        keys = repr(list(shared_cache()._entries))
        for secret in ("alpha-secret", "beta-secret", "gamma-secret", "delta-secret", "Bearer"):
            assert secret not in keys
        assert "north" not in keys and servers[0].url not in keys
    finally:
        for server in servers:
            server.close()


def test_stdio_clients_have_separate_namespaces_per_server_process() -> None:
    """Stdio clients have separate namespaces for their separate server processes."""
    target = support.snodo_server("tests.servers.cache_runtime:runtime")
    with (
        snodo.connect(target, cwd=str(support.ROOT), cache=True) as first,
        snodo.connect(target, cwd=str(support.ROOT), cache=True) as second,
    ):
        one = text(first.read_resource("proc://pid"))
        two = text(second.read_resource("proc://pid"))
        assert one.endswith("read 1") and two.endswith("read 1")
        assert one.split()[0] == str(first.transport.pid)  # type: ignore[attr-defined]
        assert two.split()[0] == str(second.transport.pid)  # type: ignore[attr-defined]
        assert text(first.read_resource("proc://pid")) == one  # stored for its own process
        assert text(second.read_resource("proc://pid")) == two


def test_custom_transports_share_public_results_by_their_namespace() -> None:
    """Custom transports keep public results only; a transport that names its endpoint
    (cache_namespace) shares them with other clients of that endpoint."""

    class Named(PipeTransport):
        cache_namespace = "pipe:shared"

    counted = Counted(scope="public")
    with (
        snodo.connect((Named, counted.runtime), protocol=LATEST, cache=True) as first,
        snodo.connect((Named, counted.runtime), protocol=LATEST, cache=True) as second,
        snodo.connect((PipeTransport, counted.runtime), protocol=LATEST, cache=True) as third,
    ):
        assert text(first.read_resource("count://a")) == "a #1"
        assert text(second.read_resource("count://a")) == "a #1"
        assert text(third.read_resource("count://a")) == "a #2"  # unnamed: its own namespace
        assert text(third.read_resource("count://a")) == "a #2"
    private = Counted(scope="private")
    with snodo.connect((PipeTransport, private.runtime), protocol=LATEST, cache=True) as client:
        client.read_resource("count://a")
        assert text(client.read_resource("count://a")) == "a #2"


# -- per-call options ------------------------------------------------------------------------


def test_bypass_cache_sends_the_call_and_leaves_entries_unchanged(wire: Wire) -> None:
    """bypass_cache=True sends the call and leaves existing entries unchanged."""
    counted = Counted()
    with snodo.direct(counted.runtime, cache=True) as client:
        assert text(client.read_resource("count://a")) == "a #1"
        assert text(client.read_resource("count://a", bypass_cache=True)) == "a #2"
        assert text(client.read_resource("count://a")) == "a #1"
        client.list_tools()
        client.list_tools(bypass_cache=True)
        client.list_page("tools", None, bypass_cache=True)
        client.discover(bypass_cache=True)
        client.request("tools/list", bypass_cache=True)
        client.list_tools()
        assert len(wire.requests("tools/list")) == 4
    fresh = Counted()
    with snodo.direct(fresh.runtime, cache=True) as client:
        assert text(client.read_resource("count://b", bypass_cache=True)) == "b #1"
        assert text(client.read_resource("count://b")) == "b #2"  # the bypass stored nothing
        assert text(client.read_resource("count://b")) == "b #2"


def test_calls_with_other_per_call_options_are_sent_and_not_cached(wire: Wire) -> None:
    """Requests with other per-call options (meta, progress, trace context, input responses)
    are sent normally and not cached; timeout= alone still uses the cache."""
    counted = Counted()
    traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    with snodo.direct(counted.runtime, cache=True) as client:
        calls = [
            {"meta": {"x": 1}},
            {"progress": lambda params: None},
            {"trace_context": {"traceparent": traceparent}},
            {"input_responses": {}},
            {"max_input_rounds": 3},
        ]
        for n, options in enumerate(calls, start=1):
            assert text(client.read_resource("count://a", **options)) == f"a #{n}"
        assert len(shared_cache()) == 0
        assert text(client.read_resource("count://a", timeout=5.0)) == "a #6"
        assert text(client.read_resource("count://a", timeout=5.0)) == "a #6"
        assert text(client.read_resource("count://a", meta={"x": 1})) == "a #7"


def test_a_result_reached_through_input_rounds_is_not_stored() -> None:
    """The result of a multi round-trip retry (answered by the input handlers) is not cached,
    even with cache hints; a read without input is."""
    rt = Runtime("asks", "1.0", cache_hints={"resources": CacheHint(MINUTE, "public")})
    asked: list[str] = []

    @rt.resource("ask://me", name="ask")
    def ask(ctx: Context) -> str:
        answer = ctx.elicit("ok?", {"type": "object", "properties": {}})
        return str(answer["action"])

    def form(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params["message"])
        return {"action": "accept", "content": {}}

    with snodo.direct(rt, cache=True, input_handlers={"form": form}) as client:
        assert text(client.read_resource("ask://me")) == "accept"
        assert text(client.read_resource("ask://me")) == "accept"
    assert asked == ["ok?", "ok?"]
    assert len(shared_cache()) == 0


def test_an_invalid_timeout_is_refused_on_a_cached_call_too() -> None:
    """timeout= is checked whether the answer comes from the cache or the server."""
    with snodo.direct(client_runtime.build(), cache=True) as client:
        client.list_tools()
        with pytest.raises(ValueError):
            client.list_tools(timeout=-1)


def test_a_cached_result_is_a_fresh_copy_for_each_caller() -> None:
    """A caller that changes its result cannot change what the next caller gets."""
    rt = client_runtime.build()
    with snodo.direct(rt, cache=True) as client:
        client.list_tools()
        tools = client.list_tools()
        tools[0]["name"] = "changed"
        tools.clear()
        assert "echo" in [t["name"] for t in client.list_tools()]


# -- invalidation ----------------------------------------------------------------------------


def test_list_changed_removes_the_matching_pages_of_that_server(wire: Wire) -> None:
    """tools, prompts and resources list changes remove the corresponding cached pages (of that
    server only); server/discover entries stay."""
    counted, other = Counted(), Counted()
    with (
        snodo.direct(counted.runtime, cache=True) as client,
        snodo.direct(other.runtime, cache=True) as bystander,
    ):

        def fill() -> None:
            for c in (client, bystander):
                c.discover()
                c.list_tools()
                c.list_prompts()
                c.list_resources()
                c.list_resource_templates()

        fill()
        assert len(wire.sent) == 10
        client._observe_notification("notifications/tools/list_changed", {})
        fill()
        assert wire.methods()[10:] == ["tools/list"]
        client._observe_notification("notifications/prompts/list_changed", {})
        client._observe_notification("notifications/resources/list_changed", {})
        fill()
        assert wire.methods()[11:] == ["prompts/list", "resources/list", "resources/templates/list"]
        client._observe_notification("notifications/progress", {"progressToken": 1})
        fill()
        assert len(wire.sent) == 14


def test_a_resource_update_removes_cached_reads_of_that_uri() -> None:
    """notifications/resources/updated removes cached reads for that URI only."""
    counted = Counted()
    with snodo.direct(counted.runtime, cache=True) as client:
        client.read_resource("count://a")
        client.read_resource("count://b")
        client._observe_notification("notifications/resources/updated", {"uri": "count://a"})
        assert text(client.read_resource("count://a")) == "a #2"
        assert text(client.read_resource("count://b")) == "b #1"
        client._observe_notification("notifications/resources/updated", {})  # no uri: nothing
        assert text(client.read_resource("count://a")) == "a #2"


def test_a_response_in_flight_cannot_write_back_what_an_invalidation_removed() -> None:
    """A read sent before an update notification, answered after it, is not stored."""
    entered, release = threading.Event(), threading.Event()

    def hold(name: str) -> None:
        if name == "slow":
            entered.set()
            assert release.wait(10)

    counted = Counted(during=hold)
    results: list[str] = []
    with snodo.direct(counted.runtime, cache=True) as client:
        reader = threading.Thread(
            target=lambda: results.append(text(client.read_resource("count://slow")))
        )
        reader.start()
        assert entered.wait(10)
        client._observe_notification("notifications/resources/updated", {"uri": "count://slow"})
        release.set()
        reader.join(10)
        assert not reader.is_alive()
        assert results == ["slow #1"]
        assert text(client.read_resource("count://slow")) == "slow #2"  # #1 was not stored
        assert text(client.read_resource("count://slow")) == "slow #2"


def test_observe_notification_without_a_cache_does_nothing() -> None:
    """A client without cache=True ignores notifications (nothing to invalidate)."""
    with snodo.direct(client_runtime.build()) as client:
        client._observe_notification("notifications/tools/list_changed", {})
        assert client.list_tools()


# -- concurrency -----------------------------------------------------------------------------

URIS = ["count://x", "count://y", "count://z"]
OPS = st.one_of(
    st.tuples(st.just("read"), st.sampled_from(URIS)),
    st.tuples(st.just("write"), st.sampled_from(URIS)),
    st.tuples(st.just("invalidate"), st.sampled_from(URIS)),
)


#: The server's answer time in the concurrent test (widens the windows a race needs).
LATENCY = 0.001


class Versions:
    """The server's data (a version per URI) and the versions whose invalidation completed."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.current: Counter[str] = Counter()
        self.published: Counter[str] = Counter()

    def runtime(self) -> Runtime:
        rt = Runtime("versions", "1.0", cache_hints={"resources": CacheHint(MINUTE, "public")})

        @rt.resource_template("count://{name}", name="versioned")
        def versioned(uri: str, variables: dict[str, str], ctx: Context) -> str:
            with self.lock:
                value = str(self.current[uri])
            time.sleep(LATENCY)  # the answer travels back: other threads run meanwhile
            return value

        return rt


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs=st.lists(st.lists(OPS, min_size=1, max_size=25), min_size=2, max_size=4))
def test_concurrent_readers_writers_and_invalidations_never_see_stale_entries(
    programs: list[list[tuple[str, str]]],
) -> None:
    """Threads read (two clients sharing the cache), write (the server's data changes, then the
    update notification reaches a client) and invalidate at once: a read that starts after a
    write's notification was observed never returns older data."""
    shared_cache().clear()
    versions = Versions()
    rt = versions.runtime()
    stale: list[tuple[str, int, int]] = []
    failures: list[BaseException] = []
    with snodo.direct(rt, cache=True) as first, snodo.direct(rt, cache=True) as second:
        clients = [first, second]
        start = threading.Barrier(len(programs))

        def run(index: int, program: list[tuple[str, str]]) -> None:
            try:
                start.wait(10)
                client = clients[index % 2]
                for op, uri in program:
                    if op == "read":
                        with versions.lock:
                            floor = versions.published[uri]
                        seen = int(text(client.read_resource(uri)))
                        if seen < floor:
                            stale.append((uri, seen, floor))
                    elif op == "write":
                        with versions.lock:
                            versions.current[uri] += 1
                            written = versions.current[uri]
                        client._observe_notification(
                            "notifications/resources/updated", {"uri": uri}
                        )
                        with versions.lock:
                            versions.published[uri] = max(versions.published[uri], written)
                    else:
                        client._observe_notification(
                            "notifications/resources/updated", {"uri": uri}
                        )
            except BaseException as exc:
                failures.append(exc)

        threads = [
            threading.Thread(target=run, args=(i, program)) for i, program in enumerate(programs)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert not any(thread.is_alive() for thread in threads)
    assert failures == []
    assert stale == []
