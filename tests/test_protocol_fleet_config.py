"""The rules of a ``snodo.Fleet`` config (snodo/protocol/fleet_config.py): the ``mcpServers``
format, ``${VAR}`` expansion, refusals naming the server and the key, tool filters, qualified
names and reload plans. Pure: no threads, sockets or processes; the environment is an argument.
"""

from __future__ import annotations

import inspect
import json
from typing import Any

import pytest

from snodo.connections import connect
from snodo.protocol.fleet_config import (
    CONNECT_KEYS,
    FLEET_KEYS,
    IGNORED_KEYS,
    Reload,
    ServerSpec,
    ToolFilter,
    expand,
    parse_config,
    plan_reload,
    qualify,
    split_qualified,
)

NO_ENV: dict[str, str] = {}
GIT = {"command": "uvx", "args": ["mcp-server-git", "--repository", "."]}
DOCS = {"type": "http", "url": "https://docs.example/mcp"}


def one(entry: Any, environ: dict[str, str] | None = None, name: str = "srv") -> ServerSpec:
    """The single server of a config holding ``entry`` under ``name``."""
    (spec,) = parse_config({"mcpServers": {name: entry}}, NO_ENV if environ is None else environ)
    return spec


def refused(entry: Any, environ: dict[str, str] | None = None, name: str = "srv") -> str:
    """The message of the ValueError refusing ``entry``."""
    with pytest.raises(ValueError) as caught:
        one(entry, environ, name)
    return str(caught.value)


# -- the format ---------------------------------------------------------------------------------


def test_the_mcp_servers_format_gives_every_server_in_config_order() -> None:
    """``{"mcpServers": {...}}``: one spec per entry, in the file's order, names kept."""
    specs = parse_config({"mcpServers": {"git": GIT, "docs": DOCS, "a": GIT}}, NO_ENV)
    assert [spec.name for spec in specs] == ["git", "docs", "a"]
    assert [spec.transport for spec in specs] == ["stdio", "http", "stdio"]


def test_the_inner_mapping_alone_is_the_same_config() -> None:
    """Without the outer ``mcpServers`` key the mapping is the servers themselves."""
    inner = {"git": GIT, "docs": DOCS}
    assert parse_config(inner, NO_ENV) == parse_config({"mcpServers": inner}, NO_ENV)


def test_other_top_level_keys_beside_mcp_servers_are_read_past() -> None:
    """A settings file with more than ``mcpServers`` (Claude Code's): only the servers count."""
    specs = parse_config({"mcpServers": {"git": GIT}, "theme": "dark", "inputs": []}, NO_ENV)
    assert [spec.name for spec in specs] == ["git"]


def test_an_empty_config_has_no_servers() -> None:
    assert parse_config({}, NO_ENV) == ()
    assert parse_config({"mcpServers": {}}, NO_ENV) == ()


def test_a_config_read_from_json_text_parses() -> None:
    """What ``Fleet.from_file`` hands over: ``json.loads`` of a Claude Desktop style file."""
    text = """{"mcpServers": {
        "fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"],
               "env": {"DEBUG": "1"}},
        "remote": {"type": "streamable-http", "url": "http://127.0.0.1:9/mcp",
                   "headers": {"X-Team": "core"}}}}"""
    fs, remote = parse_config(json.loads(text), NO_ENV)
    assert (fs.command, fs.args, fs.env) == (
        "npx",
        ("-y", "@modelcontextprotocol/server-filesystem", "/tmp"),
        (("DEBUG", "1"),),
    )
    assert (remote.url, remote.headers) == ("http://127.0.0.1:9/mcp", (("X-Team", "core"),))


def test_a_config_that_is_not_a_mapping_is_refused() -> None:
    for config in ([GIT], "mcpServers", None):
        with pytest.raises(ValueError, match="a fleet config is a mapping"):
            parse_config(config, NO_ENV)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match='"mcpServers" must be a mapping'):
        parse_config({"mcpServers": [GIT]}, NO_ENV)


# -- stdio and HTTP entries ---------------------------------------------------------------------


def test_a_stdio_entry_keeps_command_args_env_and_cwd() -> None:
    spec = one({**GIT, "env": {"A": "1", "B": "2"}, "cwd": "/srv"})
    assert spec.transport == "stdio"
    assert spec.command == "uvx"
    assert spec.args == ("mcp-server-git", "--repository", ".")
    assert dict(spec.env) == {"A": "1", "B": "2"}
    assert spec.cwd == "/srv"
    assert (spec.url, spec.headers) == (None, ())


