from __future__ import annotations

from typing import ClassVar

import pytest

from ragtrim.api import recipe_pipeline, trim
from ragtrim.errors import ConfigError
from ragtrim.recipes import (
    AUTO_STAGE,
    CALIBRATION_PASSAGES,
    LEARNING_RATE,
    TAIL_SPREADS,
    RecipeCosts,
    calibration_passages,
    choose_recipe,
)
from ragtrim.stages.dedup import DuplicateFilter
from ragtrim.stages.html import HtmlCleaner


def costs_of(**ms_per_token: float) -> RecipeCosts:
    costs = RecipeCosts()
    for recipe, rate in ms_per_token.items():
        costs.observe(recipe, 1000, rate)  # 1,000 tokens in rate seconds: rate ms per token
    return costs


def per_token(ms: float):
    return lambda before, after: ms * (before - after)


class TestRecipeCosts:
    def test_unknown_recipe_has_no_cost(self) -> None:
        assert RecipeCosts().expected_ms("bm25", 100) is None

    def test_first_observation_sets_then_learns_slowly(self) -> None:
        costs = RecipeCosts()
        costs.observe("bm25", 2000, 0.010)  # 0.005 ms per token
        assert costs.expected_ms("bm25", 1000) == pytest.approx(5.0)
        costs.observe("bm25", 1000, 0.015)  # 0.015 ms per token
        assert costs.expected_ms("bm25", 1000) == pytest.approx(5.0 + LEARNING_RATE * 10.0)
        assert costs.observations("bm25") == 2

    def test_nonsense_observations_are_ignored(self) -> None:
        costs = RecipeCosts()
        costs.observe("bm25", 0, 0.1)
        costs.observe("bm25", 100, float("nan"))
        costs.observe("bm25", 100, -1.0)
        assert costs.observations("bm25") == 0

    def test_calibration_runs_each_recipe_once(self) -> None:
        built: list[str] = []

        def build(recipe: str, *, budget: int | None, tokenizer: object = None):
            built.append(recipe)
            return recipe_pipeline(recipe, budget=budget, tokenizer="whitespace")

        costs = RecipeCosts()
        costs.calibrate(["bm25"], build=build, tokenizer="whitespace")
        costs.calibrate(["bm25"], build=build, tokenizer="whitespace")
        assert built == ["bm25"] and costs.observations("bm25") == 1
        assert (costs.expected_ms("bm25", 1000) or 0) > 0

    def test_calibration_passages_are_a_retrievals_size(self) -> None:
        passages = calibration_passages()
        assert len(passages) == CALIBRATION_PASSAGES and passages == calibration_passages()
        assert all(90 <= len(p.split()) <= 130 for p in passages)


class TestChooseRecipe:
    def test_best_recipe_that_pays(self) -> None:
        costs = costs_of(balanced=0.1, fast=0.01, bm25=0.002)
        choice = choose_recipe(tokens_before=2000, budget=500, saving_ms=per_token(0.037), costs=costs,
                               recipes=("balanced", "fast", "bm25", "clean"))
        assert choice.recipe == "fast"  # balanced costs 200 ms, the saving is 55.5 ms; fast costs 20 ms
        assert choice.expected_cost_ms == pytest.approx(20.0) and choice.expected_saving_ms == pytest.approx(55.5)
        assert [name for name, _ in choice.considered] == ["balanced", "fast"]
        assert "fast: expected 20.0 ms (slow ones 20.0 ms) < 55.5 ms of prefill saved on 2000 -> 500 tokens" in choice.reason

    def test_clean_when_nothing_pays(self) -> None:
        costs = costs_of(bm25=0.002)
        choice = choose_recipe(tokens_before=2000, budget=1900, saving_ms=per_token(0.01), costs=costs,
                               recipes=("bm25", "clean"))
        assert choice.recipe == "clean"  # bm25 costs 4 ms, the saving is 1 ms
        assert "no recipe pays for itself" in choice.reason and "not enforced" in choice.reason

    def test_safety_margin(self) -> None:
        costs = costs_of(bm25=0.001)  # 2 ms on 2,000 tokens
        args = {"tokens_before": 2000, "budget": 1000, "costs": costs, "recipes": ("bm25", "clean")}
        assert choose_recipe(saving_ms=per_token(0.0025), **args).recipe == "bm25"  # 2.5 ms > 2 ms x 1.2
        assert choose_recipe(saving_ms=per_token(0.0025), safety=1.5, **args).recipe == "clean"
        with pytest.raises(ConfigError, match="safety must be >= 1"):
            choose_recipe(saving_ms=per_token(1.0), safety=0.5, **args)

    def test_a_recipe_that_pays_only_at_the_median_is_passed_over(self) -> None:
        """The model pass on a busy CPU: 20 or 40 ms in turn (mean about 30 ms, the slow ones 40): it saves 37 ms at
        the median and loses at the tail, so the cheaper recipe runs."""
        costs = RecipeCosts()
        for k in range(40):
            costs.observe("balanced", 1000, 0.020 if k % 2 else 0.040)
        costs.observe("bm25", 1000, 0.002)
        args = {"tokens_before": 1000, "budget": 250, "costs": costs, "recipes": ("balanced", "bm25", "clean")}
        assert (costs.expected_ms("balanced", 1000) or 0) * 1.2 < 37.5  # it would pay at the mean
        assert (costs.tail_ms("balanced", 1000) or 0) > 37.5
        choice = choose_recipe(saving_ms=per_token(0.05), **args)
        assert choice.recipe == "bm25" and [n for n, _ in choice.considered] == ["balanced", "bm25"]
        assert choose_recipe(saving_ms=per_token(0.2), **args).recipe == "balanced"  # 150 ms saved: pays at the tail

    def test_the_spread_follows_the_cost(self) -> None:
        costs = RecipeCosts()
        costs.observe("fast", 1000, 0.010)
        assert costs.tail_ms("fast", 1000) == pytest.approx(10.0)  # one observation: no spread yet
        costs.observe("fast", 1000, 0.020)
        assert costs.tail_ms("fast", 1000) == pytest.approx(12.0 + TAIL_SPREADS * LEARNING_RATE * 10.0)
        for _ in range(60):
            costs.observe("fast", 1000, 0.012)
        assert costs.tail_ms("fast", 1000) == pytest.approx(12.0, rel=1e-3)  # steady costs: the spread decays

    def test_one_slow_trim_does_not_shut_a_better_recipe_out_for_good(self) -> None:
        """A recipe is measured only when it runs. One slow trim of fast (a collection inside it) puts its slow ones
        above the saving, so bm25 runs; each time fast is passed over that evidence fades by the learning rate, and
        fast runs again once its slow ones fit (here after 7 requests). Its expected cost does not fade, and a
        recipe that costs more than it saves on average (balanced) stays out with its spread as it was."""
        costs = RecipeCosts()
        for recipe, seconds in (("fast", 0.010), ("fast", 0.060), ("bm25", 0.002), ("balanced", 0.100),
                                ("balanced", 0.200)):
            costs.observe(recipe, 1000, seconds)
        expected, balanced_tail = costs.expected_ms("fast", 1000), costs.tail_ms("balanced", 1000)
        assert expected == pytest.approx(20.0) and costs.tail_ms("fast", 1000) == pytest.approx(60.0)
        args = {"tokens_before": 1000, "budget": 250, "costs": costs, "recipes": ("balanced", "fast", "bm25", "clean"),
                "saving_ms": per_token(0.04)}  # 30 ms saved: fast pays at 20 ms x 1.2, not at 60
        picks = [choose_recipe(**args).recipe for _ in range(10)]
        assert picks == ["bm25"] * 7 + ["fast"] * 3
        assert costs.expected_ms("fast", 1000) == pytest.approx(expected)
        assert costs.tail_ms("balanced", 1000) == pytest.approx(balanced_tail)

    @pytest.mark.parametrize("budget", [None, 2000, 5000])
    def test_no_budget_to_reach_is_clean(self, budget: int | None) -> None:
        choice = choose_recipe(tokens_before=2000, budget=budget, saving_ms=per_token(1.0), costs=costs_of(bm25=0.001),
                               recipes=("bm25", "clean"))
        assert choice.recipe == "clean" and "no budget to reach" in choice.reason

    def test_unmeasured_recipes_are_skipped(self) -> None:
        choice = choose_recipe(tokens_before=2000, budget=500, saving_ms=per_token(1.0), costs=costs_of(bm25=0.001),
                               recipes=("balanced", "bm25", "clean"))
        assert choice.recipe == "bm25"


