"""``snodo.protocol.serving.request_state``: the signed stateless-era ``requestState`` token."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from snodo.protocol.errors import McpError
from snodo.protocol.serving.request_state import (
    INVALID_STATE,
    arguments_digest,
    decode_state,
    encode_state,
)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _signed(secret: bytes, payload: bytes) -> str:
    """A token signed as the module signs one, around any payload."""
    body = _b64(payload)
    return body + "." + _b64(hmac.new(secret, body.encode(), hashlib.sha256).digest())


def test_request_state_round_trip_and_refusals() -> None:
    token = encode_state(b"secret", {"m": "tools/call", "a": {"k": [1, "x"]}})
    assert decode_state(b"secret", token) == {"m": "tools/call", "a": {"k": [1, "x"]}}
    for bad in (token + "x", token.replace(".", ""), "." + token.split(".")[1], None, "é.x"):
        with pytest.raises(McpError) as info:
            decode_state(b"secret", bad)
        assert info.value.code == -32602 and info.value.message == INVALID_STATE
    with pytest.raises(McpError):
        decode_state(b"other", token)


def test_a_correctly_signed_token_must_still_hold_a_json_object() -> None:
    assert decode_state(b"secret", _signed(b"secret", b'{"r": 1}')) == {"r": 1}
    for payload in (b"[1, 2]", b"not json", b'"text"'):
        with pytest.raises(McpError) as info:
            decode_state(b"secret", _signed(b"secret", payload))
        assert info.value.message == INVALID_STATE


def test_the_token_is_signed_not_encrypted() -> None:
    """The client can read its own answers in the token, but cannot change them."""
    token = encode_state(b"s", {"a": {"elicit-1": {"action": "accept"}}})
    body = token.split(".")[0]
    assert b'"accept"' in base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    forged = _b64(b'{"a":{"elicit-1":{"action":"decline"}}}') + "." + token.split(".")[1]
    with pytest.raises(McpError):
        decode_state(b"s", forged)


def test_request_state_encodes_big_integers() -> None:
    token = encode_state(b"s", {"a": {"k": 2**70}})
    assert decode_state(b"s", token)["a"]["k"] in (2**70, float(2**70))


def test_a_payload_that_is_not_json_is_a_value_or_type_error() -> None:
    with pytest.raises((TypeError, ValueError)):
        encode_state(b"s", {"a": {"k": {1, 2}}})


def test_arguments_digest_is_order_independent_and_robust() -> None:
    assert arguments_digest({"a": 1, "b": 2}) == arguments_digest({"b": 2, "a": 1})
    assert arguments_digest({"a": 1}) != arguments_digest({"a": 2})
    assert arguments_digest({"n": 2**80}) != arguments_digest({"n": 2**80 + 1})
    assert isinstance(arguments_digest({"s": {1, 2}}), str)
    assert arguments_digest(None) != arguments_digest({})
