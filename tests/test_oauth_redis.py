"""OAuth state shared through a real ``redis-server`` (tests/support/redis_server.py) by worker
processes, against the project's real authorization server (tests/support/oauth_servers.py).

Rules: issue 24 items 1, 2 and 4 (docs/decisions/0049): values sealed under the application's
key (rotation by key id), no token, secret or Authorization value anywhere in Redis, TTLs where
the data expires; 8 worker processes x 20 threads through one expiring token make exactly one
refresh; a worker SIGKILLed while it holds the refresh lease loses no token; a Redis that is
down or hung leaves calls without a refresh working and fails a refresh clearly, in bounded time.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import snodo
from snodo.oauth import OAuthClient, RedisStore, redis_oauth_stores
from tests.support.oauth_servers import AuthServer, Browser, Client, ResourceServer
from tests.support.redis_server import RedisServer, redis_server
from tests.test_oauth_flows import runtime

VERSION = "2026-07-28"
KEY = os.urandom(32)
ROOT = Path(__file__).resolve().parent.parent
SECRET = "app-secret-0f3c9e"
WORKER_DEADLINE = 60.0


@pytest.fixture(scope="module")
def redis_srv() -> Iterator[RedisServer]:
    with redis_server() as server:
        yield server


@pytest.fixture
def prefix() -> str:
    return f"t{uuid.uuid4().hex[:10]}"


@pytest.fixture
def browser() -> Iterator[Browser]:
    b = Browser()
    yield b
    b.join()


class HeldAuthServer(AuthServer):
    """The AuthServer, holding the first refresh request once ``hold`` is set (before it is
    processed) until ``gate`` opens: a refresh in flight at the moment its worker dies."""

    def __init__(self, **options: Any) -> None:
        self.hold = False
        self.held = threading.Event()
        self.gate = threading.Event()
        self._hold_lock = threading.Lock()
        super().__init__(**options)

    def handle(
        self, method: str, path: str, query: dict[str, str], headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        if method == "POST" and path.endswith("/token") and b"grant_type=refresh_token" in body:
            with self._hold_lock:
                holding, self.hold = self.hold, False
            if holding:
                self.held.set()
                self.gate.wait(30.0)
        return super().handle(method, path, query, headers, body)


@pytest.fixture
def servers() -> Iterator[tuple[HeldAuthServer, ResourceServer]]:
    auth = HeldAuthServer(token_delay=0.3, registration=False)
    auth.add_client(Client("app", SECRET, auth_method="client_secret_basic"))
    rs = ResourceServer(auth, runtime())
    try:
        yield auth, rs
    finally:
        auth.gate.set()
        rs.close()
        auth.close()


def stores(server: RedisServer, prefix: str, **options: Any) -> dict[str, RedisStore]:
    return redis_oauth_stores(server.url, prefix=prefix, encryption_key=KEY, **options)


def authorized(
    rs: ResourceServer, browser: Browser, found: dict[str, RedisStore], **options: Any
) -> OAuthClient:
    """The first process of the deployment: authorizes once (the user's browser)."""
    oauth = OAuthClient(
        rs.url,
        authorize=browser,
        client_id="app",
        client_secret=SECRET,
        issuer=rs.auth.issuer,
        authorize_timeout=20.0,
        **found,
        **options,
    )
    with snodo.connect(snodo.Http(rs.url), token_provider=oauth, protocol=VERSION) as client:
        client.call_tool("echo", {"text": "first"})
    return oauth


def expire(store: RedisStore, key: str) -> None:
    record = store.get(key)
    assert record is not None
    record["expires_at"] = time.time() - 1
    store.put(key, record)


# -- the worker processes ---------------------------------------------------------------------


def start_worker(
    server: RedisServer, prefix: str, rs: ResourceServer, threads: int, log: Path, lease: float
) -> subprocess.Popen[bytes]:
    options = {
        "redis": server.url,
        "prefix": prefix,
        "key": KEY.hex(),
        "resource": rs.url,
        "threads": threads,
        "lease": lease,
    }
    with open(log, "ab") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.support.oauth_redis_worker", json.dumps(options)],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
        )


