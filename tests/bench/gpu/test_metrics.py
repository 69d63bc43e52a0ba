from __future__ import annotations

import pytest

from ragtrim_bench.gpu.metrics import summarize_records, throughput_at_slo
from ragtrim_bench.gpu.records import RequestRecord


def rec(i: int, ttft: float, e2e: float, out: int = 5, ok: bool = True, prompt: int = 100) -> RequestRecord:
    return RequestRecord(str(i), "a", ok, prompt_tokens=prompt, output_tokens=out, ttft_ms=ttft, e2e_ms=e2e,
                         itl_ms=(10.0,) * max(0, out - 1))


class TestSummarize:
    def test_hand_computed(self) -> None:
        records = [rec(0, 100, 140), rec(1, 200, 240), rec(2, 300, 340), rec(3, 0, 0, ok=False)]
        s = summarize_records(records, duration_s=2.0, ttft_slo_ms=250)
        assert (s["completed"], s["failed"]) == (3, 1)
        assert s["request_throughput"] == 1.5
        assert s["output_throughput"] == 7.5
        assert s["total_token_throughput"] == (300 + 15) / 2
        assert s["p50_ttft_ms"] == 200 and s["mean_ttft_ms"] == 200
        assert s["p99_ttft_ms"] == pytest.approx(298.0)
        assert s["mean_tpot_ms"] == 10.0  # (140-100)/(5-1)
        assert s["p50_itl_ms"] == 10.0
        assert s["goodput"] == 1.0  # two requests within 250 ms over 2 s
        assert s["slo_attainment"] == 0.5

    def test_tpot_single_token(self) -> None:
        assert rec(0, 10, 10, out=1).tpot_ms == 0.0

    def test_record_round_trip(self) -> None:
        r = rec(0, 1.5, 3.0)
        assert RequestRecord.from_dict(r.to_dict()) == r


class TestThroughputAtSlo:
    def test_picks_best_passing(self) -> None:
        ladder = [
            {"request_rate": 2, "request_throughput": 2.0, "p95_ttft_ms": 100, "failed": 0},
            {"request_rate": 4, "request_throughput": 3.9, "p95_ttft_ms": 450, "failed": 0},
            {"request_rate": 8, "request_throughput": 6.0, "p95_ttft_ms": 900, "failed": 0},
        ]
        assert throughput_at_slo(ladder, slo_ms=500)["request_rate"] == 4

    def test_none_pass(self) -> None:
        assert throughput_at_slo([{"request_throughput": 1, "p95_ttft_ms": 900}], slo_ms=500)["request_throughput"] == 0
