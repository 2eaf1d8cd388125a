"""The examples run: ``./scripts/demo`` runs examples/client_transports.py, so it must succeed.

The example runs as a subprocess, as a user would run it, with a deadline. Each test names what
the example promises in its report.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "client_transports.py"
DEADLINE = 45.0  # seconds; pytest-timeout stops the test at 60
VERSIONS = ("2026-07-28", "2025-11-25", "2025-06-18")


def run_example(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("PYTHONWARNINGS", None)
    return subprocess.run(
        [sys.executable, str(EXAMPLE), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        env=env,
        check=False,
    )


@pytest.fixture(scope="module")
def report() -> str:
    done = run_example()
    assert done.returncode == 0, (
        f"example exited {done.returncode}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
    )
    return done.stdout


def check_line(report: str, leg: str, version: str, check: str) -> str:
    """The detail of the ``ok`` line for ``check`` in the ``leg · version`` section."""
    sections = re.split(r"^(?=\S+ · \S+$)", report, flags=re.MULTILINE)
    section = next((s for s in sections if s.startswith(f"{leg} · {version}\n")), None)
    assert section is not None, f"no section for {leg} {version} in:\n{report}"
    match = re.search(rf"^  ok\s+{re.escape(check)}\s+(.*)$", section, flags=re.MULTILINE)
    assert match is not None, f"no ok line for {check!r} in:\n{section}"
    return match.group(1)


def test_example_exits_zero_and_reports_every_version_ok(report: str) -> None:
    """Demo: every leg and every version succeeds, and the summary says so."""
    summary = [line for line in report.splitlines() if line.startswith("summary:")]
    assert len(summary) == 1, report
    assert summary[0].startswith("summary: OK:"), summary[0]
    assert " 0 failed" in summary[0], summary[0]
    assert "FAIL" not in report, report


@pytest.mark.parametrize("version", VERSIONS)
def test_example_negotiates_the_pinned_version(report: str, version: str) -> None:
    """Protocol versions: a pin (protocol=...) negotiates exactly that version over direct."""
    assert check_line(report, "direct", version, "version") == f"negotiated {version}"


def test_example_discovers_on_2026_and_has_a_session_before(report: str) -> None:
    """discover() is the 2026-07-28 call; session-era clients report their session instead."""
    discovered = check_line(report, "direct", "2026-07-28", "discover")
    assert discovered.startswith(
        "versions 2026-07-28, 2025-11-25, 2025-06-18; server snodo-example"
    )
    for version in ("2025-11-25", "2025-06-18"):
        session = check_line(report, "direct", version, "session")
        assert session.startswith("server snodo-example 0.1.0; capabilities"), session


@pytest.mark.parametrize("version", VERSIONS)
def test_example_calls_echo_and_delivers_progress(report: str, version: str) -> None:
    """Calls: echo answers with its text; progress reports arrive before the call returns."""
    assert check_line(report, "direct", version, "call_tool echo") == "'hello from snodo'"
    progress = check_line(report, "direct", version, "progress")
    assert progress == "3 reports (1/3, 2/3, 3/3) then 'counted to 3'", progress


@pytest.mark.parametrize("version", VERSIONS)
def test_example_answers_deploy_with_an_input_handler(report: str, version: str) -> None:
    """Input handlers answer the deploy tool's form on every version (MRTR or elicitation/create)."""
    detail = check_line(report, "direct", version, "deploy (handler)")
    assert detail == "the form handler was asked 'Deploy to staging?' -> deployed", detail


def test_example_finishes_input_required_by_hand_on_2026(report: str) -> None:
    """Multi round-trip requests: without handlers call_tool returns InputRequired; answered by hand."""
    detail = check_line(report, "direct", "2026-07-28", "deploy (by hand)")
    assert re.fullmatch(r"InputRequired \[.+\], answered by hand -> deployed", detail), detail


def test_example_rejects_unknown_legs() -> None:
    """The example names its legs; an unknown one is a usage error (exit 2), not a silent no-op."""
    done = run_example("carrier-pigeon")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "unknown leg(s): carrier-pigeon" in done.stdout


@pytest.mark.parametrize("version", VERSIONS)
def test_example_custom_transport_leg_runs_the_same_calls(report: str, version: str) -> None:
    """Custom transports: examples/custom_transport.py (a socket pair) runs the same checks."""
    assert check_line(report, "custom", version, "version") == f"negotiated {version}"
    assert check_line(report, "custom", version, "call_tool echo") == "'hello from snodo'"
    progress = check_line(report, "custom", version, "progress")
    assert progress == "3 reports (1/3, 2/3, 3/3) then 'counted to 3'", progress
    deployed = check_line(report, "custom", version, "deploy (handler)")
    assert deployed.endswith("-> deployed"), deployed


