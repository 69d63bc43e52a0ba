from __future__ import annotations

from typing import ClassVar

import pytest

from ragtrim.errors import InputError
from ragtrim.inputs import coerce_chunks, coerce_history
from ragtrim.models import Chunk


class TestCoerceChunks:
    def test_strings_get_positional_ids(self) -> None:
        assert [c.id for c in coerce_chunks(["a", "b"])] == ["0", "1"]

    def test_dicts(self) -> None:
        (c,) = coerce_chunks([{"page_content": "x", "id": 7, "score": 1, "metadata": {"s": 1}}])
        assert (c.text, c.id, c.score, dict(c.metadata)) == ("x", "7", 1.0, {"s": 1})

    def test_chunk_passes_through(self) -> None:
        c = Chunk("x", "k")
        assert coerce_chunks([c])[0] is c

    def test_langchain_like_document(self) -> None:
        class Doc:
            page_content = "text"
            metadata: ClassVar[dict[str, int]] = {"a": 1}
            id = None

        assert coerce_chunks([Doc()])[0].text == "text"

    def test_valid_utf8_bytes(self) -> None:
        assert coerce_chunks(["é".encode()])[0].text == "é"

    @pytest.mark.parametrize(
        ("items", "message"),
        [
            (None, "chunks is None"),
            ("text", "not a single str"),
            ([None], "chunk at index 0 is None"),
            ([42], "unsupported type int"),
            ([{"text": 5}], "'text' must be str"),
            ([{"body": "x"}], "none of the text keys"),
            ([b"\xff\xfe bad"], "not valid UTF-8"),
            ([{"text": "x", "id": None}], "'id' must be a str or int"),
            ([{"text": "x", "metadata": [1]}], "'metadata' must be a dict"),
        ],
    )
    def test_invalid(self, items: object, message: str) -> None:
        with pytest.raises(InputError, match=message):
            coerce_chunks(items)  # type: ignore[arg-type]


class TestPinned:
    @pytest.mark.parametrize(("value", "pinned"), [(True, True), (False, False), ("false", False), ("False", False),
                                                   ("TRUE", True), (" true ", True)])
    def test_bools_and_documented_strings(self, value: object, pinned: bool) -> None:
        (c,) = coerce_chunks([{"text": "a", "pinned": value}])
        assert c.pinned is pinned  # "false" counted as pinned before

    @pytest.mark.parametrize("value", ["no", "0", "", 1, 0, None, [True]])
    def test_anything_else_is_rejected(self, value: object) -> None:
        with pytest.raises(InputError, match=r"chunk at index 0: 'pinned' must be true or false"):
            coerce_chunks([{"text": "a", "pinned": value}])

    def test_chunk_checks_its_own_fields(self) -> None:
        with pytest.raises(InputError, match="pinned must be True or False"):
            Chunk("a", "x", pinned="false")  # type: ignore[arg-type]
        with pytest.raises(InputError, match=r"token_count must be >= 0 \(an int\)"):
            Chunk("a", "x", token_count="3")  # type: ignore[arg-type]


class TestCoerceHistory:
    def test_roles_and_ids(self) -> None:
        msgs = coerce_history([{"role": "user", "content": "hi"}, {"speaker": "Bob", "text": "yo", "dia_id": "D1:2"}])
        assert [(m.role, m.turn_id) for m in msgs] == [("user", "0"), ("Bob", "D1:2")]

    def test_empty(self) -> None:
        assert coerce_history([]) == ()

    @pytest.mark.parametrize(
        ("items", "message"),
        [
            ([{"content": "x"}], "'role' must be a non-empty str"),
            ([{"role": "user", "content": 3}], "'content' must be a str"),
            ([7], "must be a dict"),
        ],
    )
    def test_invalid(self, items: object, message: str) -> None:
        with pytest.raises(InputError, match=message):
            coerce_history(items)  # type: ignore[arg-type]
