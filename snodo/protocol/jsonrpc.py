"""The JSON codec and the JSON-RPC 2.0 envelopes every snodo message goes through.

``decode`` takes untrusted bytes: it refuses oversized input, invalid UTF-8, invalid JSON,
NaN/Infinity, lone surrogates, nesting deeper than 1024 and trailing data, and every integer it
returns is exact (orjson silently turns integer literals beyond 64 bits into floats, so a message
that may hold one takes an exact, slower parser). ``encode`` is one orjson call on the common
path. Duplicate object keys are accepted on both paths and the last one wins (orjson's and
``JSON.parse``'s behaviour). ``classify`` checks the envelope and says what the message is.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from json import JSONDecodeError
from json import decoder as _json_decoder
from typing import Any, Final, TypeAlias, TypeGuard

import orjson

from snodo.protocol.errors import INVALID_REQUEST, MESSAGES, PARSE_ERROR, McpError

__all__ = [
    "MAX_DEPTH",
    "MAX_ID_LENGTH",
    "MAX_INT_DIGITS",
    "MAX_MESSAGE_BYTES",
    "DecodeError",
    "ErrorResponse",
    "Message",
    "Notification",
    "Request",
    "RequestId",
    "Response",
    "cancelled_notification",
    "classify",
    "decode",
    "decode_message",
    "encode",
    "encode_line",
    "error_response",
    "is_valid_id",
    "notification",
    "refused_response_id",
    "request",
    "result_response",
    "unbatch",
]

RequestId: TypeAlias = str | int

MAX_MESSAGE_BYTES: Final = 16 * 1024 * 1024
#: An integer literal with more digits than this (sign not counted) is refused.
MAX_INT_DIGITS: Final = 64
#: A string id longer than this is invalid.
MAX_ID_LENGTH: Final = 256
#: Deepest nesting of arrays and objects accepted (orjson's native bound), decoding and encoding.
MAX_DEPTH: Final = 1024

_INT_BOUND: Final = 10**MAX_INT_DIGITS  # |n| < this  <=>  n has at most MAX_INT_DIGITS digits
_ORJSON_INT_MIN: Final = -(2**63)
_ORJSON_INT_MAX: Final = 2**64 - 1
_ENCODE_OPTIONS: Final = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
_FRAGMENT_HEIGHT: Final = 128  # orjson refuses to encode 255 levels; deeper input is chunked


class DecodeError(ValueError):
    """Bytes that are not one acceptable JSON-RPC message.

    ``code`` is PARSE_ERROR (-32700) for bad JSON, size or depth and INVALID_REQUEST (-32600) for a
    bad envelope; ``reason`` is a short human text; ``id`` is the message's id when the envelope
    was refused but carried a valid one (so a server can answer it), else None.
    """

    code: int
    reason: str
    id: RequestId | None

    def __init__(self, code: int, reason: str, *, id: RequestId | None = None) -> None:
        super().__init__(code, reason)
        self.code = code
        self.reason = reason
        self.id = id

    def __str__(self) -> str:
        return f"[{self.code}] {self.reason}"

    def __reduce__(self) -> Any:
        return (_rebuild_decode_error, (self.code, self.reason, self.id))

    def to_mcp_error(self) -> McpError:
        """The JSON-RPC error to answer this message with (``-32700``/``-32600`` and the reason)."""
        return McpError(self.code, f"{MESSAGES.get(self.code, 'Error')}: {self.reason}")


def _rebuild_decode_error(code: int, reason: str, id: RequestId | None) -> DecodeError:
    return DecodeError(code, reason, id=id)


def _parse_error(reason: str) -> DecodeError:
    return DecodeError(PARSE_ERROR, reason)


# --------------------------------------------------------------------------------------------
# Encoding


def encode(message: Any) -> bytes:
    """``message`` as compact UTF-8 JSON; exact for big ints, ValueError for NaN/inf.

    TypeError for values JSON cannot hold (non-str keys, lone surrogates, other objects);
    ValueError for non-finite floats, integers over MAX_INT_DIGITS digits and nesting deeper than
    MAX_DEPTH (or a reference cycle).
    """
    return _encode(message, _ENCODE_OPTIONS, b"")


def encode_line(message: Any) -> bytes:
    """``encode(message)`` plus ``b"\\n"``; JSON output never holds a raw newline."""
    return _encode(message, _ENCODE_OPTIONS | orjson.OPT_APPEND_NEWLINE, b"\n")


def _encode(message: Any, option: int, tail: bytes) -> bytes:
    try:
        out = orjson.dumps(message, option=option)
    except TypeError:
        out = None
    if out is None:
        # Integers beyond 64 bits, nesting over orjson's 254 levels, or a real TypeError: the
        # exact path rebuilds what orjson cannot take and lets orjson raise for the rest.
        return orjson.dumps(_prepare(message), option=_ENCODE_OPTIONS) + tail
    # orjson writes NaN and infinities as null; only then is the walk needed.
    if b"null" in out:
        _refuse_non_finite(message)
    return out


def _non_finite(value: float) -> ValueError:
    return ValueError(f"Out of range float value is not JSON compliant: {value!r}")


def _refuse_non_finite(root: Any) -> None:
    """Raise ValueError if a float in ``root`` (already encodable by orjson) is NaN or infinite."""
    containers = (dict, list, tuple)
    stack: list[Any] = [root] if isinstance(root, containers) else [[root]]
    pop = stack.pop
    push = stack.append
    while stack:
        node = pop()
        for value in node.values() if isinstance(node, dict) else node:
            kind = type(value)
            if kind is str or kind is int or kind is bool or value is None:
                continue
            if isinstance(value, float):
                if value - value != 0.0:  # NaN and +-inf give NaN here
                    raise _non_finite(value)
            elif isinstance(value, containers):
                push(value)


def _int_fragment(value: int) -> orjson.Fragment:
    if not -_INT_BOUND < value < _INT_BOUND:
        raise ValueError(f"Integer with more than {MAX_INT_DIGITS} digits is not encoded")
    return orjson.Fragment(int.__repr__(value).encode("ascii"))


def _leaf(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        if _ORJSON_INT_MIN <= value <= _ORJSON_INT_MAX:
            return value
        return _int_fragment(value)
    if isinstance(value, float) and not math.isfinite(value):
        raise _non_finite(value)
    return value


class _Frame:
    """One open container while ``_prepare`` walks a message without recursion."""

    __slots__ = ("height", "items", "key", "out")

    def __init__(self, source: dict[Any, Any] | list[Any] | tuple[Any, ...]) -> None:
        self.items: Iterator[Any] = iter(source.items() if isinstance(source, dict) else source)
        self.out: dict[Any, Any] | list[Any] = {} if isinstance(source, dict) else []
        self.height = 1
        self.key: Any = None

    def put(self, value: Any) -> None:
        if isinstance(self.out, dict):
            self.out[self.key] = value
        else:
            self.out.append(value)


def _prepare(root: Any) -> Any:
    """A copy of ``root`` orjson can encode exactly: big ints and deep subtrees become Fragments.

    Refuses non-finite floats, over-long integers and nesting deeper than MAX_DEPTH; anything
    else (non-str keys, other objects) is left for orjson to refuse.
    """
    if not isinstance(root, (dict, list, tuple)):
        return _leaf(root)
    stack = [_Frame(root)]
    while True:
        frame = stack[-1]
        is_dict = isinstance(frame.out, dict)
        for item in frame.items:
            if is_dict:
                frame.key, item = item
            if isinstance(item, (dict, list, tuple)):
                if len(stack) >= MAX_DEPTH:
                    raise ValueError(
                        f"Nesting deeper than {MAX_DEPTH} levels (or a reference cycle)"
                    )
                stack.append(_Frame(item))
                break
            frame.put(_leaf(item))
        else:
            stack.pop()
            done: Any = frame.out
            height = frame.height
            if height >= _FRAGMENT_HEIGHT:
                done = orjson.Fragment(orjson.dumps(done, option=_ENCODE_OPTIONS))
                height = 0
            if not stack:
                return done
            parent = stack[-1]
            parent.height = max(parent.height, height + 1)
            parent.put(done)


# --------------------------------------------------------------------------------------------
# Decoding

# Digits and "-" -> "0", every other byte -> " ": a literal that could lie beyond orjson's 64-bit
# range (20+ digits, or "-" and 19+ digits) becomes a run of 20 "0"s, found by one substring
# search (several times faster than a regex scan; false positives only cost the slower path).
_SCAN_TABLE: Final = bytes(0x30 if 0x30 <= b <= 0x39 or b == 0x2D else 0x20 for b in range(256))
_LONG_RUN: Final = b"0" * 20
# A JSON string, or from an unterminated quote to the end (never fails once at a quote, so
# substitution stays linear on hostile input).
_STRING_TOKEN: Final = re.compile(rb'"[^"\\]*(?:\\[\s\S][^"\\]*)*(?:"|\\?\Z)')


def decode(
    data: bytes | bytearray | memoryview | str, *, max_bytes: int = MAX_MESSAGE_BYTES
) -> Any:
    """One JSON value from untrusted input; DecodeError (PARSE_ERROR) if it is not acceptable.

    Every integer in the result is an exact ``int`` (literals over MAX_INT_DIGITS digits are
    refused), no float is NaN or infinite, no string holds a lone surrogate.
    """
    raw: bytes | bytearray
    if type(data) is bytes or isinstance(data, (bytes, bytearray)):
        raw = data
    elif isinstance(data, str):
        if len(data) > max_bytes:
            raise _parse_error(f"message larger than {max_bytes} bytes")
        encoded = _encode_text(data)
        if encoded is None:
            raise _parse_error("invalid UTF-8: lone surrogate in text")
        raw = encoded
    elif isinstance(data, memoryview):
        if data.nbytes > max_bytes:
            raise _parse_error(f"message larger than {max_bytes} bytes")
        raw = data.tobytes()
    else:
        raise TypeError(f"decode takes bytes, bytearray, memoryview or str, not {type(data)!r}")
    if len(raw) > max_bytes:
        raise _parse_error(f"message larger than {max_bytes} bytes")
    if _LONG_RUN in raw.translate(_SCAN_TABLE) and (
        _LONG_RUN in _STRING_TOKEN.sub(b'""', raw).translate(_SCAN_TABLE)
    ):
        # A long digit run outside strings: orjson could lose precision, parse exactly.
        return _decode_exact(raw)
    # A long run only inside strings is harmless: if orjson accepts the text it is valid JSON,
    # and then the string substitution above found every string exactly.
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        reason = f"invalid JSON: {exc.msg} at byte {exc.pos}"
    raise _parse_error(reason)


# The C string scanner behind json.loads (handles escapes, refuses control characters).
_scanstring: Final[Callable[[str, int, bool], tuple[str, int]]] = _json_decoder.scanstring  # type: ignore[attr-defined]


def _encode_text(data: str) -> bytes | None:
    try:
        return data.encode("utf-8")
    except UnicodeEncodeError:
        return None


_WS: Final = re.compile(r"[ \t\n\r]*")
# The pattern always matches (possibly empty), so .end() is always there.
_skip_ws: Final[Callable[[str, int], re.Match[str]]] = _WS.match  # type: ignore[assignment]
_NUMBER: Final = re.compile(r"(-?(?:0|[1-9][0-9]*))(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def _decode_exact(raw: bytes | bytearray) -> Any:
    """The slow exact path: same acceptance rules as orjson, integers kept exact."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        reason = f"invalid UTF-8 at byte {exc.start}"
    else:
        try:
            return _parse_exact(text)
        except DecodeError:
            raise
        except (ValueError, RecursionError, OverflowError) as exc:  # defensive: never escapes
            reason = f"invalid JSON: {type(exc).__name__}"
    raise _parse_error(reason)


