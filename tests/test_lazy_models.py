"""No model is loaded when there is nothing to rank: a trim without a query, or of one chunk, builds no
session and imports neither onnxruntime nor torch; the first trim that ranks loads the model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import ClassVar

import pytest

from ragtrim.api import default_stages
from ragtrim.pipeline import Pipeline
from ragtrim.stages.relevance import RelevanceFilter
from ragtrim.testing import FakeEmbedder


class WarmingFake(FakeEmbedder):
    """A fake whose warm-up is a model pass, as MiniLM's is."""

    warms_up: ClassVar[bool] = True


def pipeline(embedder: FakeEmbedder) -> Pipeline:
    stages = [RelevanceFilter(scorer=embedder, top_k=None) if isinstance(s, RelevanceFilter) else s
              for s in default_stages(budget=30, scorer="bm25")]
    return Pipeline(stages, tokenizer="whitespace")


@pytest.mark.parametrize(("chunks", "query"), [
    (["The tower is tall.", "The river is long."], ""),  # no query
    (["The tower is tall.", "The river is long."], "   "),
    (["The tower is tall. It stands by the river."], "tower"),  # one chunk
    ([], "tower"),
    (["Same text.", "Same text."], "tower"),  # one text twice: the duplicate goes, nothing is left to rank
])
def test_nothing_to_rank_loads_nothing(chunks: list[str], query: str) -> None:
    embedder = WarmingFake(vector_store=None)
    p = pipeline(embedder)
    result = p.run(chunks, query=query)
    assert embedder.calls == [] and not embedder._warm
    assert result.text == pipeline(WarmingFake(vector_store=None)).run(chunks, query=query).text


def test_the_first_trim_that_ranks_warms_up_once() -> None:
    embedder = WarmingFake(vector_store=None)
    p = pipeline(embedder)
    p.run(["The tower is tall."], query="tower")
    p.run(["The tower is tall.", "The river is long."], query="tower")
    assert embedder.encoded_texts()[0] == "warm up" and embedder._warm
    p.run(["A third text.", "And a fourth."], query="tower")
    assert embedder.encoded_texts().count("warm up") == 1


def test_explicit_warm_up_loads_the_model() -> None:
    embedder = WarmingFake(vector_store=None)
    pipeline(embedder).warm_up()
    assert embedder.encoded_texts() == ["warm up"]


_PROBE = r"""
import json, sys
from ragtrim import trim
from ragtrim.scoring import onnx_backend
out = {}
trim(["<p>Some <b>HTML</b> page text about towers.</p>", "Plain text about rivers."])  # no query
trim(["One chunk about towers and rivers."], query="where is the tower?", budget=5)
out["idle"] = {"onnxruntime": "onnxruntime" in sys.modules, "torch": "torch" in sys.modules,
               "sessions": len(onnx_backend._SESSIONS)}
trim(["The tower is tall.", "The river is long."], query="where is the tower?")
out["ranked"] = {"onnxruntime": "onnxruntime" in sys.modules, "sessions": len(onnx_backend._SESSIONS)}
print(json.dumps(out))
"""


@pytest.mark.model
def test_trim_with_nothing_to_rank_imports_no_model_runtime() -> None:
    from ragtrim.scoring.auto import choose

    if choose().backend != "onnxruntime-int8-cpu":
        pytest.skip(f"auto runs {choose().backend} here")
    done = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, check=True,
                          env={**os.environ, "RAGTRIM_VECTOR_STORE": "off"})
    out = json.loads(done.stdout)
    assert out["idle"] == {"onnxruntime": False, "torch": False, "sessions": 0}
    assert out["ranked"] == {"onnxruntime": True, "sessions": 1}  # the probe can see a load
