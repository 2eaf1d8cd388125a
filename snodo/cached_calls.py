"""The response cache around the call pipeline (docs/decisions/0019), loaded only by clients
made with ``cache=True``: it serves a fresh stored result, or runs the call and stores what it
may store. Its ``run`` is :meth:`snodo.calls.CallPipeline.run`'s, so the client drives either."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

import orjson

from snodo.cache import ResponseStore, fresh_namespace, shared_cache
from snodo.calls import CallPipeline, Steps, drive
from snodo.options import NO_CALL_OPTIONS, CallOptions, check_timeout
from snodo.protocol import caching
from snodo.protocol.inputs import Done
from snodo.transports.base import cache_identity_of

__all__ = ["CachedCalls"]


class CachedCalls:
    """The response cache around a pipeline: serves a fresh stored result, or runs the call and
    stores what it may store (docs/decisions/0019). ``run`` is the pipeline's ``run``."""

    __slots__ = ("_base", "_cache", "_credential", "_namespace", "pipeline")

    def __init__(self, pipeline: CallPipeline, cache: ResponseStore | None = None) -> None:
        self.pipeline = pipeline
        self._cache: ResponseStore = cache if cache is not None else shared_cache()
        transport = pipeline.transport
        identity = cache_identity_of(transport)
        namespace = identity.namespace
        if namespace is None:
            kind = type(transport)
            # "own:", not "custom:": a connection's own namespace never names a shared endpoint
            namespace = fresh_namespace(f"own:{kind.__module__}.{kind.__qualname__}")
        #: What invalidation matches: this connection's (or its endpoint's) namespace, as the
        #: store keys it (a shared store tells this process's own namespaces apart).
        namespace = self._cache.scoped(namespace)
        self._namespace: Hashable = namespace
        #: The private partition (hashed credentials); None: private results are never stored.
        self._credential = identity.credential
        client = pipeline.options
        #: The prefix of every key: namespace, protocol and client metadata.
        self._base = caching.client_base(
            namespace, pipeline.dialect.version, client.client_info, client.client_capabilities
        )

    def run(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        call: CallOptions = NO_CALL_OPTIONS,
    ) -> Done:
        """Serve ``method`` from the cache when it may be, else run it (and maybe store it)."""
        return drive(self.steps(method, params, call))

    def steps(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        call: CallOptions = NO_CALL_OPTIONS,
    ) -> Steps[Done]:
        """``run`` as steps (the pipeline's, with the cache around them)."""
        given = call is not NO_CALL_OPTIONS
        if not caching.may_use_cache(
            method,
            bypass=given and call.bypass_cache,
            per_call_options=given and call.beyond_timeout,
        ):
            return (yield from self.pipeline.steps(method, params, call))
        cache = self._cache
        if call.timeout is not None:
            check_timeout("timeout", call.timeout)
        arg = caching.params_key(params)
        public = caching.public_key(self._base, method, arg)
        data = cache.get(public)
        if data is not None:
            return Done(orjson.loads(data), 0)
        credential_of = self._credential
        credential = credential_of() if credential_of is not None else None
        if credential is not None:
            data = cache.get(caching.private_key(self._base, method, arg, credential))
            if data is not None:
                return Done(orjson.loads(data), 0)
        # read before sending: an invalidation after it wins
        generation = cache.generation_of(self._namespace)
        done = yield from self.pipeline.steps(method, params, call)
        arrived = cache.now()
        hint = caching.storable(done.outcome)
        if hint is None or done.rounds:  # the result of an answered input round is never stored
            return done
        if hint.scope == "public":
            key = public
        elif credential is None or credential_of is None or credential_of() != credential:
            return done  # unknown credentials, or they changed while the call was out
        else:
            key = caching.private_key(self._base, method, arg, credential)
        try:
            encoded = orjson.dumps(done.outcome)
        except (TypeError, ValueError):
            return done  # not plain JSON (an integer beyond 64 bits): not stored
        cache.put(
            key,
            encoded,
            expires=arrived + hint.ttl,
            generation=generation,
            namespace=self._namespace,
            method=method,
            uri=caching.read_uri(method, params),
        )
        return done

    def observe(self, method: str, params: dict[str, Any]) -> None:
        """A subscription notification arrived: drop the cached results it names."""
        change = caching.invalidation(method, params)
        if change is not None:
            self._cache.invalidate(self._namespace, change)
