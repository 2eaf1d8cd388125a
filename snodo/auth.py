"""Bearer tokens and ``WWW-Authenticate`` challenges for the HTTP transport (sans-IO).

A token the application already holds goes in ``headers``; one that has to be obtained,
refreshed or extended comes from a :class:`TokenProvider`. Before each request the transport
asks ``token(url)``; after a 401, or a 403 whose challenge is ``insufficient_scope``
(:func:`needs_refresh`), it parses the challenge (:func:`select_challenge`), asks ``refresh`` and
sends once more; a second refusal is :func:`unauthorized_error`. No token ever appears in an
error (seed "Authorization"; authorization digest §1 and §9; Elixir notes "Authorization").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol, runtime_checkable

from snodo.protocol.errors import CONNECTION_CLOSED, McpError

__all__ = [
    "MAX_CHALLENGE_BYTES",
    "CachingTokenProvider",
    "Challenge",
    "TokenProvider",
    "bearer_header",
    "check_token",
    "needs_refresh",
    "parse_challenges",
    "select_challenge",
    "unauthorized_error",
]

#: A ``WWW-Authenticate`` value longer than this (in UTF-8 bytes) yields no challenges.
MAX_CHALLENGE_BYTES: Final = 8192


@dataclass(frozen=True, slots=True)
class Challenge:
    """One challenge of a ``WWW-Authenticate`` value (RFC 9110 §11.6.1, RFC 6750 §3).

    ``scheme`` and the ``params`` names are lower-cased, values unescaped; a token68 challenge
    (``Negotiate abc==``) keeps its credential in ``token68`` and has empty ``params``.
    """

    scheme: str
    params: dict[str, str] = field(default_factory=dict)
    token68: str | None = None

    @property
    def resource_metadata(self) -> str | None:
        """The Protected Resource Metadata URL (RFC 9728) the client MUST use when present."""
        return self.params.get("resource_metadata")

    @property
    def scope(self) -> tuple[str, ...] | None:
        """The challenged scopes, split on spaces; ``None`` when the challenge names none."""
        value = self.params.get("scope")
        return None if value is None else tuple(s for s in value.split(" ") if s)

    @property
    def error(self) -> str | None:
        """The RFC 6750 error code, such as ``invalid_token`` or ``insufficient_scope``."""
        return self.params.get("error")

    @property
    def error_description(self) -> str | None:
        """The RFC 6750 human-readable error text."""
        return self.params.get("error_description")


_OWS: Final = re.compile(r"[ \t]*")
_LIST_GAP: Final = re.compile(r"[ \t,]*")
_TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_TOKEN68: Final = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
# qdtext and quoted-pair (RFC 9110 §5.6.4); obs-text is taken as any code point from 0x80 up.
_QUOTED: Final = re.compile(
    r'"((?:[\t \x21\x23-\x5b\x5d-\x7e\x80-\U0010ffff]|\\[\t \x21-\x7e\x80-\U0010ffff])*)"'
)
_QUOTED_PAIR: Final = re.compile(r"\\(.)", re.DOTALL)


class _Broken(Exception):
    """The value breaks the grammar."""


def _param_start(s: str, pos: int) -> bool:
    """True when an auth-param (``token BWS "="``) starts at ``pos``."""
    m = _TOKEN.match(s, pos)
    if m is None:
        return False
    after = _OWS.match(s, m.end())
    assert after is not None
    return after.end() < len(s) and s[after.end()] == "="


def _param(s: str, pos: int, params: dict[str, str]) -> int:
    """Read ``token BWS "=" BWS ( token / quoted-string )`` at ``pos``; the position after."""
    m = _TOKEN.match(s, pos)
    if m is None:
        raise _Broken
    name = m.group().lower()
    eq = _OWS.match(s, m.end())
    assert eq is not None
    if eq.end() >= len(s) or s[eq.end()] != "=":
        raise _Broken
    start = _OWS.match(s, eq.end() + 1)
    assert start is not None
    pos = start.end()
    quoted = _QUOTED.match(s, pos)
    if quoted is not None:
        value = _QUOTED_PAIR.sub(r"\1", quoted.group(1))
        end = quoted.end()
    else:
        token = _TOKEN.match(s, pos)
        if token is None:
            raise _Broken
        value = token.group()
        end = token.end()
    params.setdefault(name, value)  # the first occurrence of a repeated parameter wins
    return end


def _parse(s: str) -> list[Challenge]:
    n = len(s)
    out: list[Challenge] = []
    gap = _LIST_GAP.match(s, 0)
    assert gap is not None
    pos = gap.end()
    while pos < n:
        scheme = _TOKEN.match(s, pos)
        if scheme is None:
            raise _Broken
        params: dict[str, str] = {}
        token68: str | None = None
        ws = _OWS.match(s, scheme.end())
        assert ws is not None
        pos = ws.end()
        if pos < n and s[pos] != ",":
            if pos == scheme.end():  # the scheme must be followed by 1*SP
                raise _Broken
            t68 = _TOKEN68.match(s, pos)
            after = _OWS.match(s, t68.end()) if t68 is not None else None
            if (
                t68 is not None
                and after is not None
                and (after.end() == n or s[after.end()] == ",")
            ):
                token68 = t68.group()
                pos = after.end()
            else:
                pos = _param(s, pos, params)
        if token68 is None:
            while True:  # more auth-params, or the next challenge, after a comma
                ows = _OWS.match(s, pos)
                assert ows is not None
                pos = ows.end()
                if pos == n:
                    break
                if s[pos] != ",":
                    raise _Broken
                gap = _LIST_GAP.match(s, pos)
                assert gap is not None
                pos = gap.end()
                if pos == n or not _param_start(s, pos):
                    break
                pos = _param(s, pos, params)
        out.append(Challenge(scheme.group().lower(), params, token68))
        gap = _LIST_GAP.match(s, pos)
        assert gap is not None
        pos = gap.end()
    return out


def parse_challenges(value: str) -> list[Challenge]:
    """Every challenge in one ``WWW-Authenticate`` field value, in order.

    RFC 9110 §11.6.1 grammar: auth-params are ``token`` or quoted-string values (unescaped),
    separated by commas, with empty list elements and whitespace around ``=`` accepted; a
    token68 challenge is followed by the next challenge. A value over 8 KiB, or any break in
    the grammar, gives ``[]`` (never an exception).
    """
    if not isinstance(value, str) or len(value) > MAX_CHALLENGE_BYTES:
        return []
    if len(value.encode("utf-8", "surrogatepass")) > MAX_CHALLENGE_BYTES:
        return []
    try:
        return _parse(value)
    except _Broken:
        return []


def select_challenge(values: Sequence[str]) -> Challenge | None:
    """The challenge to act on from every ``WWW-Authenticate`` value of a response: the first
    Bearer challenge, else the first of any scheme (so a provider can report it), else None."""
    first: Challenge | None = None
    for value in values:
        for challenge in parse_challenges(value):
            if challenge.scheme == "bearer":
                return challenge
            if first is None:
                first = challenge
    return first


@runtime_checkable
class TokenProvider(Protocol):
    """Supplies bearer tokens for an HTTP connection (the reference's ``TokenProvider``).

    ``token`` is called before each request (a ``None`` token sends no ``Authorization``,
    which is how a client learns the server's challenge); ``refresh`` after a 401, or a 403
    whose challenge is ``insufficient_scope``, with the refused token, and returns the token to
    send once more. A provider that fails raises, and its error reaches the caller as it is.

    Optional, for DPoP (RFC 9449; :class:`snodo.oauth.OAuthClient` has both):
    ``request_headers(method, url, token) -> dict`` gives each attempt's authorization headers
    in place of ``Bearer``, and ``dpop_nonce(url, nonce)`` receives each ``DPoP-Nonce``.
    """

    def token(self, url: str) -> str | None: ...

    def refresh(
        self, challenge: Challenge | None, *, url: str, status: int, token: str | None
    ) -> str | None: ...


@runtime_checkable
class CachingTokenProvider(TokenProvider, Protocol):
    """A provider that can say, without blocking, whether it holds a token to send now.

    ``cached_token(url) -> (known, token)``: ``(True, token)`` when ``token(url)`` would return
    ``token`` without any I/O (``token`` may be None: none yet), ``(False, None)`` when it would
    have to fetch or renew one. ``snodo.aio`` reads a known token on the event loop and calls
    ``token`` on a worker thread otherwise; providers without it are called on the loop.
    """

    def cached_token(self, url: str) -> tuple[bool, str | None]: ...


def _token_problem(token: object) -> str | None:
    if not isinstance(token, str):
        return f"it is a {type(token).__name__}, not a str"
    if not token:
        return "it is empty"
    if token.isascii() and token.isprintable() and " " not in token:
        return None  # visible ASCII only: the usual token, checked without a loop
    for char in token:
        code = ord(char)
        if code == 0x20 or code == 0x09:
            return "it contains whitespace"
        if code < 0x20 or code == 0x7F:
            return "it contains a control character"
        if code > 0x7E:
            return "it contains a non-ASCII character"
    return None


def check_token(token: object) -> str:
    """``token`` when it can go in ``Authorization: Bearer``: a non-empty str of visible ASCII
    (no spaces, CR, LF, NUL or other control characters); else -32000 (``kind="transport"``,
    ``cause=("invalid_token", reason)``) whose message never contains the token."""
    problem = _token_problem(token)
    if problem is not None:
        raise McpError(
            CONNECTION_CLOSED,
            f"The token provider returned an unusable bearer token: {problem}",
            kind="transport",
            cause=("invalid_token", problem),
        )
    assert isinstance(token, str)
    return token


def bearer_header(token: object) -> str:
    """The ``Authorization`` value for ``token``, checked by :func:`check_token`."""
    return "Bearer " + check_token(token)


def needs_refresh(status: int, challenge: Challenge | None) -> bool:
    """True for a 401, or a 403 whose challenge error is ``insufficient_scope`` (step-up); any
    other 403 is an ordinary status error (Elixir notes "Authorization" step 4)."""
    if status == 401:
        return True
    return status == 403 and challenge is not None and challenge.error == "insufficient_scope"


def unauthorized_error(status: int, challenge: Challenge | None) -> McpError:
    """-32000 for a request refused again after a refresh, with
    ``cause=("unauthorized", status, challenge)`` (seed "Authorization"; no token in it)."""
    detail = f" ({challenge.error})" if challenge is not None and challenge.error else ""
    return McpError(
        CONNECTION_CLOSED,
        f"HTTP {status}: the server refused the request's authorization{detail}",
        kind="transport",
        cause=("unauthorized", status, challenge),
    )
