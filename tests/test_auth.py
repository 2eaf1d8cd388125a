"""Bearer tokens and WWW-Authenticate challenges (seed "Authorization"; authorization digest §1
"Trigger: 401 and WWW-Authenticate" and §9 "Step-up"; Elixir notes "Authorization (TokenProvider,
Challenge)"; RFC 9110 §11.6.1 and §5.6.4, RFC 6750 §3)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from snodo.auth import (
    MAX_CHALLENGE_BYTES,
    Challenge,
    TokenProvider,
    bearer_header,
    check_token,
    needs_refresh,
    parse_challenges,
    select_challenge,
    unauthorized_error,
)
from snodo.protocol.errors import McpError

# --- parse_challenges ----------------------------------------------------------------------------


def test_the_mcp_bearer_challenge_is_read() -> None:
    """Digest §1: resource_metadata, scope (space-separated), error, error_description."""
    (challenge,) = parse_challenges(
        'Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp",'
        ' scope="mcp:read mcp:write", error="invalid_token", error_description="expired"'
    )
    assert challenge.scheme == "bearer"
    assert challenge.resource_metadata == (
        "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
    )
    assert challenge.scope == ("mcp:read", "mcp:write")
    assert challenge.error == "invalid_token"
    assert challenge.error_description == "expired"
    assert challenge.token68 is None


def test_absent_parameters_are_none() -> None:
    """A challenge without scope has scope None, not an empty tuple."""
    (challenge,) = parse_challenges("Bearer")
    assert challenge == Challenge("bearer", {})
    assert challenge.scope is None and challenge.error is None
    assert challenge.resource_metadata is None and challenge.error_description is None


def test_scope_splits_on_spaces_and_drops_empty_parts() -> None:
    """RFC 6750 §3: scope is a space-delimited list."""
    (challenge,) = parse_challenges('Bearer scope="  a  b "')
    assert challenge.scope == ("a", "b")
    (challenge,) = parse_challenges('Bearer scope=""')
    assert challenge.scope == ()


def test_schemes_and_names_are_lower_cased_and_values_kept() -> None:
    """Schemes and parameter names are case-insensitive; values are not."""
    (challenge,) = parse_challenges('BEARER Error="Invalid_Token", SCOPE=Read')
    assert challenge.scheme == "bearer"
    assert challenge.params == {"error": "Invalid_Token", "scope": "Read"}


def test_quoted_strings_are_unescaped() -> None:
    """RFC 9110 §5.6.4: a backslash quotes the next character."""
    (challenge,) = parse_challenges(r'Bearer error_description="a \"quoted\" \\ word\x"')
    assert challenge.error_description == 'a "quoted" \\ wordx'


def test_the_first_occurrence_of_a_repeated_parameter_wins() -> None:
    """Elixir notes: the first occurrence of a repeated parameter wins (names ignore case)."""
    (challenge,) = parse_challenges('Bearer scope="first", Scope="second"')
    assert challenge.scope == ("first",)


def test_several_challenges_in_one_value_are_read_in_order() -> None:
    """One WWW-Authenticate value may hold several challenges, separated by commas."""
    challenges = parse_challenges('Basic realm="mcp", Bearer scope="a", error="insufficient_scope"')
    assert [c.scheme for c in challenges] == ["basic", "bearer"]
    assert challenges[0].params == {"realm": "mcp"}
    assert challenges[1].params == {"scope": "a", "error": "insufficient_scope"}


def test_a_token68_challenge_has_empty_params_and_later_challenges_are_read() -> None:
    """Elixir notes: "Negotiate abc==" gets empty params; the challenges after it still count."""
    challenges = parse_challenges('Negotiate abc/+==, Bearer error="invalid_token"')
    assert challenges[0] == Challenge("negotiate", {}, "abc/+==")
    assert challenges[1] == Challenge("bearer", {"error": "invalid_token"})


def test_empty_list_elements_and_whitespace_around_equals_are_accepted() -> None:
    """RFC 9110 §5.6.1: recipients accept empty list elements; auth-param allows BWS around =."""
    challenges = parse_challenges(' , Basic ,, Bearer  scope = "a" ,, error=x , ')
    assert challenges == [Challenge("basic", {}), Challenge("bearer", {"scope": "a", "error": "x"})]


def test_a_challenge_without_parameters_followed_by_another() -> None:
    """A bare scheme, then the next challenge."""
    assert parse_challenges("Basic, Bearer realm=x") == [
        Challenge("basic", {}),
        Challenge("bearer", {"realm": "x"}),
    ]


@pytest.mark.parametrize(
    "value",
    [
        'Bearer realm="unterminated',
        "Bearer realm=x junk",  # a missing comma
        'Bearer realm="a" scope="b"',  # a missing comma between parameters
        "Bearer realm=https://x/y",  # an unquoted value that is not a token
        "Bearer realm=",  # ... a token68 "realm=" is fine, see below; this is not:
        "=Bearer",
        'Bearer"realm"',
        "Bearer abc, realm=x",  # a parameter after a token68 challenge
        "Bearer realm=\x00",
        'Bearer realm="a\x01b"',
        "Bearér realm=x",
    ],
)
def test_a_broken_grammar_gives_no_challenges(value: str) -> None:
    """Elixir notes: a value that breaks the grammar yields no challenges (never a partial
    read that could mislead the provider)."""
    if value == "Bearer realm=":
        assert parse_challenges(value) == [Challenge("bearer", {}, "realm=")]
    else:
        assert parse_challenges(value) == []


def test_an_empty_value_has_no_challenges() -> None:
    """Nothing to read."""
    assert parse_challenges("") == []
    assert parse_challenges(" , ,") == []


def test_values_over_8_kib_give_no_challenges() -> None:
    """Elixir notes: values longer than 8 KiB yield no challenges (counted in UTF-8 bytes)."""
    prefix = 'Bearer error_description="'
    fits = prefix + "x" * (MAX_CHALLENGE_BYTES - len(prefix) - 1) + '"'
    assert len(fits) == MAX_CHALLENGE_BYTES and parse_challenges(fits)
    assert parse_challenges(fits[:-1] + 'x"') == []
    wide = prefix + "é" * (MAX_CHALLENGE_BYTES // 2) + '"'  # fewer characters, more bytes
    assert len(wide) < MAX_CHALLENGE_BYTES and parse_challenges(wide) == []


def test_obs_text_in_quoted_strings_is_kept() -> None:
    """RFC 9110 qdtext includes obs-text."""
    (challenge,) = parse_challenges('Bearer error_description="caf\xe9 ☕"')
    assert challenge.error_description == "caf\xe9 ☕"


# --- select_challenge ----------------------------------------------------------------------------


def test_select_prefers_the_first_bearer_challenge_across_values() -> None:
    """Elixir notes: every WWW-Authenticate value is read; the first Bearer challenge wins."""
    chosen = select_challenge(
        ['Basic realm="x"', 'Negotiate abc, Bearer scope="one"', 'Bearer scope="two"']
    )
    assert chosen == Challenge("bearer", {"scope": "one"})


def test_select_falls_back_to_the_first_challenge_of_any_scheme() -> None:
    """Without Bearer, the first challenge, so a provider can report the scheme."""
    assert select_challenge(["garbage=", 'Basic realm="x"', "Digest a=b"]) == Challenge(
        "basic", {"realm": "x"}
    )


def test_select_without_challenges_is_none() -> None:
    """No usable challenge at all."""
    assert select_challenge([]) is None
    assert select_challenge(["", "Bearer realm=x junk"]) is None


# --- hostile input ---------------------------------------------------------------------------------

_hostile_alphabet = st.sampled_from(
    [*"Bearer Basic=,\"\\ \t\r\n\x00abcXYZ019-._~+/!#$%&'*^`|é☕", "realm", "scope=", '=""']
)


@settings(max_examples=500)
@given(value=st.lists(_hostile_alphabet, max_size=200).map("".join))
def test_parsing_never_raises_on_hostile_input(value: str) -> None:
    """parse_challenges is total: any string gives a list of well-formed challenges."""
    for challenge in parse_challenges(value):
        assert challenge.scheme == challenge.scheme.lower() and challenge.scheme
        assert all(name == name.lower() for name in challenge.params)
        assert challenge.token68 is None or not challenge.params


@settings(max_examples=200)
@given(value=st.text(max_size=300))
def test_parsing_never_raises_on_any_text(value: str) -> None:
    """Arbitrary Unicode, surrogates included."""
    assert isinstance(parse_challenges(value), list)


@pytest.mark.parametrize(
    "value",
    [
        "a=" * 4096,
        "Bearer " + "a=b, " * 1630,
        'Bearer x="' + "\\" * 8100,
        'Bearer x="' + '\\"' * 4000,
        "Negotiate " + "A" * 8000 + "=",
        "B " + "=" * 8100,
        ", " * 4096,
        "Bearer " + "x" * 8100 + " y",
        "Bearer " + ", " * 4000 + "a=b",
        "Basic, " * 1170,
    ],
    ids=lambda v: repr(v[:16]),
)
def test_8_kib_of_hostile_input_parses_in_bounded_time(value: str) -> None:
    """Bounded time on 8 KiB inputs: linear scans, no backtracking blow-up (deadline 1 s; a
    parse takes about a millisecond)."""
    assert len(value.encode()) <= MAX_CHALLENGE_BYTES
    start = time.perf_counter()
    for _ in range(10):
        parse_challenges(value)
    assert (time.perf_counter() - start) / 10 < 1.0


# --- round trip --------------------------------------------------------------------------------------

_TCHARS = "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
_token = st.text(_TCHARS, min_size=1, max_size=8)
_token68 = st.tuples(
    st.text("abcXYZ019-._~+/", min_size=1, max_size=12), st.sampled_from(["", "=", "=="])
).map("".join)
_quotable = st.text(
    st.characters(min_codepoint=0x20, max_codepoint=0x7E) | st.sampled_from(["\t", "é", "☕"]),
    max_size=12,
)
_ows = st.sampled_from(["", " ", "  ", "\t"])


@st.composite
def _challenge(draw: st.DrawFn) -> tuple[str, Challenge]:
    scheme = draw(_token)
    if draw(st.booleans()):
        credential = draw(_token68)
        return f"{scheme} {credential}", Challenge(scheme.lower(), {}, credential)
    names = draw(st.lists(_token, max_size=4, unique_by=str.lower))
    params: dict[str, str] = {}
    parts: list[str] = []
    for name in names:
        value = draw(_quotable)
        as_token = all(c in _TCHARS for c in value) and value and draw(st.booleans())
        if as_token:
            rendered = value
        else:
            rendered = '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
        parts.append(f"{name}{draw(_ows)}={draw(_ows)}{rendered}")
        params[name.lower()] = value
    separator = draw(_ows) + "," + draw(_ows)
    text = scheme if not parts else f"{scheme} " + separator.join(parts)
    return text, Challenge(scheme.lower(), params)


@settings(max_examples=400)
@given(challenges=st.lists(_challenge(), min_size=1, max_size=4), gap=_ows)
def test_well_formed_challenges_round_trip(
    challenges: list[tuple[str, Challenge]], gap: str
) -> None:
    """Rendering generated challenges per the grammar and parsing them gives them back."""
    value = f"{gap},{gap}".join(text for text, _ in challenges)
    assert parse_challenges(value) == [challenge for _, challenge in challenges]


# --- tokens ---------------------------------------------------------------------------------------

SECRET = "tok3n-SECRET"


def test_a_good_token_is_returned_and_makes_a_bearer_header() -> None:
    """A non-empty visible-ASCII token is usable as is."""
    token = "eyJhbGciOi.eyJzdWIi.sig_-~+/=="
    assert check_token(token) == token
    assert bearer_header(token) == f"Bearer {token}"


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        ("", "empty"),
        (f"{SECRET} x", "whitespace"),
        (f"{SECRET}\t", "whitespace"),
        (f"{SECRET}\r\nX-Evil: 1", "control"),
        (f"{SECRET}\n", "control"),
        (f"{SECRET}\x00", "control"),
        (f"{SECRET}\x7f", "control"),
        (f"{SECRET}é", "non-ASCII"),
        (None, "NoneType"),
        (b"bytes-token", "bytes"),
        (42, "int"),
    ],
)
def test_an_unusable_token_is_refused_without_showing_it(token: Any, reason: str) -> None:
    """Elixir notes: tokens are checked non-empty, without spaces, CR, LF or NUL; the error is
    -32000 and no token appears in it."""
    with pytest.raises(McpError) as caught:
        check_token(token)
    error = caught.value
    assert error.code == -32000 and error.kind == "transport"
    assert reason in error.message
    assert error.cause[0] == "invalid_token"
    for text in (str(error), repr(error), repr(error.cause)):
        assert SECRET not in text and "bytes-token" not in text


@pytest.mark.parametrize(
    ("status", "challenge", "expected"),
    [
        (401, None, True),
        (401, Challenge("bearer", {"error": "invalid_token"}), True),
        (403, Challenge("bearer", {"error": "insufficient_scope", "scope": "x"}), True),
        (403, Challenge("bearer", {"error": "invalid_token"}), False),
        (403, None, False),
        (400, Challenge("bearer", {"error": "insufficient_scope"}), False),
        (200, None, False),
    ],
)
def test_refresh_follows_401_and_403_insufficient_scope(
    status: int, challenge: Challenge | None, expected: bool
) -> None:
    """Seed "Authorization": after a 401, or a 403 whose challenge is insufficient_scope, the
    provider refreshes; another 403 is an ordinary status error."""
    assert needs_refresh(status, challenge) is expected


def test_a_second_refusal_is_an_unauthorized_error() -> None:
    """Seed: a second 401 or 403 returns -32000 with cause {:unauthorized, status, challenge}."""
    challenge = Challenge("bearer", {"error": "insufficient_scope"})
    error = unauthorized_error(403, challenge)
    assert error.code == -32000 and error.kind == "transport"
    assert error.cause == ("unauthorized", 403, challenge)
    assert "403" in error.message


class _Provider:
    def __init__(self) -> None:
        self.refreshed: list[tuple[Challenge | None, str, int, str | None]] = []

    def token(self, url: str) -> str | None:
        return None

    def refresh(
        self, challenge: Challenge | None, *, url: str, status: int, token: str | None
    ) -> str | None:
        self.refreshed.append((challenge, url, status, token))
        return "fresh"


def test_a_class_with_token_and_refresh_is_a_token_provider() -> None:
    """TokenProvider is a structural protocol the transport can check at connect time."""
    provider = _Provider()
    assert isinstance(provider, TokenProvider)
    assert not isinstance(object(), TokenProvider)
    assert provider.refresh(None, url="https://x/mcp", status=401, token=None) == "fresh"
