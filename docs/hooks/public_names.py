"""A MkDocs hook: the reference pages list every public name from the modules' ``__all__``.

A reference page holds a marker ``<!-- public names: MODULE -->``; the hook replaces it with one
mkdocstrings entry per name of ``MODULE.__all__``, so a new public name cannot be left out of
the site. ``missing_docstrings`` is the check the build and ``tests/test_docs_site.py`` share: a
public name whose docstring is missing or too short to say what and why fails both.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import re
from typing import Any

#: The modules whose public names the reference documents, and their pages.
PAGES = {
    "snodo": "reference/snodo.md",
    "snodo.aio": "reference/aio.md",
    "snodo.oauth": "reference/oauth.md",
    "snodo.server": "reference/server.md",
}

MARKER = re.compile(r"<!-- public names: ([\w.]+) -->")

#: The fewest words a public name's docstring may have: a line of what, and of why or when.
MIN_WORDS = 8


def public_names(module: str) -> list[str]:
    """``module.__all__``, in its own order."""
    return list(importlib.import_module(module).__all__)


def entry(module: str, name: str) -> str:
    """The Markdown of one reference entry: a mkdocstrings block for ``module.name``."""
    return f"::: {module}.{name}\n"


def expand(markdown: str) -> str:
    """``markdown`` with each marker replaced by the entries of that module's public names."""

    def entries(match: re.Match[str]) -> str:
        module = match.group(1)
        return "\n".join(entry(module, name) for name in public_names(module))

    return MARKER.sub(entries, markdown)


def docstring(module: str, name: str) -> str:
    """The docstring the reference shows for ``module.name`` (griffe's, as mkdocstrings reads it:
    attributes too), or ``""``."""
    inner = module.removeprefix("snodo").lstrip(".")
    obj: Any = _package()[f"{inner}.{name}" if inner else name]
    return inspect.cleandoc(obj.docstring.value) if obj.docstring else ""


@functools.cache
def _package() -> Any:
    """The ``snodo`` package as griffe reads it (from the sources, aliases resolved)."""
    import griffe

    return griffe.load("snodo", search_paths=["."], resolve_aliases=True)


def missing_docstrings() -> list[str]:
    """Every public name whose docstring is missing or shorter than ``MIN_WORDS`` words."""
    missing = []
    for module in PAGES:
        for name in public_names(module):
            if len(docstring(module, name).split()) < MIN_WORDS:
                missing.append(f"{module}.{name}")
    return missing


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """MkDocs event: expand the markers of the reference pages."""
    return expand(markdown)


def on_pre_build(config: Any) -> None:
    """MkDocs event: fail the build when a public name has no docstring that says enough."""
    from mkdocs.exceptions import PluginError

    missing = missing_docstrings()
    if missing:
        raise PluginError(
            f"public names without a docstring of {MIN_WORDS}+ words: {', '.join(missing)}"
        )
