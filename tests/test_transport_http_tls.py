"""TLS over Streamable HTTP: verified by default, with options for a CA bundle and a client
certificate (issue 4), strictly as Python 3.13 verifies on every version, and failures that name
their reason (issue 25). A real TLS server on 127.0.0.1 with certificates made as a CA makes them.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import socket
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

import snodo
from snodo.oauth.authorization_http import OAuthHttp
from snodo.transports import tls


@dataclass(frozen=True)
class _Issued:
    """A certificate and its key, as objects and as PEM files."""

    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey
    pem: Path
    key_pem: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _issue(
    directory: Path,
    name: str,
    *,
    issuer: _Issued | None,
    ca: bool,
    usage: ExtendedKeyUsageOID | None = None,
    authority_key_id: bool = True,
    key_usage: bool = True,
) -> _Issued:
    """A certificate as a CA issues one (RFC 5280: critical basic constraints, key usage, the
    subject and authority key identifiers, an extended key usage and the 127.0.0.1 SAN for a
    server); ``authority_key_id``/``key_usage`` False leave those out to make it non-compliant.
    ``issuer`` None is a self-signed root."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    signer_key = key if issuer is None else issuer.key
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(f"snodo test {name}"))
        .issuer_name(_name(f"snodo test {name}") if issuer is None else issuer.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )
    if key_usage:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=ca,
                crl_sign=ca,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    if authority_key_id:
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(signer_key.public_key()),
            critical=False,
        )
    if usage is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if usage == ExtendedKeyUsageOID.SERVER_AUTH:
        san = x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
        builder = builder.add_extension(san, critical=False)
    cert = builder.sign(signer_key, hashes.SHA256())
    pem, key_pem = directory / f"{name}.pem", directory / f"{name}.key"
    pem.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_pem.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return _Issued(cert, key, pem, key_pem)


def _chain_file(directory: Path, name: str, *certs: _Issued) -> Path:
    """The leaf first, then its intermediates: what a server sends."""
    path = directory / f"{name}-chain.pem"
    path.write_bytes(b"".join(c.cert.public_bytes(serialization.Encoding.PEM) for c in certs))
    return path


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA, a server certificate for 127.0.0.1 and a client certificate signed by it, all
    compliant, as ca.pem, server.pem/.key and client.pem/.key."""
    d = tmp_path_factory.mktemp("tls")
    ca = _issue(d, "ca", issuer=None, ca=True)
    _issue(d, "server", issuer=ca, ca=False, usage=ExtendedKeyUsageOID.SERVER_AUTH)
    _issue(d, "client", issuer=ca, ca=False, usage=ExtendedKeyUsageOID.CLIENT_AUTH)
    return d


class _Echo(BaseHTTPRequestHandler):
    """A minimal 2026-07-28 MCP endpoint: echoes tools/call; records the client certificate."""

    seen_client_cert: list[Any] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        """Authorization server metadata, for the OAuth client's TLS tests."""
        data = json.dumps({"issuer": "https://127.0.0.1"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

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


def _serve(
    certs: Path, *, require_client_cert: bool, chain: Path | None = None, key: Path | None = None
) -> Iterator[str]:
    """A TLS endpoint on 127.0.0.1 presenting ``chain`` (default: the compliant server.pem)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(chain or certs / "server.pem", key or certs / "server.key")
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
    (-32000, kind transport), and the message says why (issue 25: not only "Cannot connect")."""
    with pytest.raises(snodo.McpError) as caught:
        snodo.connect(snodo.Http(tls_url), protocol="2026-07-28").call_tool("echo", {})
    assert caught.value.code == -32000
    assert caught.value.kind == "transport"
    assert caught.value.message == (
        f"Cannot connect to {tls_url}: certificate verify failed: "
        "unable to get local issuer certificate"
    )
    assert "CERTIFICATE_VERIFY_FAILED" in caught.value.cause[1]


def test_the_test_certificates_pass_strict_verification(certs: Path) -> None:
    """The compliant certificates are what a real CA issues: key identifiers on both, critical
    basic constraints, key usage, and serverAuth with the SAN on the server's (RFC 5280)."""
    ca = x509.load_pem_x509_certificate((certs / "ca.pem").read_bytes())
    server = x509.load_pem_x509_certificate((certs / "server.pem").read_bytes())
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).critical
    assert ca.extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign
    ski = ca.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    aki = server.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value
    assert aki.key_identifier == ski.digest
    eku = server.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]


def test_snodo_verifies_strictly_on_every_version() -> None:
    """snodo's contexts carry 3.13's create_default_context flags on every Python version
    (docs/decisions/0031), the OAuth client's included; verify=False turns checking off."""
    context = tls.client_context()
    assert context.verify_flags & ssl.VERIFY_X509_STRICT
    assert context.verify_flags & ssl.VERIFY_X509_PARTIAL_CHAIN
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    off = tls.client_context(verify=False)
    assert off.verify_mode == ssl.CERT_NONE and not off.check_hostname
    pool_context = OAuthHttp()._pool.connection_pool_kw["ssl_context"]
    assert pool_context.verify_flags & ssl.VERIFY_X509_STRICT


