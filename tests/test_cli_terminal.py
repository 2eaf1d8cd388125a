"""The ``snodo`` command at a terminal (issue 20): the progress bar, input requests answered by a
person, Ctrl-C cancelling a call (docs/decisions/0044-cli-terminal.md).

The pure rules are tested directly; the terminal behaviour is tested as a person would use it:
the installed console script runs in a ``tmux`` pane (its own server, ``-L``), keys are sent with
``send-keys`` and the screen is read with ``capture-pane``. The server is
``tests/support/cli_servers.py`` on stdio (and HTTP for one Ctrl-C test).
"""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from snodo.cli import terminal
from snodo.cli.terminal import (
    Interrupted,
    ProgressDisplay,
    TerminalOptions,
    ask_form,
    ask_url,
    choices,
    field_prompt,
    input_handlers,
    interruptible,
    parse_answer,
    progress_bar,
    progress_text,
    run_sampling_command,
    sampling_result,
)
from snodo.protocol.errors import HandlerError
from tests.support.cli_servers import FORM_SCHEMA
from tests.support.http_fault_server import TeeProxy
from tests.support.system_tools import ensure_program

ROOT = Path(__file__).resolve().parents[1]
SNODO = Path(sys.executable).parent / "snodo"
SERVER = f"{shlex.quote(sys.executable)} -m snodo.server tests.support.cli_servers:build"
SERVER_HTTP = (
    sys.executable,
    "-m",
    "snodo.server",
    "--http",
    "--port",
    "0",
    "tests.support.cli_servers:build",
)
#: Runs the rest of its command line with SIGINT at its default: a shell's background job (the
#: way scripts/test runs a suite) inherits SIGINT ignored, and Python then never raises
#: KeyboardInterrupt.
SIGINT_DEFAULT = [
    sys.executable,
    "-I",
    "-S",
    "-c",
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.argv[1], sys.argv[1:])",
]
#: Runs a command in a tmux pane and writes its exit status to a file: ``RUN STATUS STDOUT
#: ARGV...`` (STDOUT "-": the terminal). Ctrl-C reaches the command (the wrapper only waits).
RUN = [
    sys.executable,
    "-I",
    "-S",
    "-c",
    "import signal, subprocess, sys\n"
    "signal.signal(signal.SIGINT, lambda *_: None)\n"
    "status, out, argv = sys.argv[1], sys.argv[2], sys.argv[3:]\n"
    "sink = None if out == '-' else open(out, 'w')\n"
    "code = subprocess.call(argv, stdout=sink)\n"
    "open(status + '.part', 'w').write(f'{code}\\n')\n"
    "__import__('os').replace(status + '.part', status)\n",
]
WAIT = 20.0  # seconds: the longest any wait below takes before failing


def _options(**changes: Any) -> TerminalOptions:
    base = {"interactive": True, "color": False, "sampling_command": None, "open_browser": False}
    return TerminalOptions(**{**base, **changes})


def _script(*answers: str | type[EOFError]) -> tuple[Callable[[str], str], list[str]]:
    """A ``read`` that answers in turn (EOFError ends the input) and records the prompts."""
    prompts: list[str] = []
    queue = list(answers)

    def read(prompt: str) -> str:
        prompts.append(prompt)
        answer = queue.pop(0)
        if answer is EOFError:
            raise EOFError
        assert isinstance(answer, str)
        return answer

    return read, prompts


# -- the progress line ---------------------------------------------------------------------


def test_bar_with_a_total_shows_count_percent_and_message() -> None:
    line = progress_bar({"progress": 3, "total": 10, "message": "step 3"}, 80)
    assert re.fullmatch(r"\[#{7}\.{17}\] 3/10 +30% step 3", line), line


def test_bar_is_full_at_the_total_and_never_past_it() -> None:
    assert progress_bar({"progress": 12, "total": 10}, 80).startswith(
        "[" + "#" * 24 + "] 12/10 100%"
    )
    assert progress_bar({"progress": 2.5, "total": 5.0}, 80).endswith("2.5/5  50%")


