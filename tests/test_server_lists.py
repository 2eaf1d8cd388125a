"""Lists: pagination (l), cache hints (j), per-version shapes, and fresh results."""

from __future__ import annotations

from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest

from snodo.server import CacheHint, Runtime
from tests.support.server_support import (
    SESSION_VERSIONS,
    SI,
    STATELESS,
    VERSIONS,
    Conn,
    check_response,
    defined_fields_only,
    example_runtime,
)

ICONS = [{"src": "https://example.test/icon.png", "mimeType": "image/png", "sizes": ["48x48"]}]

LISTS = [
    ("tools/list", "tools"),
    ("resources/list", "resources"),
    ("resources/templates/list", "resourceTemplates"),
    ("prompts/list", "prompts"),
]


def big_runtime(n: int = 7, page_size: int = 3, **kw: Any) -> Runtime:
    rt = Runtime("lists", "1", page_size=page_size, **kw)
    for i in range(n):
        rt.add_tool(
            f"tool{i}",
            lambda a, ctx: "x",
            input_schema={
                "type": "object",
                "properties": {"q": {"type": "string"}},
                "required": ["q"],
            },
            icons=ICONS,
        )
        rt.add_resource(f"file:///r{i}.txt", lambda ctx: "x", name=f"r{i}", icons=ICONS)
        rt.add_resource_template(
            f"t{i}://{{id}}", lambda uri, v, ctx: "x", name=f"t{i}", icons=ICONS
        )
        rt.add_prompt(f"prompt{i}", lambda a, ctx: "x", arguments=["who"], icons=ICONS)
    return rt


def collect(conn: Conn, method: str, key: str) -> tuple[list[dict[str, Any]], int]:
    items: list[dict[str, Any]] = []
    cursor = None
    pages = 0
    while True:
        result = conn.ok(method, {"cursor": cursor} if cursor is not None else {})
        pages += 1
        items += result[key]
        cursor = result.get("nextCursor")
        if cursor is None:
            return items, pages


# -- paging --------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("method", "key"), LISTS)
def test_lists_are_paged_by_page_size_and_cursors_round_trip(
    version: str, method: str, key: str
) -> None:
    """(l) page size is the server's; nextCursor leads to the next page; absent on the last page."""
    conn = Conn(big_runtime(), version)
    first = conn.ok(method)
    assert len(first[key]) == 3 and isinstance(first["nextCursor"], str)
    items, pages = collect(conn, method, key)
    assert pages == 3
    assert len(items) == 7
    name = (
        "uriTemplate" if key == "resourceTemplates" else ("uri" if key == "resources" else "name")
    )
    assert len({item[name] for item in items}) == 7
    assert items[0] == first[key][0]


@pytest.mark.parametrize("version", VERSIONS)
def test_single_page_lists_have_no_next_cursor(version: str) -> None:
    result = Conn(big_runtime(n=2, page_size=100), version).ok("tools/list")
    assert [t["name"] for t in result["tools"]] == ["tool0", "tool1"]
    assert "nextCursor" not in result


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("cursor", ["garbage!", "", "Zm9vOjE", 17, ["x"], "dDo5OTk"])
def test_invalid_cursor_is_32602(version: str, cursor: Any) -> None:
    """(l) an invalid cursor gives -32602 (Zm9vOjE = "foo:1", dDo5OTk = "t:999" past the end)."""
    error = Conn(big_runtime(), version).err("tools/list", {"cursor": cursor})
    assert error["code"] == -32602 and error["message"] == "Invalid cursor"


@pytest.mark.parametrize("version", VERSIONS)
def test_a_null_cursor_is_the_first_page(version: str) -> None:
    conn = Conn(big_runtime(), version)
    assert conn.ok("tools/list", {"cursor": None}) == conn.ok("tools/list")


def test_a_cursor_from_one_list_is_refused_by_another() -> None:
    conn = Conn(big_runtime())
    cursor = conn.ok("tools/list")["nextCursor"]
    assert conn.err("prompts/list", {"cursor": cursor})["code"] == -32602
    assert conn.ok("tools/list", {"cursor": cursor})["tools"][0]["name"] == "tool3"


