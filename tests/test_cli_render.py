"""snodo.cli.render: what the ``snodo`` command prints, from plain result dicts. Pure."""

from __future__ import annotations

import base64

from snodo.cli import render

TOOLS = [
    {
        "name": "echo",
        "description": "Echo the text back.\nMore lines are left out.",
        "inputSchema": {"type": "object", "required": ["text"]},
    },
    {
        "name": "deploy",
        "title": "Deploy",
        "description": "Deploy a service after a long and winding explanation " * 3,
        "inputSchema": {"type": "object", "required": ["env", "version"]},
    },
]


def test_a_table_on_a_terminal_is_cut_to_its_width() -> None:
    text = render.listing("tools", TOOLS, width=60)
    lines = text.splitlines()
    assert lines[0].split() == ["NAME", "TITLE", "REQUIRED", "DESCRIPTION"]
    assert lines[1].split()[:3] == ["echo", "text", "Echo"]
    assert lines[1].endswith("Echo the text back.")  # the first line only
    assert all(len(line) <= 60 for line in lines)
    assert lines[2].endswith("…")
    assert lines[2].startswith("deploy  Deploy  env,version")


def test_without_a_terminal_rows_are_tab_separated_and_whole() -> None:
    text = render.listing("tools", TOOLS)
    rows = [line.split("\t") for line in text.splitlines()]
    assert rows[0] == ["echo", "", "text", "Echo the text back."]
    assert rows[1][:3] == ["deploy", "Deploy", "env,version"]
    assert not rows[1][3].endswith("…")
    assert "\x1b[" not in text


def test_a_column_nobody_fills_is_left_out_and_colour_only_when_asked() -> None:
    text = render.listing("tools", TOOLS[:1], width=80, color=True)
    assert text.splitlines()[0] == "\x1b[1mNAME  REQUIRED  DESCRIPTION\x1b[0m"
    assert render.listing("prompts", [], width=80) == "(no prompts)"
    assert render.listing("prompts", []) == ""


def test_resources_templates_and_prompts() -> None:
    resources = [{"uri": "notes://a", "name": "a", "mimeType": "text/plain", "description": "A"}]
    assert render.listing("resources", resources) == "notes://a\ta\ttext/plain\tA"
    templates = [{"uriTemplate": "notes://{n}", "name": "note"}]
    assert render.listing("templates", templates, width=80).splitlines() == [
        "TEMPLATE     NAME  MIME  DESCRIPTION",
        "notes://{n}  note",
    ]
    prompts = [
        {"name": "review", "arguments": [{"name": "code", "required": True}, {"name": "lang"}]}
    ]
    assert render.listing("prompts", prompts) == "review\t\tcode"


def test_content_blocks() -> None:
    png = base64.b64encode(b"x" * 2048).decode()
    blocks = [
        {"type": "text", "text": "hello"},
        {"type": "image", "data": png, "mimeType": "image/png"},
        {"type": "audio", "data": base64.b64encode(b"abcd").decode(), "mimeType": "audio/wav"},
        {"type": "resource_link", "uri": "file:///a.txt", "name": "a", "mimeType": "text/plain"},
        {
            "type": "resource",
            "resource": {"uri": "mem://t", "text": "inside", "mimeType": "text/plain"},
        },
        {
            "type": "resource",
            "resource": {"uri": "mem://b", "blob": base64.b64encode(b"\0" * 10).decode()},
        },
        {"type": "other", "x": 1},
    ]
    assert render.content_blocks(blocks).splitlines() == [
        "hello",
        "[image image/png, 2.0 KiB]",
        "[audio audio/wav, 4 B]",
        "[resource link file:///a.txt (a, text/plain)]",
        "[resource mem://t text/plain]",
        "inside",
        "[resource mem://b: binary, 10 B]",
        '{"type": "other", "x": 1}',
    ]


def test_sizes() -> None:
    for n in (0, 1, 2, 3, 4, 1000):
        assert render.blob_size(base64.b64encode(b"\xff" * n).decode()) == n
    assert [render.size(n) for n in (5, 1536, 3 * 1024 * 1024)] == ["5 B", "1.5 KiB", "3.0 MiB"]


def test_a_call_result_with_structured_content() -> None:
    echoed = {"content": [{"type": "text", "text": '{"sum": 3}'}], "structuredContent": {"sum": 3}}
    assert render.call_result(echoed) == '{\n  "sum": 3\n}'  # not printed twice
    both = {"content": [{"type": "text", "text": "done"}], "structuredContent": {"ok": True}}
    assert render.call_result(both) == 'done\n{\n  "ok": true\n}'
    assert render.call_result({"content": []}) == ""


def test_read_and_prompt_results() -> None:
    assert render.read_result({"contents": [{"uri": "a://", "text": "just text"}]}) == "just text"
    two = {
        "contents": [
            {"uri": "a://1", "text": "one", "mimeType": "text/plain"},
            {"uri": "a://2", "blob": "AAAA", "mimeType": "image/png"},
        ]
    }
    assert (
        render.read_result(two)
        == "[resource a://1 text/plain]\none\n[resource a://2: image/png, 3 B]"
    )
    prompt = {
        "description": "Review code.",
        "messages": [
            {"role": "user", "content": {"type": "text", "text": "Look at this"}},
            {"role": "assistant", "content": {"type": "resource_link", "uri": "x://y"}},
        ],
    }
    assert render.prompt_result(prompt) == (
        "Review code.\nuser:\nLook at this\nassistant:\n[resource link x://y]"
    )


def test_info() -> None:
    result = render.info_result(
        "2025-11-25",
        {"name": "srv", "version": "1.2", "title": "The server"},
        {"tools": {"listChanged": True}, "logging": {}},
        "Be nice.",
    )
    assert result == {
        "protocolVersion": "2025-11-25",
        "serverInfo": {"name": "srv", "version": "1.2", "title": "The server"},
        "capabilities": {"tools": {"listChanged": True}, "logging": {}},
        "instructions": "Be nice.",
    }
    assert render.info(result).splitlines() == [
        "protocol      2025-11-25",
        "server        srv 1.2 (The server)",
        "capabilities  tools listChanged=true",
        "              logging",
        "instructions",
        "Be nice.",
    ]
    bare = render.info(render.info_result("2026-07-28", None, None, None))
    assert bare.splitlines() == [
        "protocol      2026-07-28",
        "server        ?",
        "capabilities  (none)",
    ]


def test_event_lines() -> None:
    assert render.event_line("notifications/tools/list_changed", {}) == (
        "notifications/tools/list_changed"
    )
    line = render.event_line("notifications/resources/updated", {"uri": "a://", "_meta": {"x": 1}})
    assert line == 'notifications/resources/updated {"uri": "a://"}'
