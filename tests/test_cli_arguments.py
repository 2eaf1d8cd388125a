"""snodo.cli.arguments and snodo.cli.targets: ``key=value`` words read against a tool's input
schema or a prompt's arguments, ``--args`` JSON, and TARGET resolution (config locations, ad hoc
targets). Pure: no process, no socket."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import snodo
from snodo.cli.arguments import (
    UsageError,
    convert,
    json_object,
    prompt_arguments,
    split_pair,
    tool_arguments,
)
from snodo.cli.targets import (
    TargetOptions,
    config_candidates,
    find_config,
    parse_header,
    parse_protocols,
    resolve,
)

SCHEMA = {
    "type": "object",
    "properties": {
        "n": {"type": "integer"},
        "x": {"type": "number"},
        "flag": {"type": "boolean"},
        "nothing": {"type": "null"},
        "obj": {"type": "object"},
        "items": {"type": "array"},
        "text": {"type": "string"},
        "maybe": {"type": ["integer", "null"]},
        "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
        "free": {},
    },
    "required": ["text"],
}


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("n=42", 42),
        ("n=-7", -7),
        ("n=1e3", 1000),
        ("x=2.5", 2.5),
        ("x=3", 3),
        ("flag=true", True),
        ("flag=No", False),
        ("nothing=null", None),
        ('obj={"a": [1]}', {"a": [1]}),
        ('items=[1, "two"]', [1, "two"]),
        ("text=42", "42"),
        ("text=", ""),
        ("text=a=b", "a=b"),
        ("maybe=null", None),
        ("maybe=5", 5),
        ("either=5", 5),
        ("either=five", "five"),
        ("free=[1]", [1]),
        ("free=plain words", "plain words"),
    ],
)
def test_values_follow_the_schema(word: str, expected: Any) -> None:
    key, _ = split_pair(word)
    arguments = tool_arguments([word] if key == "text" else ["text=t", word], SCHEMA)
    assert arguments[key] == expected
    assert type(arguments[key]) is type(expected)


@pytest.mark.parametrize(
    ("word", "message"),
    [
        ("n=1.5", "argument 'n': expected integer, got '1.5'"),
        ("n=ten", "argument 'n': expected integer"),
        ("x=nan", "argument 'x': expected number"),
        ("flag=maybe", "argument 'flag': expected boolean"),
        ("obj=[1]", "argument 'obj': expected object"),
        ("items={", "argument 'items': expected array"),
        ("maybe=x", "argument 'maybe': expected null or integer"),
        ("nope=1", "unknown argument 'nope' (known: either, flag, free, items, maybe, n,"),
        ("n", "expected KEY=VALUE, got 'n'"),
        ("=1", "expected KEY=VALUE, got '=1'"),
    ],
)
def test_a_bad_word_is_a_usage_error_naming_the_key(word: str, message: str) -> None:
    with pytest.raises(UsageError) as raised:
        tool_arguments(["text=t", word], SCHEMA)
    assert message in str(raised.value)


def test_required_properties_and_args_json() -> None:
    with pytest.raises(UsageError, match="missing required argument: text"):
        tool_arguments(["n=1"], SCHEMA)
    # --args supplies them (as given: raw JSON is not converted), key=value words win.
    base = json_object('{"text": "from json", "n": "kept as given"}')
    assert tool_arguments(["n=2"], SCHEMA, base) == {"text": "from json", "n": 2}
    two = {"type": "object", "properties": {"a": {}, "b": {}}, "required": ["a", "b"]}
    with pytest.raises(UsageError, match="missing required arguments: a, b"):
        tool_arguments([], two)


def test_schemas_that_allow_other_keys() -> None:
    """No ``properties`` at all: any key (JSON if it parses, else the string); with
    ``additionalProperties`` a schema, an extra key follows it."""
    assert tool_arguments(["a=1", "b=x"], {"type": "object"}) == {"a": 1, "b": "x"}
    assert tool_arguments(["k=1"], None) == {"k": 1}
    typed = {"type": "object", "properties": {}, "additionalProperties": {"type": "string"}}
    assert tool_arguments(["k=1"], typed) == {"k": "1"}
    closed = {"type": "object", "properties": {}}
    with pytest.raises(UsageError, match="unknown argument 'k' \\(it takes no arguments\\)"):
        tool_arguments(["k=1"], closed)


def test_an_enum_keeps_its_string() -> None:
    assert convert("k", "1", {"enum": ["1", "2"]}) == "1"
    assert convert("k", "3", {"enum": ["1", "2"]}) == 3


@pytest.mark.parametrize(
    ("text", "message"),
    [("{", "--args: not JSON"), ("[1]", "--args: expected a JSON object, got list")],
)
def test_args_json_must_be_an_object(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("[", "\\[")):
        json_object(text)


def test_prompt_arguments_are_strings() -> None:
    declared = [{"name": "code", "required": True}, {"name": "language"}]
    assert prompt_arguments(["code=x = 1", "language=42"], declared) == {
        "code": "x = 1",
        "language": "42",
    }
    with pytest.raises(UsageError, match="missing required argument: code"):
        prompt_arguments(["language=perl"], declared)
    with pytest.raises(UsageError, match="unknown argument 'lang' \\(known: code, language\\)"):
        prompt_arguments(["code=1", "lang=perl"], declared)
    with pytest.raises(UsageError, match="prompt arguments are strings"):
        prompt_arguments([], declared, {"code": 1})
    assert prompt_arguments([], declared, {"code": "from json"}) == {"code": "from json"}


# -- targets ---------------------------------------------------------------------------------


def test_ad_hoc_stdio_target() -> None:
    resolved = resolve(
        TargetOptions(
            stdio="python -m 'my server' --flag",
            env=["A=1", "B=x=y"],
            cwd="/tmp",
            protocol=["2025-11-25,2025-06-18"],
            timeout=5.0,
        )
    )
    assert resolved.target == snodo.Stdio("python", ["-m", "my server", "--flag"])
    assert resolved.options == {
        "env": {"A": "1", "B": "x=y"},
        "cwd": "/tmp",
        "protocol": ["2025-11-25", "2025-06-18"],
        "timeout": 5.0,
    }


def test_ad_hoc_http_target_with_a_bearer_from_the_environment() -> None:
    resolved = resolve(
        TargetOptions(
            http="http://127.0.0.1:8000/mcp",
            headers=["X-Team: blue", "X-Trace=1"],
            bearer_env="TOKEN",
            protocol=["2024-11-05"],
        ),
        environ={"TOKEN": "secret"},
    )
    assert resolved.target == snodo.Http("http://127.0.0.1:8000/mcp")
    assert resolved.options == {
        "headers": {"X-Team": "blue", "X-Trace": "1", "authorization": "Bearer secret"},
        "protocol": "2024-11-05",
    }
    with pytest.raises(UsageError, match="--bearer-env TOKEN: the variable is not set"):
        resolve(TargetOptions(http="http://h/mcp", bearer_env="TOKEN"), environ={})


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (TargetOptions(), "no server"),
        (TargetOptions(stdio="a", http="http://h"), "--stdio and --http exclude each other"),
        (TargetOptions(name="x", stdio="a"), "a server name ('x') and --stdio exclude"),
        (TargetOptions(http="http://h", env=["A=1"]), "--env and --cwd need --stdio"),
        (TargetOptions(stdio="a", headers=["A: 1"]), "--header and --bearer-env need --http"),
        (TargetOptions(stdio="'unclosed"), "--stdio: No closing quotation"),
        (TargetOptions(stdio="  "), "--stdio: no command"),
        (TargetOptions(stdio="a", env=["A"]), "--env: expected K=V"),
        (TargetOptions(stdio="a", protocol=["2020-01-01"]), "unknown version '2020-01-01'"),
    ],
)
def test_bad_target_options(given: TargetOptions, message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("(", "\\(").replace(")", "\\)")):
        resolve(given, environ={})


def test_headers_and_protocols() -> None:
    assert parse_header("Authorization: Bearer a:b") == ("Authorization", "Bearer a:b")
    with pytest.raises(UsageError):
        parse_header("no separator")
    assert parse_protocols(["2026-07-28", "2025-03-26, 2024-11-05"]) == [
        "2026-07-28",
        "2025-03-26",
        "2024-11-05",
    ]


def test_config_locations_in_order(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert config_candidates({}, tmp_path, home) == [
        tmp_path / "mcp.json",
        tmp_path / ".mcp.json",
        home / ".config" / "snodo" / "mcp.json",
    ]
    environ = {"SNODO_CONFIG": "/etc/mcp.json", "XDG_CONFIG_HOME": "/xdg"}
    assert config_candidates(environ, tmp_path, home) == [
        Path("/etc/mcp.json"),
        tmp_path / "mcp.json",
        tmp_path / ".mcp.json",
        Path("/xdg/snodo/mcp.json"),
    ]


def test_a_config_name(tmp_path: Path) -> None:
    """An entry of the file is the fleet's: ${VAR} expanded, its connect() keywords kept, the
    fleet's own keys (tools, start) left to the fleet."""
    path = tmp_path / "servers.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "git": {
                        "command": "uvx",
                        "args": ["mcp-server-git", "${REPO}"],
                        "env": {"LOG": "1"},
                        "timeout": 9,
                        "tools": {"deny": ["x"]},
                    },
                    "docs": {
                        "type": "http",
                        "url": "https://docs.example/mcp",
                        "headers": {"authorization": "Bearer ${TOKEN}"},
                    },
                    "old": {"type": "sse", "url": "http://127.0.0.1:3001/sse"},
                }
            }
        )
    )
    environ = {"REPO": "/src", "TOKEN": "t"}
    git = resolve(TargetOptions(name="git", config=str(path)), environ=environ)
    assert git.target == snodo.Stdio("uvx", ["mcp-server-git", "/src"])
    assert git.options == {"env": {"LOG": "1"}, "timeout": 9, "name": "git"}
    docs = resolve(TargetOptions(name="docs", config=str(path), timeout=2.0), environ=environ)
    assert docs.target == snodo.Http("https://docs.example/mcp")
    assert docs.options == {
        "headers": {"authorization": "Bearer t"},
        "name": "docs",
        "timeout": 2.0,
    }
    old = resolve(TargetOptions(name="old", config=str(path)), environ=environ)
    assert old.target == snodo.Sse("http://127.0.0.1:3001/sse")
    with pytest.raises(UsageError, match=r"no server 'nope' in .* \(servers: git, docs, old\)"):
        resolve(TargetOptions(name="nope", config=str(path)), environ=environ)
    with pytest.raises(UsageError, match="REPO"):  # a missing variable, named
        resolve(TargetOptions(name="git", config=str(path)), environ={"TOKEN": "t"})


def test_finding_the_config(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"--config .*: no such file"):
        find_config(str(tmp_path / "missing.json"))
    (tmp_path / "mine.json").write_text("{}")
    assert (
        find_config(None, {"SNODO_CONFIG": str(tmp_path / "mine.json")}) == tmp_path / "mine.json"
    )
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(UsageError, match=r"bad\.json: not JSON"):
        resolve(TargetOptions(name="x", config=str(bad)), environ={})
