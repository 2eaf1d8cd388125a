"""Skills served by a Runtime (the Skills extension, SEP-2640: ``io.modelcontextprotocol/skills``).

A skill is a directory of files whose root holds ``SKILL.md`` (YAML frontmatter with at least
``name`` and ``description``, then Markdown). :meth:`Runtime.add_skill` serves one under
``skill://<path>/``: every file is a resource (``SKILL.md`` as ``text/markdown``, named and
described from its frontmatter), ``skills/list`` and ``skills/get`` give each skill's entry (its
``SKILL.md`` URI, its frontmatter as JSON, and the ``{uri, digest, size}`` of every file), and
``resources/directory/read`` lists a skill directory's direct children (sub-directories as
``inode/directory``).

The frontmatter is written from the values given (each value as JSON, which is YAML), so the
file's frontmatter and the entry's are the same by construction.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol

import orjson

from snodo.protocol.errors import invalid_params

if TYPE_CHECKING:
    from snodo.server.catalog import CacheHint, ResourceFn
    from snodo.server.context import Context

__all__ = ["EXTENSION", "SKILL_FILE", "Skill", "SkillHost", "SkillSet"]

EXTENSION: Final = "io.modelcontextprotocol/skills"
SKILL_FILE: Final = "SKILL.md"
DIRECTORY_MIME: Final = "inode/directory"
SCHEME: Final = "skill://"
LIST: Final = "skills/list"
GET: Final = "skills/get"
DIRECTORY_READ: Final = "resources/directory/read"

#: The Agent Skills naming rule for a skill name (the final path segment).
NAME_RULE: Final = re.compile(r"^(?!.*--)[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?$")
_SEGMENT: Final = re.compile(r"^[A-Za-z0-9._~-]+$")
#: SEP-2640's limits: entries per skill and total bytes (servers SHOULD NOT exceed them).
MAX_FILES: Final = 512
MAX_BYTES: Final = 16 * 1024 * 1024

_MIME_BY_SUFFIX: Final = {
    ".md": "text/markdown",
    ".txt": "text/plain",
    ".py": "text/x-python",
    ".json": "application/json",
    ".sh": "text/x-shellscript",
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
    ".html": "text/html",
    ".csv": "text/csv",
}


def render_skill_md(frontmatter: Mapping[str, Any], body: str) -> str:
    """``SKILL.md`` text: a ``---`` frontmatter block (one ``key: <JSON>`` line per field, JSON
    being YAML) and the body."""
    lines = ["---"]
    for key, value in frontmatter.items():
        if not isinstance(key, str) or not re.match(r"^[A-Za-z_][A-Za-z0-9_-]*$", key):
            raise ValueError(f"frontmatter key {key!r} must be a plain identifier")
        lines.append(f"{key}: {orjson.dumps(value).decode()}")
    lines.append("---")
    text = "\n".join(lines) + "\n"
    return text + (body if body.endswith("\n") or not body else body + "\n")


def digest(data: bytes) -> str:
    """``sha256:{64 lowercase hex}`` of raw bytes."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _mime(path: str) -> str:
    for suffix, mime in _MIME_BY_SUFFIX.items():
        if path.endswith(suffix):
            return mime
    return "application/octet-stream"


@dataclass(frozen=True)
class Skill:
    """One served skill: where it lives, its frontmatter and its files (raw bytes by relative
    path, ``SKILL.md`` included)."""

    path: str
    frontmatter: Mapping[str, Any]
    files: Mapping[str, bytes]

    @property
    def root(self) -> str:
        """The skill directory's URI (``skill://<path>``)."""
        return SCHEME + self.path

    @property
    def uri(self) -> str:
        """The URI of its ``SKILL.md``."""
        return f"{self.root}/{SKILL_FILE}"

    def file_uri(self, relative: str) -> str:
        return f"{self.root}/{relative}"

    def entry(self) -> dict[str, Any]:
        """Its ``skills/list`` entry."""
        resources = [
            {"uri": self.file_uri(rel), "digest": digest(data), "size": len(data)}
            for rel, data in self.files.items()
        ]
        return {
            "uri": self.uri,
            "frontmatter": orjson.loads(orjson.dumps(self.frontmatter)),
            "resources": resources,
        }

    def children(self, directory: str) -> list[dict[str, Any]] | None:
        """The direct children of ``directory`` (relative, "" for the root) as resource
        entries; None when it is not a directory of this skill."""
        prefix = f"{directory}/" if directory else ""
        files: list[dict[str, Any]] = []
        dirs: dict[str, None] = {}
        found = not directory
        for rel in self.files:
            if not rel.startswith(prefix):
                continue
            found = True
            rest = rel[len(prefix) :]
            head, sep, _ = rest.partition("/")
            if sep:
                dirs.setdefault(head, None)
            else:
                uri = self.file_uri(rel)
                files.append({"uri": uri, "name": head, "mimeType": _mime(rel)})
        if not found:
            return None
        out = [
            {"uri": self.file_uri(prefix + name), "name": name, "mimeType": DIRECTORY_MIME}
            for name in dirs
        ]
        return out + files