@dataclass(frozen=True)
class _Bad:
    """A chain that breaks one RFC 5280 rule Python 3.13's VERIFY_X509_STRICT enforces."""

    chain: Path
    key: Path
    root: Path
    reason: str


@pytest.fixture(
    scope="module",
    params=["leaf-without-akid", "intermediate-without-akid", "ca-without-key-usage"],
)
def non_compliant(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> _Bad:
    """A server chain refused only under strict verification: a server certificate, or the
    intermediate CA that issued it, without an Authority Key Identifier (what 3.13 refused in
    issue 25), or a CA without key usage (what ``openssl req -x509`` makes by default)."""
    d = tmp_path_factory.mktemp("tls-bad")
    server_usage = ExtendedKeyUsageOID.SERVER_AUTH
    if request.param == "leaf-without-akid":
        root = _issue(d, "root", issuer=None, ca=True)
        leaf = _issue(d, "leaf", issuer=root, ca=False, usage=server_usage, authority_key_id=False)
        return _Bad(
            _chain_file(d, "leaf", leaf), leaf.key_pem, root.pem, "Missing Authority Key Identifier"
        )
    if request.param == "intermediate-without-akid":
        root = _issue(d, "root", issuer=None, ca=True)
        mid = _issue(d, "mid", issuer=root, ca=True, authority_key_id=False)
        leaf = _issue(d, "leaf", issuer=mid, ca=False, usage=server_usage)
        return _Bad(
            _chain_file(d, "leaf", leaf, mid),
            leaf.key_pem,
            root.pem,
            "Missing Authority Key Identifier",
        )
    root = _issue(d, "root", issuer=None, ca=True, key_usage=False)
    leaf = _issue(d, "leaf", issuer=root, ca=False, usage=server_usage)
    return _Bad(
        _chain_file(d, "leaf", leaf),
        leaf.key_pem,
        root.pem,
        "CA cert does not include key usage extension",
    )


@pytest.fixture
def non_compliant_url(certs: Path, non_compliant: _Bad) -> Iterator[str]:
    yield from _serve(
        certs, require_client_cert=False, chain=non_compliant.chain, key=non_compliant.key
    )


def _handshake(url: str, context: ssl.SSLContext) -> None:
    """One TLS handshake with the server at ``url`` (a plain ssl socket, not snodo)."""
    port = int(url.rsplit(":", 1)[1].split("/", 1)[0])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        context.wrap_socket(sock, server_hostname="127.0.0.1").close()


def test_a_non_compliant_chain_is_refused_under_strict_verification(
    non_compliant_url: str, non_compliant: _Bad
) -> None:
    """Python 3.13's rule (VERIFY_X509_STRICT, set by its ssl.create_default_context): a chain
    that breaks RFC 5280 is refused even with its root trusted, on every version, and the
    McpError's message names the verification failure. Without the strict flag the same chain
    verifies, so the refusal is that rule's."""
    lax = ssl.create_default_context(cafile=str(non_compliant.root))
    lax.verify_flags &= ~ssl.VERIFY_X509_STRICT  # 3.13+ sets it by default
    _handshake(non_compliant_url, lax)
    strict = ssl.create_default_context(cafile=str(non_compliant.root))
    strict.verify_flags |= ssl.VERIFY_X509_STRICT
    with pytest.raises(ssl.SSLCertVerificationError) as refused:
        _handshake(non_compliant_url, strict)
    assert refused.value.verify_message == non_compliant.reason

    with pytest.raises(snodo.McpError) as caught:
        snodo.connect(
            snodo.Http(non_compliant_url), protocol="2026-07-28", ca_certs=str(non_compliant.root)
        ).call_tool("echo", {})
    assert caught.value.kind == "transport"
    assert caught.value.message == (
        f"Cannot connect to {non_compliant_url}: certificate verify failed: {non_compliant.reason}"
    )


def test_the_oauth_client_names_the_tls_failure(
    non_compliant_url: str, non_compliant: _Bad, tls_url: str, certs: Path
) -> None:
    """The OAuth client verifies as strictly and its authorization error names the reason:
    an untrusted CA, then a non-compliant chain; a compliant server with its CA is read."""
    with pytest.raises(snodo.McpError) as untrusted:
        OAuthHttp(timeout=10).get(tls_url + "/.well-known/oauth-authorization-server", "metadata")
    assert untrusted.value.kind == "authorization"
    assert "certificate verify failed: unable to get local issuer certificate" in (
        untrusted.value.message
    )
    with pytest.raises(snodo.McpError) as strict:
        OAuthHttp(timeout=10, ca_certs=str(non_compliant.root)).get(non_compliant_url, "metadata")
    assert f"certificate verify failed: {non_compliant.reason}" in strict.value.message
    answer = OAuthHttp(timeout=10, ca_certs=str(certs / "ca.pem")).get(tls_url, "metadata")
    assert answer.status == 200 and answer.body == {"issuer": "https://127.0.0.1"}


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
        (("commonName", "snodo test client"),),
    )