def _scan_string(text: str, pos: int) -> tuple[str, int]:
    """The string whose opening quote is at ``pos - 1``, and the index after its closing quote."""
    try:
        value, end = _scanstring(text, pos, True)
    except JSONDecodeError as exc:
        reason = f"invalid JSON: {exc.msg} at char {exc.pos}"
    else:
        if _SURROGATE.search(value) is None:
            return value, end
        reason = f"invalid JSON: lone surrogate in string at char {pos - 1}"
    raise _parse_error(reason)


def _scan_key(text: str, pos: int) -> tuple[str, int]:
    """An object key and its colon at ``pos``; returns the key and where its value starts."""
    if not text.startswith('"', pos):
        raise _parse_error(f"invalid JSON: expected a string key at char {pos}")
    key, pos = _scan_string(text, pos + 1)
    pos = _skip_ws(text, pos).end()
    if not text.startswith(":", pos):
        raise _parse_error(f"invalid JSON: expected ':' at char {pos}")
    return key, _skip_ws(text, pos + 1).end()


def _scan_number(match: re.Match[str]) -> int | float:
    whole, fraction, exponent = match.groups()
    if fraction is None and exponent is None:
        if len(whole) - whole.startswith("-") > MAX_INT_DIGITS:
            raise _parse_error(
                f"integer literal longer than {MAX_INT_DIGITS} digits at char {match.start()}"
            )
        return int(whole)
    number = float(match.group())
    if math.isinf(number):
        raise _parse_error(f"invalid JSON: number is infinity at char {match.start()}")
    return number


