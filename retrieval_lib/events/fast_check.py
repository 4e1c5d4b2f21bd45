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
types only. Like ``fastjsonschema`` it generates one Python function, but looks each
property up once and tests exact types against frozensets.

Examples
--------
>>> check = compile_check({"type": "object", "required": ["a"],
...                        "properties": {"a": {"type": "integer", "minimum": 0}}})
>>> check({"a": 1}), check({"a": -1}), check({}), check({"a": True})
(True, False, False, False)
"""

from __future__ import annotations

import itertools
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
    writer = _Writer()
    writer.emit(schema, "value", 1, "#")
    # the constants (and ``type``) as defaults: local variables, the fastest to load
    names = ", ".join(f"{name}={name}" for name in ["type", *writer.constants])
    source = f"def check(value, {names}):\n" + "\n".join(writer.lines) + "\n    return True\n"
    namespace: dict[str, Any] = {"type": type, **writer.constants}
    exec(compile(source, "<retrieval_lib.events.fast_check>", "exec"), namespace)  # noqa: S102
    check: Callable[[Any], bool] = namespace["check"]
    check.__doc__ = source  # what it does, for whoever reads it
    return check


_ANY = frozenset(t for types in _TYPES.values() for t in types)


class _Missing:
    """The type of the value :func:`compile_check`'s checks read for an absent property."""


class _Writer:
    """Writes the statements of one check function; constants go in its namespace."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.constants: dict[str, Any] = {"_MISSING": _Missing()}
        self._ids = itertools.count()

    def constant(self, value: Any) -> str:
        name = f"_C{next(self._ids)}"
        self.constants[name] = value
        return name

    def variable(self) -> str:
        return f"v{next(self._ids)}"

    def line(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    def type_test(self, depth: int, value: str, types: frozenset[type]) -> None:
        only, *more = types
        test = f"not in {self.constant(types)}" if more else f"is not {self.constant(only)}"
        self.line(depth, f"if type({value}) {test}: return False")

    def emit(self, schema: Any, var: str, depth: int, where: str) -> None:
        """Statements that ``return False`` unless ``var`` is valid against ``schema``."""
        if schema is True or schema == {}:
            return
        if not isinstance(schema, dict):
            raise UnsupportedSchema(f"{where}: a schema must be an object, got {schema!r}")
        unknown = set(schema) - _KEYWORDS - _ANNOTATIONS
        if unknown:
            raise UnsupportedSchema(f"{where}: keyword(s) {sorted(unknown)} not supported")
        types = _allowed_types(schema, where)
        if "enum" in schema:
            members = schema["enum"]
            if not isinstance(members, list) or any(type(m) not in _ENUM_TYPES for m in members):
                raise UnsupportedSchema(f"{where}: only enums of strings and null are supported")
            types &= _ENUM_TYPES
        if types != _ANY:
            self.type_test(depth, var, types)
        if "enum" in schema:
            members = self.constant(frozenset(schema["enum"]))
            self.line(depth, f"if {var} not in {members}: return False")
        if "minimum" in schema:
            minimum = schema["minimum"]
            if type(minimum) not in (int, float):
                raise UnsupportedSchema(f"{where}: minimum must be a number")
            # numbers only (as in JSON Schema); ``<`` so that NaN passes as it does there
            numbers = frozenset({int, float})
            guard = "" if types <= numbers else f"type({var}) in {self.constant(numbers)} and "
            self.line(depth, f"if {guard}{var} < {minimum!r}: return False")
        if "pattern" in schema:
            pattern = self.constant(re.compile(schema["pattern"]))
            # strings only; JSON Schema patterns are not anchored (``search``)
            self.line(
                depth,
                f"if type({var}) is str and {pattern}.search({var}) is None: return False",
            )
        if "properties" in schema or "required" in schema or "additionalProperties" in schema:
            self._object(schema, var, depth, where, types)
        if "items" in schema:
            self._array(schema["items"], var, depth, f"{where}/items", types)

    def _object(
        self, schema: dict[str, Any], var: str, depth: int, where: str, types: frozenset[type]
    ) -> None:
        start = len(self.lines)
        guarded = types != {dict}
        if guarded:
            self.line(depth, f"if type({var}) is dict:")  # the keywords apply to objects only
            depth += 1
        required = frozenset(schema.get("required", ()))
        if required:
            self.line(depth, f"if not {var}.keys() >= {self.constant(required)}: return False")
        properties = schema.get("properties", {})
        for name, sub in properties.items():
            item, at = self.variable(), f"{where}/properties/{name}"
            optional = name not in required  # a required one is there (checked above)
            if isinstance(sub, dict) and set(sub) - _ANNOTATIONS == {"type"}:
                # the type alone, in one test: an absent property reads as a _Missing
                kinds = _allowed_types(sub, at)
                if kinds != _ANY:
                    value = f"{var}.get({name!r}, _MISSING)" if optional else f"{var}[{name!r}]"
                    self.type_test(depth, value, kinds | {_Missing} if optional else kinds)
                continue
            if optional:
                self.line(depth, f"{item} = {var}.get({name!r}, _MISSING)")
                self.line(depth, f"if {item} is not _MISSING:")
            else:
                self.line(depth, f"{item} = {var}[{name!r}]")
            before = len(self.lines)
            self.emit(sub, item, depth + optional, at)
            if len(self.lines) == before:  # any value will do
                del self.lines[-1 - optional :]
        if "additionalProperties" in schema:
            known = self.constant(frozenset(properties))
            key, item = self.variable(), self.variable()
            self.line(depth, f"for {key}, {item} in {var}.items():")
            self.line(depth + 1, f"if {key} in {known}: continue")
            before = len(self.lines)
            self.emit(schema["additionalProperties"], item, depth + 1, f"{where}/additional")
            if len(self.lines) == before:
                del self.lines[-2:]
        if guarded and len(self.lines) == start + 1:  # nothing to check inside
            del self.lines[start:]

    def _array(self, items: Any, var: str, depth: int, where: str, types: frozenset[type]) -> None:
        start = len(self.lines)
        guarded = types != {list}
        if guarded:
            self.line(depth, f"if type({var}) is list:")  # ``items`` applies to arrays only
            depth += 1
        if isinstance(items, dict) and set(items) - _ANNOTATIONS <= {"type"}:
            # a list of scalars by type alone: one C-level pass over the item types
            item_types = _allowed_types(items, where)
            if item_types != _ANY:
                allowed = self.constant(item_types)
                self.line(depth, f"if not {allowed}.issuperset(map(type, {var})): return False")
        else:
            item = self.variable()
            self.line(depth, f"for {item} in {var}:")
            before = len(self.lines)
            self.emit(items, item, depth + 1, where)
            if len(self.lines) == before:
                del self.lines[-1:]
        if guarded and len(self.lines) == start + 1:
            del self.lines[start:]


def _allowed_types(schema: dict[str, Any], where: str) -> frozenset[type]:
    named = schema.get("type")
    if named is None:
        return _ANY
    names = named if isinstance(named, list) else [named]
    try:
        return frozenset(t for name in names for t in _TYPES[name])
    except (KeyError, TypeError):
        raise UnsupportedSchema(f"{where}: unknown type {named!r}") from None
