"""MCP HTTP header policy (reference (f) "Request headers by era", "Value encoding (used by
Mcp-Name and Mcp-Param-*)", "x-mcp-header"; Elixir notes 1c "Transport policy" and "Headers the
transport owns"; seed "Transport behavior • HTTP"). Interop: the official Python SDK's server-side
checks (``mcp.shared.inbound``) accept what these functions produce."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp.shared import inbound

from snodo.protocol.dialects import V2025_06_18, V2025_11_25, V2026_07_28, Dialect
from snodo.protocol.errors import McpError
from snodo.protocol.headers import (
    MAX_SAFE_INTEGER,
    SENTINEL_PREFIX,
    SENTINEL_SUFFIX,
    TRANSPORT_HEADERS,
    InvalidToolHeaders,
    ParamHeader,
    check_user_headers,
    decode_header_value,
    encode_header_value,
    filter_tools,
    mcp_headers,
    safe_header_value,
    stream_headers,
    tool_param_headers,
)
from snodo.protocol.meta import CLIENT_CAPABILITIES_KEY, PROTOCOL_VERSION_KEY

SECRET = "s3cr3t-value-never-in-errors"
_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=40)


# --- value encoding ----------------------------------------------------------------------------


def test_plain_values_are_sent_as_they_are() -> None:
    """Step 1: a string as is, an integer in decimal."""
    assert encode_header_value("us-west1") == "us-west1"
    assert encode_header_value("a b") == "a b"
    assert encode_header_value(42) == "42"
    assert encode_header_value(-7) == "-7"
    assert encode_header_value(0) == "0"


def test_booleans_are_true_and_false_not_digits() -> None:
    """Step 1: a boolean as true/false (bool is an int subclass in Python: checked first)."""
    assert encode_header_value(True) == "true"
    assert encode_header_value(False) == "false"


def test_the_digest_examples_encode_exactly() -> None:
    """Step 3 examples: "Hello, 世界" and " padded "."""
    assert encode_header_value("Hello, 世界") == "=?base64?SGVsbG8sIOS4lueVjA==?="
    assert encode_header_value(" padded ") == "=?base64?IHBhZGRlZCA=?="


@pytest.mark.parametrize(
    "value",
    ["tab\there", "line\nbreak", "nul\x00", "del\x7f", "é", " lead", "trail ", "\t"],
)
def test_control_non_ascii_and_edge_whitespace_use_the_sentinel(value: str) -> None:
    """Step 2: non-printable-ASCII (tab included), non-ASCII, or whitespace at either end."""
    encoded = encode_header_value(value)
    assert encoded.startswith(SENTINEL_PREFIX) and encoded.endswith(SENTINEL_SUFFIX)
    assert decode_header_value(encoded) == value


@pytest.mark.parametrize("value", ["=?base64?abc?=", "=?base64??=", "=?BASE64?x?=", "=?base64?="])
def test_a_value_that_looks_like_a_sentinel_is_encoded(value: str) -> None:
    """Step 2: a value starting with =?base64? and ending with ?= is itself encoded (also in
    other cases or overlapping, which is always safe) so it survives decoding unchanged."""
    encoded = encode_header_value(value)
    assert encoded != value
    assert decode_header_value(encoded) == value


def test_the_empty_string_stays_empty() -> None:
    """SEP-2243 table: an empty string gives an empty header value."""
    assert encode_header_value("") == ""


def test_other_types_are_refused() -> None:
    """Only str, int and bool have a header form (number is not an allowed type)."""
    with pytest.raises(TypeError):
        encode_header_value(1.5)  # type: ignore[arg-type]


def test_decoding_leaves_plain_values_alone() -> None:
    """A server decodes only the sentinel form."""
    assert decode_header_value("plain value") == "plain value"
    assert decode_header_value("=?base64?=") == "=?base64?="  # too short to hold a payload


@pytest.mark.parametrize(
    "value",
    [
        "=?base64?not base64?=",
        "=?base64?SGVsbG8?=",  # missing padding
        "=?base64?SGVsbG9=?=",  # non-zero pad bits: not canonical
        "=?base64?" + base64.b64encode(b"\xff\xfe").decode() + "?=",  # not UTF-8
        "=?base64?é?=",
    ],
)
def test_decoding_a_broken_sentinel_is_a_value_error(value: str) -> None:
    """Invalid base64 or UTF-8 inside a sentinel is an error, never a silent value."""
    with pytest.raises(ValueError):
        decode_header_value(value)


@settings(max_examples=300)
@given(value=_text)
def test_encoding_round_trips_and_is_always_printable_ascii(value: str) -> None:
    """Any text survives encode then decode, and the header form is printable ASCII with no
    whitespace at either end (so no HTTP stack can alter it)."""
    encoded = encode_header_value(value)
    assert decode_header_value(encoded) == value
    assert all(0x20 <= ord(c) <= 0x7E for c in encoded)
    assert encoded == encoded.strip(" ")


@settings(max_examples=300)
@given(value=_text)
def test_the_sdk_decodes_our_encoding_and_we_decode_the_sdks(value: str) -> None:
    """Interop with the official Python SDK's codec, both directions."""
    assert inbound.decode_header_value(encode_header_value(value)) == value
    assert decode_header_value(inbound.encode_header_value(value)) == value


