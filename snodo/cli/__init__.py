"""The ``snodo`` command: poke at any MCP server from a terminal or a script.

    snodo tools --stdio "python -m snodo.server examples.example_runtime:runtime"
    snodo call git git_status repo_path=.          # "git" from ./mcp.json
    snodo status --config servers.json

``main(argv)`` returns the exit status: 0 success, 1 a tool result with ``isError``, 2 a usage
error, 3 a connection or protocol error, 130 Ctrl-C. Nothing heavy is imported here: each
command imports what it needs (docs/decisions/0043-cli.md).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from snodo.cli.arguments import UsageError

if TYPE_CHECKING:
    from snodo.cli.targets import Resolved
    from snodo.cli.terminal import TerminalOptions
    from snodo.client import Client
    from snodo.protocol.results import InputRequired

__all__ = ["main"]

PROG = "snodo"
LISTEN_SLICE = 0.25  # seconds: how long `listen` waits at a time (a Ctrl-C is seen between)
EXIT_OK, EXIT_TOOL_ERROR, EXIT_USAGE, EXIT_CONNECTION, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
_EXAMPLE = "python -m snodo.server examples.example_runtime:runtime"

_TOP_EPILOG = f"""\
examples:
  snodo tools --stdio "{_EXAMPLE}"
  snodo call --stdio "{_EXAMPLE}" add a=1 b=2
  snodo info --http http://127.0.0.1:8000/mcp --protocol 2025-11-25
  snodo tools git                    # the server "git" of ./mcp.json
  snodo status --config servers.json
  snodo serve examples.example_runtime:runtime --http --port 8000

