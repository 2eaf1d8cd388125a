"""The MCP server the notes application talks to: notes kept in memory (a crash forgets them)."""

from __future__ import annotations

from typing import Any

from snodo.server import Context, Runtime

runtime = Runtime("notes", "0.1.0")
NOTES: list[str] = []


@runtime.tool(
    input_schema={
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    }
)
def add_note(arguments: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """Keep a note; how many there are now."""
    NOTES.append(str(arguments["text"]))
    return {"count": len(NOTES)}


@runtime.tool(input_schema={"type": "object", "properties": {}})
def list_notes(arguments: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """Every note kept so far."""
    return {"notes": list(NOTES)}
