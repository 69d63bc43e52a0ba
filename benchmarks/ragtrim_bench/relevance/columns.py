"""The columns of the quality matrix: one chunk shape each, built deterministically from ../shared/data and split
into a fixed dev part (tune on it) and a held-out part (report it).

A column is a name and a builder ``(split, limit, seed) -> list[Request]``; ``COLUMNS`` holds the built-in ones.
Every request has ``N_PASSAGES`` (KV: 19) chunks with the gold one at a seeded random slot (``gold_index``); the
domain columns (``DOMAIN_COLUMNS``: finance tables, contracts, Chinese, Japanese) put it in a fixed middle slot
(``ragtrim_bench.datasets.domain.GOLD_SLOT``) and split by document.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from ragtrim.errors import ConfigError
from ragtrim.savings import normalize_answer, normalized_answers
from ragtrim_bench.datasets.domain import DomainQuestion
from ragtrim_bench.datasets.nq import Passage, QAInstance

Split = Literal["dev", "heldout"]
SPLITS: tuple[Split, ...] = ("dev", "heldout")
N_PASSAGES = 20
NQ_DEV_QUESTIONS = 1062
"""NQ questions 0-1061 are dev, 1062-2123 held out: the project's existing convention (docs/latency.md)."""


@dataclass(frozen=True, slots=True)
class Request:
    """One trim request of a column: the passages as the reader would get them, the gold one at ``gold_index``.

    ``retrieval_scores``: each passage's score from the retriever that built the request (``scorer="given"``), or
    None where the column has no retriever (the passages were not retrieved, so there is nothing to give).
    """

    column: str
    split: Split
    id: str
    question: str
    answers: tuple[str, ...]
    passages: tuple[str, ...]
    gold_index: int
    retrieval_scores: tuple[float, ...] | None = None


ColumnBuilder = Callable[[Split, int, int], list[Request]]


# -- shared steps ---------------------------------------------------------------------------------------------------
def sample(n: int, limit: int, *, seed: int, label: str) -> list[int]:
    """``min(limit, n)`` of ``range(n)``, drawn with ``random.Random(f"{label}/{seed}")``, in the order drawn: any
    leading part is a random sample too (the matrix times the first requests of each column)."""
    if limit < 1:
        raise ConfigError(f"limit must be >= 1, got {limit}")
    return random.Random(f"{label}/{seed}").sample(range(n), min(limit, n))


def gold_slot(request_id: str, n_passages: int, *, seed: int) -> int:
    """Where the gold passage goes: a seeded draw per request id (the same request gets the same slot everywhere)."""
    return random.Random(f"gold/{request_id}/{seed}").randrange(n_passages)


def request_from(column: str, split: Split, instance: QAInstance, *, seed: int,
                 scores: Sequence[float] | None = None, text: Callable[[Passage], str] | None = None,
                 slot: int | None = None) -> Request:
    """A request from an instance with exactly one gold passage, moved to ``slot`` (default: its ``gold_slot``; the
    others keep their order). ``text`` says what the reader gets of a passage (default: ``Passage.content``,
    "title\\ntext")."""
    golds = [i for i, p in enumerate(instance.passages) if p.is_gold]
    if len(golds) != 1:
        raise ConfigError(f"instance {instance.id} must have exactly one gold passage, has {len(golds)}")
    order = [i for i in range(len(instance.passages)) if i != golds[0]]
    if slot is None:
        slot = gold_slot(instance.id, len(instance.passages), seed=seed)
    elif not 0 <= slot < len(instance.passages):
        raise ConfigError(f"slot must be within [0, {len(instance.passages) - 1}], got {slot}")
    order.insert(slot, golds[0])
    show = text or (lambda p: p.content)
    return Request(column=column, split=split, id=instance.id, question=instance.question, answers=instance.answers,
                   passages=tuple(show(instance.passages[i]) for i in order), gold_index=slot,
                   retrieval_scores=None if scores is None else tuple(float(scores[i]) for i in order))


