from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from ragtrim_bench.gpu.gateway_e2e import ARMS, gateway_config, logged_requests


@pytest.mark.parametrize("name", list(ARMS))
def test_every_arm_is_a_valid_gateway_config(name: str) -> None:
    pytest.importorskip("starlette")
    from ragtrim.serve.config import parse_config

    config = parse_config(tomllib.loads(gateway_config(ARMS[name], 8000, 0.037, Path("/tmp/a b/\u00e9.jsonl"))))
    arm = ARMS[name]
    assert config.log.path == "/tmp/a b/\u00e9.jsonl"
    assert config.trim.budget == arm.budget and config.trim.scorer == arm.scorer
    assert config.trim.vector_store == "off"
    assert config.trim.prefill_ms_per_token == (0.037 if arm.scorer == "auto" else None)
    assert config.upstream.url == "http://127.0.0.1:8000/v1"
    assert config.serve.freeze_gc is arm.freeze_gc


def test_arms_measure_the_default_recipe_on_both_devices() -> None:
    assert {(a.scorer, a.gpu, a.budget) for a in ARMS.values()} >= {
        ("balanced", True, 0.25), ("balanced", True, 0.125), ("balanced", False, 0.25), ("balanced", False, 0.125)}
    assert all(list(a.rates) == sorted(a.rates) for a in ARMS.values())


def test_each_nofreeze_arm_differs_from_its_arm_in_freeze_gc_alone() -> None:
    for name, arm in ARMS.items():
        if name.endswith("-nofreeze"):
            twin = ARMS[name.removesuffix("-nofreeze")]
            assert not arm.freeze_gc and twin.freeze_gc
            assert (arm.budget, arm.scorer, arm.gpu, arm.rates) == (twin.budget, twin.scorer, twin.gpu, twin.rates)


def test_rates_replace_an_arms_ladder() -> None:
    from ragtrim_bench.gpu.gateway_e2e import parse_rates

    assert parse_rates("") == {}
    assert parse_rates("gpu-4x=16/20/24, direct=6/8") == {"gpu-4x": (16.0, 20.0, 24.0), "direct": (6.0, 8.0)}
    for bad in ("gpu-4x", "gpu-4x=", "gpu-4x=a/b", "=8", "gpu-4x=8/0"):
        with pytest.raises(ValueError, match="--rates"):
            parse_rates(bad)


def test_logged_requests_reads_each_requests_split_in_order(tmp_path: Path) -> None:
    lines = [{"endpoint": "models", "timings_ms": {"total": 1.0, "trim": None}},
             {"endpoint": "completions", "timings_ms": {"total": 9.0, "trim": 2.0, "upstream_ttft": 7.0}},
             {"endpoint": "completions", "recipe": {"name": "fast", "reason": "x"},
              "timings_ms": {"total": 50.0, "trim": 20.0, "queue": 0.0, "upstream_ttft": 30.0, "gc": 4.0,
                             "trim_stages": {"pipeline": 18.0, "dedup": 3.0}}},
             {"endpoint": "completions", "timings_ms": {"total": 90.0, "trim": 1.0, "queue": 0.0, "upstream_ttft": 88.0}},
             {"endpoint": "models", "timings_ms": {"total": 1.0, "trim": None, "queue": 0.0, "upstream_ttft": None}}]
    path = tmp_path / "arm.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    got = logged_requests(path, 2, skip=1)  # the first completion was a warm-up
    assert got == [{"trim_ms": 20.0, "upstream_ttft_ms": 30.0, "gc_ms": 4.0, "trim_stages_ms": {"pipeline": 18.0, "dedup": 3.0},
                    "recipe": "fast"},
                   {"trim_ms": 1.0, "upstream_ttft_ms": 88.0, "gc_ms": None, "trim_stages_ms": None, "recipe": None}]
    assert len(logged_requests(path, 5, timeout_s=0.1)) == 3  # fewer than asked: what there is, after the wait