TARGET is a server name from an mcpServers config (--config FILE, else $SNODO_CONFIG,
./mcp.json, ./.mcp.json, ~/.config/snodo/mcp.json), or --stdio "COMMAND ARGS..." / --http URL.
Options go after the command. Exit status: 0 success, 1 the tool returned isError, 2 usage
error, 3 connection or protocol error, 130 interrupted.
"""

_TARGET_NOTE = """\
TARGET: a server name from the mcpServers config ("demo" above: {"mcpServers": {"demo":
{"command": "python", "args": ["-m", "snodo.server", "examples.example_runtime:runtime"]}}}),
or --stdio "COMMAND ARGS..." / --http URL instead of it."""

#: command -> (positional metavars, help, examples)
_COMMANDS: dict[str, tuple[str, str, str]] = {
    "info": (
        "[TARGET]",
        "the server's version, info, capabilities and instructions",
        "info demo\n  snodo info --http http://127.0.0.1:8000/mcp --json",
    ),
    "tools": (
        "[TARGET]",
        "list the tools",
        f'tools demo\n  snodo tools --stdio "{_EXAMPLE}" --json',
    ),
    "resources": ("[TARGET]", "list the resources", "resources demo"),
    "templates": ("[TARGET]", "list the resource templates", "templates demo"),
    "prompts": ("[TARGET]", "list the prompts", "prompts demo --protocol 2025-11-25"),
    "call": (
        "[TARGET] TOOL [KEY=VALUE ...]",
        "call a tool (values parsed against its input schema)",
        "call demo add a=1 b=2\n  snodo call demo echo text='hello there' --json\n"
        "  snodo call demo slow_count --args '{\"n\": 3}'\n"
        '  echo \'{"text": "hi"}\' | snodo call demo echo --args -',
    ),
    "read": ("[TARGET] URI", "read a resource", "read demo notes://welcome"),
    "prompt": ("[TARGET] NAME [KEY=VALUE ...]", "get a prompt", "prompt demo review name=welcome"),
    "listen": (
        "[TARGET]",
        "print list-changed and resource-updated events until interrupted",
        "listen demo --tools --resource notes://welcome\n"
        "  snodo listen demo --tools --count 1 --for 60 --json",
    ),
    "ping": (
        "[TARGET]",
        "check that the server answers",
        "ping demo\n  snodo ping --http http://127.0.0.1:8000/mcp --timeout 2",
    ),
}


def _number(kind: Callable[[str], float], what: str) -> Callable[[str], Any]:
    def convert(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None
        if not value > 0 or value == float("inf"):
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return value

    return convert


def _common(parser: argparse.ArgumentParser, *, target: bool = True) -> None:
    output = parser.add_argument_group("output")
    output.add_argument("--json", action="store_true", help="print the raw result as JSON")
    output.add_argument("--debug", action="store_true", help="log to stderr; tracebacks")
    if not target:
        return
    group = parser.add_argument_group("target")
    group.add_argument("--config", metavar="FILE", help="the mcpServers config to read")
    group.add_argument("--stdio", metavar="COMMAND", help='a stdio server: "COMMAND ARGS..."')
    group.add_argument("--env", action="append", default=[], metavar="K=V", help="with --stdio")
    group.add_argument("--cwd", metavar="DIR", help="with --stdio: the server's directory")
    group.add_argument("--http", metavar="URL", help="a Streamable HTTP server")
    group.add_argument(
        "--header", action="append", default=[], metavar='"K: V"', help="with --http"
    )
    group.add_argument(
        "--bearer-env", metavar="VAR", help="with --http: send the token in $VAR as a bearer"
    )
    group.add_argument(
        "--protocol",
        action="append",
        default=[],
        metavar="V",
        help="allowed protocol versions (repeatable or a comma list; 2025-03-26 and "
        "2024-11-05 only when named)",
    )
    group.add_argument(
        "--timeout",
        type=_number(float, "a number of seconds"),
        metavar="S",
        help="seconds per request (default 30)",
    )


def _interactive(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("input requests")
    group.add_argument(
        "--sampling-command",
        metavar="CMD",
        help="answer sampling requests with CMD (refused without it)",
    )
    group.add_argument("--open", action="store_true", help="open URL elicitations in a browser")


class _Parser(argparse.ArgumentParser):
    """argparse's errors as the command's own: one ``snodo: error:`` line, status 2."""

    def error(self, message: str) -> NoReturn:
        _fail(f"{message} ({self.prog} --help)")
        raise SystemExit(EXIT_USAGE)


def _parsers() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    from snodo import __version__

    top = _Parser(
        prog=PROG,
        description="Poke at any MCP server from a terminal or a script.",
        epilog=_TOP_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    top.add_argument("--version", action="version", version=f"snodo {__version__}")
    commands = top.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    parsers: dict[str, argparse.ArgumentParser] = {}
    for name, (metavar, help_text, example) in _COMMANDS.items():
        sub = commands.add_parser(
            name,
            help=help_text,
            description=help_text[0].upper() + help_text[1:] + ".",
            usage=f"{PROG} {name} {metavar} [options]",
            epilog=f"examples:\n  snodo {example}\n\n{_TARGET_NOTE}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        sub.add_argument(
            "words", nargs="*", metavar=metavar.replace(" ", "_"), help=argparse.SUPPRESS
        )
        _common(sub)
        parsers[name] = sub
    _interactive(parsers["call"])
    _interactive(parsers["prompt"])
    _interactive(parsers["read"])
    for name in ("call", "prompt"):
        parsers[name].add_argument(
            "--args", metavar="JSON", help="the arguments as a JSON object; - reads stdin"
        )
    listen = parsers["listen"].add_argument_group("events")
    listen.add_argument("--tools", action="store_true", help="tools/list_changed")
    listen.add_argument("--prompts", action="store_true", help="prompts/list_changed")
    listen.add_argument("--resources", action="store_true", help="resources/list_changed")
    listen.add_argument(
        "--resource", action="append", default=[], metavar="URI", help="updates of URI"
    )
    listen.add_argument(
        "--count", type=_number(int, "an integer"), metavar="N", help="stop after N events"
    )
    listen.add_argument(
        "--for",
        dest="duration",
        type=_number(float, "seconds"),
        metavar="S",
        help="stop after S seconds",
    )
    status = commands.add_parser(
        "status",
        help="every configured server's state, version, tools and last error",
        description="Start every server of the config (as snodo.Fleet does) and print their "
        "status. Exit status 3 when any failed.",
        epilog="examples:\n  snodo status\n  snodo status --config servers.json --json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    status.add_argument("--config", metavar="FILE", help="the mcpServers config to read")
    _common(status, target=False)
    parsers["status"] = status
    parsers["serve"] = commands.add_parser(
        "serve",
        help="serve a snodo Runtime (python -m snodo.server)",
        add_help=False,
        prefix_chars="\0",
    )
    return top, parsers


def _split(argv: list[str]) -> tuple[int | None, str | None]:
    """The index and name of the command word: the first word that is not an option."""
    for index, word in enumerate(argv):
        if not word.startswith("-"):
            return index, word
        if word == "--":
            break
    return None, None


def _fail(message: str) -> None:
    print(f"{PROG}: error: {' '.join(message.split())}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``snodo`` command line; the exit status."""
    words = list(sys.argv[1:] if argv is None else argv)
    index, command = _split(words)
    if command == "serve" and index is not None:
        from snodo.server.__main__ import main as serve

        try:
            return serve(words[index + 1 :], prog=f"{PROG} serve")
        except SystemExit as exit:  # argparse's --help and usage errors
            return exit.code if isinstance(exit.code, int) else EXIT_USAGE
    top, parsers = _parsers()
    try:
        if command is None or command not in parsers:
            top.parse_args(words)  # --help, --version, argparse's own errors
            _fail("a command is required (snodo --help)")
            return EXIT_USAGE
        assert index is not None
        parser = parsers[command]
        args = parser.parse_intermixed_args(words[:index] + words[index + 1 :])
    except SystemExit as exit:
        return exit.code if isinstance(exit.code, int) else EXIT_USAGE
    args.command = command
    return _run(args)


