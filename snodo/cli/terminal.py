"""The ``snodo`` command at a terminal: the progress bar, input requests answered by a person,
and Ctrl-C cancelling a call (docs/decisions/0044-cli-terminal.md).

The rules are pure functions (``progress_bar``, ``progress_text``, ``parse_answer``,
``field_prompt``, ``sampling_result``); the handlers and the display only read and write the
terminal around them. No dependency beyond the standard library; ``NO_COLOR`` is honoured.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, Any, Final, TypeVar

__all__ = [
    "SAMPLING_TIMEOUT",
    "Interrupted",
    "ProgressDisplay",
    "TerminalOptions",
    "ask_form",
    "ask_url",
    "choices",
    "field_prompt",
    "input_handlers",
    "interruptible",
    "parse_answer",
    "progress_bar",
    "progress_display",
    "progress_text",
    "run_sampling_command",
    "sampling_result",
    "terminal_options",
]

T = TypeVar("T")

#: How long the ``--sampling-command`` may take to answer one request (seconds).
SAMPLING_TIMEOUT: Final = 120.0

#: What a person types at any prompt of an input request to decline it or to cancel it.
DECLINE: Final = "!decline"
CANCEL: Final = "!cancel"

_SPINNER: Final = "|/-\\"
_BAR_WIDTH: Final = 24


@dataclass(frozen=True)
class TerminalOptions:
    """How the command talks to the person in front of it."""

    interactive: bool  # stdin and stderr are terminals
    color: bool  # a terminal and no NO_COLOR
    sampling_command: str | None
    open_browser: bool  # --open (URL elicitations open a browser)


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream is not None and stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def terminal_options(*, sampling_command: str | None, open_browser: bool) -> TerminalOptions:
    """The options for this process: ``isatty()`` of stdin and stderr, and ``NO_COLOR``."""
    interactive = _isatty(sys.stdin) and _isatty(sys.stderr)
    color = _isatty(sys.stderr) and not os.environ.get("NO_COLOR")
    return TerminalOptions(interactive, color, sampling_command, open_browser)


def _width(stream: IO[str]) -> int:
    try:
        return max(20, os.get_terminal_size(stream.fileno()).columns)
    except (AttributeError, ValueError, OSError):
        return 80


def _style(text: str, code: str, color: bool) -> str:
    return f"\x1b[{code}m{text}\x1b[0m" if color else text


def _number(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"{value:g}" if isinstance(value, float) else str(value)


# -- progress ------------------------------------------------------------------------------


def progress_bar(params: Mapping[str, Any], width: int, tick: int = 0) -> str:
    """One terminal line for a ``notifications/progress`` report, at most ``width - 1`` wide:
    ``[#####.....] 3/10  30% message``, or ``- 3 message`` (a turning spinner and the count)
    when the report has no total."""
    progress = params.get("progress", 0)
    total = params.get("total")
    message = " ".join(str(params.get("message") or "").split())  # one line, whatever it holds
    if isinstance(total, (int, float)) and not isinstance(total, bool) and total > 0:
        fraction = min(max(float(progress) / float(total), 0.0), 1.0)
        filled = int(fraction * _BAR_WIDTH)
        bar = "#" * filled + "." * (_BAR_WIDTH - filled)
        line = f"[{bar}] {_number(progress)}/{_number(total)} {int(fraction * 100):3d}%"
    else:
        line = f"{_SPINNER[tick % len(_SPINNER)]} {_number(progress)}"
    if message:
        line = f"{line} {message}"
    return line[: max(width - 1, 1)]


def progress_text(params: Mapping[str, Any]) -> str:
    """One plain line for a report when stderr is not a terminal: ``progress 3/10 (30%) message``."""
    progress = params.get("progress", 0)
    total = params.get("total")
    text = f"progress {_number(progress)}"
    if isinstance(total, (int, float)) and not isinstance(total, bool) and total > 0:
        text += f"/{_number(total)} ({int(min(float(progress) / float(total), 1.0) * 100)}%)"
    message = params.get("message")
    if message:
        text += " " + " ".join(str(message).split())
    return text


class _Screen:
    """Whether a progress bar holds the current stderr line, so that a prompt starts on a new
    line (the bar and the input handlers share it)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()  # held only for a write, never across a read
        self.bar_open = False
        self.asking = 0  # input requests being answered: the bar waits until they end

    @contextmanager
    def question(self) -> Iterator[None]:
        """While a person answers an input request, progress reports are not drawn."""
        with self.lock:
            self.asking += 1
        try:
            yield
        finally:
            with self.lock:
                self.asking -= 1

    def break_line(self, stream: IO[str]) -> None:
        with self.lock:
            if self.bar_open:
                stream.write("\n")
                stream.flush()
                self.bar_open = False


_screen: Final = _Screen()


class ProgressDisplay:
    """snodo's ``progress=`` callback: a bar redrawn in place on a terminal, one plain line per
    report otherwise; ``finish()`` ends the bar's line once the call has ended."""

    def __init__(self, stream: IO[str], *, terminal: bool, color: bool = False) -> None:
        self._stream = stream
        self._terminal = terminal
        self._color = color
        self._ticks = 0
        self._drawn = 0  # the width of the line last drawn (to blank what a shorter one leaves)
        self._finished = False

    def __call__(self, params: dict[str, Any]) -> None:
        with _screen.lock:
            if self._finished or (self._terminal and _screen.asking):
                return
            try:
                if not self._terminal:
                    self._stream.write(progress_text(params) + "\n")
                    self._stream.flush()
                    return
                line = progress_bar(params, _width(self._stream), self._ticks)
                self._ticks += 1
                pad = " " * max(self._drawn - len(line), 0)
                self._drawn = len(line)
                shown = _style(line, "36", self._color) if self._color else line
                self._stream.write("\r" + shown + pad)
                self._stream.flush()
                _screen.bar_open = True
            except (OSError, ValueError):
                pass  # stderr went away: the call goes on without its display

    def finish(self) -> None:
        """End the bar's line (once; later reports are not drawn)."""
        with _screen.lock:
            if self._finished:
                return
            self._finished = True
            if self._terminal and _screen.bar_open:
                try:
                    _screen.break_line(self._stream)
                except (OSError, ValueError):
                    pass
            _screen.bar_open = False


def progress_display(options: TerminalOptions) -> ProgressDisplay:
    """The display for one call: a bar when stderr is a terminal."""
    return ProgressDisplay(
        sys.stderr, terminal=options.interactive or _isatty(sys.stderr), color=options.color
    )


# -- form elicitations ---------------------------------------------------------------------


def choices(schema: Mapping[str, Any]) -> list[tuple[Any, str]] | None:
    """The (value, label) choices of an enum field (``enum`` with ``enumNames``, ``oneOf`` /
    ``anyOf`` of ``const`` with ``title``, or those under ``items`` for a multi-select), or None."""
    source: Mapping[str, Any] = schema
    if schema.get("type") == "array" and isinstance(schema.get("items"), Mapping):
        source = schema["items"]
    values = source.get("enum")
    if isinstance(values, list):
        names = source.get("enumNames")
        labels = names if isinstance(names, list) and len(names) == len(values) else values
        return [(v, str(label)) for v, label in zip(values, labels, strict=False)]
    for key in ("oneOf", "anyOf"):
        options = source.get(key)
        if isinstance(options, list) and all(
            isinstance(o, Mapping) and "const" in o for o in options
        ):
            return [(o["const"], str(o.get("title", o["const"]))) for o in options]
    return None


def _choose(text: str, options: list[tuple[Any, str]]) -> Any:
    """One choice by its number (1-based), its value or its label."""
    text = text.strip()
    if text.isdigit() and 1 <= int(text) <= len(options):
        return options[int(text) - 1][0]
    for value, label in options:
        if text == str(value) or text == label:
            return value
    raise ValueError(f"choose a number from 1 to {len(options)} or one of the values")


_TRUE: Final = frozenset({"y", "yes", "true", "1", "on"})
_FALSE: Final = frozenset({"n", "no", "false", "0", "off"})


def parse_answer(text: str, schema: Mapping[str, Any]) -> Any:
    """The value of one field from what the person typed (not empty), typed by ``schema``;
    ValueError with what is wrong when it does not fit."""
    kind = schema.get("type")
    options = choices(schema)
    if kind == "array":
        parts = [p for p in (s.strip() for s in text.split(",")) if p]
        values = [_choose(p, options) for p in parts] if options else parts
        low, high = schema.get("minItems"), schema.get("maxItems")
        if isinstance(low, int) and len(values) < low:
            raise ValueError(f"choose at least {low}")
        if isinstance(high, int) and len(values) > high:
            raise ValueError(f"choose at most {high}")
        return values
    if options is not None:
        return _choose(text, options)
    if kind == "boolean":
        word = text.strip().lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
        raise ValueError("answer y or n")
    if kind in ("integer", "number"):
        word = text.strip()
        try:
            value: float = int(word) if kind == "integer" else float(word)
        except ValueError:
            raise ValueError(f"not {'an integer' if kind == 'integer' else 'a number'}") from None
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError("not a finite number")
        if kind == "number" and float(value).is_integer() and "." not in word and "e" not in word:
            value = int(value)
        low, high = schema.get("minimum"), schema.get("maximum")
        if isinstance(low, (int, float)) and value < low:
            raise ValueError(f"must be at least {_number(low)}")
        if isinstance(high, (int, float)) and value > high:
            raise ValueError(f"must be at most {_number(high)}")
        return value
    low, high = schema.get("minLength"), schema.get("maxLength")
    if isinstance(low, int) and len(text) < low:
        raise ValueError(f"at least {low} characters")
    if isinstance(high, int) and len(text) > high:
        raise ValueError(f"at most {high} characters")
    return text


def _default_text(schema: Mapping[str, Any]) -> str | None:
    if "default" not in schema:
        return None
    default = schema["default"]
    if isinstance(default, bool):
        return "y" if default else "n"
    if isinstance(default, list):
        return ",".join(str(v) for v in default)
    return _number(default) if isinstance(default, (int, float)) else str(default)


def field_prompt(name: str, schema: Mapping[str, Any], *, required: bool) -> list[str]:
    """The lines that ask for one field: its title, description, type, choices and default;
    the last line is the prompt itself."""
    title = str(schema.get("title") or name)
    kind = schema.get("type", "string")
    options = choices(schema)
    if kind == "array":
        kind_text = "one or more, comma-separated"
    elif options is not None:
        kind_text = "choose one"
    elif kind == "boolean":
        kind_text = "y/n"
    else:
        kind_text = str(kind)
        if schema.get("format"):
            kind_text += f", {schema['format']}"
    head = f"{title} ({kind_text}{', required' if required else ''})"
    lines = [head]
    description = schema.get("description")
    if description:
        lines.append(f"  {' '.join(str(description).split())}")
    if options is not None:
        lines.extend(f"  {i}) {label}" for i, (_, label) in enumerate(options, 1))
    default = _default_text(schema)
    lines.append(f"{name}{f' [{default}]' if default is not None else ''}: ")
    return lines


def ask_form(
    params: Mapping[str, Any],
    read: Callable[[str], str],
    write: Callable[[str], None],
) -> dict[str, Any]:
    """Answer a form elicitation by asking for each field of ``requestedSchema`` in turn.

    ``read(prompt)`` returns a line (EOFError at end of input); ``write`` prints. An empty
    answer takes the default (or skips an optional field); a wrong one is asked again;
    ``!decline`` or end of input declines, ``!cancel`` cancels.
    """
    write(f"{params.get('message', 'The server asks for input.')}\n")
    write(f"(Enter takes the [default]; {DECLINE} or Ctrl-D declines, {CANCEL} cancels)\n")
    schema = params.get("requestedSchema")
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    required = schema.get("required", []) if isinstance(schema, Mapping) else []
    if not isinstance(properties, Mapping) or not properties:
        return _confirm(read, "Accept? [y/n]: ", {"action": "accept", "content": {}})
    content: dict[str, Any] = {}
    for name, field in properties.items():
        field = field if isinstance(field, Mapping) else {}
        lines = field_prompt(name, field, required=name in required)
        for line in lines[:-1]:
            write(line + "\n")
        while True:
            try:
                text = read(lines[-1])
            except EOFError:
                write("\n")
                return {"action": "decline"}
            word = text.strip()
            if word == DECLINE:
                return {"action": "decline"}
            if word == CANCEL:
                return {"action": "cancel"}
            if not word:
                if "default" in field:
                    content[name] = field["default"]
                elif name in required:
                    write("  a value is required\n")
                    continue
                break
            try:
                content[name] = parse_answer(text, field)
            except ValueError as error:
                write(f"  {error}; try again\n")
                continue
            break
    return {"action": "accept", "content": content}


def _confirm(read: Callable[[str], str], prompt: str, accept: dict[str, Any]) -> dict[str, Any]:
    while True:
        try:
            word = read(prompt).strip().lower()
        except EOFError:
            return {"action": "decline"}
        if word == CANCEL:
            return {"action": "cancel"}
        if word in _TRUE:
            return accept
        if word in _FALSE or word == DECLINE:
            return {"action": "decline"}


def ask_url(
    params: Mapping[str, Any],
    read: Callable[[str], str],
    write: Callable[[str], None],
    open_url: Callable[[str], Any] | None,
) -> dict[str, Any]:
    """Answer a URL elicitation: print the URL and the message, open it with ``open_url`` when
    given, and ask whether to go on (accept) or not (decline)."""
    url = str(params.get("url", ""))
    write(f"{params.get('message', 'The server asks you to visit a URL.')}\n  {url}\n")
    if open_url is not None:
        try:
            open_url(url)
        except Exception as error:  # no browser: the URL is printed anyway
            write(f"  (could not open a browser: {error})\n")
    return _confirm(
        read,
        f"Continue once done? [y/n] ({CANCEL} cancels): ",
        {"action": "accept"},
    )


class _LineReader:
    """Lines from stdin read with ``select`` and ``os.read``, never blocked in one read: a
    session-era handler runs on a pool thread, and closing the connection (after Ctrl-C) stops
    it with an exception that is only delivered while it runs Python code."""

    def __init__(self) -> None:
        self._held = b""

    def line(self, fd: int) -> str:
        import select

        while b"\n" not in self._held:
            ready, _, _ = select.select([fd], [], [], 0.1)
            if not ready:
                continue
            chunk = os.read(fd, 4096)
            if not chunk:
                held, self._held = self._held, b""
                if held:
                    return held.decode(sys.stdin.encoding or "utf-8", errors="replace")
                raise EOFError
            self._held += chunk
        line, _, self._held = self._held.partition(b"\n")
        return line.decode(sys.stdin.encoding or "utf-8", errors="replace").rstrip("\r")


_reader: Final = _LineReader()


def _terminal_read(prompt: str) -> str:
    """A line from the terminal with ``prompt`` on stderr (stdout may be a pipe)."""
    _screen.break_line(sys.stderr)
    sys.stderr.write(prompt)
    sys.stderr.flush()
    return _reader.line(sys.stdin.fileno())


def _terminal_write(text: str) -> None:
    _screen.break_line(sys.stderr)
    sys.stderr.write(text)
    sys.stderr.flush()


def _form_handler(options: TerminalOptions) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def form(params: dict[str, Any]) -> dict[str, Any]:
        if not options.interactive:
            message = " ".join(str(params.get("message", "")).split())
            _terminal_write(
                f"snodo: declined a form request (stdin is not a terminal): {message}\n"
            )
            return {"action": "decline"}
        with _screen.question():
            return ask_form(params, _terminal_read, _terminal_write)

    return form


def _url_handler(options: TerminalOptions) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def url(params: dict[str, Any]) -> dict[str, Any]:
        opener: Callable[[str], Any] | None = None
        if options.open_browser:
            import webbrowser

            opener = webbrowser.open
        if not options.interactive:
            _terminal_write(
                f"snodo: declined a URL request (stdin is not a terminal): "
                f"{' '.join(str(params.get('message', '')).split())} {params.get('url', '')}\n"
            )
            return {"action": "decline"}
        with _screen.question():
            return ask_url(params, _terminal_read, _terminal_write, opener)

    return url


# -- sampling ------------------------------------------------------------------------------


def sampling_result(stdout: str, model: str) -> dict[str, Any]:
    """The ``sampling/createMessage`` result from the sampling command's output: a JSON object
    with ``role`` and ``content`` is the whole result (``model`` filled in when missing);
    anything else is the text of the model's answer."""
    text = stdout.strip()
    if text.startswith("{"):
        import json

        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict) and "role" in parsed and "content" in parsed:
            parsed.setdefault("model", model)
            return parsed
    return {
        "role": "assistant",
        "content": {"type": "text", "text": stdout.rstrip("\r\n")},
        "model": model,
        "stopReason": "endTurn",
    }


