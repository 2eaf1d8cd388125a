"""snodo's pytest plugin: fixtures for the tests of applications built on snodo. Opt in.

Installed with snodo as the ``snodo`` entry point (``pytest11``), it does nothing until used:
loading it imports only this module (no snodo machinery, no threads), and a test that asks for
none of its fixtures runs as if it were absent. Where plugin autoloading is off, ``-p snodo``
loads it by its entry point's name (``-p snodo.testing.pytest_plugin`` with autoloading on would
register the module twice).

* ``snodo_no_leaks``: the leak check of one test (``snodo.testing.no_leaks`` with the HTTP
  pool's idle sockets allowed); ``--snodo-leak-check`` puts it on every test, the marker
  ``@pytest.mark.snodo_leak_check`` on one.
* ``served_runtime(runtime, transport="http"|"stdio", **options)`` and
  ``snodo_http_server(runtime, **options)``: factories of ``ServedRuntime``s, closed after the
  test.
* ``fault_proxy``: a factory with ``.http(url)`` and ``.stdio(command)`` (``FaultProxy``),
  proxies closed after the test; the test is skipped where the proxy is not installed.
* ``crash_owner``: ``snodo.testing.crash_owner``; ``snodo_owner(kind=None)``: a factory of
  crashable owners, closed after the test.

The same in thread and in gevent mode: nothing here patches or imports gevent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

__all__ = [
    "crash_owner",
    "fault_proxy",
    "pytest_addoption",
    "pytest_collection_modifyitems",
    "pytest_configure",
    "served_runtime",
    "snodo_http_server",
    "snodo_no_leaks",
    "snodo_owner",
    "snodo_warm_up",
]

_MARKER = "snodo_leak_check"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("snodo", "snodo.testing")
    group.addoption(
        "--snodo-leak-check",
        action="store_true",
        default=False,
        help="fail every test that leaves a thread, fd, child process or actor behind",
    )
    group.addoption(
        "--snodo-leak-deadline",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="how long the leak check waits for what a test leaves to go (default 5)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{_MARKER}: fail the test if it leaves a thread, fd, process or actor"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Put the leak check first on every test (``--snodo-leak-check``) or on marked ones."""
    every = bool(config.getoption("--snodo-leak-check"))
    for item in items:
        names = getattr(item, "fixturenames", None)
        if names is None or "snodo_no_leaks" in names:
            continue
        if every or item.get_closest_marker(_MARKER) is not None:
            names.insert(0, "snodo_no_leaks")


@pytest.fixture(scope="session")
def snodo_warm_up() -> None:
    """Start what snodo starts once per process (so that no test's leak check counts it)."""
    from snodo.testing.servers import warm_up

    warm_up()


@pytest.fixture
def snodo_no_leaks(request: pytest.FixtureRequest, snodo_warm_up: None) -> Iterator[Any]:
    """Fail the test if it leaves a thread, fd, child or grandchild process or actor behind
    (waiting ``--snodo-leak-deadline`` seconds for them to go)."""
    from snodo.testing.leaks import no_leaks

    deadline = float(request.config.getoption("--snodo-leak-deadline"))
    with no_leaks(deadline, pooled=True) as baseline:
        yield baseline


class _Closing:
    """What a factory fixture made, closed (newest first) after the test."""

    def __init__(self) -> None:
        self.made: list[Any] = []

    def keep(self, thing: Any) -> Any:
        self.made.append(thing)
        return thing

    def close(self) -> None:
        errors = []
        for thing in reversed(self.made):
            try:
                thing.close()
            except Exception as exc:  # close everything; report the first failure
                errors.append(exc)
        if errors:
            raise errors[0]


@pytest.fixture
def served_runtime() -> Iterator[Callable[..., Any]]:
    """``served_runtime(runtime, transport="http", **options)``: a ``ServedRuntime``
    (``serve_http`` or ``serve_stdio``), closed after the test."""
    from snodo.testing.servers import serve_http, serve_stdio

    made = _Closing()

    def serve(runtime: Any, transport: str = "http", **options: Any) -> Any:
        if transport == "http":
            return made.keep(serve_http(runtime, **options))
        if transport == "stdio":
            return made.keep(serve_stdio(runtime, **options))
        raise ValueError(f"transport is 'http' or 'stdio', not {transport!r}")

    yield serve
    made.close()


@pytest.fixture
def snodo_http_server(served_runtime: Callable[..., Any]) -> Callable[..., Any]:
    """``snodo_http_server(runtime, **options)``: ``serve_http``, closed after the test."""

    def serve(runtime: Any, **options: Any) -> Any:
        return served_runtime(runtime, "http", **options)

    return serve


class _Proxies:
    def __init__(self, made: _Closing, proxy_class: Any) -> None:
        self._made = made
        self._class = proxy_class

    def http(self, upstream_url: str, **options: Any) -> Any:
        return self._made.keep(self._class.http(upstream_url, **options))

    def stdio(self, command: Any, *args: Any, **options: Any) -> Any:
        return self._made.keep(self._class.stdio(command, *args, **options))


@pytest.fixture
def fault_proxy() -> Iterator[_Proxies]:
    """``fault_proxy.http(url)`` / ``fault_proxy.stdio(command)``: ``FaultProxy``s, closed after
    the test (skipped where ``snodo.testing.proxy`` is absent)."""
    try:
        from snodo.testing.proxy import FaultProxy
    except ImportError as exc:
        pytest.skip(f"snodo.testing.proxy is not available: {exc}")
    made = _Closing()
    yield _Proxies(made, FaultProxy)
    made.close()


@pytest.fixture
def crash_owner() -> Callable[..., None]:
    """``snodo.testing.crash_owner``: crash an owner now."""
    from snodo.testing.crashes import crash_owner as crash

    return crash


@pytest.fixture
def snodo_owner() -> Iterator[Callable[..., Any]]:
    """``snodo_owner(kind=None)``: a crashable owner (``snodo.testing.owner``), closed after."""
    from snodo.testing.crashes import owner

    made = _Closing()

    def make(kind: Any = None) -> Any:
        return made.keep(owner(kind))

    yield make
    made.close()
