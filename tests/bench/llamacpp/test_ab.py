"""The llama.cpp CPU benchmark's pure helpers (ragtrim_bench.llamacpp.ab): hand-made records, no server, no model."""

from __future__ import annotations

import math
import socket

import pytest

from ragtrim_bench.llamacpp.ab import (
    ABRecord,
    answer_line,
    arm_order,
    free_port,
    llama_server_command,
    summarize_ab,
)


def rec(arm: str, trim_ms: float, ttft_ms: float, tokens: int, correct: float, *, success: bool = True) -> ABRecord:
    return ABRecord(question_id="q", arm=arm, success=success, trim_ms=trim_ms, ttft_ms=ttft_ms,
                    prompt_tokens=tokens, correct=correct)


def test_e2e_ttft_is_trim_plus_ttft() -> None:
    r = rec("trimmed", 40.0, 500.0, 600, 1.0)
    assert r.e2e_ttft_ms == 540.0
    assert r.to_dict()["e2e_ttft_ms"] == 540.0


def test_answer_line_stops_at_the_first_newline() -> None:
    assert answer_line(" Paris\nQuestion: x") == " Paris"
    assert answer_line("\nParis") == ""
    assert answer_line("") == ""


def test_arms_alternate() -> None:
    assert arm_order(0) == ("untrimmed", "trimmed")
    assert arm_order(1) == ("trimmed", "untrimmed")
    assert arm_order(2) == arm_order(0)


def test_summary_ratios_and_accuracy() -> None:
    records = [
        rec("untrimmed", 0.0, 4000.0, 2400, 0.0), rec("trimmed", 100.0, 900.0, 600, 1.0),
        rec("untrimmed", 0.0, 6000.0, 2400, 1.0), rec("trimmed", 100.0, 1900.0, 600, 1.0),
    ]
    s = summarize_ab(records)
    assert s["untrimmed_p50_e2e_ttft_ms"] == 5000.0 and s["trimmed_p50_e2e_ttft_ms"] == 1500.0
    assert s["trimmed_p50_trim_ms"] == 100.0 and s["trimmed_p50_ttft_ms"] == 1400.0
    assert s["p50_e2e_ttft_ratio"] == pytest.approx(5000 / 1500)
    assert s["p50_ttft_ratio"] == pytest.approx(5000 / 1400)
    assert s["untrimmed_p99_e2e_ttft_ms"] == pytest.approx(4000 + 2000 * 0.99)
    assert (s["untrimmed_accuracy"], s["trimmed_accuracy"], s["accuracy_delta"]) == (0.5, 1.0, 0.5)
    assert s["prompt_token_ratio"] == 4.0
    assert s["untrimmed_requests"] == 2 and s["trimmed_failed"] == 0


def test_a_failed_request_scores_zero_and_leaves_the_latencies() -> None:
    records = [rec("untrimmed", 0.0, 1000.0, 10, 1.0), rec("trimmed", 5.0, 99999.0, 5, 0.0, success=False),
               rec("trimmed", 5.0, 300.0, 5, 1.0)]
    s = summarize_ab(records)
    assert s["trimmed_failed"] == 1 and s["trimmed_accuracy"] == 0.5
    assert s["trimmed_p99_ttft_ms"] == 300.0


def test_empty_run_gives_nan_not_an_exception() -> None:
    s = summarize_ab([])
    assert math.isnan(s["p50_e2e_ttft_ratio"]) and math.isnan(s["untrimmed_accuracy"])


def test_server_command_turns_the_prompt_cache_and_prompt_logits_off() -> None:
    cmd = llama_server_command(model_path="/m.gguf", port=8123, alias="g", n_threads=2, n_ctx=4096, n_batch=512,
                               python="py")
    assert cmd[:3] == ["py", "-m", "llama_cpp.server"]
    flags = dict(zip(cmd[3::2], cmd[4::2]))
    assert flags == {"--model": "/m.gguf", "--model_alias": "g", "--host": "127.0.0.1", "--port": "8123",
                     "--n_ctx": "4096", "--n_batch": "512", "--n_threads": "2", "--n_threads_batch": "2",
                     "--cache": "False", "--logits_all": "False"}


def test_free_port_can_be_bound() -> None:
    port = free_port()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", port))
