"""snodo.protocol.output_schema: which results are checked, the schema bounds, and how a failed
rule is said (path and rule), for several rule kinds (issue 18 item 6, decision 0041)."""

from __future__ import annotations

import pytest

from snodo.protocol import output_schema as rules
from snodo.protocol.output_schema import Violation


@pytest.mark.parametrize(
    ("path", "said"),
    [
        ((), "$"),
        (("items", 2, "price"), "$.items[2].price"),
        (("two words",), "$['two words']"),
        (("it's",), "$['it\\'s']"),
        ((0, "_x1"), "$[0]._x1"),
    ],
)
def test_json_path(path: tuple[str | int, ...], said: str) -> None:
    assert rules.json_path(path) == said


@pytest.mark.parametrize(
    ("violation", "said"),
    [
        (Violation((), "type", {"types": ["number"]}, "x"), "type: expected number, got string"),
        (
            Violation((), "type", {"types": ["null", "string"]}, 1),
            "type: expected null or string, got integer",
        ),
        (Violation((), "required", {"property": "id"}, {}), "required: 'id'"),
        (
            Violation((), "additionalProperties", {"unexpected": ["y", "w"]}),
            "additionalProperties: unexpected 'y', 'w'",
        ),
        (Violation((), "enum", {"options": [1, "a"]}), 'enum: expected one of 1, "a"'),
        (Violation((), "const", {"expected_value": "x"}), 'const: expected "x"'),
        (Violation((), "maximum", {"limit": 100}), "maximum: expected <= 100"),
        (Violation((), "exclusiveMinimum", {"limit": 0}), "exclusiveMinimum: expected > 0"),
        (Violation((), "minLength", {"limit": 2}), "minLength: expected at least 2 characters"),
        (Violation((), "maxItems", {"limit": 1}), "maxItems: expected at most 1 items"),
        (Violation((), "pattern", {"pattern": "^z"}), 'pattern: expected to match "^z"'),
        (
            Violation((), "oneOf", {"matched": "several"}),
            "oneOf: matches more than one of its schemas",
        ),
        (Violation((), "anyOf", {}), "anyOf: matches none of its schemas"),
        (Violation((), "false", {}), "false: the schema allows no value here"),
        (
            Violation((), "dependentRequired", {}, None, "needs b\nmore"),
            "dependentRequired: needs b",
        ),
    ],
)
def test_rule(violation: Violation, said: str) -> None:
    assert rules.rule(violation) == said


def test_a_long_value_is_cut() -> None:
    said = rules.rule(Violation((), "const", {"expected_value": "x" * 500}))
    assert said.endswith("...") and len(said) < 100


def test_plan() -> None:
    schema = {"type": "object"}
    assert rules.plan({"structuredContent": {}}, None) == "skip"  # no outputSchema
    assert rules.plan({"content": [], "isError": True}, schema) == "skip"
    assert rules.plan("input required", schema) == "skip"
    assert rules.plan({"content": []}, schema) == "missing"
    assert rules.plan({"content": [], "structuredContent": None}, schema) == "validate"
    assert rules.schema_of({"name": "t"}) is None
    assert rules.schema_of({"name": "t", "outputSchema": schema}) is schema


def test_schema_bounds() -> None:
    assert rules.schema_bounds({"type": "object", "properties": {"a": {}}}) is None
    deep: dict[str, object] = {}
    node = deep
    for _ in range(rules.MAX_SCHEMA_DEPTH + 1):
        child: dict[str, object] = {}
        node["not"] = child
        node = child
    assert "deeper" in (rules.schema_bounds(deep) or "")
    wide = {"anyOf": [{} for _ in range(rules.MAX_SCHEMA_NODES + 1)]}
    assert "more than" in (rules.schema_bounds(wide) or "")


def test_the_errors_keep_the_result() -> None:
    result = {"structuredContent": {"a": "x"}}
    violations = [Violation(("a",), "type", {"types": ["number"]}, "x")] * 3
    error = rules.mismatch_error("t", violations, result)
    assert error.code == -32602 and error.data == result
    assert error.message.endswith("$.a: type: expected number, got string (and 2 more)")
    assert error.cause[2][0] == ("$.a", "type: expected number, got string")
    assert rules.missing_error("t", result).code == -32600
    assert rules.schema_error("t", "bad", result).cause == ("output_schema", "schema", "bad")
