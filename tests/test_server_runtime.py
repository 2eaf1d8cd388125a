"""Runtime configuration, registration helpers, and the pure server modules
(request_state, pagination, inputs)."""

from __future__ import annotations

from typing import Any

import pytest

from snodo.protocol.dialects import SUPPORTED_VERSIONS
from snodo.server import CacheHint, Context, Runtime
from snodo.server.catalog import compile_template
from tests.support.server_support import Conn, example_module, example_runtime

# -- construction --------------------------------------------------------------------------


def test_defaults() -> None:
    rt = Runtime()
    assert rt.enabled_versions == SUPPORTED_VERSIONS
    assert rt.server_info == {"name": "snodo-server", "version": "0.1.0"}
    assert rt.instructions is None and rt.page_size == 100
    assert all(hint == CacheHint(0, "private") for hint in rt.cache_hints.values())
    assert len(rt.state_secret) == 32 and rt.state_secret != Runtime().state_secret
    assert rt.capabilities == {}


@pytest.mark.parametrize(
    "versions", [[], ["2024-11-05"], ["2026-07-28", "2026-07-28"], ["2025-06-18", "nope"]]
)
def test_versions_must_be_a_non_empty_subset_of_the_supported_ones(versions: list[str]) -> None:
    with pytest.raises(ValueError):
        Runtime(versions=versions)


def test_versions_keep_preference_order_and_accept_a_single_string() -> None:
    assert Runtime(versions=["2025-06-18", "2026-07-28"]).enabled_versions == (
        "2025-06-18",
        "2026-07-28",
    )
    assert Runtime(versions="2025-11-25").enabled_versions == ("2025-11-25",)


@pytest.mark.parametrize("page_size", [0, -1, True, 2.5])
def test_page_size_must_be_positive(page_size: Any) -> None:
    with pytest.raises(ValueError):
        Runtime(page_size=page_size)


def test_cache_hints_are_validated() -> None:
    with pytest.raises(ValueError):
        Runtime(cache_hints={"lists": CacheHint()})
    with pytest.raises(TypeError):
        Runtime(cache_hints={"tools": (1, "public")})  # type: ignore[dict-item]
    with pytest.raises(ValueError):
        CacheHint(-1)
    with pytest.raises(ValueError):
        CacheHint(1, "shared")  # type: ignore[arg-type]
    rt = Runtime(cache_hints={"tools": CacheHint(5, "public")})
    assert (
        rt.cache_hints["tools"] == CacheHint(5, "public")
        and rt.cache_hints["prompts"] == CacheHint()
    )


def test_capabilities_follow_registrations() -> None:
    rt = Runtime()
    rt.add_tool("t", lambda a, ctx: "")
    assert rt.capabilities == {"tools": {"listChanged": True}}
    assert Runtime(subscriptions=False).capabilities == {}
    rt.add_resource_template("x://{y}", lambda u, v, ctx: "", name="x")
    rt.add_prompt("p", lambda a, ctx: "")
    rt.completion(lambda *a: [])
    assert rt.capabilities == {
        "tools": {"listChanged": True},
        "resources": {"subscribe": True, "listChanged": True},
        "prompts": {"listChanged": True},
        "completions": {},
    }
    rt.remove_tool("t")
    rt.remove_resource_template("x://{y}")
    rt.remove_prompt("p")
    rt.remove_completion()
    assert rt.capabilities == {}
    with pytest.raises(KeyError):
        rt.remove_tool("t")


# -- registration --------------------------------------------------------------------------


def test_tool_decorator_forms_and_docstring_descriptions() -> None:
    rt = Runtime()

    @rt.tool
    def bare(arguments: dict[str, Any], ctx: Context) -> str:
        """First paragraph.

        Details that stay out of the description.
        """
        return "bare"

    @rt.tool("renamed", description="explicit")
    def named(arguments: dict[str, Any], ctx: Context) -> str:
        """Ignored."""
        return "named"

    rt.add_tool("plain", lambda a, ctx: "plain")
    tools = {t["name"]: t for t in Conn(rt).ok("tools/list")["tools"]}
    assert tools["bare"]["description"] == "First paragraph."
    assert tools["renamed"]["description"] == "explicit"
    assert "description" not in tools["plain"]
    assert tools["plain"]["inputSchema"] == {"type": "object"}
    assert bare({}, None) == "bare"  # type: ignore[arg-type]  # decorators return the function


