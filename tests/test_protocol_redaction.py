"""snodo.protocol.redaction: the credentials a client sent never survive in what it keeps of an
answer (docs/decisions/0030)."""

from __future__ import annotations

import base64
import html
import json
import pickle
from dataclasses import dataclass, field
from urllib.parse import quote, quote_plus

from hypothesis import given
from hypothesis import strategies as st

from snodo.auth import Challenge
from snodo.protocol import errors, redaction
from snodo.protocol.errors import McpError
from snodo.protocol.redaction import MARK
from snodo.transports.sent_credentials import SentCredentials

TOKEN = "tok-3f9a/b+c=d_e.f~g"  # "/", "+" and "=" change when encoded


def test_credential_headers_give_their_values_and_the_token_after_the_scheme() -> None:
    got = redaction.credentials(
        {
            "Authorization": f"Bearer {TOKEN}",
            "Proxy-Authorization": "Bearer proxy-secret-1",
            "DPoP": "eyJhbGciOi.proof.sig",
            "X-Api-Key": "api-key-123456",
            "Mcp-Session-Id": "session-abcdef",
            "Accept": "application/json, text/event-stream",
            "X-Tenant": "tenant-number-42",
        }
    )
    assert f"Bearer {TOKEN}" in got and TOKEN in got
    assert "Bearer proxy-secret-1" in got and "proxy-secret-1" in got
    assert {"eyJhbGciOi.proof.sig", "api-key-123456", "session-abcdef"} <= set(got)
    assert "application/json, text/event-stream" not in got
    assert "tenant-number-42" not in got
    assert len(got) == len(set(got))


def test_any_header_named_like_a_credential_counts() -> None:
    names = ["X-Auth-Token", "X-Client-Secret", "X-Session", "X-Password", "Private-Key"]
    got = redaction.credentials({name: f"value-of-{name}" for name in names})
    assert got == [f"value-of-{name}" for name in names]


def test_cookies_give_each_value_and_basic_its_decoded_pair_and_password() -> None:
    basic = "Basic " + base64.b64encode(b"client-id:the-client-secret").decode()
    got = redaction.credentials(
        {"Cookie": "sid=cookie-session-1; theme=dark; csrf=csrf-token-99", "Authorization": basic}
    )
    assert {"cookie-session-1", "csrf-token-99", basic} <= set(got)
    assert {"client-id:the-client-secret", "the-client-secret"} <= set(got)
    assert "dark" not in got  # too short to redact safely


def test_short_values_are_never_redacted() -> None:
    assert redaction.credentials({"Authorization": "abc", "X-Api-Key": "1234567"}) == []
    assert redaction.redact("abc and 1234567", ["abc", "1234567"]) == "abc and 1234567"


def test_form_fields_that_carry_secrets() -> None:
    form = {
        "grant_type": "refresh_token",
        "refresh_token": "refresh-abcdefgh",
        "client_secret": "secret-abcdefgh",
        "code": "auth-code-abcdefgh",
        "code_verifier": "verifier-abcdefgh",
        "client_id": "client-public-id",
        "redirect_uri": "http://127.0.0.1:1234/callback",
    }
    got = redaction.form_credentials(form)
    assert set(got) == {
        "refresh-abcdefgh",
        "secret-abcdefgh",
        "auth-code-abcdefgh",
        "verifier-abcdefgh",
    }


def test_every_encoded_form_is_redacted() -> None:
    forms = [
        TOKEN,
        quote(TOKEN, safe=""),
        quote(TOKEN, safe="").lower(),
        quote_plus(TOKEN, safe=""),
        json.dumps(TOKEN)[1:-1].replace("/", "\\/"),
        html.escape(TOKEN),
    ]
    for form in forms:
        text = f"echo: <{form}> end"
        assert redaction.redact(text, [TOKEN]) == f"echo: <{MARK}> end", form
    assert redaction.redact(json.dumps({"h": f"Bearer {TOKEN}"}), [TOKEN]) == json.dumps(
        {"h": f"Bearer {MARK}"}
    )