def _parse_exact(text: str) -> Any:
    """An iterative JSON parser (no recursion, depth bounded by MAX_DEPTH)."""
    ws = _skip_ws
    end_of_text = len(text)
    stack: list[dict[str, Any] | list[Any]] = []
    keys: list[str] = []  # the pending key of each open container ("" for arrays)
    value: Any
    pos = ws(text, 0).end()
    while True:
        char = text[pos : pos + 1]
        if char == "{" or char == "[":
            if len(stack) >= MAX_DEPTH:
                raise _parse_error(f"nesting deeper than {MAX_DEPTH} at char {pos}")
            pos = ws(text, pos + 1).end()
            if char == "{":
                if text.startswith("}", pos):
                    value, pos = {}, pos + 1
                else:
                    key, pos = _scan_key(text, pos)
                    stack.append({})
                    keys.append(key)
                    continue
            elif text.startswith("]", pos):
                value, pos = [], pos + 1
            else:
                stack.append([])
                keys.append("")
                continue
        elif char == '"':
            value, pos = _scan_string(text, pos + 1)
        elif (number := _NUMBER.match(text, pos)) is not None:
            value, pos = _scan_number(number), number.end()
        elif text.startswith("true", pos):
            value, pos = True, pos + 4
        elif text.startswith("false", pos):
            value, pos = False, pos + 5
        elif text.startswith("null", pos):
            value, pos = None, pos + 4
        elif pos >= end_of_text:
            raise _parse_error("invalid JSON: unexpected end of input")
        else:
            raise _parse_error(f"invalid JSON: unexpected character at char {pos}")
        # A complete value: store it, closing every container that ends here.
        while True:
            pos = ws(text, pos).end()
            if not stack:
                if pos != end_of_text:
                    raise _parse_error(
                        f"invalid JSON: unexpected content after document at char {pos}"
                    )
                return value
            top = stack[-1]
            char = text[pos : pos + 1]
            if isinstance(top, dict):
                top[keys[-1]] = value
                if char == ",":
                    keys[-1], pos = _scan_key(text, ws(text, pos + 1).end())
                    break
                closer = "}"
            else:
                top.append(value)
                if char == ",":
                    pos = ws(text, pos + 1).end()
                    break
                closer = "]"
            if char != closer:
                if pos >= end_of_text:
                    raise _parse_error("invalid JSON: unexpected end of input")
                raise _parse_error(f"invalid JSON: expected ',' or '{closer}' at char {pos}")
            value = stack.pop()
            keys.pop()
            pos += 1


