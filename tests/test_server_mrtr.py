"""Multi round-trip requests on 2026-07-28 (client-digest (h), (m); the seed's "Multi round-trip
requests" and "Input handlers"): input_required results, answers carried in the signed
requestState, refusal of tampered or foreign state, -32021, and retry_later."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from snodo.protocol.errors import McpError
from snodo.server import Context, Runtime
from tests.support.server_support import EXAMPLES_DIR, Conn, example_runtime, validate

FORM: dict[str, Any] = {"elicitation": {"form": {}}}
ALL_CAPS: dict[str, Any] = {
    "elicitation": {"form": {}, "url": {}},
    "sampling": {"tools": {}, "context": {}},
    "roots": {},
}
APPROVE = {"action": "accept", "content": {"approved": True}}
SAMPLED = {
    "role": "assistant",
    "content": {"type": "text", "text": "Paris"},
    "model": "m",
    "stopReason": "endTurn",
}
ROOTS = {"roots": [{"uri": "file:///home/me/project", "name": "project"}]}


def call(
    conn: Conn, name: str, arguments: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": arguments or {}}
    params.update(extra)
    return conn.ok("tools/call", params)


def retry(
    conn: Conn,
    name: str,
    pending: dict[str, Any],
    answers: dict[str, Any],
    arguments: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return call(conn, name, arguments, inputResponses=answers, requestState=pending["requestState"])


def state_payload(token: str) -> dict[str, Any]:
    body = token.split(".")[0]
    return json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))  # type: ignore[no-any-return]


# -- the basic flow ------------------------------------------------------------------------


def test_elicitation_round_trip_completes_with_the_answer() -> None:
    """(h) input_required {inputRequests, requestState}; the retry with inputResponses completes."""
    conn = Conn(example_runtime(), caps=FORM)
    pending = call(conn, "deploy", {"env": "prod"})
    assert pending["resultType"] == "input_required"
    assert set(pending["inputRequests"]) == {"elicit-1"}
    request = pending["inputRequests"]["elicit-1"]
    assert request["method"] == "elicitation/create"
    assert request["params"]["mode"] == "form" and request["params"]["message"] == "Deploy to prod?"
    validate("2026-07-28", "ElicitRequest", request)
    assert "_meta" in pending and "ttlMs" not in pending
    done = retry(conn, "deploy", pending, {"elicit-1": APPROVE}, {"env": "prod"})
    assert done["resultType"] == "complete"
    assert done["structuredContent"] == {"env": "prod", "status": "deployed"}
    declined = retry(conn, "deploy", pending, {"elicit-1": {"action": "decline"}}, {"env": "prod"})
    assert declined["structuredContent"]["status"] == "declined"


def test_answers_are_carried_across_rounds_in_the_request_state() -> None:
    """The handler re-runs every round; answers from earlier rounds come back from requestState."""
    runs: list[tuple[int, list[str]]] = []
    side_effects: list[str] = []

    def wizard(arguments: dict[str, Any], ctx: Context) -> str:
        got: list[str] = []
        runs.append((ctx.round, got))
        first = ctx.elicit(
            "Name?", {"type": "object", "properties": {"v": {"type": "string"}}, "required": ["v"]}
        )
        got.append(first["content"]["v"])
        second = ctx.elicit(
            "Colour?",
            {"type": "object", "properties": {"v": {"type": "string"}}, "required": ["v"]},
        )
        got.append(second["content"]["v"])
        side_effects.append("done")
        return f"{got[0]} likes {got[1]}"

    rt = Runtime("w", "1")
    rt.add_tool("wizard", wizard)
    conn = Conn(rt, caps=FORM)
    r0 = call(conn, "wizard")
    assert list(r0["inputRequests"]) == ["elicit-1"]
    r1 = retry(conn, "wizard", r0, {"elicit-1": {"action": "accept", "content": {"v": "Ada"}}})
    assert list(r1["inputRequests"]) == ["elicit-2"]
    assert r1["inputRequests"]["elicit-2"]["params"]["message"] == "Colour?"
    # Only the new answer is sent: the first one travels in requestState.
    r2 = retry(conn, "wizard", r1, {"elicit-2": {"action": "accept", "content": {"v": "green"}}})
    assert r2["content"][0]["text"] == "Ada likes green"
    assert [r for r, _ in runs] == [0, 1, 2]
    assert side_effects == ["done"]


def test_request_input_asks_several_at_once_and_re_asks_only_what_is_missing() -> None:
    """(h) several inputRequests in one round; a missing answer is asked again (SHOULD re-ask)."""
    conn = Conn(example_runtime(), caps=ALL_CAPS)
    r0 = call(conn, "confirm_both")
    assert set(r0["inputRequests"]) == {"confirm", "opinion"}
    assert r0["inputRequests"]["opinion"]["method"] == "sampling/createMessage"
    r1 = retry(
        conn,
        "confirm_both",
        r0,
        {"confirm": {"action": "accept", "content": {"ok": True}}, "unknown": {"x": 1}},
    )
    assert set(r1["inputRequests"]) == {"opinion"}
    r2 = retry(conn, "confirm_both", r1, {"opinion": SAMPLED})
    assert r2["structuredContent"] == {"confirmed": True, "opinion": "Paris"}


def test_sampling_and_roots_round_trips() -> None:
    conn = Conn(example_runtime(), caps=ALL_CAPS)
    pending = call(conn, "summarize", {"text": "long"})
    assert list(pending["inputRequests"]) == ["sample-1"]
    assert (
        retry(conn, "summarize", pending, {"sample-1": SAMPLED}, {"text": "long"})["content"][0][
            "text"
        ]
        == "Paris"
    )
    pending = call(conn, "roots")
    assert pending["inputRequests"] == {"roots-1": {"method": "roots/list", "params": {}}}
    assert retry(conn, "roots", pending, {"roots-1": ROOTS})["structuredContent"] == {
        "roots": ["file:///home/me/project"]
    }


def test_spec_example_input_responses_are_accepted() -> None:
    """The spec's own InputResponses example answers the spec's InputRequiredResult example keys."""
    example = json.loads(
        (
            EXAMPLES_DIR / "InputResponses" / "elicitation-and-sampling-input-responses.json"
        ).read_text()
    )

    def tool(arguments: dict[str, Any], ctx: Context) -> dict[str, Any]:
        got = ctx.request_input(
            {
                "github_login": (
                    "elicitation/create",
                    {
                        "message": "Please provide your GitHub username",
                        "requestedSchema": {
                            "type": "object",
                            "properties": {"name": {"type": "string"}},
                            "required": ["name"],
                        },
                    },
                ),
                "capital_of_france": (
                    "sampling/createMessage",
                    {
                        "messages": [
                            {"role": "user", "content": {"type": "text", "text": "Capital?"}}
                        ],
                        "maxTokens": 100,
                    },
                ),
            }
        )
        return {
            "login": got["github_login"]["content"]["name"],
            "model": got["capital_of_france"]["model"],
        }

    rt = Runtime("s", "1")
    rt.add_tool("t", tool)
    conn = Conn(rt, caps={"elicitation": {}, "sampling": {}})
    pending = call(conn, "t")
    assert retry(conn, "t", pending, example)["structuredContent"] == {
        "login": "octocat",
        "model": "claude-3-sonnet-20240307",
    }


def test_resources_and_prompts_can_ask_for_input_too() -> None:
    """Only tools/call, resources/read and prompts/get may return input_required."""
    rt = Runtime("m", "1")

    @rt.resource("secret://x")
    def secret(ctx: Context) -> str:
        return (
            "open"
            if ctx.elicit("Unlock?", {"type": "object", "properties": {}})["action"] == "accept"
            else "shut"
        )

    @rt.prompt
    def ask(arguments: dict[str, str], ctx: Context) -> str:
        return str(ctx.list_roots()["roots"][0]["uri"])

    conn = Conn(rt, caps={"elicitation": {}, "roots": {}})
    pending = conn.ok("resources/read", {"uri": "secret://x"})
    assert pending["resultType"] == "input_required" and "ttlMs" not in pending
    done = conn.ok(
        "resources/read",
        {
            "uri": "secret://x",
            "inputResponses": {"elicit-1": {"action": "accept"}},
            "requestState": pending["requestState"],
        },
    )
    assert done["contents"][0]["text"] == "open" and done["ttlMs"] == 0
    pending = conn.ok("prompts/get", {"name": "ask"})
    done = conn.ok(
        "prompts/get",
        {
            "name": "ask",
            "inputResponses": {"roots-1": ROOTS},
            "requestState": pending["requestState"],
        },
    )
    assert done["messages"][0]["content"]["text"] == "file:///home/me/project"


def test_other_methods_cannot_ask_for_input() -> None:
    rt = Runtime("c", "1")
    rt.add_prompt("p", lambda a, ctx: "x")
    rt.completion(
        lambda ref, arg, context, ctx: [
            ctx.elicit("?", {"type": "object", "properties": {}})["action"]
        ]
    )
    error = Conn(rt, caps=FORM).err(
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "p"}, "argument": {"name": "a", "value": ""}},
    )
    assert error["code"] == -32603


# -- requestState integrity ----------------------------------------------------------------


def test_tampered_request_state_is_refused() -> None:
    """The state is HMAC-signed: any change -> -32602 "Invalid requestState"."""
    conn = Conn(example_runtime(), caps=FORM)
    token = call(conn, "deploy")["requestState"]
    body, mac = token.split(".")
    forged = dict(state_payload(token), r=99)
    forged_body = base64.urlsafe_b64encode(json.dumps(forged).encode()).rstrip(b"=").decode()
    flipped = body[:-1] + ("A" if body[-1] != "A" else "B")
    for bad in (
        forged_body + "." + mac,
        flipped + "." + mac,
        body + "." + mac[::-1],
        body,
        "",
        "x.y",
        42,
        ["a"],
    ):
        error = conn.err(
            "tools/call",
            {
                "name": "deploy",
                "arguments": {},
                "requestState": bad,
                "inputResponses": {"elicit-1": APPROVE},
            },
        )
        assert error == {"code": -32602, "message": "Invalid requestState"}, bad


def test_state_signed_by_another_runtime_is_refused() -> None:
    first, second = example_runtime(), example_runtime()
    token = call(Conn(first, caps=FORM), "deploy")["requestState"]
    error = Conn(second, caps=FORM).err(
        "tools/call", {"name": "deploy", "arguments": {}, "requestState": token}
    )
    assert error["message"] == "Invalid requestState"
    shared = b"k" * 32
    a, b = Runtime("a", "1", state_secret=shared), Runtime("b", "1", state_secret=shared)
    for rt in (a, b):
        rt.add_tool(
            "t", lambda args, ctx: ctx.elicit("?", {"type": "object", "properties": {}})["action"]
        )
    token = call(Conn(a, caps=FORM), "t")["requestState"]
    assert (
        call(
            Conn(b, caps=FORM),
            "t",
            inputResponses={"elicit-1": {"action": "cancel"}},
            requestState=token,
        )["content"][0]["text"]
        == "cancel"
    )


def test_state_from_another_tool_method_or_arguments_is_refused() -> None:
    """A requestState belongs to one method, one tool/prompt/uri and one set of arguments."""
    rt = example_runtime()
    conn = Conn(rt, caps=ALL_CAPS)
    token = call(conn, "deploy", {"env": "staging"})["requestState"]
    answers = {"elicit-1": APPROVE}
    other_tool = conn.err(
        "tools/call",
        {
            "name": "summarize",
            "arguments": {"text": "x"},
            "requestState": token,
            "inputResponses": answers,
        },
    )
    other_args = conn.err(
        "tools/call",
        {
            "name": "deploy",
            "arguments": {"env": "prod"},
            "requestState": token,
            "inputResponses": answers,
        },
    )
    other_method = conn.err(
        "prompts/get", {"name": "review", "arguments": {"name": "x"}, "requestState": token}
    )
    assert (
        other_tool["message"]
        == other_args["message"]
        == other_method["message"]
        == "Invalid requestState"
    )
    # The same state with the original arguments still works.
    assert (
        retry(conn, "deploy", {"requestState": token}, answers, {"env": "staging"})[
            "structuredContent"
        ]["status"]
        == "deployed"
    )


def test_state_is_signed_not_encrypted_and_carries_round_and_binding() -> None:
    conn = Conn(example_runtime(), caps=FORM)
    payload = state_payload(call(conn, "deploy", {"env": "x"})["requestState"])
    assert payload["m"] == "tools/call" and payload["n"] == "deploy" and payload["r"] == 1
    assert payload["p"] == ["elicit-1"] and payload["a"] == {}


def test_input_responses_without_request_state_answer_the_keys_asked_extras_ignored() -> None:
    conn = Conn(example_runtime(), caps=FORM)
    done = call(conn, "deploy", inputResponses={"elicit-1": APPROVE, "unknown": {"x": 1}})
    assert done["resultType"] == "complete" and "deployed" in done["content"][0]["text"]
    again = call(conn, "deploy", inputResponses={"wrong-key": APPROVE})
    assert again["resultType"] == "input_required" and list(again["inputRequests"]) == ["elicit-1"]


def test_unsolicited_answers_are_validated_like_solicited_ones() -> None:
    conn = Conn(example_runtime(), caps=FORM)
    bad = {"action": "accept", "content": {"approved": "yes"}}
    error = conn.err(
        "tools/call", {"name": "deploy", "arguments": {}, "inputResponses": {"elicit-1": bad}}
    )
    assert error["code"] == -32602


def test_malformed_input_responses_are_32602() -> None:
    conn = Conn(example_runtime(), caps=FORM)
    token = call(conn, "deploy")["requestState"]
    assert (
        conn.err(
            "tools/call",
            {"name": "deploy", "arguments": {}, "inputResponses": ["x"], "requestState": token},
        )["code"]
        == -32602
    )


@pytest.mark.parametrize(
    "answer",
    [
        {"action": "approve"},
        {"action": "accept", "content": {"approved": "yes"}},
        {"action": "accept", "content": {}},
        {"action": "accept"},
        "accept",
    ],
)
def test_invalid_elicitation_answers_are_32602(answer: Any) -> None:
    """The seed: the server validates elicitation responses against requestedSchema (-32602)."""
    conn = Conn(example_runtime(), caps=FORM)
    pending = call(conn, "deploy")
    error = conn.err(
        "tools/call",
        {
            "name": "deploy",
            "arguments": {},
            "inputResponses": {"elicit-1": answer},
            "requestState": pending["requestState"],
        },
    )
    assert error["code"] == -32602 and "elicit-1" in error["message"]


@pytest.mark.parametrize(
    ("tool", "key", "answer"),
    [
        ("summarize", "sample-1", {"role": "robot", "content": {}, "model": "m"}),
        ("roots", "roots-1", {"roots": [{"name": "no uri"}]}),
    ],
)
def test_invalid_sampling_and_roots_answers_are_32602(tool: str, key: str, answer: Any) -> None:
    conn = Conn(example_runtime(), caps=ALL_CAPS)
    arguments = {"text": "x"} if tool == "summarize" else {}
    pending = call(conn, tool, arguments)
    error = conn.err(
        "tools/call",
        {
            "name": tool,
            "arguments": arguments,
            "inputResponses": {key: answer},
            "requestState": pending["requestState"],
        },
    )
    assert error["code"] == -32602


# -- capabilities --------------------------------------------------------------------------


def _asker(method: str, params: dict[str, Any]) -> Runtime:
    rt = Runtime("c", "1")
    rt.add_tool("t", lambda a, ctx: ctx.request_input({"k": (method, params)}))
    return rt


FORM_PARAMS = {
    "mode": "form",
    "message": "?",
    "requestedSchema": {"type": "object", "properties": {}},
}
URL_PARAMS = {"mode": "url", "message": "Sign in", "url": "https://example.test/login"}
SAMPLE_PARAMS = {
    "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
    "maxTokens": 5,
}


@pytest.mark.parametrize(
    ("method", "params", "caps", "required"),
    [
        ("elicitation/create", FORM_PARAMS, {}, {"elicitation": {"form": {}}}),
        (
            "elicitation/create",
            FORM_PARAMS,
            {"elicitation": {"url": {}}},
            {"elicitation": {"form": {}}},
        ),
        ("elicitation/create", URL_PARAMS, {"elicitation": {}}, {"elicitation": {"url": {}}}),
        (
            "elicitation/create",
            URL_PARAMS,
            {"elicitation": {"form": {}}},
            {"elicitation": {"url": {}}},
        ),
        ("sampling/createMessage", SAMPLE_PARAMS, {"elicitation": {}}, {"sampling": {}}),
        (
            "sampling/createMessage",
            {**SAMPLE_PARAMS, "tools": []},
            {"sampling": {}},
            {"sampling": {"tools": {}}},
        ),
        (
            "sampling/createMessage",
            {**SAMPLE_PARAMS, "toolChoice": {"mode": "auto"}},
            {"sampling": {}},
            {"sampling": {"tools": {}}},
        ),
        (
            "sampling/createMessage",
            {**SAMPLE_PARAMS, "includeContext": "thisServer"},
            {"sampling": {}},
            {"sampling": {"context": {}}},
        ),
        (
            "sampling/createMessage",
            {**SAMPLE_PARAMS, "includeContext": "none"},
            {},
            {"sampling": {}},
        ),
        ("roots/list", {}, {"roots": True}, {"roots": {}}),
        ("roots/list", {}, {"sampling": {}}, {"roots": {}}),
    ],
)
def test_missing_client_capability_is_32021_with_required_capabilities(
    method: str, params: dict[str, Any], caps: dict[str, Any], required: dict[str, Any]
) -> None:
    """(b)/(h) the server asks only for what this request's clientCapabilities declare; else -32021."""
    conn = Conn(_asker(method, params), caps=caps)
    error = conn.err("tools/call", {"name": "t"})
    assert error["code"] == -32021
    assert error["data"] == {"requiredCapabilities": required}


