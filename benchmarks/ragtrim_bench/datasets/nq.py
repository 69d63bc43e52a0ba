"""NaturalQuestions-Open ("Lost in the Middle" oracle file) and the multi-document setting built from it.

``build_multidoc`` adds distractors to each question's gold passage: the BM25 top hits among the other questions'
gold passages that hold no gold answer ("hard"), or a seeded random draw ("random"), and puts the gold at a
chosen position. Deterministic for a given input, setting and seed.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from ragtrim._util.jsonl import iter_jsonl
from ragtrim.errors import ConfigError, InputError
from ragtrim.savings import normalize_answer, normalized_answers
from ragtrim.scoring.bm25 import bm25_okapi
from ragtrim_bench.datasets import dataset_path

NQ_FOLDER = "nq-multidoc"
NQ_FILE = "nq-open-oracle.shared.jsonl.gz"

GoldPosition = Literal["first", "middle", "last"]
DistractorKind = Literal["bm25", "random"]


@dataclass(frozen=True, slots=True)
class Passage:
    """One candidate passage of a QA instance. ``id`` is unique within the instance."""

    id: str
    title: str
    text: str
    is_gold: bool = False

    @property
    def content(self) -> str:
        """What the reader sees: the title on its own line, then the text (empty title: just the text)."""
        return f"{self.title}\n{self.text}" if self.title else self.text


@dataclass(frozen=True, slots=True)
class QAInstance:
    """A question with its candidate passages, as the QA benchmark consumes it (NQ and SQuAD alike).

    ``answers`` is empty for unanswerable questions (``is_impossible``); ``plausible_answers`` then holds the
    spans annotators marked as plausible but wrong.
    """

    id: str
    question: str
    answers: tuple[str, ...]
    passages: tuple[Passage, ...]
    is_impossible: bool = False
    plausible_answers: tuple[str, ...] = ()

    @property
    def gold_ids(self) -> tuple[str, ...]:
        return tuple(p.id for p in self.passages if p.is_gold)


@dataclass(frozen=True, slots=True)
class NQQuestion:
    """One line of the oracle file: the question, its answers and its gold passage."""

    index: int
    question: str
    answers: tuple[str, ...]
    gold: Passage


def nq_path(path: str | Path | None = None) -> Path:
    return Path(path) if path is not None else dataset_path(NQ_FOLDER) / NQ_FILE


def load_nq_open(path: str | Path | None = None, *, limit: int | None = None) -> list[NQQuestion]:
    """Read the NQ-open oracle JSONL(.gz); ``path`` defaults to ``$RAGTRIM_DATA/nq-multidoc/``."""
    p = nq_path(path)
    if not p.is_file():
        raise InputError(f"NQ-open file {str(p)!r} not found; set RAGTRIM_DATA or pass the path of {NQ_FILE}")
    out: list[NQQuestion] = []
    for line, rec in iter_jsonl(p, what="NQ-open file"):
        n = line - 1  # the question's index: its 0-based line in the file
        try:
            ctx = rec["ctxs"][0]
            out.append(
                NQQuestion(
                    index=n,
                    question=str(rec["question"]),
                    answers=tuple(str(a) for a in rec["answers"]),
                    gold=Passage(id=f"nq{n}", title=str(ctx.get("title", "")), text=str(ctx["text"]), is_gold=True),
                )
            )
        except (KeyError, IndexError, TypeError) as exc:
            raise InputError(f"{p}: line {line} is not an NQ-open oracle record ({exc!r})") from None
        if limit is not None and len(out) >= limit:
            break
    return out


# -- BM25 over the passage pool -------------------------------------------------------------------------------------
# This tokenizer and its short stopword list are part of the dataset's definition, not a second copy of the
# library's BM25 tokenization (ragtrim.scoring.tokenize, ragtrim.stopwords): they pick each question's hard
# distractors, and the library's tokenizer would change the distractors of 2,107 of 2,124 questions, and with them
# every committed QA and GPU result. The scoring itself is the library's (ragtrim.scoring.bm25_okapi).
_TOKEN = re.compile(r"\w+")
_STOPWORDS = frozenset(
    [
        "a", "an", "the", "of", "in", "on", "at", "to", "for", "from", "by", "with", "and", "or", "is", "are",
        "was", "were", "be", "been", "who", "what", "when", "where", "which", "how", "why", "did", "do",
        "does", "whose", "whom", "that", "this", "it", "its", "as"
    ]
)


def bm25_tokens(text: str) -> list[str]:
    """Lower-cased word tokens without a few question/function words."""
    return [t for t in _TOKEN.findall(text.lower()) if t not in _STOPWORDS]


class _BM25Index:
    """Okapi BM25 (``ragtrim.scoring.bm25_okapi``) over a fixed corpus, with an inverted index so that a query
    touches only the postings of its own terms. Tokens are ``bm25_tokens`` unless ``tokens`` says otherwise: the
    NQ distractor sets of the committed results were drawn with them (KorQuAD's with character bigrams)."""

    def __init__(self, docs: Sequence[str], *, k1: float = 1.5, b: float = 0.75,
                 tokens: Callable[[str], list[str]] = bm25_tokens) -> None:
        self.n_docs = len(docs)
        self.k1 = k1
        self.b = b
        self._tokens = tokens
        postings: dict[str, dict[int, int]] = {}
        self._lengths = np.zeros(self.n_docs, dtype=np.float64)
        for i, doc in enumerate(docs):
            toks = tokens(doc)
            self._lengths[i] = len(toks)
            for t in toks:
                d = postings.setdefault(t, {})
                d[i] = d.get(i, 0) + 1
        self._postings = {
            t: (np.fromiter(d.keys(), dtype=np.int64, count=len(d)), np.fromiter(d.values(), dtype=np.float64,
                                                                                 count=len(d)))
            for t, d in postings.items()
        }

    def scores(self, query: str) -> np.ndarray:
        terms = [t for t in dict.fromkeys(self._tokens(query)) if t in self._postings]
        if not terms:
            return np.zeros(self.n_docs, dtype=np.float64)
        tf = np.zeros((len(terms), self.n_docs), dtype=np.float64)
        for row, t in enumerate(terms):
            docs, counts = self._postings[t]
            tf[row, docs] = counts
        return bm25_okapi(tf, self._lengths, k1=self.k1, b=self.b)


def _pool(questions: Sequence[NQQuestion]) -> tuple[list[Passage], list[str], dict[int, int]]:
    """Unique gold passages (first question wins the id), their normalized text, and question index -> pool slot."""
    seen: dict[str, int] = {}
    passages: list[Passage] = []
    normalized: list[str] = []
    slot_of: dict[int, int] = {}
    for q in questions:
        key = normalize_answer(q.gold.content)
        if key not in seen:
            seen[key] = len(passages)
            passages.append(Passage(id=q.gold.id, title=q.gold.title, text=q.gold.text, is_gold=False))
            normalized.append(key)
        slot_of[q.index] = seen[key]
    return passages, normalized, slot_of


def gold_index(position: GoldPosition | int, n_docs: int) -> int:
    """0-based slot of the gold passage: first -> 0, middle -> n/2 - 1 (10th of 20), last -> n - 1."""
    if isinstance(position, bool):
        raise ConfigError(f"gold_position must be 'first', 'middle', 'last' or an int, got {position!r}")
    if isinstance(position, int):
        if not 0 <= position < n_docs:
            raise ConfigError(f"gold_position must be within [0, {n_docs - 1}] for n_docs={n_docs}, got {position}")
        return position
    table = {"first": 0, "middle": max(0, n_docs // 2 - 1), "last": n_docs - 1}
    if position not in table:
        raise ConfigError(f"gold_position must be 'first', 'middle', 'last' or an int, got {position!r}")
    return table[position]


def build_multidoc(
    questions: Sequence[NQQuestion],
    *,
    n_docs: int = 20,
    gold_position: GoldPosition | int = "first",
    distractors: DistractorKind = "bm25",
    seed: int = 0,
    pool: Sequence[NQQuestion] | None = None,
) -> list[QAInstance]:
    """One instance per question: the gold passage plus ``n_docs - 1`` distractors from the other questions' passages.

    Distractors never contain a normalized gold answer of the question (substring test, the strict side) and are
    never the question's own passage. ``bm25`` takes them best-first by BM25 against the question (a hard setting);
    ``random`` draws them with ``random.Random(seed + question index)``. ``pool`` (default: ``questions``) is where
    distractors come from, so a ``--limit`` sample still draws from all passages.
    """
    if isinstance(n_docs, bool) or not isinstance(n_docs, int) or n_docs < 1:
        raise ConfigError(f"n_docs must be an int >= 1, got {n_docs!r}")
    if distractors not in ("bm25", "random"):
        raise ConfigError(f"distractors must be 'bm25' or 'random', got {distractors!r}")
    slot = gold_index(gold_position, n_docs)
    pool_questions = list(pool) if pool is not None else list(questions)
    known = {q.index for q in pool_questions}
    pool_questions += [q for q in questions if q.index not in known]
    passages, normalized, slot_of = _pool(pool_questions)
    if len(passages) < n_docs:
        raise InputError(f"the pool has {len(passages)} unique passages but n_docs={n_docs} needs at least that many")
    index = _BM25Index([p.content for p in passages]) if distractors == "bm25" else None
    out: list[QAInstance] = []
    for q in questions:
        own = slot_of[q.index]
        answers = normalized_answers(q.answers)

        def usable(j: int, own: int = own, answers: list[str] = answers) -> bool:
            return j != own and not any(a in normalized[j] for a in answers)

        if index is not None:
            scores = index.scores(q.question)
            order: Iterable[int] = (int(j) for j in np.argsort(-scores, kind="stable"))
        else:
            candidates = list(range(len(passages)))
            random.Random(seed * 1_000_003 + q.index).shuffle(candidates)
            order = candidates
        chosen: list[Passage] = []
        for j in order:
            if usable(j):
                chosen.append(passages[j])
                if len(chosen) == n_docs - 1:
                    break
        if len(chosen) < n_docs - 1:
            raise InputError(f"question {q.index}: only {len(chosen)} usable distractors for n_docs={n_docs}")
        docs = chosen[:slot] + [q.gold] + chosen[slot:]
        out.append(QAInstance(id=f"nq{q.index}", question=q.question, answers=q.answers, passages=tuple(docs)))
    return out


def retrieval_scores(instances: Sequence[QAInstance], pool: Sequence[NQQuestion]) -> list[tuple[float, ...]]:
    """Each instance's passages scored against its question by the pool-wide BM25 that ``build_multidoc`` draws hard
    distractors with (``pool``: the same questions it was given): what a BM25 retriever over the pool returned with
    them, for ``scorer="given"``. Passages are matched to the pool by their normalized content."""
    passages, normalized, _ = _pool(pool)
    index = _BM25Index([p.content for p in passages])
    slot = {key: i for i, key in enumerate(normalized)}
    out: list[tuple[float, ...]] = []
    for inst in instances:
        scores = index.scores(inst.question)
        try:
            out.append(tuple(float(scores[slot[normalize_answer(p.content)]]) for p in inst.passages))
        except KeyError:
            raise InputError(f"instance {inst.id}: a passage is not in the pool; pass the pool it was built from") from None
    return out


def golden_multidoc(n: int, *, offset: int = 0, path: str | Path | None = None) -> list[QAInstance]:
    """Questions ``offset`` .. ``offset + n`` of NQ-open with 20 passages each, the gold 10th among BM25 hard
    distractors drawn from every question's passage: the golden requests of the GPU and gateway benchmarks."""
    questions = load_nq_open(path)
    return build_multidoc(questions[offset:offset + n], n_docs=20, gold_position="middle", distractors="bm25",
                          pool=questions)


def build_single_use(
    questions: Sequence[NQQuestion],
    *,
    pool: Sequence[NQQuestion],
    n_docs: int = 20,
    gold_position: GoldPosition | int = "middle",
    limit: int | None = None,
) -> list[QAInstance]:
    """Hard-distractor instances in which every passage of ``pool`` appears at most once across all instances.

    For a latency benchmark that calls itself cold, no passage may reach the trimmer twice: a second sight would hit
    the embedding and token caches. Questions are taken in order; each takes its gold passage and the BM25-best
    ``n_docs - 1`` unused passages without its answers; a question whose gold passage was already used as a
    distractor is skipped, and building stops when the pool runs out (or after ``limit`` instances).
    """
    if isinstance(n_docs, bool) or not isinstance(n_docs, int) or n_docs < 1:
        raise ConfigError(f"n_docs must be an int >= 1, got {n_docs!r}")
    slot = gold_index(gold_position, n_docs)
    pool_questions = list(pool)
    known = {q.index for q in pool_questions}
    pool_questions += [q for q in questions if q.index not in known]
    passages, normalized, slot_of = _pool(pool_questions)
    index = _BM25Index([p.content for p in passages])
    used = np.zeros(len(passages), dtype=bool)
    out: list[QAInstance] = []
    for q in questions:
        own = slot_of[q.index]
        if used[own]:
            continue
        answers = normalized_answers(q.answers)
        scores = index.scores(q.question)
        chosen: list[int] = []
        for j in np.argsort(-scores, kind="stable"):
            j = int(j)
            if j != own and not used[j] and not any(a in normalized[j] for a in answers):
                chosen.append(j)
                if len(chosen) == n_docs - 1:
                    break
        if len(chosen) < n_docs - 1:
            break
        used[own] = True
        used[chosen] = True
        docs = [passages[j] for j in chosen]
        docs = docs[:slot] + [q.gold] + docs[slot:]
        out.append(QAInstance(id=f"nq{q.index}", question=q.question, answers=q.answers, passages=tuple(docs)))
        if limit is not None and len(out) >= limit:
            break
    return out