def test_without_a_total_a_spinner_turns_beside_the_count() -> None:
    lines = [progress_bar({"progress": 7, "message": "working"}, 80, tick) for tick in range(4)]
    assert [line[0] for line in lines] == ["|", "/", "-", "\\"]
    assert all(line[1:] == " 7 working" for line in lines)


def test_bar_is_cut_to_the_terminal_width_and_stays_on_one_line() -> None:
    line = progress_bar({"progress": 1, "total": 2, "message": "a\nlong\tmessage " * 10}, 40)
    assert len(line) == 39
    assert "\n" not in line and "\t" not in line


def test_plain_lines_when_not_a_terminal() -> None:
    assert progress_text({"progress": 1, "total": 3, "message": "step 1"}) == (
        "progress 1/3 (33%) step 1"
    )
    assert progress_text({"progress": 4}) == "progress 4"


def test_display_redraws_in_place_and_finish_ends_the_line_once() -> None:
    out = io.StringIO()
    display = ProgressDisplay(out, terminal=True)
    display({"progress": 1, "total": 2, "message": "a longer message"})
    display({"progress": 2, "total": 2})
    display.finish()
    display.finish()
    display({"progress": 3, "total": 2})  # after finish: not drawn
    text = out.getvalue()
    assert text.count("\r") == 2 and text.endswith("\n") and text.count("\n") == 1
    first, second = text.strip("\n").split("\r")[1:]
    assert len(second) >= len(first)  # the shorter line blanks what the longer one left


def test_display_writes_one_line_per_report_off_a_terminal() -> None:
    out = io.StringIO()
    display = ProgressDisplay(out, terminal=False)
    display({"progress": 1, "total": 2})
    display({"progress": 2, "total": 2})
    display.finish()
    assert out.getvalue() == "progress 1/2 (50%)\nprogress 2/2 (100%)\n"


# -- form fields ---------------------------------------------------------------------------


def test_integers_and_numbers_are_checked() -> None:
    field = {"type": "integer", "minimum": 1, "maximum": 9}
    assert parse_answer(" 4 ", field) == 4
    for text, why in (("x", "not an integer"), ("1.5", "not an integer"), ("12", "at most 9")):
        with pytest.raises(ValueError, match=why):
            parse_answer(text, field)
    assert parse_answer("0.5", {"type": "number"}) == 0.5
    assert type(parse_answer("3", {"type": "number"})) is int
    with pytest.raises(ValueError, match="not a number"):
        parse_answer("half", {"type": "number"})
    with pytest.raises(ValueError, match="finite"):
        parse_answer("nan", {"type": "number"})


def test_booleans_are_yes_or_no() -> None:
    assert [parse_answer(t, {"type": "boolean"}) for t in ("y", "YES", "true", "n", "no")] == [
        True,
        True,
        True,
        False,
        False,
    ]
    with pytest.raises(ValueError, match="y or n"):
        parse_answer("maybe", {"type": "boolean"})


def test_enum_choices_by_number_value_or_label() -> None:
    field = FORM_SCHEMA["properties"]["env"]
    assert choices(field) == [
        ("dev", "Development"),
        ("staging", "Staging"),
        ("prod", "Production"),
    ]
    assert [parse_answer(t, field) for t in ("3", "staging", "Development")] == [
        "prod",
        "staging",
        "dev",
    ]
    with pytest.raises(ValueError, match="from 1 to 3"):
        parse_answer("4", field)
    titled = {"type": "string", "oneOf": [{"const": "a", "title": "Alpha"}, {"const": "b"}]}
    assert choices(titled) == [("a", "Alpha"), ("b", "b")]
    assert parse_answer("2", titled) == "b"


def test_multi_select_takes_a_comma_list_within_its_bounds() -> None:
    field = {"type": "array", "items": {"enum": ["r", "g", "b"]}, "minItems": 1, "maxItems": 2}
    assert parse_answer("1, b", field) == ["r", "b"]
    with pytest.raises(ValueError, match="at most 2"):
        parse_answer("1,2,3", field)


