"""``ragtrim-bench serve auto_e2e``: real gateways in front of a real fake upstream, on real sockets."""

from __future__ import annotations

import pytest

from ragtrim_bench.serve.auto_e2e import (
    AutoE2EConfig,
    against_direct,
    gateway_stats,
    measure,
    report,
    rest_ms,
    rows,
)


def test_auto_learns_the_upstream_and_stops_cleaning_only(shared_data: object) -> None:
    """After its learning requests, the auto gateway knows the upstream's prefill cost per token (the fake sleeps
    37 ms per 1,000 prompt tokens) and chooses by it; before, it only cleaned."""
    config = AutoE2EConfig(per_1k_ms=(37.0,), requests=2, learn=24, arms=("direct", "notrim", "auto"))
    result = measure(config)
    speed = result["speeds"][0]
    assert speed["auto"]["learned_prefill_ms_per_token"] == pytest.approx(0.037, rel=0.3)
    choices = speed["auto"]["choices"]
    assert choices.get("clean:not_learned", 0) >= 20
    assert sum(n for key, n in choices.items() if not key.endswith(":not_learned")) >= 2
    assert all(a["failed"] == 0 and a["n"] == 2 for a in speed["arms"].values())
    by_recipe = speed["against_direct_by_recipe"]["auto"]  # from each response's x-ragtrim-recipe header
    assert by_recipe["learn"]["clean"]["n"] == choices["clean:not_learned"]
    assert sum(d["n"] for d in by_recipe["timed"].values()) == 2
    assert "auto chose" in report(result) and "auto - direct, same request (learn)" in report(result)


def test_against_direct_groups_each_requests_difference_by_recipe() -> None:
    seen = {("learn", 0): {"direct": (100.0, ""), "auto": (104.0, "clean")},
            ("timed", 1): {"direct": (100.0, ""), "auto": (60.0, "fast")},
            ("timed", 2): {"direct": (90.0, ""), "auto": (95.0, "fast"), "notrim": (93.0, "")},
            ("timed", 3): {"auto": (50.0, "fast")}}  # direct failed: no pair
    out = against_direct(seen)
    assert out["auto"]["learn"] == {"clean": {"n": 1, "slower": 1, "median_ms": 4.0, "max_ms": 4.0}}
    assert out["auto"]["timed"]["fast"]["n"] == 2 and out["auto"]["timed"]["fast"]["slower"] == 1
    assert out["auto"]["timed"]["fast"]["max_ms"] == 5.0
    assert out["notrim"] == {"timed": {"?": {"n": 1, "slower": 1, "median_ms": 3.0, "max_ms": 3.0}}}


def test_config_is_checked() -> None:
    with pytest.raises(ValueError, match="direct"):
        AutoE2EConfig(arms=("auto",))
    with pytest.raises(ValueError, match="requests"):
        AutoE2EConfig(requests=1)
    with pytest.raises(ValueError, match="rows"):
        AutoE2EConfig(rows="fresh")


def test_gateway_stats_split_the_requests_after_a_snapshot() -> None:
    before = ('ragtrim_serve_trim_seconds_sum 1.0\nragtrim_serve_trim_seconds_count 10.0\n'
              'ragtrim_serve_upstream_ttft_seconds_sum 4.0\nragtrim_serve_upstream_ttft_seconds_count 10.0\n'
              'ragtrim_serve_tokens_total{kind="prompt_in"} 1000.0\n'
              'ragtrim_serve_trim_stage_seconds_sum{stage="pipeline"} 0.8\n'
              'ragtrim_serve_trim_stage_seconds_count{stage="pipeline"} 10.0\n')
    after = ('ragtrim_serve_trim_seconds_sum 1.5\nragtrim_serve_trim_seconds_count 20.0\n'
             'ragtrim_serve_upstream_ttft_seconds_sum 5.0\nragtrim_serve_upstream_ttft_seconds_count 20.0\n'
             'ragtrim_serve_tokens_total{kind="prompt_in"} 3000.0\n'
             'ragtrim_serve_trim_stage_seconds_sum{stage="pipeline"} 1.2\n'
             'ragtrim_serve_trim_stage_seconds_count{stage="pipeline"} 20.0\n'
             'ragtrim_serve_trim_stage_seconds_sum{stage="dedup"} 0.03\n'
             'ragtrim_serve_trim_stage_seconds_count{stage="dedup"} 10.0\n')
    split = gateway_stats(after, before)
    assert split == {"mean_prepare_ms": pytest.approx(50.0), "mean_upstream_ttft_ms": pytest.approx(100.0),
                     "prompt_tokens_in": 2000.0, "prompt_tokens_out": None,
                     "mean_trim_stage_ms": {"pipeline": pytest.approx(40.0), "dedup": pytest.approx(3.0)}}
    assert gateway_stats(after)["mean_prepare_ms"] == pytest.approx(75.0)
    assert rest_ms(152.0, split) == pytest.approx(2.0)
    assert rest_ms(None, split) is None


def test_single_use_rows_share_no_passage(shared_data: object) -> None:
    direct, wrapped = rows(AutoE2EConfig(requests=6, learn=4))
    assert len(direct) == len(wrapped) == 10
    blocks = [w.split("<context>\n", 1)[1].split("\n</context>", 1)[0].split("\n\n") for _, w in wrapped]
    passages = [p for block in blocks for p in block]
    assert all(len(block) == 20 for block in blocks) and len(set(passages)) == len(passages)