def _run(args: argparse.Namespace) -> int:
    """Carry the parsed command out, mapping errors to exit statuses and one-line messages."""
    import logging

    library = logging.getLogger(PROG)  # the parent of every logger the library names
    if args.debug:
        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)
        return _outcome(args)
    # snodo's warnings (a fleet server that fails, say) are not the command's output.
    quiet = logging.NullHandler()
    library.addHandler(quiet)
    propagate, library.propagate = library.propagate, False
    try:
        return _outcome(args)
    finally:  # as it was (main() may run in a process that goes on)
        library.removeHandler(quiet)
        library.propagate = propagate


def _outcome(args: argparse.Namespace) -> int:
    """The command's exit status; every error as one ``snodo: error:`` line."""
    from snodo.cli.terminal import Interrupted

    try:
        status = _HANDLERS[args.command](args)
        sys.stdout.flush()
        return status
    except BrokenPipeError:
        # stdout's reader went away (``snodo tools x | head -1``): stop quietly.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except UsageError as error:
        _fail(f"{error} (snodo {args.command} --help)")
        return EXIT_USAGE
    except (Interrupted, KeyboardInterrupt):
        _traceback(args)
        print(file=sys.stderr)  # past the ^C the terminal echoed
        _fail("interrupted")
        return EXIT_INTERRUPTED
    except Exception as error:
        from snodo.protocol.errors import McpError

        _traceback(args)
        if isinstance(error, McpError):
            _fail(f"{error.message} ({error.code})")
        elif isinstance(error, OSError):
            _fail(str(error))
        else:
            hint = "" if args.debug else " (--debug shows the traceback)"
            _fail(f"internal error: {type(error).__name__}: {error}{hint}")
        return EXIT_CONNECTION


def _traceback(args: argparse.Namespace) -> None:
    if args.debug:
        import traceback

        traceback.print_exc()


# -- the commands ----------------------------------------------------------------------------


def _target_words(args: argparse.Namespace, needed: int, what: str) -> tuple[str | None, list[str]]:
    """The TARGET word (None with --stdio/--http) and the words after it; ``needed`` of those
    are required (``what`` names them)."""
    words: list[str] = list(args.words)
    name = None if args.stdio or args.http else (words.pop(0) if words else None)
    if name is None and not (args.stdio or args.http):
        raise UsageError("no server: give a server name from the config, --stdio or --http")
    if len(words) < needed:
        raise UsageError(f"missing {what}")
    return name, words


def _resolve(args: argparse.Namespace, name: str | None) -> Resolved:
    from snodo.cli.targets import TargetOptions, resolve

    return resolve(
        TargetOptions(
            name=name,
            config=args.config,
            stdio=args.stdio,
            http=args.http,
            env=args.env,
            cwd=args.cwd,
            headers=args.header,
            bearer_env=args.bearer_env,
            protocol=args.protocol,
            timeout=args.timeout,
        )
    )


def _connect(args: argparse.Namespace, name: str | None, **extra: Any) -> Client:
    return _connect_to(_resolve(args, name), **extra)


def _connect_to(resolved: Resolved, **extra: Any) -> Client:
    """``snodo.connect`` to a resolved target, ``extra`` over its options."""
    from snodo.connections import connect

    return connect(resolved.target, **{**resolved.options, **extra})


def _stdout_terminal() -> tuple[int | None, bool]:
    """The table width (None: not a terminal) and whether to colour stdout."""
    import os
    import shutil

    if not sys.stdout.isatty():
        return None, False
    return shutil.get_terminal_size().columns, not os.environ.get("NO_COLOR")


def _terminal_options(args: argparse.Namespace) -> TerminalOptions:
    from snodo.cli.terminal import terminal_options

    return terminal_options(sampling_command=args.sampling_command, open_browser=args.open)