def test_a_stdio_entry_needs_no_args() -> None:
    spec = one({"command": "my-server"})
    assert (spec.command, spec.args, spec.env, spec.cwd) == ("my-server", (), (), None)


@pytest.mark.parametrize("kind", ["http", "streamable-http", "streamableHttp", None])
def test_an_http_entry_with_or_without_type(kind: str | None) -> None:
    """``type`` "http", "streamable-http" (or "streamableHttp") or none: a ``url`` is HTTP."""
    entry: dict[str, Any] = {"url": "https://docs.example/mcp", "headers": {"X-A": "b"}}
    if kind is not None:
        entry["type"] = kind
    spec = one(entry)
    assert spec.transport == "http"
    assert (spec.url, spec.headers) == ("https://docs.example/mcp", (("X-A", "b"),))
    assert (spec.command, spec.args, spec.env, spec.cwd) == (None, (), (), None)


def test_type_stdio_is_a_stdio_entry() -> None:
    assert one({**GIT, "type": "stdio"}).transport == "stdio"


def test_type_sse_is_an_http_sse_entry() -> None:
    """``"type": "sse"`` is the HTTP+SSE transport of 2024-11-05 (``snodo.Sse``, issue 18): the
    URL and headers of an HTTP entry; ``protocol`` may be left out (the target implies it)."""
    spec = one({"type": "sse", "url": "https://old.example/sse", "headers": {"X-A": "b"}})
    assert spec.transport == "sse"
    assert (spec.url, spec.headers) == ("https://old.example/sse", (("X-A", "b"),))
    assert spec.connect_options() == {"headers": {"X-A": "b"}}
    listed = one({"type": "sse", "url": "https://o.example/sse", "protocol": ["2024-11-05"]})
    assert dict(listed.options) == {"protocol": ["2024-11-05"]}


@pytest.mark.parametrize("protocol", ["2025-06-18", ["2025-11-25", "2025-06-18"], 7])
def test_type_sse_with_a_protocol_without_2024_11_05_is_refused(protocol: Any) -> None:
    message = refused({"type": "sse", "url": "https://o.example/sse", "protocol": protocol})
    assert 'key "protocol" must allow 2024-11-05' in message


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ({"type": "stdio", "url": "https://x.example/mcp"}, "is not an HTTP type"),
        ({"type": "websocket", "url": "wss://x.example/mcp"}, "is not an HTTP type"),
        ({"type": "http", "command": "server"}, 'expected "stdio"'),
        ({"type": "sse", "command": "server"}, 'expected "stdio"'),
        ({"type": ["http"], "url": "https://x.example/mcp"}, "is not an HTTP type"),
        ({"type": {"k": "v"}, "command": "server"}, 'expected "stdio"'),
    ],
)
def test_a_type_that_does_not_fit_the_entry_is_refused(entry: Any, expected: str) -> None:
    """A ``type`` that contradicts ``url``/``command`` (or is not a string) names the key."""
    message = refused(entry, name="x")
    assert "server 'x'" in message
    assert 'key "type"' in message
    assert expected in message


def test_an_entry_with_neither_command_nor_url_is_refused() -> None:
    message = refused({"type": "http", "headers": {}}, name="half")
    assert "server 'half'" in message
    assert '"command"' in message
    assert '"url"' in message


def test_a_stdio_key_on_an_http_entry_and_the_other_way_round_are_refused() -> None:
    """Keys of the other transport are named as such (a url entry with ``env``, and so on)."""
    message = refused({**DOCS, "env": {"A": "1"}}, name="docs")
    assert "server 'docs'" in message
    assert "unknown key 'env' (a stdio key)" in message
    message = refused({**GIT, "headers": {"A": "1"}}, name="git")
    assert "server 'git'" in message
    assert "unknown key 'headers' (an HTTP key)" in message
    message = refused({"command": "s", "url": "https://x.example/mcp"}, name="both")
    assert "unknown key 'command' (a stdio key)" in message


