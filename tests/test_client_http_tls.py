"""TLS over Streamable HTTP: verified by default, with options for a CA bundle and a client
certificate (issue 4). A real TLS server on 127.0.0.1 with certificates made by openssl."""

from __future__ import annotations

import json
import ssl
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import snodo


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA, a server certificate for 127.0.0.1 signed by it, and a client certificate."""
    d = tmp_path_factory.mktemp("tls")
    _openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=snodo test CA",
        cwd=d,
    )
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    for name in ("server", "client"):
        _openssl(
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            f"{name}.key",
            "-out",
            f"{name}.csr",
            "-subj",
            f"/CN={name}",
            cwd=d,
        )
        _openssl(
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            f"{name}.pem",
            "-days",
            "2",
            "-extfile",
            "san.ext",
            cwd=d,
        )
    return d


class _Echo(BaseHTTPRequestHandler):
    """A minimal 2026-07-28 MCP endpoint: echoes tools/call; records the client certificate."""

    seen_client_cert: list[Any] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Echo.seen_client_cert.append(self.connection.getpeercert())  # type: ignore[attr-defined]
        result = {"resultType": "complete", "content": [{"type": "text", "text": "tls ok"}]}
        data = json.dumps({"jsonrpc": "2.0", "id": body["id"], "result": result}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _serve(certs: Path, *, require_client_cert: bool) -> Iterator[str]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs / "server.pem", certs / "server.key")
    if require_client_cert:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(certs / "ca.pem")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}/mcp"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5.0)


@pytest.fixture
def tls_url(certs: Path) -> Iterator[str]:
    yield from _serve(certs, require_client_cert=False)


@pytest.fixture
def mtls_url(certs: Path) -> Iterator[str]:
    yield from _serve(certs, require_client_cert=True)


def test_tls_is_verified_by_default(tls_url: str) -> None:
    """TLS verified by default: a server whose CA the client does not trust is refused
    (-32000, kind transport)."""
    with pytest.raises(snodo.McpError) as caught:
        snodo.connect(snodo.Http(tls_url), protocol="2026-07-28").call_tool("echo", {})
    assert caught.value.code == -32000
    assert caught.value.kind == "transport"


def test_a_ca_bundle_option_trusts_the_server(tls_url: str, certs: Path) -> None:
    """ca_certs= names the CA bundle to verify against."""
    with snodo.connect(
        snodo.Http(tls_url), protocol="2026-07-28", ca_certs=str(certs / "ca.pem")
    ) as client:
        assert client.call_tool("echo", {})["content"][0]["text"] == "tls ok"


def test_a_client_certificate_option(mtls_url: str, certs: Path) -> None:
    """client_cert=(cert, key) presents a client certificate to a server that requires one;
    without it the handshake fails."""
    with pytest.raises(snodo.McpError):
        snodo.connect(
            snodo.Http(mtls_url), protocol="2026-07-28", ca_certs=str(certs / "ca.pem")
        ).call_tool("echo", {})
    _Echo.seen_client_cert.clear()
    with snodo.connect(
        snodo.Http(mtls_url),
        protocol="2026-07-28",
        ca_certs=str(certs / "ca.pem"),
        client_cert=(str(certs / "client.pem"), str(certs / "client.key")),
    ) as client:
        assert client.call_tool("echo", {})["content"][0]["text"] == "tls ok"
    assert _Echo.seen_client_cert and _Echo.seen_client_cert[-1]["subject"] == (
        (("commonName", "client"),),
    )