def _json(value: Any) -> None:
    import json

    print(json.dumps(value, indent=2, ensure_ascii=False))


def _no_extra(words: list[str]) -> None:
    if words:
        raise UsageError(f"unexpected argument {words[0]!r}")


def _info(args: argparse.Namespace) -> int:
    from snodo.cli import render

    name, words = _target_words(args, 0, "")
    _no_extra(words)
    with _connect(args, name) as client:
        session = client.session
        if session is not None:
            result = render.info_result(
                client.version, session.server_info, session.capabilities, session.instructions
            )
        else:
            found = client.discover()
            meta = found.get("_meta") or {}
            result = render.info_result(
                client.version,
                meta.get(render.SERVER_INFO_META),
                found.get("capabilities"),
                found.get("instructions"),
            )
    if args.json:
        _json(result)
    else:
        print(render.info(result, color=_stdout_terminal()[1]))
    return EXIT_OK


_LISTS = {
    "tools": ("list_tools", "tools"),
    "resources": ("list_resources", "resources"),
    "templates": ("list_resource_templates", "resourceTemplates"),
    "prompts": ("list_prompts", "prompts"),
}


def _list(args: argparse.Namespace) -> int:
    from snodo.cli import render

    name, words = _target_words(args, 0, "")
    _no_extra(words)
    method, key = _LISTS[args.command]
    with _connect(args, name) as client:
        items = getattr(client, method)()
    if args.json:
        _json({key: items})
    else:
        width, color = _stdout_terminal()
        text = render.listing(args.command, items, width=width, color=color)
        if text:
            print(text)
    return EXIT_OK


def _base_arguments(args: argparse.Namespace) -> dict[str, Any] | None:
    from snodo.cli.arguments import json_object

    if args.args is None:
        return None
    if args.args == "-":
        return json_object(sys.stdin.read(), "--args - (stdin)")
    return json_object(args.args)


def _find(items: list[dict[str, Any]], name: str, what: str, label: str) -> dict[str, Any]:
    for item in items:
        if item.get("name") == name:
            return item
    names = sorted(str(item.get("name")) for item in items)
    shown = ", ".join(names[:12]) + (", ..." if len(names) > 12 else "")
    raise UsageError(f"no {what} {name!r} on {label} ({what}s: {shown or 'none'})")


def _call(args: argparse.Namespace) -> int:
    from snodo.cli import render, terminal
    from snodo.cli.arguments import tool_arguments

    name, words = _target_words(args, 1, "TOOL")
    tool_name, pairs = words[0], words[1:]
    base = _base_arguments(args)
    resolved = _resolve(args, name)
    options = _terminal_options(args)
    with _connect_to(resolved, input_handlers=terminal.input_handlers(options)) as client:
        tool = _find(client.list_tools(), tool_name, "tool", resolved.label or "the server")
        arguments = tool_arguments(pairs, tool.get("inputSchema"), base)
        progress = terminal.progress_display(options)
        try:
            result = terminal.interruptible(
                lambda: client.call_tool(tool, arguments, progress=progress)
            )
        finally:
            progress.finish()
    result = _complete(result)
    if args.json:
        _json(result)
    else:
        text = render.call_result(result, color=_stdout_terminal()[1])
        if text:
            print(text)
    if result.get("isError") is True:
        _fail(f"tool {tool_name!r} returned an error (isError)")
        return EXIT_TOOL_ERROR
    return EXIT_OK


def _complete(result: dict[str, Any] | InputRequired) -> dict[str, Any]:
    """The result, or an error when the server asked for input no handler answers."""
    from snodo.protocol.errors import McpError
    from snodo.protocol.results import InputRequired

    if not isinstance(result, InputRequired):
        return result
    kinds = sorted({str(r.get("method")) for r in result.input_requests.values()})
    raise McpError(
        -32000, f"the server asked for input the command cannot give: {', '.join(kinds)}"
    )


def _read(args: argparse.Namespace) -> int:
    from snodo.cli import render, terminal

    name, words = _target_words(args, 1, "URI")
    uri = words[0]
    _no_extra(words[1:])
    options = _terminal_options(args)
    with _connect(args, name, input_handlers=terminal.input_handlers(options)) as client:
        result = _complete(terminal.interruptible(lambda: client.read_resource(uri)))
    if args.json:
        _json(result)
    else:
        print(render.read_result(result, color=_stdout_terminal()[1]))
    return EXIT_OK


