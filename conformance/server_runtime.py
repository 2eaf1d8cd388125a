"""The conformance suite's server under test: a snodo Runtime with the "everything" fixtures.

    python -m snodo.server --http --port 0 conformance.server_runtime:build

The tools, resources, prompts and completion the suite's server scenarios call, by the names
the official SDKs' everything-servers use, written once with snodo's server API: the same
handler serves the session-era versions (server-to-client requests) and 2026-07-28
(``input_required`` rounds).
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any

from snodo import McpError
from snodo.protocol.errors import INTERNAL_ERROR, MISSING_CLIENT_CAPABILITY
from snodo.server import Context, Runtime

IMAGE_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
AUDIO_WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}}
NAME_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string"}},
    "required": ["name"],
}

#: The tool inputSchema the json-schema-2020-12 scenario expects to find unchanged.
JSON_SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}

SEP1034_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {
            "type": "string",
            "description": "User status",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "description": "Verification status", "default": True},
    },
}

SEP1330_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {
            "type": "string",
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ],
        },
        "legacyEnum": {
            "type": "string",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {
            "type": "array",
            "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
        },
        "titledMulti": {
            "type": "array",
            "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"},
                ]
            },
        },
    },
}

USER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "username": {"type": "string", "description": "User's response"},
        "email": {"type": "string", "description": "User's email address"},
    },
    "required": ["username", "email"],
}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def image() -> dict[str, Any]:
    return {"type": "image", "data": IMAGE_PNG, "mimeType": "image/png"}


def sampling_params(prompt: str, max_tokens: int = 100) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text(prompt)}], "maxTokens": max_tokens}


def ask_name(message: str) -> tuple[str, dict[str, Any]]:
    """A form elicitation for a name, as a ``request_input`` entry."""
    return (
        "elicitation/create",
        {"mode": "form", "message": message, "requestedSchema": NAME_SCHEMA},
    )


def answer_text(answer: dict[str, Any]) -> str:
    """The text of a ``CreateMessageResult`` (its content is one block or a list)."""
    content = answer.get("content")
    block = content[0] if isinstance(content, list) and content else content
    return str(block.get("text", "?")) if isinstance(block, dict) else "?"


def build() -> Runtime:
    """A fresh conformance Runtime."""
    rt = Runtime(
        "snodo-conformance-server",
        "0.1.0",
        state_secret=b"conformance-fixture-key-32bytes!",
        logging=True,
    )
    add_content_tools(rt)
    add_interactive_tools(rt)
    add_input_required_tools(rt)
    add_resources(rt)
    add_prompts(rt)
    add_change_triggers(rt)
    add_task_tools(rt)
    add_skills(rt)

    @rt.completion
    def complete(ref: dict[str, Any], argument: dict[str, Any], context: Any, ctx: Context) -> Any:
        """No suggestions (what the scenario accepts from every SDK's fixture)."""
        return {"values": [], "total": 0, "hasMore": False}

    return rt


def add_change_triggers(rt: Runtime) -> None:
    """The diagnostic hooks ``server-stateless`` calls to see list changes reach listen streams."""

    @rt.tool(input_schema=NO_ARGS)
    def test_trigger_tool_change(args: dict[str, Any], ctx: Context) -> str:
        """Add (or replace) a tool, so tools/list changes."""
        rt.add_tool(
            "test_changed_tool",
            lambda a, c: "changed",
            description="A tool added by test_trigger_tool_change",
            input_schema=NO_ARGS,
        )
        return "tool list changed"

    @rt.tool(input_schema=NO_ARGS)
    def test_trigger_prompt_change(args: dict[str, Any], ctx: Context) -> str:
        """Add (or replace) a prompt, so prompts/list changes."""
        rt.add_prompt(
            "test_changed_prompt",
            lambda a, c: [],
            description="A prompt added by test_trigger_prompt_change",
        )
        return "prompt list changed"


def add_skills(rt: Runtime) -> None:
    """The SEP-2640 skills the skills scenarios discover: one with a sub-directory."""
    rt.add_skill(
        "pdf-tools",
        "Fill in, merge and split PDF files.",
        "# PDF tools\n\nUse `scripts/merge.py` to merge files; see references/forms.md.\n",
        files={
            "references/forms.md": "# Forms\n\nHow to fill in PDF forms.\n",
            "scripts/merge.py": "import sys\nprint('merging', sys.argv[1:])\n",
        },
        frontmatter={"license": "MIT"},
    )
    rt.add_skill(
        "release-notes",
        "Write release notes from a git log.",
        "# Release notes\n\nGroup the commits by kind, newest first.\n",
        path="acme/release-notes",
    )


def add_task_tools(rt: Runtime) -> None:
    """The fixtures of the Tasks extension scenarios (SEP-2663)."""

    @rt.tool(input_schema=NAME_SCHEMA)
    def greet(args: dict[str, Any], ctx: Context) -> str:
        """Sync-only: returns Hello, {name}!"""
        return f"Hello, {args['name']}!"

    @rt.tool(
        input_schema={
            "type": "object",
            "properties": {"seconds": {"type": "number"}, "label": {"type": "string"}},
        },
        task="optional",
    )
    def slow_compute(args: dict[str, Any], ctx: Context) -> str:
        """Task-supporting: sleeps `seconds` seconds (ends early when cancelled), then answers"""
        end = time.monotonic() + float(args.get("seconds", 1))
        while time.monotonic() < end and not ctx.cancelled:
            time.sleep(min(0.05, max(0.0, end - time.monotonic())))
        return f"computed {args.get('label', '')} after {args.get('seconds', 1)}s"

    @rt.tool(input_schema=NO_ARGS, task="required")
    def failing_job(args: dict[str, Any], ctx: Context) -> str:
        """Task-required: a tool execution error after about a second"""
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline and not ctx.cancelled:
            time.sleep(0.05)
        raise RuntimeError("failing_job failed, as it always does")

    @rt.tool(input_schema=NO_ARGS, task="optional")
    def protocol_error_job(args: dict[str, Any], ctx: Context) -> str:
        """Task-supporting: fails with a protocol-level error"""
        raise McpError(INTERNAL_ERROR, "protocol_error_job: internal failure")

    confirm_schema = {
        "type": "object",
        "properties": {"confirm": {"type": "boolean"}},
        "required": ["confirm"],
    }

    @rt.tool(
        input_schema={
            "type": "object",
            "properties": {"filename": {"type": "string"}},
            "required": ["filename"],
        },
        task="optional",
    )
    def confirm_delete(args: dict[str, Any], ctx: Context) -> str:
        """Task-supporting: asks for confirmation (one elicitation), then answers"""
        answer = ctx.elicit(f"Delete {args['filename']}?", confirm_schema)
        confirmed = answer.get("action") == "accept" and answer.get("content", {}).get("confirm")
        return f"{args['filename']}: {'deleted' if confirmed else 'kept'}"

    either = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "confirm": {"type": "boolean"}},
    }

    @rt.tool(input_schema=NO_ARGS, task="optional")
    def multi_input(args: dict[str, Any], ctx: Context) -> str:
        """Task-supporting: two elicitations pending at once"""
        answers = ctx.request_input(
            {
                "first": (
                    "elicitation/create",
                    {"mode": "form", "message": "First?", "requestedSchema": either},
                ),
                "second": (
                    "elicitation/create",
                    {"mode": "form", "message": "Second?", "requestedSchema": either},
                ),
            }
        )
        return f"received {len(answers)} answers"

    @rt.tool(input_schema=NO_ARGS, task="required", prelude=True)
    def test_tool_with_task(args: dict[str, Any], ctx: Any) -> str:
        """Gathers user_name in a multi round-trip round, then goes on as a task"""
        answer = ctx.request_input({"user_name": ask_name("What is your name?")})["user_name"]
        ctx.start_task()
        return f"Hello, {answer.get('content', {}).get('name', 'stranger')}, from a task!"


