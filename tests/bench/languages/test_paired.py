"""Paired before/after comparison of quality-matrix runs."""

from __future__ import annotations

import pytest

from ragtrim.errors import InputError
from ragtrim_bench.languages.paired import compare, mcnemar_exact


def test_mcnemar_exact() -> None:
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(5, 0) == 2 / 32
    assert mcnemar_exact(3, 3) == 1.0


def test_compare_pairs_the_same_requests() -> None:
    before = {"records": [{"row": "bm25", "column": "c", "split": "dev", "ratio": 4, "kept_bits": "1100"}]}
    after = {"records": [{"row": "bm25", "column": "c", "split": "dev", "ratio": 4, "kept_bits": "1011"}]}
    (line,) = compare(before, after)
    assert (line["gained"], line["lost"], line["recall_before"], line["recall_after"]) == (2, 1, 0.5, 0.75)
    after["records"][0]["kept_bits"] = "10"
    with pytest.raises(InputError, match="same requests"):
        compare(before, after)