def test_replacing_a_tool_takes_effect() -> None:
    rt = Runtime()
    rt.add_tool("t", lambda a, ctx: "one")
    conn = Conn(rt)
    assert conn.ok("tools/call", {"name": "t"})["content"][0]["text"] == "one"
    conn.ok("tools/list")
    rt.add_tool("t", lambda a, ctx: "two", description="new")
    assert conn.ok("tools/call", {"name": "t"})["content"][0]["text"] == "two"
    assert conn.ok("tools/list")["tools"] == [
        {"name": "t", "description": "new", "inputSchema": {"type": "object"}}
    ]


@pytest.mark.parametrize(
    "schema", [{"type": "array"}, {"properties": {}}, {"type": "object", "required": "x"}]
)
def test_input_schema_must_be_an_object_schema(schema: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        Runtime().add_tool("t", lambda a, ctx: "", input_schema=schema)


def test_registered_schemas_are_copied() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"a": {"type": "string"}}}
    rt = Runtime()
    rt.add_tool("t", lambda a, ctx: "", input_schema=schema)
    schema["properties"]["b"] = {}
    assert Conn(rt).ok("tools/list")["tools"][0]["inputSchema"]["properties"] == {
        "a": {"type": "string"}
    }


def test_prompt_arguments_accept_names_and_dicts() -> None:
    rt = Runtime()
    rt.add_prompt(
        "p", lambda a, ctx: "", arguments=["who", {"name": "tone", "description": "optional"}]
    )
    prompt = Conn(rt).ok("prompts/list")["prompts"][0]
    assert prompt["arguments"] == [
        {"name": "who", "required": True},
        {"name": "tone", "description": "optional"},
    ]
    with pytest.raises(ValueError):
        rt.add_prompt("q", lambda a, ctx: "", arguments=[{"description": "nameless"}])


@pytest.mark.parametrize(
    "template", ["x://{+path}", "x://{a,b}", "x://{a}/{a}", "x://{?q}", "x://{open"]
)
def test_only_level_1_templates_are_accepted(template: str) -> None:
    with pytest.raises(ValueError):
        compile_template(template)


def test_template_compilation() -> None:
    pattern, names = compile_template("db://{schema}/tables/{table}.json")
    assert names == ("schema", "table")
    assert pattern.fullmatch("db://main/tables/users.json") is not None
    assert pattern.fullmatch("db://main/tables/a/b.json") is None
    assert pattern.fullmatch("db://main/tables/users.jsonx") is None


def test_change_listeners_are_the_hook_for_list_changed() -> None:
    rt = Runtime()
    seen: list[str] = []
    rt.add_change_listener(seen.append)
    rt.add_tool("t", lambda a, ctx: "")
    rt.add_resource("a://b", lambda ctx: "")
    rt.add_prompt("p", lambda a, ctx: "")
    rt.remove_tool("t")
    assert seen == ["tools", "resources", "prompts", "tools"]


def test_example_runtime_module_exposes_build_and_runtime() -> None:
    module = example_module()
    assert isinstance(module.runtime, Runtime)
    assert module.build() is not module.runtime
    assert {t["name"] for t in Conn(example_runtime()).ok("tools/list")["tools"]} == {
        "echo",
        "add",
        "slow_count",
        "deploy",
        "confirm_both",
        "summarize",
        "roots",
        "busy",
    }


def test_snodo_server_loads_its_names_lazily_and_dispatch_stays_the_function() -> None:
    """``import snodo.server`` loads no dispatch machinery; ``snodo.server.dispatch`` is the
    function whichever server module was imported first (none is named like it)."""
    import subprocess
    import sys

    code = (
        "import sys, snodo.server\n"
        "assert 'snodo.server.dispatcher' not in sys.modules, 'dispatch loaded eagerly'\n"
        "import snodo.server.http_server, snodo.server.stdio_server\n"
        "from snodo.server import dispatch, Runtime\n"
        "assert callable(dispatch) and dispatch.__name__ == 'dispatch', dispatch\n"
        "assert snodo.server.dispatch is dispatch\n"
        "print('ok', Runtime.__name__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok Runtime"