# --- safe values and user headers ------------------------------------------------------------------


@pytest.mark.parametrize("value", ["", "abc", "a b", "tab\there", "obs-text \xe9\xff", "!~"])
def test_field_values_of_vchar_sp_htab_and_obs_text_are_safe(value: str) -> None:
    """RFC 9110 field-value: VCHAR, SP, HTAB and obs-text."""
    assert safe_header_value(value)


@pytest.mark.parametrize("value", ["a\rb", "a\nb", "a\x00b", "\x01", "\x1f", "\x7f", "€", "\r\n"])
def test_cr_lf_nul_other_controls_and_wide_characters_are_unsafe(value: str) -> None:
    """CR, LF and NUL split or smuggle headers; other controls and DEL are invalid field
    values; a character above U+00FF has no single-octet form."""
    assert not safe_header_value(value)


def test_user_headers_come_back_with_lower_case_names() -> None:
    """check_user_headers returns the headers to send, names lower-cased."""
    assert check_user_headers(
        {"X-Tenant": "acme", "Authorization": "Bearer t"}, token_provider=False
    ) == {"x-tenant": "acme", "authorization": "Bearer t"}


def _refusal(headers: dict[str, Any], *, token_provider: bool = False) -> McpError:
    with pytest.raises(McpError) as caught:
        check_user_headers(headers, token_provider=token_provider)
    error = caught.value
    assert error.code == -32000 and error.kind == "transport"
    assert SECRET not in str(error) and SECRET not in repr(error)
    return error


@pytest.mark.parametrize("name", sorted(TRANSPORT_HEADERS))
def test_transport_owned_headers_are_refused_in_any_case(name: str) -> None:
    """Elixir notes 1c: host, content-type, content-length, transfer-encoding, connection (and
    the MCP and negotiation headers) are the transport's, refused before anything is sent."""
    for spelled in (name, name.upper(), name.title()):
        error = _refusal({spelled: SECRET})
        assert error.cause == ("invalid_header", spelled)
        assert spelled in error.message


def test_the_brief_list_of_transport_headers_is_covered() -> None:
    """Every header the brief names as transport-owned is in the refused set."""
    named = {
        "host",
        "content-type",
        "content-length",
        "transfer-encoding",
        "connection",
        "accept",
        "accept-encoding",
        "mcp-protocol-version",
        "mcp-session-id",
        "mcp-method",
        "mcp-name",
    }
    assert named <= TRANSPORT_HEADERS


def test_mcp_param_headers_are_refused() -> None:
    """Mcp-Param-* come from the tool schema, never from the caller."""
    error = _refusal({"Mcp-Param-Region": SECRET})
    assert error.cause == ("invalid_header", "Mcp-Param-Region")


def test_authorization_is_refused_only_with_a_token_provider() -> None:
    """Seed "Authorization": with a token provider, authorization is the provider's."""
    assert check_user_headers({"authorization": "Bearer x"}, token_provider=False)
    error = _refusal({"Authorization": SECRET}, token_provider=True)
    assert error.cause == ("invalid_header", "Authorization")