class TestRecipePipeline:
    def test_clean_is_cleanup_and_exact_duplicates(self) -> None:
        stages = recipe_pipeline("clean", budget=10).stages
        assert [type(s) for s in stages] == [HtmlCleaner, DuplicateFilter]
        assert stages[1].near is False

    def test_unknown_recipe(self) -> None:
        with pytest.raises(ConfigError, match="recipe"):
            recipe_pipeline("nope", budget=10)


class TestTrimByCost:
    PASSAGES: ClassVar[list[str]] = ["The tower opened in 1889 and drew crowds. " * 20, "A bridge crossed the river in 1901. " * 20,
                "The tower opened in 1889 and drew crowds. " * 20, "<p>Markets sold grain and wool.</p>" * 10]

    @pytest.fixture(autouse=True)
    def _bm25_only(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import ragtrim.recipes

        monkeypatch.setattr(ragtrim.recipes, "available_recipes", lambda: ("bm25", "clean"))
        monkeypatch.setattr(ragtrim.recipes, "_SHARED", costs_of(bm25=0.01))  # 0.01 ms per token here

    def test_pays_trims_to_budget_and_says_why(self) -> None:
        result = trim(self.PASSAGES, query="when did the tower open", budget=60, tokenizer="whitespace",
                      prefill_ms_per_token=1.0)
        first = result.trace[0]
        assert first.stage == AUTO_STAGE and first.removals == ()
        assert first.info["recipe"] == "bm25" and "bm25: expected" in first.info["reason"]
        assert result.tokens_after <= 60
        assert [r.stage for r in result.trace[1:]] == ["html", "dedup", "relevance", "compress", "budget", "order"]

    def test_does_not_pay_cleans_only(self) -> None:
        result = trim(self.PASSAGES, query="when did the tower open", budget=60, tokenizer="whitespace",
                      prefill_ms_per_token=0.000001)
        assert result.trace[0].info["recipe"] == "clean"
        assert [r.stage for r in result.trace] == [AUTO_STAGE, "html", "dedup"]
        assert len(result.chunks) == 3 and "<p>" not in result.text  # markup and the copy gone, no budget
        assert result.tokens_after > 60

    def test_figure_needs_auto_and_no_pipeline(self) -> None:
        with pytest.raises(ConfigError, match="scorer='auto'"):
            trim(self.PASSAGES, budget=60, scorer="bm25", prefill_ms_per_token=1.0)
        with pytest.raises(ConfigError, match="prefill_ms_per_token"):
            trim(self.PASSAGES, budget=60, prefill_ms_per_token=-1.0)
        with pytest.raises(ConfigError, match="pass one of them"):
            trim(self.PASSAGES, budget=60, prefill_ms_per_token=1.0, keep=0.9)