def add_content_tools(rt: Runtime) -> None:
    @rt.tool(input_schema=NO_ARGS)
    def test_simple_text(args: dict[str, Any], ctx: Context) -> str:
        """Tests simple text content response"""
        return "This is a simple text response for testing."

    @rt.tool(input_schema=NO_ARGS)
    def test_image_content(args: dict[str, Any], ctx: Context) -> dict[str, Any]:
        """Tests image content response"""
        return {"content": [image()]}

    @rt.tool(input_schema=NO_ARGS)
    def test_audio_content(args: dict[str, Any], ctx: Context) -> dict[str, Any]:
        """Tests audio content response"""
        return {"content": [{"type": "audio", "data": AUDIO_WAV, "mimeType": "audio/wav"}]}

    @rt.tool(input_schema=NO_ARGS)
    def test_embedded_resource(args: dict[str, Any], ctx: Context) -> dict[str, Any]:
        """Tests embedded resource content response"""
        resource = {
            "uri": "test://embedded-resource",
            "mimeType": "text/plain",
            "text": "This is an embedded resource content.",
        }
        return {"content": [{"type": "resource", "resource": resource}]}

    @rt.tool(input_schema=NO_ARGS)
    def test_multiple_content_types(args: dict[str, Any], ctx: Context) -> dict[str, Any]:
        """Tests response with multiple content types (text, image, resource)"""
        resource = {
            "uri": "test://mixed-content-resource",
            "mimeType": "application/json",
            "text": '{"test": "data", "value": 123}',
        }
        return {
            "content": [
                text("Multiple content types test:"),
                image(),
                {"type": "resource", "resource": resource},
            ]
        }

    @rt.tool(input_schema=NO_ARGS)
    def test_error_handling(args: dict[str, Any], ctx: Context) -> str:
        """Tests error response handling"""
        raise RuntimeError("This tool intentionally returns an error for testing")

    @rt.tool(input_schema=NO_ARGS)
    def test_tool_with_logging(args: dict[str, Any], ctx: Context) -> str:
        """Tests tool that emits log messages during execution"""
        for step in ("Tool execution started", "Tool processing data", "Tool execution completed"):
            ctx.log("info", step, logger="conformance")
        return "Tool with logging executed successfully"

    @rt.tool(input_schema=NO_ARGS)
    def test_logging_tool(args: dict[str, Any], ctx: Context) -> str:
        """Logs at info: sent only when the request asked for that level"""
        ctx.log("info", "test_logging_tool ran", logger="conformance")
        return "logged"

    @rt.tool(input_schema=NO_ARGS)
    def test_reconnection(args: dict[str, Any], ctx: Context) -> str:
        """Tests SSE polling (SEP-1699): served with ``--sse-retry-ms``, the response stream
        closes after its priming event and the client resumes it with Last-Event-ID"""
        ctx.log("info", "Before disconnect", logger="conformance")
        ctx.log("info", "After reconnect", logger="conformance")
        return "Reconnection test completed"

    @rt.tool(input_schema=NO_ARGS)
    def test_tool_with_progress(args: dict[str, Any], ctx: Context) -> str:
        """Tests tool that reports progress notifications"""
        for step in (0, 50, 100):
            ctx.progress(step, 100, f"Completed step {step} of 100")
        return str(ctx.meta.get("progressToken", 0))

    @rt.tool(input_schema=JSON_SCHEMA_2020_12, name="json_schema_2020_12_tool")
    def json_schema_tool(args: dict[str, Any], ctx: Context) -> str:
        """Tests JSON Schema 2020-12 keyword preservation in tools/list"""
        return "json_schema_2020_12_tool"

    @rt.tool(
        input_schema={
            "type": "object",
            "properties": {
                "region": {
                    "type": "string",
                    "description": "Mirrored into the Mcp-Param-Region header",
                    "x-mcp-header": "Region",
                }
            },
        }
    )
    def test_x_mcp_header(args: dict[str, Any], ctx: Context) -> str:
        """Tests SEP-2243 Mcp-Param-* server-side validation"""
        return f"region={args.get('region', '<none>')}"


