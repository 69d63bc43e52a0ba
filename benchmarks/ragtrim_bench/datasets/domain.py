"""What the domain columns of the quality matrix share (finance tables, contracts, Chinese and Japanese): a question
with its gold chunk and its hardest distractors, the document split, the cap of questions per document.

The rule every domain column follows: 20 chunks, the gold one in a fixed middle slot, the 19 chunks of the split's
pool that score highest for the question under a plain BM25 and do not hold a normalized answer (substring test,
the strict side), at most ``PER_DOCUMENT`` questions per source document, and a deterministic dev / held-out split
by document, so no document of one split lends a question or a distractor to the other.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

import numpy as np

from ragtrim.errors import ConfigError, InputError
from ragtrim.savings import normalize_answer, normalized_answers
from ragtrim_bench.datasets.nq import Passage, QAInstance, _BM25Index

DomainSplit = Literal["dev", "heldout"]
PER_DOCUMENT = 3
"""At most this many questions of one source document (a report, a contract, a paragraph): a document with many
questions would otherwise weigh as much as several."""
N_CHUNKS = 20
GOLD_SLOT = N_CHUNKS // 2 - 1
"""The gold chunk's slot: the 10th of 20 (``ragtrim_bench.datasets.nq.gold_index("middle", 20)``), fixed, so a
ranker that favours the first or the last chunk gains nothing."""

T = TypeVar("T")


def split_of(document: str) -> DomainSplit:
    """A document's split: the parity of the first byte of SHA-256 of its key (about half each, the same on every
    host and Python version, independent of file order)."""
    return "dev" if hashlib.sha256(document.encode("utf-8")).digest()[0] % 2 == 0 else "heldout"


def cap_per_document(items: Sequence[T], document: Callable[[T], str], *, seed: int, label: str,
                     per_document: int = PER_DOCUMENT) -> list[T]:
    """At most ``per_document`` of ``items`` per document (a seeded draw per document, kept in input order)."""
    groups: dict[str, list[int]] = {}
    for i, item in enumerate(items):
        groups.setdefault(document(item), []).append(i)
    keep: set[int] = set()
    for doc, members in groups.items():
        chosen = members if len(members) <= per_document else random.Random(f"{label}/{doc}/{seed}").sample(
            members, per_document)
        keep.update(chosen)
    return [item for i, item in enumerate(items) if i in keep]


@dataclass(frozen=True, slots=True)
class DomainQuestion:
    """One built question: its gold chunk, its 19 distractors best-first, and every chunk's score under the pool's
    BM25 (gold first; the retriever's score, for ``scorer="given"``). ``document``: the source document's key."""

    id: str
    document: str
    question: str
    answers: tuple[str, ...]
    gold: str
    distractors: tuple[str, ...]
    scores: tuple[float, ...]

    def instance(self) -> tuple[QAInstance, tuple[float, ...]]:
        """As a ``QAInstance`` (the gold first) with its scores, for ``relevance.columns.request_from``."""
        passages = (Passage(id=f"{self.id}/gold", title="", text=self.gold, is_gold=True),
                    *(Passage(id=f"{self.id}/d{k}", title="", text=t) for k, t in enumerate(self.distractors)))
        return QAInstance(id=self.id, question=self.question, answers=self.answers, passages=passages), self.scores


class ChunkPool:
    """The chunks of one split, each with its document, under one BM25 (tokens: the column's own, part of its
    definition). Duplicate texts are kept once (the first document wins)."""

    def __init__(self, chunks: Iterable[tuple[str, str]], tokens: Callable[[str], list[str]]) -> None:
        seen: dict[str, int] = {}
        self._slot = seen
        self.texts: list[str] = []
        self.documents: list[str] = []
        for document, text in chunks:
            if text.strip() and text not in seen:
                seen[text] = len(self.texts)
                self.texts.append(text)
                self.documents.append(document)
        self.normalized = [normalize_answer(t) for t in self.texts]
        self._index = _BM25Index(self.texts, tokens=tokens)

    def hardest(self, question_id: str, question: str, answers: Sequence[str], gold: str, *,
                exclude: Callable[[int], bool] = lambda j: False, first: Callable[[int], bool] | None = None,
                n: int = N_CHUNKS - 1) -> tuple[list[str], list[float], float]:
        """The ``n`` best-scoring chunks that hold no normalized answer, are not ``gold`` and not ``exclude``d
        (those of ``first`` before all others when given), with their scores, and the gold's score."""
        norm = normalized_answers(answers)
        if not norm:
            raise InputError(f"question {question_id}: no answer left after normalization")
        scores = self._index.scores(question)
        ranked = [int(j) for j in np.argsort(-scores, kind="stable")]
        if first is not None:
            ranked = [j for j in ranked if first(j)] + [j for j in ranked if not first(j)]
        chosen: list[int] = []
        for j in ranked:
            if self.texts[j] != gold and not exclude(j) and not any(a in self.normalized[j] for a in norm):
                chosen.append(j)
                if len(chosen) == n:
                    break
        if len(chosen) < n:
            raise InputError(f"question {question_id}: only {len(chosen)} usable distractors, {n} needed")
        gold_slot = self._slot.get(gold)
        gold_score = float(scores[gold_slot]) if gold_slot is not None else 0.0
        return [self.texts[j] for j in chosen], [float(scores[j]) for j in chosen], gold_score


def check_split(split: str) -> DomainSplit:
    if split not in ("dev", "heldout"):
        raise ConfigError(f"split must be 'dev' or 'heldout', got {split!r}")
    return "dev" if split == "dev" else "heldout"