# --------------------------------------------------------------------------------------------
# Envelopes


@dataclass(frozen=True, slots=True)
class Request:
    """A JSON-RPC request: it carries an id and expects a response."""

    id: RequestId
    method: str
    params: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class Notification:
    """A JSON-RPC notification: a method without an id, never answered."""

    method: str
    params: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class Response:
    """A successful JSON-RPC response; MCP results are always objects."""

    id: RequestId
    result: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ErrorResponse:
    """A JSON-RPC error response; ``id`` is None when the peer could not read the request's id."""

    id: RequestId | None
    error: dict[str, Any]


Message: TypeAlias = Request | Notification | Response | ErrorResponse


def is_valid_id(x: object) -> TypeGuard[RequestId]:
    """A str of at most MAX_ID_LENGTH characters, or an int (not bool) of at most MAX_INT_DIGITS digits."""
    if isinstance(x, str):
        return len(x) <= MAX_ID_LENGTH
    return isinstance(x, int) and not isinstance(x, bool) and -_INT_BOUND < x < _INT_BOUND


def _invalid(reason: str, raw_id: object = None) -> DecodeError:
    valid_id = raw_id if is_valid_id(raw_id) else None
    return DecodeError(INVALID_REQUEST, reason, id=valid_id)


def unbatch(obj: Any) -> list[Any]:
    """The messages one decoded JSON value holds: the value itself, or a batch's elements.

    A batch (a JSON array, which only 2025-03-26 defines) is read on every version: snodo never
    sends one, and refusing a server's would lose the answers in it (docs/decisions/0039).
    DecodeError(INVALID_REQUEST) for an empty batch; the elements are not checked here, so one
    bad element is refused by :func:`classify` alone and the others are kept.
    """
    if type(obj) is not list:
        return [obj]
    if not obj:
        raise _invalid("empty batch (a JSON array with no message)")
    return obj


