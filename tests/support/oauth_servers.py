"""A real OAuth 2.1 authorization server and an MCP resource server for snodo.oauth's tests.

``AuthServer`` (127.0.0.1) publishes RFC 8414 metadata, runs /authorize (PKCE S256 required,
redirects with code, state and iss), /token (authorization_code with the verifier checked,
refresh_token with rotation, client_credentials with client_secret_basic / client_secret_post
/ private_key_jwt verified against the client's public key, the JWT-bearer grant verified
against a trusted workload key, RFC 8693 token exchange for ID-JAGs) and /register (RFC 7591).
Access tokens are ES256 JWTs bound to the ``resource`` (``aud``) and, with a DPoP proof, to the
proof key (``cnf.jkt``). ``ResourceServer`` publishes the PRM document and verifies those
tokens (signature, issuer, audience, expiry, scopes, DPoP proof) before forwarding the request
to a snodo ``serve_http`` Runtime; it answers 401/403 with RFC 6750 / RFC 9449 challenges.

Both are ``ThreadingHTTPServer``s speaking HTTP/1.0 (one request per connection), so closing
them joins every handler thread.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

import jwt
import urllib3
from cryptography.hazmat.primitives.asymmetric import ec

from snodo.server import Runtime
from snodo.server.http_server import serve_http

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def jwk_thumbprint(jwk: dict[str, Any]) -> str:
    canonical = json.dumps(
        {k: jwk[k] for k in ("crv", "kty", "x", "y")}, separators=(",", ":"), sort_keys=True
    )
    return b64url(hashlib.sha256(canonical.encode()).digest())


class _Server(ThreadingHTTPServer):
    daemon_threads = False
    block_on_close = True
    request_queue_size = 128


class _Base:
    """A ThreadingHTTPServer on 127.0.0.1 running ``handle(method, path, query, headers,
    body) -> (status, headers, body)`` for each request."""

    def __init__(self) -> None:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def _serve(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                parts = urlsplit(self.path)
                headers = {k.lower(): v for k, v in self.headers.items()}
                status, out_headers, out = owner.handle(
                    self.command, parts.path, dict(parse_qsl(parts.query)), headers, body
                )
                self.send_response(status)
                for name, value in out_headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            do_GET = do_POST = do_DELETE = _serve

            def log_message(self, format: str, *args: Any) -> None:
                owner.log.append(format % args)

        self.log: list[str] = []
        self._server = _Server(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        self.base = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def handle(
        self, method: str, path: str, query: dict[str, str], headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        raise NotImplementedError

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5.0)


def _json(status: int, doc: dict[str, Any], **headers: str) -> tuple[int, dict[str, str], bytes]:
    return status, {"Content-Type": "application/json", **headers}, json.dumps(doc).encode()


def _oauth_error(status: int, code: str, **headers: str) -> tuple[int, dict[str, str], bytes]:
    return _json(status, {"error": code}, **headers)


@dataclass
class Client:
    """A registered client."""

    client_id: str
    secret: str | None = None
    public_key: Any = None  # for private_key_jwt
    auth_method: str = "none"
    redirect_uris: list[str] = field(default_factory=list)


class AuthServer(_Base):
    """A real authorization server (see the module docstring)."""

    def __init__(
        self,
        *,
        token_lifetime: int = 3600,
        refresh_tokens: bool = True,
        rotate_refresh: bool = True,
        iss_supported: bool = True,
        cimd: bool = False,
        registration: bool = True,
        auth_methods: tuple[str, ...] = ("none", "client_secret_basic", "client_secret_post"),
        scopes_supported: list[str] | None = None,
        dpop: bool = False,
        dpop_nonce: str | None = None,
        issuer_override: str | None = None,
        path: str = "",
        token_delay: float = 0.0,
        denied_scopes: tuple[str, ...] = (),
        iss_value: str | None = None,
        deny: bool = False,
    ) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.token_lifetime = token_lifetime
        self.refresh_tokens = refresh_tokens
        self.rotate_refresh = rotate_refresh
        self.iss_supported = iss_supported
        self.cimd = cimd
        self.registration = registration
        self.auth_methods = auth_methods
        self.scopes_supported = scopes_supported
        self.dpop = dpop
        self.dpop_nonce = dpop_nonce
        self.issuer_override = issuer_override
        self.path = path
        self.token_delay = token_delay
        self.denied_scopes = denied_scopes
        self.iss_value = iss_value
        self.deny = deny
        self.clients: dict[str, Client] = {}
        self.trusted_assertion_keys: list[Any] = []  # workload / IdP keys for jwt-bearer
        self.codes: dict[str, dict[str, Any]] = {}
        self.refresh: dict[str, dict[str, Any]] = {}
        self.grants: list[str] = []  # grant_type of every successful token request
        self.authorize_requests: list[dict[str, str]] = []
        self.token_forms: list[dict[str, str]] = []
        self.registrations: list[dict[str, Any]] = []
        self.metadata_requests: list[str] = []
        self.lock = threading.Lock()
        super().__init__()

    @property
    def issuer(self) -> str:
        return self.base + self.path

    def metadata(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "issuer": self.issuer_override or self.issuer,
            "authorization_endpoint": f"{self.issuer}/authorize",
            "token_endpoint": f"{self.issuer}/token",
            "response_types_supported": ["code"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": list(self.auth_methods),
            "token_endpoint_auth_signing_alg_values_supported": ["ES256"],
            "authorization_response_iss_parameter_supported": self.iss_supported,
        }
        if self.registration:
            doc["registration_endpoint"] = f"{self.issuer}/register"
        if self.cimd:
            doc["client_id_metadata_document_supported"] = True
        if self.scopes_supported is not None:
            doc["scopes_supported"] = self.scopes_supported
        if self.dpop:
            doc["dpop_signing_alg_values_supported"] = ["ES256"]
        return doc

    def add_client(self, client: Client) -> Client:
        with self.lock:
            self.clients[client.client_id] = client
        return client

    def public_key(self) -> Any:
        return self.key.public_key()

    # -- requests --------------------------------------------------------------------------

    def handle(
        self, method: str, path: str, query: dict[str, str], headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        full = path
        if not path.startswith(self.path):
            if method == "GET":
                self.metadata_requests.append(full)
            return _oauth_error(404, "not_found")
        path = path[len(self.path) :]
        if method == "GET":
            self.metadata_requests.append(full)
        if method == "GET" and path in (
            "/.well-known/oauth-authorization-server",
            "/.well-known/openid-configuration",
        ):
            return _json(200, self.metadata())
        if method == "GET" and path == "/authorize":
            return self._authorize(query)
        if method == "POST" and path == "/token":
            form = dict(parse_qsl(body.decode()))
            with self.lock:
                self.token_forms.append(form)
            if self.token_delay:
                time.sleep(self.token_delay)  # a slow server: lets concurrent callers pile up
            return self._token(form, headers)
        if method == "POST" and path == "/register" and self.registration:
            return self._register(json.loads(body or b"{}"))
        return _oauth_error(404, "not_found")

    def _authorize(self, query: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        with self.lock:
            self.authorize_requests.append(dict(query))
            client = self.clients.get(query.get("client_id", ""))
        redirect = query.get("redirect_uri", "")
        if client is None and not (self.cimd and query.get("client_id", "").startswith("https://")):
            return _oauth_error(400, "invalid_client")
        if client is not None and client.redirect_uris:
            # RFC 8252 §7.3: any port of a registered loopback redirect URI
            allowed = {_portless(u) for u in client.redirect_uris}
            if _portless(redirect) not in allowed:
                return _oauth_error(400, "invalid_redirect_uri")
        if query.get("code_challenge_method") != "S256" or not query.get("code_challenge"):
            return _oauth_error(400, "invalid_request")
        code = secrets.token_urlsafe(16)
        with self.lock:
            self.codes[code] = dict(query)
        params = {"error": "access_denied"} if self.deny else {"code": code}
        if "state" in query:
            params["state"] = query["state"]
        if self.iss_supported:
            params["iss"] = self.iss_value or self.issuer
        return 302, {"Location": f"{redirect}?{urlencode(params)}"}, b""

    def _client_from(
        self, form: dict[str, str], headers: dict[str, str]
    ) -> tuple[Client | None, str | None]:
        """The authenticated client and the method used, or (None, error)."""
        auth = headers.get("authorization", "")
        with self.lock:
            clients = dict(self.clients)
        if auth.startswith("Basic "):
            pair = base64.b64decode(auth[6:]).decode()
            cid, _, secret = pair.partition(":")
            client = clients.get(unquote(cid))
            if client is None or client.secret != unquote(secret):
                return None, "invalid_client"
            return client, None
        if form.get("client_assertion_type") == ASSERTION_TYPE:
            assertion = form.get("client_assertion", "")
            cid = jwt.decode(assertion, options={"verify_signature": False}).get("sub", "")
            client = clients.get(cid)
            if client is None or client.public_key is None:
                return None, "invalid_client"
            try:
                claims = jwt.decode(
                    assertion, client.public_key, algorithms=["ES256"], audience=self.issuer
                )
            except jwt.PyJWTError:
                return None, "invalid_client"
            if claims.get("iss") != cid:
                return None, "invalid_client"
            return client, None
        cid = form.get("client_id", "")
        client = clients.get(cid)
        if client is None:
            if self.cimd and cid.startswith("https://"):
                return Client(cid), None
            return None, "invalid_client"
        if client.secret is not None and form.get("client_secret") != client.secret:
            return None, "invalid_client"
        return client, None

    def _token(
        self, form: dict[str, str], headers: dict[str, str]
    ) -> tuple[int, dict[str, str], bytes]:
        grant = form.get("grant_type", "")
        jkt = None
        if self.dpop:
            proof = headers.get("dpop")
            if proof is None:
                return _oauth_error(400, "invalid_dpop_proof")
            checked = check_proof(proof, "POST", f"{self.issuer}/token", None)
            if isinstance(checked, str):
                return _oauth_error(400, "invalid_dpop_proof")
            claims, jkt = checked
            if self.dpop_nonce is not None and claims.get("nonce") != self.dpop_nonce:
                return _oauth_error(400, "use_dpop_nonce", **{"DPoP-Nonce": self.dpop_nonce})
        if grant == JWT_BEARER:
            return self._jwt_bearer(form, headers, jkt)
        if grant == TOKEN_EXCHANGE:
            return self._exchange(form)
        client, problem = self._client_from(form, headers)
        if client is None:
            return _oauth_error(401, problem or "invalid_client")
        if grant == "authorization_code":
            with self.lock:
                request = self.codes.pop(form.get("code", ""), None)
            if request is None or request.get("client_id") != client.client_id:
                return _oauth_error(400, "invalid_grant")
            verifier = form.get("code_verifier", "")
            if b64url(hashlib.sha256(verifier.encode()).digest()) != request["code_challenge"]:
                return _oauth_error(400, "invalid_grant")
            if form.get("redirect_uri") != request.get("redirect_uri"):
                return _oauth_error(400, "invalid_grant")
            if form.get("resource") != request.get("resource"):
                return _oauth_error(400, "invalid_target")
            return self._issue(
                client.client_id, request.get("resource", ""), request.get("scope"), grant, jkt
            )
        if grant == "refresh_token":
            with self.lock:
                record = self.refresh.get(form.get("refresh_token", ""))
                if record is not None and self.rotate_refresh:
                    del self.refresh[form["refresh_token"]]
            if record is None or record["client_id"] != client.client_id:
                return _oauth_error(400, "invalid_grant")
            return self._issue(
                client.client_id,
                record["resource"],
                record["scope"],
                grant,
                jkt,
                keep_refresh=None if self.rotate_refresh else form["refresh_token"],
            )
        if grant == "client_credentials":
            return self._issue(
                client.client_id,
                form.get("resource", ""),
                form.get("scope"),
                grant,
                jkt,
                refresh=False,
            )
        return _oauth_error(400, "unsupported_grant_type")

    def _jwt_bearer(
        self, form: dict[str, str], headers: dict[str, str], jkt: str | None
    ) -> tuple[int, dict[str, str], bytes]:
        assertion = form.get("assertion", "")
        for key in self.trusted_assertion_keys:
            try:
                claims = jwt.decode(assertion, key, algorithms=["ES256"], audience=self.issuer)
                break
            except jwt.PyJWTError:
                continue
        else:
            return _oauth_error(400, "invalid_grant")
        client_id = str(claims.get("client_id") or claims.get("sub"))
        if headers.get("authorization") or form.get("client_id"):
            client, problem = self._client_from(form, headers)
            if client is None:
                return _oauth_error(401, problem or "invalid_client")
            client_id = client.client_id
        resource = form.get("resource") or str(claims.get("resource", ""))
        return self._issue(client_id, resource, form.get("scope"), JWT_BEARER, jkt, refresh=False)

    def _exchange(self, form: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        """RFC 8693 at an identity provider: a trusted ID token for an ID-JAG."""
        if form.get("requested_token_type") != "urn:ietf:params:oauth:token-type:id-jag":
            return _oauth_error(400, "invalid_request")
        for key in self.trusted_assertion_keys:
            try:
                id_token = jwt.decode(
                    form.get("subject_token", ""),
                    key,
                    algorithms=["ES256"],
                    options={"verify_aud": False},
                )
                break
            except jwt.PyJWTError:
                continue
        else:
            return _oauth_error(400, "invalid_grant")
        now = int(time.time())
        jag = jwt.encode(
            {
                "iss": self.issuer,
                "sub": id_token["sub"],
                "aud": form.get("audience"),
                "resource": form.get("resource"),
                "client_id": form.get("client_id"),
                "iat": now,
                "exp": now + 300,
                "jti": secrets.token_urlsafe(8),
            },
            self.key,
            algorithm="ES256",
            headers={"typ": "oauth-id-jag+jwt"},
        )
        with self.lock:
            self.grants.append(TOKEN_EXCHANGE)
        return _json(
            200,
            {
                "access_token": jag,
                "issued_token_type": "urn:ietf:params:oauth:token-type:id-jag",
                "token_type": "N_A",
            },
        )

    def _issue(
        self,
        client_id: str,
        resource: str,
        scope: str | None,
        grant: str,
        jkt: str | None,
        *,
        refresh: bool = True,
        keep_refresh: str | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        now = int(time.time())
        if scope:
            scope = " ".join(s for s in scope.split() if s not in self.denied_scopes)
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "aud": resource,
            "sub": client_id,
            "client_id": client_id,
            "iat": now,
            "exp": now + self.token_lifetime,
            "jti": secrets.token_urlsafe(8),
            "scope": scope or "",
        }
        if jkt is not None:
            claims["cnf"] = {"jkt": jkt}
        token = jwt.encode(claims, self.key, algorithm="ES256", headers={"typ": "at+jwt"})
        answer: dict[str, Any] = {
            "access_token": token,
            "token_type": "DPoP" if jkt else "Bearer",
            "expires_in": self.token_lifetime,
        }
        if scope:
            answer["scope"] = scope
        if refresh and self.refresh_tokens:
            value = keep_refresh or secrets.token_urlsafe(16)
            with self.lock:
                self.refresh[value] = {"client_id": client_id, "resource": resource, "scope": scope}
            if keep_refresh is None:
                answer["refresh_token"] = value
        with self.lock:
            self.grants.append(grant)
        return _json(200, answer, **{"Cache-Control": "no-store"})

    def _register(self, doc: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        with self.lock:
            self.registrations.append(doc)
        uris = doc.get("redirect_uris") or []
        if not all(isinstance(u, str) and u.startswith("http://127.0.0.1:") for u in uris):
            return _oauth_error(400, "invalid_redirect_uri")
        method = doc.get("token_endpoint_auth_method", "none")
        secret = None if method == "none" else secrets.token_urlsafe(16)
        client = self.add_client(
            Client(f"dcr-{secrets.token_hex(4)}", secret, auth_method=method, redirect_uris=uris)
        )
        answer = {
            "client_id": client.client_id,
            "token_endpoint_auth_method": method,
            "redirect_uris": uris,
        }
        if secret:
            answer["client_secret"] = secret
        return _json(201, answer)


def _portless(uri: str) -> str:
    parts = urlsplit(uri)
    return f"{parts.scheme}://{parts.hostname}{parts.path}"


def check_proof(
    proof: str, method: str, url: str, token: str | None
) -> tuple[dict[str, Any], str] | str:
    """A DPoP proof's claims and key thumbprint, or why it is invalid (RFC 9449 §4.3)."""
    try:
        header = jwt.get_unverified_header(proof)
        if header.get("typ") != "dpop+jwt" or "d" in header.get("jwk", {}):
            return "bad header"
        key = jwt.PyJWK(header["jwk"], algorithm="ES256").key
        claims = jwt.decode(proof, key, algorithms=["ES256"])
    except (jwt.PyJWTError, KeyError):
        return "bad signature"
    if claims.get("htm") != method or claims.get("htu") != url:
        return "wrong htm/htu"
    if abs(time.time() - claims.get("iat", 0)) > 60 or not claims.get("jti"):
        return "stale"
    if token is not None and claims.get("ath") != b64url(hashlib.sha256(token.encode()).digest()):
        return "wrong ath"
    return claims, jwk_thumbprint(header["jwk"])