@pytest.mark.parametrize(
    ("key", "value", "transport"),
    [
        ("stderr", "inherit", "http"),
        ("verify", False, "stdio"),
        ("ca_certs", "/etc/ca.pem", "stdio"),
        ("client_cert", "/etc/me.pem", "stdio"),
    ],
)
def test_a_snodo_key_of_the_other_transport_is_refused(
    key: str, value: Any, transport: str
) -> None:
    """``stderr`` is for stdio servers, the TLS keys for HTTP ones: refused up front rather
    than a server that fails to start (or an option silently unused)."""
    entry = {**(DOCS if transport == "http" else GIT), key: value}
    message = refused(entry, name="s")
    assert "server 's'" in message
    assert repr(key) in message or f'"{key}"' in message


# -- snodo's own keys ---------------------------------------------------------------------------


def test_the_connect_keys_are_keywords_of_connect() -> None:
    """Every key passed through names a real ``snodo.connect`` keyword (a typo here would only
    fail when a server starts)."""
    parameters = inspect.signature(connect).parameters
    assert not CONNECT_KEYS - set(parameters), CONNECT_KEYS - set(parameters)
    assert not CONNECT_KEYS & {"owner", "name", "on_state", "supervisor", "env", "cwd", "headers"}
    assert not CONNECT_KEYS & FLEET_KEYS
    assert not (CONNECT_KEYS | FLEET_KEYS) & IGNORED_KEYS


def test_every_connect_key_goes_through_connect_options_as_given() -> None:
    """Each of :data:`CONNECT_KEYS` on an entry reaches ``connect_options()`` unchanged."""
    values: dict[str, Any] = {
        key: {"nested": [key]} if key in ("client_info", "client_capabilities", "backoff") else key
        for key in CONNECT_KEYS
    }
    stdio_keys = CONNECT_KEYS - {"verify", "ca_certs", "client_cert"}
    http_keys = CONNECT_KEYS - {"stderr"}
    stdio = one({**GIT, **{key: values[key] for key in stdio_keys}})
    assert stdio.connect_options() == {key: values[key] for key in stdio_keys}
    http = one({**DOCS, **{key: values[key] for key in http_keys}})
    assert http.connect_options() == {key: values[key] for key in http_keys}


def test_connect_options_add_the_transport_keywords() -> None:
    """env and cwd for stdio, headers for HTTP, as plain dicts; nothing when absent."""
    stdio = one({**GIT, "env": {"A": "1"}, "cwd": "/srv", "timeout": 5})
    assert stdio.connect_options() == {"env": {"A": "1"}, "cwd": "/srv", "timeout": 5}
    assert one(GIT).connect_options() == {}
    http = one({**DOCS, "headers": {"X": "y"}, "cache": True})
    assert http.connect_options() == {"headers": {"X": "y"}, "cache": True}
    assert one(DOCS).connect_options() == {}


def test_options_are_sorted_by_name_and_fleet_keys_are_not_connect_options() -> None:
    spec = one(
        {
            **GIT,
            "timeout": 3,
            "cache": True,
            "restart": "permanent",
            "start": "lazy",
            "idle_timeout": 60,
            "disabled": True,
            "tools": {"allow": ["status"]},
        }
    )
    assert spec.options == (("cache", True), ("restart", "permanent"), ("timeout", 3))
    assert spec.connect_options() == {"cache": True, "restart": "permanent", "timeout": 3}
    assert (spec.start, spec.idle_timeout, spec.disabled) == ("lazy", 60.0, True)
    assert isinstance(spec.idle_timeout, float)
    assert spec.tools == ToolFilter(("status",), ())


def test_the_fleet_keys_default_to_unset() -> None:
    spec = one(GIT)
    assert (spec.start, spec.idle_timeout, spec.disabled, spec.tools) == (
        None,
        None,
        False,
        ToolFilter(),
    )


@pytest.mark.parametrize("start", ["eager", "lazy"])
def test_start_is_eager_or_lazy(start: str) -> None:
    assert one({**DOCS, "start": start}).start == start


@pytest.mark.parametrize("start", ["later", "", True, 1, ["lazy"]])
def test_a_bad_start_is_refused(start: Any) -> None:
    message = refused({**GIT, "start": start}, name="git")
    assert "server 'git'" in message
    assert 'key "start"' in message
    assert '"eager" or "lazy"' in message