def halves(n: int, split: Split) -> range:
    """The first half of ``range(n)`` for dev, the rest held out."""
    return range(n // 2) if split == "dev" else range(n // 2, n)


# -- the columns ----------------------------------------------------------------------------------------------------
@lru_cache(maxsize=4)
def _nq(split: Split, limit: int, seed: int) -> tuple[tuple[QAInstance, tuple[float, ...]], ...]:
    from ragtrim_bench.datasets.nq import build_multidoc, load_nq_open, retrieval_scores

    questions = load_nq_open()
    part = questions[:NQ_DEV_QUESTIONS] if split == "dev" else questions[NQ_DEV_QUESTIONS:]
    chosen = [part[i] for i in sample(len(part), limit, seed=seed, label=f"nq/{split}")]
    instances = build_multidoc(chosen, n_docs=N_PASSAGES, gold_position="first", distractors="bm25",
                               pool=questions)
    return tuple(zip(instances, retrieval_scores(instances, questions)))


def nq_title(split: Split, limit: int, seed: int) -> list[Request]:
    """NQ-open, 20 passages: the gold passage and the 19 best BM25 hits among all 2,124 questions' passages that
    hold no answer (``golden_multidoc``'s distractors); each passage "title\\ntext". Given score: that BM25's."""
    return [request_from("nq-title", split, inst, seed=seed, scores=s) for inst, s in _nq(split, limit, seed)]


def nq_notitle(split: Split, limit: int, seed: int) -> list[Request]:
    """The nq-title requests with each passage's text only (no title line). Given score: the same retriever's
    (it indexed titles; the reader gets none)."""
    return [request_from("nq-notitle", split, inst, seed=seed, scores=s, text=lambda p: p.text)
            for inst, s in _nq(split, limit, seed)]


def squad_article(split: Split, limit: int, seed: int) -> list[Request]:
    """SQuAD 2.0 answerable questions (articles split in halves, file order): the gold paragraph among 19 other
    paragraphs of its own article that hold no answer, a seeded draw kept in article order. Questions with fewer
    than 19 such paragraphs (4% of them: their answer is all over the article) are left out. No given score."""
    from ragtrim_bench.datasets.squad import load_squad

    articles = load_squad()
    eligible: list[tuple[int, int, list[int]]] = []
    for ai in halves(len(articles), split):
        art = articles[ai]
        normalized = [normalize_answer(t) for t in art.paragraphs]
        for qi, q in enumerate(art.questions):
            answers = normalized_answers(q.answers)
            others = [pi for pi, t in enumerate(normalized)
                      if pi != q.paragraph_index and not any(a in t for a in answers)]
            if not q.is_impossible and len(others) >= N_PASSAGES - 1:
                eligible.append((ai, qi, others))
    out: list[Request] = []
    for k in sample(len(eligible), limit, seed=seed, label=f"squad/{split}"):
        ai, qi, others = eligible[k]
        art, q = articles[ai], articles[ai].questions[qi]
        chosen = sorted(random.Random(f"squad/{q.id}/{seed}").sample(others, N_PASSAGES - 1))
        passages = [Passage(id=f"a{ai}p{pi}", title="", text=art.paragraphs[pi], is_gold=pi == q.paragraph_index)
                    for pi in [q.paragraph_index, *chosen]]
        inst = QAInstance(id=q.id, question=q.question, answers=q.answers, passages=tuple(passages))
        out.append(request_from("squad-article", split, inst, seed=seed))
    return out


def korquad(split: Split, limit: int, seed: int) -> list[Request]:
    """KorQuAD 1.0 (articles split in halves, file order): the gold paragraph among the 19 paragraphs of other
    articles of the same split that score highest under a character-bigram BM25 and hold no answer. Given score:
    that BM25's."""
    from ragtrim_bench.datasets.korquad import hard_instances, load_korquad

    articles = load_korquad()
    part = [articles[i] for i in halves(len(articles), split)]
    pairs = [(ai, qi) for ai, art in enumerate(part) for qi in range(len(art.questions))]
    chosen = [pairs[k] for k in sample(len(pairs), limit, seed=seed, label=f"korquad/{split}")]
    return [request_from("korquad", split, inst, seed=seed, scores=s)
            for inst, s in hard_instances(part, chosen, n_docs=N_PASSAGES)]


def kv(split: Split, limit: int, seed: int) -> list[Request]:
    """kv-retrieval, 75 UUID pairs (records split in halves, file order): one pair a line, ``PAIRS_PER_CHUNK`` pairs
    a chunk (19 chunks); the question asks for one key's value. No given score."""
    from ragtrim_bench.datasets.kv import kv_instance, load_kv

    records = load_kv()
    part = [records[i] for i in halves(len(records), split)]
    return [request_from("kv", split, kv_instance(part[k]), seed=seed)
            for k in sample(len(part), limit, seed=seed, label=f"kv/{split}")]


def _domain(column: str, questions: Sequence[DomainQuestion], split: Split, limit: int, seed: int) -> list[Request]:
    """A seeded sample of ``limit`` built questions as requests, the gold in ``GOLD_SLOT``, distractors best-first."""
    from ragtrim_bench.datasets.domain import GOLD_SLOT

    out: list[Request] = []
    for k in sample(len(questions), limit, seed=seed, label=f"{column}/{split}"):
        instance, scores = questions[k].instance()
        out.append(request_from(column, split, instance, seed=seed, scores=scores, slot=GOLD_SLOT))
    return out


def tatqa(split: Split, limit: int, seed: int) -> list[Request]:
    """TAT-QA span questions (finance reports): the report's table (one row a line, header rows first) or paragraph
    that holds the answer among the 19 tables and paragraphs of the split's reports (its own included) that score
    highest under a word BM25 and hold no answer. Given score: that BM25's."""
    from ragtrim_bench.datasets.tatqa import tatqa_questions

    return _domain("tatqa", tatqa_questions(split, seed), split, limit, seed)


def cuad(split: Split, limit: int, seed: int) -> list[Request]:
    """CUAD contracts in chunks of 80-200 words, CUAD's own category question: the chunk holding a whole clause of
    the category among the 19 best BM25 chunks that hold none, its own contract's first. Given score: that BM25's."""
    from ragtrim_bench.datasets.cuad import cuad_questions

    return _domain("cuad", cuad_questions(split, seed), split, limit, seed)


def cmrc(split: Split, limit: int, seed: int) -> list[Request]:
    """CMRC 2018 trial (Chinese Wikipedia): the gold paragraph among the 19 paragraphs of the split's other articles
    that score highest under a character-bigram BM25 and hold no answer. Given score: that BM25's."""
    from ragtrim_bench.datasets.cjk import cjk_questions

    return _domain("cmrc", cjk_questions("cmrc", split, seed), split, limit, seed)


def jsquad(split: Split, limit: int, seed: int) -> list[Request]:
    """JSQuAD v1.3 test (Japanese Wikipedia), each paragraph "title\\nparagraph": the gold among the 19 paragraphs
    of the split's other articles that score highest under a character-bigram BM25 and hold no answer. Given score:
    that BM25's."""
    from ragtrim_bench.datasets.cjk import cjk_questions

    return _domain("jsquad", cjk_questions("jsquad", split, seed), split, limit, seed)


DOMAIN_COLUMNS: dict[str, ColumnBuilder] = {"tatqa": tatqa, "cuad": cuad, "cmrc": cmrc, "jsquad": jsquad}
"""The domain columns: the text users serve (finance tables, contracts, Chinese, Japanese)."""

COLUMNS: dict[str, ColumnBuilder] = {
    "nq-title": nq_title,
    "nq-notitle": nq_notitle,
    "squad-article": squad_article,
    "korquad": korquad,
    "kv": kv,
    **DOMAIN_COLUMNS,
}
"""The built-in columns, in report order. Add one with ``COLUMNS[name] = builder``."""


def build_column(name: str, split: Split, *, limit: int, seed: int = 0) -> list[Request]:
    """The requests of column ``name`` and ``split``: a seeded sample of at most ``limit`` (all there are when
    fewer), the same for the same arguments on every host."""
    builder = COLUMNS.get(name)
    if builder is None:
        raise ConfigError(f"unknown column {name!r}; choose from {list(COLUMNS)}")
    if split not in SPLITS:
        raise ConfigError(f"split must be one of {list(SPLITS)}, got {split!r}")
    return builder(split, limit, seed)