def test_strings_keep_what_was_typed_within_their_lengths() -> None:
    assert parse_answer(" a b ", {"type": "string"}) == " a b "
    with pytest.raises(ValueError, match="at least 3"):
        parse_answer("ab", {"type": "string", "minLength": 3})


def test_field_prompt_shows_type_description_choices_and_default() -> None:
    lines = field_prompt(
        "env", {**FORM_SCHEMA["properties"]["env"], "default": "dev"}, required=True
    )
    assert lines == [
        "env (choose one, required)",
        "  1) Development",
        "  2) Staging",
        "  3) Production",
        "env [dev]: ",
    ]
    assert field_prompt("name", FORM_SCHEMA["properties"]["name"], required=False) == [
        "Your name (string)",
        "  Who deploys",
        "name: ",
    ]
    assert field_prompt("notify", {"type": "boolean", "default": True}, required=False)[-1] == (
        "notify [y]: "
    )


# -- whole forms ---------------------------------------------------------------------------


def test_a_form_asks_each_field_again_until_it_fits() -> None:
    read, prompts = _script("Ada", "x", "12", "", "", "0.5", "3", "y")
    written: list[str] = []
    answer = ask_form(
        {"message": "Deployment details", "requestedSchema": FORM_SCHEMA}, read, written.append
    )
    assert answer == {
        "action": "accept",
        "content": {"name": "Ada", "count": 2, "ratio": 0.5, "env": "prod", "notify": True},
    }
    assert prompts == ["name: "] + ["count [2]: "] * 3 + ["ratio: "] * 2 + ["env: ", "notify [n]: "]
    text = "".join(written)
    assert text.startswith("Deployment details\n")
    assert "!decline or Ctrl-D declines, !cancel cancels" in text
    assert "not an integer; try again" in text and "must be at most 9; try again" in text
    assert "a value is required" in text


def test_an_optional_field_without_default_is_left_out() -> None:
    schema = {"type": "object", "properties": {"note": {"type": "string"}}}
    read, _ = _script("")
    assert ask_form({"message": "m", "requestedSchema": schema}, read, lambda _: None) == {
        "action": "accept",
        "content": {},
    }


@pytest.mark.parametrize(
    ("answers", "action"),
    [
        (("!decline",), "decline"),
        ((EOFError,), "decline"),
        (("Ada", "!cancel"), "cancel"),
        (("Ada", " !decline "), "decline"),
        (("Ada", "", EOFError), "decline"),
    ],
)
def test_a_form_can_be_declined_or_cancelled(
    answers: tuple[str | type[EOFError], ...], action: str
) -> None:
    read, _ = _script(*answers)
    answer = ask_form({"message": "m", "requestedSchema": FORM_SCHEMA}, read, lambda _: None)
    assert answer == {"action": action}


def test_a_form_without_fields_is_a_confirmation() -> None:
    empty = {"message": "Go?", "requestedSchema": {"type": "object", "properties": {}}}
    read, prompts = _script("maybe", "y")
    assert ask_form(empty, read, lambda _: None) == {"action": "accept", "content": {}}
    assert prompts == ["Accept? [y/n]: "] * 2
    assert ask_form(empty, _script("n")[0], lambda _: None) == {"action": "decline"}


def test_not_interactive_declines_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    handlers = input_handlers(_options(interactive=False))
    params = {"message": "Deploy\nnow?", "requestedSchema": FORM_SCHEMA}
    assert handlers["form"](params) == {"action": "decline"}
    assert capsys.readouterr().err == (
        "snodo: declined a form request (stdin is not a terminal): Deploy now?\n"
    )


# -- URL elicitations and sampling ---------------------------------------------------------


def test_a_url_is_printed_opened_only_when_asked_and_confirmed() -> None:
    params = {"mode": "url", "message": "Sign in", "url": "https://example.test/x"}
    opened: list[str] = []
    written: list[str] = []
    assert ask_url(params, _script("y")[0], written.append, opened.append) == {"action": "accept"}
    assert opened == ["https://example.test/x"]
    assert "Sign in\n  https://example.test/x\n" in "".join(written)
    assert ask_url(params, _script("n")[0], lambda _: None, None) == {"action": "decline"}
    assert ask_url(params, _script("!cancel")[0], lambda _: None, None) == {"action": "cancel"}


