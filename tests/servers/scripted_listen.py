"""The scripted server with a ``subscriptions/listen`` that misbehaves on purpose.

``LISTEN_MODE`` (environment) says what a listen request gets:

- ``silent``: nothing, ever (the client's acknowledgement deadline passes);
- ``early-end``: the listen result, with no acknowledgement before it;
- ``error``: a -32602 error response;
- ``ack-cancel``: the acknowledgement, one tools list_changed, then ``notifications/cancelled``
  for the listen id (a graceful end);
- ``ack-error``: the acknowledgement, then a -32603 error response for the listen id.
"""

from __future__ import annotations

import os
from typing import Any

from scripted_lib import Server, main

KEY = "io.modelcontextprotocol/subscriptionId"


def configure(server: Server) -> None:
    mode = os.environ.get("LISTEN_MODE", "silent")

    def on_subscriptions_listen(request_id: Any, params: dict[str, Any]) -> None:
        meta = {KEY: request_id}
        if mode == "silent":
            return
        if mode == "early-end":
            server.respond(request_id, {"resultType": "complete", "_meta": meta})
            return
        if mode == "error":
            server.fail(request_id, -32602, "Invalid filter")
            return
        server.notify(
            "notifications/subscriptions/acknowledged",
            {"notifications": {"toolsListChanged": True}, "_meta": meta},
        )
        server.notify("notifications/tools/list_changed", {"_meta": meta})
        if mode == "ack-cancel":
            server.notify("notifications/cancelled", {"requestId": request_id})
        else:
            server.fail(request_id, -32603, "Internal error: the source broke")

    server.on_subscriptions_listen = on_subscriptions_listen  # type: ignore[attr-defined]


if __name__ == "__main__":
    main(configure)
