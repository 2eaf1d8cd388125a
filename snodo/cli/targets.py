"""Which server a ``snodo`` command talks to: a name from an ``mcpServers`` config, or an ad
hoc ``--stdio``/``--http`` target. The config is read with ``snodo.protocol.fleet_config``
(the fleet's own rules); this module only finds the file and picks the entry.

Config locations, the first that exists: ``--config FILE``, ``$SNODO_CONFIG``, ``./mcp.json``,
``./.mcp.json``, ``$XDG_CONFIG_HOME/snodo/mcp.json`` (``~/.config/snodo/mcp.json``).
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from snodo.cli.arguments import UsageError

__all__ = [
    "Resolved",
    "TargetOptions",
    "config_candidates",
    "find_config",
    "load_config",
    "parse_env",
    "parse_header",
    "parse_protocols",
    "resolve",
]


@dataclass(frozen=True)
class TargetOptions:
    """The target options of the command line, as given."""

    name: str | None = None
    config: str | None = None
    stdio: str | None = None
    http: str | None = None
    env: Sequence[str] = ()
    cwd: str | None = None
    headers: Sequence[str] = ()
    bearer_env: str | None = None
    protocol: Sequence[str] = ()
    timeout: float | None = None


@dataclass(frozen=True)
class Resolved:
    """A target for ``snodo.connect`` with its keywords, and a short name for messages."""

    target: Any
    options: dict[str, Any] = field(default_factory=dict)
    label: str = ""


def config_candidates(environ: Mapping[str, str], cwd: Path, home: Path) -> list[Path]:
    """The default config locations, in the order they are tried."""
    found = []
    if environ.get("SNODO_CONFIG"):
        found.append(Path(environ["SNODO_CONFIG"]).expanduser())
    found += [cwd / "mcp.json", cwd / ".mcp.json"]
    xdg = environ.get("XDG_CONFIG_HOME")
    found.append((Path(xdg) if xdg else home / ".config") / "snodo" / "mcp.json")
    return found


def find_config(explicit: str | None, environ: Mapping[str, str] | None = None) -> Path:
    """``--config FILE`` (it must exist), else the first default location that exists."""
    if explicit is not None:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise UsageError(f"--config {explicit}: no such file")
        return path
    candidates = config_candidates(
        os.environ if environ is None else environ, Path.cwd(), Path.home()
    )
    for path in candidates:
        if path.is_file():
            return path
    raise UsageError(
        "no mcpServers config found (looked for "
        + ", ".join(str(p) for p in candidates)
        + "); pass --config FILE, or --stdio/--http"
    )


def load_config(path: Path) -> dict[str, Any]:
    """The config file's JSON object."""
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise UsageError(f"{path}: {error.strerror or error}") from None
    except ValueError as error:
        raise UsageError(f"{path}: not JSON: {error}") from None
    if not isinstance(config, dict):
        raise UsageError(f"{path}: expected a JSON object")
    return config


def parse_env(words: Sequence[str]) -> dict[str, str]:
    """``--env K=V`` words as a mapping."""
    env = {}
    for word in words:
        key, sep, value = word.partition("=")
        if not sep or not key:
            raise UsageError(f"--env: expected K=V, got {word!r}")
        env[key] = value
    return env


def parse_header(word: str) -> tuple[str, str]:
    """``--header "K: V"`` (or ``K=V``) as a pair."""
    for sep in (":", "="):
        key, found, value = word.partition(sep)
        if found and key.strip():
            return key.strip(), value.strip()
    raise UsageError(f"--header: expected 'Name: value', got {word!r}")


def parse_protocols(words: Sequence[str]) -> list[str]:
    """``--protocol`` values (repeatable, or comma lists) checked against ``ALL_VERSIONS``."""
    from snodo.protocol.dialects import ALL_VERSIONS

    versions = [v.strip() for word in words for v in word.split(",") if v.strip()]
    for version in versions:
        if version not in ALL_VERSIONS:
            raise UsageError(
                f"--protocol: unknown version {version!r} (known: {', '.join(ALL_VERSIONS)})"
            )
    return versions


def _bearer(variable: str, environ: Mapping[str, str]) -> str:
    token = environ.get(variable)
    if not token:
        raise UsageError(f"--bearer-env {variable}: the variable is not set")
    return token


def resolve(given: TargetOptions, environ: Mapping[str, str] | None = None) -> Resolved:
    """The target and ``connect`` keywords the options name. Ad hoc options and a config
    name exclude each other; ``--protocol`` and ``--timeout`` apply to either."""
    from snodo.transports.targets import Http, Sse, Stdio

    environ = os.environ if environ is None else environ
    adhoc = [flag for flag, value in (("--stdio", given.stdio), ("--http", given.http)) if value]
    if len(adhoc) > 1:
        raise UsageError("--stdio and --http exclude each other")
    if adhoc and given.name is not None:
        raise UsageError(f"a server name ({given.name!r}) and {adhoc[0]} exclude each other")
    if not adhoc and given.name is None:
        raise UsageError("no server: give a server name from the config, --stdio or --http")
    if given.stdio is None and (given.env or given.cwd is not None):
        raise UsageError("--env and --cwd need --stdio")
    if given.http is None and (given.headers or given.bearer_env):
        raise UsageError("--header and --bearer-env need --http")
    options: dict[str, Any] = {}
    target: Any
    if given.stdio is not None:
        try:
            words = shlex.split(given.stdio)
        except ValueError as error:
            raise UsageError(f"--stdio: {error}") from None
        if not words:
            raise UsageError("--stdio: no command")
        target = Stdio(words[0], words[1:])
        label = given.stdio if len(given.stdio) <= 40 else given.stdio[:39] + "…"
        if given.env:
            options["env"] = parse_env(given.env)
        if given.cwd is not None:
            options["cwd"] = given.cwd
    elif given.http is not None:
        target = Http(given.http)
        label = given.http
        headers = dict(parse_header(word) for word in given.headers)
        if given.bearer_env:
            headers["authorization"] = "Bearer " + _bearer(given.bearer_env, environ)
        if headers:
            options["headers"] = headers
    else:
        from snodo.protocol.fleet_config import parse_config

        assert given.name is not None
        path = find_config(given.config, environ)
        try:
            specs = parse_config(load_config(path), environ)
        except ValueError as error:
            raise UsageError(f"{path}: {error}") from None
        spec = next((s for s in specs if s.name == given.name), None)
        if spec is None:
            names = ", ".join(s.name for s in specs) or "none"
            raise UsageError(f"no server {given.name!r} in {path} (servers: {names})")
        if spec.transport == "stdio":
            target = Stdio(spec.command or "", list(spec.args))
        else:
            target = (Sse if spec.transport == "sse" else Http)(spec.url or "")
        options = spec.connect_options()
        options["name"] = spec.name
        label = spec.name
    if given.protocol:
        versions = parse_protocols(given.protocol)
        options["protocol"] = versions[0] if len(versions) == 1 else versions
    if given.timeout is not None:
        options["timeout"] = given.timeout
    return Resolved(target, options, label)
