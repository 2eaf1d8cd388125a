"""HTTP to authorization servers: bounded GETs of metadata and form POSTs to token endpoints,
on urllib3 with TLS verified by default (no redirects followed, every call has a deadline)."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import orjson
import urllib3

from snodo.oauth.discovery import url_allowed
from snodo.oauth.errors import auth_error
from snodo.transports import tls

__all__ = ["MAX_BODY", "AsResponse", "OAuthHttp", "basic_credentials"]

MAX_BODY = 1024 * 1024


@dataclass(frozen=True, slots=True)
class AsResponse:
    """One answer: status, lower-cased headers and the JSON object body (``None`` if not JSON)."""

    status: int
    headers: dict[str, str]
    body: dict[str, Any] | None


def basic_credentials(client_id: str, secret: str) -> str:
    """``Authorization: Basic`` for a client (RFC 6749 §2.3.1: form-encode, then base64)."""
    pair = f"{quote(client_id, safe='')}:{quote(secret, safe='')}"
    return "Basic " + base64.b64encode(pair.encode("utf-8")).decode("ascii")


class OAuthHttp:
    """A small client for authorization server endpoints."""

    def __init__(
        self, *, timeout: float = 10.0, verify: bool = True, ca_certs: str | None = None
    ) -> None:
        self.timeout = timeout
        # The transport's TLS policy (strict verification on every version, docs/decisions/0031);
        # urllib3 takes the verify mode and hostname check from the context.
        context = tls.client_context(verify, ca_certs)
        self._pool = urllib3.PoolManager(num_pools=8, maxsize=4, ssl_context=context)

    def get(self, url: str, step: str) -> AsResponse:
        """GET ``url`` expecting JSON."""
        return self._send("GET", url, None, {"Accept": "application/json"}, step)

    def post_form(
        self, url: str, form: Mapping[str, str], step: str, headers: Mapping[str, str] = {}
    ) -> AsResponse:
        """POST an ``application/x-www-form-urlencoded`` body."""
        body = urlencode(dict(form)).encode("ascii")
        all_headers = {
            "Accept": "application/json",
            "Content-Type": "application/x-www-form-urlencoded",
            **headers,
        }
        return self._send("POST", url, body, all_headers, step)

    def post_json(self, url: str, document: Mapping[str, Any], step: str) -> AsResponse:
        """POST a JSON document (dynamic client registration)."""
        headers = {"Accept": "application/json", "Content-Type": "application/json"}
        return self._send("POST", url, orjson.dumps(dict(document)), headers, step)

    def _send(
        self, method: str, url: str, body: bytes | None, headers: dict[str, str], step: str
    ) -> AsResponse:
        if not url_allowed(url):
            raise auth_error(step, f"refusing a non-https URL: {_safe(url)}")
        try:
            response = self._pool.request(
                method,
                url,
                body=body,
                headers=headers,
                redirect=False,
                retries=False,
                preload_content=False,
                timeout=urllib3.Timeout(total=self.timeout),
            )
        except urllib3.exceptions.HTTPError as exc:
            reason = type(exc).__name__
            if isinstance(exc, urllib3.exceptions.SSLError):
                reason = f"{reason}: {tls.failure_reason(exc)}"
            raise auth_error(step, f"{method} {_safe(url)} failed ({reason})") from None
        try:
            data = response.read(MAX_BODY + 1, decode_content=True)
        except urllib3.exceptions.HTTPError as exc:
            raise auth_error(step, f"reading {_safe(url)} failed ({type(exc).__name__})") from None
        finally:
            response.release_conn()
        if len(data) > MAX_BODY:
            raise auth_error(step, f"the answer of {_safe(url)} is larger than {MAX_BODY} bytes")
        parsed: Any = None
        if data:
            try:
                parsed = orjson.loads(data)
            except orjson.JSONDecodeError:
                parsed = None
        lowered = {name.lower(): value for name, value in response.headers.items()}
        return AsResponse(response.status, lowered, parsed if isinstance(parsed, dict) else None)

    def close(self) -> None:
        self._pool.clear()


def _safe(url: str) -> str:
    """``url`` without its query (which may carry a code) for messages."""
    return url.split("?", 1)[0].split("#", 1)[0]