@pytest.mark.parametrize("name", ["", "x tenant", "x:tenant", "x\r\ny", "tenänt", "x\x00"])
def test_names_that_are_not_tokens_are_refused(name: str) -> None:
    """A header name is an RFC 9110 token."""
    assert _refusal({name: SECRET}).cause == ("invalid_header", name)


@pytest.mark.parametrize("value", [f"{SECRET}\r\nX-Evil: 1", f"{SECRET}\n", f"{SECRET}\x00", 42])
def test_unsafe_values_are_refused_without_showing_them(value: Any) -> None:
    """Elixir notes 1c: any value containing CR, LF or NUL is refused with -32000; the error
    names the header and never the value."""
    error = _refusal({"X-Tenant": value})
    assert "X-Tenant" in error.message
    assert error.cause == ("invalid_header", "X-Tenant")


def test_one_name_twice_in_different_cases_is_refused() -> None:
    """Two spellings of one header would silently lose one value."""
    assert _refusal({"X-A": "1", "x-a": SECRET}).cause == ("invalid_header", "x-a")


# --- x-mcp-header annotations ------------------------------------------------------------------


def _tool(properties: dict[str, Any], **schema: Any) -> dict[str, Any]:
    return {
        "name": "search",
        "inputSchema": {"type": "object", "properties": properties, **schema},
    }


def test_annotations_are_read_with_their_paths_in_document_order() -> None:
    """Nested objects are fine: the path is the chain of property names."""
    tool = _tool(
        {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "opts": {
                "type": "object",
                "properties": {
                    "priority": {"type": "integer", "x-mcp-header": "Priority"},
                    "dry": {"type": "boolean", "x-mcp-header": "Dry-Run"},
                },
            },
            "query": {"type": "string"},
        }
    )
    assert tool_param_headers(tool) == (
        ParamHeader("Region", ("region",), "string"),
        ParamHeader("Priority", ("opts", "priority"), "integer"),
        ParamHeader("Dry-Run", ("opts", "dry"), "boolean"),
    )
    assert tool_param_headers(tool)[0].header == "Mcp-Param-Region"


def test_method_is_an_allowed_annotation_name() -> None:
    """Digest: "x-mcp-header": "Method" is allowed; it produces Mcp-Param-Method."""
    (param,) = tool_param_headers(_tool({"m": {"type": "string", "x-mcp-header": "Method"}}))
    assert param.header == "Mcp-Param-Method"


def test_a_property_named_properties_is_a_property() -> None:
    """Inside "properties" the keys are names, not keywords."""
    tool = _tool(
        {
            "properties": {
                "type": "object",
                "properties": {"items": {"type": "string", "x-mcp-header": "Items"}},
            }
        }
    )
    assert tool_param_headers(tool) == (ParamHeader("Items", ("properties", "items"), "string"),)


def test_json_data_keywords_are_not_searched() -> None:
    """default, const, enum and examples hold data: an "x-mcp-header" key there is not an
    annotation."""
    tool = _tool(
        {
            "cfg": {
                "type": "object",
                "default": {"x-mcp-header": "Nope"},
                "examples": [{"x-mcp-header": "Nope"}],
                "enum": [{"x-mcp-header": "Nope"}],
                "const": {"x-mcp-header": "Nope"},
            }
        }
    )
    assert tool_param_headers(tool) == ()


def test_a_tool_without_an_input_schema_has_no_headers() -> None:
    """Nothing to mirror."""
    assert tool_param_headers({"name": "t"}) == ()
    assert tool_param_headers({"name": "t", "inputSchema": True}) == ()


def _invalid(tool: dict[str, Any]) -> str:
    with pytest.raises(InvalidToolHeaders) as caught:
        tool_param_headers(tool)
    assert isinstance(caught.value, ValueError)
    return caught.value.reason