def classify(obj: Any) -> Message:
    """Check a decoded message's JSON-RPC 2.0 envelope and say what it is.

    Raises DecodeError(INVALID_REQUEST) with a reason for any other shape, including an array
    (a batch is split with :func:`unbatch` first; an array inside one is refused here).
    """
    if not isinstance(obj, dict):
        if isinstance(obj, list):
            raise _invalid("batch (JSON array) messages are not supported")
        raise _invalid("message is not a JSON object")
    raw_id = obj.get("id")
    if obj.get("jsonrpc") != "2.0":
        raise _invalid('"jsonrpc" must be "2.0"', raw_id)
    if "method" in obj:
        method = obj["method"]
        if not isinstance(method, str):
            raise _invalid('"method" must be a string', raw_id)
        if "result" in obj or "error" in obj:
            raise _invalid('a request cannot also carry "result" or "error"', raw_id)
        params = obj.get("params")
        if "params" in obj and not isinstance(params, dict):
            raise _invalid('"params" must be an object', raw_id)
        if "id" not in obj:
            return Notification(method, params)
        if not is_valid_id(raw_id):
            raise _invalid('invalid "id": must be a string or an integer')
        return Request(raw_id, method, params)
    has_result = "result" in obj
    has_error = "error" in obj
    if has_result and has_error:
        raise _invalid('a response cannot carry both "result" and "error"', raw_id)
    if not has_result and not has_error:
        raise _invalid('message has no "method" and neither "result" nor "error"', raw_id)
    if "id" not in obj:
        raise _invalid('a response needs an "id"')
    if has_result:
        if not is_valid_id(raw_id):
            raise _invalid('invalid "id": must be a string or an integer')
        result = obj["result"]
        if not isinstance(result, dict):
            raise _invalid('"result" must be an object', raw_id)
        return Response(raw_id, result)
    if raw_id is not None and not is_valid_id(raw_id):
        raise _invalid('invalid "id": must be a string, an integer or null')
    error = obj["error"]
    if not isinstance(error, dict):
        raise _invalid('"error" must be an object', raw_id)
    code = error.get("code")
    if not isinstance(code, int) or isinstance(code, bool):
        raise _invalid('"error.code" must be an integer', raw_id)
    if not isinstance(error.get("message"), str):
        raise _invalid('"error.message" must be a string', raw_id)
    return ErrorResponse(raw_id, error)


def refused_response_id(obj: Any) -> RequestId | None:
    """The id of a message that ``classify`` refused but that is shaped as a response to one of
    our requests (no "method", a valid id): the caller of that request is failed at once rather
    than left waiting for an answer that will never be valid. None for anything else."""
    if not isinstance(obj, dict) or "method" in obj:
        return None
    raw_id = obj.get("id")
    return raw_id if is_valid_id(raw_id) else None


def decode_message(
    data: bytes | bytearray | memoryview | str, *, max_bytes: int = MAX_MESSAGE_BYTES
) -> tuple[Any, Message]:
    """``decode`` then ``classify``: the raw dict and what it is."""
    obj = decode(data, max_bytes=max_bytes)
    return obj, classify(obj)


# --------------------------------------------------------------------------------------------
# Builders


def _checked_id(id: RequestId) -> RequestId:
    if not is_valid_id(id):
        raise ValueError(f"invalid JSON-RPC id: {id!r}")
    return id


def request(id: RequestId, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """A request message; "params" is left out when None."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": _checked_id(id), "method": method}
    if params is not None:
        message["params"] = params
    return message


def notification(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """A notification message; "params" is left out when None."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return message


def cancelled_notification(request_id: RequestId, reason: str | None = None) -> dict[str, Any]:
    """The session-era ``notifications/cancelled`` for a request the client gave up on (and the
    one that ends a ``subscriptions/listen`` stream over stdio)."""
    params: dict[str, Any] = {"requestId": _checked_id(request_id)}
    if reason is not None:
        params["reason"] = reason
    return notification("notifications/cancelled", params)


def result_response(id: RequestId, result: dict[str, Any]) -> dict[str, Any]:
    """A successful response carrying ``result``."""
    return {"jsonrpc": "2.0", "id": _checked_id(id), "result": result}


def error_response(id: RequestId | None, error: McpError | dict[str, Any]) -> dict[str, Any]:
    """An error response; an McpError becomes its wire form (``cause`` never goes out)."""
    wire = error.to_wire() if isinstance(error, McpError) else error
    return {"jsonrpc": "2.0", "id": None if id is None else _checked_id(id), "error": wire}