def test_sampling_is_offered_only_with_a_command() -> None:
    assert sorted(input_handlers(_options())) == ["form", "url"]
    assert sorted(input_handlers(_options(sampling_command="cat"))) == ["form", "sampling", "url"]


def test_sampling_output_is_the_text_or_a_whole_result() -> None:
    assert sampling_result("hello\n", "m") == {
        "role": "assistant",
        "content": {"type": "text", "text": "hello"},
        "model": "m",
        "stopReason": "endTurn",
    }
    whole = {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "x"}
    assert sampling_result(json.dumps(whole), "m") == whole
    assert sampling_result('{"role": "assistant", "content": []}', "m")["model"] == "m"
    assert sampling_result('{"answer": 1}', "m")["content"]["text"] == '{"answer": 1}'


def test_the_sampling_command_reads_the_request_on_stdin() -> None:
    echo = f"{shlex.quote(sys.executable)} -c " + shlex.quote(
        "import json, sys; p = json.load(sys.stdin); print(p['maxTokens'])"
    )
    result = run_sampling_command(echo, {"messages": [], "maxTokens": 7})
    assert result["content"] == {"type": "text", "text": "7"}
    assert result["model"] == Path(sys.executable).name


def test_a_failing_sampling_command_is_a_handler_error() -> None:
    fail = f"{shlex.quote(sys.executable)} -c " + shlex.quote(
        "import sys; sys.stderr.write('no model here\\n'); sys.exit(4)"
    )
    with pytest.raises(HandlerError, match="exited with status 4: no model here"):
        run_sampling_command(fail, {})
    with pytest.raises(HandlerError, match="was not found: /nonexistent/model"):
        run_sampling_command("/nonexistent/model --x", {})
    slow = f"{shlex.quote(sys.executable)} -c " + shlex.quote("import time; time.sleep(30)")
    with pytest.raises(HandlerError, match=r"did not answer within 0\.3 s"):
        run_sampling_command(slow, {}, timeout=0.3)


def test_interruptible_turns_ctrl_c_into_interrupted() -> None:
    assert interruptible(lambda: 42) == 42

    def pressed() -> None:
        raise KeyboardInterrupt

    with pytest.raises(Interrupted):
        interruptible(pressed)


# -- the command without a terminal --------------------------------------------------------


def _snodo(*args: str, stdin: int | None = subprocess.DEVNULL) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SNODO), "call", "--stdio", SERVER, "--cwd", str(ROOT), *args],
        stdin=stdin,
        capture_output=True,
        text=True,
        timeout=WAIT,
        cwd=ROOT,
        check=False,
    )


def test_command_off_a_terminal_declines_forms_and_prints_plain_progress() -> None:
    done = _snodo("survey", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(json.loads(done.stdout)["content"][0]["text"]) == {"action": "decline"}
    assert done.stderr == (
        "snodo: declined a form request (stdin is not a terminal): Deployment details\n"
    )
    done = _snodo("slow", "n=3", "delay=0")
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        "progress 1/3 (33%) step 1",
        "progress 2/3 (66%) step 2",
        "progress 3/3 (100%) step 3",
    ]
    assert done.stdout.strip() == "done after 3 steps"


def test_command_answers_sampling_with_the_sampling_command() -> None:
    model = f"{shlex.quote(sys.executable)} -c " + shlex.quote(
        "import json, sys; p = json.load(sys.stdin); "
        "print('echo: ' + p['messages'][0]['content']['text'])"
    )
    done = _snodo("ask_model", "--json", "--sampling-command", model)
    assert done.returncode == 0, done.stderr
    answer = json.loads(json.loads(done.stdout)["content"][0]["text"])
    assert answer["content"] == {"type": "text", "text": "echo: Say hi"}
    refused = _snodo("ask_model")
    assert refused.returncode == 3
    assert refused.stderr.strip().splitlines() == [
        "snodo: error: Missing required client capability: sampling (-32021)"
    ]


