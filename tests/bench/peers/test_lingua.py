"""The LongLLMLingua rows: the README's settings, the ranking memo, the budget cut of llmlingua's output (a fake
compressor), and the KV-cache adapter checked on a small random Gemma 3 against one whole pass."""

from __future__ import annotations

from typing import Any

import pytest

from ragtrim import WhitespaceCounter
from ragtrim_bench.peers.lingua import COARSE_SETTINGS, LONGLLMLINGUA_SETTINGS, RankMemo, lingua_trim

COUNTER = WhitespaceCounter()


def test_the_readme_recipe() -> None:
    assert LONGLLMLINGUA_SETTINGS == {"rank_method": "longllmlingua", "condition_in_question": "after_condition",
                                      "reorder_context": "sort", "dynamic_context_compression_ratio": 0.3,
                                      "condition_compare": True, "context_budget": "+100", "concate_question": False}
    assert COARSE_SETTINGS == {**LONGLLMLINGUA_SETTINGS, "use_token_level_filter": False}


class FakeCompressor:
    """Stands in for llmlingua's PromptCompressor: a scripted output and a counted ranking."""

    def __init__(self, output: str) -> None:
        self.output = output
        self.calls: list[dict[str, Any]] = []
        self.rankings = 0

    def get_rank_results(self, context: list[str], question: str, rank_method: str, condition_in_question: str,
                         context_tokens_length: list[int]) -> list[tuple[int, float]]:
        self.rankings += 1
        return [(i, float(i)) for i in range(len(context))]

    def compress_prompt(self, context: list[str], **kwargs: Any) -> dict[str, Any]:
        self.calls.append({"context": context, **kwargs})
        return {"compressed_prompt": self.output}


class TestRankMemo:
    def test_one_ranking_per_request(self) -> None:
        fake = FakeCompressor("")
        RankMemo(fake)
        args = (["a", "b"], "q", "longllmlingua", "after", [1, 1])
        first = fake.get_rank_results(*args)
        assert fake.get_rank_results(*args) == first
        assert fake.rankings == 1
        fake.get_rank_results(["c"], "q", "longllmlingua", "after", [1])
        assert fake.rankings == 2

    def test_clear_forgets(self) -> None:
        fake = FakeCompressor("")
        memo = RankMemo(fake)
        args = (["a"], "q", "longllmlingua", "after", [1])
        fake.get_rank_results(*args)
        memo.clear()
        fake.get_rank_results(*args)
        assert fake.rankings == 2

    def test_callers_get_their_own_list(self) -> None:
        fake = FakeCompressor("")
        RankMemo(fake)
        args = (["a", "b"], "q", "longllmlingua", "after", [1, 1])
        fake.get_rank_results(*args).clear()
        assert len(fake.get_rank_results(*args)) == 2


class TestLinguaTrim:
    def test_under_the_budget_as_produced(self) -> None:
        fake = FakeCompressor("kept words here\n\nand more")
        out = lingua_trim(fake, LONGLLMLINGUA_SETTINGS, COUNTER)(["p1", "p2"], "q?", 10)
        assert (out.text, out.produced_tokens, out.cut) == ("kept words here\n\nand more", 5, False)
        assert fake.calls == [{"context": ["p1", "p2"], "question": "q?", "target_token": 10,
                               **LONGLLMLINGUA_SETTINGS}]

    def test_an_overshoot_is_cut_in_llmlinguas_order(self) -> None:
        fake = FakeCompressor("best passage words\n\nsecond passage words here\n\nthird one")
        out = lingua_trim(fake, COARSE_SETTINGS, COUNTER)(["p"], "q?", 6)
        assert out.cut and out.produced_tokens == 9
        assert out.text == "best passage words\n\nthird one"  # the second does not fit and is too short to cut

    def test_nothing_to_do(self) -> None:
        fake = FakeCompressor("unused")
        assert lingua_trim(fake, COARSE_SETTINGS, COUNTER)([], "q?", 10).text == ""
        assert lingua_trim(fake, COARSE_SETTINGS, COUNTER)(["p"], "q?", 0).text == ""
        assert fake.calls == []


def test_legacy_cache_model_gives_the_models_own_logits() -> None:
    """A split pass through the adapter (the way llmlingua feeds its windows) equals one whole pass, past the
    sliding window of Gemma 3's local layers."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from ragtrim_bench.peers.lingua import LegacyCacheModel

    torch.manual_seed(0)
    config = transformers.Gemma3TextConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=2,
        num_key_value_heads=1, head_dim=16, sliding_window=8, max_position_embeddings=128,
        layer_types=["sliding_attention", "sliding_attention", "full_attention"])
    model = transformers.Gemma3ForCausalLM(config).eval()
    ids = torch.randint(0, 64, (1, 30))
    mask = torch.ones_like(ids)
    wrapped = LegacyCacheModel(model)
    with torch.no_grad():
        whole = model(ids, attention_mask=mask).logits
        first = wrapped(ids[:, :17], attention_mask=mask[:, :17])
        second = wrapped(ids[:, 17:], attention_mask=mask, past_key_values=first.past_key_values)
    assert [tuple(k.shape) for k, _ in second.past_key_values] == [(1, 1, 30, 16)] * 3  # no layer cropped
    assert torch.allclose(torch.cat([first.logits, second.logits], dim=1), whole, atol=1e-5)


@pytest.mark.model
@pytest.mark.parametrize("name", ["longllmlingua", "longllmlingua-coarse"])
def test_longllmlingua_runs_end_to_end_within_the_budget(name: str) -> None:
    """The real compressor with the packaged Gemma 3 270M on CPU, on four short passages."""
    from ragtrim import get_counter
    from ragtrim_bench.peers import lingua
    from ragtrim_bench.peers.rows import available_rows

    passages = ("The rollback window closes at 18:00 UTC on Friday. After that the release is frozen.",
                "Lunch is served in the main hall at noon. The menu changes every week.",
                "Parking is free on weekends for staff. Visitors pay at the gate.",
                "The weather is sunny today. Tomorrow brings rain from the west.")
    lingua.configure(device="cpu")
    row = available_rows()[name]()
    counter = get_counter(None)
    out = row.trim(passages, "When does the rollback window close?", 30)
    assert out.text and counter.count(out.text) <= 30
    assert out.cut == (out.produced_tokens > 30)
    assert "rollback" in out.text.lower()  # the question-conditioned ranking puts the relevant passage first
