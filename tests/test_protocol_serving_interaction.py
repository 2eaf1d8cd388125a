"""``snodo.protocol.serving.interaction``: what an input request needs from the client, and
whether the client's answer fits it."""

from __future__ import annotations

from typing import Any

import pytest

from snodo.protocol.inputs import response_problem
from snodo.protocol.serving.interaction import (
    answer_problem,
    capability_object,
    declared,
    form_problem,
    missing_capabilities,
    needed_capabilities,
)


def test_elicitation_empty_object_means_form_only() -> None:
    """(m) elicitation {} = form only."""
    assert declared({"elicitation": {}}, ("elicitation", "form"))
    assert not declared({"elicitation": {}}, ("elicitation", "url"))
    assert not declared({"elicitation": {"url": {}}}, ("elicitation", "form"))
    assert declared({"elicitation": {"url": {}, "form": {}}}, ("elicitation", "url"))
    assert not declared({"elicitation": True}, ("elicitation", "form"))
    assert capability_object([("elicitation", "form"), ("elicitation", "url"), ("roots",)]) == {
        "elicitation": {"form": {}, "url": {}},
        "roots": {},
    }


SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 2, "maxLength": 5},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "score": {"type": "number"},
        "ok": {"type": "boolean"},
        "color": {"type": "string", "enum": ["red", "green"]},
        "size": {
            "type": "string",
            "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}],
        },
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "maxItems": 2},
    },
    "required": ["name"],
}


@pytest.mark.parametrize(
    ("content", "ok"),
    [
        ({"name": "Ada"}, True),
        (
            {
                "name": "Ada",
                "age": 36,
                "score": 1.5,
                "ok": False,
                "color": "red",
                "size": "s",
                "tags": ["a"],
            },
            True,
        ),
        ({}, False),
        ({"name": "A"}, False),
        ({"name": "Adaline"}, False),
        ({"name": "Ada", "age": 1.5}, False),
        ({"name": "Ada", "age": True}, False),
        ({"name": "Ada", "age": -1}, False),
        ({"name": "Ada", "score": "1"}, False),
        ({"name": "Ada", "ok": 1}, False),
        ({"name": "Ada", "color": "blue"}, False),
        ({"name": "Ada", "size": "m"}, False),
        ({"name": "Ada", "tags": ["c"]}, False),
        ({"name": "Ada", "tags": ["a", "b", "a"]}, False),
        ("Ada", False),
    ],
)
def test_form_content_is_checked_against_the_requested_schema(content: Any, ok: bool) -> None:
    assert (form_problem(SCHEMA, content) is None) is ok


def test_answer_shapes() -> None:
    url = {"mode": "url", "message": "m", "url": "https://x"}
    assert answer_problem("elicitation/create", url, {"action": "accept"}) is None
    assert answer_problem("elicitation/create", url, {"action": "maybe"}) is not None
    sample = {"role": "assistant", "content": [{"type": "text", "text": "x"}], "model": "m"}
    assert answer_problem("sampling/createMessage", {}, sample) is None
    assert answer_problem("sampling/createMessage", {}, {**sample, "model": 1}) is not None
    assert answer_problem("roots/list", {}, {"roots": []}) is None
    assert answer_problem("roots/list", {}, {"roots": "x"}) is not None
    assert answer_problem("roots/list", {}, None) is not None


def test_an_unhashable_answer_field_is_a_problem_not_a_crash() -> None:
    """Answers are untrusted: an elicitation answer whose action is a list, or a sampling answer
    whose role is a list, is refused as invalid rather than crashing the dispatch."""
    assert answer_problem("elicitation/create", {}, {"action": ["accept"]}) is not None
    assert answer_problem("sampling/createMessage", {}, {"role": ["user"]}) is not None


def test_an_accepted_form_answer_is_checked_against_the_requested_schema() -> None:
    params = {"mode": "form", "requestedSchema": {"properties": {}, "required": ["name"]}}
    assert answer_problem("elicitation/create", params, {"action": "accept"}) is not None
    accepted = {"action": "accept", "content": {"name": "Ada"}}
    assert answer_problem("elicitation/create", params, accepted) is None
    assert answer_problem("elicitation/create", params, {"action": "decline"}) is None


def test_needed_capabilities_follow_the_request() -> None:
    assert needed_capabilities("elicitation/create", {}) == [("elicitation", "form")]
    assert needed_capabilities("elicitation/create", {"mode": "url"}) == [("elicitation", "url")]
    assert needed_capabilities("sampling/createMessage", {"tools": [], "includeContext": "x"}) == [
        ("sampling",),
        ("sampling", "tools"),
        ("sampling", "context"),
    ]
    assert needed_capabilities("sampling/createMessage", {"includeContext": "none"}) == [
        ("sampling",)
    ]
    assert needed_capabilities("roots/list", {}) == [("roots",)]


def test_missing_capabilities_are_those_not_declared() -> None:
    caps: dict[str, Any] = {"sampling": {}, "elicitation": {"form": {}}}
    assert missing_capabilities(caps, "sampling/createMessage", {"tools": []}) == [
        ("sampling", "tools")
    ]
    assert missing_capabilities(caps, "elicitation/create", {}) == []
    assert missing_capabilities({}, "roots/list", {}) == [("roots",)]


@pytest.mark.parametrize(
    ("kind", "answer"),
    [
        ("roots", {"roots": [{"uri": "https://not-a-file/"}]}),
        ("roots", {"roots": [{"uri": "file:///x", "name": 3}]}),
        ("sampling", {"role": "user", "content": {"type": "new-kind"}, "model": "m"}),
        ("sampling", {"role": "user", "content": [], "model": "m"}),
        (
            "sampling",
            {
                "role": "user",
                "content": {"type": "text", "text": "t"},
                "model": "m",
                "stopReason": 1,
            },
        ),
        ("form", {"action": "decline", "content": "text"}),
        ("form", {"action": "cancel", "_meta": {"n": float("nan")}}),
    ],
)
def test_the_server_reads_answers_leniently_where_the_client_sends_strictly(
    kind: str, answer: dict[str, Any]
) -> None:
    """One set of shape rules: the strict reading (a client checking its handler's result)
    refuses what the lenient one (the server reading a client's answer) lets through."""
    assert response_problem(kind, answer, strict=False) is None
    assert response_problem(kind, answer) is not None


def test_both_readings_refuse_what_the_server_relies_on() -> None:
    for strict in (True, False):
        assert response_problem("form", {"action": "maybe"}, strict=strict) is not None
        assert response_problem("sampling", {"role": "user", "content": {}}, strict=strict)
        assert response_problem("roots", {"roots": [{"name": "x"}]}, strict=strict)
        assert response_problem("roots", [], strict=strict) == "not an object"
    with pytest.raises(ValueError):
        response_problem("nonsense", {})