def add_interactive_tools(rt: Runtime) -> None:
    @rt.tool(
        input_schema={
            "type": "object",
            "properties": {"prompt": {"type": "string"}},
            "required": ["prompt"],
        }
    )
    def test_sampling(args: dict[str, Any], ctx: Context) -> str:
        """Tests server-initiated sampling (LLM completion request)"""
        answer = ctx.sample(sampling_params(str(args["prompt"])))
        return f"LLM response: {answer_text(answer)}"

    @rt.tool(
        input_schema={
            "type": "object",
            "properties": {"message": {"type": "string"}},
            "required": ["message"],
        }
    )
    def test_elicitation(args: dict[str, Any], ctx: Context) -> str:
        """Tests server-initiated elicitation (user input request)"""
        answer = ctx.elicit(str(args["message"]), USER_SCHEMA)
        content = json.dumps(answer.get("content", {})) if answer["action"] == "accept" else "{}"
        return f"User response: action={answer['action']}, content={content}"

    @rt.tool(input_schema=NO_ARGS)
    def test_elicitation_sep1034_defaults(args: dict[str, Any], ctx: Context) -> str:
        """Tests elicitation with default values for all primitive types (SEP-1034)"""
        answer = ctx.elicit("Please provide user information", SEP1034_SCHEMA)
        content = json.dumps(answer.get("content", {})) if answer["action"] == "accept" else "{}"
        return f"Elicitation result: action={answer['action']}, content={content}"

    @rt.tool(input_schema=NO_ARGS)
    def test_elicitation_sep1330_enums(args: dict[str, Any], ctx: Context) -> str:
        """Tests elicitation with enum schema variations per SEP-1330"""
        answer = ctx.elicit(
            "Please select values using different enum schema types", SEP1330_SCHEMA
        )
        content = json.dumps(answer.get("content", {})) if answer["action"] == "accept" else "{}"
        return f"Elicitation completed: action={answer['action']}, content={content}"

    @rt.tool(input_schema=NO_ARGS)
    def test_streaming_elicitation(args: dict[str, Any], ctx: Context) -> str:
        """Elicits while its response streams: on 2026-07-28 an input_required result, never a
        request of its own on the response stream"""
        answer = ctx.elicit("Please confirm", {"type": "object", "properties": {}})
        return f"action={answer['action']}"

    @rt.tool(input_schema=NO_ARGS)
    def test_missing_capability(args: dict[str, Any], ctx: Context) -> str:
        """Needs the client's sampling capability: -32021 with requiredCapabilities otherwise"""
        if "sampling" not in ctx.client_capabilities:
            raise McpError(
                MISSING_CLIENT_CAPABILITY,
                "This tool requires the client 'sampling' capability",
                {"requiredCapabilities": {"sampling": {}}},
            )
        return "Client declared sampling capability; proceeding."