def test_a_cursor_past_a_shrunken_list_is_invalid_and_lists_follow_changes() -> None:
    """After removals a stale cursor beyond the end is -32602; the client restarts (l)."""
    rt = big_runtime()
    conn = Conn(rt)
    cursor = conn.ok("tools/list", {"cursor": conn.ok("tools/list")["nextCursor"]})["nextCursor"]
    for i in range(6):
        rt.remove_tool(f"tool{i}")
    assert conn.err("tools/list", {"cursor": cursor})["code"] == -32602
    assert [t["name"] for t in conn.ok("tools/list")["tools"]] == ["tool6"]
    rt.add_tool("late", lambda a, ctx: "x")
    assert [t["name"] for t in conn.ok("tools/list")["tools"]] == ["tool6", "late"]


# -- cache hints ---------------------------------------------------------------------------


def test_each_cacheable_result_carries_its_own_hint() -> None:
    """(j) ttlMs/cacheScope on discover, the four lists and resources/read, from the matching hint."""
    rt = big_runtime(
        n=1,
        cache_hints={
            "discover": CacheHint(1, "public"),
            "tools": CacheHint(2, "private"),
            "prompts": CacheHint(3, "public"),
            "resources": CacheHint(4, "public"),
        },
    )
    conn = Conn(rt)
    seen = {
        "server/discover": conn.ok("server/discover"),
        "tools/list": conn.ok("tools/list"),
        "prompts/list": conn.ok("prompts/list"),
        "resources/list": conn.ok("resources/list"),
        "resources/templates/list": conn.ok("resources/templates/list"),
        "resources/read": conn.ok("resources/read", {"uri": "file:///r0.txt"}),
    }
    assert {m: (r["ttlMs"], r["cacheScope"]) for m, r in seen.items()} == {
        "server/discover": (1, "public"),
        "tools/list": (2, "private"),
        "prompts/list": (3, "public"),
        "resources/list": (4, "public"),
        "resources/templates/list": (4, "public"),
        "resources/read": (4, "public"),
    }
    for other in (
        conn.ok("tools/call", {"name": "tool0", "arguments": {"q": "x"}}),
        conn.ok("prompts/get", {"name": "prompt0", "arguments": {"who": "me"}}),
    ):
        assert "ttlMs" not in other and "cacheScope" not in other
        assert other["resultType"] == "complete"


@pytest.mark.parametrize("version", SESSION_VERSIONS)
@pytest.mark.parametrize(("method", "key"), LISTS)
def test_session_era_lists_carry_no_2026_fields(version: str, method: str, key: str) -> None:
    """(a) session-era results have no ttlMs, cacheScope, resultType or serverInfo _meta."""
    result = Conn(big_runtime(cache_hints={"tools": CacheHint(9, "public")}), version).ok(method)
    assert set(result) == {key, "nextCursor"}


# -- shapes per version --------------------------------------------------------------------


@pytest.mark.parametrize(("method", "key"), LISTS)
def test_2025_06_18_definitions_drop_icons(method: str, key: str) -> None:
    """Session-era results drop fields the version's schema does not define (2025-06-18 has no icons)."""
    rt = big_runtime(n=1)
    old = Conn(rt, "2025-06-18").ok(method)[key][0]
    assert "icons" not in old
    for version in ("2025-11-25", STATELESS):
        assert Conn(rt, version).ok(method)[key][0]["icons"] == ICONS


def test_defined_fields_check_catches_extra_fields() -> None:
    """The schema helpers used on every response can fail: they reject what the schema rejects."""
    with pytest.raises(jsonschema.ValidationError):
        check_response(
            STATELESS, "tools/list", {"jsonrpc": "2.0", "id": 1, "result": {"tools": []}}
        )
    with pytest.raises(AssertionError):
        check_response(
            "2025-11-25",
            "tools/call",
            {"jsonrpc": "2.0", "id": 1, "result": {"content": [], "resultType": "complete"}},
        )
    tool = {"name": "t", "inputSchema": {"type": "object"}, "icons": ICONS}
    assert defined_fields_only("2025-06-18", "ListToolsResult", {"tools": [tool]}) == [
        "$.tools[0].icons"
    ]
    assert defined_fields_only("2025-11-25", "ListToolsResult", {"tools": [tool]}) == []


