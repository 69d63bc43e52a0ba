from __future__ import annotations

import pytest

import ragtrim.pipeline as pipeline_module
from ragtrim.api import default_pipeline
from ragtrim.errors import ConfigError
from ragtrim.scoring.embedding import CachedEmbedder
from ragtrim_bench.pipeline.stage_cost import (
    COUNT_INPUT,
    OTHER,
    Measured,
    Phases,
    StageCostConfig,
    instrumented,
    measure_one,
    phase_table,
    summary,
)
from ragtrim_bench.relevance.columns import Request

REQUEST = Request(column="nq-title", split="dev", id="t1", question="when did the tower open",
                  answers=("1889",), passages=("Eiffel Tower\nThe tower opened in 1889 for the fair.",
                                               "Other tower\nA different tower opened much later, in 1930.",
                                               "Unrelated\nNothing here about towers or years."),
                  gold_index=0)


def _measured(scorer: str, walls: dict[str, float], cpus: dict[str, float]) -> Measured:
    return Measured(scorer, "c", "r", sum(walls.values()), sum(cpus.values()), walls, cpus)


def test_config_checks() -> None:
    with pytest.raises(ConfigError, match="limit must be >= 1"):
        StageCostConfig(limit=0)
    with pytest.raises(ConfigError, match="unknown columns"):
        StageCostConfig(columns=("nope",))


def test_phases_add_up_per_phase() -> None:
    phases = Phases()
    phases.add("a", 0.001, 0.0005)
    phases.add("a", 0.002, 0.0005)
    assert phases.wall == {"a": pytest.approx(0.003)} and phases.cpu == {"a": pytest.approx(0.001)}


def test_phase_table_counts_a_missing_phase_as_zero() -> None:
    rows = [_measured("bm25", {"dedup": 2.0, OTHER: 1.0}, {"dedup": 1.0}),
            _measured("bm25", {"dedup": 4.0, "budget": 6.0, OTHER: 1.0}, {"dedup": 3.0, "budget": 2.0})]
    table = {r["phase"]: r for r in phase_table(rows)}
    assert table["dedup"]["mean_wall_ms"] == 3.0 and table["dedup"]["mean_cpu_ms"] == 2.0
    assert table["budget"]["mean_wall_ms"] == 3.0 and table["budget"]["mean_cpu_ms"] == 1.0
    assert table[OTHER]["mean_cpu_ms"] is None
    assert summary(rows)["n"] == 2


def test_instrumentation_times_every_phase_and_restores_the_pipeline() -> None:
    before = (pipeline_module._verified_counts, CachedEmbedder._fill)
    m = measure_one("bm25", REQUEST, 20)
    assert {COUNT_INPUT, "html", "dedup", "relevance", "compress", "budget", "order"} <= set(m.phase_wall_ms)
    assert m.wall_ms > 0 and m.cpu_ms > 0
    assert (pipeline_module._verified_counts, CachedEmbedder._fill) == before
    pipe = default_pipeline(budget=20, scorer="bm25")
    with instrumented(pipe, Phases()):
        assert "run" in vars(pipe.stages[0])
    assert "run" not in vars(pipe.stages[0])


def test_the_wait_for_counting_threads_is_counting_the_input() -> None:
    """The pipeline asks the counting threads for the input's counts while it calls ``_verified_counts``: that wait
    belongs to ``count input``, not to ``other``."""
    from ragtrim import get_counter
    from ragtrim.text.counting import PendingCounts

    original = PendingCounts.result
    phases = Phases()
    with instrumented(default_pipeline(budget=20, scorer="bm25"), phases):
        PendingCounts(get_counter(None), ["some words to count"]).result()
    assert COUNT_INPUT in phases.wall
    assert PendingCounts.result is original


def test_count_threads_one_counts_in_the_callers_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    from ragtrim._util import background
    from ragtrim.text import counting
    from ragtrim.text.tokens import TiktokenCounter
    from ragtrim_bench.pipeline.stage_cost import use_count_threads

    monkeypatch.setenv("RAGTRIM_FAST_COUNT", "off")  # tiktoken: the counter that counts on threads
    counter = TiktokenCounter()  # a new one reads the variable as it loads
    monkeypatch.setattr(background, "count_workers", background.count_workers)
    monkeypatch.setattr(counting, "count_workers", counting.count_workers)
    texts = [f"passage {i} " + "word " * 2000 for i in range(4)]
    use_count_threads(2)
    assert counting.start_counts(counter, texts)._futures
    use_count_threads(1)
    assert not counting.start_counts(counter, texts)._futures


def test_warm_times_each_request_again_with_its_caches_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--warm``: each request is timed cold, then again at once without clearing the caches, and both are
    reported under keys that name their state."""
    import ragtrim.caches
    from ragtrim_bench.pipeline import stage_cost

    cleared: list[int] = []
    clear = ragtrim.caches.clear_caches
    monkeypatch.setattr(ragtrim.caches, "clear_caches", lambda: (cleared.append(1), clear())[1])
    monkeypatch.setattr(stage_cost, "budgeted_requests", lambda *a, **k: [(REQUEST, 20), (REQUEST, 20)])
    result = stage_cost.run(StageCostConfig(scorers=("bm25",), columns=("nq-title",), limit=2, warm=True),
                            progress=False)
    body = result["by_scorer"]["bm25"]
    assert body["all"]["n"] == 2 and body["warm"]["n"] == 2
    assert "warm_p50_ms" in body["warm"] and "cold_p50_ms" not in body["warm"]
    assert len(cleared) == 2  # the cold trims only (warm_up clears nothing)
    assert "warm:" in result["state"]
    text = stage_cost.report(result)
    assert "warm (each request again at once, caches kept)" in text and "warm mean" in text


def test_without_warm_no_warm_figures(monkeypatch: pytest.MonkeyPatch) -> None:
    from ragtrim_bench.pipeline import stage_cost

    monkeypatch.setattr(stage_cost, "budgeted_requests", lambda *a, **k: [(REQUEST, 20)])
    result = stage_cost.run(StageCostConfig(scorers=("bm25",), columns=("nq-title",), limit=1), progress=False)
    assert "warm" not in result["by_scorer"]["bm25"] and "warm" not in stage_cost.report(result)