def add_input_required_tools(rt: Runtime) -> None:
    @rt.tool(input_schema=NO_ARGS)
    def test_input_required_result_elicitation(args: dict[str, Any], ctx: Context) -> str:
        """Tests InputRequiredResult with a single elicitation request"""
        answer = ctx.request_input({"user_name": ask_name("What is your name?")})["user_name"]
        return f"Hello, {answer.get('content', {}).get('name', 'stranger')}!"

    @rt.tool(input_schema=NO_ARGS)
    def test_input_required_result_sampling(args: dict[str, Any], ctx: Context) -> str:
        """Tests InputRequiredResult with a single sampling request"""
        answer = ctx.sample(sampling_params("What is the capital of France?"))
        return f"Model said: {answer_text(answer)}"

    @rt.tool(input_schema=NO_ARGS)
    def test_input_required_result_list_roots(args: dict[str, Any], ctx: Context) -> str:
        """Tests InputRequiredResult with a single roots/list request"""
        return f"Client exposed {len(ctx.list_roots().get('roots', []))} root(s)."

    @rt.tool(input_schema=NO_ARGS)
    def test_input_required_result_request_state(args: dict[str, Any], ctx: Context) -> str:
        """Tests requestState round-tripping in the InputRequiredResult flow"""
        schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
        ctx.elicit("Please confirm", schema)
        return "state-ok: confirmation received"

    @rt.tool(input_schema=NO_ARGS)
    def test_input_required_result_multiple_inputs(args: dict[str, Any], ctx: Context) -> str:
        """Tests InputRequiredResult carrying elicitation, sampling and roots requests together"""
        ctx.request_input(
            {
                "user_name": ask_name("What is your name?"),
                "greeting": ("sampling/createMessage", sampling_params("Generate a greeting", 50)),
                "client_roots": ("roots/list", {}),
            }
        )
        return "All inputs received."

    @rt.tool(input_schema=NO_ARGS)
    def test_input_required_result_multi_round(args: dict[str, Any], ctx: Context) -> str:
        """Tests a three-round InputRequiredResult flow with evolving requestState"""
        first = ctx.elicit("Step 1: What is your name?", NAME_SCHEMA)
        color_schema = {
            "type": "object",
            "properties": {"color": {"type": "string"}},
            "required": ["color"],
        }
        second = ctx.elicit("Step 2: What is your favorite color?", color_schema)
        name = first.get("content", {}).get("name")
        return f"{name} likes {second.get('content', {}).get('color')}."

    @rt.tool(input_schema=NO_ARGS)
    def test_input_required_result_tampered_state(args: dict[str, Any], ctx: Context) -> str:
        """Tests that the server rejects a tampered requestState echo (snodo signs it)"""
        schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
        ctx.elicit("Please confirm", schema)
        return "state-ok"

    @rt.tool(input_schema=NO_ARGS)
    def test_input_required_result_capabilities(args: dict[str, Any], ctx: Context) -> str:
        """Tests that inputRequests only include methods the client declared support for"""
        requests: dict[str, tuple[str, dict[str, Any]]] = {}
        if "sampling" in ctx.client_capabilities:
            requests["sample"] = ("sampling/createMessage", sampling_params("Say hello", 50))
        if "elicitation" in ctx.client_capabilities:
            requests["ask"] = ask_name("What is your name?")
        if requests:
            ctx.request_input(requests)
        return "capability-gated inputs received"


