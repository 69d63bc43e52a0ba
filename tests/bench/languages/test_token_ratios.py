"""cl100k/Gemma 3 token ratios: the summary arithmetic."""

from __future__ import annotations

from ragtrim_bench.languages.token_ratios import ratio_summary


def test_ratio_summary() -> None:
    out = ratio_summary(["abcd", "ef"], [4, 2], [2, 2])
    assert (out["cl100k_over_gemma3_total"], out["cl100k_over_gemma3_p50_per_text"]) == (1.5, 1.5)
    assert (out["chars_per_cl100k_token"], out["chars_per_gemma3_token"]) == (1.0, 1.5)
    assert (out["texts"], out["cl100k_tokens"], out["gemma3_tokens"]) == (2, 6, 4)
