"""Output schema validation: the JSON Schema libraries snodo could check ``structuredContent`` with.

    python benchmarks/output_schema.py [--rounds 5] [--calls 2000] [--runs 5]

``validate_output=True`` validates a tool result's ``structuredContent`` against the tool's
``outputSchema`` (docs/decisions/0041). The candidates, each measured in a fresh subprocess,
rounds interleaved:

* ``jsonschema`` (Python, drafts 3 to 2020-12; its ``referencing`` and ``rpds-py`` come along);
* ``jsonschema-rs`` (Rust, drafts 4 to 2020-12);
* ``fastjsonschema`` (generates Python code; drafts 4, 6 and 7 only, **no 2020-12**: it gets
  the draft-07 spelling of the same schemas, ``definitions`` for ``$defs``, for orientation);
* the floor: ``json.loads`` of the same ``structuredContent`` as text, and a hand-written check
  of the same rules in plain Python.

Two schemas: a typical tool's (an object of five properties, three required, an enum and a
minimum) and a larger one (``$defs`` and ``$ref``, ``anyOf``, ``pattern``, ``uniqueItems``,
nested objects) checked against a result of 200 items (about 30 KB of JSON). Per library:
``import`` in a fresh interpreter (ms, median of ``--runs`` after a warm-up), compile (building
a validator from the schema, the schema checked against its meta-schema as snodo does: µs per
schema), validate (µs per valid result), and collecting every error of an invalid result (the
typical result with two errors; the larger one with three). Then where each installed wheel
runs (its tags). Nothing here is a target: the numbers choose the library.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from importlib import metadata
from typing import Any

from _common import machine, spread, version_of

LIBRARIES = ("jsonschema", "jsonschema-rs", "fastjsonschema", "floor")
#: The module each one is imported as.
MODULES = {
    "jsonschema": "jsonschema",
    "jsonschema-rs": "jsonschema_rs",
    "fastjsonschema": "fastjsonschema",
}

TYPICAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "temperature": {"type": "number"},
        "conditions": {"type": "string"},
        "humidity": {"type": "number", "minimum": 0, "maximum": 100},
        "unit": {"enum": ["celsius", "fahrenheit"]},
        "station": {"type": "string"},
    },
    "required": ["temperature", "conditions", "humidity"],
}
TYPICAL_RESULT: dict[str, Any] = {
    "temperature": 22.5,
    "conditions": "Partly cloudy",
    "humidity": 65,
    "unit": "celsius",
    "station": "EGLL",
}
#: Two errors: a wrong type and a missing required property.
TYPICAL_INVALID: dict[str, Any] = {"temperature": "warm", "conditions": "Partly cloudy"}

LARGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "$defs": {
        "money": {"type": "number", "minimum": 0},
        "category": {"enum": ["book", "tool", "food", "toy", "other"]},
        "dimensions": {
            "type": "object",
            "properties": {
                "width": {"$ref": "#/$defs/money"},
                "height": {"$ref": "#/$defs/money"},
                "unit": {"enum": ["mm", "cm", "m"]},
            },
            "required": ["width", "height"],
            "additionalProperties": False,
        },
    },
    "properties": {
        "total": {"type": "integer", "minimum": 0},
        "next": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "items": {
            "type": "array",
            "maxItems": 1000,
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "string", "pattern": "^[a-z]{3}-[0-9]+$"},
                    "name": {"type": "string", "minLength": 1, "maxLength": 200},
                    "price": {"$ref": "#/$defs/money"},
                    "category": {"$ref": "#/$defs/category"},
                    "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
                    "dimensions": {"$ref": "#/$defs/dimensions"},
                    "stock": {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "null"}]},
                },
                "required": ["id", "name", "price", "category"],
            },
        },
    },
    "required": ["total", "items"],
}
CATEGORIES = ["book", "tool", "food", "toy", "other"]
LARGE_RESULT: dict[str, Any] = {
    "total": 200,
    "next": None,
    "items": [
        {
            "id": f"sku-{i}",
            "name": f"Item number {i}",
            "price": 1.5 + i,
            "category": CATEGORIES[i % 5],
            "tags": ["new", f"t{i % 7}"],
            "dimensions": {"width": 10 + i, "height": 5.5, "unit": "cm"},
            "stock": None if i % 3 == 0 else i,
        }
        for i in range(200)
    ],
}
#: Three errors deep in the array: a wrong type, a missing property, an extra property.
LARGE_INVALID = copy.deepcopy(LARGE_RESULT)
LARGE_INVALID["items"][2]["price"] = "free"
del LARGE_INVALID["items"][50]["category"]
LARGE_INVALID["items"][150]["dimensions"]["depth"] = 3

SCHEMAS = {"typical": (TYPICAL_SCHEMA, TYPICAL_RESULT, TYPICAL_INVALID, 2)}
SCHEMAS["large"] = (LARGE_SCHEMA, LARGE_RESULT, LARGE_INVALID, 3)


def draft7(schema: Any) -> Any:
    """The draft-07 spelling of a schema here (``definitions`` for ``$defs``)."""
    text = (
        json.dumps(schema).replace('"$defs"', '"definitions"').replace("#/$defs/", "#/definitions/")
    )
    return {"$schema": "http://json-schema.org/draft-07/schema#", **json.loads(text)}


# -- the hand-written floor ---------------------------------------------------------------------


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_typical(value: Any) -> list[str]:
    """TYPICAL_SCHEMA's rules in plain Python."""
    if not isinstance(value, dict):
        return ["$: type"]
    errors = [
        f"$: required {key}"
        for key in ("temperature", "conditions", "humidity")
        if key not in value
    ]
    if "temperature" in value and not _number(value["temperature"]):
        errors.append("$.temperature: type")
    for key in ("conditions", "station"):
        if key in value and not isinstance(value[key], str):
            errors.append(f"$.{key}: type")
    if "humidity" in value:
        humidity = value["humidity"]
        if not _number(humidity) or not 0 <= humidity <= 100:
            errors.append("$.humidity: type or range")
    if "unit" in value and value["unit"] not in ("celsius", "fahrenheit"):
        errors.append("$.unit: enum")
    return errors


