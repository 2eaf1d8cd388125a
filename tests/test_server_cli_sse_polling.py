"""``python -m snodo.server --http --sse-retry-ms N`` serves SEP-1699 polling, as
``serve_http(sse_retry_ms=)`` does; the option needs ``--http``.

Found by the conformance suite, scenario server-sse-polling.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import snodo
from tests.support.http_fault_server import TeeProxy

ROOT = str(Path(__file__).resolve().parent.parent)


def _connect(url: str, **options: Any) -> snodo.Client:
    return snodo.connect(snodo.Http(url), timeout=10.0, **options)


def test_cli_sse_retry_ms_makes_2025_11_25_streams_resumable() -> None:
    """``--sse-retry-ms`` serves SEP-1699 polling: the response stream closes after its priming
    event (with ``retry``), the client resumes with GET and Last-Event-ID, and the call returns.

    Found by the conformance suite, scenario server-sse-polling.
    """
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "snodo.server",
            "--http",
            "--port",
            "0",
            "--sse-retry-ms",
            "50",
            "examples.example_runtime:runtime",
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert line.startswith("snodo.server: serving http://127.0.0.1:"), line
        parts = urlsplit(line.split("serving ", 1)[1].strip())
        assert parts.hostname is not None and parts.port is not None
        with TeeProxy((parts.hostname, parts.port), parts.path) as proxy:
            with _connect(proxy.url, protocol="2025-11-25") as client:
                result = client.call_tool("echo", {"text": "resumed"})
                assert isinstance(result, dict)
                assert result["content"][0]["text"] == "resumed"
            resumed = proxy.received(lambda r: r.method == "GET" and r.header("last-event-id"))
            assert resumed, "no GET carried Last-Event-ID"
    finally:
        proc.terminate()
        proc.wait(10.0)
        if proc.stderr is not None:
            proc.stderr.close()


def test_cli_sse_retry_ms_needs_http() -> None:
    """Added with the fix for the conformance suite's scenario server-sse-polling."""
    done = subprocess.run(
        [sys.executable, "-m", "snodo.server", "--sse-retry-ms", "50", "x:y"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30.0,
    )
    assert done.returncode == 2 and "--sse-retry-ms need --http" in done.stderr
