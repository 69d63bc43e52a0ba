"""The split of a gateway arm's single requests, read from a gpu gateway_e2e result."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragtrim.errors import InputError
from ragtrim_bench.gpu.gateway_split import arm_split, main, split


def _request(prep: float, upstream: float, stages: dict[str, float]) -> dict[str, object]:
    return {"trim_ms": prep, "upstream_ttft_ms": upstream, "trim_stages_ms": stages}


RESULT = {
    "single": {
        "direct": {"ttft_ms_in_order": [100.0, 180.0], "p99_ttft_ms": 179.2},
        "gpu-4x": {
            "ttft_ms_in_order": [50.0, 120.0, 52.0],
            "p50_ttft_gain": 1.9,
            "requests": [
                _request(14.0, 34.0, {"pipeline": 12.0, "dedup": 3.0, "compress": 4.0}),
                _request(15.0, 33.0, {"pipeline": 40.0, "dedup": 3.0, "compress": 5.0}),  # 72 ms nobody timed
                _request(16.0, 34.0, {"pipeline": 13.0, "dedup": 3.0, "compress": 4.0}),
            ],
        },
    }
}


def test_the_rest_is_what_neither_the_gateway_nor_the_upstream_timed() -> None:
    s = arm_split(RESULT["single"]["gpu-4x"], over_ms=20)
    assert s["logged"] == 3 and s["p50_ttft_gain"] == 1.9
    assert s["rest_ms"]["max"] == pytest.approx(72.0) and s["rest_ms"]["over_20_ms"] == 1
    assert s["rest_ms"]["p50"] == pytest.approx(2.0)
    assert s["trim_outside_stages_ms"]["max"] == pytest.approx(32.0)
    assert s["preparation_ms"]["max"] == 16.0 and s["upstream_first_byte_ms"]["p50"] == 34.0


def test_an_arm_without_a_request_log_has_the_clients_times_only() -> None:
    arms = split(RESULT)
    assert set(arms) == {"direct", "gpu-4x"}
    assert arms["direct"]["ttft_ms"]["max"] == 180.0 and "rest_ms" not in arms["direct"]


def test_main_writes_every_files_split(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "gpu_gateway.json"
    source.write_text(json.dumps(RESULT), encoding="utf-8")
    out = tmp_path / "split.json"
    assert main([str(source), "-o", str(out)]) == 0
    written = json.loads(out.read_text(encoding="utf-8"))
    assert written["files"][str(source)]["gpu-4x"]["rest_ms"]["over_20_ms"] == 1
    assert "rest p50 2.0 max 72.0 (1 over 20 ms)" in capsys.readouterr().out


@pytest.mark.parametrize("content", ["not json", "[]", '{"ladder": {}}'])
def test_a_file_that_is_not_a_result_is_an_input_error_naming_it(tmp_path: Path, content: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content, encoding="utf-8")
    with pytest.raises(InputError, match="bad.json"):
        main([str(bad)])


def test_timed_prefetches_are_reported_and_left_out_of_the_untimed_part() -> None:
    body = {"ttft_ms_in_order": [60.0], "requests": [
        _request(20.0, 34.0, {"pipeline": 18.0, "prefetch:relevance": 2.0, "prefetch:compress": 9.0, "dedup": 3.0})]}
    s = arm_split(body)
    assert s["trim_prefetch_ms"]["max"] == pytest.approx(11.0)
    assert s["trim_outside_stages_ms"]["max"] == pytest.approx(4.0)


def test_a_free_preparation_gives_the_most_a_cheaper_trim_could_gain() -> None:
    arms = split(RESULT, targets={"gpu-4x": 2.5})
    free = arms["gpu-4x"]["free_preparation"]
    # less the preparation: 36, 105, 36 ms; direct p50 140 ms
    assert free["ttft_less_preparation_ms"]["p50"] == pytest.approx(36.0)
    assert free["p50_gain"] == pytest.approx(140.0 / 36.0)
    assert free["preparation_p50_budget_ms"] == pytest.approx(140.0 / 2.5 - 36.0)
    assert "free_preparation" not in arms["direct"]


def test_a_target_no_free_preparation_reaches_has_a_negative_budget() -> None:
    free = split(RESULT, targets={"gpu-4x": 5.0})["gpu-4x"]["free_preparation"]
    assert free["preparation_p50_budget_ms"] < 0


@pytest.mark.parametrize("target", ["gpu-4x", "gpu-4x=fast", "=2.6", "gpu-4x=0.5", "gpu-4x=inf"])
def test_a_malformed_target_is_a_usage_error(tmp_path: Path, target: str) -> None:
    source = tmp_path / "gpu_gateway.json"
    source.write_text(json.dumps(RESULT), encoding="utf-8")
    with pytest.raises(SystemExit) as exc:
        main([str(source), "--target", target])
    assert exc.value.code == 2
