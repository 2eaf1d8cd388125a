"""Runtime configuration, registration helpers, and the pure server modules
(request_state, pagination, inputs)."""

from __future__ import annotations

from typing import Any

import pytest

from snodo.protocol.dialects import SUPPORTED_VERSIONS
from snodo.protocol.errors import McpError
from snodo.server import CacheHint, Context, Runtime, request_state
from snodo.server.inputs import answer_problem, capability_object, declared, form_problem
from snodo.server.pagination import decode_cursor, encode_cursor, page_bounds
from snodo.server.request_state import arguments_digest, decode_state, encode_state
from snodo.server.runtime import compile_template
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
    rt._change_listeners.append(seen.append)
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


# -- request_state -------------------------------------------------------------------------


def test_request_state_round_trip_and_refusals() -> None:
    token = encode_state(b"secret", {"m": "tools/call", "a": {"k": [1, "x"]}})
    assert decode_state(b"secret", token) == {"m": "tools/call", "a": {"k": [1, "x"]}}
    for bad in (token + "x", token.replace(".", ""), "." + token.split(".")[1], None, "é.x"):
        with pytest.raises(McpError) as info:
            decode_state(b"secret", bad)
        assert info.value.code == -32602 and info.value.message == "Invalid requestState"
    with pytest.raises(McpError):
        decode_state(b"other", token)
    body = request_state._b64(b"[1, 2]")
    with pytest.raises(McpError):  # correctly signed, but not an object
        decode_state(b"secret", body + "." + request_state._mac(b"secret", body))


def test_request_state_encodes_big_integers() -> None:
    token = encode_state(b"s", {"a": {"k": 2**70}})
    assert decode_state(b"s", token)["a"]["k"] in (2**70, float(2**70))


def test_arguments_digest_is_order_independent_and_robust() -> None:
    assert arguments_digest({"a": 1, "b": 2}) == arguments_digest({"b": 2, "a": 1})
    assert arguments_digest({"a": 1}) != arguments_digest({"a": 2})
    assert arguments_digest({"n": 2**80}) != arguments_digest({"n": 2**80 + 1})
    assert isinstance(arguments_digest({"s": {1, 2}}), str)
    assert arguments_digest(None) != arguments_digest({})


# -- pagination ----------------------------------------------------------------------------


def test_cursor_round_trip() -> None:
    assert decode_cursor("t", encode_cursor("t", 5), 10) == 5
    assert decode_cursor("t", None, 10) == 0
    assert page_bounds("t", None, 7, 3) == (0, 3, encode_cursor("t", 3))
    assert page_bounds("t", encode_cursor("t", 6), 7, 3) == (6, 7, None)
    for bad in (encode_cursor("p", 1), encode_cursor("t", 11), "", "!!", 3, encode_cursor("t", -1)):
        with pytest.raises(McpError):
            decode_cursor("t", bad, 10)


# -- inputs --------------------------------------------------------------------------------


def test_elicitation_empty_object_means_form_only() -> None:
    """(m) elicitation {} = form only."""
    assert declared({"elicitation": {}}, ("elicitation", "form"))
    assert not declared({"elicitation": {}}, ("elicitation", "url"))
    assert not declared({"elicitation": {"url": {}}}, ("elicitation", "form"))
    assert declared({"elicitation": {"url": {}, "form": {}}}, ("elicitation", "url"))
    assert not declared({"elicitation": True}, ("elicitation", "form"))
    assert capability_object([("elicitation", "form"), ("elicitation", "url"), ("roots",)]) == {
        "elicitation": {"form": {}, "url": {}},
        "roots": {},
    }


SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 2, "maxLength": 5},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "score": {"type": "number"},
        "ok": {"type": "boolean"},
        "color": {"type": "string", "enum": ["red", "green"]},
        "size": {
            "type": "string",
            "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}],
        },
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "maxItems": 2},
    },
    "required": ["name"],
}


@pytest.mark.parametrize(
    ("content", "ok"),
    [
        ({"name": "Ada"}, True),
        (
            {
                "name": "Ada",
                "age": 36,
                "score": 1.5,
                "ok": False,
                "color": "red",
                "size": "s",
                "tags": ["a"],
            },
            True,
        ),
        ({}, False),
        ({"name": "A"}, False),
        ({"name": "Adaline"}, False),
        ({"name": "Ada", "age": 1.5}, False),
        ({"name": "Ada", "age": True}, False),
        ({"name": "Ada", "age": -1}, False),
        ({"name": "Ada", "score": "1"}, False),
        ({"name": "Ada", "ok": 1}, False),
        ({"name": "Ada", "color": "blue"}, False),
        ({"name": "Ada", "size": "m"}, False),
        ({"name": "Ada", "tags": ["c"]}, False),
        ({"name": "Ada", "tags": ["a", "b", "a"]}, False),
        ("Ada", False),
    ],
)
def test_form_content_is_checked_against_the_requested_schema(content: Any, ok: bool) -> None:
    assert (form_problem(SCHEMA, content) is None) is ok


def test_answer_shapes() -> None:
    url = {"mode": "url", "message": "m", "url": "https://x"}
    assert answer_problem("elicitation/create", url, {"action": "accept"}) is None
    assert answer_problem("elicitation/create", url, {"action": "maybe"}) is not None
    sample = {"role": "assistant", "content": [{"type": "text", "text": "x"}], "model": "m"}
    assert answer_problem("sampling/createMessage", {}, sample) is None
    assert answer_problem("sampling/createMessage", {}, {**sample, "model": 1}) is not None
    assert answer_problem("roots/list", {}, {"roots": []}) is None
    assert answer_problem("roots/list", {}, {"roots": "x"}) is not None
    assert answer_problem("roots/list", {}, None) is not None
