"""The 2026-07-28 ``requestState`` token: everything a stateless server needs between rounds.

A token is ``base64url(JSON payload) + "." + base64url(HMAC-SHA256(secret, payload part))``,
both without padding. The payload carries the answers collected so far, the round count, and
what the state belongs to (method, tool/prompt name or resource uri, a digest of the
arguments). The client echoes it untouched; anything that fails the HMAC or does not decode to
the expected shape is refused with -32602 "Invalid requestState".

The token is signed, not encrypted: the client can read what it contains (its own answers and
the round count), but it cannot change it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from typing import Any

import orjson

from snodo.protocol.errors import McpError, invalid_params

__all__ = ["INVALID_STATE", "arguments_digest", "decode_state", "encode_state"]

INVALID_STATE = "Invalid requestState"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(secret: bytes, body: str) -> str:
    return _b64(hmac.new(secret, body.encode("ascii"), hashlib.sha256).digest())


def encode_state(secret: bytes, payload: dict[str, Any]) -> str:
    """Sign ``payload`` (a JSON object) into an opaque token.

    Raises ``TypeError``/``ValueError`` when the payload is not JSON (the answers in it come
    from the client, so the caller reports that as invalid params).
    """
    try:
        data = orjson.dumps(payload)
    except TypeError:  # integers beyond 64 bits: the stdlib encoder copes
        data = json.dumps(payload, separators=(",", ":"), allow_nan=False).encode()
    body = _b64(data)
    return body + "." + _mac(secret, body)


def decode_state(secret: bytes, token: object) -> dict[str, Any]:
    """Verify and decode a token; -32602 "Invalid requestState" for anything else."""
    if not isinstance(token, str) or not token.isascii():
        raise _invalid()
    body, dot, mac = token.partition(".")
    if not dot or not hmac.compare_digest(mac, _mac(secret, body)):
        raise _invalid()
    try:
        payload = orjson.loads(_unb64(body))
    except (ValueError, binascii.Error):
        raise _invalid() from None
    if not isinstance(payload, dict):
        raise _invalid()
    return payload


def arguments_digest(arguments: object) -> str:
    """A short digest of request arguments, so a state cannot be replayed with other arguments."""
    try:
        data = orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # integers beyond 64 bits, or Python objects from an in-process client
        try:
            data = json.dumps(
                arguments, sort_keys=True, separators=(",", ":"), default=repr
            ).encode()
        except (TypeError, ValueError):
            data = repr(arguments).encode()
    return _b64(hashlib.sha256(data).digest()[:16])


def _invalid() -> McpError:
    return invalid_params(INVALID_STATE)