def test_actor_proxy_example_fans_calls_out_and_collects_them() -> None:
    """Embedding in an actor application: examples/actor_proxy.py (start_client, 20 futures)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "actor_proxy.py")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "proxy is a pykka.ActorProxy: True" in lines, done.stdout
    assert "fan-out: 20 futures back at once" in lines, done.stdout
    assert "planner: handling messages with 20 calls out" in lines, done.stdout
    assert "results: 20 sums, all right" in lines, done.stdout
    assert "errors: the call's McpError -32602" in lines, done.stdout
    assert lines[-1] == "closed: client actor alive False", done.stdout


def test_aio_example_runs_every_step_on_both_eras() -> None:
    """asyncio: examples/aio.py (gather, progress, a coroutine handler, cancel, async for)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "aio.py")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    for version in ("2026-07-28", "2025-11-25"):
        assert f"{version}: 50 calls at once, all right: True" in lines, done.stdout
        assert f"{version}: progress ['1/3', '2/3', '3/3'] then 'counted to 3'" in lines
        assert f"{version}: deploy (coroutine handler) -> deployed" in lines, done.stdout
        assert f"{version}: cancelled one call; the next says 'still here'" in lines
    assert lines[-1] == "subscription: async for gave 3 updates", done.stdout


def test_fleet_example_serves_routes_reloads_and_closes() -> None:
    """Fleets: examples/fleet.py loads examples/fleet.json (a lazy server, tool filters), routes
    calls by qualified name, reloads (the unchanged server keeps its pid) and closes."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "fleet.py")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    tables: list[dict[str, list[str]]] = []  # each status table: server -> its cells
    in_table = False
    for line in lines:
        cells = line.split()
        if cells[:2] == ["server", "state"]:
            tables.append({})
            in_table = True
        elif in_table and len(cells) == 9 and cells[2] in ("stdio", "http"):
            tables[-1][cells[0]] = cells
        else:
            in_table = False
    assert len(tables) == 3, done.stdout
    assert lines[0] == "started: <snodo.Fleet 1/2 ready>", done.stdout
    assert tables[0]["main"][1:4] == ["ready", "stdio", "2026-07-28"], tables[0]
    assert tables[0]["jobs"][1:] == ["stopped", "stdio", "-", "0", "-", "-", "-", "-"], tables[0]
    assert "tools: jobs_add, jobs_echo, jobs_slow_count, main_add, main_echo" in lines
    assert "main_add is {'server': 'main', 'name': 'add'}" in lines, done.stdout
    assert "routed call main_add: {'sum': 5}" in lines, done.stdout
    assert "routed call jobs_echo: hello, fleet" in lines, done.stdout
    refused = [line for line in lines if line.startswith("main_slow_count refused (-32602):")]
    assert len(refused) == 1 and "not allowed by the fleet config" in refused[0], done.stdout
    assert 'fleet["jobs"]: version 2025-11-25, counted to 3' in lines, done.stdout
    assert tables[1]["jobs"][1:3] == ["ready", "stdio"], tables[1]
    assert tables[1]["jobs"][6] == "3" and tables[1]["main"][6] == "2", tables[1]
    reload = "reload: added ['extra'], removed ['jobs'], changed [], unchanged ['main']"
    assert reload in lines, done.stdout
    assert "main kept its process: True" in lines, done.stdout
    assert tables[2]["main"][5] == tables[0]["main"][5], done.stdout
    assert set(tables[2]) == {"main", "extra"}, tables[2]
    assert "tools: extra_echo, main_add, main_echo" in lines, done.stdout
    assert lines[-1] == "closed: <snodo.Fleet 0/2 ready closed>", done.stdout
    for table in tables:
        for row in table.values():
            if row[5] != "-":
                with pytest.raises(ProcessLookupError):  # close() ended every server process
                    os.kill(int(row[5]), 0)


def test_tasks_example_follows_answers_cancels_and_hints() -> None:
    """Tasks: examples/tasks.py (a build followed to its result, a deploy answered by hand and
    by a handler, a cancelled job, a timed-out wait, the required-task hint) over HTTP."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "tasks.py")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == [
        "build: a task (True), working",
        "build: completed: built docs",
        "deploy asks: Deploy to staging?",
        "deploy by hand: deployed",
        "crunch: wait timed out (-32001), still working",
        "crunch: after cancel(), cancelled",
        "migrate refused (-32021): hint names call_tool_task: True",
        "migrate as a task: migrated",
        "deploy with a handler: deployed",
    ], done.stdout