def read_line(process: subprocess.Popen[bytes], log: Path, deadline: float) -> str:
    """The worker's next stdout line, before ``deadline`` (monotonic)."""
    assert process.stdout is not None
    fd = process.stdout.fileno()
    os.set_blocking(fd, False)
    seen = getattr(process, "seen", b"")
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while b"\n" not in seen:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"worker said {seen!r}; its log: {log.read_text()[-3000:]}")
            if selector.select(left):
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise AssertionError(f"worker ended: {seen!r}; log: {log.read_text()[-3000:]}")
                seen += chunk
    line, _, rest = seen.partition(b"\n")
    process.seen = rest  # type: ignore[attr-defined]
    return line.decode()


def end(process: subprocess.Popen[bytes]) -> None:
    """Reap the one worker we started (by its pid), killing it if it still runs."""
    if process.poll() is None:
        process.kill()
    process.wait(10.0)
    for pipe in (process.stdin, process.stdout):
        if pipe is not None:
            pipe.close()


def scan(server: RedisServer) -> list[bytes]:
    """Every key name and every value in the Redis (all types)."""
    import redis

    client = redis.Redis.from_url(server.url, socket_timeout=5.0)
    try:
        found: list[bytes] = []
        for name in client.scan_iter(count=500):
            found.append(name)
            kind = client.type(name)
            if kind == b"string":
                found.append(client.get(name) or b"")
            elif kind == b"hash":
                for field, value in client.hgetall(name).items():
                    found += [field, value]
            elif kind in (b"list", b"set", b"zset"):
                found.append(client.dump(name) or b"")
            else:
                found.append(client.dump(name) or b"")
        return found
    finally:
        client.close()


# -- the store ---------------------------------------------------------------------------------


def test_a_store_needs_a_key_unless_plaintext_is_asked_for(redis_srv: RedisServer) -> None:
    import redis

    with pytest.raises(ValueError, match="encryption_key"):
        RedisStore(redis_srv.url, prefix="p")
    with pytest.raises(ValueError, match="bytes"):
        RedisStore(redis_srv.url, prefix="p", encryption_key=b"short")
    unbounded = redis.Redis.from_url(redis_srv.url, socket_timeout=None)
    try:
        with pytest.raises(ValueError, match="socket_timeout"):
            RedisStore(unbounded, prefix="p", encryption_key=KEY)
    finally:
        unbounded.close()
    clear = RedisStore(redis_srv.url, prefix="p-clear", plaintext=True)
    clear.put("k", {"a": 1})
    assert clear.get("k") == {"a": 1}
    assert clear.client.get(clear.redis_key("k")) == b'{"a":1}'
    clear.delete("k")
    assert clear.get("k") is None


def test_values_are_sealed_under_a_key_id_and_keys_rotate(
    redis_srv: RedisServer, prefix: str
) -> None:
    old, new = os.urandom(32), os.urandom(32)
    first = RedisStore(redis_srv.url, prefix=prefix, encryption_key=old)
    key = "https://as.example app https://mcp.example/mcp"
    first.put(key, {"access_token": "tok-abc", "refresh_token": "ref-xyz"})
    name = first.redis_key(key)
    assert "example" not in name and name.startswith(f"{prefix}:oauth:tokens:")
    raw = first.client.get(name)
    assert raw.startswith(b"snodo-sealed-1:") and b"tok-abc" not in raw and b"ref-xyz" not in raw
    rotated = RedisStore(redis_srv.url, prefix=prefix, encryption_key=new, decryption_keys=[old])
    assert rotated.get(key) == {"access_token": "tok-abc", "refresh_token": "ref-xyz"}
    rotated.put(key, {"access_token": "tok-2"})
    with pytest.raises(snodo.McpError) as caught:
        RedisStore(redis_srv.url, prefix=prefix, encryption_key=old).get(key)
    assert caught.value.kind == "authorization" and "not given" in str(caught.value)
    # a value moved to another key does not open there (the key name is authenticated)
    other = rotated.redis_key("another")
    rotated.client.set(other, rotated.client.get(name))
    with pytest.raises(snodo.McpError, match="does not open"):
        rotated.get("another")
    clear = RedisStore(redis_srv.url, prefix=prefix, plaintext=True)
    clear.put("plain", {"x": 1})
    with pytest.raises(snodo.McpError, match="not sealed"):
        rotated.get("plain")


