from __future__ import annotations

import numpy as np

from ragtrim.scoring.rows import CHECK_SIZES, probe_lengths, probe_texts, rows_independent, rows_verdict


def vectors(texts: list[str], *, noise_per_row: float = 0.0) -> np.ndarray:
    """A stand-in model pass: each text's vector from its own words, plus ``noise_per_row`` times the batch's rows
    (a kernel whose rounding depends on how many rows it multiplies)."""
    out = np.array([[float(len(t)), float(sum(map(ord, t)) % 97)] for t in texts], dtype=np.float32)
    return out + np.float32(noise_per_row * (len(texts) - 1))


def test_probe_texts_are_different_and_one_length() -> None:
    texts = probe_texts(6, max(CHECK_SIZES))
    assert len(set(texts)) == len(texts) and {len(t.split()) for t in texts} == {6}


def test_row_invariant_kernels_pass_and_others_do_not() -> None:
    calls: list[int] = []

    def invariant(batch: list[str]) -> np.ndarray:
        calls.append(len(batch))
        return vectors(batch)

    assert rows_independent(("test", "invariant"), invariant, lengths=(3, 8)) is True
    assert sorted(set(calls)) == [1, *CHECK_SIZES]
    n = len(calls)
    assert rows_independent(("test", "invariant"), invariant, lengths=(3, 8)) is True and len(calls) == n  # once
    assert rows_independent(("test", "by rows"), lambda b: vectors(b, noise_per_row=1e-3), lengths=(3,)) is False
    assert rows_verdict(("test", "by rows")) is False and rows_verdict(("test", "never checked")) is None


def test_probe_lengths_fit_the_pieces_read() -> None:
    assert probe_lengths(256) == (6, 24) and probe_lengths(10) == (6, 8) and probe_lengths(3) == (1,)