def check_large(value: Any) -> list[str]:
    """LARGE_SCHEMA's rules in plain Python (the pattern precompiled)."""
    import re

    pattern = re.compile("^[a-z]{3}-[0-9]+$")
    errors: list[str] = []
    if not isinstance(value, dict):
        return ["$: type"]
    errors += [f"$: required {key}" for key in ("total", "items") if key not in value]
    total = value.get("total", 0)
    if not isinstance(total, int) or isinstance(total, bool) or total < 0:
        errors.append("$.total")
    if "next" in value and not (value["next"] is None or isinstance(value["next"], str)):
        errors.append("$.next")
    items = value.get("items", [])
    if not isinstance(items, list) or len(items) > 1000:
        return [*errors, "$.items"]
    for i, item in enumerate(items):
        where = f"$.items[{i}]"
        if not isinstance(item, dict):
            errors.append(where)
            continue
        errors += [
            f"{where}: required {k}" for k in ("id", "name", "price", "category") if k not in item
        ]
        if "id" in item and not (isinstance(item["id"], str) and pattern.search(item["id"])):
            errors.append(f"{where}.id")
        name = item.get("name", "x")
        if not isinstance(name, str) or not 1 <= len(name) <= 200:
            errors.append(f"{where}.name")
        if "price" in item and not (_number(item["price"]) and item["price"] >= 0):
            errors.append(f"{where}.price")
        if "category" in item and item["category"] not in CATEGORIES:
            errors.append(f"{where}.category")
        tags = item.get("tags", [])
        if (
            not isinstance(tags, list)
            or not all(isinstance(t, str) for t in tags)
            or len(set(tags)) != len(tags)
        ):
            errors.append(f"{where}.tags")
        if "dimensions" in item:
            dims = item["dimensions"]
            if not isinstance(dims, dict) or set(dims) - {"width", "height", "unit"}:
                errors.append(f"{where}.dimensions")
            else:
                for key in ("width", "height"):
                    if key not in dims or not (_number(dims[key]) and dims[key] >= 0):
                        errors.append(f"{where}.dimensions.{key}")
                if "unit" in dims and dims["unit"] not in ("mm", "cm", "m"):
                    errors.append(f"{where}.dimensions.unit")
        stock = item.get("stock")
        if stock is not None and not (
            isinstance(stock, int) and not isinstance(stock, bool) and stock >= 0
        ):
            errors.append(f"{where}.stock")
    return errors