def add_resources(rt: Runtime) -> None:
    @rt.resource("test://static-text", name="static_text_resource", mime_type="text/plain")
    def static_text(ctx: Context) -> str:
        """A static text resource for testing"""
        return "This is the content of the static text resource."

    @rt.resource("test://static-binary", name="static_binary_resource", mime_type="image/png")
    def static_binary(ctx: Context) -> bytes:
        """A static binary resource (image) for testing"""
        return base64.b64decode(IMAGE_PNG)

    @rt.resource("test://watched-resource", name="watched_resource", mime_type="text/plain")
    def watched(ctx: Context) -> str:
        """A resource that can be subscribed to for updates"""
        return "Watched resource content"

    @rt.resource_template(
        "test://template/{id}/data", name="template_resource", mime_type="application/json"
    )
    def template(uri: str, variables: dict[str, str], ctx: Context) -> str:
        """A resource template with parameter substitution"""
        ident = variables["id"]
        return json.dumps({"id": ident, "templateTest": True, "data": f"Data for ID: {ident}"})


def add_prompts(rt: Runtime) -> None:
    @rt.prompt
    def test_simple_prompt(args: dict[str, str], ctx: Context) -> str:
        """A simple prompt without arguments"""
        return "This is a simple prompt for testing."

    @rt.prompt(arguments=["arg1", "arg2"], description="A prompt with required arguments")
    def test_prompt_with_arguments(args: dict[str, str], ctx: Context) -> str:
        return f"Prompt with arguments: arg1='{args['arg1']}', arg2='{args['arg2']}'"

    @rt.prompt(arguments=["resourceUri"], description="A prompt that includes an embedded resource")
    def test_prompt_with_embedded_resource(args: dict[str, str], ctx: Context) -> list[Any]:
        resource = {
            "uri": args["resourceUri"],
            "mimeType": "text/plain",
            "text": "Embedded resource content for testing.",
        }
        return [
            {"role": "user", "content": {"type": "resource", "resource": resource}},
            {"role": "user", "content": text("Please process the embedded resource above.")},
        ]

    @rt.prompt(description="A prompt that includes image content")
    def test_prompt_with_image(args: dict[str, str], ctx: Context) -> list[Any]:
        return [
            {"role": "user", "content": image()},
            {"role": "user", "content": text("Please analyze the image above.")},
        ]

    @rt.prompt(description="Tests InputRequiredResult from prompts/get (non-tool request)")
    def test_input_required_result_prompt(args: dict[str, str], ctx: Context) -> str:
        schema = {
            "type": "object",
            "properties": {"context": {"type": "string"}},
            "required": ["context"],
        }
        answer = ctx.elicit("What context should the prompt use?", schema)
        return f"Use the following context: {answer.get('content', {}).get('context', '?')}"