@pytest.mark.parametrize("idle", [0, -1, "60", True, [], float("nan"), float("inf")])
def test_a_bad_idle_timeout_is_refused(idle: Any) -> None:
    """Seconds > 0 and finite (JSON text may say ``NaN`` or ``Infinity``; Python reads them)."""
    message = refused({**GIT, "idle_timeout": idle}, name="git")
    assert "server 'git'" in message
    assert 'key "idle_timeout"' in message


def test_idle_timeout_is_refused_on_an_http_server() -> None:
    message = refused({**DOCS, "idle_timeout": 30}, name="docs")
    assert "server 'docs'" in message
    assert 'key "idle_timeout" applies to stdio servers only' in message


def test_a_null_idle_timeout_is_unset() -> None:
    assert one({**DOCS, "idle_timeout": None}).idle_timeout is None


@pytest.mark.parametrize("disabled", ["yes", 1, None])
def test_disabled_is_a_boolean(disabled: Any) -> None:
    message = refused({**GIT, "disabled": disabled}, name="git")
    assert "server 'git'" in message
    assert 'key "disabled"' in message


# -- refusals that name the server and the key --------------------------------------------------


def test_an_unknown_key_is_refused_naming_the_server_and_the_key() -> None:
    message = refused({**GIT, "timeuot": 5}, name="git")
    assert message == "server 'git': unknown key 'timeuot'"


@pytest.mark.parametrize(
    ("entry", "key"),
    [
        ({"command": 5}, "command"),
        ({"command": ""}, "command"),
        ({"command": ["uvx", "x"]}, "command"),
        ({"command": "uvx", "args": "mcp-server-git"}, "args"),
        ({"command": "uvx", "args": {"a": 1}}, "args"),
        ({"command": "uvx", "args": ["--port", 8080]}, "args"),
        ({"command": "uvx", "env": ["A=1"]}, "env"),
        ({"command": "uvx", "env": {"PORT": 8080}}, "env"),
        ({"command": "uvx", "cwd": 1}, "cwd"),
        ({"url": 1}, "url"),
        ({"url": ""}, "url"),
        ({"url": "https://x.example/mcp", "headers": "Authorization: x"}, "headers"),
        ({"url": "https://x.example/mcp", "headers": {"X-Retries": 3}}, "headers"),
    ],
)
def test_wrong_types_are_refused_naming_the_server_and_the_key(entry: Any, key: str) -> None:
    message = refused(entry, name="bad")
    assert message.startswith("server 'bad': "), message
    assert f"key {key!r}" in message or f'key "{key}"' in message, message


@pytest.mark.parametrize("entry", ["uvx mcp-server-git", ["uvx"], None, 3])
def test_an_entry_that_is_not_a_mapping_is_refused(entry: Any) -> None:
    message = refused(entry, name="git")
    assert message.startswith("server 'git': an entry is a mapping"), message


@pytest.mark.parametrize("name", ["", "has space", "slash/y", "x" * 65, "ünï", "a:b"])
def test_a_bad_server_name_is_refused(name: str) -> None:
    message = refused(GIT, name=name)
    assert f"server name {name!r}" in message


@pytest.mark.parametrize("name", ["a", "git-2", "my.server", "under_score", "X" * 64])
def test_good_server_names(name: str) -> None:
    assert one(GIT, name=name).name == name


def test_the_first_bad_server_is_named_even_after_good_ones() -> None:
    with pytest.raises(ValueError, match="server 'second'"):
        parse_config({"mcpServers": {"first": GIT, "second": {"command": 1}}}, NO_ENV)


def test_keys_of_other_clients_are_read_past() -> None:
    """``alwaysAllow``, ``autoApprove`` and the like mean nothing to a fleet: no error, no option."""
    others = {key: ["x"] for key in IGNORED_KEYS}
    assert others, "IGNORED_KEYS is empty"
    assert {"alwaysAllow", "autoApprove", "disabledTools"} <= IGNORED_KEYS
    stdio = one({**GIT, **others})
    http = one({**DOCS, **others})
    assert stdio == one(GIT)
    assert http == one(DOCS)
    assert stdio.connect_options() == {} == http.connect_options()


# -- ${VAR} expansion ---------------------------------------------------------------------------

