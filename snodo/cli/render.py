"""What the ``snodo`` command prints: pure functions from results (plain dicts) to text.

Tables on a terminal (``width`` given: aligned columns, a header, the last column cut to the
width), one tab-separated line per item otherwise (for ``grep``/``cut``). Colour only when the
caller asks (it decides: a terminal and no ``NO_COLOR``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "SERVER_INFO_META",
    "blob_size",
    "call_result",
    "content_blocks",
    "event_line",
    "info",
    "info_result",
    "listing",
    "prompt_result",
    "read_result",
    "size",
    "table",
]

SERVER_INFO_META = "io.modelcontextprotocol/serverInfo"
_BOLD, _DIM, _RED, _RESET = "\x1b[1m", "\x1b[2m", "\x1b[31m", "\x1b[0m"


def _paint(text: str, code: str, color: bool) -> str:
    return f"{code}{text}{_RESET}" if color and text else text


def _line(value: Any) -> str:
    """The first line of a description, whitespace collapsed."""
    text = "" if value is None else str(value)
    return " ".join(text.strip().splitlines()[0].split()) if text.strip() else ""


def _cut(text: str, room: int) -> str:
    if room <= 0:
        return ""
    return text if len(text) <= room else text[: max(room - 1, 0)] + "…"


def table(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    width: int | None = None,
    color: bool = False,
) -> str:
    """``rows`` under ``header``: aligned and cut to ``width`` (the last column gives way), or
    tab-separated without a header when ``width`` is None."""
    if width is None:
        return "\n".join("\t".join(row).rstrip("\t") for row in rows)
    if not rows:
        return ""
    columns = len(header)
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(columns)]
    fixed = sum(widths[:-1]) + 2 * (columns - 1)
    room = max(width - fixed, 10)
    lines = []
    for n, row in enumerate([header, *rows]):
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])]
        line = "  ".join([*cells, _cut(row[-1], room)]).rstrip()
        lines.append(_paint(line, _BOLD, color) if n == 0 else line)
    return "\n".join(lines)


def _required_tool(item: Mapping[str, Any]) -> str:
    schema = item.get("inputSchema")
    required = schema.get("required") if isinstance(schema, Mapping) else None
    return ",".join(str(r) for r in required) if isinstance(required, list) else ""


def _required_prompt(item: Mapping[str, Any]) -> str:
    arguments = item.get("arguments") or []
    return ",".join(
        str(a.get("name"))
        for a in arguments
        if isinstance(a, Mapping) and a.get("required") is True
    )


def listing(
    kind: str,
    items: Sequence[Mapping[str, Any]],
    *,
    width: int | None = None,
    color: bool = False,
) -> str:
    """The table of ``snodo tools|resources|templates|prompts``: name (the URI or template for
    resources), title, required arguments (tools, prompts) or MIME type, the description."""
    rows: list[list[str]] = []
    if kind in ("tools", "prompts"):
        header = ["NAME", "TITLE", "REQUIRED", "DESCRIPTION"]
        required = _required_tool if kind == "tools" else _required_prompt
        for item in items:
            rows.append(
                [
                    str(item.get("name", "")),
                    _line(item.get("title") or (item.get("annotations") or {}).get("title")),
                    required(item),
                    _line(item.get("description")),
                ]
            )
    else:
        key = "uri" if kind == "resources" else "uriTemplate"
        header = [key.upper() if kind == "resources" else "TEMPLATE", "NAME", "MIME", "DESCRIPTION"]
        for item in items:
            rows.append(
                [
                    str(item.get(key, "")),
                    str(item.get("name", "")),
                    str(item.get("mimeType", "")),
                    _line(item.get("description")),
                ]
            )
    if width is not None and rows and not any(row[1] for row in rows):
        header = [header[0], *header[2:]]  # no item has a title (or, for resources, a name)
        rows = [[row[0], *row[2:]] for row in rows]
    if width is not None and not rows:
        return _paint(f"(no {kind})", _DIM, color)
    return table(header, rows, width=width, color=color)


def blob_size(data: str) -> int:
    """The number of bytes base64 ``data`` decodes to (without decoding it)."""
    text = data.strip()
    return max(len(text) * 3 // 4 - text[-2:].count("="), 0)


def size(n: int) -> str:
    """``n`` bytes for people: ``512 B``, ``1.5 KiB``, ``2.0 MiB``."""
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{n / (1024 * 1024):.1f} MiB"


def _resource(resource: Mapping[str, Any], color: bool) -> str:
    uri = str(resource.get("uri", ""))
    mime = resource.get("mimeType")
    if "text" in resource:
        head = _paint(f"[resource {uri}{' ' + str(mime) if mime else ''}]", _DIM, color)
        return f"{head}\n{resource['text']}"
    blob = resource.get("blob")
    n = blob_size(blob) if isinstance(blob, str) else 0
    return _paint(f"[resource {uri}: {mime or 'binary'}, {size(n)}]", _DIM, color)


def content_blocks(blocks: Sequence[Any], *, color: bool = False) -> str:
    """Content blocks as text: text as it is; images and audio as their type and size;
    resource links and embedded resources by URI (an embedded text resource with its text)."""
    out: list[str] = []
    for block in blocks:
        if not isinstance(block, Mapping):
            out.append(json.dumps(block))
            continue
        kind = block.get("type")
        if kind == "text":
            out.append(str(block.get("text", "")))
        elif kind in ("image", "audio"):
            data = block.get("data")
            n = blob_size(data) if isinstance(data, str) else 0
            mime = block.get("mimeType", "?")
            out.append(_paint(f"[{kind} {mime}, {size(n)}]", _DIM, color))
        elif kind == "resource_link":
            details = ", ".join(
                str(block[key]) for key in ("name", "mimeType") if block.get(key) is not None
            )
            link = (
                f"[resource link {block.get('uri', '')}{' (' + details + ')' if details else ''}]"
            )
            out.append(_paint(link, _DIM, color))
        elif kind == "resource" and isinstance(block.get("resource"), Mapping):
            out.append(_resource(block["resource"], color))
        else:
            out.append(json.dumps(block, ensure_ascii=False))
    return "\n".join(out)


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)


def call_result(result: Mapping[str, Any], *, color: bool = False) -> str:
    """A ``tools/call`` result: its content, then ``structuredContent`` pretty-printed (unless
    a text block already is that JSON)."""
    blocks = result.get("content") or []
    parts = [content_blocks(blocks, color=color)] if blocks else []
    if "structuredContent" in result:
        structured = result["structuredContent"]
        echoed = False
        for block in blocks:
            if isinstance(block, Mapping) and block.get("type") == "text":
                try:
                    echoed = echoed or json.loads(str(block.get("text"))) == structured
                except ValueError:
                    pass
        if echoed:
            parts = [
                content_blocks([b for b in blocks if not _is_json_of(b, structured)], color=color)
            ]
        parts.append(_pretty(structured))
    return "\n".join(part for part in parts if part)


def _is_json_of(block: Any, value: Any) -> bool:
    if not (isinstance(block, Mapping) and block.get("type") == "text"):
        return False
    try:
        return bool(json.loads(str(block.get("text"))) == value)
    except ValueError:
        return False


def read_result(result: Mapping[str, Any], *, color: bool = False) -> str:
    """A ``resources/read`` result: each text content as it is, each blob as type and size."""
    contents = result.get("contents") or []
    if len(contents) == 1 and isinstance(contents[0], Mapping) and "text" in contents[0]:
        return str(contents[0]["text"])
    return "\n".join(
        _resource(item, color) if isinstance(item, Mapping) else json.dumps(item)
        for item in contents
    )


def prompt_result(result: Mapping[str, Any], *, color: bool = False) -> str:
    """A ``prompts/get`` result: its description, then each message as ``role:`` and content."""
    parts = []
    if result.get("description"):
        parts.append(_paint(str(result["description"]), _DIM, color))
    for message in result.get("messages") or []:
        if not isinstance(message, Mapping):
            continue
        content = message.get("content")
        blocks = content if isinstance(content, list) else [content]
        role = _paint(f"{message.get('role', '?')}:", _BOLD, color)
        parts.append(f"{role}\n{content_blocks(blocks, color=color)}")
    return "\n".join(parts)


def info_result(
    version: str,
    server_info: Mapping[str, Any] | None,
    capabilities: Mapping[str, Any] | None,
    instructions: str | None,
) -> dict[str, Any]:
    """What ``snodo info --json`` prints: the shape of an ``InitializeResult`` on every version
    (on 2026-07-28 the server info comes from discovery's ``_meta``)."""
    result: dict[str, Any] = {
        "protocolVersion": version,
        "serverInfo": dict(server_info or {}),
        "capabilities": dict(capabilities or {}),
    }
    if instructions is not None:
        result["instructions"] = instructions
    return result


def info(result: Mapping[str, Any], *, color: bool = False) -> str:
    """``snodo info``: version, server, capabilities (one line each), instructions."""
    server = result.get("serverInfo") or {}
    name = " ".join(str(server[k]) for k in ("name", "version") if server.get(k))
    title = f" ({server['title']})" if server.get("title") else ""
    lines = [
        f"{_paint('protocol', _BOLD, color)}      {result.get('protocolVersion', '?')}",
        f"{_paint('server', _BOLD, color)}        {name or '?'}{title}",
    ]
    capabilities = result.get("capabilities") or {}
    label = _paint("capabilities", _BOLD, color)
    if not capabilities:
        lines.append(f"{label}  (none)")
    for n, (key, value) in enumerate(capabilities.items()):
        flags = (
            " ".join(f"{k}={json.dumps(v)}" for k, v in value.items())
            if isinstance(value, Mapping)
            else json.dumps(value)
        )
        lines.append(f"{label if n == 0 else ' ' * 12}  {key}{' ' + flags if flags else ''}")
    if result.get("instructions"):
        lines.append(_paint("instructions", _BOLD, color))
        lines.append(str(result["instructions"]))
    return "\n".join(lines)


def event_line(method: str, params: Mapping[str, Any]) -> str:
    """One listen event as a line: the method, then the params as compact JSON (if any)."""
    shown = {k: v for k, v in params.items() if k != "_meta"}
    return f"{method} {json.dumps(shown, ensure_ascii=False)}" if shown else method
