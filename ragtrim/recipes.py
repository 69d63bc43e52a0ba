"""Trim only when it pays: the recipes ``scorer="auto"`` chooses between by cost, what each costs on this host, and
the choice for one request.

A trim is worth its time when the prefill time it saves the model (its prefill cost per token times the tokens it
removes) is larger than the trim itself. On a GPU host MiniLM costs a few milliseconds and the default pays for
itself; on two CPU cores it costs a few hundred, more than a fast GPU saves on a 2,000-token request, while BM25 costs
a few. ``choose_recipe`` takes the best recipe (in the order of ``RECIPES``) whose expected cost is below the time it
is expected to save, down to ``clean``: HTML cleanup and exact duplicates only, which removes no content and costs
next to nothing, with the budget left unenforced because enforcing it would cost more than it saves.

``ragtrim.api.recipe_pipeline`` builds a recipe's pipeline. ``RecipeCosts`` knows what each recipe costs here: measured once on a synthetic request when it is first needed
(``calibrate``), then corrected by every trim it is told about (``observe``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ragtrim._util.forks import fork_safe_lock
from ragtrim.errors import ConfigError

Recipe = Literal["balanced", "fast", "bm25", "clean"]
RECIPES: tuple[Recipe, ...] = ("balanced", "fast", "bm25", "clean")
"""Best answers first. ``balanced`` and ``fast`` need MiniLM (``ragtrim.scoring.auto``); ``clean`` enforces no
budget."""

SAFETY = 1.2
"""A recipe is chosen only when its expected cost times this is below the expected saving: costs vary from
request to request (a cold passage against one in the vector store), and a trim that costs a little more than it
saves makes the request slower."""
LEARNING_RATE = 0.2
"""Weight of each new observation in a recipe's cost per token (an exponentially weighted mean) and in its spread."""
TAIL_SPREADS = 4.0
"""A recipe is chosen only when its cost plus this many spreads (the weighted mean absolute deviation of its cost per
token, as TCP's retransmission timer bounds a round trip) is also below the expected saving: a trim whose cost
varies widely (a model pass on a busy CPU) pays at the median and not at the tail, and at
the tail it would make the request slower than not trimming."""
CALIBRATION_PASSAGES = 20
CALIBRATION_WORDS = 110


@dataclass(frozen=True, slots=True)
class RecipeChoice:
    """What ``auto`` chose for one request and why: the recipe, the expected trim cost and prefill saving, and a
    sentence for the trace and logs."""

    recipe: Recipe
    reason: str
    expected_cost_ms: float
    expected_saving_ms: float
    considered: tuple[tuple[str, float], ...] = ()
    """``(recipe, expected cost ms)`` of every recipe weighed, best first."""

    def to_dict(self) -> dict[str, Any]:
        return {"recipe": self.recipe, "reason": self.reason, "expected_cost_ms": round(self.expected_cost_ms, 3),
                "expected_saving_ms": round(self.expected_saving_ms, 3),
                "considered": {name: round(ms, 3) for name, ms in self.considered}}


