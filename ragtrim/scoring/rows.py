"""Whether a model pass on this host gives a text the same vector beside other texts as alone (row invariance).

The torch CPU backends encode texts of one length together, without padding: on an AMD EPYC host torch's CPU kernels
gave a row the same bits whatever the number of rows, on an Intel Xeon host with AMX they did not, so a passage's
vector, and which passages a trim keeps, depended on the other passages of its request. Each process checks once per
model set-up, on probe texts, before its first batch; where rows differ, the backend encodes one text per call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

CHECK_SIZES = (2, 7)
"""Batch sizes whose rows the check compares with the same texts encoded alone."""
_WORDS = ("tower", "river", "bridge", "museum", "engine", "castle", "harbor", "winter", "garden", "forest", "valley",
          "island", "market", "temple", "canal", "library")
"""Words that are one word piece each in MiniLM's vocabulary: probe texts of as many words are one length."""
_VERDICTS: dict[Hashable, bool] = {}
_LOCK = threading.Lock()


def probe_texts(words: int, count: int) -> list[str]:
    """``count`` different texts of ``words`` words each."""
    return [" ".join(_WORDS[(k * 3 + i) % len(_WORDS)] for i in range(words)) for k in range(count)]


def rows_independent(key: Hashable, encode_batch: Callable[[list[str]], Any], *, lengths: Sequence[int]) -> bool:
    """True when ``encode_batch`` (one model call over texts of one length) gives each probe text of each of
    ``lengths`` words the same bits in batches of ``CHECK_SIZES`` as alone. Checked once per ``key`` (the model, its
    device, thread count and pieces read) and remembered for the process."""
    with _LOCK:
        known = _VERDICTS.get(key)
    if known is not None:
        return known
    verdict = True
    for words in lengths:
        texts = probe_texts(words, max(CHECK_SIZES))
        alone = [np.asarray(encode_batch([t]))[0].tobytes() for t in texts]
        for size in CHECK_SIZES:
            together = np.asarray(encode_batch(texts[:size]))
            verdict = verdict and all(together[i].tobytes() == alone[i] for i in range(size))
    with _LOCK:
        _VERDICTS[key] = verdict
    return verdict


def rows_verdict(key: Hashable) -> bool | None:
    """What ``rows_independent`` found for ``key`` in this process (None: not checked yet)."""
    with _LOCK:
        return _VERDICTS.get(key)


def probe_lengths(max_pieces: int) -> tuple[int, ...]:
    """Probe lengths in words for a model that reads ``max_pieces`` word pieces ([CLS] and [SEP] included): a short
    text and a longer one, short enough for a multilingual vocabulary (several pieces a word) to stay within a
    128-position model."""
    room = max(1, max_pieces - 2)
    return tuple(sorted({min(6, room), min(24, room)}))


def same_length_groups(model: Any, texts: Sequence[str]) -> list[list[int]]:
    """Positions of ``texts`` grouped by their number of word pieces as a sentence-transformers ``model`` reads them
    (truncated to its ``max_seq_length``): a group is one batch without padding."""
    ids = model.tokenizer(list(texts), truncation=True, max_length=model.max_seq_length)["input_ids"]
    groups: dict[int, list[int]] = {}
    for i, row in enumerate(ids):
        groups.setdefault(len(row), []).append(i)
    return list(groups.values())