@pytest.mark.parametrize(
    "name",
    ["", "Two Words", "a:b", "Région", "tab\t", "nl\n", "nul\x00", 7, None],
    ids=["empty", "space", "colon", "non-ascii", "tab", "newline", "nul", "int", "null"],
)
def test_names_that_are_not_non_empty_tokens_are_invalid(name: Any) -> None:
    """Valid only when non-empty, an RFC 9110 token, with no control characters."""
    _invalid(_tool({"p": {"type": "string", "x-mcp-header": name}}))


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "number"},
        {"type": "object"},
        {"type": "array"},
        {"type": "null"},
        {"type": ["string", "null"]},
        {"enum": ["a", "b"]},
        {"const": "a"},
        {},
    ],
    ids=["number", "object", "array", "null", "type-array", "enum", "const", "untyped"],
)
def test_only_one_primitive_type_string_may_carry_an_annotation(schema: dict[str, Any]) -> None:
    """DECIDE: only "integer", "string" or "boolean" as a single type string."""
    _invalid(_tool({"p": {**schema, "x-mcp-header": "P"}}))


def test_names_must_be_unique_ignoring_case() -> None:
    """Unique within the inputSchema, compared case-insensitively, nested ones included."""
    reason = _invalid(
        _tool(
            {
                "a": {"type": "string", "x-mcp-header": "Region"},
                "o": {
                    "type": "object",
                    "properties": {"b": {"type": "string", "x-mcp-header": "REGION"}},
                },
            }
        )
    )
    assert "REGION" in reason


_annotated = {"type": "string", "x-mcp-header": "Hidden"}


@pytest.mark.parametrize(
    "schema",
    [
        {"properties": {"list": {"type": "array", "items": _annotated}}},
        {"properties": {"list": {"type": "array", "prefixItems": [_annotated]}}},
        {"properties": {"u": {"anyOf": [_annotated, {"type": "integer"}]}}},
        {"properties": {"u": {"oneOf": [_annotated]}}},
        {"properties": {"u": {"allOf": [_annotated]}}},
        {"properties": {"u": {"not": _annotated}}},
        {"properties": {"u": {"if": _annotated, "then": {}, "else": {}}}},
        {"properties": {"u": {"if": {}, "then": _annotated}}},
        {"properties": {"u": {"if": {}, "else": _annotated}}},
        {"anyOf": [{"properties": {"x": _annotated}}]},
        {"$defs": {"D": _annotated}, "properties": {"r": {"$ref": "#/$defs/D"}}},
        {"additionalProperties": _annotated},
        {"patternProperties": {"^x": _annotated}},
        {"dependentSchemas": {"a": {"properties": {"b": _annotated}}}},
        {"x-mcp-header": "Root", "type": "string"},
    ],
    ids=[
        "items",
        "prefixItems",
        "anyOf",
        "oneOf",
        "allOf",
        "not",
        "if",
        "then",
        "else",
        "properties-under-anyOf",
        "ref-target",
        "additionalProperties",
        "patternProperties",
        "dependentSchemas",
        "root",
    ],
)
def test_annotations_off_the_properties_chain_are_invalid(schema: dict[str, Any]) -> None:
    """Only properties reached from the root through "properties" keys may carry one: no items,
    array keywords, combinators, if/then/else or $ref on the way."""
    _invalid({"name": "t", "inputSchema": {"type": "object", **schema}})


def test_a_deep_schema_is_walked_without_recursion_and_bounded() -> None:
    """Walk iteratively with bounded depth: a hostile 100,000-level schema (or a cycle) is
    invalid, never a RecursionError or a hang."""
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(100_000):
        deep = {"type": "object", "properties": {"p": deep}}
    assert "deeper" in _invalid({"name": "deep", "inputSchema": deep})
    cyclic: dict[str, Any] = {"type": "object", "properties": {}}
    cyclic["properties"]["self"] = cyclic
    assert "deeper" in _invalid({"name": "loop", "inputSchema": cyclic})


def test_a_reasonably_deep_schema_is_fine() -> None:
    """Ordinary nesting (here 100 levels) is read completely."""
    leaf: dict[str, Any] = {"type": "integer", "x-mcp-header": "Deep"}
    node = leaf
    for _ in range(99):
        node = {"type": "object", "properties": {"n": node}}
    (param,) = tool_param_headers({"name": "t", "inputSchema": node})
    assert param.path == ("n",) * 99


