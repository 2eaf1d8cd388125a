"""Pure decisions of the MCP authorization flow: which metadata URLs to try and in which order,
issuer and resource validation, scope selection, the ``iss`` check and PKCE (no I/O).

Authorization digest §2-§9; RFC 9728, RFC 8414, OpenID Connect Discovery, RFC 9207, RFC 7636,
RFC 8707.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, Literal
from urllib.parse import urlsplit, urlunsplit

from snodo.auth import Challenge

__all__ = [
    "LOOPBACK_HOSTS",
    "OAUTH_WELL_KNOWN",
    "OIDC_WELL_KNOWN",
    "PRM_WELL_KNOWN",
    "RefusalStep",
    "as_metadata_urls",
    "canonical_resource",
    "check_iss",
    "code_challenge",
    "default_endpoints",
    "issuer_matches",
    "new_state",
    "new_verifier",
    "origin",
    "pkce_supported",
    "prm_urls",
    "refusal_step",
    "resource_allowed",
    "select_scopes",
    "token_auth_method",
    "union_scopes",
    "url_allowed",
    "with_offline_access",
]

LOOPBACK_HOSTS: Final = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})
PRM_WELL_KNOWN: Final = "/.well-known/oauth-protected-resource"
OAUTH_WELL_KNOWN: Final = "/.well-known/oauth-authorization-server"
OIDC_WELL_KNOWN: Final = "/.well-known/openid-configuration"


def origin(url: str) -> str:
    """``scheme://host[:port]`` of ``url``, as written."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def url_allowed(url: str) -> bool:
    """True for an https URL, or an http URL to a loopback host (digest §11: no other scheme)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    if not parts.netloc or parts.hostname is None:
        return False
    scheme = parts.scheme.lower()
    return scheme == "https" or (scheme == "http" and parts.hostname.lower() in LOOPBACK_HOSTS)


def canonical_resource(url: str) -> str:
    """The canonical URI of an MCP endpoint (RFC 8707 §2): lower-case scheme and host, no
    fragment, no query, no trailing slash on the path."""
    parts = urlsplit(url)
    netloc = parts.netloc
    host = parts.hostname or ""
    if host:
        netloc = netloc.replace(netloc.rpartition("@")[2], netloc.rpartition("@")[2].lower())
    path = parts.path.rstrip("/")
    return urlunsplit((parts.scheme.lower(), netloc, path, "", ""))


def prm_urls(server_url: str, from_challenge: str | None) -> list[str]:
    """Where to look for Protected Resource Metadata: the challenge's ``resource_metadata``
    alone when present, else the path-inserted well-known URL, then the root one (RFC 9728
    §3.1, MCP "Protected Resource Metadata Discovery")."""
    if from_challenge:
        return [from_challenge]
    parts = urlsplit(server_url)
    base = f"{parts.scheme}://{parts.netloc}"
    path = parts.path.rstrip("/")
    urls = [f"{base}{PRM_WELL_KNOWN}{path}"] if path else []
    urls.append(f"{base}{PRM_WELL_KNOWN}")
    return urls


def as_metadata_urls(issuer: str) -> list[str]:
    """The authorization server metadata URLs for ``issuer`` in priority order (digest §3):
    RFC 8414 path-inserted, OIDC path-inserted, OIDC path-appended; for a path-less issuer the
    RFC 8414 and OIDC root URLs."""
    parts = urlsplit(issuer)
    base = f"{parts.scheme}://{parts.netloc}"
    path = parts.path.rstrip("/")
    if not path:
        return [f"{base}{OAUTH_WELL_KNOWN}", f"{base}{OIDC_WELL_KNOWN}"]
    return [
        f"{base}{OAUTH_WELL_KNOWN}{path}",
        f"{base}{OIDC_WELL_KNOWN}{path}",
        f"{base}{path}{OIDC_WELL_KNOWN}",
    ]


def default_endpoints(server_url: str) -> dict[str, Any]:
    """The 2025-03-26 defaults for a server without metadata: ``/authorize``, ``/token`` and
    ``/register`` at the MCP server's origin."""
    base = origin(server_url)
    return {
        "issuer": base,
        "authorization_endpoint": f"{base}/authorize",
        "token_endpoint": f"{base}/token",
        "registration_endpoint": f"{base}/register",
        "code_challenge_methods_supported": ["S256"],
    }


def issuer_matches(document: Mapping[str, Any], issuer: str) -> bool:
    """True when the metadata's ``issuer`` is identical to the issuer used to build its URL
    (RFC 8414 §3.3, OIDC Discovery §4.3; no normalisation)."""
    return document.get("issuer") == issuer


def _split_path(path: str) -> list[str]:
    return [segment for segment in path.split("/") if segment]


