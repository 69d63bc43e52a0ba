"""Numbers from numpy and out-of-range numbers: numpy scalars are scores and budgets like Python
numbers; ints too large for a float or a str get a typed error; ``ragtrim plan`` refuses non-finite numbers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ragtrim import trim
from ragtrim.errors import ConfigError, InputError
from ragtrim.models import Chunk

CONFIGS = Path(__file__).parent / "fixtures" / "configs"
TEXTS = ["Paris is the capital of France.", "Bananas grow in warm places.", "The Pacific is the largest ocean."]


class TestNumpyScalars:
    def test_numpy_score_in_a_dict(self) -> None:
        r = trim([{"text": TEXTS[0], "score": np.float32(0.9)}, {"text": TEXTS[1], "score": np.float64(0.1)}],
                 query="capital", tokenizer="whitespace", scorer="bm25")
        assert [c.id for c in r.chunks][:1] == ["0"]

    def test_numpy_score_on_a_chunk_becomes_a_python_float(self) -> None:
        c = Chunk(text="a", id="x", score=np.float32(0.5))
        assert c.score == 0.5 and type(c.score) is float
        assert type(Chunk(text="a", id="y", score=np.int64(3)).score) is int

    def test_numpy_budget(self) -> None:
        a = trim(TEXTS, query="capital of France", budget=np.int64(8), tokenizer="whitespace", scorer="bm25")
        b = trim(TEXTS, query="capital of France", budget=8, tokenizer="whitespace", scorer="bm25")
        assert a.text == b.text and a.tokens_after <= 8

    def test_numpy_float_budget_is_still_refused_as_a_float(self) -> None:
        with pytest.raises(ConfigError, match="budget must be an int"):
            trim(TEXTS, query="q", budget=np.float32(0.5), tokenizer="whitespace")

    def test_numpy_bool_is_not_a_number(self) -> None:
        with pytest.raises(ConfigError, match="budget must be an int"):
            trim(TEXTS, query="q", budget=np.bool_(True), tokenizer="whitespace")

    def test_numpy_stage_parameter_is_stored_as_python(self) -> None:
        from ragtrim.stages.budget import TokenBudget

        stage = TokenBudget(max_tokens=np.int64(12))
        assert stage.max_tokens == 12 and type(stage.max_tokens) is int
        assert json.loads(json.dumps(stage.to_dict()))["max_tokens"] == 12

    def test_numpy_id(self) -> None:
        r = trim([{"text": TEXTS[0], "id": np.int64(7)}], query="q", tokenizer="whitespace", scorer="bm25")
        assert r.chunks[0].id == "7"


class TestOutOfRange:
    def test_huge_int_score(self) -> None:
        with pytest.raises(InputError, match="float's range"):
            trim([{"text": "a", "score": 10**400}], query="q", tokenizer="whitespace")
        with pytest.raises(InputError, match="float's range"):
            Chunk(text="a", id="x", score=10**400)

    def test_huge_int_id(self) -> None:
        with pytest.raises(InputError, match="at most 1,000 digits"):
            trim([{"text": "a", "id": 10**5000}], query="q", tokenizer="whitespace")

    def test_huge_int_for_a_float_parameter(self) -> None:
        from ragtrim._util.validate import check_float

        with pytest.raises(ConfigError, match="float's range"):
            check_float("ratio", 10**400)


class TestLangChainScoreKey:
    def test_numpy_score_key(self) -> None:
        pytest.importorskip("langchain_core", reason="the langchain extra is not installed")
        from langchain_core.documents import Document

        from ragtrim.integrations.langchain import documents_to_chunks

        chunks = documents_to_chunks([Document(page_content="a", metadata={"s": np.float32(0.25)}),
                                      Document(page_content="b", metadata={"s": np.int64(2)})], score_key="s")
        assert [c.score for c in chunks] == [0.25, 2.0]
        with pytest.raises(InputError, match="float's range"):
            documents_to_chunks([Document(page_content="a", metadata={"s": 10**400})], score_key="s")

    def test_numpy_budget_in_the_compressor(self) -> None:
        pytest.importorskip("langchain_core", reason="the langchain extra is not installed")
        from ragtrim.integrations.langchain import RagtrimCompressor

        assert RagtrimCompressor(budget=np.int64(50), tokenizer="whitespace", scorer="bm25").budget == 50


def _plan(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ragtrim", "plan", "--config", str(CONFIGS / "llama-3.1-8b.json"),
                           "--input-p95", "2000", "--output-p95", "200", *args],
                          check=False, capture_output=True, text=True, timeout=120)


class TestPlanCli:
    @pytest.mark.parametrize("value", ["inf", "nan", "-1", "0"])
    def test_gpu_mem_gib_not_finite_positive_exits_2(self, value: str) -> None:
        r = _plan("--gpu-mem-gib", value)
        assert r.returncode == 2, r.stderr
        assert "--gpu-mem-gib" in r.stderr and "internal error" not in r.stderr

    @pytest.mark.parametrize("value", ["inf", "nan", "0"])
    def test_trim_ratio_not_finite_positive_exits_2(self, value: str) -> None:
        r = _plan("--gpu-mem-gib", "80", "--trim-ratio", value)
        assert r.returncode == 2, r.stderr
        assert "--trim-ratio" in r.stderr

    def test_library_refuses_infinite_values(self) -> None:
        from ragtrim.plan.planner import PlanRequest
        from ragtrim.plan.workload import Workload

        with pytest.raises(ConfigError, match="finite"):
            PlanRequest(gpu_mem_gib=float("inf"))
        w = Workload.from_percentiles(name="w", input_p50_tokens=10, input_p95_tokens=10, input_p99_tokens=None,
                                      output_p50_tokens=None, output_p95_tokens=5, output_p99_tokens=None)
        with pytest.raises(ConfigError, match="finite"):
            w.scaled_input(float("inf"), name="x")
