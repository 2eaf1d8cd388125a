"""snodo.testing.pytest_plugin: opt in, inert until used, the same on threads and under gevent.

Each test runs pytest in a subprocess on a small generated test file (an application's tests,
outside this repository, so none of snodo's own conftest applies), with the plugin loaded by
``-p snodo`` (autoloading off) or by its entry point, and checks the outcome of every test: the
fixtures serve, proxy and crash; a test that leaks fails only where the leak check is on.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.support.stdio_support import ROOT

RUN_DEADLINE = 120.0

APP_TESTS = """
import sys
import threading

import pytest
import snodo

RUNTIME = "snodo.testing.servers:empty_runtime"
LEFT = threading.Event()


def echo(client, text):
    return client.call_tool("echo", {"text": text}, timeout=5)["content"][0]["text"]


def test_inert_until_used():
    assert "snodo.testing.servers" not in sys.modules or "--snodo-leak-check" in sys.argv


def test_served_runtime_and_owner_crash(served_runtime, snodo_owner, crash_owner):
    server = served_runtime(RUNTIME)
    owner = snodo_owner()
    client = owner.connect(server.target)
    assert echo(client, "hi") == "hi"
    crash_owner(client)
    with pytest.raises(snodo.McpError):
        echo(client, "after")
    client.close()


def test_stdio_server_killed_restarts(served_runtime):
    server = served_runtime(RUNTIME, "stdio")
    with snodo.connect(server.target, restart="transient", timeout=5) as client:
        assert echo(client, "one") == "one"
        server.kill(client)
        for _ in range(100):
            try:
                assert echo(client, "two") == "two"
                break
            except snodo.McpError:
                continue


def test_fault_proxy_cuts_the_stream(snodo_http_server, fault_proxy):
    server = snodo_http_server(RUNTIME)
    proxy = fault_proxy.http(server.url)
    target = proxy.target if not isinstance(proxy.target, str) else snodo.Http(proxy.target)
    with snodo.connect(target, timeout=5) as client:
        proxy.cut()
        with pytest.raises(snodo.McpError):
            echo(client, "cut")


def test_clean_with_the_fixture(snodo_no_leaks, snodo_http_server):
    server = snodo_http_server(RUNTIME)
    with snodo.connect(server.target) as client:
        assert echo(client, "clean") == "clean"


@pytest.mark.snodo_leak_check
def test_leaks_a_thread_checked_by_marker():
    threading.Thread(target=LEFT.wait, args=(30,), name="marked-leak", daemon=True).start()


def test_leaks_a_thread_unchecked():
    threading.Thread(target=LEFT.wait, args=(30,), name="unmarked-leak", daemon=True).start()


def test_zz_release():
    LEFT.set()
"""


def run_app_tests(tmp_path: Path, *args: str, gevent: bool, autoload: bool) -> dict[str, str]:
    """Outcome ("passed", "failed", "error", "skipped") of each generated test."""
    (tmp_path / "test_app.py").write_text(textwrap.dedent(APP_TESTS))
    report = tmp_path / "report.xml"
    runner = [str(ROOT / "tests" / "gevent_pytest.py")] if gevent else ["-m", "pytest"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PYTEST_ADDOPTS", None)
    if autoload:
        env.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
        plugin: list[str] = ["-p", "no:randomly", "-p", "no:cacheprovider"]
    else:
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        plugin = ["-p", "snodo", "-p", "no:cacheprovider"]
    done = subprocess.run(
        [
            sys.executable,
            *runner,
            "-q",
            *plugin,
            f"--junit-xml={report}",
            "--snodo-leak-deadline=3",  # what ends ends within it on a loaded CI machine
            *args,
            "test_app.py",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_DEADLINE,
        start_new_session=True,  # its leak checks see only its own (suites run side by side)
        check=False,
    )
    assert report.exists(), done.stdout + done.stderr
    outcomes: dict[str, str] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        name = case.attrib["name"]
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}
        outcomes[name] = outcome[kinds[0]] if kinds else "passed"
        if kinds:  # a teardown error after a pass is the test's outcome here
            outcomes[name] = outcome["error" if "error" in kinds else kinds[0]]
    outcomes["_output"] = done.stdout[-3000:]
    return outcomes


USED = [
    "test_inert_until_used",
    "test_served_runtime_and_owner_crash",
    "test_stdio_server_killed_restarts",
    "test_fault_proxy_cuts_the_stream",
    "test_clean_with_the_fixture",
]


@pytest.mark.parametrize("gevent", [False, True], ids=["threads", "gevent"])
def test_the_fixtures_work_and_only_a_marked_leak_fails(tmp_path: Path, gevent: bool) -> None:
    outcomes = run_app_tests(tmp_path, gevent=gevent, autoload=False)
    output = outcomes.pop("_output")
    for name in USED:
        assert outcomes[name] == "passed", (name, output)
    assert outcomes["test_leaks_a_thread_checked_by_marker"] == "error", output
    assert "marked-leak" in output
    assert outcomes["test_leaks_a_thread_unchecked"] == "passed", output


def test_the_entry_point_with_snodo_leak_check_checks_every_test(tmp_path: Path) -> None:
    outcomes = run_app_tests(tmp_path, "--snodo-leak-check", gevent=False, autoload=True)
    output = outcomes.pop("_output")
    assert outcomes["test_leaks_a_thread_checked_by_marker"] == "error", output
    assert outcomes["test_leaks_a_thread_unchecked"] == "error", output
    assert "unmarked-leak" in output
    for name in USED:
        assert outcomes[name] == "passed", (name, output)


def test_the_kit_is_loaded_only_when_imported_and_its_modules_on_first_use() -> None:
    """``import snodo`` does not import snodo.testing; ``import snodo.testing`` imports none of
    its modules (nor pykka, nor threads) until a name is used."""
    probe = (
        "import sys, snodo; assert 'snodo.testing' not in sys.modules; "
        "import snodo.testing as kit; "
        "loaded = sorted(m for m in sys.modules if m.startswith('snodo.testing.')); "
        "assert loaded == [] and 'pykka' not in sys.modules, loaded; "
        "kit.no_leaks; assert 'snodo.testing.leaks' in sys.modules; "
        "assert 'snodo.testing.servers' not in sys.modules; "
        "assert sorted(set(kit.__all__) - set(dir(kit))) == []; print('ok')"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=RUN_DEADLINE,
        check=False,
    )
    assert done.stdout.strip() == "ok", done.stdout + done.stderr
