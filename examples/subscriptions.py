"""Subscriptions: listen for list changes and resource updates, pull them or receive them in an
actor, and watch a slow consumer's buffer drop what it cannot keep.

    python examples/subscriptions.py

The server is a snodo Runtime in this process (``snodo.direct``); the same calls work over
``snodo.connect(snodo.Stdio(...))`` and ``snodo.connect(snodo.Http(...))``, on 2026-07-28 and on
the session-era versions.
"""

from __future__ import annotations

import threading
from typing import Any

import snodo
from snodo.server import Runtime
from snodo.supervision import Actor, call


def build() -> Runtime:
    runtime = Runtime("notes", "1.0.0")
    runtime.add_resource("file:///notes.md", lambda ctx: "# notes")
    return runtime


class Reloader(Actor):
    """An actor owner: asks for a batch and asks again as it consumes."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []
        self.done = threading.Event()

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, snodo.SubscriptionEvent):
            event = message.event
            if isinstance(event, snodo.Notification):
                self.seen.append(event.params.get("uri", event.method))
                self.sub.demand(1)
            elif isinstance(event, snodo.Closed):
                self.done.set()
        return None

    def listen(self, client: snodo.Client) -> snodo.Subscription:
        self.sub = client.listen({"resourceSubscriptions": ["file:///notes.md"]})
        self.sub.demand(1)
        return self.sub


def main() -> None:
    runtime = build()
    with snodo.direct(runtime) as client:
        sub = client.listen(
            {
                "toolsListChanged": True,
                "resourceSubscriptions": ["file:///notes.md"],
                "taskIds": ["t-1"],  # an extension key this server does not honour
            }
        )
        print("accepted:", sub.accepted)
        runtime.add_tool("echo", lambda arguments, ctx: arguments.get("text", ""))
        runtime.resource_updated("file:///notes.md")
        for _ in range(2):
            event = sub.next(timeout=5)
            assert isinstance(event, snodo.Notification)
            print("pulled:", event.method, event.params.get("uri", ""))
        sub.close()
        print("after close:", type(sub.next()).__name__)

        slow = client.listen({"resourceSubscriptions": ["file:///notes.md"]}, max_buffer=3)
        for _ in range(10):
            runtime.resource_updated("file:///notes.md")
        first = slow.next(timeout=5)
        print("slow consumer:", first)  # Dropped(n=7): the oldest seven went
        slow.close()

        ref = Reloader.start()
        done = call(ref, lambda actor: actor.done, 5.0)
        call(ref, lambda actor: actor.listen(client), 5.0)
        for _ in range(3):
            runtime.resource_updated("file:///notes.md")
        runtime.close_subscriptions()  # ends every listen stream gracefully
        done.wait(5.0)
        print("actor saw:", call(ref, lambda actor: list(actor.seen), 5.0))
        ref.stop()


if __name__ == "__main__":
    main()