def run_sampling_command(
    command: str, params: Mapping[str, Any], timeout: float = SAMPLING_TIMEOUT
) -> dict[str, Any]:
    """Run ``command`` (shlex-split, no shell) with ``params`` as JSON on stdin, within
    ``timeout`` seconds; its stdout is the answer (``sampling_result``). A failure is a
    ``snodo.HandlerError`` naming it."""
    import json
    import shlex
    import subprocess

    from snodo.protocol.errors import HandlerError

    argv = shlex.split(command)
    if not argv:
        raise HandlerError("the sampling command is empty")
    try:
        done = subprocess.run(
            argv,
            input=json.dumps(params),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError:
        raise HandlerError(f"the sampling command was not found: {argv[0]}") from None
    except subprocess.TimeoutExpired:
        raise HandlerError(f"the sampling command did not answer within {timeout:g} s") from None
    except OSError as error:
        raise HandlerError(f"the sampling command could not start: {error}") from None
    if done.returncode != 0:
        tail = (done.stderr or "").strip().splitlines()
        why = f": {tail[-1]}" if tail else ""
        raise HandlerError(f"the sampling command exited with status {done.returncode}{why}")
    return sampling_result(done.stdout, os.path.basename(argv[0]))


def _sampling_handler(command: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def sampling(params: dict[str, Any]) -> dict[str, Any]:
        return run_sampling_command(command, params)

    return sampling


def input_handlers(
    options: TerminalOptions,
) -> dict[str, Callable[[dict[str, Any]], dict[str, Any]]]:
    """snodo's ``input_handlers=``: ``form`` and ``url`` answered at the terminal, and
    ``sampling`` only with a sampling command (without one the client declares no sampling,
    so a server does not ask, and one that asks anyway is refused by the library)."""
    handlers = {"form": _form_handler(options), "url": _url_handler(options)}
    if options.sampling_command:
        handlers["sampling"] = _sampling_handler(options.sampling_command)
    return handlers


# -- Ctrl-C --------------------------------------------------------------------------------


class Interrupted(Exception):
    """The person pressed Ctrl-C: the call was cancelled (the command exits 130)."""


def interruptible(run: Callable[[], T]) -> T:
    """Run a blocking client call so that Ctrl-C cancels it and raises ``Interrupted``.

    The KeyboardInterrupt reaches the transport waiting in this thread, which tells the
    server (``notifications/cancelled``) before it lets the interrupt go on.
    """
    try:
        return run()
    except KeyboardInterrupt:
        raise Interrupted("interrupted") from None
