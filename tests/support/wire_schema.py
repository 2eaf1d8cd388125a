"""Validate messages against each version's schema.json (kept in tests/data/schema/)."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import jsonschema

SCHEMA_DIR = Path(__file__).resolve().parents[1] / "data" / "schema"


@functools.cache
def schema(version: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((SCHEMA_DIR / version / "schema.json").read_text())
    return loaded


def _defs(version: str) -> tuple[str, dict[str, Any]]:
    s = schema(version)
    if "$defs" in s:
        return "$defs", s["$defs"]
    return "definitions", s["definitions"]


@functools.cache
def validator(version: str, definition: str) -> jsonschema.protocols.Validator:
    """A validator for ``#/$defs/<definition>`` of ``version``'s schema."""
    key, defs = _defs(version)
    root = {"$ref": f"#/{key}/{definition}", key: defs}
    cls = jsonschema.validators.validator_for(schema(version))
    v: jsonschema.protocols.Validator = cls(root)
    return v


def union_members(version: str, union: str) -> dict[str, str]:
    """method -> definition name for the members of a union such as ClientRequest."""
    _, defs = _defs(version)
    node = defs.get(union)
    if node is None:
        return {}
    refs = [x["$ref"] for x in node.get("anyOf", node.get("oneOf", []))]
    if not refs and "$ref" in node:
        refs = [node["$ref"]]
    members: dict[str, str] = {}
    for ref in refs:
        name = ref.rsplit("/", 1)[-1]
        method = defs[name].get("properties", {}).get("method", {}).get("const")
        if isinstance(method, str):
            members[method] = name
    return members


def check_client_message(version: str, message: dict[str, Any]) -> None:
    """Raise jsonschema.ValidationError unless ``message`` is a valid client message of ``version``."""
    if "id" in message:
        validator(version, "JSONRPCRequest").validate(message)
        definition = union_members(version, "ClientRequest").get(message["method"])
    else:
        validator(version, "JSONRPCNotification").validate(message)
        definition = union_members(version, "ClientNotification").get(message["method"])
    if definition is not None:
        validator(version, definition).validate(message)
    elif version != "2026-07-28":
        raise jsonschema.ValidationError(
            f"{message['method']} is not a client message of {version}"
        )