@pytest.mark.parametrize(
    ("method", "params", "caps"),
    [
        ("elicitation/create", FORM_PARAMS, {"elicitation": {}}),
        (
            "elicitation/create",
            {k: v for k, v in FORM_PARAMS.items() if k != "mode"},
            {"elicitation": {"form": {}}},
        ),
        ("elicitation/create", URL_PARAMS, {"elicitation": {"url": {}}}),
        (
            "sampling/createMessage",
            {**SAMPLE_PARAMS, "tools": [], "includeContext": "allServers"},
            {"sampling": {"tools": {}, "context": {}}},
        ),
        ("roots/list", {}, {"roots": {}}),
    ],
)
def test_declared_capabilities_let_the_request_through(
    method: str, params: dict[str, Any], caps: dict[str, Any]
) -> None:
    pending = Conn(_asker(method, params), caps=caps).ok("tools/call", {"name": "t"})
    assert pending["inputRequests"]["k"]["method"] == method


def test_several_missing_capabilities_are_merged() -> None:
    rt = example_runtime()
    error = Conn(rt, caps={"elicitation": {"url": {}}}).err("tools/call", {"name": "confirm_both"})
    assert error["code"] == -32021
    assert error["data"]["requiredCapabilities"] == {"elicitation": {"form": {}}, "sampling": {}}


