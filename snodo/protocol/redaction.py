"""Redaction of the credentials a client sent from what it keeps of a server's answer (pure).

A server's debug page may echo the request's headers back, and snodo keeps a little of an error
body (an McpError's message, data and cause, so its repr and the log lines too). Before anything
from a response is kept, every credential the client sent is replaced with ``[redacted]``: as
sent, percent-encoded (either hex case, ``+`` for spaces too), JSON-escaped (``\\/`` too) and
HTML-escaped. Values shorter than ``MIN_SECRET`` characters are left alone: they would redact
ordinary words. A server that echoes only part of a credential cannot be helped here.

Which values are credentials (``credentials``): the values of ``Authorization``,
``Proxy-Authorization``, ``Cookie``, ``DPoP``, ``X-Api-Key`` and ``Mcp-Session-Id`` (a session
credential, per the specification's security notes), and of any header whose name contains
``token``, ``secret``, ``key``, ``auth``, ``cookie``, ``password``, ``session`` or
``credential``; each whole, and the token after an auth scheme, each cookie's value and the
decoded ``Basic`` pair (and its password). ``form_credentials`` does the same for the fields of an
OAuth token request (``client_secret``, ``refresh_token``, ``code``, ``code_verifier``, ...).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import html
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final, TypeVar
from urllib.parse import quote, quote_plus

from snodo.protocol.errors import McpError

__all__ = [
    "CREDENTIAL_FIELDS",
    "CREDENTIAL_HEADERS",
    "CREDENTIAL_WORDS",
    "MARK",
    "MAX_DEPTH",
    "MIN_SECRET",
    "credentials",
    "excerpt",
    "form_credentials",
    "redact",
    "redact_bytes",
    "redact_error",
    "redact_value",
]

MARK: Final = "[redacted]"
#: Shorter values are never redacted (a 3-letter cookie would redact every word it is part of).
MIN_SECRET: Final = 8
#: Header names (lower-case) whose values are credentials.
CREDENTIAL_HEADERS: Final = frozenset(
    {"authorization", "proxy-authorization", "cookie", "dpop", "x-api-key", "mcp-session-id"}
)
#: A header or form field whose lower-cased name contains one of these is a credential too.
CREDENTIAL_WORDS: Final = (
    "token",
    "secret",
    "key",
    "auth",
    "cookie",
    "password",
    "passwd",
    "session",
    "credential",
)
#: OAuth request fields that carry secrets without saying so in their name.
CREDENTIAL_FIELDS: Final = frozenset({"code", "code_verifier", "assertion", "client_assertion"})
#: How deep ``redact_value`` follows nested values (deeper ones become ``MARK``).
MAX_DEPTH: Final = 64

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9!#$%&'*+.^_`|~-]*)[ \t]+(\S.*)$")
_PERCENT = re.compile(r"%[0-9A-F]{2}")
_T = TypeVar("_T")


def _is_credential_name(name: str) -> bool:
    lower = name.lower()
    return lower in CREDENTIAL_HEADERS or any(word in lower for word in CREDENTIAL_WORDS)


def _parts(value: str) -> list[str]:
    """A credential value and the secrets inside it (the token after a scheme, cookie values,
    the decoded Basic pair and its password)."""
    value = value.strip()
    found = [value]
    match = _SCHEME.match(value)
    if match is not None:
        scheme, rest = match.group(1).lower(), match.group(2).strip()
        found.append(rest)
        if scheme == "basic":
            try:
                pair = base64.b64decode(rest, validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError):
                pair = ""
            if pair:
                found.append(pair)
                found.append(pair.partition(":")[2])
    if "=" in value:  # cookies: name=value; name2=value2
        for piece in value.split(";"):
            found.append(piece.partition("=")[2].strip())
    return found


def _kept(values: Iterable[str]) -> list[str]:
    out: dict[str, None] = {}
    for value in values:
        if len(value) >= MIN_SECRET:
            out[value] = None
    return list(out)


def credentials(headers: Mapping[str, str]) -> list[str]:
    """The secret values among request headers (see the module docstring), each once."""
    found: list[str] = []
    for name, value in headers.items():
        if isinstance(value, str) and _is_credential_name(name):
            found.extend(_parts(value))
    return _kept(found)


def form_credentials(form: Mapping[str, str]) -> list[str]:
    """The secret values among the fields of an OAuth request form."""
    found = [
        value
        for name, value in form.items()
        if isinstance(value, str) and (name in CREDENTIAL_FIELDS or _is_credential_name(name))
    ]
    return _kept(found)


def _forms(secret: str) -> set[str]:
    """The ways ``secret`` may appear in a response: as is, percent-, JSON- and HTML-escaped."""
    percent = quote(secret, safe="")
    dumped = json.dumps(secret)[1:-1]
    forms = {
        secret,
        percent,
        _PERCENT.sub(lambda m: m.group(0).lower(), percent),
        quote_plus(secret, safe=""),
        dumped,
        dumped.replace("/", "\\/"),
        json.dumps(secret, ensure_ascii=False)[1:-1],
        html.escape(secret),
        html.escape(secret).replace("&#x27;", "&#39;"),
    }
    return {form for form in forms if len(form) >= MIN_SECRET}


class _Patterns:
    """Every form of every secret, longest first (a secret inside another goes after it)."""

    __slots__ = ("data", "text")

    def __init__(self, secrets: Iterable[str]) -> None:
        forms: set[str] = set()
        for secret in secrets:
            if isinstance(secret, str) and len(secret) >= MIN_SECRET:
                forms |= _forms(secret)
        self.text = sorted(forms, key=len, reverse=True)
        self.data = [form.encode("utf-8") for form in self.text]

    def str(self, text: str) -> str:
        for form in self.text:
            if form in text:
                text = text.replace(form, MARK)
        return text

    def bytes(self, data: bytes) -> bytes:
        mark = MARK.encode()
        for form in self.data:
            if form in data:
                data = data.replace(form, mark)
        return data

    def value(self, value: Any, depth: int = 0) -> Any:
        if not self.text:
            return value
        if depth > MAX_DEPTH:
            return MARK
        if isinstance(value, str):
            return self.str(value)
        if isinstance(value, (bytes, bytearray)):
            return self.bytes(bytes(value))
        if isinstance(value, McpError):
            self.error(value, depth + 1)
            return value
        if isinstance(value, tuple):
            return tuple(self.value(item, depth + 1) for item in value)
        if isinstance(value, list):
            return [self.value(item, depth + 1) for item in value]
        if isinstance(value, dict):
            return {
                self.value(key, depth + 1): self.value(item, depth + 1)
                for key, item in value.items()
            }
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            changes = {
                f.name: self.value(getattr(value, f.name), depth + 1)
                for f in dataclasses.fields(value)
                if f.init
            }
            try:
                return dataclasses.replace(value, **changes)
            except (TypeError, ValueError):
                return MARK
        return value

    def error(self, error: McpError, depth: int = 0) -> McpError:
        error.message = self.str(error.message)
        error.data = self.value(error.data, depth + 1)
        error.cause = self.value(error.cause, depth + 1)
        error.args = (error.code, error.message)
        return error


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every occurrence of every secret (in every form) replaced by ``MARK``."""
    return _Patterns(secrets).str(text) if text else text


def redact_bytes(data: bytes, secrets: Iterable[str]) -> bytes:
    """``redact`` for bytes (the secrets' UTF-8 forms)."""
    return _Patterns(secrets).bytes(data) if data else data


def redact_value(value: _T, secrets: Iterable[str]) -> _T:
    """A JSON-like value (str, bytes, tuples, lists, dicts, dataclasses, McpErrors, nested)
    with every secret redacted; other values are kept as they are. Errors are changed in
    place; everything else is copied."""
    result: _T = _Patterns(secrets).value(value)
    return result


def redact_error(error: McpError, secrets: Iterable[str]) -> McpError:
    """Redact an McpError's message, data and cause in place (so its str, repr, pickled form
    and log lines carry no secret); returns it."""
    return _Patterns(secrets).error(error)


def excerpt(data: bytes, secrets: Iterable[str], limit: int = 512) -> bytes:
    """The first ``limit`` bytes of ``data`` once redacted: the whole of it is redacted first,
    so a secret that straddles the limit leaves no prefix behind."""
    return redact_bytes(data, secrets)[:limit]