@pytest.fixture(scope="module")
def http_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The test Runtime over Streamable HTTP on 127.0.0.1 (one per module)."""
    log = tmp_path_factory.mktemp("http") / "stderr.txt"
    with log.open("w") as err:
        server = subprocess.Popen(
            [*SERVER_HTTP],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        deadline = time.monotonic() + WAIT
        while not (found := re.search(r"http://127\.0\.0\.1:\d+/mcp", log.read_text())):
            assert server.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        yield found.group(0)
    finally:
        server.terminate()
        server.wait(WAIT)


def _events(record: Path) -> list[str]:
    if not record.exists():
        return []
    return [json.loads(line)["event"] for line in record.read_text().splitlines()]


def _wait_events(record: Path, wanted: list[str]) -> None:
    deadline = time.monotonic() + WAIT
    while _events(record) != wanted:
        assert time.monotonic() < deadline, f"{record}: {_events(record)} (wanted {wanted})"
        time.sleep(0.02)


@pytest.mark.parametrize("version", ["2026-07-28", "2025-11-25"])
def test_sigint_cancels_a_call_over_http(http_url: str, tmp_path: Path, version: str) -> None:
    """Over HTTP the session era POSTs notifications/cancelled for the interrupted call (before
    the DELETE that ends the session); on 2026-07-28 its stream closing is the cancellation."""
    record = tmp_path / "record.jsonl"
    parts = urlsplit(http_url)
    assert parts.hostname is not None and parts.port is not None
    with TeeProxy((parts.hostname, parts.port), parts.path) as proxy:
        command = [str(SNODO), "call", "--http", proxy.url, "--protocol", version]
        with subprocess.Popen(
            [*SIGINT_DEFAULT, *command, "wait", f"record={record}"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        ) as client:
            _wait_events(record, ["started"])
            client.send_signal(signal.SIGINT)
            out, err = client.communicate(timeout=WAIT)
        _wait_events(record, ["started", "cancelled"])
        sent = [(r.method, r.rpc) for r in proxy.received()]
        calls = [r.message["id"] for r in proxy.received("tools/call")]
        cancels = [r.message["params"] for r in proxy.received("notifications/cancelled")]
    assert client.returncode == 130, err
    assert "Traceback" not in err and out == ""
    if version == "2026-07-28":
        assert cancels == []
    else:
        assert [c["requestId"] for c in cancels] == calls
        assert sent.index(("POST", "notifications/cancelled")) < sent.index(("DELETE", None))


# -- under tmux, as a person uses it -------------------------------------------------------


class Tmux:
    """A tmux server of our own (``-L``), one session per command, panes kept after exit."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.status: dict[str, Path] = {}
        self.socket = f"snodo-cli-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.conf = home / "tmux.conf"
        self.conf.write_text("set -g remain-on-exit on\nset -g history-limit 2000\n")

    def tmux(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.socket, "-f", str(self.conf), *args],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
        return done.stdout

    def start(self, argv: list[str], stdout: Path | None = None) -> str:
        """Run ``argv`` in a new 100x30 session in the repository (stdout to ``stdout`` when
        given); the session's name. Its exit status is written by a wrapper (``RUN``): this
        tmux does not always reap a pane's process (a zombie with no status)."""
        name = f"s{uuid.uuid4().hex[:8]}"
        self.status[name] = self.home / f"{name}.status"
        words = [*RUN, str(self.status[name]), str(stdout or "-"), *argv]
        command = " ".join(shlex.quote(w) for w in words)
        self.tmux(
            "new-session", "-d", "-x", "100", "-y", "30", "-s", name, "-c", str(ROOT), command
        )
        return name

    def screen(self, name: str) -> str:
        """The pane's text with its history (the "Pane is dead" line scrolls one line off)."""
        return self.tmux("capture-pane", "-p", "-S", "-", "-t", name)

    def keys(self, name: str, *keys: str) -> None:
        self.tmux("send-keys", "-t", name, *keys)

    def wait_for(self, name: str, pattern: str) -> str:
        """Poll the screen until ``pattern`` (a regex) shows; the screen."""
        deadline = time.monotonic() + WAIT
        while True:
            screen = self.screen(name)
            if re.search(pattern, screen, re.MULTILINE):
                return screen
            assert time.monotonic() < deadline, f"{pattern!r} never showed:\n{screen}"
            time.sleep(0.03)

    def answer(self, name: str, prompt: str, text: str) -> None:
        """Wait for ``prompt`` at the end of the screen's last non-empty line, then type."""
        self.wait_for(name, rf"{re.escape(prompt)}\s*\Z")
        self.keys(name, "-l", text)
        self.keys(name, "Enter")

    def exit_status(self, name: str) -> int:
        """The command's exit status, once it has ended."""
        deadline = time.monotonic() + WAIT
        status = self.status[name]
        while not (status.exists() and status.read_text().endswith("\n")):
            assert time.monotonic() < deadline, f"still running:\n{self.screen(name)}"
            time.sleep(0.03)
        return int(status.read_text())


