"""The conformance suite's client under test: snodo, driven by the suite's contract.

    MCP_CONFORMANCE_SCENARIO=tools_call MCP_CONFORMANCE_PROTOCOL_VERSION=2025-11-25 \
        python conformance/client.py http://localhost:PORT/mcp

The server URL is the last argument; the scenario, the protocol version (the client pins
``protocol=`` to it: the initialize handshake up to 2025-11-25, stateless on 2026-07-28) and the
optional JSON context come from the environment. Logs go to stderr. The exit status is 0 when the
scenario's steps ran, 1 when a step failed, 2 for a bad invocation. ``auth/*`` scenarios are
delegated to ``conformance/auth_scenarios.py``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's snodo

import snodo

log = logging.getLogger("conformance.client")

Scenario = Callable[[str, str, dict[str, Any]], None]
SCENARIOS: dict[str, Scenario] = {}


def scenario(*names: str) -> Callable[[Scenario], Scenario]:
    """Register a function for one or more scenario names."""

    def register(fn: Scenario) -> Scenario:
        for name in names:
            SCENARIOS[name] = fn
        return fn

    return register


def accept_with_defaults(params: dict[str, Any]) -> dict[str, Any]:
    """Form elicitation: accept, with every property's schema ``default`` (SEP-1034)."""
    schema = params.get("requestedSchema") or {}
    content = {
        name: prop["default"]
        for name, prop in (schema.get("properties") or {}).items()
        if isinstance(prop, dict) and "default" in prop
    }
    log.info("elicitation %r answered with defaults %r", params.get("message"), content)
    return {"action": "accept", "content": content}


def open_client(url: str, version: str, **options: Any) -> snodo.Client:
    """A snodo client for ``url``, pinned to ``version``."""
    client = snodo.connect(snodo.Http(url), protocol=version, timeout=20.0, **options)
    log.info("connected to %s at %s", url, client.version)
    return client


