"""TLS client settings shared by the HTTP transport and the OAuth client: one verification policy
on every Python version, and failure reasons short enough for an error message.

Verification is Python 3.13's ``ssl.create_default_context`` on every version: the system (or
given) CA bundle, hostname checks, and ``VERIFY_X509_STRICT`` with ``VERIFY_X509_PARTIAL_CHAIN``,
so a server refused on 3.13 is refused on 3.10 too (docs/decisions/0031).
"""

from __future__ import annotations

import ssl

__all__ = ["STRICT_FLAGS", "client_context", "failure_reason"]

#: The verify flags 3.13's ``create_default_context`` adds: RFC 5280 checks (key identifiers, key
#: usage of a CA, critical basic constraints) and trust in any certificate of the bundle as an
#: anchor (an intermediate CA given alone is enough).
STRICT_FLAGS = ssl.VERIFY_X509_STRICT | ssl.VERIFY_X509_PARTIAL_CHAIN


def client_context(
    verify: bool = True,
    ca_certs: str | None = None,
    cert_file: str | None = None,
    key_file: str | None = None,
) -> ssl.SSLContext:
    """A client context: verified against ``ca_certs`` (else the system bundle) with the strict
    flags, or not verified at all; ``cert_file``/``key_file`` is the client certificate."""
    context = ssl.create_default_context(cafile=ca_certs)
    if verify:
        context.verify_flags |= STRICT_FLAGS
    else:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if cert_file is not None:
        context.load_cert_chain(cert_file, key_file)
    return context


def failure_reason(exc: BaseException) -> str:
    """Why a TLS connection failed, in a few words: for a refused certificate OpenSSL's verify
    message ("certificate verify failed: Missing Authority Key Identifier"), else the SSL reason
    or the OS error text. Looks through urllib3's wrappers (``args`` and ``__context__``)."""
    chain = _chain(exc)
    for current in chain:
        if isinstance(current, ssl.SSLCertVerificationError):
            detail = current.verify_message or current.reason or "unknown reason"
            return f"certificate verify failed: {detail}"
    for current in chain:
        if isinstance(current, ssl.SSLError) and current.reason:
            return str(current.reason)
    return _text(exc)


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it wraps, outermost first."""
    out: list[BaseException] = []
    pending: list[BaseException] = [exc]
    while pending and len(out) < 16:
        current = pending.pop(0)
        if any(current is known for known in out):
            continue
        out.append(current)
        pending.extend(arg for arg in current.args if isinstance(arg, BaseException))
        pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return out


def _text(exc: BaseException) -> str:
    """An OS error's own text (``strerror``) or the exception's message."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__
