from __future__ import annotations

import tomllib

import pytest

from ragtrim_bench.gpu.gateway_e2e import ARMS, gateway_config


@pytest.mark.parametrize("name", list(ARMS))
def test_every_arm_is_a_valid_gateway_config(name: str) -> None:
    pytest.importorskip("starlette")
    from ragtrim.serve.config import parse_config

    config = parse_config(tomllib.loads(gateway_config(ARMS[name], 8000, 0.037)))
    arm = ARMS[name]
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
