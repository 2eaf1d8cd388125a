"""Requests to authorization server endpoints: dynamic client registration (RFC 7591),
client authentication, token requests (with DPoP proofs and one nonce retry) and the RFC 8693
exchange of an ID token for an ID-JAG. Stateless: the caller passes what they need."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from snodo.oauth import discovery as d
from snodo.oauth.authorization_http import AsResponse, OAuthHttp, basic_credentials
from snodo.oauth.errors import auth_error
from snodo.protocol import redaction
from snodo.protocol.errors import McpError

__all__ = [
    "ID_JAG_TYPE",
    "ID_TOKEN_TYPE",
    "TOKEN_EXCHANGE",
    "client_auth",
    "error_code",
    "exchange_for_id_jag",
    "post_token",
    "refusal",
    "register",
]

TOKEN_EXCHANGE: Final = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_TOKEN_TYPE: Final = "urn:ietf:params:oauth:token-type:id_token"
ID_JAG_TYPE: Final = "urn:ietf:params:oauth:token-type:id-jag"


def error_code(answer: AsResponse) -> str | None:
    """The OAuth ``error`` of an answer, if it has one."""
    code = (answer.body or {}).get("error")
    return code if isinstance(code, str) else None


def refusal(answer: AsResponse) -> str:
    """Why an answer is unusable: status and OAuth error code only (its description may echo
    what we sent)."""
    code = error_code(answer)
    return f"HTTP {answer.status}" + (f" ({code})" if code else "")


def register(
    http: OAuthHttp, metadata: Mapping[str, Any], redirect_uri: str | None, client_name: str
) -> dict[str, Any]:
    """Dynamic Client Registration (RFC 7591) as a native application; the client record
    (``client_id``, ``client_secret``, ``auth_method``)."""
    step = "client registration"
    method = "none"
    supported = metadata.get("token_endpoint_auth_methods_supported")
    if isinstance(supported, list) and supported and "none" not in supported:
        method = str(
            next(
                (m for m in ("client_secret_basic", "client_secret_post") if m in supported),
                supported[0],
            )
        )
    document = {
        "client_name": client_name,
        "redirect_uris": [redirect_uri] if redirect_uri else [],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": method,
        "application_type": "native",
    }
    answer = http.post_json(str(metadata["registration_endpoint"]), document, step)
    body = answer.body
    if answer.status not in (200, 201) or body is None or not body.get("client_id"):
        raise auth_error(step, refusal(answer), detail=error_code(answer))
    secret = body.get("client_secret")
    chosen = body.get("token_endpoint_auth_method")
    if not isinstance(chosen, str):
        chosen = method if secret else "none"
    return {
        "client_id": str(body["client_id"]),
        "client_secret": secret if isinstance(secret, str) else None,
        "auth_method": chosen,
    }


def client_auth(
    client: Mapping[str, Any],
    issuer: str,
    form: dict[str, str],
    *,
    private_key: Any = None,
    algorithm: str = "ES256",
) -> dict[str, str]:
    """Add the client's authentication to a token request ``form``; the extra headers
    (``client_secret_basic``), or none (``client_secret_post``, ``private_key_jwt``, public)."""
    method = client.get("auth_method", "none")
    secret = client.get("client_secret")
    if method == "private_key_jwt" and private_key is not None:
        from snodo.oauth.jwts import ASSERTION_TYPE, client_assertion

        form["client_assertion_type"] = ASSERTION_TYPE
        form["client_assertion"] = client_assertion(
            client["client_id"], issuer, private_key, algorithm
        )
        return {}
    if method == "client_secret_basic" and secret:
        return {"Authorization": basic_credentials(client["client_id"], secret)}
    form["client_id"] = client["client_id"]
    if method == "client_secret_post" and secret:
        form["client_secret"] = secret
    return {}


def post_token(
    http: OAuthHttp,
    endpoint: str,
    form: Mapping[str, str],
    headers: Mapping[str, str],
    step: str,
    dpop: Any = None,
) -> dict[str, Any]:
    """POST a token request (with a fresh DPoP proof when ``dpop`` is a key; a
    ``use_dpop_nonce`` answer is retried once with the server's nonce); the answer's JSON."""
    answer = _post_once(http, endpoint, form, headers, step, dpop)
    if (
        dpop is not None
        and answer.status in (400, 401)
        and error_code(answer) == "use_dpop_nonce"
        and "dpop-nonce" in answer.headers
    ):
        answer = _post_once(http, endpoint, form, headers, step, dpop)
    body = answer.body
    if answer.status != 200 or body is None:
        raise _refused(step, answer, form, headers)
    token = body.get("access_token")
    if not isinstance(token, str) or not token:
        raise auth_error(step, "the answer carries no access_token")
    return dict(body)


def _refused(
    step: str, answer: AsResponse, form: Mapping[str, str], headers: Mapping[str, str]
) -> McpError:
    """The error for a refused token request: its status and OAuth error code, without any
    secret the request carried (a server may echo a refresh token or client secret there)."""
    secrets = [*redaction.form_credentials(form), *redaction.credentials(headers)]
    return auth_error(
        step,
        redaction.redact(refusal(answer), secrets),
        detail=redaction.redact_value(error_code(answer), secrets),
    )


def _post_once(
    http: OAuthHttp,
    endpoint: str,
    form: Mapping[str, str],
    headers: Mapping[str, str],
    step: str,
    dpop: Any,
) -> AsResponse:
    all_headers = dict(headers)
    if dpop is not None:
        all_headers["DPoP"] = dpop.proof("POST", endpoint)
    answer = http.post_form(endpoint, form, step, all_headers)
    nonce = answer.headers.get("dpop-nonce")
    if nonce and dpop is not None:
        dpop.note_nonce(endpoint, nonce)
    return answer


def exchange_for_id_jag(
    http: OAuthHttp,
    idp_token_endpoint: str,
    id_token: str,
    *,
    audience: str,
    resource: str,
    scopes: tuple[str, ...] | None,
    idp_client_id: str | None,
    idp_client_secret: str | None,
) -> str:
    """Enterprise-managed authorization's first leg (RFC 8693 at the identity provider): the
    ID-JAG for ``audience`` (the authorization server's issuer) and ``resource``."""
    step = "token exchange"
    if not d.url_allowed(idp_token_endpoint):
        raise auth_error(step, "the identity provider's token endpoint is not https")
    form = {
        "grant_type": TOKEN_EXCHANGE,
        "subject_token": id_token,
        "subject_token_type": ID_TOKEN_TYPE,
        "requested_token_type": ID_JAG_TYPE,
        "audience": audience,
        "resource": resource,
    }
    if scopes:
        form["scope"] = " ".join(scopes)
    headers: dict[str, str] = {}
    if idp_client_id is not None:
        if idp_client_secret:
            headers["Authorization"] = basic_credentials(idp_client_id, idp_client_secret)
        else:
            form["client_id"] = idp_client_id
    answer = http.post_form(idp_token_endpoint, form, step, headers)
    body = answer.body
    if answer.status != 200 or body is None or not isinstance(body.get("access_token"), str):
        raise _refused(step, answer, form, headers)
    if body.get("issued_token_type", ID_JAG_TYPE) != ID_JAG_TYPE:
        raise auth_error(step, "the identity provider did not issue an ID-JAG")
    return str(body["access_token"])
