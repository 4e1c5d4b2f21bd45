"""A quick sound check of a value against the event document's JSON Schema.

:func:`compile_check` turns a JSON Schema that uses only the keywords of the shipped
document schema (``type``, ``required``, ``properties``, ``additionalProperties``,
``items``, ``enum``, ``minimum``, ``pattern``, and the annotations ``$schema``, ``$id``,
``title``, ``description``) into a function ``check(value) -> bool``. A schema with any
other keyword is refused when it is compiled, so the schema file stays the contract: a new
keyword there must be taught here (or the full validator alone is used).

The check is **sound, not complete**: ``True`` means the value is valid against the
schema; ``False`` means "not sure". It compares exact JSON types (``type(v) is str``), so
a subclass, an integral float (``1.0`` is a JSON Schema integer), a numpy scalar or a
tuple gives ``False`` even where the schema accepts it, and
:func:`retrieval_lib.events.document.validate_document` then asks the full validator,
which also writes the error message. The documents normalisation builds hold plain JSON
types only, so their check is one pass over plain dicts and lists: about a third of the
generated ``fastjsonschema`` code's time (which builds a set of each object's keys and
tests every property name).

Examples
--------
>>> check = compile_check({"type": "object", "required": ["a"],
...                        "properties": {"a": {"type": "integer", "minimum": 0}}})
>>> check({"a": 1}), check({"a": -1}), check({}), check({"a": True})
(True, False, False, False)
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

__all__ = ["UnsupportedSchema", "compile_check"]

#: Keywords that only annotate (no effect on validity).
_ANNOTATIONS = frozenset({"$schema", "$id", "title", "description"})
_KEYWORDS = frozenset(
    {
        "type",
        "required",
        "properties",
        "additionalProperties",
        "items",
        "enum",
        "minimum",
        "pattern",
    }
)
#: JSON types as the exact Python types ``orjson``/``json`` decode them to.
_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
    "object": (dict,),
    "array": (list,),
}
#: Enum members compared by equality only when of these exact types (``1 == True``
#: and ``1 == 1.0`` would otherwise blur JSON's distinctions).
_ENUM_TYPES = frozenset({str, type(None)})

#: ``(exact types allowed, further check or None)``.
Rule = tuple[frozenset[type], Callable[[Any], bool] | None]


class UnsupportedSchema(ValueError):
    """The schema uses a keyword (or a form of one) the quick check does not implement."""


def compile_check(schema: dict[str, Any]) -> Callable[[Any], bool]:
    """Compile ``schema`` into ``check(value) -> bool`` (``True``: certainly valid).

    Raises
    ------
    UnsupportedSchema
        The schema uses a keyword other than those listed in the module docstring, a
        ``type`` name JSON Schema does not define, or an enum with a member that is not
        a string or null.
    """
    types, extra = _rule(schema, "#")

    def check(value: Any) -> bool:
        if type(value) not in types:
            return False
        return extra is None or extra(value)

    return check


def _rule(schema: Any, where: str) -> Rule:
    if schema is True or schema == {}:
        return frozenset(t for ts in _TYPES.values() for t in ts), None
    if not isinstance(schema, dict):
        raise UnsupportedSchema(f"{where}: a schema must be an object, got {schema!r}")
    unknown = set(schema) - _KEYWORDS - _ANNOTATIONS
    if unknown:
        raise UnsupportedSchema(f"{where}: keyword(s) {sorted(unknown)} not supported")
    types = _allowed_types(schema, where)
    checks: list[Callable[[Any], bool]] = []
    if "enum" in schema:
        members = schema["enum"]
        if not isinstance(members, list) or any(type(m) not in _ENUM_TYPES for m in members):
            raise UnsupportedSchema(f"{where}: only enums of strings and null are supported")
        types &= _ENUM_TYPES
        allowed = frozenset(members)
        checks.append(allowed.__contains__)
    if "minimum" in schema:
        minimum = schema["minimum"]
        if type(minimum) not in (int, float):
            raise UnsupportedSchema(f"{where}: minimum must be a number")
        checks.append(_minimum_check(minimum))
    if "pattern" in schema:
        checks.append(_pattern_check(re.compile(schema["pattern"])))
    if "properties" in schema or "required" in schema or "additionalProperties" in schema:
        checks.append(_object_check(schema, where))
    if "items" in schema:
        checks.append(_array_check(_rule(schema["items"], f"{where}/items")))
    return types, _all_of(checks)


def _allowed_types(schema: dict[str, Any], where: str) -> frozenset[type]:
    named = schema.get("type")
    if named is None:
        return frozenset(t for ts in _TYPES.values() for t in ts)
    names = named if isinstance(named, list) else [named]
    try:
        return frozenset(t for name in names for t in _TYPES[name])
    except (KeyError, TypeError):
        raise UnsupportedSchema(f"{where}: unknown type {named!r}") from None


def _all_of(checks: list[Callable[[Any], bool]]) -> Callable[[Any], bool] | None:
    if not checks:
        return None
    if len(checks) == 1:
        return checks[0]
    return lambda value: all(check(value) for check in checks)


def _minimum_check(minimum: float) -> Callable[[Any], bool]:
    # applies to numbers only (as in JSON Schema); ``not <`` so that NaN passes as there
    def check(value: Any) -> bool:
        return type(value) not in (int, float) or not value < minimum

    return check


def _pattern_check(pattern: re.Pattern[str]) -> Callable[[Any], bool]:
    # applies to strings only; JSON Schema patterns are not anchored (``search``)
    def check(value: Any) -> bool:
        return type(value) is not str or pattern.search(value) is not None

    return check


def _object_check(schema: dict[str, Any], where: str) -> Callable[[Any], bool]:
    required = frozenset(schema.get("required", ()))
    properties = {
        name: _rule(sub, f"{where}/properties/{name}")
        for name, sub in schema.get("properties", {}).items()
    }
    additional = (
        _rule(schema["additionalProperties"], f"{where}/additionalProperties")
        if "additionalProperties" in schema
        else None
    )
    rule_of = properties.get
    known = frozenset(properties)
    # (name, exact type) pairs the properties allow: an object whose names are all known
    # has its types checked in one C-level ``issuperset`` over ``zip(names, types)``
    pairs = frozenset((name, t) for name, (types, _) in properties.items() for t in types)
    extras = tuple((name, extra) for name, (_, extra) in properties.items() if extra is not None)
    missing = object()

    def check(value: Any) -> bool:
        if type(value) is not dict:
            return True  # the keywords apply to objects only
        names = value.keys()
        if not names >= required:
            return False
        if additional is None and names <= known:
            if not pairs.issuperset(zip(names, map(type, value.values()), strict=True)):
                return False
            for name, further in extras:
                item = value.get(name, missing)
                if item is not missing and not further(item):
                    return False
            return True
        for key, item in value.items():
            rule = rule_of(key, additional)
            if rule is None:
                continue
            if type(item) not in rule[0]:
                return False
            extra = rule[1]
            if extra is not None and not extra(item):
                return False
        return True

    return check


def _array_check(rule: Rule) -> Callable[[Any], bool]:
    types, extra = rule

    def check(value: Any) -> bool:
        if type(value) is not list:
            return True  # ``items`` applies to arrays only
        if not types.issuperset(map(type, value)):
            return False
        return extra is None or all(map(extra, value))

    return check
