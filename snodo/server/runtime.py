"""The server configuration: a :class:`Runtime` holds tools, resources, resource templates,
prompts and a completion handler, plus identity, enabled versions, paging and cache hints.

A Runtime starts no thread and owns no connection. :func:`snodo.server.dispatcher` serves one
decoded JSON-RPC message against it; the direct client, the stdio server and the HTTP server
all call that function.

Definitions may be added or removed while the runtime is being served; the per-version list
views are rebuilt lazily after a change.
"""

from __future__ import annotations

import inspect
import os
import secrets
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar, overload

import orjson

from snodo.protocol.dialects import DIALECTS, SUPPORTED_VERSIONS, Dialect
from snodo.protocol.serving.shaping import shape
from snodo.server.catalog import (
    CacheHint,
    Catalog,
    PromptDef,
    PromptFn,
    ResourceDef,
    ResourceFn,
    TemplateDef,
    TemplateFn,
    ToolDef,
    ToolFn,
    compile_template,
)
from snodo.server.subscriptions import SubscriptionSource

if TYPE_CHECKING:
    from snodo.server.context import Context
    from snodo.server.skills import Skill, SkillSet
    from snodo.server.tasks import TaskStore

#: A request handler of an extension: ``handler(runtime, ctx, params) -> result``.
ExtensionHandler = Callable[[Any, "Context", dict[str, Any]], dict[str, Any]]

__all__ = ["HINT_FOR_METHOD", "HINT_KEYS", "CacheHint", "Runtime"]

F = TypeVar("F", bound=Callable[..., Any])

#: The cache-hint keys and the methods each one covers (2026-07-28).
HINT_KEYS: Final = ("discover", "tools", "prompts", "resources")
HINT_FOR_METHOD: Final[dict[str, str]] = {
    "server/discover": "discover",
    "tools/list": "tools",
    "prompts/list": "prompts",
    "resources/list": "resources",
    "resources/templates/list": "resources",
    "resources/read": "resources",
}


def _json_copy(value: Any) -> Any:
    return orjson.loads(orjson.dumps(value))


def _doc(fn: Callable[..., Any]) -> str | None:
    if not (inspect.isfunction(fn) or inspect.ismethod(fn)):
        return None
    doc = inspect.getdoc(fn)
    if not doc:
        return None
    return doc.split("\n\n", 1)[0].strip() or None


def _put(target: dict[str, Any], key: str, value: Any) -> None:
    if value is not None:
        target[key] = value