# Schemas on which our validity verdict must agree with the official SDK's.
_SDK_CASES: list[dict[str, Any]] = [
    {"properties": {"a": {"type": "string", "x-mcp-header": "A"}}},
    {"properties": {"a": {"type": "number", "x-mcp-header": "A"}}},
    {"properties": {"a": {"type": "string", "x-mcp-header": "A b"}}},
    {"properties": {"a": {"type": "string", "x-mcp-header": ""}}},
    {
        "properties": {
            "a": {"type": "string", "x-mcp-header": "A"},
            "b": {"type": "boolean", "x-mcp-header": "a"},
        }
    },
    {"properties": {"l": {"type": "array", "items": {"type": "string", "x-mcp-header": "L"}}}},
    {"properties": {"o": {"anyOf": [{"type": "string", "x-mcp-header": "O"}]}}},
    {"$defs": {"d": {"type": "string", "x-mcp-header": "D"}}},
    {
        "properties": {
            "o": {"type": "object", "properties": {"i": {"type": "integer", "x-mcp-header": "I"}}}
        }
    },
    {"properties": {"a": {"type": ["string", "null"], "x-mcp-header": "A"}}},
]


@pytest.mark.parametrize("schema", _SDK_CASES)
def test_validity_agrees_with_the_official_sdk(schema: dict[str, Any]) -> None:
    """Interop: the SDK server refuses to validate against the schemas we reject, and vice versa."""
    full = {"type": "object", **schema}
    ours_valid = True
    try:
        tool_param_headers({"name": "t", "inputSchema": full})
    except InvalidToolHeaders:
        ours_valid = False
    assert ours_valid == (inbound.find_invalid_x_mcp_header(full) is None)


def test_filter_tools_leaves_out_invalid_tools_and_says_why() -> None:
    """An HTTP client MUST leave out a tool with an invalid annotation and SHOULD warn with the
    tool name and reason; other tools are unaffected."""
    good = _tool({"r": {"type": "string", "x-mcp-header": "Region"}})
    plain = {"name": "plain", "inputSchema": {"type": "object"}}
    bad = {**_tool({"n": {"type": "number", "x-mcp-header": "N"}}), "name": "bad"}
    tools = [good, bad, plain]
    kept, dropped = filter_tools(tools)
    assert kept == [good, plain]
    assert len(dropped) == 1 and dropped[0][0] == "bad" and "N" in dropped[0][1]
    assert tools == [good, bad, plain]  # the input is not changed


# --- mcp_headers: 2026-07-28 -----------------------------------------------------------------------


