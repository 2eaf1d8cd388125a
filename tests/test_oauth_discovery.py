"""The pure decisions of snodo.oauth (no sockets): metadata URL orders, issuer and resource
validation, scope selection, the RFC 9207 iss table, PKCE, token endpoint authentication, and
the loopback listener's redirect handling.

Rules: authorization digest §2 (PRM order), §3 (AS metadata order, identical issuer), §4
(PKCE S256), §6 (scope priority, offline_access), §7 (canonical resource), §8 (iss table),
§10 (client authentication choice), §11 (https only, loopback http allowed).
"""

from __future__ import annotations

import base64
import hashlib
import socket
import threading

import pytest

from snodo.auth import Challenge
from snodo.oauth import discovery as d
from snodo.oauth.errors import auth_error
from snodo.oauth.jwts import access_token_hash, htu
from snodo.oauth.loopback import LoopbackListener


def test_prm_urls_header_first_else_path_then_root() -> None:
    assert d.prm_urls("https://x.test/public/mcp", "https://x.test/m.json") == [
        "https://x.test/m.json"
    ]
    assert d.prm_urls("https://x.test/public/mcp", None) == [
        "https://x.test/.well-known/oauth-protected-resource/public/mcp",
        "https://x.test/.well-known/oauth-protected-resource",
    ]
    assert d.prm_urls("https://x.test/", None) == [
        "https://x.test/.well-known/oauth-protected-resource"
    ]


def test_as_metadata_urls_with_and_without_a_path() -> None:
    assert d.as_metadata_urls("https://auth.test/tenant1") == [
        "https://auth.test/.well-known/oauth-authorization-server/tenant1",
        "https://auth.test/.well-known/openid-configuration/tenant1",
        "https://auth.test/tenant1/.well-known/openid-configuration",
    ]
    assert d.as_metadata_urls("https://auth.test") == [
        "https://auth.test/.well-known/oauth-authorization-server",
        "https://auth.test/.well-known/openid-configuration",
    ]


def test_issuer_must_be_identical() -> None:
    assert d.issuer_matches({"issuer": "https://a.test"}, "https://a.test")
    assert not d.issuer_matches({"issuer": "https://a.test/"}, "https://a.test")
    assert not d.issuer_matches({"issuer": "https://A.test"}, "https://a.test")
    assert not d.issuer_matches({}, "https://a.test")


@pytest.mark.parametrize(
    ("resource", "ok"),
    [
        ("https://mcp.test/mcp", True),
        ("https://mcp.test", True),
        ("https://MCP.test/", True),
        ("https://mcp.test:443/mcp", True),
        ("https://evil.test/mcp", False),
        ("http://mcp.test/mcp", False),
        ("https://mcp.test/mc", False),
        ("https://mcp.test/mcp/other", False),
        ("https://mcp.test/mcp#frag", False),
    ],
)
def test_resource_must_identify_the_server(resource: str, ok: bool) -> None:
    assert d.resource_allowed(resource, "https://mcp.test/mcp") is ok


def test_canonical_resource() -> None:
    assert d.canonical_resource("HTTPS://MCP.Example.com/mcp/#x") == "https://mcp.example.com/mcp"
    assert d.canonical_resource("https://mcp.example.com/") == "https://mcp.example.com"


def test_scope_selection_priority() -> None:
    prm = {"scopes_supported": ["a", "b"]}
    assert d.select_scopes(("files:read",), prm) == ("files:read",)
    assert d.select_scopes(None, prm) == ("a", "b")
    assert d.select_scopes(None, {}) is None
    assert d.select_scopes((), None) is None


def test_offline_access_and_union() -> None:
    meta = {"scopes_supported": ["a", "offline_access"]}
    assert d.with_offline_access(("a",), meta) == ("a", "offline_access")
    assert d.with_offline_access(("a",), {"scopes_supported": ["a"]}) == ("a",)
    assert d.with_offline_access(None, meta) is None
    assert d.union_scopes(("a", "b"), ("b", "c"), None) == ("a", "b", "c")


@pytest.mark.parametrize(
    ("supported", "iss", "problem"),
    [
        (True, "https://as.test", False),
        (True, None, True),
        (True, "https://as.test/", True),
        (False, "https://evil.test", True),
        (None, "https://as.test", False),
        (None, None, False),
        (False, None, False),
    ],
)
def test_iss_table(supported: bool | None, iss: str | None, problem: bool) -> None:
    meta = (
        {} if supported is None else {"authorization_response_iss_parameter_supported": supported}
    )
    params = {} if iss is None else {"iss": iss}
    assert (d.check_iss(params, "https://as.test", meta) is not None) is problem


