"""The part of JSON Schema a golden answer format needs, checked without a dependency: types, properties, required,
additionalProperties, items, enum, const, lengths, bounds, pattern, anyOf/oneOf/allOf/not.

``check_schema`` refuses a schema that uses any other keyword (``$ref``, ``if``, ``format``, ...), so no rule of a
schema is ever skipped in silence; ``validate`` returns what is wrong with a value (empty: it complies).
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ragtrim.errors import ConfigError

TYPES = ("object", "array", "string", "number", "integer", "boolean", "null")
CHECKED = frozenset({
    "type", "properties", "required", "additionalProperties", "items", "enum", "const", "minLength", "maxLength",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minItems", "maxItems", "pattern", "anyOf",
    "oneOf", "allOf", "not",
})
"""The keywords ``validate`` checks."""
ANNOTATIONS = frozenset({"title", "description", "$schema", "$id", "$comment", "default", "examples"})
"""Keywords that only describe: accepted, never checked (as in JSON Schema itself)."""
MAX_ERRORS = 5


def check_schema(schema: Any, where: str = "schema") -> None:
    """Raise ``ConfigError`` naming the place unless ``schema`` uses only the keywords ``validate`` checks, with
    values of the right kind."""
    if isinstance(schema, bool):
        return
    if not isinstance(schema, Mapping):
        raise ConfigError(f"{where} must be a JSON Schema object, got {type(schema).__name__}")
    unknown = sorted(set(schema) - CHECKED - ANNOTATIONS)
    if unknown:
        raise ConfigError(
            f"{where} uses {', '.join(repr(k) for k in unknown)}, which ragtrim's schema check does not support "
            f"(it checks {', '.join(sorted(CHECKED))}); remove the keyword or express the rule with those")
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        bad = [t for t in types if t not in TYPES]
        if bad or not types:
            raise ConfigError(f"{where}.type must be one of {TYPES} or a list of them, got {schema['type']!r}")
    if "properties" in schema:
        if not isinstance(schema["properties"], Mapping):
            raise ConfigError(f"{where}.properties must be an object of schemas")
        for name, sub in schema["properties"].items():
            check_schema(sub, f"{where}.properties.{name}")
    if "required" in schema and not (isinstance(schema["required"], list)
                                     and all(isinstance(r, str) for r in schema["required"])):
        raise ConfigError(f"{where}.required must be a list of property names, got {schema['required']!r}")
    for key in ("additionalProperties", "items", "not"):
        if key in schema:
            check_schema(schema[key], f"{where}.{key}")
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            if not isinstance(schema[key], list) or not schema[key]:
                raise ConfigError(f"{where}.{key} must be a non-empty list of schemas")
            for i, sub in enumerate(schema[key]):
                check_schema(sub, f"{where}.{key}[{i}]")
    if "enum" in schema and not isinstance(schema["enum"], list):
        raise ConfigError(f"{where}.enum must be a list, got {schema['enum']!r}")
    for key in ("minLength", "maxLength", "minItems", "maxItems"):
        if key in schema and (isinstance(schema[key], bool) or not isinstance(schema[key], int) or schema[key] < 0):
            raise ConfigError(f"{where}.{key} must be an integer >= 0, got {schema[key]!r}")
    for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        if key in schema and (isinstance(schema[key], bool) or not isinstance(schema[key], (int, float))):
            raise ConfigError(f"{where}.{key} must be a number, got {schema[key]!r}")
    if "pattern" in schema:
        try:
            re.compile(str(schema["pattern"]))
        except re.error as exc:
            raise ConfigError(f"{where}.pattern is not a valid regular expression: {exc}") from None


def _type_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _is(value: Any, t: str) -> bool:
    actual = _type_of(value)
    return actual == t or (t == "number" and actual == "integer")


def _equal(a: Any, b: Any) -> bool:
    """JSON equality: 1 == 1.0, but True is not 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    return bool(a == b)


def validate(value: Any, schema: Any, path: str = "$") -> list[str]:
    """What is wrong with ``value`` under ``schema`` (a schema ``check_schema`` accepts): at most ``MAX_ERRORS``
    messages, each naming the place (``$.answer``); empty when the value complies."""
    errors: list[str] = []
    _validate(value, schema, path, errors)
    return errors[:MAX_ERRORS]


def _validate(value: Any, schema: Any, path: str, errors: list[str]) -> None:
    if schema is True:
        return
    if schema is False:
        errors.append(f"{path}: no value is allowed here")
        return
    s: Mapping[str, Any] = schema
    if "type" in s:
        types: Sequence[str] = s["type"] if isinstance(s["type"], list) else [s["type"]]
        if not any(_is(value, t) for t in types):
            errors.append(f"{path}: expected {' or '.join(types)}, got {_type_of(value)}")
            return
    if "const" in s and not _equal(value, s["const"]):
        errors.append(f"{path}: must be {s['const']!r}")
    if "enum" in s and not any(_equal(value, e) for e in s["enum"]):
        errors.append(f"{path}: must be one of {s['enum']!r}")
    if isinstance(value, str):
        if "minLength" in s and len(value) < s["minLength"]:
            errors.append(f"{path}: shorter than {s['minLength']} characters")
        if "maxLength" in s and len(value) > s["maxLength"]:
            errors.append(f"{path}: longer than {s['maxLength']} characters")
        if "pattern" in s and re.search(str(s["pattern"]), value) is None:
            errors.append(f"{path}: does not match {s['pattern']!r}")
    if _type_of(value) in ("integer", "number") and not (isinstance(value, float) and not math.isfinite(value)):
        for key, fails in (("minimum", operator.lt), ("maximum", operator.gt), ("exclusiveMinimum", operator.le),
                           ("exclusiveMaximum", operator.ge)):
            if key in s and fails(value, s[key]):
                errors.append(f"{path}: violates {key} {s[key]}")
    if isinstance(value, dict):
        props: Mapping[str, Any] = s.get("properties", {})
        for name in s.get("required", []):
            if name not in value:
                errors.append(f"{path}: missing required property {name!r}")
        for name, item in value.items():
            if name in props:
                _validate(item, props[name], f"{path}.{name}", errors)
            elif "additionalProperties" in s:
                extra = s["additionalProperties"]
                if extra is False:
                    errors.append(f"{path}: property {name!r} is not allowed")
                else:
                    _validate(item, extra, f"{path}.{name}", errors)
    if isinstance(value, list):
        if "minItems" in s and len(value) < s["minItems"]:
            errors.append(f"{path}: fewer than {s['minItems']} items")
        if "maxItems" in s and len(value) > s["maxItems"]:
            errors.append(f"{path}: more than {s['maxItems']} items")
        if "items" in s:
            for i, item in enumerate(value):
                _validate(item, s["items"], f"{path}[{i}]", errors)
    for sub in s.get("allOf", []):
        _validate(value, sub, path, errors)
    if "anyOf" in s and not any(not validate(value, sub, path) for sub in s["anyOf"]):
        errors.append(f"{path}: matches none of anyOf")
    if "oneOf" in s:
        matched = sum(1 for sub in s["oneOf"] if not validate(value, sub, path))
        if matched != 1:
            errors.append(f"{path}: matches {matched} of oneOf, not exactly one")
    if "not" in s and not validate(value, s["not"], path):
        errors.append(f"{path}: must not match the 'not' schema")