class ResourceServer(_Base):
    """An MCP server that requires the AuthServer's tokens: PRM plus a verifying front for a
    snodo ``serve_http`` Runtime."""

    def __init__(
        self,
        auth: AuthServer,
        runtime: Runtime,
        *,
        scopes: Callable[[str], list[str]] = lambda method: [],
        scopes_supported: list[str] | None = None,
        rs_nonce: str | None = None,
        challenge_scope: str | None = None,
        prm_in_challenge: bool = True,
    ) -> None:
        self.auth = auth
        self.prm_in_challenge = prm_in_challenge
        self.prm_requests: list[str] = []
        self.scopes = scopes
        self.scopes_supported = scopes_supported
        self.rs_nonce = rs_nonce
        self.challenge_scope = challenge_scope
        self.accepted: list[str] = []  # the token of every request let through
        self.refusals: list[tuple[int, str]] = []
        self.authorization_headers: list[str] = []
        self._backend = serve_http(runtime)
        self._pool = urllib3.PoolManager(maxsize=64)
        super().__init__()
        self.url = f"{self.base}/mcp"
        self.prm_url = f"{self.base}/.well-known/oauth-protected-resource/mcp"

    def close(self) -> None:
        super().close()
        self._pool.clear()
        self._backend.close()

    def _challenge(
        self, status: int, error: str | None, scheme: str = "Bearer"
    ) -> tuple[int, dict[str, str], bytes]:
        params = [f'resource_metadata="{self.prm_url}"'] if self.prm_in_challenge else []
        if self.challenge_scope:
            params.append(f'scope="{self.challenge_scope}"')
        if error:
            params.append(f'error="{error}"')
        with self.auth.lock:
            self.refusals.append((status, error or ""))
        return _json(
            status,
            {"error": error or "unauthorized"},
            **{"WWW-Authenticate": f"{scheme} " + ", ".join(params)},
        )

    def handle(
        self, method: str, path: str, query: dict[str, str], headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        if method == "GET" and path.startswith("/.well-known/"):
            self.prm_requests.append(path)
        if method == "GET" and path == "/.well-known/oauth-protected-resource/mcp":
            doc: dict[str, Any] = {
                "resource": self.url,
                "authorization_servers": [self.auth.issuer],
            }
            if self.scopes_supported is not None:
                doc["scopes_supported"] = self.scopes_supported
            return _json(200, doc)
        if path != "/mcp":
            return _oauth_error(404, "not_found")
        if method == "GET":
            return 405, {}, b""
        auth = headers.get("authorization", "")
        with self.auth.lock:
            self.authorization_headers.append(auth.split(" ", 1)[0])
        scheme, _, token = auth.partition(" ")
        dpop = self.auth.dpop
        if not token:
            return self._challenge(401, None, "DPoP" if dpop else "Bearer")
        try:
            claims = jwt.decode(
                token,
                self.auth.public_key(),
                algorithms=["ES256"],
                audience=self.url,
                issuer=self.auth.issuer,
            )
        except jwt.PyJWTError:
            return self._challenge(401, "invalid_token", "DPoP" if dpop else "Bearer")
        if dpop:
            if scheme != "DPoP":
                return self._challenge(401, "invalid_token", "DPoP")
            checked = check_proof(headers.get("dpop", ""), "POST", self.url, token)
            if isinstance(checked, str) or checked[1] != claims.get("cnf", {}).get("jkt"):
                return self._challenge(401, "invalid_dpop_proof", "DPoP")
            if self.rs_nonce is not None and checked[0].get("nonce") != self.rs_nonce:
                status, hdrs, out = self._challenge(401, "use_dpop_nonce", "DPoP")
                hdrs["DPoP-Nonce"] = self.rs_nonce
                return status, hdrs, out
        elif scheme != "Bearer":
            return self._challenge(401, "invalid_token")
        rpc = json.loads(body or b"{}")
        needed = self.scopes(rpc.get("method", ""))
        granted = set(str(claims.get("scope", "")).split())
        if not set(needed) <= granted:
            self.challenge_scope = " ".join(needed)
            return self._challenge(403, "insufficient_scope")
        with self.auth.lock:
            self.accepted.append(token)
        forward = {
            k: v
            for k, v in headers.items()
            if k not in ("authorization", "dpop", "host", "content-length", "connection")
        }
        response = self._pool.request(
            method,
            self._backend.url,
            body=body,
            headers=forward,
            redirect=False,
            retries=False,
            timeout=10.0,
        )
        out_headers = {
            k: v
            for k, v in response.headers.items()
            if k.lower() in ("content-type", "mcp-session-id")
        }
        return response.status, out_headers, response.data


@contextmanager
def oauth_setup(
    runtime: Runtime, auth_options: dict[str, Any] | None = None, **rs_options: Any
) -> Iterator[tuple[AuthServer, ResourceServer]]:
    """An AuthServer and a ResourceServer in front of ``runtime``; both closed afterwards."""
    auth = AuthServer(**(auth_options or {}))
    try:
        rs = ResourceServer(auth, runtime, **rs_options)
        try:
            yield auth, rs
        finally:
            rs.close()
    finally:
        auth.close()


def browser(url: str) -> None:
    """Play the user's browser: open the authorization URL, follow its redirect to the
    client's loopback listener."""
    http = urllib3.PoolManager()
    try:
        response = http.request("GET", url, redirect=False, retries=False, timeout=10.0)
        location = response.headers.get("location")
        if location:
            http.request("GET", location, redirect=False, retries=False, timeout=10.0)
    finally:
        http.clear()


class Browser:
    """An ``authorize`` callable whose browser runs in a thread of its own (joined by
    ``join``); ``urls`` keeps every authorization URL it was given."""

    def __init__(self) -> None:
        self.urls: list[str] = []
        self._threads: list[threading.Thread] = []

    def __call__(self, url: str) -> None:
        self.urls.append(url)
        thread = threading.Thread(target=browser, args=(url,), daemon=True)
        self._threads.append(thread)
        thread.start()

    def join(self) -> None:
        for thread in self._threads:
            thread.join(10.0)