ENV = {"HOME": "/home/me", "TOKEN": "s3cret", "EMPTY": "", "PORT": "8080"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("${HOME}/bin", "/home/me/bin"),
        ("${env:HOME}/bin", "/home/me/bin"),
        ("${MISSING:-fallback}", "fallback"),
        ("${MISSING:-}", ""),
        ("${HOME:-fallback}", "/home/me"),
        ("${env:MISSING:-a:b/c}", "a:b/c"),
        ("${EMPTY:-fallback}", ""),
        ("Bearer ${TOKEN} on ${PORT}", "Bearer s3cret on 8080"),
        ("no variables", "no variables"),
        ("$HOME and ${ not a var", "$HOME and ${ not a var"),
        ("${input:token}", "${input:token}"),
    ],
)
def test_expand(text: str, expected: str) -> None:
    """``${VAR}``, ``${env:VAR}`` (VS Code), ``${VAR:-default}``; a set but empty variable is
    used as it is; other ``${...}`` forms are left alone."""
    assert expand(text, ENV, "here") == expected


def test_expand_a_missing_variable_names_it_and_where() -> None:
    with pytest.raises(ValueError) as caught:
        expand("x ${NOPE} y", ENV, "server 'a': key 'args'")
    assert str(caught.value) == "server 'a': key 'args': the environment variable NOPE is not set"


def test_expansion_is_not_recursive() -> None:
    """A variable's value is used as text, never expanded again."""
    assert expand("${A}", {"A": "${B}", "B": "no"}, "here") == "${B}"


def test_variables_expand_in_command_args_env_and_cwd() -> None:
    spec = one(
        {
            "command": "${HOME}/bin/server",
            "args": ["--port", "${PORT}", "--token=${env:TOKEN}", "${LEVEL:-info}"],
            "env": {"API_TOKEN": "${TOKEN}", "MODE": "${MODE:-prod}"},
            "cwd": "${HOME}/work",
        },
        ENV,
    )
    assert spec.command == "/home/me/bin/server"
    assert spec.args == ("--port", "8080", "--token=s3cret", "info")
    assert dict(spec.env) == {"API_TOKEN": "s3cret", "MODE": "prod"}
    assert spec.cwd == "/home/me/work"


def test_variables_expand_in_url_and_headers() -> None:
    spec = one(
        {
            "type": "http",
            "url": "http://127.0.0.1:${PORT}/${PATH:-mcp}",
            "headers": {"Authorization": "Bearer ${env:TOKEN}"},
        },
        ENV,
    )
    assert spec.url == "http://127.0.0.1:8080/mcp"
    assert spec.headers == (("Authorization", "Bearer s3cret"),)


def test_variables_do_not_expand_in_names_or_snodo_options() -> None:
    """Only the values of command/args/env/cwd/url/headers are expanded."""
    spec = one(
        {**DOCS, "headers": {"${TOKEN}": "v"}, "client_info": {"name": "${TOKEN}"}},
        ENV,
    )
    assert spec.headers == (("${TOKEN}", "v"),)
    assert spec.options == (("client_info", {"name": "${TOKEN}"}),)


@pytest.mark.parametrize(
    ("entry", "key"),
    [
        ({"command": "${NOPE}"}, '"command"'),
        ({"command": "s", "args": ["${NOPE}"]}, '"args"'),
        ({"command": "s", "env": {"A": "${NOPE}"}}, "'env' (A)"),
        ({"command": "s", "cwd": "${NOPE}"}, '"cwd"'),
        ({"url": "https://${NOPE}/mcp"}, '"url"'),
        ({"url": "https://x.example/mcp", "headers": {"Authorization": "${NOPE}"}}, "'headers'"),
    ],
)
def test_a_missing_variable_names_the_variable_the_server_and_the_key(entry: Any, key: str) -> None:
    message = refused(entry, ENV, name="svc")
    assert message.startswith(f"server 'svc': key {key}"), message
    assert message.endswith("the environment variable NOPE is not set"), message


def test_the_environment_is_read_at_parse_time_only() -> None:
    """The same config with another environment gives another spec (a reload sees the change)."""
    entry = {"command": "s", "args": ["${LEVEL:-info}"]}
    assert one(entry, {}).args == ("info",)
    assert one(entry, {"LEVEL": "debug"}).args == ("debug",)
    assert one(entry, {}) != one(entry, {"LEVEL": "debug"})


# -- tool filters -------------------------------------------------------------------------------


def test_no_filter_admits_every_tool() -> None:
    assert all(ToolFilter().admits(name) for name in ("a", "git_status", ""))