def _request(method: str, params: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
    body = dict(params or {})
    body["_meta"] = {PROTOCOL_VERSION_KEY: "2026-07-28", CLIENT_CAPABILITIES_KEY: {}, **meta}
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": body}


def test_a_2026_request_carries_version_and_method() -> None:
    """MCP-Protocol-Version mirrors _meta and Mcp-Method the method, in the spec's case."""
    assert mcp_headers(V2026_07_28, _request("tools/list")) == {
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/list",
    }


@pytest.mark.parametrize(
    ("method", "params", "name"),
    [
        ("tools/call", {"name": "search"}, "search"),
        ("prompts/get", {"name": "review"}, "review"),
        ("resources/read", {"uri": "hex://jason/info"}, "hex://jason/info"),
        ("tasks/get", {"taskId": "t-1"}, "t-1"),
    ],
)
def test_name_bearing_requests_carry_mcp_name(
    method: str, params: dict[str, Any], name: str
) -> None:
    """Mcp-Name: params.name for tools/call and prompts/get, params.uri for resources/read
    (and params.taskId for the tasks extension, SEP-2663)."""
    assert mcp_headers(V2026_07_28, _request(method, params))["Mcp-Name"] == name


def test_mcp_name_is_encoded() -> None:
    """Mcp-Name uses the value encoding."""
    headers = mcp_headers(V2026_07_28, _request("resources/read", {"uri": "file:///Über.md"}))
    assert headers["Mcp-Name"] == encode_header_value("file:///Über.md")
    assert headers["Mcp-Name"].startswith(SENTINEL_PREFIX)


def test_a_name_bearing_request_without_its_name_is_refused() -> None:
    """The required Mcp-Name has no source: -32602 before sending."""
    with pytest.raises(McpError) as caught:
        mcp_headers(V2026_07_28, _request("tools/call", {"name": 7}))
    assert caught.value.code == -32602


def test_the_version_header_mirrors_meta() -> None:
    """MUST equal _meta protocolVersion; without _meta, the dialect's version."""
    message = _request("tools/list")
    message["params"]["_meta"][PROTOCOL_VERSION_KEY] = "2099-01-01"
    assert mcp_headers(V2026_07_28, message)["MCP-Protocol-Version"] == "2099-01-01"
    bare = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
    assert mcp_headers(V2026_07_28, bare)["MCP-Protocol-Version"] == "2026-07-28"


def test_a_2026_notification_carries_version_and_method() -> None:
    """DECIDE: send MCP-Protocol-Version and Mcp-Method on notification POSTs too."""
    note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
    assert mcp_headers(V2026_07_28, note) == {
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "notifications/cancelled",
    }


def test_a_2026_response_carries_only_the_version() -> None:
    """An answer to a server ping has no method to mirror."""
    assert mcp_headers(V2026_07_28, {"jsonrpc": "2.0", "id": 3, "result": {}}) == {
        "MCP-Protocol-Version": "2026-07-28"
    }


def test_the_session_id_is_not_sent_on_2026() -> None:
    """MCP-Session-Id is not used on 2026-07-28."""
    assert "Mcp-Session-Id" not in mcp_headers(V2026_07_28, _request("ping"), session_id="abc")


@pytest.mark.parametrize("method", ["tools/list\r\nX-Evil: 1", "tools/list ", "méthode", ""])
def test_an_unsafe_method_is_refused_before_sending(method: str) -> None:
    """A generated value that cannot be sent as is: -32000, kind transport."""
    with pytest.raises(McpError) as caught:
        mcp_headers(V2026_07_28, _request(method))
    assert caught.value.code == -32000 and caught.value.kind == "transport"
    assert caught.value.cause == ("invalid_header", "Mcp-Method")


def test_an_unsafe_version_in_meta_is_refused_before_sending() -> None:
    """The mirrored version must be a plain header value too."""
    message = _request("tools/list")
    message["params"]["_meta"][PROTOCOL_VERSION_KEY] = "2026-07-28\r\nX: y"
    with pytest.raises(McpError) as caught:
        mcp_headers(V2026_07_28, message)
    assert caught.value.cause == ("invalid_header", "MCP-Protocol-Version")


_SEARCH = {
    "name": "search",
    "inputSchema": {
        "type": "object",
        "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "limit": {"type": "integer", "x-mcp-header": "Limit"},
            "exact": {"type": "boolean", "x-mcp-header": "Exact"},
            "opts": {
                "type": "object",
                "properties": {"tenant": {"type": "string", "x-mcp-header": "Tenant"}},
            },
            "query": {"type": "string"},
        },
    },
}


def _call(arguments: Any) -> dict[str, Any]:
    return _request("tools/call", {"name": "search", "arguments": arguments})


def test_annotated_arguments_become_mcp_param_headers() -> None:
    """One Mcp-Param-<Name> per annotated argument that has a value, read at its exact path."""
    headers = mcp_headers(
        V2026_07_28,
        _call({"region": "eu", "limit": 5, "exact": True, "opts": {"tenant": "Zürich"}}),
        tool=_SEARCH,
    )
    assert headers == {
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "search",
        "Mcp-Param-Region": "eu",
        "Mcp-Param-Limit": "5",
        "Mcp-Param-Exact": "true",
        "Mcp-Param-Tenant": encode_header_value("Zürich"),
    }


def test_false_zero_and_empty_are_values_null_and_absent_are_not() -> None:
    """Present values (false, 0, "") MUST be sent; null or absent MUST be omitted."""
    headers = mcp_headers(
        V2026_07_28, _call({"region": "", "limit": 0, "exact": False, "opts": None}), tool=_SEARCH
    )
    assert headers["Mcp-Param-Region"] == ""
    assert headers["Mcp-Param-Limit"] == "0"
    assert headers["Mcp-Param-Exact"] == "false"
    assert "Mcp-Param-Tenant" not in headers
    headers = mcp_headers(V2026_07_28, _call({"region": None}), tool=_SEARCH)
    assert not any(name.startswith("Mcp-Param-") for name in headers)


