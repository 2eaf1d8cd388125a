"""Build the docs site strictly and check three of its pages in headless Chromium.

    python scripts/docs_site.py build [DIR]   # mkdocs build --strict into DIR (a temp dir if none)
    python scripts/docs_site.py check         # build, serve on 127.0.0.1, open and screenshot

``check`` (a CI step of scripts/test, docs/decisions/0051) serves the built site on 127.0.0.1,
opens the home page, one guide and one API page in Debian's ``chromium`` (installed when missing)
driven by Playwright, and fails unless each page loaded every asset it asked for (no 4xx or
failed request), the Material stylesheet was applied (the header's computed background is the
theme's colour, which only its stylesheet sets) and its code blocks are highlighted (spans with
Pygments classes in a colour other than the code's own). The screenshots go to a temp dir
outside the repository; their paths are printed.
"""

from __future__ import annotations

import functools
import http.server
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: The pages checked: (name, path under the site, an element id the page must have).
PAGES = [
    ("home", "index.html", "where-to-start"),
    ("guide", "guides/daemon/index.html", "restart-policies"),
    ("api", "reference/snodo/index.html", "snodo.Client"),
]

#: Chromium's flags: no sandbox (root in CI), no GPU, no network of its own.
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

#: The Material header's background with the indigo palette of mkdocs.yml.
THEME_HEADER = "rgb(64, 81, 181)"

PAGE_TIMEOUT_MS = 20_000


def build(out: Path) -> None:
    """``mkdocs build --strict`` into ``out``; raises when the build fails."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(out)]
    subprocess.run(command, cwd=ROOT, env=env, check=True, timeout=300)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    """Serves the built site; remembers what it could not find."""

    missing: list[str]

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        self.missing.append(f"{code} {self.path}")
        super().send_error(code, message, explain)


def serve(site: Path) -> tuple[http.server.ThreadingHTTPServer, list[str]]:
    """The site served on 127.0.0.1 (a free port) by a thread; and the list of its 4xx paths."""
    missing: list[str] = []
    handler = type("Handler", (_Quiet,), {"missing": missing})
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(handler, directory=str(site))
    )
    threading.Thread(target=server.serve_forever, daemon=True, name="docs-site").start()
    return server, missing


CHECKS_JS = """
() => {
  const header = document.querySelector('.md-header');
  const spans = [...document.querySelectorAll('.highlight code span[class]')];
  const coloured = spans.filter(s => {
    const code = s.closest('code');
    return getComputedStyle(s).color !== getComputedStyle(code).color;
  });
  return {
    header: header ? getComputedStyle(header).backgroundColor : null,
    blocks: document.querySelectorAll('.highlight').length,
    spans: spans.length,
    coloured: coloured.length,
  };
}
"""


def check(shots: Path) -> list[str]:
    """Build, serve and check the pages; the failures (empty when all is well)."""
    from playwright.sync_api import sync_playwright

    from tests.support.system_tools import ensure_program

    chromium = ensure_program("chromium", "chromium")
    if chromium is None:
        return ["chromium is not installed and cannot be installed here (root and apt-get)"]
    site = shots / "site"
    started = time.monotonic()
    build(site)
    print(f"docs_site: built {site} in {time.monotonic() - started:.1f} s")
    server, missing = serve(site)
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    failures: list[str] = []
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=chromium, headless=True, args=FLAGS
            )
            try:
                for name, path, anchor in PAGES:
                    failures += check_page(browser, base + path, name, anchor, shots)
            finally:
                browser.close()
    finally:
        server.shutdown()
        server.server_close()
    failures += [f"the site has no {entry}" for entry in missing]
    return failures


def check_page(browser: Any, url: str, name: str, anchor: str, shots: Path) -> list[str]:
    """Open ``url``, check it and screenshot it to ``shots/<name>.png``; its failures."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    bad: list[str] = []
    page.on(
        "response",
        lambda response: response.status >= 400 and bad.append(f"{response.status} {response.url}"),
    )
    page.on("requestfailed", lambda request: bad.append(f"failed {request.url}"))
    try:
        page.goto(url, wait_until="networkidle", timeout=PAGE_TIMEOUT_MS)
        found = page.evaluate(CHECKS_JS)
        has_anchor = page.evaluate("id => document.getElementById(id) !== null", anchor)
        shot = shots / f"{name}.png"
        page.screenshot(path=str(shot), full_page=False)
        print(f"docs_site: {name}: {url} -> {shot} {found}")
    finally:
        page.close()
    failures = [f"{name}: {entry}" for entry in bad]
    if found["header"] != THEME_HEADER:
        failures.append(
            f"{name}: the Material stylesheet is not applied (header {found['header']})"
        )
    if found["blocks"] == 0 or found["coloured"] == 0:
        failures.append(f"{name}: no highlighted code block ({found})")
    if not has_anchor:
        failures.append(f"{name}: no element #{anchor}")
    return failures


def main(argv: list[str]) -> int:
    if argv[:1] == ["build"]:
        out = Path(argv[1]) if len(argv) > 1 else Path(tempfile.mkdtemp(prefix="snodo-site-"))
        build(out)
        print(f"docs_site: built {out}")
        return 0
    if argv[:1] == ["check"]:
        started = time.monotonic()
        shots = Path(tempfile.mkdtemp(prefix="snodo-docs-shots-"))
        failures = check(shots)
        for failure in failures:
            print(f"docs_site: FAILED {failure}", file=sys.stderr)
        took = time.monotonic() - started
        print(f"docs_site: {len(PAGES)} pages checked in {took:.1f} s; screenshots in {shots}")
        return 1 if failures else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
