"""Skills served by a Runtime (SEP-2640, snodo.server.skills): the capability, skills/list,
skills/get, the SKILL.md resource and resources/directory/read, over direct dispatch and HTTP.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from snodo.server import Peer, Runtime, ServerSession, dispatch
from snodo.server.http_server import serve_http
from snodo.server.skills import EXTENSION, read_frontmatter, render_skill_md

V = "2026-07-28"
_ids = itertools.count(1)
GUIDE = "# Guide\n\nStep by step.\n"


def build() -> Runtime:
    rt = Runtime("skills-test", "1.0.0", versions=[V, "2025-11-25"], page_size=1)
    rt.add_skill(
        "pdf-tools",
        "Fill in and merge PDFs.",
        "# PDF tools\n",
        files={"docs/guide.md": GUIDE, "docs/deep/more.txt": "more", "logo.bin": b"\x00\xff"},
        frontmatter={"license": "MIT", "metadata": {"owner": "docs-team"}},
    )
    rt.add_skill("notes", "Release notes.", "Write them.", path="acme/notes")
    return rt


def _meta() -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }


class Direct:
    def __init__(self) -> None:
        self.rt = build()
        self.peer = Peer("direct", session=ServerSession())

    def send(self, message: dict[str, Any]) -> dict[str, Any]:
        reply = dispatch(self.rt, message, self.peer)
        assert reply is not None
        return reply

    def close(self) -> None:
        pass


class Http:
    def __init__(self) -> None:
        self.server = serve_http(build())

    def send(self, message: dict[str, Any]) -> dict[str, Any]:
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": V,
            "Mcp-Method": message["method"],
        }
        if message["method"] == "resources/read":
            headers["Mcp-Name"] = message["params"]["uri"]
        request = urllib.request.Request(
            self.server.url, json.dumps(message).encode(), headers, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                body = response.read()
        except urllib.error.HTTPError as exc:
            body = exc.read()
        reply: dict[str, Any] = json.loads(body)
        return reply

    def close(self) -> None:
        self.server.close()


@pytest.fixture(scope="module", params=["direct", "http"])
def over(request: pytest.FixtureRequest) -> Iterator[Any]:
    transport: Any = Direct() if request.param == "direct" else Http()
    yield transport
    transport.close()


def send(over: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    params = {**(params or {}), "_meta": _meta()}
    reply: dict[str, Any] = over.send(
        {"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": params}
    )
    return reply


def ok(over: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    reply = send(over, method, params)
    assert "result" in reply, reply
    result: dict[str, Any] = reply["result"]
    return result


def listing(over: Any) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    cursor = None
    for _ in range(10):
        page = ok(over, "skills/list", {"cursor": cursor} if cursor else {})
        assert "ttlMs" in page and "cacheScope" in page
        entries += page["skills"]
        cursor = page.get("nextCursor")
        if cursor is None:
            return entries
    raise AssertionError("skills/list did not end")


def test_the_extension_and_resources_are_declared(over: Any) -> None:
    caps = ok(over, "server/discover")["capabilities"]
    assert caps["extensions"][EXTENSION] == {"directoryRead": True}
    assert "resources" in caps


def test_skills_list_pages_whole_entries(over: Any) -> None:
    entries = listing(over)  # page_size=1: two pages
    assert [e["uri"] for e in entries] == [
        "skill://pdf-tools/SKILL.md",
        "skill://acme/notes/SKILL.md",
    ]
    pdf = entries[0]
    assert pdf["frontmatter"] == {
        "name": "pdf-tools",
        "description": "Fill in and merge PDFs.",
        "license": "MIT",
        "metadata": {"owner": "docs-team"},
    }
    files = {r["uri"]: r for r in pdf["resources"]}
    assert set(files) == {
        "skill://pdf-tools/SKILL.md",
        "skill://pdf-tools/docs/guide.md",
        "skill://pdf-tools/docs/deep/more.txt",
        "skill://pdf-tools/logo.bin",
    }
    guide = files["skill://pdf-tools/docs/guide.md"]
    assert guide["size"] == len(GUIDE.encode())
    assert guide["digest"] == "sha256:" + hashlib.sha256(GUIDE.encode()).hexdigest()


def test_skill_md_is_a_resource_matching_its_entry(over: Any) -> None:
    entry = listing(over)[0]
    read = ok(over, "resources/read", {"uri": entry["uri"]})["contents"][0]
    assert read["mimeType"] == "text/markdown"
    text = read["text"]
    assert text.startswith('---\nname: "pdf-tools"\n')
    assert text == render_skill_md(entry["frontmatter"], "# PDF tools\n")
    own = next(r for r in entry["resources"] if r["uri"] == entry["uri"])
    assert own["size"] == len(text.encode())
    assert own["digest"] == "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    listed = {r["uri"]: r for r in ok(over, "resources/list")["resources"]}
    assert listed[entry["uri"]]["name"] == "pdf-tools"
    assert listed[entry["uri"]]["description"] == "Fill in and merge PDFs."
    blob = ok(over, "resources/read", {"uri": "skill://pdf-tools/logo.bin"})["contents"][0]
    assert blob["blob"] == "AP8="


def test_skills_get(over: Any) -> None:
    got = ok(over, "skills/get", {"uri": "skill://acme/notes/SKILL.md"})
    assert got["skill"]["frontmatter"]["name"] == "notes"
    assert "nextCursor" not in got and "ttlMs" in got and "cacheScope" in got
    unknown = send(over, "skills/get", {"uri": "skill://nope/SKILL.md"})
    assert unknown["error"]["code"] == -32602


def test_directory_read(over: Any) -> None:
    root = ok(over, "resources/directory/read", {"uri": "skill://pdf-tools"})["resources"]
    assert {(r["uri"], r["mimeType"]) for r in root} == {
        ("skill://pdf-tools/docs", "inode/directory"),
        ("skill://pdf-tools/SKILL.md", "text/markdown"),
        ("skill://pdf-tools/logo.bin", "application/octet-stream"),
    }
    docs = ok(over, "resources/directory/read", {"uri": "skill://pdf-tools/docs/"})["resources"]
    assert [r["uri"] for r in docs] == [
        "skill://pdf-tools/docs/deep",
        "skill://pdf-tools/docs/guide.md",
    ]
    for not_a_directory in ("skill://pdf-tools/SKILL.md", "skill://pdf-tools/nope", "file:///"):
        reply = send(over, "resources/directory/read", {"uri": not_a_directory})
        assert reply["error"]["code"] == -32602, not_a_directory


def test_declaring_bad_skills_fails() -> None:
    rt = Runtime()
    for name in ("Bad", "-x", "a--b", ""):
        with pytest.raises(ValueError, match="skill name"):
            rt.add_skill(name, "d")
    with pytest.raises(ValueError, match="description"):
        rt.add_skill("ok", "")
    with pytest.raises(ValueError, match="ending in the name"):
        rt.add_skill("ok", "d", path="acme/other")
    with pytest.raises(ValueError, match="inside the skill"):
        rt.add_skill("ok", "d", files={"../x": "y"})
    rt.add_skill("ok", "d", files={"a.md": "1"})
    rt.add_skill("ok", "d2")  # replaced: its old file is gone
    assert set(rt.catalog.resources) == {"skill://ok/SKILL.md"}
    rt.remove_skill("skill://ok/SKILL.md")
    assert not rt.catalog.resources
    with pytest.raises(KeyError):
        rt.remove_skill("skill://ok/SKILL.md")


def test_a_skill_directory_on_disk(tmp_path: Path) -> None:
    skill = tmp_path / "csv-tools"
    (skill / "scripts").mkdir(parents=True)
    (skill / ".git").mkdir()
    manifest = (
        "---\n"
        "name: csv-tools\n"
        'description: "Clean CSV files: dedupe, sort"\n'
        "license: MIT\n"
        'metadata: {"version": "1.2"}\n'
        "---\n\n# CSV tools\n"
    )
    (skill / "SKILL.md").write_text(manifest)
    (skill / "scripts" / "clean.py").write_text("print('clean')\n")
    (skill / ".git" / "HEAD").write_text("ref: x\n")
    rt = Runtime(versions=[V])
    served = rt.add_skill_directory(skill, path="data/csv-tools")
    assert served.uri == "skill://data/csv-tools/SKILL.md"
    c = Direct()
    c.rt = rt
    entry = ok(c, "skills/get", {"uri": served.uri})["skill"]
    assert entry["frontmatter"] == {
        "name": "csv-tools",
        "description": "Clean CSV files: dedupe, sort",
        "license": "MIT",
        "metadata": {"version": "1.2"},
    }
    assert {r["uri"] for r in entry["resources"]} == {
        "skill://data/csv-tools/SKILL.md",
        "skill://data/csv-tools/scripts/clean.py",
    }
    read = ok(c, "resources/read", {"uri": served.uri})["contents"][0]
    assert read["text"] == manifest  # served as written


@pytest.mark.parametrize(
    "line",
    [
        "description: Use when: asked",  # not valid YAML as a plain scalar
        "description: yes # a comment",
        "tags:",  # a block list follows
        "  - a",
    ],
)
def test_frontmatter_beyond_flat_lines_is_refused(line: str) -> None:
    with pytest.raises(ValueError, match=r"SKILL\.md line"):
        read_frontmatter(f"---\nname: x\n{line}\n---\nbody\n")


def test_frontmatter_needs_its_block() -> None:
    with pytest.raises(ValueError, match="must begin"):
        read_frontmatter("# no frontmatter\n")
    assert read_frontmatter("---\nname: x\nn: 3\nok: null\n---\n") == {
        "name": "x",
        "n": 3,
        "ok": None,
    }
