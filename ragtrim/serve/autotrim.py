"""The gateway's ``trim.scorer = "auto"``: learn what a prompt token costs the upstream from the streamed requests it
relays, and trim each request only as far as that pays (``ragtrim.recipes``).

Every streamed request tells the gateway its prompt tokens and the upstream's time to the first event. The prefill
cost per token is the slope of that time over the prompt size, fitted robustly (Theil-Sen: the median of the slopes
between pairs of points) over the lower envelope: the fastest of the most recent ``BAND_KEEP`` requests of each
prompt-size band (a quarter of an octave). Queueing only ever adds to a request's time to first token, so the fastest
request of a size is the one that waited least behind others; under load most requests wait, for times that have
nothing to do with their size, and a fit over all of them finds no cost per token at all, so ``auto`` would stop
trimming when the upstream is busiest and the untrimmed prompts would make it busier still. Keeping each band's own
recent requests also matters once the gateway trims: the prompts it then sends are all about the budget's size,
which alone cannot show what a token costs, and the untrimmed sizes it saw before stay in the fit. Until the cost is
learned (``MIN_OBSERVATIONS`` requests, the bands' sizes spread over ``MIN_SPREAD_TOKENS``), the configured
``trim.prefill_ms_per_token`` stands in; without one nothing is trimmed that might cost more than it saves: ``clean``
runs (a budget the request set itself still holds, with the cheapest recipe that enforces it), and the untrimmed
prompts it sends are what the gateway learns from. With one, the gateway would trim every prompt to about the
budget's size and never see sizes spread enough to learn from, so the figure it was given would stand for good:
while the sizes seen do not spread, a streamed request larger than every one seen that finds nothing else in flight
upstream goes untrimmed (``clean``, counted as ``learning``); the trimmed requests after it bring the small sizes.
That request is never slower than not trimming, and no other waits behind it. A trim's saving counts once more for
every other request the gateway has in flight upstream (``AutoTrim.in_flight``): each token sent also delays those.
The choice and its reason are counted in ``/metrics`` (``ragtrim_serve_auto_recipe_total``) and sent in the
``x-ragtrim-recipe`` header.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from ragtrim import recipes
from ragtrim.api import recipe_pipeline
from ragtrim.recipes import RecipeChoice, RecipeCosts, choose_recipe

BAND_KEEP = 128
"""Requests kept per prompt-size band (the most recent of that band); the fit reads the fastest of them."""
BANDS_PER_OCTAVE = 4
MIN_OBSERVATIONS = 20
MIN_SPREAD_TOKENS = 256
"""The prompt sizes the fit reads (each band's fastest request) must span at least this many tokens (10th to 90th
percentile) for a slope to mean anything: a gateway that always sends about the same size cannot see what a token
costs."""
REFIT_EVERY = 8
"""The slope is refitted after this many new observations (a fit over 500 requests is 125,000 pairs)."""

Points = list[tuple[int, float]]


class PrefillModel:
    """Upstream time to first token as a line over prompt tokens, learned from observations (thread-safe)."""

    def __init__(self, *, band_keep: int = BAND_KEEP) -> None:
        self._bands: dict[int, deque[tuple[int, float]]] = {}
        self._band_keep = band_keep
        self._lock = threading.Lock()
        self._fit: tuple[float, float] | None = None
        self._since_fit = 0
        self._due: tuple[int, Points] | None = None  # a refit that ``take_due`` set aside: its number, its points
        self._refits = 0  # refits made due so far; a fit is stored only over an older one's
        self._fit_number = 0

    def observe(self, prompt_tokens: int, ttft_ms: float) -> None:
        if prompt_tokens <= 0 or not math.isfinite(ttft_ms) or ttft_ms <= 0:
            return
        band = int(math.log2(prompt_tokens) * BANDS_PER_OCTAVE)
        with self._lock:
            self._bands.setdefault(band, deque(maxlen=self._band_keep)).append((prompt_tokens, ttft_ms))
            self._since_fit += 1

    @property
    def observations(self) -> int:
        """Requests the fit keeps."""
        with self._lock:
            return sum(len(kept) for kept in self._bands.values())

    def take_due(self) -> None:
        """Set aside the points of a refit that is due now, for the next ``per_token_ms`` to fit: the same fit as
        fitting now, without its cost (a Theil-Sen fit over the most kept points is milliseconds), which the gateway
        keeps off its event loop, where it records each finished request."""
        with self._lock:
            due = self._refit_due()
            if due is not None:
                self._due = due

    def _refit_due(self) -> tuple[int, Points] | None:
        """The refit due now, numbered, with the kept points (marked taken), else None; the lock is held."""
        seen = [point for kept in self._bands.values() for point in kept]
        unfitted = self._fit is None and self._due is None  # none yet, or the last one found no line
        if len(seen) < MIN_OBSERVATIONS or not (unfitted or self._since_fit >= REFIT_EVERY):
            return None
        self._since_fit = 0
        self._refits += 1
        return self._refits, self._envelope()

    def _envelope(self) -> Points:
        """Each band's fastest kept request (the lock is held): the one that queued least behind others."""
        return [min(kept, key=lambda point: point[1]) for kept in self._bands.values() if kept]

    def per_token_ms(self) -> float | None:
        """The learned prefill cost per prompt token, or None while too little is known."""
        with self._lock:
            seen = [point for kept in self._bands.values() for point in kept]
            if len(seen) < MIN_OBSERVATIONS:
                return None
            due = self._refit_due() or self._due
            self._due = None
        if due is not None:  # fitted outside the lock: ``observe`` (on the gateway's event loop) never waits on it
            number, points = due
            fitted = theil_sen(np.array([t for t, _ in points], dtype=np.float64),
                               np.array([y for _, y in points], dtype=np.float64))
            with self._lock:
                if number > self._fit_number:
                    self._fit, self._fit_number = fitted, number
        with self._lock:
            fit = self._fit
        if fit is None or self.spread_tokens() < MIN_SPREAD_TOKENS:
            return None
        return max(0.0, fit[1])

    def would_teach(self, prompt_tokens: int) -> bool:
        """Whether a request of ``prompt_tokens`` sent untrimmed would show what the fit lacks: the sizes seen do not
        spread over ``MIN_SPREAD_TOKENS`` yet, and none is as large."""
        with self._lock:
            largest = max((t for kept in self._bands.values() for t, _ in kept), default=0)
        return largest < prompt_tokens and self.spread_tokens() < MIN_SPREAD_TOKENS

    def spread_tokens(self) -> float:
        """How far the sizes the fit reads spread (each band's fastest request, 10th to 90th percentile). Over the
        bands, not over every kept request: once the gateway trims, nearly every prompt it sends is about the
        budget's size, and over every request the few untrimmed ones that taught the slope fell outside the
        percentiles, so the cost became unknown again under load, when trimming pays most."""
        with self._lock:
            tokens = [t for t, _ in self._envelope()]
        if len(tokens) < 2:
            return 0.0
        lo, hi = np.percentile(np.array(tokens, dtype=np.float64), [10, 90])
        return float(hi - lo)


