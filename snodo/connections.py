"""Opening clients: ``direct`` for a Runtime in this process (``connect`` joins it for stdio/HTTP)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from snodo.client import Client, build_options, initialize_session
from snodo.protocol import dialects, negotiation

if TYPE_CHECKING:
    from snodo.server import Runtime


def direct(
    runtime: Runtime,
    *,
    protocol: str | Sequence[str] | None = None,
    client_info: Mapping[str, Any] | None = None,
    client_capabilities: Mapping[str, Any] | None = None,
    input_handlers: Mapping[str, Any] | None = None,
    timeout: float | None = 30.0,
    max_input_rounds: int = 10,
    max_pages: int = 1000,
    reset_timeout_on_progress: bool = False,
    max_total_timeout: float | None = 600.0,
) -> Client:
    """A client for ``runtime`` in this process: no transport, no JSON text in between.

    No probe: the highest allowed version the runtime enables wins, and an initialize-era
    version is negotiated through the runtime exactly as over a wire.
    """
    from snodo.transports.direct import DirectTransport

    options = build_options(
        protocol=protocol,
        client_info=client_info,
        client_capabilities=client_capabilities,
        input_handlers=input_handlers,
        timeout=timeout,
        max_input_rounds=max_input_rounds,
        max_pages=max_pages,
        reset_timeout_on_progress=reset_timeout_on_progress,
        max_total_timeout=max_total_timeout,
    )
    version = negotiation.direct_version(options.protocol, runtime.enabled_versions)
    dialect = dialects.get(version)
    transport = DirectTransport(runtime)
    if dialect.stateless:
        return Client(transport, dialect, options)
    try:
        session = initialize_session(transport, options, version, dialect)
    except BaseException:
        transport.close()
        raise
    return Client(transport, dialects.get(session.version), options, session=session)