# -- the worker (runs in its own subprocess) ----------------------------------------------------


def _per_call(function: Callable[[], Any], calls: int) -> float:
    """µs per call of ``function`` over ``calls`` calls (after a tenth as many untimed)."""
    for _ in range(max(1, calls // 10)):
        function()
    started = time.perf_counter()
    for _ in range(calls):
        function()
    return (time.perf_counter() - started) / calls * 1e6


def _builders(
    library: str,
) -> tuple[Callable[[Any], Any], Callable[[Any, Any], bool], Callable[[Any, Any], int]]:
    """(compile(schema), is_valid(validator, value), count_errors(validator, value))."""
    if library == "jsonschema":
        import jsonschema

        def compile_(schema: Any) -> Any:
            cls = jsonschema.validators.validator_for(
                schema, default=jsonschema.Draft202012Validator
            )
            cls.check_schema(schema)
            return cls(schema)

        return compile_, lambda v, x: v.is_valid(x), lambda v, x: sum(1 for _ in v.iter_errors(x))
    if library == "jsonschema-rs":
        import jsonschema_rs

        def compile_rs(schema: Any) -> Any:
            return jsonschema_rs.validator_for(schema)

        return compile_rs, lambda v, x: v.is_valid(x), lambda v, x: sum(1 for _ in v.iter_errors(x))
    if library == "fastjsonschema":
        import fastjsonschema

        def valid(v: Any, x: Any) -> bool:
            try:
                v(x)
            except fastjsonschema.JsonSchemaValueException:
                return False
            return True

        # fastjsonschema stops at the first error: "every error" is that one.
        return (
            (lambda schema: fastjsonschema.compile(draft7(schema))),
            valid,
            lambda v, x: 0 if valid(v, x) else 1,
        )
    raise ValueError(library)


def run(library: str, calls: int) -> dict[str, Any]:
    """One round of one library: compile, validate and error-collection µs per schema."""
    out: dict[str, Any] = {}
    for name, case in SCHEMAS.items():
        n = calls if name == "typical" else max(10, calls // 50)
        measured = floor(name, case, n) if library == "floor" else timed(library, case, n)
        out.update({f"{name} {key}": value for key, value in measured.items()})
    return out


def floor(name: str, case: tuple[Any, Any, Any, int], n: int) -> dict[str, float]:
    """json.loads of the result as text, and the hand-written check of it."""
    _, valid, invalid, errors = case
    check = check_typical if name == "typical" else check_large
    text = json.dumps(valid)
    assert not check(valid) and len(check(invalid)) >= errors - 1, check(invalid)
    return {
        "json.loads": _per_call(lambda: json.loads(text), n),
        "validate": _per_call(lambda: check(valid), n),
        "errors": _per_call(lambda: check(invalid), n),
    }


def timed(library: str, case: tuple[Any, Any, Any, int], n: int) -> dict[str, float]:
    """One library on one schema: compile, validate, collect the errors."""
    schema, valid, invalid, errors = case
    compile_, is_valid, count = _builders(library)
    validator = compile_(schema)
    assert is_valid(validator, valid) and not is_valid(validator, invalid)
    if library != "fastjsonschema":
        assert count(validator, invalid) == errors, count(validator, invalid)
    compiles = max(5, n // 20) if library != "fastjsonschema" else max(5, n // 200)
    # A fresh copy each time, so that nothing a library keeps by identity is reused.
    pending = iter([copy.deepcopy(schema) for _ in range(compiles + compiles // 10 + 1)])
    return {
        "compile": _per_call(lambda: compile_(next(pending)), compiles),
        "validate": _per_call(lambda: is_valid(validator, valid), n),
        "errors": _per_call(lambda: count(validator, invalid), n),
    }


def import_ms(module: str, runs: int) -> list[float] | str:
    """``import module`` in ``runs`` fresh interpreters (ms), after one untimed warm-up."""
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    times: list[float] = []
    for i in range(runs + 1):
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
        )
        if done.returncode != 0:
            return done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed"
        if i:
            times.append(float(done.stdout.strip()) * 1000)
    return times


def wheel_tags(distribution: str) -> str:
    """The installed wheel's tags, or why there are none."""
    try:
        wheel = metadata.distribution(distribution).read_text("WHEEL") or ""
    except metadata.PackageNotFoundError:
        return "not installed"
    tags = [line.split(":", 1)[1].strip() for line in wheel.splitlines() if line.startswith("Tag:")]
    return ", ".join(tags) or "no WHEEL tags"


def measure(library: str, calls: int) -> dict[str, float] | str:
    """One round in a fresh subprocess, or an error text."""
    command = [sys.executable, __file__, "--worker", library, "--calls", str(calls)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    except subprocess.TimeoutExpired:
        return "timed out"
    if done.returncode != 0:
        return f"exit {done.returncode}: {done.stderr.strip()[-300:]}"
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds (one subprocess each)")
    parser.add_argument(
        "--calls", type=int, default=2000, help="validations of the typical result per round"
    )
    parser.add_argument("--runs", type=int, default=5, help="timed imports per library")
    parser.add_argument("--worker", choices=LIBRARIES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(run(args.worker, args.calls)))
        return 0

    print("JSON Schema libraries for checking structuredContent against outputSchema")
    print(f"machine: {machine()}")
    versions = ", ".join(f"{d} {version_of(d)}" for d in MODULES)
    print(f"{versions}; {args.rounds} rounds, {args.calls} typical validations per round\n")
    samples: dict[str, dict[str, list[float]]] = {lib: {} for lib in LIBRARIES}
    failed = False
    for _ in range(args.rounds):
        for library in LIBRARIES:
            outcome = measure(library, args.calls)
            if isinstance(outcome, str):
                print(f"{library}: FAILED: {outcome}")
                failed = True
                continue
            for key, value in outcome.items():
                samples[library].setdefault(key, []).append(value)

    def us(value: float) -> str:
        return f"{value:,.1f}" if value < 100 else f"{value:,.0f}"

    columns = [f"{s} {k}" for s in SCHEMAS for k in ("compile", "validate", "errors")]
    print(
        "µs, min / median / max over the rounds ('errors': collecting every error of an invalid result)"
    )
    print(f"{'library':<16}" + "".join(f"{c:>26}" for c in columns))
    for library in LIBRARIES:
        row = samples[library]
        if not row:
            continue
        cells = []
        for column in columns:
            schema, what = column.split(" ")
            key = f"{schema} {'json.loads' if library == 'floor' and what == 'compile' else what}"
            values = row.get(key)
            cells.append(spread(values, us) if values else "-")
        label = "floor" if library != "floor" else "floor (hand)"
        print(
            f"{(library if library != 'floor' else label):<16}" + "".join(f"{c:>26}" for c in cells)
        )
    print("(the floor's 'compile' column is json.loads of the same structuredContent as text)")
    print(
        "(fastjsonschema: the draft-07 spelling; it stops at the first error, so 'errors' is one)\n"
    )

    print(f"import in a fresh interpreter, ms (median of {args.runs}; min-max)")
    for library, module in MODULES.items():
        times = import_ms(module, args.runs)
        if isinstance(times, str):
            print(f"  {library:<16} FAILED: {times}")
            failed = True
            continue
        print(
            f"  {library:<16} {statistics.median(times):8.1f}   ({min(times):.1f}-{max(times):.1f})"
        )
    print("\ninstalled wheels (where each one runs)")
    for distribution in (*MODULES, "referencing", "rpds-py"):
        print(f"  {distribution:<16} {version_of(distribution):<10} {wheel_tags(distribution)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
