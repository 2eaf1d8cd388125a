"""The declared transport seam (snodo.transports.base): traits, cache identity, session events and
session id are read the same way for built-in, BaseTransport-derived and bare custom transports."""

from __future__ import annotations

from typing import Any

from snodo.transports.base import (
    BaseTransport,
    CacheIdentity,
    ListeningTransport,
    NotifyingTransport,
    RequestOptions,
    SessionEndingTransport,
    Transport,
    TransportTraits,
    cache_identity_of,
    session_events_of,
    session_id_of,
    traits_of,
)
from snodo.transports.listening import SessionFanout


class Bare:
    """A custom transport that declares nothing beyond request and close."""

    def request(self, message: dict[str, Any], options: RequestOptions) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": message["id"], "result": {}}

    def close(self) -> None:
        pass


class Named(Bare):
    cache_namespace = ("pipe", "/tmp/server.sock")


class Derived(BaseTransport, Bare):
    cache_namespace = "endpoint-a"


class Notifying(Bare):
    session_id = "s-1"

    def notify(self, message: dict[str, Any], options: RequestOptions) -> None:
        pass


def test_a_transport_that_declares_nothing_gets_the_defaults() -> None:
    bare = Bare()
    assert isinstance(bare, Transport)
    assert traits_of(bare) == TransportTraits(header_policy=False, deletes_session_on_close=False)
    assert cache_identity_of(bare) == CacheIdentity(namespace=None, credential=None)
    assert session_events_of(bare) is None
    assert session_id_of(bare) is None
    assert not isinstance(bare, NotifyingTransport)
    assert not isinstance(bare, ListeningTransport)
    assert not isinstance(bare, SessionEndingTransport)


def test_a_cache_namespace_attribute_names_public_results_qualified_by_the_class() -> None:
    identity = cache_identity_of(Named())
    assert identity.credential is None  # private results are never stored for it
    assert identity.namespace == (
        f"custom:{__name__}.Named",
        ("pipe", "/tmp/server.sock"),
    )


def test_a_base_transport_subclass_keeps_its_cache_namespace() -> None:
    identity = cache_identity_of(Derived())
    assert identity.namespace == (f"custom:{__name__}.Derived", "endpoint-a")
    assert identity.credential is None


def test_traits_of_ignores_a_value_that_is_not_traits() -> None:
    class Odd(Bare):
        traits = {"header_policy": True}

    assert traits_of(Odd()) == TransportTraits()


def test_declared_traits_and_session_events_are_read_as_declared() -> None:
    class Declares(BaseTransport, Bare):
        traits = TransportTraits(header_policy=True, deletes_session_on_close=True)

        def __init__(self) -> None:
            self.session_events = SessionFanout()

    transport = Declares()
    assert traits_of(transport).header_policy
    assert traits_of(transport).deletes_session_on_close
    assert session_events_of(transport) is transport.session_events


def test_session_id_is_read_only_when_it_is_a_string() -> None:
    transport = Notifying()
    assert isinstance(transport, NotifyingTransport)
    assert session_id_of(transport) == "s-1"
    transport.session_id = 7  # type: ignore[assignment]
    assert session_id_of(transport) is None