def resource_allowed(resource: str, server_url: str) -> bool:
    """True when the PRM ``resource`` identifies ``server_url``: the same origin (scheme and
    host compared case-insensitively, default ports equal) and a path that is the server's
    path or a prefix of it on a segment boundary (RFC 9728 §3.3)."""
    try:
        a, b = urlsplit(resource), urlsplit(server_url)
        a_port, b_port = a.port, b.port
    except ValueError:
        return False
    if a.fragment or a.scheme.lower() != b.scheme.lower():
        return False
    if (a.hostname or "").lower() != (b.hostname or "").lower():
        return False
    defaults = {"http": 80, "https": 443}
    if (a_port or defaults.get(a.scheme.lower())) != (b_port or defaults.get(b.scheme.lower())):
        return False
    mine, theirs = _split_path(a.path), _split_path(b.path)
    return theirs[: len(mine)] == mine


def _words(value: object) -> list[str]:
    if isinstance(value, str):
        return [s for s in value.split(" ") if s]
    if isinstance(value, (list, tuple)):
        return [s for s in value if isinstance(s, str) and s and " " not in s]
    return []


def union_scopes(*groups: Iterable[str] | None) -> tuple[str, ...]:
    """The scopes of every group, first occurrence first (step-up's union, digest §9)."""
    out: list[str] = []
    for group in groups:
        for scope in group or ():
            if scope not in out:
                out.append(scope)
    return tuple(out)


def select_scopes(
    challenged: Sequence[str] | None, prm: Mapping[str, Any] | None
) -> tuple[str, ...] | None:
    """The initial scope request (digest §6): the challenge's scopes, else every PRM
    ``scopes_supported``, else ``None`` (the parameter is left out)."""
    if challenged:
        return tuple(challenged)
    supported = _words((prm or {}).get("scopes_supported"))
    return tuple(supported) if supported else None


def with_offline_access(
    scopes: tuple[str, ...] | None, as_metadata: Mapping[str, Any]
) -> tuple[str, ...] | None:
    """``scopes`` plus ``offline_access`` when the authorization server lists it (digest §6);
    an omitted scope stays omitted."""
    if not scopes or "offline_access" in scopes:
        return scopes
    if "offline_access" in _words(as_metadata.get("scopes_supported")):
        return (*scopes, "offline_access")
    return scopes


def check_iss(
    params: Mapping[str, str], recorded_issuer: str, as_metadata: Mapping[str, Any]
) -> str | None:
    """Why an authorization response fails the RFC 9207 check (digest §8), or ``None``: a
    present ``iss`` must equal the recorded issuer exactly; an absent one is refused only when
    the server advertises ``authorization_response_iss_parameter_supported``."""
    iss = params.get("iss")
    if iss is not None:
        return None if iss == recorded_issuer else "the iss parameter names another issuer"
    if as_metadata.get("authorization_response_iss_parameter_supported") is True:
        return "the iss parameter is missing although the server advertises it"
    return None


def new_verifier() -> str:
    """A PKCE ``code_verifier``: 64 characters of the unreserved set (RFC 7636 §4.1)."""
    return secrets.token_urlsafe(48)


def new_state() -> str:
    """An unguessable ``state`` value."""
    return secrets.token_urlsafe(24)


def code_challenge(verifier: str) -> str:
    """``BASE64URL(SHA256(verifier))`` without padding (RFC 7636 §4.2, S256)."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def pkce_supported(as_metadata: Mapping[str, Any]) -> bool:
    """True when the metadata lists S256 in ``code_challenge_methods_supported`` (digest §4)."""
    methods = as_metadata.get("code_challenge_methods_supported")
    return isinstance(methods, list) and "S256" in methods


def token_auth_method(as_metadata: Mapping[str, Any], *, has_secret: bool, has_key: bool) -> str:
    """How to authenticate at the token endpoint (digest §10): ``private_key_jwt`` with a key,
    else ``client_secret_basic`` (preferred) or ``client_secret_post`` with a secret, else
    ``none``; chosen from ``token_endpoint_auth_methods_supported`` (absent means basic)."""
    supported = _words(as_metadata.get("token_endpoint_auth_methods_supported")) or [
        "client_secret_basic"
    ]
    if has_key and "private_key_jwt" in supported:
        return "private_key_jwt"
    if has_secret:
        if "client_secret_basic" in supported:
            return "client_secret_basic"
        if "client_secret_post" in supported:
            return "client_secret_post"
        return "client_secret_basic"
    if has_key:
        return "private_key_jwt"
    return "none"


RefusalStep = Literal["nonce", "reuse", "step-up", "refresh", "authorize"]


def refusal_step(
    status: int,
    challenge: Challenge | None,
    *,
    token: str | None,
    current: str | None = None,
    current_usable: bool = False,
    can_refresh: bool = False,
) -> RefusalStep:
    """What to do about a refused request (digest §1, §9; RFC 9449 §9): ``nonce`` (same token,
    a new proof), ``reuse`` (another caller already replaced the refused token), ``step-up``
    (403 ``insufficient_scope``), ``refresh`` (401 with a refresh token), else ``authorize``."""
    if challenge is not None and challenge.error == "use_dpop_nonce" and token is not None:
        return "nonce"
    if current is not None and current != token and current_usable:
        return "reuse"
    if status == 403:
        return "step-up"
    if token is not None and current is not None and can_refresh:
        return "refresh"
    return "authorize"