class SkillHost(Protocol):
    """What a :class:`SkillSet` needs of its Runtime: resources to serve, its page size and
    its cache hints."""

    page_size: int
    cache_hints: Mapping[str, CacheHint]

    def add_resource(
        self,
        uri: str,
        fn: ResourceFn,
        *,
        name: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
    ) -> None: ...

    def remove_resource(self, uri: str) -> None: ...


class SkillSet:
    """The skills of one Runtime and the extension's handlers."""

    def __init__(self, runtime: SkillHost) -> None:
        self._runtime = runtime
        self.skills: dict[str, Skill] = {}  # by SKILL.md URI

    def add(
        self,
        name: str,
        description: str,
        body: str,
        *,
        files: Mapping[str, str | bytes] | None = None,
        path: str | None = None,
        frontmatter: Mapping[str, Any] | None = None,
    ) -> Skill:
        """Serve a skill (see :meth:`Runtime.add_skill`)."""
        _check_identity(name, description)
        fields: dict[str, Any] = {"name": name, "description": description}
        for key, value in (frontmatter or {}).items():
            if key in fields:
                raise ValueError(f"frontmatter {key!r} is given by its own argument")
            fields[key] = value
        contents: dict[str, bytes] = {SKILL_FILE: render_skill_md(fields, body).encode()}
        for rel, data in (files or {}).items():
            contents[_relative(rel)] = data.encode() if isinstance(data, str) else bytes(data)
        return self._serve(Skill(_where(name, path), fields, contents))

    def add_directory(self, directory: str | os.PathLike[str], path: str | None = None) -> Skill:
        """Serve the skill in ``directory`` (see :meth:`Runtime.add_skill_directory`)."""
        root = Path(directory)
        manifest = root / SKILL_FILE
        if not manifest.is_file():
            raise ValueError(f"{root} holds no {SKILL_FILE}")
        contents: dict[str, bytes] = {SKILL_FILE: manifest.read_bytes()}
        for file in sorted(root.rglob("*")):
            rel = file.relative_to(root).as_posix()
            if rel == SKILL_FILE or any(p.startswith(".") for p in rel.split("/")):
                continue  # hidden files and directories (.git) are not part of the skill
            if file.is_file():
                contents[_relative(rel)] = file.read_bytes()
        try:
            text = contents[SKILL_FILE].decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"{manifest} is not UTF-8") from None
        fields = read_frontmatter(text)
        name, description = fields.get("name"), fields.get("description")
        if not isinstance(name, str) or not isinstance(description, str):
            raise ValueError(f"{manifest}: the frontmatter needs name and description strings")
        _check_identity(name, description)
        return self._serve(Skill(_where(name, path), fields, contents))

    def _serve(self, skill: Skill) -> Skill:
        contents = skill.files
        if len(contents) > MAX_FILES or sum(len(d) for d in contents.values()) > MAX_BYTES:
            raise ValueError(f"a skill holds at most {MAX_FILES} files and {MAX_BYTES} bytes")
        rt = self._runtime
        if skill.uri in self.skills:
            self.remove(skill.uri)
        for rel, data in contents.items():
            text: str | bytes = data
            try:
                text = data.decode()
            except UnicodeDecodeError:
                pass
            if rel == SKILL_FILE:
                rt.add_resource(
                    skill.uri,
                    _constant(text),
                    name=skill.frontmatter["name"],
                    description=skill.frontmatter["description"],
                    mime_type="text/markdown",
                )
            else:
                rt.add_resource(
                    skill.file_uri(rel), _constant(text), name=rel, mime_type=_mime(rel)
                )
        self.skills[skill.uri] = skill
        return skill

    def remove(self, uri: str) -> None:
        """Stop serving the skill whose ``SKILL.md`` is at ``uri`` (KeyError when none is)."""
        skill = self.skills.pop(uri)
        for rel in skill.files:
            self._runtime.remove_resource(skill.file_uri(rel))

    # -- the handlers ----------------------------------------------------------------------

    def _cache(self, result: dict[str, Any], ctx: Context) -> dict[str, Any]:
        if ctx.stateless:
            hint = self._runtime.cache_hints["resources"]
            result["ttlMs"] = hint.ttl_ms
            result["cacheScope"] = hint.scope
        return result

    def list(self, rt: Any, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        """``skills/list``: every entry, a page at a time (an entry is never split)."""
        entries = list(self.skills.values())
        cursor = params.get("cursor")
        start = 0
        if cursor is not None:
            if type(cursor) is not str or not cursor.isdigit() or int(cursor) > len(entries):
                raise invalid_params(f"Invalid cursor: {cursor!r}")
            start = int(cursor)
        size = self._runtime.page_size
        page = entries[start : start + size]
        result: dict[str, Any] = {"skills": [s.entry() for s in page]}
        if start + size < len(entries):
            result["nextCursor"] = str(start + size)
        return self._cache(result, ctx)

    def get(self, rt: Any, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        """``skills/get``: one entry by its ``SKILL.md`` URI (-32602 for an unserved one)."""
        uri = params.get("uri")
        if type(uri) is not str:
            raise invalid_params("skills/get needs uri (a string)")
        skill = self.skills.get(uri)
        if skill is None:
            raise invalid_params(f"Unknown skill: {uri}", {"uri": uri})
        return self._cache({"skill": skill.entry()}, ctx)

    def directory_read(self, rt: Any, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        """``resources/directory/read``: a skill directory's direct children (-32602 for a URI
        that is not a served directory)."""
        uri = params.get("uri")
        if type(uri) is not str:
            raise invalid_params("resources/directory/read needs uri (a string)")
        target = uri.rstrip("/")
        for skill in self.skills.values():
            root = skill.root
            if target == root:
                children = skill.children("")
            elif target.startswith(root + "/"):
                children = skill.children(target[len(root) + 1 :])
            else:
                continue
            if children is not None:
                return {"resources": children}
        raise invalid_params(f"Not a directory: {uri}", {"uri": uri})


def _check_identity(name: str, description: str) -> None:
    if not isinstance(name, str) or not NAME_RULE.match(name):
        raise ValueError(
            f"skill name {name!r}: 1-64 lowercase letters, digits and hyphens "
            "(no leading, trailing or double hyphen)"
        )
    if not isinstance(description, str) or not description:
        raise ValueError("a skill needs a non-empty description")


def _where(name: str, path: str | None) -> str:
    """The skill path (``path``, default the name), checked: URI segments ending in the name."""
    where = path if path is not None else name
    segments = where.split("/")
    if segments[-1] != name or not all(_SEGMENT.match(s) for s in segments):
        raise ValueError(f"skill path {where!r} must be URI segments ending in the name {name!r}")
    return where


def _relative(rel: str) -> str:
    parts = rel.split("/")
    if rel == SKILL_FILE or not all(p and p not in (".", "..") for p in parts):
        raise ValueError(
            f"skill file path {rel!r} must be relative, inside the skill, not SKILL.md"
        )
    return rel


_FRONTMATTER: Final = re.compile(r"^---\r?\n([\s\S]*?)\r?\n---[ \t]*(?:\r?\n|$)")
_KEY_LINE: Final = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*):(?:[ \t]+(.*))?$")
_PLAIN_UNSAFE: Final = re.compile(r"(^[-?:,\[\]{}#&*!|>'\"%@`])|(: )|( #)|(:$)")
_YAML_SPECIAL: Final = re.compile(
    r"^(true|True|TRUE|false|False|FALSE|null|Null|NULL|~|[-+]?(\.inf|\.Inf|\.INF)|\.nan"
    r"|\.NaN|\.NAN|[-+]?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?|0x[0-9a-fA-F]+|0o[0-7]+)$"
)


def read_frontmatter(text: str) -> dict[str, Any]:
    """The frontmatter of a hand-written ``SKILL.md``, for the flat form most skills use: one
    ``key: value`` line per field, the value a plain string or JSON (quoted strings, numbers,
    booleans, null, flow ``{...}``/``[...]`` in JSON syntax). Anything else (block lists,
    nested mappings, YAML-only scalars) is refused rather than guessed: use ``add_skill``."""
    match = _FRONTMATTER.match(text[1:] if text.startswith("\ufeff") else text)
    if match is None:
        raise ValueError("SKILL.md must begin with a --- delimited frontmatter block")
    fields: dict[str, Any] = {}
    for number, line in enumerate(match.group(1).splitlines(), 2):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        found = _KEY_LINE.match(line.rstrip())
        if found is None or found.group(2) is None or not found.group(2).strip():
            raise ValueError(f"SKILL.md line {number}: only flat 'key: value' lines are read")
        key, raw = found.group(1), found.group(2).strip()
        try:
            value: Any = orjson.loads(raw)
        except orjson.JSONDecodeError:
            if _PLAIN_UNSAFE.search(raw) or _YAML_SPECIAL.match(raw):
                raise ValueError(
                    f"SKILL.md line {number}: {raw!r} is not a plain string; quote it as JSON"
                ) from None
            value = raw
        else:
            if isinstance(value, (int, float)) and not _YAML_SPECIAL.match(raw):
                raise ValueError(f"SKILL.md line {number}: {raw!r}: write numbers plainly")
        if key in fields:
            raise ValueError(f"SKILL.md line {number}: {key!r} is given twice")
        fields[key] = value
    return fields


def _constant(value: str | bytes) -> Any:
    def read(ctx: Any) -> str | bytes:
        return value

    return read
