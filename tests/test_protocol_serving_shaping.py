"""``snodo.protocol.serving.shaping``: the fields each version's schema defines."""

from __future__ import annotations

from snodo.protocol.dialects import DIALECTS, SUPPORTED_VERSIONS
from snodo.protocol.serving.shaping import ANY_STRUCTURED_CONTENT, FIELDS, shape

TOOL = {
    "name": "t",
    "title": "T",
    "icons": [{"src": "https://x/i.png"}],
    "execution": {"taskSupport": "optional"},
    "inputSchema": {"type": "object"},
    "extra": 1,
}


def test_every_version_has_a_table_for_every_kind() -> None:
    assert set(FIELDS) == set(SUPPORTED_VERSIONS)
    kinds = {frozenset(table) for table in FIELDS.values()}
    assert kinds == {
        frozenset({"Implementation", "Tool", "Resource", "ResourceTemplate", "Prompt"})
    }


def test_session_era_results_drop_fields_their_schema_does_not_define() -> None:
    assert shape("2025-06-18", "Tool", TOOL) == {
        "name": "t",
        "title": "T",
        "inputSchema": {"type": "object"},
    }
    assert "execution" in shape("2025-11-25", "Tool", TOOL)
    assert "icons" in shape("2025-11-25", "Tool", TOOL)
    assert "execution" not in shape("2026-07-28", "Tool", TOOL)
    assert shape("2025-06-18", "Implementation", {"name": "n", "version": "1", "icons": []}) == {
        "name": "n",
        "version": "1",
    }


def test_shape_returns_a_new_dict_and_leaves_its_input_alone() -> None:
    tool = dict(TOOL)
    shaped = shape("2026-07-28", "Tool", tool)
    shaped["name"] = "changed"
    assert tool == TOOL and "extra" not in shaped


def test_only_the_stateless_era_allows_any_structured_content() -> None:
    stateless = {v for v, d in DIALECTS.items() if d.stateless}
    assert set(ANY_STRUCTURED_CONTENT) == stateless