def test_allow_globs_admit_only_matching_tools() -> None:
    tools = ToolFilter(allow=("git_*", "echo"))
    assert tools.admits("git_status")
    assert tools.admits("echo")
    assert not tools.admits("echo2")
    assert not tools.admits("rm_rf")


def test_deny_globs_win_over_allow() -> None:
    tools = ToolFilter(allow=("git_*",), deny=("git_push*", "*force*"))
    assert tools.admits("git_status")
    assert not tools.admits("git_push")
    assert not tools.admits("git_push_tags")
    assert not tools.admits("git_force_reset")
    only_deny = ToolFilter(deny=("delete_?",))
    assert only_deny.admits("delete_all")
    assert not only_deny.admits("delete_x")
    assert only_deny.admits("read")


def test_globs_are_case_sensitive_and_support_classes() -> None:
    tools = ToolFilter(allow=("[ab]*",))
    assert tools.admits("add")
    assert tools.admits("busy")
    assert not tools.admits("Add")
    assert not tools.admits("echo")


def test_the_tools_key_becomes_a_filter() -> None:
    assert one({**GIT, "tools": {"allow": ["a*"], "deny": ["ab"]}}).tools == ToolFilter(
        ("a*",), ("ab",)
    )
    assert one({**GIT, "tools": {"deny": ["x"]}}).tools == ToolFilter((), ("x",))
    assert one({**GIT, "tools": {}}).tools == ToolFilter()
    assert one({**GIT, "tools": None}).tools == ToolFilter()


@pytest.mark.parametrize(
    "tools",
    [
        ["echo"],
        "echo",
        {"allow": "echo"},
        {"allow": [1]},
        {"deny": {"x": 1}},
        {"include": ["echo"]},
        {"allow": ["a"], "block": ["b"]},
    ],
)
def test_a_bad_tools_filter_is_refused(tools: Any) -> None:
    message = refused({**GIT, "tools": tools}, name="git")
    assert message.startswith("server 'git': key \"tools\""), message


# -- qualified names ----------------------------------------------------------------------------


def test_qualify_joins_server_and_name() -> None:
    assert qualify("git", "status", "_") == "git_status"
    assert qualify("git", "status", "__") == "git__status"
    assert qualify("git", "status", ".") == "git.status"


def test_split_qualified_is_the_inverse_of_qualify() -> None:
    servers = ["git", "docs"]
    for server in servers:
        for name in ("status", "a_b", "x.y"):
            assert split_qualified(qualify(server, name, "_"), servers, "_") == (server, name)


def test_the_longest_server_prefix_wins() -> None:
    """``a_b`` wins over ``a`` for ``a_b_c``, whichever comes first in the config."""
    for servers in (["a", "a_b"], ["a_b", "a"]):
        assert split_qualified("a_b_c", servers, "_") == ("a_b", "c")
        assert split_qualified("a_x", servers, "_") == ("a", "x")
        assert split_qualified("a_b", servers, "_") == ("a", "b")


def test_split_qualified_with_a_longer_separator() -> None:
    servers = ["git", "git_hub"]
    assert split_qualified("git__status", servers, "__") == ("git", "status")
    assert split_qualified("git_hub__pr_list", servers, "__") == ("git_hub", "pr_list")
    assert split_qualified("git_status", servers, "__") is None


def test_no_server_prefix_is_none() -> None:
    assert split_qualified("svn_status", ["git", "docs"], "_") is None
    assert split_qualified("git", ["git"], "_") is None
    assert split_qualified("gitstatus", ["git"], "_") is None
    assert split_qualified("git_status", [], "_") is None


def test_an_empty_tool_name_is_no_match() -> None:
    """``"git_"`` names no tool: None rather than ``("git", "")``."""
    assert split_qualified("git_", ["git"], "_") is None
    assert split_qualified("a_b_", ["a", "a_b"], "_") == ("a", "b_")


# -- reload plans -------------------------------------------------------------------------------


def specs(servers: dict[str, Any], environ: dict[str, str] | None = None) -> tuple[ServerSpec, ...]:
    return parse_config({"mcpServers": servers}, NO_ENV if environ is None else environ)


def test_plan_reload_sorts_servers_into_added_removed_changed_unchanged() -> None:
    old = specs({"keep": GIT, "change": GIT, "drop": DOCS})
    new = specs({"change": {**GIT, "timeout": 5}, "keep": GIT, "add": DOCS})
    assert plan_reload(old, new) == Reload(
        added=("add",), removed=("drop",), changed=("change",), unchanged=("keep",)
    )


