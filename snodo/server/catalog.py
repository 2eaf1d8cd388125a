"""What a :class:`~snodo.server.Runtime` serves: its definitions (tools, resources, resource
templates, prompts, the completion handler) and the per-version list pages built from them.

A :class:`Catalog` is changed only through its Runtime (which tells the change listeners);
dispatch reads it through the Runtime's read interface. The per-version list views are built
lazily after a change, and each page is encoded once and decoded into fresh dicts per request
(a handler's caller may mutate what it gets).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal
from urllib.parse import unquote

import orjson

from snodo.protocol.serving.cursors import page_bounds
from snodo.protocol.serving.shaping import shape

if TYPE_CHECKING:
    from snodo.server.context import Context

__all__ = [
    "LIST_KEYS",
    "CacheHint",
    "Catalog",
    "CompletionFn",
    "ListKey",
    "PromptDef",
    "PromptFn",
    "ResourceDef",
    "ResourceFn",
    "TemplateDef",
    "TemplateFn",
    "ToolDef",
    "ToolFn",
    "compile_template",
]

ToolFn = Callable[[dict[str, Any], "Context"], Any]


@dataclass(frozen=True, slots=True)
class CacheHint:
    """``ttlMs`` and ``cacheScope`` for cacheable 2026-07-28 results: how long a client may
    keep a listing or a resource, and whether it may share it between users."""

    ttl_ms: int = 0
    scope: Literal["public", "private"] = "private"

    def __post_init__(self) -> None:
        if not isinstance(self.ttl_ms, int) or isinstance(self.ttl_ms, bool) or self.ttl_ms < 0:
            raise ValueError(f"CacheHint.ttl_ms must be an integer >= 0, got {self.ttl_ms!r}")
        if self.scope not in ("public", "private"):
            raise ValueError(f"CacheHint.scope must be 'public' or 'private', got {self.scope!r}")


ResourceFn = Callable[["Context"], Any]
TemplateFn = Callable[[str, dict[str, str], "Context"], Any]
PromptFn = Callable[[dict[str, str], "Context"], Any]
CompletionFn = Callable[[dict[str, Any], dict[str, Any], "dict[str, Any] | None", "Context"], Any]

ListKey = Literal["tools", "resources", "resourceTemplates", "prompts"]


@dataclass(frozen=True, slots=True)
class ToolDef:
    """A registered tool: its handler, its ``Tool`` definition and its required arguments."""

    name: str
    fn: ToolFn
    definition: dict[str, Any]
    required: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ResourceDef:
    """A registered resource at one URI."""

    uri: str
    fn: ResourceFn
    definition: dict[str, Any]
    mime_type: str | None


@dataclass(frozen=True, slots=True)
class TemplateDef:
    """A registered resource template (RFC 6570 level 1)."""

    uri_template: str
    fn: TemplateFn
    definition: dict[str, Any]
    mime_type: str | None
    pattern: re.Pattern[str]
    names: tuple[str, ...]

    def match(self, uri: str) -> dict[str, str] | None:
        """The template variables when ``uri`` matches (values percent-decoded), else ``None``."""
        m = self.pattern.fullmatch(uri)
        if m is None:
            return None
        return {name: unquote(m.group(i + 1)) for i, name in enumerate(self.names)}


@dataclass(frozen=True, slots=True)
class PromptDef:
    """A registered prompt: its handler, its ``Prompt`` definition and its required arguments."""

    name: str
    fn: PromptFn
    definition: dict[str, Any]
    required: tuple[str, ...]


_VAR: Final = re.compile(r"\{([A-Za-z0-9_.%]+)\}")


def compile_template(uri_template: str) -> tuple[re.Pattern[str], tuple[str, ...]]:
    """RFC 6570 level 1: ``{var}`` expressions, each matching ``[^/]+``."""
    parts: list[str] = []
    names: list[str] = []
    pos = 0
    for m in _VAR.finditer(uri_template):
        parts.append(re.escape(uri_template[pos : m.start()]))
        if m.group(1) in names:
            raise ValueError(f"duplicate variable {m.group(1)!r} in {uri_template!r}")
        names.append(m.group(1))
        parts.append("([^/]+)")
        pos = m.end()
    parts.append(re.escape(uri_template[pos:]))
    literal = _VAR.sub("", uri_template)
    if "{" in literal or "}" in literal:
        raise ValueError(f"only level-1 URI templates ({{var}}) are supported: {uri_template!r}")
    return re.compile("".join(parts)), tuple(names)


#: The lists dispatch pages: result key -> (schema definition, cursor kind).
LIST_KEYS: Final[dict[ListKey, tuple[str, str]]] = {
    "tools": ("Tool", "t"),
    "resources": ("Resource", "r"),
    "resourceTemplates": ("ResourceTemplate", "rt"),
    "prompts": ("Prompt", "p"),
}


class _View:
    """One list shaped for one version, with pages encoded on demand."""

    __slots__ = ("items", "pages")

    def __init__(self, items: tuple[dict[str, Any], ...]) -> None:
        self.items = items
        self.pages: dict[int, bytes] = {}


class Catalog:
    """The definitions of one Runtime, by name or URI, and their list views."""

    __slots__ = (
        "_generation",
        "_lock",
        "_views",
        "completion",
        "page_size",
        "prompts",
        "resources",
        "templates",
        "tools",
    )

    def __init__(self, page_size: int) -> None:
        self.page_size = page_size
        self.tools: dict[str, ToolDef] = {}
        self.resources: dict[str, ResourceDef] = {}
        self.templates: dict[str, TemplateDef] = {}
        self.prompts: dict[str, PromptDef] = {}
        self.completion: CompletionFn | None = None
        self._lock = threading.Lock()
        self._generation = 0
        self._views: dict[tuple[str, str], _View] = {}

    def put(self, table: dict[str, Any], key: str, definition: Any) -> None:
        """Add or replace one definition of ``table`` (one of this catalog's dicts)."""
        with self._lock:
            table[key] = definition
            self._changed()

    def remove(self, table: dict[str, Any], key: str) -> None:
        """Remove one definition; ``KeyError`` if there is none by that key."""
        with self._lock:
            del table[key]
            self._changed()

    def set_completion(self, fn: CompletionFn | None) -> None:
        """Install (or, with ``None``, remove) the completion handler."""
        with self._lock:
            self.completion = fn
            self._changed()

    def _changed(self) -> None:  # under the lock
        self._generation += 1
        self._views = {}

    def match_template(self, uri: str) -> tuple[TemplateDef, dict[str, str]] | None:
        """The first template matching ``uri`` and its variables, or ``None``."""
        for candidate in list(self.templates.values()):
            variables = candidate.match(uri)
            if variables is not None:
                return candidate, variables
        return None

    def page(
        self, key: ListKey, version: str, cursor: object
    ) -> tuple[list[dict[str, Any]], str | None]:
        """One page of a list as fresh dicts, and the cursor of the next page (-32602 for a
        cursor that is not one of this list's)."""
        view = self._view(key, version)
        start, end, next_cursor = page_bounds(
            LIST_KEYS[key][1], cursor, len(view.items), self.page_size
        )
        data = view.pages.get(start)
        if data is None:
            data = orjson.dumps(view.items[start:end])
            view.pages[start] = data
        items: list[dict[str, Any]] = orjson.loads(data)
        return items, next_cursor

    def _view(self, key: ListKey, version: str) -> _View:
        view = self._views.get((key, version))
        if view is None:
            generation = self._generation
            sources: dict[str, Mapping[str, ToolDef | ResourceDef | TemplateDef | PromptDef]] = {
                "tools": self.tools,
                "resources": self.resources,
                "resourceTemplates": self.templates,
                "prompts": self.prompts,
            }
            kind = LIST_KEYS[key][0]
            view = _View(
                tuple(shape(version, kind, d.definition) for d in list(sources[key].values()))
            )
            with self._lock:
                if self._generation == generation:
                    self._views[(key, version)] = view
        return view