def test_without_the_tool_definition_no_param_headers_are_sent() -> None:
    """Mcp-Param-* need the schema: called by name, none are sent (the server answers -32020)."""
    headers = mcp_headers(V2026_07_28, _call({"region": "eu"}))
    assert not any(name.startswith("Mcp-Param-") for name in headers)


@pytest.mark.parametrize(
    ("arguments", "argument"),
    [
        ({"limit": 5.0}, "limit"),
        ({"limit": True}, "limit"),
        ({"limit": "5"}, "limit"),
        ({"limit": MAX_SAFE_INTEGER + 1}, "limit"),
        ({"limit": -MAX_SAFE_INTEGER - 1}, "limit"),
        ({"exact": 1}, "exact"),
        ({"region": 3}, "region"),
        ({"opts": {"tenant": ["x"]}}, "opts.tenant"),
    ],
)
def test_a_mistyped_argument_is_refused_naming_it(arguments: dict[str, Any], argument: str) -> None:
    """DECIDE: validate arguments before sending; integers are real ints (not bools) within
    ±(2**53-1). -32602 naming the argument."""
    with pytest.raises(McpError) as caught:
        mcp_headers(V2026_07_28, _call(arguments), tool=_SEARCH)
    assert caught.value.code == -32602
    assert repr(argument) in caught.value.message
    assert caught.value.data["argument"] == argument


def test_integers_at_the_safe_bounds_are_sent() -> None:
    """±(2**53-1) themselves are in range."""
    for value in (MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER):
        headers = mcp_headers(V2026_07_28, _call({"limit": value}), tool=_SEARCH)
        assert headers["Mcp-Param-Limit"] == str(value)


def test_a_tool_definition_with_invalid_annotations_is_refused() -> None:
    """A hand-written definition that list_tools would have left out cannot drive headers."""
    bad = _tool({"n": {"type": "number", "x-mcp-header": "N"}})
    with pytest.raises(McpError) as caught:
        mcp_headers(V2026_07_28, _call({"n": 1.5}), tool=bad)
    assert caught.value.code == -32602


@settings(max_examples=200)
@given(
    region=st.none() | _text,
    limit=st.none() | st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER),
    exact=st.none() | st.booleans(),
    tenant=st.none() | _text,
    name=_text.filter(bool),
)
def test_the_sdk_server_accepts_our_headers(
    region: str | None, limit: int | None, exact: bool | None, tenant: str | None, name: str
) -> None:
    """Interop: the official Python SDK's server-side ladder (MCP-Protocol-Version, Mcp-Method,
    Mcp-Name) and Mcp-Param-* check accept every request built here."""
    arguments = {"region": region, "limit": limit, "exact": exact, "opts": {"tenant": tenant}}
    tool = {**_SEARCH, "name": name}
    message = _request("tools/call", {"name": name, "arguments": arguments})
    headers = {k.lower(): v for k, v in mcp_headers(V2026_07_28, message, tool=tool).items()}
    route = inbound.classify_inbound_request(message, headers=headers)
    assert isinstance(route, inbound.InboundModernRoute), route
    assert inbound.validate_mcp_param_headers(tool["inputSchema"], arguments, headers) is None


# --- mcp_headers: session era ----------------------------------------------------------------------

_SESSION_ERA = [V2025_11_25, V2025_06_18]


@pytest.mark.parametrize("dialect", _SESSION_ERA, ids=lambda d: d.version)
def test_initialize_carries_no_mcp_headers(dialect: Dialect) -> None:
    """Elixir notes 1c: initialize is a POST with no MCP headers."""
    message = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}
    assert mcp_headers(dialect, message, session_id="s-1") == {}