def test_plan_reload_keeps_each_configs_order() -> None:
    """Added, changed and unchanged in the new config's order; removed in the old one's."""
    old = specs({"r2": GIT, "u2": GIT, "c2": GIT, "r1": GIT, "u1": GIT, "c1": GIT})
    new = specs(
        {
            "a2": GIT,
            "c1": {**GIT, "cwd": "/"},
            "u1": GIT,
            "a1": GIT,
            "c2": {**GIT, "cwd": "/"},
            "u2": GIT,
        }
    )
    plan = plan_reload(old, new)
    assert plan.added == ("a2", "a1")
    assert plan.removed == ("r2", "r1")
    assert plan.changed == ("c1", "c2")
    assert plan.unchanged == ("u1", "u2")


def test_the_same_config_changes_nothing() -> None:
    config = {"git": {**GIT, "backoff": {"initial": 1}}, "docs": {**DOCS, "tools": {"deny": ["x"]}}}
    assert plan_reload(specs(config), specs(json.loads(json.dumps(config)))) == Reload(
        (), (), (), ("git", "docs")
    )


def test_from_nothing_and_to_nothing() -> None:
    both = specs({"git": GIT, "docs": DOCS})
    assert plan_reload((), both) == Reload(("git", "docs"), (), (), ())
    assert plan_reload(both, ()) == Reload((), ("git", "docs"), (), ())


@pytest.mark.parametrize(
    "change",
    [
        {"command": "uv"},
        {"args": ["mcp-server-git"]},
        {"env": {"A": "1"}},
        {"cwd": "/"},
        {"timeout": 10},
        {"start": "lazy"},
        {"idle_timeout": 5},
        {"disabled": True},
        {"tools": {"allow": ["status"]}},
        {"type": "http", "url": "https://git.example/mcp", "command": None},
    ],
)
def test_any_change_of_an_entry_is_a_change(change: dict[str, Any]) -> None:
    entry = {**GIT, **change}
    entry = {key: value for key, value in entry.items() if value is not None}
    if "url" in entry:
        entry.pop("args")
    plan = plan_reload(specs({"git": GIT}), specs({"git": entry}))
    assert plan.changed == ("git",)
    assert plan.unchanged == ()


def test_a_changed_variable_is_a_change() -> None:
    entry = {**DOCS, "headers": {"Authorization": "Bearer ${TOKEN}"}}
    plan = plan_reload(specs({"d": entry}, {"TOKEN": "a"}), specs({"d": entry}, {"TOKEN": "b"}))
    assert plan.changed == ("d",)


def test_key_order_in_the_file_is_no_change() -> None:
    """The same entry written with its keys (and its env and headers) in another order leaves
    the server as it is."""
    before = {
        "command": "s",
        "timeout": 5,
        "cache": True,
        "env": {"A": "1", "B": "2"},
    }
    after = {"env": {"B": "2", "A": "1"}, "cache": True, "timeout": 5, "command": "s"}
    web_before = {"url": "https://x.example/mcp", "headers": {"X-A": "1", "X-B": "2"}}
    web_after = {"headers": {"X-B": "2", "X-A": "1"}, "url": "https://x.example/mcp"}
    plan = plan_reload(specs({"s": before, "w": web_before}), specs({"s": after, "w": web_after}))
    assert plan.unchanged == ("s", "w")
    assert plan.changed == ()


def test_ignored_keys_are_no_change() -> None:
    plan = plan_reload(specs({"git": GIT}), specs({"git": {**GIT, "autoApprove": ["status"]}}))
    assert plan.unchanged == ("git",)


def test_vs_code_mcp_json_is_read_by_its_servers_key() -> None:
    config = {
        "inputs": [{"id": "token", "type": "promptString"}],
        "servers": {"git": {"type": "stdio", "command": "uvx", "args": ["mcp-server-git"]}},
    }
    (spec,) = parse_config(config, {})
    assert (spec.name, spec.command, spec.args) == ("git", "uvx", ("mcp-server-git",))
    # A server that happens to be named "servers" is still a server of the plain form.
    (named,) = parse_config({"servers": {"command": "x"}}, {})
    assert (named.name, named.command) == ("servers", "x")