def _prompt(args: argparse.Namespace) -> int:
    from snodo.cli import render, terminal
    from snodo.cli.arguments import prompt_arguments

    name, words = _target_words(args, 1, "NAME")
    prompt_name, pairs = words[0], words[1:]
    base = _base_arguments(args)
    resolved = _resolve(args, name)
    options = _terminal_options(args)
    with _connect_to(resolved, input_handlers=terminal.input_handlers(options)) as client:
        prompt = _find(client.list_prompts(), prompt_name, "prompt", resolved.label)
        arguments = prompt_arguments(pairs, prompt.get("arguments"), base)
        result = _complete(
            terminal.interruptible(lambda: client.get_prompt(prompt_name, arguments))
        )
    if args.json:
        _json(result)
    else:
        print(render.prompt_result(result, color=_stdout_terminal()[1]))
    return EXIT_OK


def _listen(args: argparse.Namespace) -> int:
    import json
    import time

    from snodo.cli import render
    from snodo.protocol.errors import REQUEST_TIMEOUT, McpError
    from snodo.protocol.subscriptions import Closed, Dropped, Gap, Notification

    name, words = _target_words(args, 0, "")
    _no_extra(words)
    wanted: dict[str, Any] = {}
    for flag, key in (
        ("tools", "toolsListChanged"),
        ("prompts", "promptsListChanged"),
        ("resources", "resourcesListChanged"),
    ):
        if getattr(args, flag):
            wanted[key] = True
    if args.resource:
        wanted["resourceSubscriptions"] = list(args.resource)
    if not wanted:
        raise UsageError(
            "nothing to listen to: give --tools, --prompts, --resources or --resource URI"
        )
    deadline = None if args.duration is None else time.monotonic() + args.duration
    seen = 0
    with _connect(args, name) as client:
        sub = client.listen(wanted)
        print(f"{PROG}: listening ({json.dumps(sub.accepted)})", file=sys.stderr, flush=True)
        try:
            while args.count is None or seen < args.count:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    break
                # In slices: when the kernel hands the Ctrl-C to another thread, CPython's main
                # thread runs its handler only once it next takes the GIL; a lock wait without a
                # timeout would never end (each slice's end takes it, bpo-40010).
                wait = LISTEN_SLICE if remaining is None else min(remaining, LISTEN_SLICE)
                try:
                    event = sub.next(timeout=wait)
                except McpError as error:
                    if error.code == REQUEST_TIMEOUT:
                        continue  # the demand stays outstanding: no event is lost
                    raise
                if isinstance(event, Notification):
                    seen += 1
                    if args.json:
                        line = json.dumps({"method": event.method, "params": event.params})
                    else:
                        line = render.event_line(event.method, event.params)
                    print(line, flush=True)
                elif isinstance(event, Dropped):
                    _fail(f"{event.n} events dropped (not read fast enough)")
                elif isinstance(event, Gap):
                    _fail("the connection restarted: events may have been lost")
                elif isinstance(event, Closed):
                    if event.reason is not None:
                        raise event.reason
                    break
        finally:
            sub.close()
    return EXIT_OK


def _ping(args: argparse.Namespace) -> int:
    import time

    name, words = _target_words(args, 0, "")
    _no_extra(words)
    with _connect(args, name) as client:
        began = time.monotonic()
        if client.session is not None:
            client.ping()
        else:
            client.discover(bypass_cache=True)  # 2026-07-28 has no ping
        seconds = time.monotonic() - began
        version = client.version
    if args.json:
        _json({"protocolVersion": version, "seconds": seconds})
    else:
        print(f"ok: answered in {seconds * 1000:.1f} ms ({version})")
    return EXIT_OK


def _status(args: argparse.Namespace) -> int:
    from snodo.cli.targets import find_config, load_config
    from snodo.fleet import Fleet

    path = find_config(args.config)
    config = load_config(path)
    try:
        fleet = Fleet(config)
    except ValueError as error:
        raise UsageError(f"{path}: {error}") from None
    with fleet:
        status = fleet.status()
    if args.json:
        _json(status)
    else:
        print(str(status))
    failed = [name for name, entry in status.items() if entry["state"] == "failed"]
    return EXIT_CONNECTION if failed else EXIT_OK


_HANDLERS: dict[str, Callable[[argparse.Namespace], int]] = {
    "info": _info,
    "tools": _list,
    "resources": _list,
    "templates": _list,
    "prompts": _list,
    "call": _call,
    "read": _read,
    "prompt": _prompt,
    "listen": _listen,
    "ping": _ping,
    "status": _status,
}
