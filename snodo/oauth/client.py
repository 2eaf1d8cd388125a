"""``OAuthClient``: a :class:`snodo.auth.TokenProvider` that runs the MCP authorization flows.

Discovery (RFC 9728, RFC 8414 / OIDC with exact issuer validation), client identity
(pre-registered, Client ID Metadata Documents, dynamic registration), the authorization code
grant with PKCE, a loopback listener, ``state`` and ``iss`` checks, resource indicators, scope
selection and step-up, single-flight refresh, client credentials (secret or
``private_key_jwt``), the workload JWT-bearer grant, enterprise-managed authorization (ID-JAG
token exchange) and DPoP (RFC 9449). Pure decisions live in :mod:`snodo.oauth.discovery`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Final, Literal
from urllib.parse import parse_qsl, urlencode, urlsplit

from snodo.auth import Challenge
from snodo.log import get_logger
from snodo.oauth import discovery as d
from snodo.oauth import endpoints
from snodo.oauth.authorization_http import OAuthHttp
from snodo.oauth.errors import auth_error
from snodo.oauth.stores import MemoryStore, SharedRefresh, Store, token_key

__all__ = ["EXPIRY_SKEW", "JWT_BEARER", "Grant", "OAuthClient", "Secret"]

_log = get_logger("snodo.oauth")

Grant = Literal["authorization_code", "client_credentials", "jwt_bearer", "enterprise"]

JWT_BEARER: Final = "urn:ietf:params:oauth:grant-type:jwt-bearer"
#: A token this close to its expiry (seconds) is refreshed before use.
EXPIRY_SKEW: Final = 30.0

Secret = str | Callable[[], str]


def _value(secret: Secret | None) -> str | None:
    return secret() if callable(secret) else secret


class OAuthClient:
    """Obtains, refreshes and extends tokens for one MCP server (``resource``).

    ``authorize(url)`` shows the authorization URL to the user (``webbrowser.open`` will do);
    unless it returns the URL the authorization server redirected to (a str), the loopback
    listener waits for the redirect. ``grant`` chooses the flow: ``authorization_code``
    (default), ``client_credentials`` (``client_id`` with ``client_secret`` or
    ``private_key``), ``jwt_bearer`` (a workload ``assertion``) or ``enterprise``
    (``id_token`` exchanged at ``idp_token_endpoint`` for an ID-JAG). ``dpop`` is ``None``
    for "when the authorization server supports it". A token store that is a
    :class:`snodo.oauth.SharedRefresh` (``RedisStore``) is shared with other processes: a token
    another worker stored is used, and one worker at a time refreshes it, holding a lease of
    ``refresh_lease`` seconds (default ``2 * http_timeout + 5``) that the others wait for.
    """

    def __init__(
        self,
        resource: str,
        *,
        authorize: Callable[[str], object] | None = None,
        grant: Grant = "authorization_code",
        client_id: str | None = None,
        client_secret: Secret | None = None,
        issuer: str | None = None,
        private_key: Any = None,
        signing_algorithm: str = "ES256",
        client_metadata_url: str | None = None,
        client_name: str = "snodo",
        redirect_uri: str | None = None,
        scopes: Sequence[str] | None = None,
        assertion: Secret | None = None,
        id_token: Secret | None = None,
        idp_token_endpoint: str | None = None,
        idp_client_id: str | None = None,
        idp_client_secret: Secret | None = None,
        dpop: bool | None = None,
        token_store: Store | None = None,
        registration_store: Store | None = None,
        pending_store: Store | None = None,
        authorize_timeout: float = 300.0,
        http_timeout: float = 10.0,
        max_step_ups: int = 3,
        refresh_margin: float = EXPIRY_SKEW,
        refresh_lease: float | None = None,
        verify: bool = True,
        ca_certs: str | None = None,
    ) -> None:
        if not d.url_allowed(resource):
            raise ValueError("resource must be an https URL (http only for a loopback host)")
        if grant == "authorization_code" and authorize is None:
            raise ValueError("the authorization_code grant needs authorize=")
        if grant == "client_credentials" and (
            client_id is None or (client_secret is None and private_key is None)
        ):
            raise ValueError("client_credentials needs client_id and client_secret or private_key")
        if grant == "jwt_bearer" and assertion is None:
            raise ValueError("the jwt_bearer grant needs assertion=")
        if grant == "enterprise" and (
            id_token is None or idp_token_endpoint is None or client_id is None
        ):
            raise ValueError("enterprise needs client_id, id_token and idp_token_endpoint")
        self.resource = resource
        self.grant: Grant = grant
        self._authorize = authorize
        self._client_id = client_id
        self._client_secret = client_secret
        self._issuer = issuer
        self._private_key = private_key
        self._alg = signing_algorithm
        self._cimd = client_metadata_url
        self._client_name = client_name
        self._redirect_uri = redirect_uri
        self._scopes = tuple(scopes) if scopes is not None else None
        self._assertion = assertion
        self._id_token = id_token
        self._idp_token_endpoint = idp_token_endpoint
        self._idp_client_id = idp_client_id
        self._idp_client_secret = idp_client_secret
        self._dpop_wanted = dpop
        self._dpop: Any = None  # a jwts.DpopKey once DPoP is in use
        self.tokens: Store = token_store if token_store is not None else MemoryStore()
        self.registrations: Store = (
            registration_store if registration_store is not None else MemoryStore()
        )
        self.pending: Store = pending_store if pending_store is not None else MemoryStore()
        self.authorize_timeout = authorize_timeout
        self.max_step_ups = max_step_ups
        self.refresh_margin = refresh_margin
        #: Seconds one process may hold the cross-process refresh lease (a shared token store).
        self.refresh_lease = refresh_lease if refresh_lease is not None else 2 * http_timeout + 5
        self._http = OAuthHttp(timeout=http_timeout, verify=verify, ca_certs=ca_certs)
        self._lock = threading.Lock()
        self._key: str | None = None  # the token store key in use
        self._requested: tuple[str, ...] | None = None  # the scopes last asked for
        self._step_ups = 0
        self._context: dict[str, Any] = {}  # issuer, metadata, client of the current token
        #: How many token requests were made (grants and refreshes), for tests and metrics.
        self.token_requests = 0

    # -- TokenProvider -------------------------------------------------------------------------

    def token(self, url: str) -> str | None:
        """The current access token; an expiring one is refreshed first (single-flight).
        ``None`` before the first authorization: the server's challenge starts it."""
        current = self._current()
        if current is None:
            return None
        if not self._expiring(current):
            return str(current["access_token"])
        with self._locked():
            current = self._current()
            if current is None:
                return None
            if not self._expiring(current):
                return str(current["access_token"])
            return self._renew(current)

    def cached_token(self, url: str) -> tuple[bool, str | None]:
        """``(True, token)`` when ``token(url)`` needs no I/O, ``(False, None)`` when it would
        renew an expiring token (``snodo.auth.CachingTokenProvider``: ``snodo.aio`` then calls
        ``token`` off the event loop)."""
        current = self._current()
        if current is None:
            return True, None
        if not self._expiring(current):
            return True, str(current["access_token"])
        return False, None

    def refresh(
        self, challenge: Challenge | None, *, url: str, status: int, token: str | None
    ) -> str | None:
        """A token for the request the server refused: the same one after a DPoP nonce
        challenge, a refreshed one after a 401, a re-authorized one with the union of scopes
        after a 403 ``insufficient_scope`` (at most ``max_step_ups`` times)."""
        if d.refusal_step(status, challenge, token=token) == "nonce":
            return token
        with self._locked():
            current = self._current()
            step = d.refusal_step(
                status,
                challenge,
                token=token,
                current=None if current is None else str(current["access_token"]),
                current_usable=current is not None and not self._expiring(current),
                can_refresh=current is not None and bool(current.get("refresh_token")),
            )
            if step == "reuse":
                assert current is not None
                return str(current["access_token"])  # another caller already replaced it
            if step == "step-up":
                return self._step_up(challenge)
            if step == "refresh" and not self._server_moved(challenge):
                with self._shared_refresh(
                    lambda r: r is None or r.get("access_token") != token
                ) as fresh:
                    if fresh is not None and fresh.get("access_token") != token:
                        return str(fresh["access_token"])  # another process replaced it
                    if fresh is not None and fresh.get("refresh_token"):
                        try:
                            return self._refresh_grant(fresh)
                        except Exception as error:
                            _log.info("refresh failed; authorizing again", error=str(error))
                    self._drop()
                return self._obtain(challenge, None)
            self._drop()
            return self._obtain(challenge, None)

    def request_headers(self, method: str, url: str, token: str) -> dict[str, str]:
        """The authorization headers for one request: ``Bearer``, or ``DPoP`` with a fresh
        proof for a DPoP-bound token."""
        current = self._current()
        if (
            self._dpop is not None
            and current is not None
            and current.get("access_token") == token
            and str(current.get("token_type", "")).lower() == "dpop"
        ):
            return {
                "Authorization": f"DPoP {token}",
                "DPoP": self._dpop.proof(method, url, token),
            }
        return {"Authorization": f"Bearer {token}"}

    def dpop_nonce(self, url: str, nonce: str) -> None:
        """Remember a ``DPoP-Nonce`` the resource server sent."""
        if self._dpop is not None:
            self._dpop.note_nonce(url, nonce)

    def close(self) -> None:
        """Release the connection pool."""
        self._http.close()

    # -- state ---------------------------------------------------------------------------------

    def _locked(self) -> _Bounded:
        return _Bounded(self._lock, self.authorize_timeout + 60.0)

    def _current(self) -> dict[str, Any] | None:
        key = self._key
        return None if key is None else self.tokens.get(key)

    def _expiring(self, current: Mapping[str, Any]) -> bool:
        expires = current.get("expires_at")
        return isinstance(expires, (int, float)) and time.time() >= expires - self.refresh_margin

    def _drop(self) -> None:
        if self._key is not None:
            self.tokens.delete(self._key)

    def _server_moved(self, challenge: Challenge | None) -> bool:
        """True when the resource now names another authorization server than the one that
        issued the current token (its refresh token must not go to the new one)."""
        try:
            prm = self._protected_resource(challenge)
        except Exception:
            return True
        if prm is None:
            return not self._context.get("at_origin")
        return self._choose_issuer(prm) != self._context.get("issuer")

    def _renew(self, current: dict[str, Any]) -> str | None:
        """An expiring token: refresh it, or obtain a new one without a user when possible
        (with a shared store, under the cross-process lease; the record read under it)."""
        with self._shared_refresh(lambda r: r is None or not self._expiring(r)) as fresh:
            if fresh is not None and not self._expiring(fresh):
                return str(fresh["access_token"])  # another process renewed it
            if fresh is not None and fresh.get("refresh_token"):
                try:
                    return self._refresh_grant(fresh)
                except Exception as error:
                    _log.info("refresh failed", error=str(error))
            self._drop()
            if self.grant != "authorization_code" and self._context:
                return self._grant(self._context, self._requested, adopt=False)
        return None  # the server's 401 starts a new authorization

    @contextmanager
    def _shared_refresh(
        self, done: Callable[[dict[str, Any] | None], bool]
    ) -> Iterator[dict[str, Any] | None]:
        """The current record, read under the cross-process refresh lease when the token store
        is a :class:`SharedRefresh` (released on exit). While another process holds it, wait
        (bounded by ``refresh_lease`` + 5 s) and re-read: when ``done(record)`` (that process
        renewed or dropped it), yield that without taking the lease."""
        shared = self.tokens
        key = self._key
        if not isinstance(shared, SharedRefresh) or key is None:
            yield self._current()
            return
        limit = self.refresh_lease + 5.0
        deadline = time.monotonic() + limit
        lease = shared.acquire(key, self.refresh_lease)
        while lease is None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise auth_error(
                    "refresh", f"another process held the refresh lock for over {limit:g} s"
                )
            shared.wait_released(key, left)
            record = self.tokens.get(key)
            if done(record):
                yield record
                return
            lease = shared.acquire(key, self.refresh_lease)
        try:
            yield self.tokens.get(key)
        finally:
            shared.release(key, lease)

    # -- the flows -----------------------------------------------------------------------------

    def _step_up(self, challenge: Challenge | None) -> str | None:
        challenged = challenge.scope if challenge is not None else None
        repeat = set(challenged or ()) <= set(self._requested or ())
        self._step_ups = self._step_ups + 1 if repeat else 1
        if self._step_ups > self.max_step_ups:
            raise auth_error(
                "step-up", f"the server still refuses after {self.max_step_ups} scope upgrades"
            )
        scopes = d.union_scopes(self._requested, challenged)
        self._drop()
        return self._obtain(challenge, scopes or None)

    def _obtain(self, challenge: Challenge | None, scopes: tuple[str, ...] | None) -> str:
        """Discover, identify the client and run the grant; the new access token."""
        prm = self._protected_resource(challenge)
        if prm is None:
            context = self._origin_context()
            resource = d.canonical_resource(self.resource)
        else:
            resource = str(prm.get("resource") or d.canonical_resource(self.resource))
            issuer = self._choose_issuer(prm)
            metadata = self._as_metadata(issuer)
            context = {"issuer": issuer, "metadata": metadata, "prm": prm}
        context["resource"] = resource
        if scopes is None:
            scopes = self._scopes or d.select_scopes(
                challenge.scope if challenge is not None else None, prm
            )
        self._context = context
        return self._grant(context, scopes)

    def _grant(
        self, context: dict[str, Any], scopes: tuple[str, ...] | None, *, adopt: bool = True
    ) -> str:
        self._requested = scopes
        metadata = context["metadata"]
        wants_dpop = self._dpop_wanted or (
            self._dpop_wanted is None and bool(metadata.get("dpop_signing_alg_values_supported"))
        )
        if wants_dpop and self._dpop is None:
            from snodo.oauth.jwts import DpopKey

            self._dpop = DpopKey()
        adopted = self._adopt(context, scopes) if adopt else None
        if adopted is not None:
            return adopted
        if self.grant == "client_credentials":
            answer = self._client_credentials(context, scopes)
        elif self.grant == "jwt_bearer":
            answer = self._jwt_bearer(context, scopes, _value(self._assertion) or "")
        elif self.grant == "enterprise":
            answer = self._enterprise(context, scopes)
        else:
            answer = self._authorization_code(context, scopes)
        return self._keep(context, answer)

    def _adopt(self, context: Mapping[str, Any], scopes: tuple[str, ...] | None) -> str | None:
        """With a shared token store: the token another process stored for this issuer,
        client and resource (renewed first when expiring) instead of a new grant; ``None``
        when there is none with the scopes asked for (DPoP-bound tokens stay per process)."""
        if not isinstance(self.tokens, SharedRefresh):
            return None
        client = self.registrations.get(context["issuer"])
        client_id = client.get("client_id") if client is not None else self._client_id
        if client_id is None:
            return None
        key = token_key(context["issuer"], str(client_id), context["resource"])
        record = self.tokens.get(key)
        if record is None or str(record.get("token_type", "")).lower() == "dpop":
            return None
        if scopes and not set(scopes) <= set(str(record.get("scope") or "").split()):
            return None
        self._key = key
        if not self._expiring(record):
            return str(record["access_token"])
        return self._renew(record)

    def _protected_resource(self, challenge: Challenge | None) -> dict[str, Any] | None:
        """The PRM document (RFC 9728), or ``None`` when the server publishes none."""
        step = "protected resource metadata"
        for url in d.prm_urls(self.resource, challenge.resource_metadata if challenge else None):
            answer = self._http.get(url, step)
            doc = answer.body
            if answer.status != 200 or doc is None:
                continue
            servers = doc.get("authorization_servers")
            if not isinstance(servers, list) or not servers:
                raise auth_error(step, "the document lists no authorization_servers")
            resource = doc.get("resource")
            if resource is not None and (
                not isinstance(resource, str) or not d.resource_allowed(resource, self.resource)
            ):
                raise auth_error(
                    step, "the document's resource does not identify this server", detail=url
                )
            return doc
        return None

    def _choose_issuer(self, prm: Mapping[str, Any]) -> str:
        servers = [s for s in prm["authorization_servers"] if isinstance(s, str)]
        if not servers:
            raise auth_error("protected resource metadata", "no usable authorization server")
        if self._issuer is not None and self._issuer in servers:
            return self._issuer
        return servers[0]

    def _as_metadata(self, issuer: str) -> dict[str, Any]:
        """Authorization server metadata whose ``issuer`` is exactly ``issuer``."""
        step = "authorization server metadata"
        mismatch = False
        for url in d.as_metadata_urls(issuer):
            answer = self._http.get(url, step)
            if answer.status != 200 or answer.body is None:
                continue
            if not d.issuer_matches(answer.body, issuer):
                mismatch = True
                continue
            return answer.body
        if mismatch:
            raise auth_error(step, "the metadata's issuer is not the authorization server's")
        raise auth_error(step, "no metadata document was found", detail=issuer)

    def _origin_context(self) -> dict[str, Any]:
        """2025-03-26 servers: the metadata at the server's origin, else default endpoints."""
        base = d.origin(self.resource)
        answer = self._http.get(base + d.OAUTH_WELL_KNOWN, "authorization server metadata")
        if answer.status == 200 and answer.body is not None:
            metadata = answer.body
            issuer = str(metadata.get("issuer") or base)
        else:
            metadata = d.default_endpoints(self.resource)
            issuer = base
        return {"issuer": issuer, "metadata": metadata, "prm": None, "at_origin": True}

    # -- client identity -----------------------------------------------------------------------

    def _client(self, context: dict[str, Any], redirect_uri: str | None) -> dict[str, Any]:
        """The client identity for this authorization server (registrations keyed by issuer;
        never another server's credentials)."""
        issuer = context["issuer"]
        metadata = context["metadata"]
        known = self.registrations.get(issuer)
        if known is not None:
            return known
        if self._client_id is not None and self._preregistered_for(issuer):
            secret = _value(self._client_secret)
            client = {
                "client_id": self._client_id,
                "client_secret": secret,
                "auth_method": d.token_auth_method(
                    metadata, has_secret=secret is not None, has_key=self._private_key is not None
                ),
            }
        elif self._cimd is not None and metadata.get("client_id_metadata_document_supported"):
            client = {"client_id": self._cimd, "client_secret": None, "auth_method": "none"}
        elif metadata.get("registration_endpoint"):
            client = endpoints.register(self._http, metadata, redirect_uri, self._client_name)
        else:
            raise auth_error(
                "client registration",
                "no pre-registered client for this authorization server, and it offers neither "
                "client ID metadata documents nor dynamic registration",
            )
        self.registrations.put(issuer, client)
        return client

    def _preregistered_for(self, issuer: str) -> bool:
        if self._issuer is not None:
            return self._issuer == issuer
        bound = self.registrations.get("snodo:preregistered-issuer")
        if bound is None:
            self.registrations.put("snodo:preregistered-issuer", {"issuer": issuer})
            return True
        return bool(bound.get("issuer") == issuer)

    # -- grants --------------------------------------------------------------------------------

    def _authorization_code(
        self, context: dict[str, Any], scopes: tuple[str, ...] | None
    ) -> dict[str, Any]:
        metadata = context["metadata"]
        issuer = context["issuer"]
        if not d.pkce_supported(metadata):
            raise auth_error(
                "authorization server metadata",
                "the server does not advertise PKCE S256 (code_challenge_methods_supported)",
            )
        endpoint = metadata.get("authorization_endpoint")
        if not isinstance(endpoint, str) or not d.url_allowed(endpoint):
            raise auth_error("authorization server metadata", "no usable authorization_endpoint")
        listener = self._listener()
        try:
            redirect_uri = listener.redirect_uri if listener is not None else self._redirect_uri
            assert redirect_uri is not None
            client = self._client(context, redirect_uri)
            scopes = d.with_offline_access(scopes, metadata)
            verifier, state = d.new_verifier(), d.new_state()
            self.pending.put(
                state,
                {
                    "verifier": verifier,
                    "issuer": issuer,
                    "redirect_uri": redirect_uri,
                    "client_id": client["client_id"],
                    "resource": context["resource"],
                },
            )
            query = {
                "response_type": "code",
                "client_id": client["client_id"],
                "redirect_uri": redirect_uri,
                "code_challenge": d.code_challenge(verifier),
                "code_challenge_method": "S256",
                "state": state,
                "resource": context["resource"],
            }
            if scopes:
                query["scope"] = " ".join(scopes)
            separator = "&" if urlsplit(endpoint).query else "?"
            try:
                params = self._await_redirect(endpoint + separator + urlencode(query), listener)
            finally:
                record = self.pending.get(state)
                self.pending.delete(state)
        finally:
            if listener is not None:
                listener.close()
        if record is None or params.get("state") != state:
            raise auth_error("authorization response", "the state parameter does not match")
        problem = d.check_iss(params, record["issuer"], metadata)
        if problem is not None:
            raise auth_error("authorization response", problem)
        if "error" in params:
            raise auth_error(
                "authorization", "the server refused the authorization", detail=params["error"]
            )
        code = params.get("code")
        if not code:
            raise auth_error("authorization response", "the response carries no code")
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": record["redirect_uri"],
            "code_verifier": record["verifier"],
            "resource": record["resource"],
        }
        return self._token_request(context, client, form, "token request")

    def _listener(self) -> Any:
        """The loopback listener (bound now, before the authorization URL is built), or
        ``None`` when ``redirect_uri`` is not a loopback URL."""
        from snodo.oauth.loopback import LoopbackListener

        if self._redirect_uri is None:
            return LoopbackListener()
        parts = urlsplit(self._redirect_uri)
        if parts.scheme == "http" and (parts.hostname or "") in ("127.0.0.1", "::1"):
            return LoopbackListener(parts.hostname or "127.0.0.1", parts.port or 0, parts.path)
        return None

    def _await_redirect(self, url: str, listener: Any) -> dict[str, str]:
        assert self._authorize is not None
        started = time.monotonic()
        answered = self._authorize(url)
        if not isinstance(answered, str):  # None, or webbrowser.open's bool
            if listener is None:
                raise auth_error(
                    "authorization",
                    "authorize returned no redirect and no loopback listener is waiting",
                )
            left = self.authorize_timeout - (time.monotonic() - started)
            answered = listener.wait(max(left, 0.0))
        return dict(parse_qsl(urlsplit(answered).query, keep_blank_values=True))

    def _client_credentials(
        self, context: dict[str, Any], scopes: tuple[str, ...] | None
    ) -> dict[str, Any]:
        client = self._client(context, None)
        form = {"grant_type": "client_credentials", "resource": context["resource"]}
        if scopes:
            form["scope"] = " ".join(scopes)
        return self._token_request(context, client, form, "client credentials grant")

    def _jwt_bearer(
        self, context: dict[str, Any], scopes: tuple[str, ...] | None, assertion: str
    ) -> dict[str, Any]:
        """The RFC 7523 §2.1 grant with a workload (or ID-JAG) assertion; never retried."""
        if self._client_id is not None:
            client = self._client(context, None)
        else:
            client = {"client_id": None, "auth_method": "none"}
        form = {"grant_type": JWT_BEARER, "assertion": assertion, "resource": context["resource"]}
        if scopes:
            form["scope"] = " ".join(scopes)
        if client.get("client_id") is None:
            return self._post_token(context, form, {}, "jwt-bearer grant")
        return self._token_request(context, client, form, "jwt-bearer grant")

    def _enterprise(
        self, context: dict[str, Any], scopes: tuple[str, ...] | None
    ) -> dict[str, Any]:
        """Enterprise-managed authorization: exchange the IdP ID token for an ID-JAG (RFC 8693),
        then present it with the JWT-bearer grant."""
        assert self._idp_token_endpoint is not None
        id_jag = endpoints.exchange_for_id_jag(
            self._http,
            self._idp_token_endpoint,
            _value(self._id_token) or "",
            audience=context["issuer"],
            resource=context["resource"],
            scopes=scopes,
            idp_client_id=self._idp_client_id,
            idp_client_secret=_value(self._idp_client_secret),
        )
        return self._jwt_bearer(context, scopes, id_jag)

    def _refresh_grant(self, current: dict[str, Any]) -> str:
        """Refresh (single-flight: callers hold the lock); a rotated refresh token replaces
        the old one, an unrotated one is kept."""
        context = self._context
        client = self.registrations.get(context["issuer"]) or {
            "client_id": current.get("client_id"),
            "auth_method": "none",
        }
        form = {
            "grant_type": "refresh_token",
            "refresh_token": current["refresh_token"],
            "resource": context["resource"],
        }
        answer = self._token_request(context, client, form, "refresh")
        answer.setdefault("refresh_token", current["refresh_token"])
        return self._keep(context, answer)

    # -- token endpoint ------------------------------------------------------------------------

    def _token_request(
        self,
        context: Mapping[str, Any],
        client: Mapping[str, Any],
        form: dict[str, str],
        step: str,
    ) -> dict[str, Any]:
        headers = endpoints.client_auth(
            client, context["issuer"], form, private_key=self._private_key, algorithm=self._alg
        )
        answer = self._post_token(context, form, headers, step)
        answer["client_id"] = client.get("client_id")
        return answer

    def _post_token(
        self,
        context: Mapping[str, Any],
        form: dict[str, str],
        headers: dict[str, str],
        step: str,
    ) -> dict[str, Any]:
        endpoint = context["metadata"].get("token_endpoint")
        if not isinstance(endpoint, str):
            raise auth_error("authorization server metadata", "no token_endpoint")
        self.token_requests += 1
        return endpoints.post_token(self._http, endpoint, form, headers, step, self._dpop)

    def _keep(self, context: Mapping[str, Any], answer: dict[str, Any]) -> str:
        """Store a token answer under (issuer, client, resource); the access token."""
        from snodo.auth import check_token

        token = answer["access_token"]
        try:
            check_token(token)
        except Exception:
            raise auth_error("token request", "the access token is not usable") from None
        record: dict[str, Any] = {
            "access_token": token,
            "token_type": str(answer.get("token_type") or "Bearer"),
            "client_id": answer.get("client_id"),
            "scope": answer.get("scope"),
        }
        refresh = answer.get("refresh_token")
        if isinstance(refresh, str) and refresh:
            record["refresh_token"] = refresh
        expires_in = answer.get("expires_in")
        if isinstance(expires_in, (int, float)) and not isinstance(expires_in, bool):
            record["expires_at"] = time.time() + float(expires_in)
        key = token_key(context["issuer"], str(record["client_id"]), context["resource"])
        self.tokens.put(key, record)
        if self._key is not None and self._key != key:
            self.tokens.delete(self._key)
        self._key = key
        return str(token)

    def __repr__(self) -> str:
        return f"OAuthClient(resource={self.resource!r}, grant={self.grant!r})"


class _Bounded:
    """``with`` on a lock, giving up with an authorization error after ``timeout`` seconds."""

    def __init__(self, lock: threading.Lock, timeout: float) -> None:
        self._lock = lock
        self._timeout = timeout

    def __enter__(self) -> None:
        if not self._lock.acquire(timeout=self._timeout):
            raise auth_error("waiting for another authorization", "it did not finish in time")

    def __exit__(self, *exc: object) -> None:
        self._lock.release()
