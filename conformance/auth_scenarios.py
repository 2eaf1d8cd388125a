"""The conformance suite's ``auth/*`` scenarios, driven through :mod:`snodo.oauth`.

``conformance/client.py`` calls :func:`run` for every ``auth/*`` scenario. The mock
authorization server's ``/authorize`` answers at once with a redirect carrying ``code``,
``state`` and maybe ``iss``; our "browser" GETs it with redirects off and delivers the
``Location`` to the loopback listener, exactly as a browser would.
"""

from __future__ import annotations

import sys
from typing import Any

import urllib3

import snodo
from snodo.oauth import OAuthClient

CIMD_URL = "https://conformance-test.local/client-metadata.json"
#: Versions snodo speaks; the suite's 2025-03-26 back-compat scenarios run on the oldest.
WIRE = {"2025-03-26": "2025-06-18"}


def _log(*parts: object) -> None:
    print("auth_scenarios:", *parts, file=sys.stderr, flush=True)


def browser(url: str) -> None:
    """Play the user's browser: GET the authorization URL, then follow its redirect to the
    loopback listener (no redirects followed automatically)."""
    http = urllib3.PoolManager()
    try:
        response = http.request("GET", url, redirect=False, retries=False, timeout=10.0)
        location = response.headers.get("location")
        if response.status not in (301, 302, 303, 307, 308) or not location:
            _log("authorization endpoint answered", response.status, "without a redirect")
            return
        http.request("GET", location, redirect=False, retries=False, timeout=10.0)
    finally:
        http.clear()


def authorize(url: str) -> None:
    """The ``authorize`` callable: the browser runs beside the waiting listener."""
    import threading

    threading.Thread(target=browser, args=(url,), name="conformance-browser", daemon=True).start()


def provider(server_url: str, scenario: str, context: dict[str, Any]) -> OAuthClient:
    """The OAuthClient a scenario needs, from its ``MCP_CONFORMANCE_CONTEXT``."""
    name = scenario.removeprefix("auth/")
    if name == "client-credentials-basic":
        return OAuthClient(
            server_url,
            grant="client_credentials",
            client_id=context["client_id"],
            client_secret=context["client_secret"],
        )
    if name == "client-credentials-jwt":
        return OAuthClient(
            server_url,
            grant="client_credentials",
            client_id=context["client_id"],
            private_key=context["private_key_pem"],
            signing_algorithm=context.get("signing_algorithm", "ES256"),
        )
    if name == "enterprise-managed-authorization":
        return OAuthClient(
            server_url,
            grant="enterprise",
            client_id=context["client_id"],
            client_secret=context["client_secret"],
            id_token=context["idp_id_token"],
            idp_token_endpoint=context["idp_token_endpoint"],
            idp_client_id=context.get("idp_client_id"),
        )
    if name == "wif-jwt-bearer":
        return OAuthClient(
            server_url,
            grant="jwt_bearer",
            client_id=context.get("client_id"),
            assertion=context["valid_jwt"],
        )
    if name == "pre-registration":
        return OAuthClient(
            server_url,
            authorize=authorize,
            client_id=context["client_id"],
            client_secret=context["client_secret"],
            issuer=context.get("issuer"),
            authorize_timeout=30.0,
        )
    return OAuthClient(
        server_url, authorize=authorize, client_metadata_url=CIMD_URL, authorize_timeout=30.0
    )


def run(server_url: str, scenario: str, protocol_version: str, context: dict[str, Any]) -> int:
    """Run one auth scenario; the process exit code (0: the flow and the tool calls worked)."""
    oauth = provider(server_url, scenario, context)
    version = WIRE.get(protocol_version, protocol_version)
    try:
        with snodo.connect(
            snodo.Http(server_url), token_provider=oauth, protocol=version
        ) as client:
            tools = client.list_tools()
            _log("tools:", [tool.get("name") for tool in tools])
            if tools:
                result = client.call_tool(tools[0]["name"], {})
                _log("call:", result.get("isError", False))
        return 0
    except snodo.McpError as error:
        _log("failed:", error.kind, error.message)
        return 1
    finally:
        oauth.close()
