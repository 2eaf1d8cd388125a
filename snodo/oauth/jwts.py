"""Signed JWTs the client makes: DPoP proofs (RFC 9449) and ``private_key_jwt`` client
assertions (RFC 7523 §2.2). pyjwt and cryptography are imported on first use."""

from __future__ import annotations

import base64
import hashlib
import secrets
import threading
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

__all__ = ["ASSERTION_TYPE", "DpopKey", "access_token_hash", "client_assertion", "htu"]

ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def htu(url: str) -> str:
    """The ``htu`` claim for ``url``: without query and fragment (RFC 9449 §4.2)."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


def access_token_hash(token: str) -> str:
    """The ``ath`` claim: base64url SHA-256 of the access token (RFC 9449 §4.2)."""
    return _b64(hashlib.sha256(token.encode("ascii")).digest())


class DpopKey:
    """An ES256 key pair that signs DPoP proofs; the latest server nonce is kept per origin."""

    alg = "ES256"

    def __init__(self) -> None:
        from cryptography.hazmat.primitives.asymmetric import ec

        self._key = ec.generate_private_key(ec.SECP256R1())
        numbers = self._key.public_key().public_numbers()
        self.jwk = {
            "kty": "EC",
            "crv": "P-256",
            "x": _b64(numbers.x.to_bytes(32, "big")),
            "y": _b64(numbers.y.to_bytes(32, "big")),
        }
        self._nonces: dict[str, str] = {}
        self._lock = threading.Lock()

    def thumbprint(self) -> str:
        """The JWK SHA-256 thumbprint (RFC 7638), as ``cnf.jkt`` carries it."""
        canonical = '{{"crv":"P-256","kty":"EC","x":"{x}","y":"{y}"}}'.format(**self.jwk)
        return _b64(hashlib.sha256(canonical.encode("ascii")).digest())

    def note_nonce(self, url: str, nonce: str) -> None:
        """Remember the ``DPoP-Nonce`` a server at ``url``'s origin sent."""
        parts = urlsplit(url)
        with self._lock:
            self._nonces[f"{parts.scheme}://{parts.netloc}".lower()] = nonce

    def nonce_for(self, url: str) -> str | None:
        parts = urlsplit(url)
        with self._lock:
            return self._nonces.get(f"{parts.scheme}://{parts.netloc}".lower())

    def proof(self, method: str, url: str, access_token: str | None = None) -> str:
        """A fresh proof for one request (new ``jti``; ``ath`` when presenting a token; the
        origin's nonce when one is known)."""
        import jwt

        claims: dict[str, Any] = {
            "jti": secrets.token_urlsafe(16),
            "htm": method,
            "htu": htu(url),
            "iat": int(time.time()),
        }
        if access_token is not None:
            claims["ath"] = access_token_hash(access_token)
        nonce = self.nonce_for(url)
        if nonce is not None:
            claims["nonce"] = nonce
        headers = {"typ": "dpop+jwt", "jwk": self.jwk}
        return jwt.encode(claims, self._key, algorithm=self.alg, headers=headers)


def client_assertion(
    client_id: str, audience: str, private_key: Any, algorithm: str, *, lifetime: float = 60.0
) -> str:
    """A ``private_key_jwt`` assertion: ``iss = sub = client_id``, ``aud`` the token endpoint's
    server, a unique ``jti`` and a short ``exp`` (RFC 7523 §3)."""
    import jwt

    now = int(time.time())
    claims = {
        "iss": client_id,
        "sub": client_id,
        "aud": audience,
        "iat": now,
        "exp": now + int(lifetime),
        "jti": secrets.token_urlsafe(16),
    }
    return jwt.encode(claims, private_key, algorithm=algorithm)