def test_capabilities_are_checked_on_the_retry_too() -> None:
    """(b) capabilities are per request: a retry without them cannot be asked further."""
    conn = Conn(example_runtime(), caps=ALL_CAPS)
    r0 = call(conn, "confirm_both")
    conn.caps = {"sampling": {}}
    error = conn.err(
        "tools/call",
        {
            "name": "confirm_both",
            "arguments": {},
            "inputResponses": {"opinion": SAMPLED},
            "requestState": r0["requestState"],
        },
    )
    assert error["code"] == -32021
    assert error["data"]["requiredCapabilities"] == {"elicitation": {"form": {}}}


def test_a_tool_may_handle_the_capability_error_itself() -> None:
    def polite(arguments: dict[str, Any], ctx: Context) -> str:
        try:
            return str(ctx.elicit("?", {"type": "object", "properties": {}})["action"])
        except McpError as exc:
            return f"cannot ask ({exc.code})"
        except Exception:
            return "swallowed the signal"

    rt = Runtime("p", "1")
    rt.add_tool("t", polite)
    assert call(Conn(rt), "t")["content"][0]["text"] == "cannot ask (-32021)"
    # The input_required signal is not an Exception: `except Exception` does not swallow it.
    assert call(Conn(rt, caps=FORM), "t")["resultType"] == "input_required"