def test_tool_definitions_carry_what_was_registered() -> None:
    rt = Runtime("d", "1")

    @rt.tool(
        "lookup",
        title="Lookup",
        description="Find things",
        input_schema={"type": "object", "properties": {"q": {"type": "string"}}},
        output_schema={"type": "object", "properties": {"hits": {"type": "integer"}}},
        annotations={"readOnlyHint": True},
    )
    def _lookup(arguments: dict[str, Any], ctx: Any) -> dict[str, Any]:
        return {"hits": 0}

    tool = Conn(rt).ok("tools/list")["tools"][0]
    assert tool == {
        "name": "lookup",
        "title": "Lookup",
        "description": "Find things",
        "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
        "outputSchema": {"type": "object", "properties": {"hits": {"type": "integer"}}},
        "annotations": {"readOnlyHint": True},
    }


# -- fresh results -------------------------------------------------------------------------


def _mutate(value: Any) -> None:
    """Scribble over every dict and list inside ``value``."""
    if isinstance(value, dict):
        for key in list(value):
            _mutate(value[key])
        value["scribbled"] = True
        value.pop("name", None)
    elif isinstance(value, list):
        for item in value:
            _mutate(item)
        value.append("scribbled")


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("method", "key"), LISTS)
def test_mutating_a_list_result_never_changes_the_runtime(
    version: str, method: str, key: str
) -> None:
    """The client may mutate a result; the next result (and the Runtime's definitions) stay intact."""
    rt = big_runtime()
    conn = Conn(rt, version)
    first = conn.ok(method)
    again = conn.ok(method)
    assert first == again and first[key] is not again[key]
    _mutate(first)
    assert conn.ok(method) == again
    assert rt.catalog.tools["tool0"].definition["inputSchema"]["required"] == ["q"]


@pytest.mark.parametrize("version", VERSIONS)
def test_mutating_identity_and_capabilities_never_changes_the_runtime(version: str) -> None:
    rt = example_runtime()
    conn = Conn(rt, version)
    if version == STATELESS:
        first = conn.ok("server/discover")
        _mutate(first)
        second = conn.ok("server/discover")
        assert second["_meta"][SI]["name"] == "snodo-example"
        assert second["capabilities"]["tools"] == {"listChanged": True}
        call = conn.ok("tools/call", {"name": "echo", "arguments": {"text": "x"}})
        _mutate(call)
        assert (
            conn.ok("tools/call", {"name": "echo", "arguments": {"text": "x"}})["_meta"][SI]["name"]
            == "snodo-example"
        )
    else:
        assert conn.init_result is not None
        _mutate(conn.init_result)
        other = Conn(rt, version).init_result
        assert other is not None and other["serverInfo"]["name"] == "snodo-example"
        assert other["capabilities"]["tools"] == {"listChanged": True}
    assert rt.server_info["name"] == "snodo-example"
    info = rt.server_info
    info["name"] = "changed"
    assert rt.server_info["name"] == "snodo-example"
    caps = rt.capabilities
    caps["tools"]["listChanged"] = True
    assert rt.capabilities["tools"] == {"listChanged": True}


def test_prompt_description_and_arguments_are_fresh() -> None:
    rt = example_runtime()
    conn = Conn(rt)
    prompt = conn.ok("prompts/list")["prompts"][0]
    prompt["arguments"][0]["required"] = False
    got = conn.ok("prompts/get", {"name": "review", "arguments": {"name": "todo"}})
    got["description"] = "changed"
    assert conn.ok("prompts/list")["prompts"][0]["arguments"][0]["required"] is True
    assert (
        conn.ok("prompts/get", {"name": "review", "arguments": {"name": "todo"}})["description"]
        == "Review a note."
    )
