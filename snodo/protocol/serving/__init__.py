"""The server's protocol rules, pure like the rest of :mod:`snodo.protocol` (no sockets,
threads or clocks). :mod:`snodo.server` moves bytes and runs handlers; what it decides lives here:

- :mod:`.selection`: the JSON-RPC envelope dispatch accepts, which protocol version serves a
  request, and the stateless era's ``_meta`` rules;
- :mod:`.http_rules`: the Streamable HTTP request rules (the era a POST belongs to, the
  2026-07-28 header mirror, the HTTP status of an error, ``Accept``, ``Origin``, ``Host``);
- :mod:`.event_stream`: the server's SSE events and their ids;
- :mod:`.interaction`: what an input request needs from the client and whether a form answer
  fits its schema;
- :mod:`.request_state`: the signed 2026-07-28 ``requestState`` token;
- :mod:`.cursors`: opaque list cursors;
- :mod:`.shaping`: the fields each version's schema defines for the objects the server sends.
"""

__all__: list[str] = []