@pytest.mark.parametrize("dialect", _SESSION_ERA, ids=lambda d: d.version)
def test_later_messages_carry_the_version_and_the_session(dialect: Dialect) -> None:
    """MCP-Protocol-Version (the negotiated version) on every later message, and Mcp-Session-Id
    once issued; no Mcp-Method, Mcp-Name or Mcp-Param-*, even for tools/call with a tool."""
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "search", "arguments": {"region": "eu"}},
    }
    assert mcp_headers(dialect, call, tool=_SEARCH, session_id="s-1") == {
        "MCP-Protocol-Version": dialect.version,
        "Mcp-Session-Id": "s-1",
    }
    assert mcp_headers(dialect, call, tool=_SEARCH) == {"MCP-Protocol-Version": dialect.version}
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    answer = {"jsonrpc": "2.0", "id": "srv-1", "result": {}}
    for message in (note, answer):
        assert mcp_headers(dialect, message, session_id="s-1") == {
            "MCP-Protocol-Version": dialect.version,
            "Mcp-Session-Id": "s-1",
        }


@pytest.mark.parametrize("session_id", ["s\r\nX-Evil: 1", "s\x00", "", " s"])
def test_an_unsafe_session_id_is_refused_before_sending(session_id: str) -> None:
    """A session id the server issued that cannot be echoed safely: -32000, nothing sent."""
    with pytest.raises(McpError) as caught:
        mcp_headers(
            V2025_11_25, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, session_id=session_id
        )
    assert caught.value.code == -32000
    assert caught.value.cause == ("invalid_header", "Mcp-Session-Id")


@pytest.mark.parametrize("dialect", [V2025_11_25, V2025_06_18])
def test_standard_headers_on_session_era_posts_only_when_asked(dialect: Dialect) -> None:
    """A client that also speaks 2026-07-28 sends Mcp-Method (and Mcp-Name) on session-era
    POSTs; the era's own headers stay as they are (none on initialize)."""
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo"}}
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert mcp_headers(dialect, init) == {}
    assert mcp_headers(dialect, init, standard_headers=True) == {"Mcp-Method": "initialize"}
    assert mcp_headers(dialect, note, session_id="s", standard_headers=True) == {
        "MCP-Protocol-Version": dialect.version,
        "Mcp-Session-Id": "s",
        "Mcp-Method": "notifications/initialized",
    }
    plain = mcp_headers(dialect, call)
    assert "Mcp-Method" not in plain and "Mcp-Name" not in plain
    announced = mcp_headers(dialect, call, standard_headers=True)
    assert announced["Mcp-Method"] == "tools/call" and announced["Mcp-Name"] == "echo"


# --- stream_headers: the GET that opens or resumes an event stream ------------------------------


@pytest.mark.parametrize("dialect", _SESSION_ERA, ids=lambda d: d.version)
def test_a_stream_get_carries_the_version_the_session_and_no_method(dialect: Dialect) -> None:
    """The standalone GET and a resumption carry MCP-Protocol-Version and Mcp-Session-Id, no
    Mcp-Method (a GET has no message); Last-Event-ID only to resume."""
    assert stream_headers(dialect, "s-1") == {
        "MCP-Protocol-Version": dialect.version,
        "Mcp-Session-Id": "s-1",
    }
    assert stream_headers(dialect, "s-1", "ev-7") == {
        "MCP-Protocol-Version": dialect.version,
        "Mcp-Session-Id": "s-1",
        "Last-Event-ID": "ev-7",
    }
    assert stream_headers(dialect, None, "") == {"MCP-Protocol-Version": dialect.version}


def test_a_stream_get_on_2026_carries_no_session_id() -> None:
    """2026-07-28 has no session: the version alone, as on its POSTs."""
    assert stream_headers(V2026_07_28, "s-1") == {"MCP-Protocol-Version": "2026-07-28"}


def test_a_stream_get_with_an_unsafe_session_id_is_refused_before_sending() -> None:
    """The session id is checked as on every POST: -32000 naming the header."""
    with pytest.raises(McpError) as caught:
        stream_headers(V2025_11_25, "s\r\nX-Evil: 1")
    assert caught.value.code == -32000
    assert caught.value.cause == ("invalid_header", "Mcp-Session-Id")