class RecipeCosts:
    """Each recipe's cost on this host in milliseconds per input token (thread-safe; one per process is shared by
    ``trim()``, ``shared_costs()``)."""

    def __init__(self) -> None:
        self._ms_per_token: dict[str, float] = {}
        self._spread: dict[str, float] = {}
        self._observations: dict[str, int] = {}
        self._lock = fork_safe_lock()

    def observe(self, recipe: str, tokens: int, seconds: float) -> None:
        """One trim of ``tokens`` input tokens by ``recipe`` took ``seconds``."""
        if tokens <= 0 or not math.isfinite(seconds) or seconds < 0:
            return
        rate = seconds * 1000 / tokens
        with self._lock:
            old = self._ms_per_token.get(recipe)
            if old is None:
                self._ms_per_token[recipe] = rate
                self._spread[recipe] = 0.0
            else:  # the spread first, against the mean before this observation
                self._spread[recipe] += LEARNING_RATE * (abs(rate - old) - self._spread[recipe])
                self._ms_per_token[recipe] = old + LEARNING_RATE * (rate - old)
            self._observations[recipe] = self._observations.get(recipe, 0) + 1

    def pass_over(self, recipe: str) -> None:
        """``recipe`` was not chosen only because a slow trim of it would cost more than it saves: its spread shrinks
        by ``LEARNING_RATE``. A recipe that is not chosen is not measured either, so without this one slow trim (a
        collection, a page fault in the model) would shut a better recipe out for good; each time it is passed over
        that evidence fades, until it is tried again and its next trims say what it costs now. Its expected cost
        does not fade: a recipe that costs more than it saves on average stays out."""
        with self._lock:
            if recipe in self._spread:
                self._spread[recipe] *= 1 - LEARNING_RATE

    def expected_ms(self, recipe: str, tokens: int) -> float | None:
        """The expected cost of ``recipe`` on ``tokens`` input tokens (None: never measured here)."""
        return self._ms(recipe, tokens, spreads=0.0)

    def tail_ms(self, recipe: str, tokens: int) -> float | None:
        """The expected cost plus ``TAIL_SPREADS`` spreads: what a slow trim of ``recipe`` on ``tokens`` input
        tokens costs (None: never measured here; the expected cost alone after one observation)."""
        return self._ms(recipe, tokens, spreads=TAIL_SPREADS)

    def _ms(self, recipe: str, tokens: int, *, spreads: float) -> float | None:
        with self._lock:
            rate = self._ms_per_token.get(recipe)
            spread = self._spread.get(recipe, 0.0)
        return None if rate is None else (rate + spreads * spread) * max(tokens, 0)

    def observations(self, recipe: str) -> int:
        with self._lock:
            return self._observations.get(recipe, 0)

    def calibrate(self, recipes: Sequence[str], *, build: Callable[..., Any], tokenizer: Any = None,
                  force: bool = False) -> None:
        """Measure each of ``recipes`` not measured yet (all with ``force``) on a synthetic request of
        ``CALIBRATION_PASSAGES`` passages, cold (``ragtrim.caches.clear_caches()`` before, models loaded first).
        ``build(recipe, budget=, tokenizer=)`` makes a recipe's pipeline (``ragtrim.api.recipe_pipeline``)."""
        from ragtrim.caches import clear_caches
        from ragtrim.text.tokens import get_counter

        passages = calibration_passages()
        counter = get_counter(tokenizer)
        tokens = sum(counter.count(p) for p in passages)
        query = "which harbour town built the stone bridge after the flood of the old mill"
        for recipe in recipes:
            if not force and self.expected_ms(recipe, 1) is not None:
                continue
            pipeline = build(recipe, budget=tokens // 4, tokenizer=tokenizer)
            pipeline.warm_up()
            pipeline.run(passages, query=query)  # first call: allocations, graph captures
            clear_caches()
            started = time.perf_counter()
            pipeline.run(passages, query=query)
            self.observe(recipe, tokens, time.perf_counter() - started)


_WORDS = ["the", "harbour", "town", "mill", "river", "stone", "bridge", "flood", "council", "market", "winter", "summer", "north", "south", "road", "church", "school", "farmers", "built", "old", "new", "after", "before", "during", "century", "trade", "ships", "wool", "grain", "records", "museum"]


def calibration_passages() -> list[str]:
    """Deterministic English-like passages of the size of a retrieval: ``CALIBRATION_PASSAGES`` of
    ``CALIBRATION_WORDS`` words in sentences of 11 (their cost, not their meaning, is what is measured)."""
    out = []
    for p in range(CALIBRATION_PASSAGES):
        words = [_WORDS[(p * 7 + i * 5 + i * i) % len(_WORDS)] for i in range(CALIBRATION_WORDS)]
        sentences = [" ".join(words[i:i + 11]).capitalize() + "." for i in range(0, len(words), 11)]
        out.append(f"Passage {p}\n" + " ".join(sentences))
    return out


_SHARED = RecipeCosts()


def shared_costs() -> RecipeCosts:
    """The process's recipe costs (``trim(prefill_ms_per_token=...)`` reads and updates them)."""
    return _SHARED


def available_recipes() -> tuple[Recipe, ...]:
    """The recipes this install can run: all with MiniLM (``scorer="auto"`` resolving to ``balanced``), else BM25 and
    cleaning."""
    from ragtrim.scoring.auto import choose

    return RECIPES if choose().scorer == "balanced" else ("bm25", "clean")


def choose_recipe(*, tokens_before: int, budget: int | None, saving_ms: Callable[[int, int], float],
                  costs: RecipeCosts, recipes: Sequence[Recipe] | None = None, safety: float = SAFETY,
                  basis: str = "") -> RecipeChoice:
    """The best of ``recipes`` (default: ``available_recipes()``) whose expected cost times ``safety``, and whose
    cost of a slow trim (``RecipeCosts.tail_ms``), are below the prefill time it saves: ``saving_ms(tokens_before, budget)``, the model's time on ``tokens_before`` prompt
    tokens minus its time on ``budget``. ``clean`` when none is (or there is no budget to reach). ``basis``: where
    the saving figure comes from, for the reason. A better recipe passed over only for its slow trims has that
    evidence fade (``RecipeCosts.pass_over``), so it is tried again later."""
    if safety < 1:
        raise ConfigError(f"safety must be >= 1, got {safety}")
    pool = tuple(recipes) if recipes is not None else available_recipes()
    if budget is None or budget >= tokens_before:
        return RecipeChoice("clean", "no budget to reach: nothing to save but boilerplate and copies", 0.0, 0.0)
    saving = max(0.0, saving_ms(tokens_before, budget))
    considered: list[tuple[str, float]] = []
    source = f" ({basis})" if basis else ""
    for recipe in pool:
        if recipe == "clean":
            continue
        cost, tail = costs.expected_ms(recipe, tokens_before), costs.tail_ms(recipe, tokens_before)
        if cost is None or tail is None:
            continue
        considered.append((recipe, cost))
        if cost * safety < saving:
            if tail < saving:
                return RecipeChoice(recipe, f"{recipe}: expected {cost:.1f} ms (slow ones {tail:.1f} ms) < "
                                            f"{saving:.1f} ms of prefill saved on {tokens_before} -> {budget} "
                                            f"tokens{source}", cost, saving, tuple(considered))
            costs.pass_over(recipe)  # only its slow trims stand in the way
    cheapest = min((ms for _, ms in considered), default=0.0)
    return RecipeChoice("clean", f"clean: no recipe pays for itself, the cheapest costs {cheapest:.1f} ms and "
                                 f"{tokens_before} -> {budget} tokens save {saving:.1f} ms of prefill{source}; the "
                                 "budget is not enforced", 0.0, saving, tuple(considered))


AUTO_STAGE = "auto"
"""The trace's first report when ``auto`` chose a recipe by cost: no removals; ``info`` is ``RecipeChoice.to_dict()``."""