# -- retry_later ---------------------------------------------------------------------------


def test_retry_later_answers_with_only_a_request_state() -> None:
    """(h) load shedding: input_required with requestState and no inputRequests; round advances."""
    conn = Conn(example_runtime())
    pending = call(conn, "busy")
    assert pending["resultType"] == "input_required"
    assert "inputRequests" not in pending and isinstance(pending["requestState"], str)
    validate("2026-07-28", "InputRequiredResult", pending)
    done = call(conn, "busy", requestState=pending["requestState"])
    assert done["content"][0]["text"] == "done after 1 retries"


def test_retry_later_keeps_earlier_answers() -> None:
    def tool(arguments: dict[str, Any], ctx: Context) -> str:
        answer = ctx.elicit("?", {"type": "object", "properties": {}})
        if ctx.round < 3:
            ctx.retry_later()
        return f"{answer['action']} at round {ctx.round}"

    rt = Runtime("r", "1")
    rt.add_tool("t", tool)
    conn = Conn(rt, caps=FORM)
    pending = call(conn, "t")
    pending = retry(conn, "t", pending, {"elicit-1": {"action": "accept"}})
    assert "inputRequests" not in pending
    pending = call(conn, "t", requestState=pending["requestState"])
    done = call(conn, "t", requestState=pending["requestState"])
    assert done["content"][0]["text"] == "accept at round 3"
