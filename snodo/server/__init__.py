"""The server side: a :class:`Runtime` (configuration) and :func:`dispatch`, which serves one
decoded JSON-RPC message for any of the three protocol versions."""

from snodo.server.context import Context, Peer, ServerSession
from snodo.server.dispatch import dispatch
from snodo.server.runtime import CacheHint, Runtime

__all__ = ["CacheHint", "Context", "Peer", "Runtime", "ServerSession", "dispatch"]
