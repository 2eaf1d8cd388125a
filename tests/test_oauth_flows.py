"""snodo.oauth against a real authorization server (tests/support/oauth_servers.py) that issues ES256
access tokens, in front of a snodo Runtime served over HTTP that verifies them.

Rules: authorization digest §2-§11 (discovery, issuer validation, PKCE, state, iss, resource,
scopes and step-up, refresh with rotation, client credentials, DPoP), the reference's
"Authorization" (no token or secret in an error; every wait bounded), issue 8's concurrency
requirement (50 callers through one expiring token: exactly one refresh).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import jwt
import pytest
import urllib3
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

import snodo
from snodo.oauth import MemoryStore, OAuthClient
from snodo.server import Runtime
from tests.support.oauth_servers import (
    JWT_BEARER,
    TOKEN_EXCHANGE,
    AuthServer,
    Browser,
    Client,
    ResourceServer,
    oauth_setup,
)

VERSION = "2026-07-28"


def runtime() -> Runtime:
    server = Runtime("oauth-test")
    server.add_tool("echo", lambda args, ctx: {"said": args.get("text", "")}, description="Echo")
    return server


class Keys(MemoryStore):
    """A MemoryStore that remembers the keys it was given (to reach the stored token)."""

    def __init__(self) -> None:
        super().__init__()
        self.keys: list[str] = []

    def put(self, key: str, value: dict[str, Any]) -> None:
        self.keys.append(key)
        super().put(key, value)

    def expire(self) -> None:
        record = self.get(self.keys[-1])
        assert record is not None
        record["expires_at"] = time.time() - 1
        super().put(self.keys[-1], record)


@pytest.fixture
def browser() -> Iterator[Browser]:
    b = Browser()
    yield b
    b.join()


def call(url: str, oauth: OAuthClient, version: str = VERSION) -> dict[str, Any]:
    with snodo.connect(snodo.Http(url), token_provider=oauth, protocol=version) as client:
        client.list_tools()
        return client.call_tool("echo", {"text": "hi"})


def authorization_code(rs: ResourceServer, browser: Browser, **kw: Any) -> OAuthClient:
    return OAuthClient(rs.url, authorize=browser, authorize_timeout=20.0, **kw)


# -- the authorization code grant -------------------------------------------------------------


@pytest.mark.parametrize("version", ["2026-07-28", "2025-11-25"])
def test_dynamic_registration_pkce_loopback_and_verified_tokens(
    browser: Browser, version: str
) -> None:
    with oauth_setup(runtime()) as (auth, rs):
        oauth = authorization_code(rs, browser)
        result = call(rs.url, oauth, version)
        assert result["structuredContent"] == {"said": "hi"} or "hi" in str(result)
        [registration] = auth.registrations
        assert registration["application_type"] == "native"
        assert "refresh_token" in registration["grant_types"]
        [request] = auth.authorize_requests
        assert request["code_challenge_method"] == "S256"
        assert request["resource"] == rs.url
        assert request["redirect_uri"].startswith("http://127.0.0.1:")
        assert len(request["state"]) >= 22
        code_form = next(f for f in auth.token_forms if f["grant_type"] == "authorization_code")
        assert code_form["resource"] == rs.url and len(code_form["code_verifier"]) >= 43
        assert rs.accepted  # the resource server verified the issued token
        assert jwt.decode(rs.accepted[0], auth.public_key(), algorithms=["ES256"], audience=rs.url)


def test_well_known_discovery_order_without_a_header_and_an_issuer_with_a_path(
    browser: Browser,
) -> None:
    with oauth_setup(runtime(), {"path": "/tenant1"}, prm_in_challenge=False) as (auth, rs):
        call(rs.url, authorization_code(rs, browser))
        assert rs.prm_requests[0] == "/.well-known/oauth-protected-resource/mcp"
        assert auth.metadata_requests[:3] == [
            "/.well-known/oauth-authorization-server/tenant1",
            "/.well-known/openid-configuration/tenant1",
            "/tenant1/.well-known/openid-configuration",
        ]
        assert auth.grants == ["authorization_code"]


def test_pre_registered_client_secret_basic_and_post(browser: Browser) -> None:
    for method in ("client_secret_basic", "client_secret_post"):
        with oauth_setup(runtime(), {"auth_methods": (method,), "registration": False}) as (
            auth,
            rs,
        ):
            auth.add_client(Client("app", "app-secret", auth_method=method))
            oauth = authorization_code(
                rs, browser, client_id="app", client_secret="app-secret", issuer=auth.issuer
            )
            call(rs.url, oauth)
            assert auth.grants == ["authorization_code"]
            form = auth.token_forms[0]
            assert ("client_secret" in form) == (method == "client_secret_post")


def test_client_id_metadata_document(browser: Browser) -> None:
    cimd = "https://app.example/oauth/client.json"
    with oauth_setup(runtime(), {"cimd": True}) as (auth, rs):
        call(rs.url, authorization_code(rs, browser, client_metadata_url=cimd))
        assert auth.registrations == []
        assert auth.authorize_requests[0]["client_id"] == cimd


def test_pre_registered_credentials_are_not_used_with_another_issuer(browser: Browser) -> None:
    with oauth_setup(runtime(), {"registration": False}) as (auth, rs):
        auth.add_client(Client("app", "app-secret", auth_method="client_secret_basic"))
        oauth = authorization_code(
            rs, browser, client_id="app", client_secret="app-secret", issuer="https://other.test"
        )
        with pytest.raises(snodo.McpError) as caught:
            call(rs.url, oauth)
        assert caught.value.kind == "authorization"
        assert caught.value.cause[1] == "client registration"
        assert auth.token_forms == []


@pytest.mark.parametrize(
    ("challenge", "supported", "expected"),
    [("files:read", ["a", "b"], "files:read"), (None, ["a", "b"], "a b"), (None, None, None)],
)
def test_scope_selection(
    browser: Browser, challenge: str | None, supported: list[str] | None, expected: str | None
) -> None:
    with oauth_setup(runtime(), challenge_scope=challenge, scopes_supported=supported) as (
        auth,
        rs,
    ):
        call(rs.url, authorization_code(rs, browser))
        assert auth.authorize_requests[0].get("scope") == expected


def test_offline_access_added_when_the_server_lists_it(browser: Browser) -> None:
    with oauth_setup(
        runtime(), {"scopes_supported": ["mcp", "offline_access"]}, challenge_scope="mcp"
    ) as (auth, rs):
        call(rs.url, authorization_code(rs, browser))
        assert auth.authorize_requests[0]["scope"] == "mcp offline_access"


def test_step_up_requests_the_union_of_scopes(browser: Browser) -> None:
    needs = {"tools/list": ["read"], "tools/call": ["write"]}
    with oauth_setup(runtime(), challenge_scope="read", scopes=lambda m: needs.get(m, [])) as (
        auth,
        rs,
    ):
        call(rs.url, authorization_code(rs, browser))
        scopes = [r.get("scope") for r in auth.authorize_requests]
        assert scopes == ["read", "read write"]
        assert (403, "insufficient_scope") in rs.refusals


def test_step_up_is_bounded(browser: Browser) -> None:
    with oauth_setup(
        runtime(),
        {"denied_scopes": ("admin",)},
        challenge_scope="admin",
        scopes=lambda m: ["admin"] if m == "tools/call" else [],
    ) as (auth, rs):
        oauth = authorization_code(rs, browser, max_step_ups=2)
        with snodo.connect(snodo.Http(rs.url), token_provider=oauth, protocol=VERSION) as client:
            client.list_tools()
            errors = []
            for _ in range(3):
                with pytest.raises(snodo.McpError) as caught:
                    client.call_tool("echo", {})
                errors.append(caught.value)
        assert [e.kind for e in errors[:2]] == ["transport", "transport"]
        assert errors[2].kind == "authorization" and errors[2].cause[1] == "step-up"
        assert len(auth.authorize_requests) == 3  # the first authorization and 2 step-ups


def test_iss_mismatch_is_refused_before_the_token_request(browser: Browser) -> None:
    with oauth_setup(runtime(), {"iss_value": "https://evil.example"}) as (auth, rs):
        with pytest.raises(snodo.McpError) as caught:
            call(rs.url, authorization_code(rs, browser))
        assert caught.value.kind == "authorization"
        assert caught.value.cause[1] == "authorization response"
        assert not any(f["grant_type"] == "authorization_code" for f in auth.token_forms)


def test_a_forged_state_is_refused() -> None:
    def forging_browser(url: str) -> str:
        http = urllib3.PoolManager()
        try:
            answer = http.request("GET", url, redirect=False, retries=False, timeout=10.0)
        finally:
            http.clear()
        location = answer.headers["location"]
        return re.sub(r"state=[^&]+", "state=forged", location)

    with oauth_setup(runtime()) as (auth, rs):
        oauth = OAuthClient(rs.url, authorize=forging_browser, authorize_timeout=10.0)
        with pytest.raises(snodo.McpError) as caught:
            call(rs.url, oauth)
        assert caught.value.cause[1] == "authorization response"
        assert auth.token_forms == []


def test_a_denied_authorization_names_the_servers_error(browser: Browser) -> None:
    with oauth_setup(runtime(), {"deny": True}) as (auth, rs):
        with pytest.raises(snodo.McpError) as caught:
            call(rs.url, authorization_code(rs, browser))
        assert caught.value.kind == "authorization"
        assert caught.value.cause == ("authorization", "authorization", "access_denied")
        assert auth.token_forms == []


def test_metadata_with_another_issuer_is_not_used(browser: Browser) -> None:
    with oauth_setup(runtime(), {"issuer_override": "https://honest.example"}) as (auth, rs):
        with pytest.raises(snodo.McpError) as caught:
            call(rs.url, authorization_code(rs, browser))
        assert caught.value.cause[1] == "authorization server metadata"
        assert auth.authorize_requests == []


def test_authorize_wait_is_bounded() -> None:
    with oauth_setup(runtime()) as (_auth, rs):
        # like webbrowser.open: True, and nobody ever comes back to the listener
        oauth = OAuthClient(rs.url, authorize=lambda url: True, authorize_timeout=0.3)
        started = time.monotonic()
        with pytest.raises(snodo.McpError) as caught:
            call(rs.url, oauth)
        assert time.monotonic() - started < 10
        assert caught.value.kind == "authorization" and caught.value.cause[1] == "authorization"


# -- refresh ------------------------------------------------------------------------------------


def test_fifty_callers_through_one_expiring_token_refresh_once(browser: Browser) -> None:
    with oauth_setup(runtime(), {"token_delay": 0.2}) as (auth, rs):
        store = Keys()
        oauth = authorization_code(rs, browser, token_store=store)
        with snodo.connect(snodo.Http(rs.url), token_provider=oauth, protocol=VERSION) as client:
            client.list_tools()
            first_refresh = store.get(store.keys[-1])["refresh_token"]  # type: ignore[index]
            store.expire()
            barrier = threading.Barrier(50, timeout=10.0)
            results: list[Any] = []

            def worker() -> None:
                barrier.wait()
                try:
                    results.append(client.call_tool("echo", {"text": "x"}))
                except Exception as exc:  # pragma: no cover - reported below
                    results.append(exc)

            threads = [threading.Thread(target=worker) for _ in range(50)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(30.0)
            assert len(results) == 50
            assert not [r for r in results if isinstance(r, Exception)]
            assert auth.grants.count("refresh_token") == 1
            # the rotated refresh token was kept: a second expiry refreshes with it
            rotated = store.get(store.keys[-1])["refresh_token"]  # type: ignore[index]
            assert rotated != first_refresh
            store.expire()
            client.call_tool("echo", {})
            assert auth.grants.count("refresh_token") == 2
            assert len(auth.authorize_requests) == 1


def test_concurrent_first_requests_share_one_authorization(browser: Browser) -> None:
    with oauth_setup(runtime()) as (auth, rs):
        oauth = authorization_code(rs, browser)
        barrier = threading.Barrier(10, timeout=10.0)
        failures: list[BaseException] = []

        def worker() -> None:
            barrier.wait()
            try:
                call(rs.url, oauth)
            except BaseException as exc:  # pragma: no cover - reported below
                failures.append(exc)

        threads = [threading.Thread(target=worker) for _ in range(10)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30.0)
        assert failures == []
        assert len(auth.authorize_requests) == 1 and len(auth.registrations) == 1


def test_refused_token_is_refreshed(browser: Browser) -> None:
    with oauth_setup(runtime()) as (auth, rs):
        oauth = authorization_code(rs, browser)
        with snodo.connect(snodo.Http(rs.url), token_provider=oauth, protocol=VERSION) as client:
            client.list_tools()
            auth.key = ec.generate_private_key(ec.SECP256R1())  # the server rotates its key
            client.list_tools()
        assert auth.grants == ["authorization_code", "refresh_token"]
        assert (401, "invalid_token") in rs.refusals


def test_a_new_authorization_server_gets_a_new_registration(browser: Browser) -> None:
    with oauth_setup(runtime()) as (first, rs):
        second = AuthServer()
        try:
            oauth = authorization_code(rs, browser)
            with snodo.connect(snodo.Http(rs.url), token_provider=oauth, protocol=VERSION) as c:
                c.list_tools()
                rs.auth = second  # the PRM now names another authorization server
                c.list_tools()
            assert len(first.registrations) == len(second.registrations) == 1
            old_id = first.authorize_requests[0]["client_id"]
            assert all(r["client_id"] != old_id for r in second.authorize_requests)
            assert "refresh_token" not in first.grants  # the old refresh token stayed home
            assert second.grants == ["authorization_code"]
        finally:
            second.close()


# -- grants without a user ----------------------------------------------------------------------


def _key_pem() -> tuple[Any, str]:
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    return key, pem


@pytest.mark.parametrize("method", ["client_secret_basic", "client_secret_post", "private_key_jwt"])
def test_client_credentials(method: str) -> None:
    with oauth_setup(runtime(), {"auth_methods": (method,), "registration": False}) as (auth, rs):
        key, pem = _key_pem()
        if method == "private_key_jwt":
            auth.add_client(Client("svc", public_key=key.public_key(), auth_method=method))
            oauth = OAuthClient(
                rs.url, grant="client_credentials", client_id="svc", private_key=pem
            )
        else:
            auth.add_client(Client("svc", "svc-secret", auth_method=method))
            oauth = OAuthClient(
                rs.url, grant="client_credentials", client_id="svc", client_secret="svc-secret"
            )
        call(rs.url, oauth)
        assert auth.grants == ["client_credentials"]
        assert auth.token_forms[0]["resource"] == rs.url
        if method == "private_key_jwt":
            assert "client_secret" not in auth.token_forms[0]
            assertion = auth.token_forms[0]["client_assertion"]
            claims = jwt.decode(
                assertion, key.public_key(), algorithms=["ES256"], audience=auth.issuer
            )
            assert claims["iss"] == claims["sub"] == "svc"


def test_client_credentials_renews_an_expired_token_without_a_user() -> None:
    with oauth_setup(runtime(), {"registration": False}) as (auth, rs):
        auth.add_client(Client("svc", "svc-secret", auth_method="client_secret_basic"))
        store = Keys()
        oauth = OAuthClient(
            rs.url,
            grant="client_credentials",
            client_id="svc",
            client_secret="svc-secret",
            token_store=store,
        )
        with snodo.connect(snodo.Http(rs.url), token_provider=oauth, protocol=VERSION) as client:
            client.list_tools()
            store.expire()
            client.list_tools()
        assert auth.grants == ["client_credentials", "client_credentials"]


def test_workload_jwt_bearer_grant_and_its_failure_is_not_retried() -> None:
    with oauth_setup(runtime(), {"registration": False}) as (auth, rs):
        workload, _ = _key_pem()
        auth.trusted_assertion_keys.append(workload.public_key())
        now = int(time.time())
        good = jwt.encode(
            {"iss": "wl", "sub": "wl", "aud": auth.issuer, "exp": now + 60},
            workload,
            algorithm="ES256",
        )
        call(rs.url, OAuthClient(rs.url, grant="jwt_bearer", assertion=good))
        assert auth.grants == [JWT_BEARER]
        expired = jwt.encode(
            {"iss": "wl", "sub": "wl", "aud": auth.issuer, "exp": now - 60},
            workload,
            algorithm="ES256",
        )
        with pytest.raises(snodo.McpError) as caught:
            call(rs.url, OAuthClient(rs.url, grant="jwt_bearer", assertion=expired))
        assert caught.value.kind == "authorization"
        assert caught.value.cause == ("authorization", "jwt-bearer grant", "invalid_grant")
        assert len(auth.token_forms) == 2  # one each: never retried


def test_enterprise_managed_authorization() -> None:
    with oauth_setup(runtime(), {"registration": False}) as (auth, rs):
        idp = AuthServer(registration=False)
        try:
            user_key, _ = _key_pem()
            idp.trusted_assertion_keys.append(user_key.public_key())
            auth.trusted_assertion_keys.append(idp.public_key())
            auth.add_client(Client("ent-app", "ent-secret", auth_method="client_secret_basic"))
            id_token = jwt.encode(
                {"iss": "idp", "sub": "alice", "aud": "idp-client"}, user_key, algorithm="ES256"
            )
            oauth = OAuthClient(
                rs.url,
                grant="enterprise",
                client_id="ent-app",
                client_secret="ent-secret",
                id_token=id_token,
                idp_token_endpoint=f"{idp.issuer}/token",
                idp_client_id="idp-client",
            )
            call(rs.url, oauth)
            assert idp.grants == [TOKEN_EXCHANGE]
            assert auth.grants == [JWT_BEARER]
            exchange = idp.token_forms[0]
            assert exchange["audience"] == auth.issuer and exchange["resource"] == rs.url
        finally:
            idp.close()


# -- DPoP -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("nonces", [False, True])
def test_dpop_bound_tokens_with_server_nonces(browser: Browser, nonces: bool) -> None:
    with oauth_setup(
        runtime(),
        {"dpop": True, "dpop_nonce": "as-nonce" if nonces else None},
        rs_nonce="rs-nonce" if nonces else None,
    ) as (auth, rs):
        call(rs.url, authorization_code(rs, browser))
        token = rs.accepted[0]
        claims = jwt.decode(token, auth.public_key(), algorithms=["ES256"], audience=rs.url)
        assert "jkt" in claims["cnf"]
        assert set(rs.authorization_headers) <= {"", "DPoP"}
        assert len(rs.accepted) >= 2
        if nonces:
            assert (401, "use_dpop_nonce") in rs.refusals


# -- no secrets in errors or logs ---------------------------------------------------------------


def test_no_token_or_secret_in_errors_or_logs(
    browser: Browser, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with oauth_setup(runtime(), {"registration": False}) as (auth, rs):
        auth.add_client(Client("svc", "the-real-secret", auth_method="client_secret_basic"))
        wrong = OAuthClient(
            rs.url, grant="client_credentials", client_id="svc", client_secret="wr0ng-s3cret"
        )
        with pytest.raises(snodo.McpError) as caught:
            call(rs.url, wrong)
        assert caught.value.kind == "authorization"
        assert caught.value.cause[1] == "client credentials grant"
        assert "wr0ng-s3cret" not in str(caught.value) + repr(caught.value) + caplog.text
        good = OAuthClient(
            rs.url, grant="client_credentials", client_id="svc", client_secret="the-real-secret"
        )
        call(rs.url, good)
        token = rs.accepted[0]
        assert token not in caplog.text and "the-real-secret" not in caplog.text
        assert token not in repr(good.tokens)


def test_an_async_client_renews_an_expiring_token_off_the_event_loop(browser: Browser) -> None:
    """snodo.aio over OAuth: a held token is read on the loop (``cached_token``); an expiring
    one is renewed by ``token`` on a worker thread, once for 20 concurrent calls."""
    import asyncio

    import snodo.aio

    with oauth_setup(runtime(), {"token_delay": 0.2}) as (auth, rs):
        store = Keys()
        oauth = authorization_code(rs, browser, token_store=store)
        assert oauth.cached_token(rs.url) == (True, None)  # nothing held yet
        renewing: list[str] = []
        real_token = oauth.token

        def token(url: str) -> str | None:
            renewing.append(threading.current_thread().name)
            return real_token(url)

        async def main() -> None:
            target = snodo.Http(rs.url)
            async with await snodo.aio.connect(
                target, token_provider=oauth, protocol=VERSION
            ) as client:
                await client.list_tools()
                known, held = oauth.cached_token(rs.url)
                assert known and held is not None
                store.expire()
                assert oauth.cached_token(rs.url) == (False, None)
                oauth.token = token  # type: ignore[method-assign]
                answers = await asyncio.gather(
                    *(client.call_tool("echo", {"text": str(i)}) for i in range(20))
                )
                assert len(answers) == 20

        asyncio.run(main())
        assert auth.grants.count("refresh_token") == 1
        assert renewing and "MainThread" not in renewing
