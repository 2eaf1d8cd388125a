"""The client's options (snodo.options): one ClientOptions validator for every connection, the
per-call CallOptions, and the same refusal for every bad timeout, the probe's included."""

from __future__ import annotations

import importlib.metadata
import inspect
from typing import Any

import pytest

import snodo
from snodo import options as opts
from snodo.protocol import dialects
from snodo.protocol.errors import McpError
from tests.support import client_runtime

BAD_TIMEOUTS = [True, False, 0, -1, "1", [1]]


def test_build_options_defaults() -> None:
    """Every version allowed, snodo's client info, no handlers, the documented defaults."""
    built = opts.build_options()
    assert built == opts.ClientOptions(
        protocol=dialects.SUPPORTED_VERSIONS,
        client_info=opts.DEFAULT_CLIENT_INFO,
        client_capabilities={},
        input_handlers={},
        timeout=30.0,
        max_input_rounds=10,
        max_pages=1000,
        reset_timeout_on_progress=False,
        max_total_timeout=600.0,
        cache=False,
    )


def test_default_client_info_names_snodo_and_its_version() -> None:
    expected = {"name": "snodo", "version": importlib.metadata.version("snodo")}
    assert expected == opts.DEFAULT_CLIENT_INFO


def test_the_keywords_of_build_options_are_the_fields_of_client_options() -> None:
    """One declaration: each field is a keyword, with its default (None for derived ones)."""
    names = [f for f in opts.ClientOptions.__dataclass_fields__]
    assert list(opts.OPTION_DEFAULTS) == names
    assert opts.OPTION_DEFAULTS["timeout"] == 30.0
    assert opts.OPTION_DEFAULTS["protocol"] is None
    with pytest.raises(TypeError, match="unexpected keyword argument 'timeuot'"):
        opts.build_options(timeuot=3)


@pytest.mark.parametrize("opener", [snodo.connect, snodo.direct], ids=["connect", "direct"])
def test_connect_and_direct_spell_out_every_client_option_with_its_default(opener: Any) -> None:
    """connect() and direct() keep explicit keywords (for IDEs): the same names and defaults
    as the one declaration, so the three cannot drift apart."""
    parameters = inspect.signature(opener).parameters
    for name, default in opts.OPTION_DEFAULTS.items():
        assert name in parameters, name
        assert parameters[name].kind is inspect.Parameter.KEYWORD_ONLY
        assert parameters[name].default == default, name


@pytest.mark.parametrize("name", ["timeout", "max_total_timeout"])
@pytest.mark.parametrize("bad", BAD_TIMEOUTS)
def test_a_bad_client_timeout_is_refused(name: str, bad: Any) -> None:
    with pytest.raises(ValueError, match=f"^{name} must be a positive number of seconds or None$"):
        opts.build_options(**{name: bad})


@pytest.mark.parametrize("bad", [*BAD_TIMEOUTS, None])
def test_a_bad_probe_timeout_is_refused_like_any_other_timeout(bad: Any) -> None:
    """probe_timeout=True is refused as timeout=True is (bool is no number of seconds); it
    cannot be None (a probe must end). Checked before anything starts."""
    target = snodo.Stdio("/nonexistent/never-started")
    with pytest.raises(ValueError, match=r"^probe_timeout must be a positive number of seconds$"):
        snodo.connect(target, probe_timeout=bad)


@pytest.mark.parametrize("name", ["max_server_requests", "max_response_bytes"])
@pytest.mark.parametrize("bad", [True, 0, -3, 1.5, "2"])
def test_a_bad_connect_count_is_refused(name: str, bad: Any) -> None:
    target = snodo.Stdio("/nonexistent/never-started")
    with pytest.raises(ValueError, match=f"^{name} must be a positive integer$"):
        snodo.connect(target, **{name: bad})


@pytest.mark.parametrize(
    ("name", "bad", "message"),
    [
        ("max_input_rounds", -1, "max_input_rounds must be a non-negative integer"),
        ("max_input_rounds", True, "max_input_rounds must be a non-negative integer"),
        ("max_pages", 0, "max_pages must be a positive integer"),
    ],
)
def test_a_bad_client_count_is_refused(name: str, bad: Any, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{message}$"):
        opts.build_options(**{name: bad})


def test_cache_must_be_a_bool() -> None:
    with pytest.raises(TypeError, match="cache must be True or False"):
        opts.build_options(cache=1)


def test_an_unknown_version_is_32602_before_anything_connects() -> None:
    with pytest.raises(McpError) as caught:
        opts.build_options(protocol="1999-01-01")
    assert caught.value.code == -32602


@pytest.mark.parametrize("bad", [True, 0, -1, "1"])
def test_a_bad_per_call_timeout_is_refused_like_a_client_one(bad: Any) -> None:
    with snodo.direct(client_runtime.build()) as client:
        for call in (
            lambda: client.call_tool("echo", {"text": "x"}, timeout=bad),
            lambda: client.list_tools(timeout=bad),
            lambda: client.listen({"toolsListChanged": True}, timeout=bad),
        ):
            with pytest.raises(ValueError, match=r"^timeout must be a positive number"):
                call()


def test_a_call_given_no_options_shares_one_record() -> None:
    """The common case allocates nothing: no options is the shared NO_CALL_OPTIONS."""
    assert opts.call_options() is opts.NO_CALL_OPTIONS
    assert opts.call_options(None, None, bypass_cache=False) is opts.NO_CALL_OPTIONS
    assert not opts.NO_CALL_OPTIONS.beyond_timeout


def test_a_call_given_options_gets_a_frozen_record_of_them() -> None:
    call = opts.call_options(2.0, None, {"k": 1}, bypass_cache=True)
    assert call == opts.CallOptions(timeout=2.0, meta={"k": 1}, bypass_cache=True)
    assert call.beyond_timeout
    with pytest.raises(AttributeError):
        call.timeout = 3.0  # type: ignore[misc]


@pytest.mark.parametrize(
    "field",
    [
        "progress",
        "meta",
        "trace_context",
        "input_responses",
        "request_state",
        "max_input_rounds",
        "reset_timeout_on_progress",
        "max_total_timeout",
        "tool",
    ],
)
def test_every_option_but_timeout_and_bypass_makes_the_call_beyond_timeout(field: str) -> None:
    assert opts.CallOptions(**{field: 1}).beyond_timeout
    assert not opts.CallOptions(timeout=1.0, bypass_cache=True).beyond_timeout


def test_client_keywords_takes_the_client_options_out_of_a_functions_keywords() -> None:
    given = {**opts.OPTION_DEFAULTS, "target": "x", "env": None}
    assert opts.client_keywords(given) == opts.OPTION_DEFAULTS


def test_calls_given_only_a_timeout_share_a_record_per_value() -> None:
    assert opts.call_options(5.0) is opts.call_options(5.0)
    assert opts.call_options(5.0, bypass_cache=True) is opts.call_options(5.0, bypass_cache=True)
    assert opts.call_options(5.0) != opts.call_options(5.0, bypass_cache=True)
    assert opts.call_options(True).timeout is True  # not shared; refused when the call is sent