def test_the_whole_value_goes_before_the_token_inside_it() -> None:
    secrets = redaction.credentials({"Authorization": f"Bearer {TOKEN}"})
    assert redaction.redact(f"authorization: Bearer {TOKEN}", secrets) == f"authorization: {MARK}"


def test_bytes_and_the_excerpt() -> None:
    body = b"x" * 505 + TOKEN.encode() + b"y" * 100
    assert redaction.redact_bytes(body, [TOKEN]) == b"x" * 505 + MARK.encode() + b"y" * 100
    cut = redaction.excerpt(body, [TOKEN], 512)
    assert len(cut) == 512 and TOKEN[:5].encode() not in cut
    # a secret well after the limit moves into it once an earlier long one is redacted
    long = "L" * 300
    body = (long + "z" * 250 + TOKEN).encode()
    assert TOKEN[:3].encode() not in redaction.excerpt(body, [long, TOKEN], 512)


def test_values_errors_and_dataclasses_are_redacted_deeply() -> None:
    challenge = Challenge("bearer", {"error_description": f"bad token {TOKEN}"})
    value = {
        "list": [TOKEN, 1, None, True],
        "tuple": ("a", TOKEN.encode()),
        TOKEN: {"nested": [[f"Bearer {TOKEN}"]]},
        "challenge": challenge,
    }
    got = redaction.redact_value(value, [TOKEN])
    assert TOKEN not in repr(got)
    assert got["list"] == [MARK, 1, None, True]
    assert got["tuple"] == ("a", MARK.encode())
    assert got[MARK] == {"nested": [[f"Bearer {MARK}"]]}
    assert isinstance(got["challenge"], Challenge)
    assert challenge.params["error_description"].endswith(TOKEN)  # the input is not changed


def test_an_error_is_redacted_in_place_everywhere_it_shows() -> None:
    inner = errors.connection_error(f"inner {TOKEN}", cause=("x", TOKEN))
    error = McpError(-32000, f"saw {TOKEN}", {"echo": TOKEN}, cause=("server_request", inner))
    same = redaction.redact_error(error, [TOKEN])
    assert same is error
    for text in (
        str(error),
        repr(error),
        repr(error.args),
        repr(pickle.loads(pickle.dumps(error))),
    ):
        assert TOKEN not in text, text
    assert error.message == f"saw {MARK}" and error.data == {"echo": MARK}
    assert inner.message == f"inner {MARK}"


def test_nesting_is_bounded() -> None:
    value: object = TOKEN
    for _ in range(200):
        value = [value]
    assert TOKEN not in repr(redaction.redact_value(value, [TOKEN]))


@dataclass(frozen=True)
class _Odd:
    text: str
    extra: list[str] = field(default_factory=list)


def test_no_secrets_leave_values_as_they_are() -> None:
    odd = _Odd("x")
    assert redaction.redact_value(odd, []) is odd
    assert redaction.redact_value(_Odd(TOKEN, [TOKEN]), [TOKEN]) == _Odd(MARK, [MARK])


def test_sent_credentials_keep_pinned_ones_and_a_bounded_recent_set() -> None:
    sent = SentCredentials(["pinned-header-value"], limit=3)
    sent.add(None, "short", "token-number-1")
    for n in range(2, 10):
        sent.add("token-number-1", f"proof-number-{n}")  # the token stays the most recent
    values = sent.values()
    assert values[0] == "pinned-header-value"
    assert "token-number-1" in values and len(values) == 4
    assert "short" not in values and "proof-number-2" not in values
    sent.add_headers({"Authorization": "Bearer header-token-1"})
    assert "header-token-1" in sent.values()


@given(
    secret=st.text(
        alphabet=st.characters(min_codepoint=33, max_codepoint=126), min_size=8, max_size=40
    ),
    before=st.text(max_size=30),
    after=st.text(max_size=30),
)
def test_a_visible_ascii_secret_never_survives_in_any_form(
    secret: str, before: str, after: str
) -> None:
    for form in (secret, quote(secret, safe=""), json.dumps(secret)[1:-1], html.escape(secret)):
        got = redaction.redact(before + form + after, [secret])
        assert form not in got or form in before + after