def warm_up_fit() -> None:
    """Fit a throwaway model of ``MIN_OBSERVATIONS`` made-up requests: numpy's percentile and median take
    milliseconds on their first call in a process (tens on some hosts), which would otherwise land on the request
    that brings the gateway's ``MIN_OBSERVATIONS``-th observation."""
    model = PrefillModel()
    for i in range(MIN_OBSERVATIONS):
        model.observe(64 << (i % 8), 10.0 + i)
    model.per_token_ms()


def theil_sen(x: np.ndarray, y: np.ndarray) -> tuple[float, float] | None:
    """``(intercept, slope)`` of the Theil-Sen line through the points: the median slope over all pairs with
    different x, and the median of ``y - slope * x``; None when all x are equal."""
    dx = x[None, :] - x[:, None]
    dy = y[None, :] - y[:, None]
    upper = np.triu(np.ones_like(dx, dtype=bool), k=1) & (dx != 0)
    if not upper.any():
        return None
    slope = float(np.median(dy[upper] / dx[upper]))
    return float(np.median(y - slope * x)), slope


class AutoTrim:
    """One gateway's learning and choosing; its metrics live in the gateway's registry."""

    def __init__(self, *, registry: Any = None, costs: RecipeCosts | None = None,
                 recipes: Callable[[], tuple[Any, ...]] | None = None) -> None:
        """``recipes``: what this host can run (default: ``ragtrim.recipes.available_recipes``, asked per call)."""
        self.prefill = PrefillModel()
        self.costs = costs if costs is not None else RecipeCosts()
        self.in_flight = 0  # requests sent to the upstream and not finished (the gateway's event loop counts them)
        self._recipes_of = recipes
        self._calibrated = False
        self._lock = threading.Lock()
        self.chosen: Any = None
        self.learned: Any = None
        self.recipe_cost: Any = None
        if registry is not None:
            from prometheus_client import Counter, Gauge

            self.chosen = Counter("ragtrim_serve_auto_recipe", "Recipes trim.scorer='auto' chose, by why: pays (its "
                                  "cost is below the prefill it saves), nothing_pays (clean only), no_budget, "
                                  "not_learned (clean, or the cheapest recipe for a budget the request set), "
                                  "learning (clean: an untrimmed request that teaches the prefill cost)",
                                  ["recipe", "why"], registry=registry)
            self.learned = Gauge("ragtrim_serve_prefill_ms_per_token", "The upstream's prefill cost per prompt "
                                 "token as learned from streamed requests (0 until learned)", registry=registry)
            self.recipe_cost = Gauge("ragtrim_serve_recipe_cost_ms_per_token", "What each recipe costs here per "
                                     "input token (measured, then learned from trims)", ["recipe"], registry=registry)

    def _recipes(self) -> tuple[Any, ...]:
        return self._recipes_of() if self._recipes_of is not None else recipes.available_recipes()

    # -- load ---------------------------------------------------------------------------------------------------
    def sent(self) -> None:
        """A request went to the upstream (called on the gateway's event loop)."""
        self.in_flight += 1

    def done(self) -> None:
        """A request sent to the upstream finished, whatever its outcome (on the event loop)."""
        self.in_flight = max(0, self.in_flight - 1)

    # -- learning -------------------------------------------------------------------------------------------------
    def observe_request(self, prepared: Any, ttft_ms: float | None, outcome: str) -> None:
        """A finished request: a streamed one that succeeded teaches the prefill cost (a non-streamed one's time
        includes its whole answer). Cheap enough for the event loop: a refit it makes due is done by the next
        ``choose`` or ``refresh_metrics``, in a worker thread."""
        if prepared is None or ttft_ms is None or outcome != "ok" or not getattr(prepared, "stream", False):
            return
        self.prefill.observe(int(prepared.prompt_tokens), float(ttft_ms))
        self.prefill.take_due()

    def refresh_metrics(self) -> None:
        """Set the learned prefill cost's gauge (the gateway calls it in a worker thread before each scrape)."""
        self._show_learned(self.prefill.per_token_ms())

    def _show_learned(self, learned: float | None) -> None:
        if self.learned is not None and learned is not None:
            self.learned.set(learned)

    def observe_trim(self, recipe: str, tokens: int, seconds: float) -> None:
        if recipe == "clean":
            return
        self.costs.observe(recipe, tokens, seconds)
        if self.recipe_cost is not None:
            expected = self.costs.expected_ms(recipe, 1)
            if expected is not None:
                self.recipe_cost.labels(recipe).set(expected)

    def warm_up(self, tokenizer: Any = None) -> None:
        """Measure the recipes this host can run and run the fit once (once; the gateway calls it before taking
        requests)."""
        with self._lock:
            if self._calibrated:
                return
            self.costs.calibrate([r for r in self._recipes() if r != "clean"], build=recipe_pipeline,
                                 tokenizer=tokenizer)
            warm_up_fit()
            self._calibrated = True
        for recipe in self._recipes():
            expected = self.costs.expected_ms(recipe, 1)
            if self.recipe_cost is not None and expected is not None:
                self.recipe_cost.labels(recipe).set(expected)

    # -- choosing -------------------------------------------------------------------------------------------------
    def choose(self, *, tokens_before: int, budget: int | None, prior_ms_per_token: float | None,
               hard_budget: bool, tokenizer: Any = None, streamed: bool = False) -> RecipeChoice:
        """The recipe for one request. ``hard_budget``: the client set the budget itself, so it holds (the cheapest
        recipe that enforces it at least). ``streamed``: the request streams, so its time to first token will teach
        the prefill cost (only such a request goes untrimmed to learn it)."""
        learned = self.prefill.per_token_ms()
        self._show_learned(learned)
        per_token = learned if learned is not None else prior_ms_per_token
        pool = self._recipes()
        if hard_budget:
            pool = tuple(r for r in pool if r != "clean")
        cuts = budget is not None and budget < tokens_before
        if (learned is None and prior_ms_per_token is not None and streamed and cuts and not hard_budget
                and self.in_flight == 0 and self.prefill.would_teach(tokens_before)):
            choice = RecipeChoice("clean", f"clean: learning the upstream's prefill cost (the sizes seen spread over "
                                           f"{self.prefill.spread_tokens():.0f} tokens, {MIN_SPREAD_TOKENS} needed, "
                                           f"none as large as this request's documents); an untrimmed request with "
                                           f"nothing else in flight upstream shows what a token costs, and "
                                           f"trim.prefill_ms_per_token {prior_ms_per_token:g} stands in meanwhile",
                                  0.0, 0.0)
            self._count(choice, "learning")
            return choice
        if per_token is None:
            unknown = (f"the upstream's prefill cost is not learned yet ({self.prefill.observations} streamed requests "
                       f"kept, sizes spread over {self.prefill.spread_tokens():.0f} tokens; {MIN_OBSERVATIONS} over "
                       f"{MIN_SPREAD_TOKENS} needed) and trim.prefill_ms_per_token is not set")
            if hard_budget and budget is not None and budget < tokens_before:
                cheapest = pool[-1] if pool else "bm25"
                choice = RecipeChoice(cheapest, f"{cheapest}: the request set its own budget, which holds; {unknown}",  # type: ignore[arg-type]
                                      0.0, 0.0)
            else:
                choice = RecipeChoice("clean", f"clean: {unknown}, so nothing is trimmed that might cost more than "
                                               "it saves; the budget is not enforced", 0.0, 0.0)
            self._count(choice, "not_learned")
            return choice
        if not self._calibrated:
            self.warm_up(tokenizer)
        basis = (f"{per_token:.4f} ms per prompt token learned from {self.prefill.observations} requests"
                 if learned is not None else f"trim.prefill_ms_per_token {per_token:g}")
        # Every token sent also delays the requests the upstream serves beside it (their prefill waits, their
        # decoding shares the steps): untrimmed prompts under load would make the upstream busier still.
        sharing = 1 + self.in_flight
        if sharing > 1:
            basis += f", times {sharing}: {sharing - 1} other request{'s' if sharing > 2 else ''} in flight upstream"
        choice = choose_recipe(tokens_before=tokens_before, budget=budget, costs=self.costs, recipes=pool,
                               saving_ms=lambda before, after: per_token * (before - after) * sharing, basis=basis)
        if hard_budget and choice.recipe == "clean" and budget is not None and budget < tokens_before:
            cheapest = pool[-1] if pool else "bm25"
            choice = RecipeChoice(cheapest, f"{cheapest}: the request set its own budget, which holds; "  # type: ignore[arg-type]
                                  f"{choice.reason}", choice.expected_cost_ms, choice.expected_saving_ms,
                                  choice.considered)
        why = "no_budget" if not cuts else ("nothing_pays" if choice.recipe == "clean" else "pays")
        self._count(choice, why)
        return choice

    def _count(self, choice: RecipeChoice, why: str) -> None:
        if self.chosen is not None:
            self.chosen.labels(choice.recipe, why).inc()


def timed(run: Callable[[], Any]) -> tuple[Any, float]:
    """``run()`` and the seconds it took."""
    started = time.perf_counter()
    out = run()
    return out, time.perf_counter() - started
