"""ragtrim.gate.schema: the JSON Schema subset, checked without a dependency; unsupported keywords are refused."""

from __future__ import annotations

import re

import pytest

from ragtrim.errors import ConfigError
from ragtrim.gate.builders import JSON_ANSWER_SCHEMA
from ragtrim.gate.schema import check_schema, validate


class TestCheckSchema:
    def test_accepts_the_answer_schema_and_annotations(self) -> None:
        check_schema(JSON_ANSWER_SCHEMA)
        check_schema({"title": "t", "description": "d", "$schema": "x", "type": "string"})
        check_schema(True)

    @pytest.mark.parametrize("keyword", ["$ref", "if", "format", "patternProperties", "dependentRequired"])
    def test_refuses_what_it_does_not_check(self, keyword: str) -> None:
        with pytest.raises(ConfigError, match=re.escape(f"uses '{keyword}', which ragtrim's schema check does not")):
            check_schema({"type": "object", keyword: {}})

    def test_names_the_place_of_a_nested_problem(self) -> None:
        with pytest.raises(ConfigError, match=r"schema\.properties\.answer\.type must be one of"):
            check_schema({"properties": {"answer": {"type": "text"}}})
        with pytest.raises(ConfigError, match=r"minLength must be an integer >= 0"):
            check_schema({"type": "string", "minLength": -1})
        with pytest.raises(ConfigError, match="not a valid regular expression"):
            check_schema({"pattern": "("})
        with pytest.raises(ConfigError, match="must be a JSON Schema object"):
            check_schema([1])


class TestValidate:
    def test_the_answer_schema(self) -> None:
        assert validate({"answer": "Paris"}, JSON_ANSWER_SCHEMA) == []
        assert validate({"answer": None}, JSON_ANSWER_SCHEMA) == []
        assert validate({}, JSON_ANSWER_SCHEMA) == ["$: missing required property 'answer'"]
        assert validate({"answer": 3}, JSON_ANSWER_SCHEMA) == ["$.answer: expected string or null, got integer"]
        assert validate({"answer": "x", "why": "y"}, JSON_ANSWER_SCHEMA) == ["$: property 'why' is not allowed"]
        assert validate(["answer"], JSON_ANSWER_SCHEMA) == ["$: expected object, got array"]

    def test_numbers_strings_arrays(self) -> None:
        s = {"type": "array", "items": {"type": "integer", "minimum": 0, "exclusiveMaximum": 10}, "maxItems": 2}
        assert validate([1, 2.0], s) == []  # 2.0 is an integer in JSON Schema
        assert validate([1, 10, -1], s) == ["$: more than 2 items", "$[1]: violates exclusiveMaximum 10",
                                            "$[2]: violates minimum 0"]
        assert validate(True, {"type": "integer"}) == ["$: expected integer, got boolean"]
        assert validate("abc", {"type": "string", "pattern": "^a", "maxLength": 2}) == [
            "$: longer than 2 characters"]
        assert validate("x", {"enum": ["a", "b"]}) == ["$: must be one of ['a', 'b']"]
        assert validate(1, {"const": True}) == ["$: must be True"]

    def test_combinators(self) -> None:
        s = {"anyOf": [{"type": "string"}, {"type": "null"}]}
        assert validate(None, s) == [] and validate(1, s) == ["$: matches none of anyOf"]
        one = {"oneOf": [{"type": "number"}, {"type": "integer"}]}
        assert validate(1.5, one) == [] and validate(1, one) == ["$: matches 2 of oneOf, not exactly one"]
        assert validate("a", {"not": {"type": "string"}}) == ["$: must not match the 'not' schema"]
        assert validate(5, {"allOf": [{"minimum": 1}, {"maximum": 3}]}) == ["$: violates maximum 3"]

    def test_false_schema_and_error_cap(self) -> None:
        assert validate(1, False) == ["$: no value is allowed here"]
        many = validate({str(i): i for i in range(20)}, {"additionalProperties": False})
        assert len(many) == 5