class Runtime:
    """A server's configuration: its tools, resources, prompts and completions, declared in a
    few lines and served by :func:`snodo.server.dispatch` in process (``snodo.direct``), over
    stdio or over HTTP (``python -m snodo.server``)."""

    def __init__(
        self,
        name: str = "snodo-server",
        version: str = "0.1.0",
        *,
        title: str | None = None,
        instructions: str | None = None,
        versions: Sequence[str] = SUPPORTED_VERSIONS,
        page_size: int = 100,
        cache_hints: Mapping[str, CacheHint] | None = None,
        state_secret: bytes | None = None,
        description: str | None = None,
        icons: Sequence[Mapping[str, Any]] | None = None,
        website_url: str | None = None,
        subscriptions: bool = True,
        logging: bool = False,
    ) -> None:
        if isinstance(versions, str):
            versions = (versions,)
        enabled = tuple(versions)
        if not enabled:
            raise ValueError("versions must name at least one protocol version")
        for v in enabled:
            if v not in DIALECTS:
                raise ValueError(
                    f"unsupported protocol version {v!r}; snodo speaks {SUPPORTED_VERSIONS}"
                )
        if len(set(enabled)) != len(enabled):
            raise ValueError(f"duplicate protocol versions in {enabled!r}")
        if not isinstance(page_size, int) or isinstance(page_size, bool) or page_size < 1:
            raise ValueError("page_size must be a positive integer")
        hints = {key: CacheHint() for key in HINT_KEYS}
        for key, hint in (cache_hints or {}).items():
            if key not in hints:
                raise ValueError(f"unknown cache hint key {key!r}; expected one of {HINT_KEYS}")
            if not isinstance(hint, CacheHint):
                raise TypeError(f"cache_hints[{key!r}] must be a CacheHint")
            hints[key] = hint
        if state_secret is not None and (not isinstance(state_secret, bytes) or not state_secret):
            raise ValueError("state_secret must be non-empty bytes")

        #: Offer logging: the ``logging`` capability, ``logging/setLevel`` and ``ctx.log``.
        self.logging = logging
        self.enabled_versions: tuple[str, ...] = enabled
        self.instructions = instructions
        self.page_size = page_size
        self.cache_hints: Mapping[str, CacheHint] = hints
        self.state_secret: bytes = state_secret or secrets.token_bytes(32)

        # The read interface of dispatch and the servers (attributes, not properties: they
        # are read on every request). Read them; change the runtime through its methods.
        #: The enabled stateless-era dialects by version.
        self.stateless_dialects: Mapping[str, Dialect] = {
            v: DIALECTS[v] for v in enabled if DIALECTS[v].stateless
        }
        #: The enabled session-era dialects by version.
        self.session_dialects: Mapping[str, Dialect] = {
            v: DIALECTS[v] for v in enabled if not DIALECTS[v].stateless
        }
        #: The newest enabled session-era version: the counter-offer to an ``initialize`` that
        #: asks for a version the server does not speak.
        self.latest_session_version: str | None = (
            max(self.session_dialects) if self.session_dialects else None
        )
        #: What this runtime serves.
        self.catalog = Catalog(page_size)

        info: dict[str, Any] = {"name": name, "version": version}
        _put(info, "title", title)
        _put(info, "description", description)
        _put(info, "icons", _json_copy(list(icons)) if icons is not None else None)
        _put(info, "websiteUrl", website_url)
        self._server_info = info
        self._info_by_version = {v: shape(v, "Implementation", info) for v in enabled}
        self._info_flat = "icons" not in info

        #: Called with the kind of every change (:meth:`add_change_listener`).
        self._change_listeners: list[Callable[[str], None]] = []
        #: Open subscriptions (listen streams and session-era session channels); None when
        #: the runtime serves none (``subscriptions=False``: listen is -32601).
        self.subscription_source: SubscriptionSource | None = None
        if subscriptions:
            self.subscription_source = SubscriptionSource()
            self.add_change_listener(self.subscription_source.list_changed)
        #: The extensions this runtime offers: identifier -> settings, advertised under
        #: ``capabilities.extensions``.
        self.extensions: dict[str, dict[str, Any]] = {}
        #: The extensions' requests, by method (served beside the version's own methods).
        self.extension_handlers: dict[str, ExtensionHandler] = {}
        #: The task store (the Tasks extension); None until a tool is declared with ``task=``
        #: or :meth:`enable_tasks` is called.
        self.tasks: TaskStore | None = None
        #: The skills served (the Skills extension); None until :meth:`add_skill`.
        self.skills: SkillSet | None = None

    # -- identity --------------------------------------------------------------------------

    @property
    def server_info(self) -> dict[str, Any]:
        """``Implementation`` of this server (a fresh copy)."""
        return _json_copy(self._server_info)  # type: ignore[no-any-return]

    def server_info_for(self, version: str) -> dict[str, Any]:
        """``serverInfo`` shaped for ``version``, as a fresh dict."""
        info = self._info_by_version[version]
        fresh: dict[str, Any] = dict(info) if self._info_flat else _json_copy(info)
        return fresh

    @property
    def capabilities(self) -> dict[str, Any]:
        """Server capabilities derived from what is registered (a fresh dict)."""
        caps: dict[str, Any] = {}
        notifies = self.subscription_source is not None
        catalog = self.catalog
        if catalog.tools:
            caps["tools"] = {"listChanged": True} if notifies else {}
        if catalog.resources or catalog.templates:
            caps["resources"] = {"subscribe": True, "listChanged": True} if notifies else {}
        if catalog.prompts:
            caps["prompts"] = {"listChanged": True} if notifies else {}
        if catalog.completion is not None:
            caps["completions"] = {}
        if self.logging:
            caps["logging"] = {}
        if self.extensions:
            caps["extensions"] = _json_copy(self.extensions)
        return caps

    @property
    def stateless_versions(self) -> tuple[str, ...]:
        """The enabled stateless-era versions."""
        return tuple(self.stateless_dialects)

    @property
    def session_versions(self) -> tuple[str, ...]:
        """The enabled session-era versions."""
        return tuple(self.session_dialects)

    @property
    def serves_resources(self) -> bool:
        """True when a resource or a resource template is registered."""
        catalog = self.catalog
        return bool(catalog.resources or catalog.templates)

    # -- tools -----------------------------------------------------------------------------

    @overload
    def tool(self, name: F, /) -> F: ...

    @overload
    def tool(
        self,
        name: str | None = None,
        *,
        description: str | None = None,
        input_schema: Mapping[str, Any] | None = None,
        output_schema: Mapping[str, Any] | None = None,
        title: str | None = None,
        annotations: Mapping[str, Any] | None = None,
        icons: Sequence[Mapping[str, Any]] | None = None,
        task: Literal["optional", "required"] | None = None,
        prelude: bool = False,
    ) -> Callable[[F], F]: ...

    def tool(
        self,
        name: str | F | None = None,
        *,
        description: str | None = None,
        input_schema: Mapping[str, Any] | None = None,
        output_schema: Mapping[str, Any] | None = None,
        title: str | None = None,
        annotations: Mapping[str, Any] | None = None,
        icons: Sequence[Mapping[str, Any]] | None = None,
        task: Literal["optional", "required"] | None = None,
        prelude: bool = False,
    ) -> F | Callable[[F], F]:
        """Decorator: register ``fn(arguments, ctx)`` as a tool (name defaults to ``fn.__name__``,
        description to the first paragraph of its docstring)."""
        if callable(name):
            self.add_tool(name.__name__, name)
            return name

        def register(fn: F) -> F:
            self.add_tool(
                name or fn.__name__,
                fn,
                description=description,
                input_schema=input_schema,
                output_schema=output_schema,
                title=title,
                annotations=annotations,
                icons=icons,
                task=task,
                prelude=prelude,
            )
            return fn

        return register

    def add_tool(
        self,
        name: str,
        fn: ToolFn,
        *,
        description: str | None = None,
        input_schema: Mapping[str, Any] | None = None,
        output_schema: Mapping[str, Any] | None = None,
        title: str | None = None,
        annotations: Mapping[str, Any] | None = None,
        icons: Sequence[Mapping[str, Any]] | None = None,
        task: Literal["optional", "required"] | None = None,
        prelude: bool = False,
    ) -> None:
        """Register (or replace) a tool.

        ``task="optional"`` runs it as a task (the Tasks extension) for a client that opts in
        and as a plain call otherwise; ``task="required"`` refuses a plain call (-32021).
        ``prelude=True``: on the request the tool runs until it calls ``ctx.start_task()``
        (gathering input in multi round-trip rounds first), then goes on as a task.

        ``fn(arguments, ctx)`` returns a ``CallToolResult`` dict (one with ``"content"``), a
        ``str`` (one text block), or any other JSON value (``structuredContent`` plus a text
        block of its JSON). Raising ``McpError`` answers with that JSON-RPC error; any other
        exception becomes a tool error result (``isError: true``).
        """
        if not isinstance(name, str) or not name:
            raise ValueError("tool name must be a non-empty string")
        schema = _json_copy(dict(input_schema)) if input_schema is not None else {"type": "object"}
        if schema.get("type") != "object":
            raise ValueError(f"tool {name!r}: input_schema must have type 'object'")
        required = schema.get("required", [])
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise ValueError(f"tool {name!r}: input_schema 'required' must be a list of strings")
        definition: dict[str, Any] = {"name": name}
        _put(definition, "title", title)
        _put(definition, "description", description if description is not None else _doc(fn))
        definition["inputSchema"] = schema
        if output_schema is not None:
            definition["outputSchema"] = _json_copy(dict(output_schema))
        if annotations is not None:
            definition["annotations"] = _json_copy(dict(annotations))
        if icons is not None:
            definition["icons"] = _json_copy(list(icons))
        from snodo.server.tasks import declared

        tasking = declared(task, prelude)
        if tasking is not None:
            self.enable_tasks().modes[name] = tasking
        elif self.tasks is not None:
            self.tasks.modes.pop(name, None)
        self.catalog.put(self.catalog.tools, name, ToolDef(name, fn, definition, tuple(required)))
        self._changed("tools")

    def remove_tool(self, name: str) -> None:
        """Remove a tool; ``KeyError`` if there is none by that name."""
        self.catalog.remove(self.catalog.tools, name)
        if self.tasks is not None:
            self.tasks.modes.pop(name, None)
        self._changed("tools")

    # -- extensions ------------------------------------------------------------------------

    def enable_tasks(
        self,
        *,
        max_tasks: int | None = None,
        ttl: float | Literal["keep"] | None = "keep",
        poll_interval: float | Literal["keep"] | None = "keep",
    ) -> TaskStore:
        """Offer the Tasks extension (done by the first ``task=`` tool) and return the store;
        arguments given set its bound (``max_tasks``), how long a task is kept after its
        creation (``ttl`` seconds, None: until :meth:`close_tasks`) and the poll interval it
        suggests (seconds)."""
        from snodo.protocol import tasks as wire
        from snodo.server.tasks import TaskStore, methods

        store = self.tasks
        if store is None:
            store = self.tasks = TaskStore(self)
            self.extensions[wire.EXTENSION] = {}
            self.extension_handlers.update(methods(store))
        if max_tasks is not None or ttl != "keep" or poll_interval != "keep":
            fresh = TaskStore(
                self,
                max_tasks=store.max_tasks if max_tasks is None else max_tasks,
                ttl=store.ttl if ttl == "keep" else ttl,
                poll_interval=store.poll_interval if poll_interval == "keep" else poll_interval,
            )
            store.max_tasks, store.ttl, store.poll_interval = (
                fresh.max_tasks,
                fresh.ttl,
                fresh.poll_interval,
            )
        return store

    def add_skill(
        self,
        name: str,
        description: str,
        body: str = "",
        *,
        files: Mapping[str, str | bytes] | None = None,
        path: str | None = None,
        frontmatter: Mapping[str, Any] | None = None,
    ) -> Skill:
        """Serve a skill (the Skills extension, SEP-2640) at ``skill://<path>/SKILL.md``.

        ``path`` defaults to ``name`` (its last segment must be the name: lowercase letters,
        digits, hyphens); ``SKILL.md`` is written from ``name``, ``description``, any other
        ``frontmatter`` fields and ``body``; ``files`` maps paths inside the skill (``a/b.md``)
        to their contents. Every file becomes a resource; ``skills/list``, ``skills/get`` and
        ``resources/directory/read`` serve the rest. Adding a skill at the same path replaces it.
        """
        return self._skill_set().add(
            name, description, body, files=files, path=path, frontmatter=frontmatter
        )

    def add_skill_directory(
        self, directory: str | os.PathLike[str], path: str | None = None
    ) -> Skill:
        """Serve the skill in ``directory`` (its ``SKILL.md`` and every file below it, hidden
        ones left out) as :meth:`add_skill` does, the frontmatter read from the file: flat
        ``key: value`` lines, values plain or in JSON (ValueError for other YAML)."""
        return self._skill_set().add_directory(directory, path)

    def _skill_set(self) -> SkillSet:
        from snodo.server.skills import DIRECTORY_READ, EXTENSION, GET, LIST, SkillSet

        skills = self.skills
        if skills is None:
            skills = self.skills = SkillSet(self)
            self.extensions[EXTENSION] = {"directoryRead": True}
            self.extension_handlers.update(
                {LIST: skills.list, GET: skills.get, DIRECTORY_READ: skills.directory_read}
            )
        return skills

    def remove_skill(self, uri: str) -> None:
        """Stop serving the skill whose ``SKILL.md`` is at ``uri``; ``KeyError`` if none is."""
        if self.skills is None:
            raise KeyError(uri)
        self.skills.remove(uri)

    def close_tasks(self) -> None:
        """Cancel every running task and wait for its tool to return (a server shutting
        down); no task is created afterwards."""
        if self.tasks is not None:
            self.tasks.close()

    # -- resources -------------------------------------------------------------------------

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        title: str | None = None,
        icons: Sequence[Mapping[str, Any]] | None = None,
    ) -> Callable[[F], F]:
        """Decorator: register ``fn(ctx)`` as the resource at ``uri``.

        ``fn`` returns ``str`` (text contents), ``bytes`` (base64 blob contents), a dict (one
        contents item; ``uri`` filled in) or a list of such dicts.
        """

        def register(fn: F) -> F:
            self.add_resource(
                uri,
                fn,
                name=name,
                description=description,
                mime_type=mime_type,
                title=title,
                icons=icons,
            )
            return fn

        return register

    def add_resource(
        self,
        uri: str,
        fn: ResourceFn,
        *,
        name: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        title: str | None = None,
        icons: Sequence[Mapping[str, Any]] | None = None,
    ) -> None:
        if not isinstance(uri, str) or not uri:
            raise ValueError("resource uri must be a non-empty string")
        definition: dict[str, Any] = {"uri": uri, "name": name or getattr(fn, "__name__", uri)}
        _put(definition, "title", title)
        _put(definition, "description", description if description is not None else _doc(fn))
        _put(definition, "mimeType", mime_type)
        if icons is not None:
            definition["icons"] = _json_copy(list(icons))
        self.catalog.put(self.catalog.resources, uri, ResourceDef(uri, fn, definition, mime_type))
        self._changed("resources")

    def remove_resource(self, uri: str) -> None:
        self.catalog.remove(self.catalog.resources, uri)
        self._changed("resources")

    def resource_template(
        self,
        uri_template: str,
        *,
        name: str,
        description: str | None = None,
        mime_type: str | None = None,
        title: str | None = None,
        icons: Sequence[Mapping[str, Any]] | None = None,
    ) -> Callable[[F], F]:
        """Decorator: register ``fn(uri, variables, ctx)`` for URIs matching ``uri_template``
        (RFC 6570 level 1; each ``{var}`` matches ``[^/]+``, values percent-decoded)."""

        def register(fn: F) -> F:
            self.add_resource_template(
                uri_template,
                fn,
                name=name,
                description=description,
                mime_type=mime_type,
                title=title,
                icons=icons,
            )
            return fn

        return register

    def add_resource_template(
        self,
        uri_template: str,
        fn: TemplateFn,
        *,
        name: str,
        description: str | None = None,
        mime_type: str | None = None,
        title: str | None = None,
        icons: Sequence[Mapping[str, Any]] | None = None,
    ) -> None:
        pattern, names = compile_template(uri_template)
        definition: dict[str, Any] = {"uriTemplate": uri_template, "name": name}
        _put(definition, "title", title)
        _put(definition, "description", description if description is not None else _doc(fn))
        _put(definition, "mimeType", mime_type)
        if icons is not None:
            definition["icons"] = _json_copy(list(icons))
        self.catalog.put(
            self.catalog.templates,
            uri_template,
            TemplateDef(uri_template, fn, definition, mime_type, pattern, names),
        )
        self._changed("resources")

    def remove_resource_template(self, uri_template: str) -> None:
        self.catalog.remove(self.catalog.templates, uri_template)
        self._changed("resources")

    # -- prompts ---------------------------------------------------------------------------

    @overload
    def prompt(self, name: F, /) -> F: ...

    @overload
    def prompt(
        self,
        name: str | None = None,
        *,
        description: str | None = None,
        arguments: Sequence[str | Mapping[str, Any]] | None = None,
        title: str | None = None,
        icons: Sequence[Mapping[str, Any]] | None = None,
    ) -> Callable[[F], F]: ...

    def prompt(
        self,
        name: str | F | None = None,
        *,
        description: str | None = None,
        arguments: Sequence[str | Mapping[str, Any]] | None = None,
        title: str | None = None,
        icons: Sequence[Mapping[str, Any]] | None = None,
    ) -> F | Callable[[F], F]:
        """Decorator: register ``fn(arguments, ctx)`` as a prompt.

        ``arguments`` lists ``PromptArgument`` dicts (``name``, ``description``, ``required``);
        a plain string is a required argument of that name. ``fn`` returns a list of messages,
        a ``GetPromptResult`` dict, or a ``str`` (one user text message).
        """
        if callable(name):
            self.add_prompt(name.__name__, name)
            return name

        def register(fn: F) -> F:
            self.add_prompt(
                name or fn.__name__,
                fn,
                description=description,
                arguments=arguments,
                title=title,
                icons=icons,
            )
            return fn

        return register

    def add_prompt(
        self,
        name: str,
        fn: PromptFn,
        *,
        description: str | None = None,
        arguments: Sequence[str | Mapping[str, Any]] | None = None,
        title: str | None = None,
        icons: Sequence[Mapping[str, Any]] | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError("prompt name must be a non-empty string")
        args: list[dict[str, Any]] = []
        for arg in arguments or ():
            entry = (
                {"name": arg, "required": True} if isinstance(arg, str) else _json_copy(dict(arg))
            )
            if not isinstance(entry.get("name"), str):
                raise ValueError(f"prompt {name!r}: every argument needs a name")
            args.append(entry)
        definition: dict[str, Any] = {"name": name}
        _put(definition, "title", title)
        _put(definition, "description", description if description is not None else _doc(fn))
        if args:
            definition["arguments"] = args
        if icons is not None:
            definition["icons"] = _json_copy(list(icons))
        required = tuple(a["name"] for a in args if a.get("required") is True)
        self.catalog.put(self.catalog.prompts, name, PromptDef(name, fn, definition, required))
        self._changed("prompts")

    def remove_prompt(self, name: str) -> None:
        self.catalog.remove(self.catalog.prompts, name)
        self._changed("prompts")

    # -- completion ------------------------------------------------------------------------

    def completion(self, fn: F) -> F:
        """Decorator: ``fn(ref, argument, context, ctx)`` answers ``completion/complete`` with a
        list of strings or a ``{"values", "total"?, "hasMore"?}`` dict (capped at 100 values)."""
        self.catalog.set_completion(fn)
        self._changed("completions")
        return fn

    def remove_completion(self) -> None:
        self.catalog.set_completion(None)
        self._changed("completions")

    # -- subscriptions ---------------------------------------------------------------------

    def resource_updated(self, uri: str) -> None:
        """Tell the subscribers of ``uri`` that it changed (``notifications/resources/updated``)."""
        if not isinstance(uri, str):
            raise TypeError("uri must be a string")
        if self.subscription_source is not None:
            self.subscription_source.resource_updated(uri)

    def close_subscriptions(self) -> None:
        """End every open listen stream gracefully (each gets its listen result)."""
        if self.subscription_source is not None:
            self.subscription_source.finish_all()

    # -- changes -------------------------------------------------------------------------

    def add_change_listener(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(kind)`` after every change: ``kind`` is "tools", "resources",
        "prompts" or "completions" (the hook list-changed notifications hang on)."""
        self._change_listeners.append(listener)

    def _changed(self, kind: str) -> None:
        for listener in list(self._change_listeners):
            listener(kind)

    def __repr__(self) -> str:
        return (
            f"Runtime(name={self._server_info['name']!r}, versions={self.enabled_versions!r}, "
            f"tools={len(self.catalog.tools)}, resources={len(self.catalog.resources)}, "
            f"templates={len(self.catalog.templates)}, prompts={len(self.catalog.prompts)})"
        )
