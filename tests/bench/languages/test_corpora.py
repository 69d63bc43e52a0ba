"""The language benchmarks' corpora: generated Japanese and Chinese are deterministic and never repeat."""

from __future__ import annotations

import pytest

from ragtrim.errors import ConfigError
from ragtrim_bench.languages import corpora


def test_generated_text_is_deterministic_and_never_repeats() -> None:
    a, b = corpora.chunks("ja", 2, 500, seed=0), corpora.chunks("ja", 2, 500, seed=0)
    assert a == b and a[0] != a[1] and len(a[0]) == 500
    assert corpora.text("zh", 300, seed=1) != corpora.text("zh", 300, seed=2)
    unpunct = corpora.text("zh-unpunct", 2000)
    assert len(unpunct) == 2000 and unpunct.isalpha()
    with pytest.raises(ConfigError):
        corpora.text("fr", 10)
