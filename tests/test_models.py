from __future__ import annotations

import dataclasses
import math

import pytest

from ragtrim.errors import InputError
from ragtrim.models import Chunk, Removal, StageReport, TrimContext, TrimResult


class TestChunk:
    def test_frozen(self) -> None:
        c = Chunk(text="a", id="1")
        with pytest.raises(dataclasses.FrozenInstanceError):
            c.text = "b"  # type: ignore[misc]

    def test_metadata_is_read_only_copy(self) -> None:
        meta = {"source": "x"}
        c = Chunk(text="a", id="1", metadata=meta)
        meta["source"] = "y"
        assert c.metadata["source"] == "x"
        with pytest.raises(TypeError):
            c.metadata["source"] = "z"  # type: ignore[index]

    def test_with_text_resets_count(self) -> None:
        c = Chunk(text="a b", id="1", token_count=2)
        d = c.with_text("a")
        assert (d.text, d.token_count, d.id) == ("a", None, "1")
        assert c.token_count == 2

    def test_copies_with_a_score_or_a_count_equal_a_checked_copy(self) -> None:
        import numpy as np

        c = Chunk(text="a b", id="1", metadata={"source": "x"}, pinned=True)
        for score in (0.5, -2.0, math.inf, 3, np.float32(0.25), None):
            assert c.with_score(score) == dataclasses.replace(c, score=score)
            assert type(c.with_score(score).score) is type(dataclasses.replace(c, score=score).score)
        assert c.with_token_count(7) == dataclasses.replace(c, token_count=7)
        assert c.with_token_count(7).metadata is c.metadata and c.with_token_count(7).pinned
        with pytest.raises(InputError, match="NaN"):
            c.with_score(float("nan"))
        with pytest.raises(InputError, match="token_count must be >= 0"):
            c.with_token_count(-1)
        with pytest.raises(InputError, match="token_count must be >= 0"):
            c.with_token_count(True)

    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            ({"text": None, "id": "1"}, "text must be str"),
            ({"text": "a", "id": ""}, "id must be a non-empty str"),
            ({"text": "a", "id": "1", "score": "high"}, "score must be a number"),
            ({"text": "a", "id": "1", "score": float("nan")}, "NaN"),
            ({"text": "a", "id": "1", "token_count": -1}, "token_count must be >= 0"),
        ],
    )
    def test_invalid(self, kwargs: dict[str, object], message: str) -> None:
        with pytest.raises(InputError, match=message):
            Chunk(**kwargs)  # type: ignore[arg-type]


class TestRemoval:
    def test_unknown_reason(self) -> None:
        with pytest.raises(InputError, match="reason must be one of"):
            Removal("1", "s", "because", 3)  # type: ignore[arg-type]


class TestTrimResult:
    def _result(self, before: int, after: int) -> TrimResult:
        chunks = (Chunk(text="x " * after, id="a", token_count=after),) if after else ()
        return TrimResult(context=TrimContext(query="q", chunks=chunks), trace=(), tokens_before=before,
                          tokens_after=after)

    def test_ratio_and_saved(self) -> None:
        r = self._result(100, 25)
        assert (r.ratio, r.tokens_saved) == (4.0, 75)

    def test_ratio_edge_cases(self) -> None:
        assert self._result(0, 0).ratio == 1.0
        assert math.isinf(self._result(10, 0).ratio)
        assert self._result(10, 0).to_dict()["ratio"] is None

    def test_to_dict_has_trace(self) -> None:
        removal = Removal("b", "budget", "over_budget", 4, "needs 4")
        report = StageReport("budget", 2, 1, 8, 4, (removal,), 0.001)
        r = TrimResult(TrimContext(chunks=(Chunk("x", "a", token_count=4),)), (report,), 8, 4, "whitespace")
        d = r.to_dict()
        assert d["trace"][0]["removals"][0]["reason"] == "over_budget"
        assert d["trace"][0]["tokens_saved"] == 4
        assert r.removals == (removal,)
