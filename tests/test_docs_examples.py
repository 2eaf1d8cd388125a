"""Every python block of the docs site and the README runs as written (issue 23 item 2), against
real servers.

Each page under ``docs/`` (the site's pages: not ``docs/decisions``), and ``README.md``, is one
test. Its python
blocks run in order in one namespace, in a fresh working directory whose ``python`` on ``PATH``
is this interpreter, so ``snodo.Stdio("python", [...])`` starts a real server. A block with a
file title (```` ```python title="notes_server.py" ````) is the file the page asks the reader to
save: it is written to the working directory, not run. A block's ``# >`` lines are what it
prints, and are checked. A page whose examples need a server the reader has elsewhere (an OAuth
protected one) gets a real one from ``SETUP``, with the fewest textual substitutions
(``substituted`` fails when the page's text changed). The API tour's pages (``TOUR_PAGES``)
are run block by block by ``tests/test_tour_snippets.py``, with the same ``run``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import snodo
from tests.support import stdio_support as support
from tests.support.stdio_support import PYTHON, ROOT
from tests.test_tour_snippets import TOUR_PAGES, run, substituted

DOCS = ROOT / "docs"

#: Autouse fixtures: process-wide parts started first; no child or fd left behind.
stdio_warm_up = support.stdio_warm_up
stdio_no_leaks = support.stdio_no_leaks

#: What under docs/ is not a page of the site (mkdocs.yml's exclude_docs).
NOT_PAGES = ("decisions", "hooks", "internals.md", "tour-claims.md")

FENCE = re.compile(r"^```(?P<lang>\w*)(?P<info>[^\n]*)\n(?P<code>.*?)^```$", re.M | re.S)
TITLE = re.compile(r'title="(?P<name>[^"]+)"')


def pages() -> list[Path]:
    """The site's Markdown pages and the README, those that hold at least one python block
    (the tour's pages aside: their own module runs them)."""
    found = []
    for path in [*sorted(DOCS.rglob("*.md")), ROOT / "README.md"]:
        if path.is_relative_to(DOCS) and path.relative_to(DOCS).parts[0] in NOT_PAGES:
            continue
        if path in TOUR_PAGES:
            continue
        if "```python" in path.read_text(encoding="utf-8"):
            found.append(path)
    return found


def page_name(path: Path) -> str:
    """A page's name: its path under ``docs/`` (``README.md`` for the README)."""
    return (
        path.relative_to(DOCS) if path.is_relative_to(DOCS) else path.relative_to(ROOT)
    ).as_posix()


def page_blocks(path: Path) -> list[tuple[int, str | None, str]]:
    """A page's python blocks and its files (a block of any language with a title): (line
    number, file title or None, code)."""
    text = path.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        title = TITLE.search(match.group("info"))
        if match.group("lang") != "python" and title is None:
            continue
        line = text[: match.start()].count("\n") + 2
        found.append((line, title.group("name") if title else None, match.group("code")))
    return found


def expected_output(code: str) -> list[str]:
    """The lines a block says it prints: its ``# >`` comment lines, in order (``#>`` too: the
    spelling before ``ruff format``, which formats the pages' blocks, adds the space)."""
    said = []
    for line in code.splitlines():
        stripped = line.strip()
        for prefix in ("# > ", "#> "):
            if stripped.startswith(prefix):
                said.append(stripped[len(prefix) :])
                break
    return said


# -- servers a page needs from elsewhere -------------------------------------------------------


@contextlib.contextmanager
def oauth_server(namespace: dict[str, Any]) -> Iterator[list[tuple[str, str]]]:
    """guides/oauth.md: a real authorization server and an OAuth-protected MCP server (in front
    of a Runtime with ``echo``); ``webbrowser.open`` is played by a browser that follows the
    redirect to the client's loopback listener."""
    from snodo.server import Runtime
    from tests.support.oauth_servers import Browser, oauth_setup

    runtime = Runtime("protected", "1.0")
    runtime.add_tool("echo", lambda args, ctx: args["text"])
    browser = Browser()
    with oauth_setup(runtime) as (_auth, rs):
        namespace.update(browser=browser)
        yield [
            ('"https://mcp.example.com/mcp"', repr(rs.url)),
            ("authorize=webbrowser.open", "authorize=browser"),
        ]
    browser.join()


#: Pages whose blocks need a server the reader has elsewhere: the set-up and its substitutions.
SETUP: dict[str, Callable[[dict[str, Any]], contextlib.AbstractContextManager[Any]]] = {
    "guides/oauth.md": oauth_server,
}


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh cwd with ``python`` (this interpreter) first on ``PATH``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python = bin_dir / "python"
    python.write_text(f'#!/bin/sh\nexec "{PYTHON}" "$@"\n', encoding="utf-8")
    python.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def close_all(namespace: dict[str, Any]) -> None:
    """Close every client, fleet and server a page left open."""
    for value in namespace.values():
        if isinstance(value, (snodo.Client, snodo.Fleet)) or type(value).__name__ == "HttpServer":
            value.close()


def run_page(path: Path) -> dict[str, Any]:
    """Run every block of ``path`` in order; the namespace they shared."""
    name = page_name(path)
    namespace: dict[str, Any] = {"__name__": "docs"}
    setup = SETUP.get(name, lambda ns: contextlib.nullcontext([]))
    try:
        with setup(namespace) as pairs:
            used: set[str] = set()
            for line, title, code in page_blocks(path):
                if title is not None:
                    Path(title).parent.mkdir(parents=True, exist_ok=True)
                    Path(title).write_text(code, encoding="utf-8")
                    continue
                here = [(old, new) for old, new in pairs if old in code]
                used.update(old for old, _ in here)
                code = substituted(code, *here)
                printed = run(code, namespace, f"{name}:{line}")
                assert printed.splitlines() == expected_output(code), f"{name}:{line} printed"
            unused = [old for old, _ in pairs if old not in used]
            assert not unused, f"{name} no longer contains {unused}"
    finally:
        close_all(namespace)
    return namespace


@pytest.mark.parametrize("page", pages(), ids=page_name)
def test_page_examples(page: Path, workdir: Path) -> None:
    """The page's python blocks run in order; each prints what its ``# >`` lines say."""
    run_page(page)


def test_every_page_with_examples_is_run() -> None:
    """The pages with python blocks are the tutorial, guides, explanations, the home page and
    the README; a page listed in ``SETUP`` exists; every block of a page is run or written (none
    skipped); every page of the site with python blocks is run here or by the tour's module."""
    names = {page_name(p) for p in pages()}
    assert {"index.md", "tutorial/index.md", "guides/daemon.md", "guides/oauth.md"} <= names
    assert {"README.md", "guides/testing.md"} <= names
    assert set(SETUP) <= names
    for page in pages():
        text = page.read_text(encoding="utf-8")
        python = [b for b in FENCE.finditer(text) if b.group("lang") == "python"]
        assert len(python) == text.count("```python"), f"{page}: a python block is not fenced"
        assert all(any(b[2] == p.group("code") for b in page_blocks(page)) for p in python)


def test_every_public_name_has_a_documented_reference_entry() -> None:
    """Each public name of snodo, snodo.aio, snodo.oauth and snodo.server has an entry on its
    reference page (generated from ``__all__``) and a docstring that says what and why."""
    pytest.importorskip("griffe")  # the docs extra
    spec = importlib.util.spec_from_file_location(
        "public_names", DOCS / "hooks" / "public_names.py"
    )
    assert spec is not None and spec.loader is not None
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    for module, page in hook.PAGES.items():
        expanded = hook.expand((DOCS / page).read_text(encoding="utf-8"))
        for name in __import__(module, fromlist=["__all__"]).__all__:
            assert f"::: {module}.{name}\n" in expanded, f"{module}.{name} has no entry"
    assert hook.missing_docstrings() == []