def tool_named(tools: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """The definition of tool ``name`` from a ``tools/list`` answer."""
    for tool in tools:
        if tool.get("name") == name:
            return tool
    raise LookupError(f"the server lists no tool {name!r}: {[t.get('name') for t in tools]}")


def call(client: snodo.Client, tool: dict[str, Any], arguments: dict[str, Any]) -> Any:
    """Call a tool by its listed definition and log the result."""
    result = client.call_tool(tool, arguments)
    log.info("%s -> %s", tool["name"], result)
    return result


# -- scenarios ---------------------------------------------------------------------------------


@scenario("initialize")
def initialize(url: str, version: str, context: dict[str, Any]) -> None:
    """Handshake and list the tools."""
    with open_client(url, version) as client:
        log.info("tools: %s", [t["name"] for t in client.list_tools()])


@scenario("tools_call")
def tools_call(url: str, version: str, context: dict[str, Any]) -> None:
    """``add_numbers(5, 3)``."""
    with open_client(url, version) as client:
        call(client, tool_named(client.list_tools(), "add_numbers"), {"a": 5, "b": 3})


@scenario("sse-retry")
def sse_retry(url: str, version: str, context: dict[str, Any]) -> None:
    """A tool whose SSE stream closes early: the client resumes with Last-Event-ID."""
    with open_client(url, version) as client:
        call(client, tool_named(client.list_tools(), "test_reconnection"), {})


@scenario("elicitation-sep1034-client-defaults")
def elicitation_defaults(url: str, version: str, context: dict[str, Any]) -> None:
    """A form elicitation answered with the schema's defaults."""
    with open_client(url, version, input_handlers={"form": accept_with_defaults}) as client:
        call(client, tool_named(client.list_tools(), "test_client_elicitation_defaults"), {})


@scenario("json-schema-ref-no-deref")
def list_only(url: str, version: str, context: dict[str, Any]) -> None:
    """Discover and list the tools; nothing may fetch the schema's network ``$ref``."""
    with open_client(url, version) as client:
        if client.session is None:
            client.discover()
        log.info("tools: %s", client.list_tools())


@scenario("request-metadata")
def list_and_call_all(url: str, version: str, context: dict[str, Any]) -> None:
    """Discover (2026-07-28), list the tools and call each with no arguments."""
    with open_client(url, version, input_handlers={"form": accept_with_defaults}) as client:
        if client.session is None:
            client.discover()
        for tool in client.list_tools():
            call(client, tool, {})


@scenario("sep-2322-client-request-state")
def request_state(url: str, version: str, context: dict[str, Any]) -> None:
    """Multi round-trip calls: requestState echoed, absent state omitted, no state leaks."""
    with open_client(url, version, input_handlers={"form": accept_with_defaults}) as client:
        tools = client.list_tools()
        for name in ("test_mrtr_echo_state", "test_mrtr_no_state", "test_mrtr_unrelated"):
            call(client, tool_named(tools, name), {})
        call(client, tool_named(tools, "test_mrtr_no_result_type"), {})


@scenario("http-standard-headers")
def standard_headers(url: str, version: str, context: dict[str, Any]) -> None:
    """Every method the scenario watches: lists, tools/call, resources/read, prompts/get."""
    with open_client(url, version) as client:
        if client.session is None:
            client.discover()
        for tool in client.list_tools():
            call(client, tool, {})
        for resource in client.list_resources():
            log.info("read %s -> %s", resource["uri"], client.read_resource(resource["uri"]))
        for prompt in client.list_prompts():
            log.info("prompt %s -> %s", prompt["name"], client.get_prompt(prompt["name"]))


@scenario("http-custom-headers")
def custom_headers(url: str, version: str, context: dict[str, Any]) -> None:
    """Replay the context's ``toolCalls`` verbatim (Mcp-Param-* mirroring)."""
    with open_client(url, version) as client:
        tools = client.list_tools()
        for planned in context.get("toolCalls", []):
            call(client, tool_named(tools, planned["name"]), planned.get("arguments") or {})


@scenario("http-invalid-tool-headers")
def invalid_tool_headers(url: str, version: str, context: dict[str, Any]) -> None:
    """Call every tool the client kept: the invalid x-mcp-header ones must have been dropped."""
    with open_client(url, version) as client:
        tools = client.list_tools()
        log.info("kept tools: %s", [t["name"] for t in tools])
        for tool in tools:
            arguments = {name: "us-west1" for name in tool["inputSchema"].get("required", [])}
            call(client, tool, arguments)


@scenario("json-schema-2020-12-preservation")
def schema_preservation(url: str, version: str, context: dict[str, Any]) -> None:
    """Echo the focal tool's inputSchema back exactly as the client received it."""
    with open_client(url, version) as client:
        tools = client.list_tools()
        focal = tool_named(tools, "json_schema_2020_12_tool")
        call(client, tool_named(tools, "json_schema_echo"), {"schema": focal["inputSchema"]})


# -- SEP-2640 skills (extension) --------------------------------------------------------------

SKILLS_EXTENSION = "io.modelcontextprotocol/skills"


class SkillRejected(Exception):
    """A skill file failed verification against its ``skills/list`` entry; it is not used."""


def frontmatter(text: str) -> dict[str, str]:
    """The ``key: value`` lines of a SKILL.md's leading ``---`` block (flat YAML scalars)."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        raise SkillRejected("SKILL.md has no frontmatter")
    fields: dict[str, str] = {}
    for line in lines[1:]:
        if line.strip() == "---":
            return fields
        key, sep, value = line.partition(":")
        if not sep:
            raise SkillRejected(f"unreadable frontmatter line {line!r}")
        fields[key.strip()] = value.strip().strip("'\"")
    raise SkillRejected("SKILL.md frontmatter is not closed")


def read_verified(client: snodo.Client, file: dict[str, Any]) -> str:
    """Read one listed skill file and check its size and sha256 digest before using it."""
    result = client.read_resource(file["uri"])
    assert isinstance(result, dict)
    text = str(next(c["text"] for c in result["contents"] if c.get("uri") == file["uri"]))
    data = text.encode()
    if "size" in file and len(data) != file["size"]:
        raise SkillRejected(f"{file['uri']}: {len(data)} bytes, the entry says {file['size']}")
    algorithm, _, expected = str(file.get("digest", "")).partition(":")
    if algorithm != "sha256" or hashlib.sha256(data).hexdigest() != expected:
        raise SkillRejected(f"{file['uri']}: digest mismatch ({file.get('digest')!r})")
    return text


def load_skill(client: snodo.Client, entry: dict[str, Any]) -> dict[str, str]:
    """Load one skill on demand: SKILL.md first (verified, frontmatter compared field by field
    with the entry), then its other files (verified); nothing is used before it is verified."""
    files = {f["uri"]: f for f in entry.get("resources", [])}
    skill_md = files.get(entry["uri"], {"uri": entry["uri"]})
    body = read_verified(client, skill_md)
    declared = frontmatter(body)
    for key, value in (entry.get("frontmatter") or {}).items():
        if declared.get(key) != value:
            raise SkillRejected(f"frontmatter {key!r} is {declared.get(key)!r}, entry {value!r}")
    loaded = {entry["uri"]: body}
    for uri, file in files.items():
        if uri != entry["uri"]:
            loaded[uri] = read_verified(client, file)
    log.info("loaded skill %s (%d files)", entry["uri"], len(loaded))
    return loaded


def list_skills(client: snodo.Client) -> list[dict[str, Any]]:
    """``skills/list`` (offered by servers declaring the skills extension)."""
    result = client.request("skills/list", {})
    assert isinstance(result, dict)
    skills: list[dict[str, Any]] = result.get("skills", [])
    log.info("skills: %s", [s.get("uri") for s in skills])
    return skills


@scenario("sep-2640-client-no-prefetch")
def skills_no_prefetch(url: str, version: str, context: dict[str, Any]) -> None:
    """List the skills; no file is read until a skill is loaded."""
    with open_client(url, version) as client:
        list_skills(client)


@scenario(
    "sep-2640-client-verify-digest",
    "sep-2640-client-verify-size",
    "sep-2640-client-verify-frontmatter",
)
def skills_load(url: str, version: str, context: dict[str, Any]) -> None:
    """Load every listed skill; a file failing verification aborts the load (exit 1)."""
    with open_client(url, version) as client:
        for entry in list_skills(client):
            load_skill(client, entry)


# -- entry point -------------------------------------------------------------------------------


def main(argv: list[str]) -> int:
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    name = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    version = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION", "2025-11-25")
    raw_context = os.environ.get("MCP_CONFORMANCE_CONTEXT")
    if len(argv) < 2 or not name:
        print("usage: MCP_CONFORMANCE_SCENARIO=NAME client.py SERVER_URL", file=sys.stderr)
        return 2
    url = argv[-1]
    context: dict[str, Any] = json.loads(raw_context) if raw_context else {}
    log.info("scenario %s at %s against %s", name, version, url)
    if name.startswith("auth/"):
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import auth_scenarios

        return auth_scenarios.run(url, name, version, context)
    handler = SCENARIOS.get(name)
    if handler is None:
        log.error("unknown scenario %r", name)
        return 1
    try:
        handler(url, version, context)
    except Exception:
        log.exception("scenario %s failed", name)
        return 1
    log.info("scenario %s done", name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
