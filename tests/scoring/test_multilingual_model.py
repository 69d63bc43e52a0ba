"""A multilingual sentence-transformers model named by path: loaded offline, reads every script, never gated.

The model is tiny and random (``tiny_st_model.build``, made in a temporary folder once per session): it checks the
plumbing, not the quality."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragtrim.scoring.embedding import EmbeddingScorer
from ragtrim.scoring.hybrid import HybridScorer
from ragtrim.testing import FixedScorer

KO = ["마감은 금요일까지입니다.", "The budget is five thousand dollars.", "北京是中国的首都。"]


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("sentence_transformers", reason="the embeddings extra is not installed")
    from tests.scoring.tiny_st_model import build

    return build(tmp_path_factory.mktemp("models") / "tiny-multilingual-st")


@pytest.mark.model
class TestModelByPath:
    def test_loads_offline_and_scores_every_script(self, tiny_model: Path) -> None:
        scorer = EmbeddingScorer(model=str(tiny_model), device="cpu")
        assert scorer.scripts_read() is None
        scores = scorer.score("마감은 언제인가요?", KO)
        assert len(scores) == 3 and all(-1.0 <= s <= 1.0 for s in scores)
        assert scorer.embed(["마감"]).shape == (1, 32)
        assert scorer.name == "embedding:tiny-multilingual-st"

    def test_its_vote_counts_on_a_korean_query(self, tiny_model: Path) -> None:
        model = EmbeddingScorer(model=str(tiny_model), device="cpu")
        lexical = FixedScorer(scores=[0.0, 0.0, 0.0])
        fused = HybridScorer(scorers=(lexical, model), weights=(0.5, 0.5)).score("마감은 언제인가요?", KO)
        alone = model.score("마감은 언제인가요?", KO)
        best = max(range(3), key=alone.__getitem__)
        assert max(range(3), key=fused.__getitem__) == best
        assert max(fused) == pytest.approx(0.5)  # the model's min-max vote, half the weight

    def test_told_it_reads_only_latin_it_is_gated(self, tiny_model: Path) -> None:
        model = EmbeddingScorer(model=str(tiny_model), device="cpu", scripts=["latin"], cache_size=0)
        lexical = FixedScorer(scores=[0.0, 2.0, 1.0])
        fused = HybridScorer(scorers=(lexical, model), weights=(0.5, 0.5)).score("마감은 언제인가요?", KO)
        assert fused == pytest.approx([0.0, 1.0, 0.5])

    def test_in_a_pipeline(self, tiny_model: Path) -> None:
        import ragtrim
        from ragtrim import Pipeline
        from ragtrim.stages.budget import TokenBudget
        from ragtrim.stages.relevance import RelevanceFilter

        scorer = HybridScorer(scorers=("bm25", EmbeddingScorer(model=str(tiny_model), device="cpu")))
        pipeline = Pipeline([RelevanceFilter(scorer=scorer, top_k=2), TokenBudget(max_tokens=40)])
        result = ragtrim.trim(KO, query="마감은 언제인가요?", pipeline=pipeline)
        assert "마감은 금요일까지입니다." in result.text
        assert len(result.chunks) == 2
