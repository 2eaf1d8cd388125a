"""The rules of a ``snodo.Fleet`` config: the ``mcpServers`` format, ``${VAR}`` expansion, tool
filters, qualified names and what a reload changes. Pure: the environment is an argument.

The format is the one Claude Desktop, Cursor, VS Code, Claude Code and FastMCP read::

    {"mcpServers": {"git": {"command": "uvx", "args": ["mcp-server-git"]},
                    "docs": {"type": "http", "url": "https://docs.example/mcp",
                             "headers": {"authorization": "Bearer ${DOCS_TOKEN}"}},
                    "old": {"type": "sse", "url": "http://127.0.0.1:3001/sse"}}}

(``"type": "sse"`` is the HTTP+SSE transport of 2024-11-05: ``snodo.Sse``, which implies that
version; a ``protocol`` without it is refused.)

with snodo's own per-server keys (:data:`CONNECT_KEYS`, :data:`FLEET_KEYS`). A bad config is
refused with a ``ValueError`` that names the server and the key.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Literal

from snodo.protocol.legacy_sse import LEGACY_VERSION

__all__ = [
    "CONNECT_KEYS",
    "FLEET_KEYS",
    "IGNORED_KEYS",
    "Reload",
    "ServerSpec",
    "ToolFilter",
    "expand",
    "parse_config",
    "plan_reload",
    "qualify",
    "split_qualified",
]

#: snodo's ``connect()`` keywords a server entry may carry (passed through as given).
CONNECT_KEYS = frozenset(
    {
        "protocol",
        "timeout",
        "probe_timeout",
        "restart",
        "backoff",
        "max_restarts",
        "restart_window",
        "ping_interval",
        "cache",
        "validate_output",
        "max_response_bytes",
        "max_server_requests",
        "max_input_rounds",
        "max_pages",
        "max_total_timeout",
        "reset_timeout_on_progress",
        "log_level",
        "verify",
        "ca_certs",
        "client_cert",
        "client_info",
        "client_capabilities",
        "stderr",
    }
)
#: The fleet's own per-server keys.
FLEET_KEYS = frozenset({"start", "idle_timeout", "disabled", "tools"})
#: Keys other clients write in the same file that a fleet reads past (they mean nothing here).
IGNORED_KEYS = frozenset(
    {"alwaysAllow", "autoApprove", "description", "disabledTools", "icon", "transportType"}
)
_STDIO_KEYS = frozenset({"command", "args", "env", "cwd", "type"})
_HTTP_KEYS = frozenset({"url", "headers", "type"})
#: A tuple, not a set: ``in`` must not hash the config's value (``"type": ["http"]``).
_HTTP_TYPES = ("http", "streamable-http", "streamableHttp")
#: ``connect()`` keywords of one transport only, refused on the other's entries.
_STDIO_ONLY = frozenset({"stderr"})
_HTTP_ONLY = frozenset({"verify", "ca_certs", "client_cert"})
_VSCODE_KEYS = frozenset({"servers", "inputs"})
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_VARIABLE = re.compile(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


@dataclass(frozen=True, slots=True)
class ToolFilter:
    """Which of a server's tools the fleet shows and routes: ``allow`` globs (empty: all), then
    ``deny`` globs (``fnmatch`` patterns, case-sensitive)."""

    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()

    def admits(self, name: str) -> bool:
        """Whether the tool ``name`` passes the filter."""
        if self.allow and not any(fnmatchcase(name, pattern) for pattern in self.allow):
            return False
        return not any(fnmatchcase(name, pattern) for pattern in self.deny)


@dataclass(frozen=True, slots=True)
class ServerSpec:
    """One server of a fleet, expanded and checked. Two specs are equal exactly when a reload
    leaves the server as it is (compared, not hashed: option values may be dicts)."""

    name: str
    transport: Literal["stdio", "http", "sse"]
    #: stdio: the command and its arguments; http and sse: the URL and headers.
    command: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None
    url: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    #: ``connect()`` keywords, sorted by name (values as given in the config).
    options: tuple[tuple[str, Any], ...] = ()
    start: Literal["eager", "lazy"] | None = None
    idle_timeout: float | None = None
    disabled: bool = False
    tools: ToolFilter = ToolFilter()

    def connect_options(self) -> dict[str, Any]:
        """The keywords for ``snodo.connect`` (transport keywords included)."""
        keywords = dict(self.options)
        if self.transport == "stdio":
            if self.env:
                keywords["env"] = dict(self.env)
            if self.cwd is not None:
                keywords["cwd"] = self.cwd
        elif self.headers:
            keywords["headers"] = dict(self.headers)
        return keywords


@dataclass(frozen=True, slots=True)
class Reload:
    """What ``Fleet.reload`` does, by server name (each tuple in config order)."""

    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: tuple[str, ...]
    unchanged: tuple[str, ...]


def parse_config(config: Mapping[str, Any], environ: Mapping[str, str]) -> tuple[ServerSpec, ...]:
    """Every server of ``config`` (``{"mcpServers": {...}}``, VS Code's ``{"servers": {...}}``,
    or the inner mapping), in order,
    with ``${VAR}``, ``${VAR:-default}`` and ``${env:VAR}`` expanded from ``environ``."""
    if not isinstance(config, Mapping):
        raise ValueError(f"a fleet config is a mapping, not {type(config).__name__}")
    if "mcpServers" in config:
        servers = config["mcpServers"]
    elif set(config) <= _VSCODE_KEYS and _entries(config.get("servers")):
        servers = config["servers"]  # VS Code's mcp.json: {"servers": {...}, "inputs": [...]}
    else:
        servers = config
    if not isinstance(servers, Mapping):
        raise ValueError('"mcpServers" must be a mapping of server names to server entries')
    return tuple(_server(name, entry, environ) for name, entry in servers.items())


def _entries(value: Any) -> bool:
    """Whether ``value`` is a mapping of names to entries (VS Code's "servers")."""
    return isinstance(value, Mapping) and all(isinstance(v, Mapping) for v in value.values())


def expand(value: str, environ: Mapping[str, str], where: str) -> str:
    """``value`` with its ``${VAR}`` references replaced; a missing variable with no default
    is a ``ValueError`` naming it and ``where`` it was used."""

    def substitute(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        found = environ.get(name)
        if found is not None:
            return found
        if default is not None:
            return default
        raise ValueError(f"{where}: the environment variable {name} is not set")

    return _VARIABLE.sub(substitute, value) if "${" in value else value


def qualify(server: str, name: str, separator: str) -> str:
    """The fleet-wide name of a server's tool or prompt."""
    return f"{server}{separator}{name}"


def split_qualified(
    qualified: str, servers: Sequence[str], separator: str
) -> tuple[str, str] | None:
    """``(server, name)`` for a qualified name, the longest matching server name first (so
    ``a_b`` wins over ``a`` for ``a_b_c``); None when no server's prefix matches."""
    best: tuple[str, str] | None = None
    for server in servers:
        prefix = server + separator
        longer = best is None or len(server) > len(best[0])
        if longer and qualified.startswith(prefix) and len(qualified) > len(prefix):
            best = (server, qualified[len(prefix) :])
    return best


def plan_reload(old: Sequence[ServerSpec], new: Sequence[ServerSpec]) -> Reload:
    """Which servers a reload from ``old`` to ``new`` adds, removes, restarts and leaves."""
    before = {spec.name: spec for spec in old}
    after = {spec.name: spec for spec in new}
    return Reload(
        added=tuple(name for name in after if name not in before),
        removed=tuple(name for name in before if name not in after),
        changed=tuple(name for name in after if name in before and before[name] != after[name]),
        unchanged=tuple(name for name in after if before.get(name) == after[name]),
    )


# -- one entry ----------------------------------------------------------------------------------


def _server(name: Any, entry: Any, environ: Mapping[str, str]) -> ServerSpec:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"server name {name!r}: use 1-64 letters, digits, '_', '-' or '.'")
    where = f"server {name!r}"
    if not isinstance(entry, Mapping):
        raise ValueError(f"{where}: an entry is a mapping, not {type(entry).__name__}")
    kind = entry.get("type")
    transport: Literal["stdio", "http", "sse"]
    if "url" in entry:
        if kind is not None and kind not in _HTTP_TYPES and kind != "sse":
            raise ValueError(f'{where}: key "type": {kind!r} is not an HTTP type')
        transport = "sse" if kind == "sse" else "http"
        allowed = _HTTP_KEYS
        if transport == "sse" and not _allows_legacy(entry.get("protocol", LEGACY_VERSION)):
            raise ValueError(
                f'{where}: key "protocol" must allow {LEGACY_VERSION}, the only version of '
                '"type": "sse" (the HTTP+SSE transport; leave "protocol" out to imply it)'
            )
    elif "command" in entry:
        if kind is not None and kind != "stdio":
            raise ValueError(f'{where}: key "type": {kind!r} with "command" (expected "stdio")')
        transport = "stdio"
        allowed = _STDIO_KEYS
    else:
        raise ValueError(f'{where}: needs "command" (stdio) or "url" (HTTP)')
    for key in entry:
        if key not in allowed and key not in CONNECT_KEYS and key not in FLEET_KEYS:
            if key in IGNORED_KEYS:
                continue
            other = " (an HTTP key)" if key in _HTTP_KEYS else ""
            other = " (a stdio key)" if key in _STDIO_KEYS else other
            raise ValueError(f"{where}: unknown key {key!r}{other}")
    for key in entry:
        if key in (_HTTP_ONLY if transport == "stdio" else _STDIO_ONLY):
            other = "HTTP" if transport == "stdio" else "stdio"
            raise ValueError(f'{where}: key "{key}" applies to {other} servers only')
    options = tuple(sorted((key, entry[key]) for key in entry if key in CONNECT_KEYS))
    start = entry.get("start")
    if start not in (None, "eager", "lazy"):
        raise ValueError(f'{where}: key "start": {start!r} (expected "eager" or "lazy")')
    idle = entry.get("idle_timeout")
    if idle is not None and (
        isinstance(idle, bool) or not isinstance(idle, (int, float)) or not 0 < idle < math.inf
    ):
        raise ValueError(f'{where}: key "idle_timeout": {idle!r} (expected seconds > 0)')
    if idle is not None and transport != "stdio":
        raise ValueError(f'{where}: key "idle_timeout" applies to stdio servers only')
    disabled = entry.get("disabled", False)
    if not isinstance(disabled, bool):
        raise ValueError(f'{where}: key "disabled": {disabled!r} (expected true or false)')
    tools = _tool_filter(entry.get("tools"), where)
    idle_timeout = None if idle is None else float(idle)
    if transport != "stdio":
        return ServerSpec(
            name,
            transport,
            url=expand(_string(entry["url"], where, "url"), environ, f'{where}: key "url"'),
            headers=_pairs(entry.get("headers"), environ, where, "headers"),
            options=options,
            start=start,
            idle_timeout=idle_timeout,
            disabled=disabled,
            tools=tools,
        )
    args = entry.get("args", [])
    if not isinstance(args, Sequence) or isinstance(args, str):
        raise ValueError(f'{where}: key "args": expected a list of strings')
    cwd = entry.get("cwd")
    if cwd is not None:
        cwd = expand(_string(cwd, where, "cwd"), environ, f'{where}: key "cwd"')
    return ServerSpec(
        name,
        "stdio",
        command=expand(
            _string(entry["command"], where, "command"), environ, f'{where}: key "command"'
        ),
        args=tuple(
            expand(_string(arg, where, "args"), environ, f'{where}: key "args"') for arg in args
        ),
        env=_pairs(entry.get("env"), environ, where, "env"),
        cwd=cwd,
        options=options,
        start=start,
        idle_timeout=idle_timeout,
        disabled=disabled,
        tools=tools,
    )


def _allows_legacy(protocol: Any) -> bool:
    """Whether a ``protocol`` value (a version or a list of them) names 2024-11-05."""
    if isinstance(protocol, str):
        return protocol == LEGACY_VERSION
    return isinstance(protocol, Sequence) and LEGACY_VERSION in list(protocol)


def _string(value: Any, where: str, key: str) -> str:
    if not isinstance(value, str) or (not value and key in ("command", "url")):
        raise ValueError(f"{where}: key {key!r}: expected a non-empty string, not {value!r}")
    return value


def _pairs(
    value: Any, environ: Mapping[str, str], where: str, key: str
) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, Mapping):
        raise ValueError(f"{where}: key {key!r}: expected a mapping of strings")
    pairs = []
    for name, item in value.items():
        if not isinstance(name, str) or not isinstance(item, str):
            raise ValueError(f"{where}: key {key!r}: {name!r} must map to a string")
        pairs.append((name, expand(item, environ, f"{where}: key {key!r} ({name})")))
    return tuple(sorted(pairs))  # sorted: the file's order is no change on reload


def _tool_filter(value: Any, where: str) -> ToolFilter:
    if value is None:
        return ToolFilter()
    if not isinstance(value, Mapping) or not set(value) <= {"allow", "deny"}:
        raise ValueError(f'{where}: key "tools": expected {{"allow": [...], "deny": [...]}}')
    lists = {}
    for key in ("allow", "deny"):
        patterns = value.get(key, [])
        if (
            isinstance(patterns, str)
            or not isinstance(patterns, Sequence)
            or not all(isinstance(pattern, str) for pattern in patterns)
        ):
            raise ValueError(f'{where}: key "tools": "{key}" must be a list of names or globs')
        lists[key] = tuple(patterns)
    return ToolFilter(lists["allow"], lists["deny"])