def test_pkce_s256() -> None:
    verifier = d.new_verifier()
    assert 43 <= len(verifier) <= 128
    expected = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=")
    assert d.code_challenge(verifier) == expected.decode()
    # RFC 7636 appendix B
    assert (
        d.code_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")
        == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    )
    assert d.pkce_supported({"code_challenge_methods_supported": ["S256"]})
    assert not d.pkce_supported({"code_challenge_methods_supported": ["plain"]})
    assert not d.pkce_supported({})
    assert d.new_state() != d.new_state()


def test_token_endpoint_auth_method() -> None:
    basic_post = {
        "token_endpoint_auth_methods_supported": ["client_secret_post", "client_secret_basic"]
    }
    assert d.token_auth_method(basic_post, has_secret=True, has_key=False) == "client_secret_basic"
    post = {"token_endpoint_auth_methods_supported": ["client_secret_post"]}
    assert d.token_auth_method(post, has_secret=True, has_key=False) == "client_secret_post"
    jwt_meta = {"token_endpoint_auth_methods_supported": ["private_key_jwt"]}
    assert d.token_auth_method(jwt_meta, has_secret=False, has_key=True) == "private_key_jwt"
    assert d.token_auth_method({}, has_secret=False, has_key=False) == "none"


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("https://as.test/x", True),
        ("http://localhost:3000/x", True),
        ("http://127.0.0.1/x", True),
        ("http://as.test/x", False),
        ("javascript:alert(1)", False),
        ("file:///etc/passwd", False),
        ("data:text/html,x", False),
    ],
)
def test_only_https_or_loopback_http(url: str, ok: bool) -> None:
    assert d.url_allowed(url) is ok


def test_dpop_claims_helpers() -> None:
    assert htu("https://mcp.test/mcp?x=1#f") == "https://mcp.test/mcp"
    expected = base64.urlsafe_b64encode(hashlib.sha256(b"tok").digest()).rstrip(b"=").decode()
    assert access_token_hash("tok") == expected


def test_auth_error_names_the_step() -> None:
    error = auth_error("token request", "HTTP 400 (invalid_grant)", detail="invalid_grant")
    assert error.kind == "authorization"
    assert error.cause == ("authorization", "token request", "invalid_grant")
    assert "token request" in error.message


def _get(port: int, target: str) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5.0) as conn:
        conn.sendall(f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        data = b""
        while chunk := conn.recv(4096):
            data += chunk
        return data


def test_loopback_listener_takes_the_redirect_and_ignores_other_paths() -> None:
    with LoopbackListener() as listener:
        assert listener.redirect_uri.startswith("http://127.0.0.1:")
        port = int(listener.redirect_uri.rsplit(":", 1)[1].split("/")[0])
        answers: list[bytes] = []

        def browser() -> None:
            answers.append(_get(port, "/favicon.ico"))
            answers.append(_get(port, "/callback?code=c&state=s"))

        thread = threading.Thread(target=browser)
        thread.start()
        target = listener.wait(10.0)
        thread.join(10.0)
    assert target == "/callback?code=c&state=s"
    assert answers[0].startswith(b"HTTP/1.1 404") and answers[1].startswith(b"HTTP/1.1 200")


def test_loopback_listener_wait_is_bounded() -> None:
    with LoopbackListener() as listener, pytest.raises(Exception) as caught:
        listener.wait(0.05)
    assert getattr(caught.value, "kind", None) == "authorization"


def test_refusal_step() -> None:
    nonce = Challenge("dpop", {"error": "use_dpop_nonce"})
    scope = Challenge("bearer", {"error": "insufficient_scope", "scope": "a"})
    expired = Challenge("bearer", {"error": "invalid_token"})
    assert d.refusal_step(401, nonce, token="t") == "nonce"
    assert d.refusal_step(401, expired, token="old", current="new", current_usable=True) == "reuse"
    assert d.refusal_step(401, None, token=None, current="new", current_usable=True) == "reuse"
    assert d.refusal_step(403, scope, token="t", current="t", current_usable=True) == "step-up"
    assert (
        d.refusal_step(401, expired, token="t", current="t", current_usable=True, can_refresh=True)
        == "refresh"
    )
    assert d.refusal_step(401, expired, token="t", current="t", current_usable=True) == "authorize"
    assert d.refusal_step(401, None, token=None) == "authorize"


def test_import_snodo_loads_neither_oauth_nor_jwt() -> None:
    import os
    import subprocess
    import sys

    code = (
        "import sys, snodo\n"
        "before = 'snodo.oauth' in sys.modules\n"
        "snodo.oauth.OAuthClient\n"
        "print(before, 'jwt' in sys.modules, 'cryptography' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, env=os.environ
    )
    assert out.stdout.split() == ["False", "False", "False"], out.stderr