def test_values_expire_where_the_data_expires(redis_srv: RedisServer, prefix: str) -> None:
    found = stores(redis_srv, prefix)
    tokens, pending = found["token_store"], found["pending_store"]
    registrations = found["registration_store"]
    tokens.put("short", {"access_token": "a", "expires_at": time.time() + 100})
    tokens.put("long", {"access_token": "a", "refresh_token": "r", "expires_at": time.time()})
    pending.put("state", {"verifier": "v"})
    registrations.put("issuer", {"client_id": "c"})
    ttl = tokens.client.pttl
    assert 90_000 < ttl(tokens.redis_key("short")) <= 100_000
    assert ttl(tokens.redis_key("long")) == -1  # a refresh token outlives its access token
    assert 890_000 < ttl(pending.redis_key("state")) <= 900_000
    assert ttl(registrations.redis_key("issuer")) == -1
    assert len({tokens.redis_key("x"), pending.redis_key("x"), registrations.redis_key("x")}) == 3


def test_the_refresh_lease_is_released_by_its_owner_only_and_wakes_waiters(
    redis_srv: RedisServer, prefix: str
) -> None:
    store = stores(redis_srv, prefix)["token_store"]
    lease = store.acquire("k", 10.0)
    assert lease is not None and store.acquire("k", 10.0) is None
    store.release("k", "not-the-lease")
    assert store.acquire("k", 10.0) is None  # still held
    woke: list[float] = []

    def waiter() -> None:
        started = time.monotonic()
        store.wait_released("k", 10.0)
        woke.append(time.monotonic() - started)

    thread = threading.Thread(target=waiter)
    thread.start()
    # the waiter subscribed before the release or sees the lease gone: either way it wakes
    store.release("k", lease)
    thread.join(10.0)
    assert woke and woke[0] < 5.0
    assert store.acquire("k", 0.3) is not None  # a holder that dies: its lease expires
    started = time.monotonic()
    store.wait_released("k", 10.0)
    assert time.monotonic() - started < 2.0
    assert store.acquire("k", 10.0) is not None
    started = time.monotonic()
    store.wait_released("k", 0.3)  # bounded
    assert 0.25 < time.monotonic() - started < 2.0


def test_import_snodo_oauth_loads_no_redis() -> None:
    code = "import sys, snodo, snodo.oauth; print('redis' in sys.modules, snodo.oauth.RedisStore)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT
    ).stdout
    assert out.startswith("False <class 'snodo.oauth.redis_stores.RedisStore'>")


# -- many workers ------------------------------------------------------------------------------


def test_eight_workers_of_twenty_threads_refresh_once_and_redis_holds_no_secret(
    redis_srv: RedisServer,
    prefix: str,
    servers: tuple[HeldAuthServer, ResourceServer],
    browser: Browser,
    tmp_path: Path,
) -> None:
    """Issue 24 item 2: 160 callers in 8 processes through one expiring token, one refresh at
    the authorization server; item 1: no token, refresh token, client secret or Authorization
    value in any Redis key or value."""
    auth, rs = servers
    found = stores(redis_srv, prefix)
    oauth = authorized(rs, browser, found)
    key = oauth._key
    assert key is not None
    log = tmp_path / "workers.log"
    workers = [start_worker(redis_srv, prefix, rs, 20, log, 10.0) for _ in range(8)]
    try:
        deadline = time.monotonic() + WORKER_DEADLINE
        for worker in workers:
            assert read_line(worker, log, deadline) == "ready"
        assert auth.grants == ["authorization_code"]  # every worker adopted the stored token
        expire(found["token_store"], key)
        for worker in workers:
            assert worker.stdin is not None
            worker.stdin.write(b"go\n")
            worker.stdin.flush()
        reports = [json.loads(read_line(worker, log, deadline)) for worker in workers]
    finally:
        for worker in workers:
            end(worker)
    assert [r["errors"] for r in reports] == [[]] * 8
    assert sum(r["ok"] for r in reports) == 160
    assert auth.grants.count("refresh_token") == 1
    assert len(auth.authorize_requests) == 1
    record = found["token_store"].get(key)
    assert record is not None and record["refresh_token"] in auth.refresh  # the rotated one
    secrets_seen = {SECRET, *rs.accepted, *auth.refresh}
    secrets_seen |= {f["refresh_token"] for f in auth.token_forms if "refresh_token" in f}
    assert len(secrets_seen) >= 3
    everything = b"\n".join(scan(redis_srv))
    assert prefix.encode() in everything
    leaked = [s for s in secrets_seen if s.encode() in everything]
    assert leaked == []
    assert b"Bearer" not in everything and b"Basic" not in everything


