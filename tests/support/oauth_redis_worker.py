"""One worker process of tests/test_oauth_redis.py: an OAuthClient on RedisStores (the token
another process authorized is adopted, never a new authorization), calling ``echo`` through one
connection from many threads.

    python -m tests.support.oauth_redis_worker '{"redis": url, "prefix": p, "key": hex,
        "resource": url, "threads": n, "lease": seconds}'

Prints ``ready`` once its first call went through, waits for a line on stdin, then runs
``threads`` calls at once (a barrier) and prints one JSON line: ``{"ok": n, "errors": [...]}``.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

import snodo
from snodo.oauth import OAuthClient, redis_oauth_stores

VERSION = "2026-07-28"


def never_authorize(url: str) -> None:
    raise RuntimeError("a worker never runs an authorization of its own")


def main() -> None:
    options: dict[str, Any] = json.loads(sys.argv[1])
    stores = redis_oauth_stores(
        options["redis"], prefix=options["prefix"], encryption_key=bytes.fromhex(options["key"])
    )
    oauth = OAuthClient(
        options["resource"],
        authorize=never_authorize,
        refresh_lease=float(options.get("lease", 10.0)),
        http_timeout=10.0,
        **stores,
    )
    threads = int(options["threads"])
    with snodo.connect(
        snodo.Http(options["resource"]), token_provider=oauth, protocol=VERSION
    ) as c:
        c.call_tool("echo", {"text": "warm"})
        print("ready", flush=True)
        sys.stdin.readline()
        barrier = threading.Barrier(threads, timeout=20.0)
        ok: list[int] = []
        errors: list[str] = []

        def call() -> None:
            try:
                barrier.wait()
                c.call_tool("echo", {"text": "x"})
                ok.append(1)
            except Exception as error:
                errors.append(f"{type(error).__name__}: {error}")

        running = [threading.Thread(target=call) for _ in range(threads)]
        for thread in running:
            thread.start()
        for thread in running:
            thread.join(60.0)
    print(json.dumps({"ok": len(ok), "errors": errors}), flush=True)


if __name__ == "__main__":
    main()
