"""The client's options: :class:`ClientOptions` for a connection, :class:`CallOptions` for a call.

``ClientOptions`` is checked once, at connect time, by :func:`build_options`, whose keywords are
its fields (``connect`` and ``direct`` spell them out again for IDEs and hand them over with
:func:`client_keywords`). ``CallOptions`` is what one ``Client`` method was given; the call
pipeline (``snodo.calls``) merges the two into the transport's ``RequestOptions``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, fields
from typing import TYPE_CHECKING, Any, Final

from snodo import __version__
from snodo.protocol import inputs, negotiation
from snodo.protocol.meta import check_log_level

if TYPE_CHECKING:
    from snodo.cache import ResponseStore

#: What ``progress=`` may be: a callable, a ``queue.Queue``, or a Pykka ``ActorRef``.
ProgressTarget = Any

#: The ``Implementation`` sent when the caller gives no ``client_info``.
DEFAULT_CLIENT_INFO: Final[dict[str, Any]] = {"name": "snodo", "version": __version__}


@dataclass(frozen=True, slots=True)
class ClientOptions:
    """The client-wide options, validated once at connect time.

    A field without a default is derived from its keyword (``None`` by default): ``protocol``
    from the allowed versions, ``client_info`` from :data:`DEFAULT_CLIENT_INFO`, and
    ``client_capabilities`` from the declared ones merged with the input handlers' entries.
    """

    protocol: tuple[str, ...]
    client_info: dict[str, Any] | None
    client_capabilities: dict[str, Any]
    input_handlers: dict[str, Callable[[dict[str, Any]], Any]]
    timeout: float | None = 30.0
    max_input_rounds: int = 10
    max_pages: int = 1000
    reset_timeout_on_progress: bool = False
    max_total_timeout: float | None = 600.0
    #: Use the process's response cache (``snodo.cache``) for cacheable results, or the given
    #: store (``snodo.RedisCache``, shared by processes: docs/decisions/0050).
    cache: bool | ResponseStore = False
    #: The lowest level of the server's log messages to ask for (``snodo.server_logs``).
    log_level: str | None = None
    #: Where the server's log messages go: a callable, a queue or an actor (None: logging).
    log_handler: Any = None
    #: The server's name in logs (derived from the target by ``connect``/``direct``).
    name: str | None = None
    #: Check each tool result's ``structuredContent`` against the tool's ``outputSchema``
    #: (``snodo.output_validation``, docs/decisions/0041); a call may say otherwise.
    validate_output: bool = False


#: The keywords of :func:`build_options` (and the client options of ``connect``/``direct``)
#: with their defaults: each field's default, ``None`` for a derived one.
OPTION_DEFAULTS: Final[dict[str, Any]] = {
    f.name: None if f.default is MISSING else f.default for f in fields(ClientOptions)
}


def build_options(**given: Any) -> ClientOptions:
    """Validate the options every connection shares (an unknown keyword is a TypeError)."""
    for name in given:
        if name not in OPTION_DEFAULTS:
            raise TypeError(f"build_options() got an unexpected keyword argument {name!r}")
    value = {**OPTION_DEFAULTS, **given}
    if not isinstance(value["cache"], bool):
        from snodo.cache import ResponseStore

        if not isinstance(value["cache"], ResponseStore):
            raise TypeError("cache must be True or False, or a store such as snodo.RedisCache")
    if not isinstance(value["validate_output"], bool):
        raise TypeError("validate_output must be True or False")
    if value["validate_output"]:
        from snodo.output_validation import require_library

        require_library()  # the extra is missing: say so at connect, not at the first call
    handlers = inputs.validate_handlers(value["input_handlers"])
    check_log_level("log_level", value["log_level"])
    check_positive_int("max_input_rounds", value["max_input_rounds"], allow_zero=True)
    check_positive_int("max_pages", value["max_pages"])
    check_timeout("timeout", value["timeout"])
    check_timeout("max_total_timeout", value["max_total_timeout"])
    client_info = value["client_info"]
    info = dict(client_info) if client_info is not None else dict(DEFAULT_CLIENT_INFO)
    return ClientOptions(
        protocol=negotiation.allowed_versions(value["protocol"]),
        client_info=info,
        client_capabilities=inputs.merge_capabilities(value["client_capabilities"], handlers),
        input_handlers=handlers,
        timeout=value["timeout"],
        max_input_rounds=value["max_input_rounds"],
        max_pages=value["max_pages"],
        reset_timeout_on_progress=value["reset_timeout_on_progress"],
        max_total_timeout=value["max_total_timeout"],
        cache=value["cache"],
        log_level=value["log_level"],
        log_handler=value["log_handler"],
        name=value["name"],
        validate_output=value["validate_output"],
    )


def client_keywords(keywords: Mapping[str, Any]) -> dict[str, Any]:
    """The client options among a function's keywords (``connect`` and ``direct`` pass
    ``locals()``, so each option is named once in their signatures and nowhere else)."""
    return {name: keywords[name] for name in OPTION_DEFAULTS}


@dataclass(frozen=True, slots=True)
class CallOptions:
    """What one call was given besides its method and params (``None``: the client's option).

    Built once by each ``Client`` method (:func:`call_options`); the pipeline merges it with
    :class:`ClientOptions` into the transport's ``RequestOptions``.
    """

    timeout: float | None = None
    progress: ProgressTarget = None
    meta: Mapping[str, Any] | None = None
    trace_context: Mapping[str, Any] | None = None
    input_responses: Mapping[str, Any] | None = None
    request_state: str | None = None
    max_input_rounds: int | None = None
    reset_timeout_on_progress: bool | None = None
    max_total_timeout: float | None = None
    #: The tool definition ``call_tool`` was given (HTTP derives ``Mcp-Param-*`` from it).
    tool: Mapping[str, Any] | None = None
    bypass_cache: bool = False
    #: The lowest level of log messages to ask for during this call (2026-07-28 only).
    log_level: str | None = None

    @property
    def beyond_timeout(self) -> bool:
        """Whether the call carries a per-call option other than ``timeout``/``bypass_cache``."""
        return not (
            self.progress is None
            and self.meta is None
            and self.trace_context is None
            and self.input_responses is None
            and self.request_state is None
            and self.max_input_rounds is None
            and self.reset_timeout_on_progress is None
            and self.max_total_timeout is None
            and self.tool is None
            and self.log_level is None
        )


#: The options of a call that was given none (shared: most calls are given none).
NO_CALL_OPTIONS: Final = CallOptions()

#: The records of calls given only a timeout (and maybe ``bypass_cache``), shared by value:
#: programs use a few timeouts, and building a frozen record costs about as much as the rest
#: of a direct call's client side. At most ``_SHARED_MAX`` are kept.
_shared: dict[tuple[float | None, bool], CallOptions] = {}
_SHARED_MAX: Final = 64


def call_options(
    timeout: float | None = None,
    progress: ProgressTarget = None,
    meta: Mapping[str, Any] | None = None,
    trace_context: Mapping[str, Any] | None = None,
    input_responses: Mapping[str, Any] | None = None,
    request_state: str | None = None,
    max_input_rounds: int | None = None,
    reset_timeout_on_progress: bool | None = None,
    max_total_timeout: float | None = None,
    tool: Mapping[str, Any] | None = None,
    bypass_cache: bool = False,
    log_level: str | None = None,
) -> CallOptions:
    """The :class:`CallOptions` of one call (:data:`NO_CALL_OPTIONS` when it was given none; a
    shared record when it was given only a timeout)."""
    if (
        progress is None
        and meta is None
        and trace_context is None
        and input_responses is None
        and request_state is None
        and max_input_rounds is None
        and reset_timeout_on_progress is None
        and max_total_timeout is None
        and tool is None
        and log_level is None
    ):
        if timeout is None and not bypass_cache:
            return NO_CALL_OPTIONS
        if timeout is None or type(timeout) is float or type(timeout) is int:
            key = (timeout, bool(bypass_cache))
            found = _shared.get(key)
            if found is None:
                found = CallOptions(timeout=timeout, bypass_cache=key[1])
                if len(_shared) < _SHARED_MAX:
                    _shared[key] = found
            return found
    return CallOptions(
        timeout,
        progress,
        meta,
        trace_context,
        input_responses,
        request_state,
        max_input_rounds,
        reset_timeout_on_progress,
        max_total_timeout,
        tool,
        bypass_cache,
        log_level,
    )


def check_positive_int(name: str, value: object, *, allow_zero: bool = False) -> None:
    """Refuse anything but an ``int`` (not a bool) of at least 1 (0 with ``allow_zero``)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < (0 if allow_zero else 1):
        raise ValueError(f"{name} must be a {'non-negative' if allow_zero else 'positive'} integer")


def check_timeout(name: str, value: object, *, optional: bool = True) -> None:
    """Refuse anything but a positive number of seconds (not a bool), or ``None`` if optional."""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        if optional:
            raise ValueError(f"{name} must be a positive number of seconds or None")
        raise ValueError(f"{name} must be a positive number of seconds")


__all__ = [
    "DEFAULT_CLIENT_INFO",
    "NO_CALL_OPTIONS",
    "OPTION_DEFAULTS",
    "CallOptions",
    "ClientOptions",
    "ProgressTarget",
    "build_options",
    "call_options",
    "check_positive_int",
    "check_timeout",
    "client_keywords",
]
