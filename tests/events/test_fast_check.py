"""The quick schema check against jsonschema (the reference): sound, and exact on plain
JSON values; validate_document still accepts and rejects exactly what jsonschema does."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from retrieval_lib import bundled
from retrieval_lib.errors import SchemaError
from retrieval_lib.events.document import (
    _quick_check,
    find_documents,
    load_document,
    load_schema,
    minimal_document,
    validate_document,
)
from retrieval_lib.events.fast_check import UnsupportedSchema, compile_check
from retrieval_lib.normalize import normalize_paths

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "csb"
REFERENCE = jsonschema.Draft202012Validator(load_schema())

#: Values put in place of every field; 2.0 is an integral float (a JSON Schema integer
#: that the quick check leaves to the full validator).
PALETTE: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    7,
    1.5,
    -0.5,
    2.0,
    math.nan,
    "",
    "x",
    "1.2",
    "merged",
    "file_read",
    "argument",
    [],
    ["x"],
    [1],
    [None],
    {},
    {"symbol": "s"},
    {"file": "f", "line_start": 1, "line_end": 2},
]


@pytest.fixture(scope="module")
def documents(tmp_path_factory) -> list[dict[str, Any]]:
    roots = [bundled.examples_dir()] + ([CORPUS] if CORPUS.is_dir() else [])
    docs = []
    for root in roots:
        out = tmp_path_factory.mktemp("docs")
        normalize_paths([root / "runs"], root / "benchmarks", out=out, workers=1)
        docs.extend(load_document(p, validate=False) for p in find_documents([out]))
    assert len(docs) >= 21
    return docs


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key/index path in ``value`` (lists: their first two items only)."""
    found = []
    if isinstance(value, dict):
        for key, item in value.items():
            found.append((*prefix, key))
            found.extend(_paths(item, (*prefix, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value[:2]):
            found.append((*prefix, index))
            found.extend(_paths(item, (*prefix, index)))
    return found


def _parent(doc: Any, path: tuple) -> Any:
    for step in path[:-1]:
        doc = doc[step]
    return doc


def _mutations(doc: dict[str, Any]):
    """The document with one field replaced by each palette value, deleted, or joined by
    an unknown key."""
    for path in _paths(doc):
        for value in PALETTE:
            mutated = copy.deepcopy(doc)
            _parent(mutated, path)[path[-1]] = value
            yield path, repr(value), mutated
        if isinstance(path[-1], str):
            mutated = copy.deepcopy(doc)
            del _parent(mutated, path)[path[-1]]
            yield path, "deleted", mutated
            mutated = copy.deepcopy(doc)
            _parent(mutated, path)["zz_unknown"] = 1
            yield path, "unknown key beside", mutated


def _has_integral_float(value: Any) -> bool:
    if isinstance(value, float):
        return value.is_integer()
    if isinstance(value, dict):
        return any(_has_integral_float(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_integral_float(v) for v in value)
    return False


def test_the_shipped_schema_compiles():
    assert _quick_check() is not None


def test_every_document_normalisation_writes_takes_the_quick_path(documents):
    quick = compile_check(load_schema())
    for doc in [*documents, minimal_document(run_id="r", task_name="t", config_name="c")]:
        assert REFERENCE.is_valid(doc)
        assert quick(doc)


def _richest(documents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A few documents that between them hold every optional block (small events lists)."""
    chosen: list[dict[str, Any]] = []
    wanted = [
        lambda d: d["ground_truth"].get("symbols"),
        lambda d: d["ground_truth"].get("chunks"),
        lambda d: d["ground_truth"].get("expected_edit_files") is not None,
        lambda d: any(e.get("file_ranges") for e in d["events"][:2]),
        lambda d: any(e.get("created_files") for e in d["events"][:2]),
        lambda d: d["summary"]["first_ground_truth_hit_step"] is not None,
    ]
    for has in wanted:
        found = next((d for d in documents if has(d)), None)
        if found is not None and found not in chosen:
            chosen.append(found)
    return chosen or documents[:1]


def test_quick_check_equals_jsonschema_on_every_single_field_mutation(documents):
    """Sound everywhere (True only for valid documents) and exact on plain JSON values;
    validate_document accepts and rejects exactly what jsonschema does."""
    quick = compile_check(load_schema())
    docs = [
        {**d, "events": d["events"][:2]} for d in _richest(documents)
    ]  # two events carry every event rule
    checked = rejected = 0
    for doc in docs:
        for path, what, mutated in _mutations(doc):
            expected = REFERENCE.is_valid(mutated)
            got = quick(mutated)
            where = f"{'/'.join(map(str, path))} = {what}"
            if got:
                assert expected, f"quick check accepted an invalid document: {where}"
            elif not _has_integral_float(mutated):
                assert not expected, f"quick check refused a valid plain document: {where}"
            version = mutated.get("schema_version")
            if isinstance(version, str) and version.startswith("1."):
                if expected:
                    validate_document(mutated)
                else:
                    with pytest.raises(SchemaError):
                        validate_document(mutated)
            checked += 1
            rejected += not expected
    assert checked > 2000 and 0.2 < rejected / checked < 0.95


def test_quick_check_defers_integral_floats_and_subclasses_to_the_full_validator():
    doc = minimal_document(run_id="r", task_name="t", config_name="c")
    quick = compile_check(load_schema())

    class Name(str):
        pass

    for variant in (
        {**doc, "events": [_event(step_index=2.0)]},
        {**doc, "provenance": {**doc["provenance"], "run_id": Name("r")}},
    ):
        assert not quick(variant)
        assert REFERENCE.is_valid(variant)
        validate_document(variant)  # accepted through the full validator


def test_compile_check_refuses_keywords_it_does_not_implement():
    for schema in (
        {"type": "object", "oneOf": [{"type": "string"}]},
        {"properties": {"a": {"$ref": "#/x"}}},
        {"type": "strings"},
        {"enum": [1, 2]},
        {"type": "object", "additionalProperties": False},
    ):
        with pytest.raises(UnsupportedSchema):
            compile_check(schema)


def test_compile_check_follows_json_schema_semantics_on_small_schemas():
    check = compile_check(
        {
            "type": "object",
            "required": ["v"],
            "properties": {
                "v": {"type": "string", "pattern": "^1\\.[0-9]+$"},
                "n": {"type": ["number", "null"], "minimum": 0},
                "e": {"enum": ["a", None]},
                "l": {"type": "array", "items": {"type": "integer"}},
            },
            "additionalProperties": {"type": "integer"},
        }
    )
    assert check({"v": "1.2", "n": 0.5, "e": None, "l": [1, 2], "extra": 3})
    assert check({"v": "1.2", "n": math.nan})  # NaN < 0 is false, as jsonschema sees it
    for bad in (
        {},
        {"v": "2.0"},
        {"v": "1.2", "n": -1},
        {"v": "1.2", "e": "b"},
        {"v": "1.2", "l": [1, True]},
        {"v": "1.2", "extra": "x"},
        {"v": 1.2},
    ):
        assert not check(bad), bad


def _event(**changes: Any) -> dict[str, Any]:
    event = {
        "step_index": 0,
        "tool_name": "Read",
        "tool_category": "file_read",
        "is_mcp": False,
        "target_files": ["a.py"],
        "hits_ground_truth": False,
    }
    event.update(changes)
    return event