def test_a_worker_killed_holding_the_refresh_lease_loses_no_token(
    redis_srv: RedisServer,
    prefix: str,
    servers: tuple[HeldAuthServer, ResourceServer],
    browser: Browser,
    tmp_path: Path,
) -> None:
    """Issue 24 item 2: the dead worker's lease expires; the next refresh uses what the store
    holds and succeeds, and the token it stores refreshes again."""
    auth, rs = servers
    found = stores(redis_srv, prefix)
    oauth = authorized(rs, browser, found, refresh_lease=2.0)
    key = oauth._key
    assert key is not None
    log = tmp_path / "worker.log"
    worker = start_worker(redis_srv, prefix, rs, 1, log, 2.0)
    try:
        deadline = time.monotonic() + WORKER_DEADLINE
        assert read_line(worker, log, deadline) == "ready"
        expire(found["token_store"], key)
        auth.hold = True
        assert worker.stdin is not None
        worker.stdin.write(b"go\n")
        worker.stdin.flush()
        assert auth.held.wait(WORKER_DEADLINE)  # its refresh is at the authorization server
        store = found["token_store"]
        assert store.client.pttl(store._lock_key(key)) > 0  # and it holds the lease
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(10.0)
    finally:
        end(worker)
    started = time.monotonic()
    with snodo.connect(snodo.Http(rs.url), token_provider=oauth, protocol=VERSION) as client:
        assert client.call_tool("echo", {"text": "after"})["structuredContent"] == {"said": "after"}
        assert time.monotonic() - started < 2.0 + 5.0
        assert auth.grants.count("refresh_token") == 1
        auth.gate.set()  # the dead worker's request ends now: its refresh token was spent
        expire(store, key)
        client.call_tool("echo", {"text": "again"})
    assert auth.grants.count("refresh_token") == 2
    assert len(auth.authorize_requests) == 1


# -- Redis down or hung --------------------------------------------------------------------------


def test_redis_hung_or_down_calls_go_on_and_a_refresh_fails_clearly_in_bounded_time(
    redis_srv: RedisServer,
    prefix: str,
    servers: tuple[HeldAuthServer, ResourceServer],
    browser: Browser,
) -> None:
    """Issue 24 item 4: a call that needs no refresh goes on (the last token this process
    saw); one that needs the store fails with kind="authorization" naming Redis, within the
    store's timeout; the message carries no token and no password."""
    auth, rs = servers
    oauth = authorized(rs, browser, stores(redis_srv, prefix, timeout=0.5, retry_interval=1.0))
    held = oauth.tokens.get(oauth._key or "")
    assert held is not None
    with snodo.connect(snodo.Http(rs.url), token_provider=oauth, protocol=VERSION) as client:
        for stop in ("pause", "kill"):
            getattr(redis_srv, stop)()
            try:
                started = time.monotonic()
                for _ in range(3):
                    client.call_tool("echo", {"text": stop})
                assert time.monotonic() - started < 0.5 + 2.0
                oauth.refresh_margin = 1e9  # the token now needs a refresh
                started = time.monotonic()
                with pytest.raises(snodo.McpError) as caught:
                    client.call_tool("echo", {"text": "refresh"})
                assert time.monotonic() - started < 0.5 * 2 + 2.0
                error = caught.value
                assert error.kind == "authorization" and "Redis" in str(error)
                assert held["access_token"] not in str(error) + repr(error.cause)
                assert held["refresh_token"] not in str(error)
                oauth.refresh_margin = 30.0
            finally:
                if stop == "pause":
                    redis_srv.resume()
                else:
                    redis_srv.start()
        assert auth.grants == ["authorization_code"]
    # a URL's password never reaches a message
    dead = RedisStore(
        f"redis://:hunter2-pw@127.0.0.1:{redis_srv.port + 1}/0", prefix=prefix, plaintext=True
    )
    with pytest.raises(snodo.McpError) as caught:
        dead.acquire("k", 1.0)
    assert "hunter2" not in str(caught.value) and caught.value.kind == "authorization"
