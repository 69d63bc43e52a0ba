"""trim.scorer = "auto" in the gateway: the prefill cost learned from streamed requests and the recipe chosen by it."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from ragtrim.recipes import RecipeCosts
from ragtrim.serve.autotrim import (
    BANDS_PER_OCTAVE,
    MIN_OBSERVATIONS,
    MIN_SPREAD_TOKENS,
    AutoTrim,
    PrefillModel,
    theil_sen,
)
from tests.serve.conftest import read_log

CHAT = "/v1/chat/completions"


def learned_model(per_token: float, sizes: range = range(100, 2100, 50), base: float = 20.0) -> PrefillModel:
    model = PrefillModel()
    for k, tokens in enumerate(sizes):
        queued = 300.0 if k % 7 == 0 else 0.0  # every seventh request waited behind others
        model.observe(tokens, base + per_token * tokens + queued)
    return model


class TestPrefillModel:
    def test_theil_sen_recovers_a_line_and_ignores_outliers(self) -> None:
        x = np.arange(10, dtype=np.float64)
        y = 3.0 + 0.5 * x
        y[4] += 100.0
        intercept, slope = theil_sen(x, y) or (0.0, 0.0)
        assert slope == pytest.approx(0.5) and intercept == pytest.approx(3.0)
        assert theil_sen(np.ones(4), np.arange(4.0)) is None

    def test_learns_the_slope_despite_queueing(self) -> None:
        assert learned_model(0.037).per_token_ms() == pytest.approx(0.037, rel=0.05)

    def test_learns_the_slope_while_most_requests_queue(self) -> None:
        """Under load most requests wait behind others, for times unrelated to their size: the fit reads each size's
        fastest request, which waited least, and keeps the cost it learned (over all requests it found none, and
        ``auto`` stopped trimming when the upstream was busiest)."""
        import random

        rng = random.Random(0)
        model = PrefillModel()
        for load, queue_ms, n in ((False, 2.0, 60), (True, 2000.0, 400)):
            for _ in range(n):
                tokens = rng.choice([600, 2400]) + rng.randint(-150, 150)
                model.observe(tokens, 20.0 + 0.03 * tokens + rng.expovariate(1 / queue_ms))
            assert model.per_token_ms() == pytest.approx(0.03, rel=0.15), "under load" if load else "idle"

    def test_unknown_until_enough_requests_of_spread_sizes(self) -> None:
        few = PrefillModel()
        for t in range(MIN_OBSERVATIONS - 1):
            few.observe(100 + 100 * t, 20.0 + 3.7 * t)
        assert few.per_token_ms() is None
        same_size = learned_model(0.037, sizes=range(1000, 1100, 2))
        assert same_size.observations >= MIN_OBSERVATIONS and same_size.per_token_ms() is None

    def test_trimmed_prompts_do_not_erase_what_untrimmed_ones_taught(self) -> None:
        """Once the gateway trims, every prompt it sends is about the budget's size; the untrimmed sizes it saw
        before stay in the fit, so the cost stays known (a single window of recent requests would lose it)."""
        model = learned_model(0.037, sizes=range(1500, 3500, 50))
        for k in range(2000):
            tokens = 600 + k % 40
            model.observe(tokens, 20.0 + 0.037 * tokens)
        assert model.per_token_ms() == pytest.approx(0.037, rel=0.05)

    def test_a_few_untrimmed_requests_keep_the_cost_known_among_many_trimmed(self) -> None:
        """Under load ``auto`` trims nearly every request to the budget's size: the 25 untrimmed requests that taught
        the slope are then under a tenth of those kept, and over every kept request their sizes fell outside the
        10th-90th percentile, so the cost became unknown and ``auto`` sent requests untrimmed again (``clean``).
        The spread is read over the bands the fit reads, as the fit itself is."""
        model = PrefillModel()
        for tokens in range(1800, 3000, 48):
            model.observe(tokens, 20.0 + 0.037 * tokens)
        assert model.per_token_ms() == pytest.approx(0.037, rel=0.05)
        for k in range(400):
            tokens = 580 + k % 40
            model.observe(tokens, 20.0 + 0.037 * tokens + (300.0 if k % 3 else 0.0))
        assert model.observations == 263  # 25 untrimmed, 238 trimmed (two bands, at most 128 each): under a tenth
        assert model.spread_tokens() >= 1000
        assert model.per_token_ms() == pytest.approx(0.037, rel=0.05)

    def test_a_refit_made_due_by_a_request_is_fitted_by_the_next_reader(self, monkeypatch: pytest.MonkeyPatch
                                                                         ) -> None:
        """Recording a request never fits (the gateway records on its event loop); the next ``per_token_ms``
        fits the points kept when the refit fell due, so it answers what fitting at once would have."""
        from ragtrim.serve import autotrim

        fits: list[int] = []

        def counted(x: np.ndarray, y: np.ndarray) -> tuple[float, float] | None:
            fits.append(len(x))
            return theil_sen(x, y)

        monkeypatch.setattr(autotrim, "theil_sen", counted)
        auto = AutoTrim(registry=CollectorRegistry())
        streamed = [SimpleNamespace(stream=True, prompt_tokens=t) for t in range(100, 2100, 50)]
        for p in streamed[:MIN_OBSERVATIONS]:
            auto.observe_request(p, 20.0 + 0.037 * p.prompt_tokens, "ok")
        for p in streamed[MIN_OBSERVATIONS:MIN_OBSERVATIONS + 3]:
            auto.observe_request(p, 500.0, "ok")  # after the refit fell due: not in it
        assert fits == []
        bands = len({int(np.log2(p.prompt_tokens) * BANDS_PER_OCTAVE) for p in streamed[:MIN_OBSERVATIONS]})
        assert auto.prefill.per_token_ms() == pytest.approx(0.037)
        assert fits == [bands]  # one point a band: its fastest request
        assert auto.prefill.per_token_ms() == pytest.approx(0.037) and fits == [bands]

    def test_the_learned_cost_is_shown_when_read(self) -> None:
        registry = CollectorRegistry()
        auto = AutoTrim(registry=registry)
        for t in range(100, 2100, 50):
            auto.observe_request(SimpleNamespace(stream=True, prompt_tokens=t), 20.0 + 0.037 * t, "ok")
        assert registry.get_sample_value("ragtrim_serve_prefill_ms_per_token") == 0
        auto.refresh_metrics()
        assert registry.get_sample_value("ragtrim_serve_prefill_ms_per_token") == pytest.approx(0.037)

    def test_nonsense_is_ignored(self) -> None:
        model = PrefillModel()
        model.observe(0, 10.0)
        model.observe(100, float("inf"))
        model.observe(100, -1.0)
        assert model.observations == 0


def auto_with(costs: dict[str, float], registry: Any = None) -> AutoTrim:
    table = RecipeCosts()
    for recipe, rate in costs.items():
        table.observe(recipe, 1000, rate)
    auto = AutoTrim(registry=registry, costs=table, recipes=lambda: ("bm25", "clean"))
    auto._calibrated = True  # the costs above stand for the measurement
    return auto


class TestAutoTrimChoice:
    def test_nothing_costly_until_learned(self) -> None:
        auto = auto_with({"bm25": 0.002})
        choice = auto.choose(tokens_before=2000, budget=500, prior_ms_per_token=None, hard_budget=False)
        assert choice.recipe == "clean" and "not learned yet" in choice.reason
        held = auto.choose(tokens_before=2000, budget=500, prior_ms_per_token=None, hard_budget=True)
        assert held.recipe == "bm25" and "set its own budget" in held.reason

    def test_prior_then_learned_figure(self) -> None:
        auto = auto_with({"bm25": 0.002})  # 4 ms on 2,000 tokens
        args: dict[str, Any] = {"tokens_before": 2000, "budget": 500, "hard_budget": False}
        assert auto.choose(prior_ms_per_token=0.001, **args).recipe == "clean"  # saves 1.5 ms
        auto.prefill = learned_model(0.037)  # saves 55 ms
        choice = auto.choose(prior_ms_per_token=0.001, **args)
        assert choice.recipe == "bm25" and "learned from" in choice.reason

    def test_requests_in_flight_upstream_share_the_saving(self) -> None:
        """Each token sent also delays the requests the upstream serves beside it: under load a trim that would
        not pay for one request alone pays, instead of untrimmed prompts making a busy upstream busier."""
        auto = auto_with({"bm25": 0.002})  # 4 ms on 2,000 tokens
        args: dict[str, Any] = {"tokens_before": 2000, "budget": 500, "hard_budget": False,
                                "prior_ms_per_token": 0.002}  # 3 ms saved by one request alone
        assert auto.choose(**args).recipe == "clean"
        for _ in range(3):
            auto.sent()
        busy = auto.choose(**args)
        assert busy.recipe == "bm25" and "3 other requests in flight upstream" in busy.reason
        for _ in range(4):
            auto.done()
        assert auto.in_flight == 0 and auto.choose(**args).recipe == "clean"

    def test_with_a_prior_an_idle_streamed_request_goes_untrimmed_until_sizes_spread(self) -> None:
        """Trimmed prompts are all about the budget's size and cannot teach the slope: without a request of another
        size the configured figure would stand for good."""
        registry = CollectorRegistry()
        auto = auto_with({"bm25": 0.002}, registry)
        args: dict[str, Any] = {"tokens_before": 2000, "budget": 500, "prior_ms_per_token": 1.0}
        learning = auto.choose(hard_budget=False, streamed=True, **args)
        assert learning.recipe == "clean" and "learning the upstream's prefill cost" in learning.reason
        assert registry.get_sample_value("ragtrim_serve_auto_recipe_total",
                                         {"recipe": "clean", "why": "learning"}) == 1
        # what teaches nothing, or would delay another request, or must hold a budget, follows the prior
        assert auto.choose(hard_budget=False, streamed=False, **args).recipe == "bm25"
        assert auto.choose(hard_budget=True, streamed=True, **args).recipe == "bm25"
        assert auto.choose(tokens_before=400, budget=500, prior_ms_per_token=1.0, hard_budget=False,
                           streamed=True).recipe == "clean"  # nothing to cut: no_budget, not learning
        auto.sent()
        assert auto.choose(hard_budget=False, streamed=True, **args).recipe == "bm25"
        auto.done()
        auto.prefill.observe(2050, 100.0)  # the untrimmed request it sent: the next ones trim and bring small sizes
        assert auto.choose(hard_budget=False, streamed=True, **args).recipe == "bm25"
        assert auto.choose(hard_budget=False, streamed=True, tokens_before=4000, budget=1000,
                           prior_ms_per_token=1.0).recipe == "clean"  # larger than any seen: teaches more
        for tokens in (480, 500, 520) * 7:
            auto.prefill.observe(tokens, 20.0 + 0.04 * tokens)
        assert auto.prefill.spread_tokens() >= 256 and auto.prefill.per_token_ms() is not None
        assert auto.choose(hard_budget=False, streamed=True, tokens_before=4000, budget=1000,
                           prior_ms_per_token=1.0).recipe == "bm25"  # learned: no more untrimmed requests

    def test_a_budget_the_client_set_holds(self) -> None:
        choice = auto_with({"bm25": 0.002}).choose(tokens_before=2000, budget=500, prior_ms_per_token=0.0001,
                                                   hard_budget=True)
        assert choice.recipe == "bm25" and "set its own budget" in choice.reason

    def test_only_streamed_successes_teach(self) -> None:
        auto = auto_with({"bm25": 0.002})
        streamed = SimpleNamespace(stream=True, prompt_tokens=500)
        auto.observe_request(SimpleNamespace(stream=False, prompt_tokens=500), 30.0, "ok")
        auto.observe_request(streamed, 30.0, "upstream_error")
        auto.observe_request(streamed, None, "ok")
        auto.observe_request(None, 30.0, "ok")
        assert auto.prefill.observations == 0
        auto.observe_request(streamed, 30.0, "ok")
        assert auto.prefill.observations == 1

    def test_warm_up_runs_the_fit_once_before_any_request(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """numpy's percentile and median are slow on their first call in a process: the gateway's warm-up makes
        that call, so the request that brings the fit its first ``MIN_OBSERVATIONS`` observations does not."""
        from ragtrim.serve import autotrim

        fits: list[int] = []
        spreads: list[float] = []
        real_spread = PrefillModel.spread_tokens

        def counted(x: np.ndarray, y: np.ndarray) -> tuple[float, float] | None:
            fits.append(len(x))
            return theil_sen(x, y)

        def spread(model: PrefillModel) -> float:
            spreads.append(real_spread(model))
            return spreads[-1]

        monkeypatch.setattr(autotrim, "theil_sen", counted)
        monkeypatch.setattr(PrefillModel, "spread_tokens", spread)
        monkeypatch.setattr(RecipeCosts, "calibrate", lambda *a, **k: None)
        auto = AutoTrim(registry=CollectorRegistry(), recipes=lambda: ("bm25", "clean"))
        auto.warm_up()
        auto.warm_up()
        assert len(fits) == 1 and fits[0] >= 2 and spreads and spreads[0] >= MIN_SPREAD_TOKENS
        assert auto.prefill.observations == 0  # the made-up requests stay out of the gateway's own fit

    def test_metrics_count_choices(self) -> None:
        registry = CollectorRegistry()
        auto = auto_with({"bm25": 0.002}, registry)
        auto.choose(tokens_before=2000, budget=500, prior_ms_per_token=1.0, hard_budget=False)
        auto.choose(tokens_before=2000, budget=None, prior_ms_per_token=1.0, hard_budget=False)
        assert registry.get_sample_value("ragtrim_serve_auto_recipe_total", {"recipe": "bm25", "why": "pays"}) == 1
        assert registry.get_sample_value("ragtrim_serve_auto_recipe_total",
                                         {"recipe": "clean", "why": "no_budget"}) == 1


DOCS = [f"Passage {i}: " + ("the tower opened in 1889 and drew crowds to the fair " if i == 3 else
                             "a bridge crossed the river and markets sold grain and wool ") * 12 for i in range(8)]


class TestGatewayLearnsAndChooses:
    @pytest.fixture(autouse=True)
    def _bm25_only(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import ragtrim.recipes

        monkeypatch.setattr(ragtrim.recipes, "available_recipes", lambda: ("bm25", "clean"))

    def _learn(self, gw: Any) -> None:
        for n in range(25):  # streamed requests of 100 to 2,500 words teach the prefill cost
            body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "word " * (100 + 100 * n)}]}
            with httpx.stream("POST", gw.url + CHAT, json=body) as r:
                r.read()

    def test_slow_upstream_trims(self, fake: Any, gateway: Any) -> None:
        up = fake(base_ms=2, per_1k_ms=400)  # 0.4 ms per fake token: trimming pays
        gw, g = gateway({"upstream": {"url": up.url + "/v1"}, "trim": {"budget": 0.25, "scorer": "auto"}})
        self._learn(gw)
        assert (g.auto.prefill.per_token_ms() or 0) > 0.2
        r = httpx.post(gw.url + CHAT, json={"model": "m", "messages": [{"role": "user", "content": "when did the "
                                                                         "tower open"}], "documents": DOCS})
        assert r.status_code == 200 and r.headers["x-ragtrim-recipe"] == "bm25"
        assert int(r.headers["x-ragtrim-tokens-saved"]) > 0
        metrics = httpx.get(gw.url + "/metrics").text
        assert 'ragtrim_serve_auto_recipe_total{recipe="bm25",why="pays"} 1.0' in metrics
        assert "ragtrim_serve_prefill_ms_per_token" in metrics

    def test_requests_in_flight_upstream_are_counted_until_they_end(self, fake: Any, gateway: Any) -> None:
        import threading

        up = fake(base_ms=300, per_1k_ms=0.001)
        gw, g = gateway({"upstream": {"url": up.url + "/v1"},
                         "trim": {"budget": 0.25, "scorer": "auto", "prefill_ms_per_token": 0.0000001}})
        body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hello"}]}

        def send() -> None:
            with httpx.stream("POST", gw.url + CHAT, json=body) as r:
                r.read()

        threads = [threading.Thread(target=send) for _ in range(3)]
        for t in threads:
            t.start()
        seen = 0
        for _ in range(200):
            seen = max(seen, g.auto.in_flight)
            if seen == 3:
                break
            threading.Event().wait(0.005)
        for t in threads:
            t.join()
        assert seen == 3 and g.auto.in_flight == 0
        send()
        assert g.auto.in_flight == 0  # off the count before the client read the stream's end
        httpx.post(gw.url + CHAT, json={"model": "m", "messages": [{"role": "user", "content": "q"}]})
        assert g.auto.in_flight == 0

    def test_with_a_prior_the_first_streamed_request_teaches_then_trims(self, fake: Any, gateway: Any,
                                                                        tmp_path: Path) -> None:
        up = fake(base_ms=2, per_1k_ms=400)
        gw, g = gateway({"upstream": {"url": up.url + "/v1"}, "log": {"path": str(tmp_path / "requests.jsonl")},
                         "trim": {"budget": 0.25, "scorer": "auto", "prefill_ms_per_token": 0.4}})
        body = {"model": "m", "stream": True, "documents": DOCS,
                "messages": [{"role": "user", "content": "when did the tower open"}]}
        recipes = []
        for _ in range(3):
            with httpx.stream("POST", gw.url + CHAT, json=body) as r:
                r.read()
                recipes.append(r.headers["x-ragtrim-recipe"])
        assert recipes == ["clean", "bm25", "bm25"]
        assert g.auto.prefill.spread_tokens() >= 256  # the untrimmed size beside the trimmed ones
        metrics = httpx.get(gw.url + "/metrics").text
        assert 'ragtrim_serve_auto_recipe_total{recipe="clean",why="learning"} 1.0' in metrics
        logged = read_log(tmp_path / "requests.jsonl", 3)  # each request's choice and reason, and its trim's stages
        assert [e["recipe"]["name"] for e in logged] == recipes
        assert "learning" in logged[0]["recipe"]["reason"] and "pays" not in logged[0]["recipe"]["reason"]
        stages = logged[1]["timings_ms"]["trim_stages"]
        assert {"pipeline", "relevance", "budget"} <= set(stages)
        assert 0 < stages["relevance"] <= stages["pipeline"] <= logged[1]["timings_ms"]["trim"]

    def test_fast_upstream_is_not_trimmed(self, fake: Any, gateway: Any) -> None:
        up = fake(base_ms=2, per_1k_ms=0.001)  # prefill costs nothing: trimming never pays
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"},
                         "trim": {"budget": 0.25, "scorer": "auto", "prefill_ms_per_token": 0.0000001}})
        r = httpx.post(gw.url + CHAT, json={"model": "m", "messages": [{"role": "user", "content": "when did the "
                                                                         "tower open"}], "documents": DOCS})
        assert r.status_code == 200 and r.headers["x-ragtrim-recipe"] == "clean"
        assert r.headers["x-ragtrim-documents"] == "8/8"