@pytest.fixture(scope="module")
def tmux(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tmux]:
    if ensure_program("tmux", "tmux") is None:
        pytest.skip("tmux is not installed and could not be (apt-get install tmux needs root)")
    server = Tmux(tmp_path_factory.mktemp("tmux"))
    try:
        yield server
    finally:
        subprocess.run(
            ["tmux", "-L", server.socket, "kill-server"],
            capture_output=True,
            timeout=10,
            check=False,
        )


def _call(*args: str) -> list[str]:
    return [str(SNODO), "call", "--stdio", SERVER, "--cwd", str(ROOT), *args]


@pytest.mark.parametrize("version", ["2026-07-28", "2025-11-25"])
def test_tmux_form_answered_field_by_field(tmux: Tmux, tmp_path: Path, version: str) -> None:
    out = tmp_path / "out.json"
    name = tmux.start(_call("survey", "--json", "--protocol", version), stdout=out)
    tmux.wait_for(name, r"^Deployment details$")
    tmux.answer(name, "name:", "Ada")
    tmux.answer(name, "count [2]:", "x")
    tmux.wait_for(name, "not an integer; try again")
    tmux.answer(name, "count [2]:", "")
    tmux.answer(name, "ratio:", "")
    tmux.wait_for(name, "a value is required")
    tmux.answer(name, "ratio:", "0.5")
    screen = tmux.wait_for(name, r"^env:\s*\Z")
    assert "  3) Production" in screen
    tmux.answer(name, "env:", "3")
    tmux.answer(name, "notify [n]:", "y")
    assert tmux.exit_status(name) == 0, tmux.screen(name)
    result = json.loads(out.read_text())
    assert json.loads(result["content"][0]["text"]) == {
        "action": "accept",
        "content": {"name": "Ada", "count": 2, "ratio": 0.5, "env": "prod", "notify": True},
    }


def test_tmux_ctrl_d_declines_a_form(tmux: Tmux, tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    name = tmux.start(_call("survey", "--json"), stdout=out)
    tmux.wait_for(name, r"^name:\s*\Z")
    tmux.keys(name, "C-d")
    assert tmux.exit_status(name) == 0, tmux.screen(name)
    assert json.loads(json.loads(out.read_text())["content"][0]["text"]) == {"action": "decline"}


def test_tmux_progress_bar_drawn_in_place_and_finished(tmux: Tmux) -> None:
    name = tmux.start(_call("slow", "n=4", "delay=0.4"))
    mid = tmux.wait_for(name, r"^\[[#.]{24}\] [123]/4 +\d+% step [123]$")  # under way
    assert "4/4" not in mid and "done" not in mid
    assert tmux.exit_status(name) == 0, tmux.screen(name)
    lines = [line.rstrip() for line in tmux.screen(name).splitlines() if line.strip()]
    bars = [i for i, line in enumerate(lines) if re.search(r"\d/4", line)]
    assert len(bars) == 1, lines  # redrawn in place: one line, not one per report
    assert re.fullmatch(r"\[#{24}\] 4/4 100% step 4", lines[bars[0]]), lines
    assert lines[bars[0] + 1] == "done after 4 steps"  # finished: the result on a line of its own


@pytest.mark.parametrize("version", ["2026-07-28", "2025-11-25"])
def test_tmux_ctrl_c_cancels_a_slow_call(tmux: Tmux, tmp_path: Path, version: str) -> None:
    record = tmp_path / "record.jsonl"
    name = tmux.start(_call("wait", f"record={record}", "--protocol", version))
    _wait_events(record, ["started"])
    tmux.keys(name, "C-c")
    assert tmux.exit_status(name) == 130, tmux.screen(name)
    _wait_events(record, ["started", "cancelled"])  # the server saw notifications/cancelled
    assert "Traceback" not in tmux.screen(name)


def test_the_module_stays_light() -> None:
    """The command imports it for every call: nothing heavy at import time."""
    heavy = {"subprocess", "json", "shlex", "webbrowser"}
    assert not heavy & set(vars(terminal)), "imported lazily, in the functions that need them"


@pytest.mark.parametrize("version", ["2026-07-28", "2025-11-25"])
def test_tmux_ctrl_c_at_a_form_prompt_exits_130(tmux: Tmux, version: str) -> None:
    """The session era asks on a handler thread: Ctrl-C there still ends the command at once
    (the prompt never holds what the main thread needs to finish)."""
    name = tmux.start(_call("survey", "--protocol", version))
    tmux.wait_for(name, r"^name:\s*\Z")
    tmux.keys(name, "C-c")
    assert tmux.exit_status(name) == 130, tmux.screen(name)
    assert "Traceback" not in tmux.screen(name)


def test_tmux_url_request_printed_opened_with_open_and_confirmed(
    tmux: Tmux, tmp_path: Path
) -> None:
    """--open hands the URL to the browser ($BROWSER here: a script that records it)."""
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "browser"
    browser.write_text(f'#!/bin/sh\necho "$1" > {shlex.quote(str(opened))}\n')
    browser.chmod(0o755)
    out = tmp_path / "out.json"
    argv = ["env", f"BROWSER={browser}", *_call("visit", "--open", "--json")]
    name = tmux.start(argv, stdout=out)
    screen = tmux.wait_for(name, r"Continue once done\? \[y/n\] \(!cancel cancels\):\s*\Z")
    assert "Sign in to continue\n  https://example.test/consent\n" in screen
    tmux.keys(name, "y", "Enter")
    assert tmux.exit_status(name) == 0, tmux.screen(name)
    assert json.loads(json.loads(out.read_text())["content"][0]["text"]) == {"action": "accept"}
    assert opened.read_text() == "https://example.test/consent\n"


@pytest.mark.parametrize("no_color", ["", "1"])
def test_tmux_bar_is_coloured_unless_no_color(tmux: Tmux, no_color: str) -> None:
    name = tmux.start(["env", f"NO_COLOR={no_color}", *_call("slow", "n=1", "delay=0")])
    assert tmux.exit_status(name) == 0, tmux.screen(name)
    styled = tmux.tmux("capture-pane", "-p", "-e", "-S", "-", "-t", name)
    line = next(line for line in styled.splitlines() if "1/1 100%" in line)
    assert ("\x1b[36m" in line) is (no_color == "")


def test_terminal_lines_are_read_whole_and_end_of_input_is_eof() -> None:
    """The prompts' reader (select and os.read, never one blocking read): lines split, a last
    line without newline kept, then EOFError."""
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, "Ada\r\nnum\xe9ro\nlast".encode())
        os.close(write_end)
        reader = terminal._LineReader()
        assert [reader.line(read_end) for _ in range(3)] == ["Ada", "numéro", "last"]
        with pytest.raises(EOFError):
            reader.line(read_end)
    finally:
        os.close(read_end)
