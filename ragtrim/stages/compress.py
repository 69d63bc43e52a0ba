"""Query-aware extractive compression: keep the sentences that answer the query, plus their neighbours, in order.

With a target (``max_tokens`` or ``target_ratio``) sentences compete across all chunks for one budget, so the
tokens go to the best sentences wherever they are; without one, each chunk keeps its own best few sentences.
"""

from __future__ import annotations

import heapq
import itertools
import math
import re
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ragtrim._util.lru import bounded_cache, weigh_text_and_items
from ragtrim._util.validate import Boolean, Constraints, Interval, Text
from ragtrim.components import component
from ragtrim.errors import ConfigError
from ragtrim.models import CHUNK_SEPARATOR, Chunk, Removal, StageOutput, TrimContext
from ragtrim.scoring.base import Scorer, warm_up_scorers
from ragtrim.scoring.bm25 import BM25Scorer, prime_tokens
from ragtrim.scoring.hybrid import min_max
from ragtrim.scoring.registry import get_scorer, scorer_param
from ragtrim.stages.base import Stage, chunk_tokens, register_stage
from ragtrim.text.answer_kind import AnswerKind, answer_hint, answer_kind, holds_kind, lookup_question
from ragtrim.text.clauses import clause_spans
from ragtrim.text.sentences import normalize_text, sentence_spans
from ragtrim.text.structure import closed_under, dependencies, is_table_row, neighbour_max, starts_line
from ragtrim.text.tokens import TokenCounter, count_at_least

__all__ = ["SentenceCompressor", "answer_hint", "answer_kind", "clause_spans", "clear_sentence_cache", "holds_kind"]


@dataclass(frozen=True, slots=True)
class _Sentence:
    chunk: int  # index of the chunk in the context
    pos: int  # index of the sentence within its chunk
    start: int
    end: int
    text: str  # stripped
    open_end: bool = False  # a cut that stops before its sentence's end: what follows it in the chunk starts a new line


_WINDOW_CANDIDATES = 64
"""Starts of a word window the compressor rates when it cuts a sentence longer than the budget."""
_MAX_CLAUSES = 256
"""A sentence of more clauses than this is cut by words (growing a run clause by clause is quadratic in them)."""
_FIT_STEP_WORK = 4
"""``_fit`` drops sentences one at a time while the sentences it has rebuilt stay below this many times the
request's sentences (plus ``_FIT_MIN_WORK``); past that it searches for the number to drop (see ``_fit``)."""
_FIT_MIN_WORK = 1024


def _chunk_ranges(sentences: list[_Sentence]) -> dict[int, tuple[int, int]]:
    """Each chunk's sentences as a ``[lo, hi)`` range of ``sentences`` (they are listed chunk by chunk)."""
    ranges: dict[int, tuple[int, int]] = {}
    for i, s in enumerate(sentences):
        lo, _ = ranges.get(s.chunk, (i, i))
        ranges[s.chunk] = (lo, i + 1)
    return ranges


_WINDOW_LOOP_MAX = 8
"""Up to this ``context_sentences`` the neighbours are visited one by one; above it, by sliding maxima."""


@bounded_cache(max_entries=16384, weigh=weigh_text_and_items(120))
def _cached_parts(text: str) -> tuple[tuple[int, int, str], ...]:
    """The non-blank sentences of ``text``, as span and stripped text (cached: the prefetch and ``run`` both split
    each chunk)."""
    return tuple((a, b, stripped) for a, b in sentence_spans(text) if (stripped := text[a:b].strip()))


@bounded_cache(max_entries=16384, weigh=weigh_text_and_items(40))
def _cached_dependencies(text: str) -> tuple[tuple[int, ...], ...]:
    """For each sentence of ``_cached_parts(text)``, the sentences it must be kept with (a table row's header rows
    and caption, a clause's heading: ``ragtrim.text.structure.dependencies``)."""
    return tuple(dependencies([part for _, _, part in _cached_parts(text)]))


def clear_sentence_cache() -> None:
    """Forget the memoized sentences of chunks (``ragtrim.caches.clear_caches`` calls this)."""
    _cached_parts.cache_clear()
    _cached_dependencies.cache_clear()


@register_stage
@component
class SentenceCompressor(Stage):
    """Shorten chunks to their query-relevant sentences (extractive: kept text is copied verbatim, in order).

    Sentences come from ``ragtrim.text.sentences.sentence_spans`` (never cut inside a number, a quoted span or a code line).
    Each sentence gets a priority: its ``scorer`` score against the query (min-max scaled over all sentences of the
    request), mixed with its chunk's score (``chunk_weight``; chunk scores come from an earlier relevance stage, or
    from ``scorer`` on whole chunks when absent), plus ``answer_hint_weight`` when it holds the kind of value the
    question asks for. A sentence next to a good one (within ``context_sentences``) inherits ``context_weight`` of
    that neighbour's priority, so a kept sentence tends to keep its immediate context.

    Parameters:
        scorer: a named scorer (``ragtrim.scoring.registry.SCORER_NAMES``) or a Scorer, applied to sentences.
        max_tokens: a target for all non-pinned chunk text together; sentences are taken best-first over all
            chunks until it is reached (the output fits it under the pipeline's counter).
        target_ratio: alternatively, the compression ratio to reach (4.0 keeps about a quarter of the tokens).
        sentences_per_chunk: without a target, the number of best sentences each chunk keeps.
        context_sentences, context_weight: how far and how strongly a sentence's priority spills to neighbours.
        chunk_weight: weight of the chunk's own relevance in each sentence's priority, in [0, 1].
        answer_hint_weight: bonus for sentences with a date ("when" questions), a number ("how many") or a
            reason's words ("why"), read with the units the sentence depends on (a table row's header rows hold
            its years).
        lookup_weight: bonus for the table row a question that names a year (or asks which year) looks up, times
            how well the row's label matches the question (``ragtrim.text.answer_kind.lookup_matches``: one row
            per table, and only rows close to the request's best match).
        separator: joins non-adjacent kept sentences (a blank separator becomes a line break before a kept unit
            that starts a line, such as a table row or a list item).
        truncate: with a target, when the best sentence alone is longer than the room left, cut it to the run of
            its clauses (at commas, semicolons, colons, spaced dashes, CJK commas) that ``scorer`` rates best and
            that fits, rather than lose it while shorter, weaker sentences are kept.

    Trace: a shortened chunk gets a ``compressed``/``shortened`` record ("kept 2 of 7 sentences"), or a
    ``truncated``/``shortened`` one when its best sentence was cut to clauses (the record says which); with a target,
    a chunk none of whose sentences made it is dropped with ``over_budget``; a chunk that compression made
    identical to an earlier one (same normalized text) is dropped with ``duplicate_after_compression``. Pinned
    chunks are left alone, and an empty query leaves everything unchanged (nothing to be query-aware about).
    """

    name = "compress"

    _parameter_constraints: ClassVar[dict[str, Constraints]] = {
        "scorer": [scorer_param()],
        "max_tokens": [Interval(int, 0, None), None],
        "target_ratio": [Interval(float, 1.0, None), None],
        "sentences_per_chunk": [Interval(int, 1, None)],
        "context_sentences": [Interval(int, 0, None)],
        "context_weight": [Interval(float, 0.0, 1.0)],
        "chunk_weight": [Interval(float, 0.0, 1.0)],
        "answer_hint_weight": [Interval(float, 0.0, None)],
        "lookup_weight": [Interval(float, 0.0, None)],
        "separator": [Text("a str", allow_empty=True)],
        "truncate": [Boolean()],
    }

    scorer: Scorer | str = "bm25"
    max_tokens: int | None = None
    target_ratio: float | None = None
    sentences_per_chunk: int = 2
    context_sentences: int = 1
    context_weight: float = 0.5
    chunk_weight: float = 0.7
    answer_hint_weight: float = 0.3
    lookup_weight: float = 0.5
    separator: str = " "
    truncate: bool = True

    def _check_params(self) -> None:
        if self.max_tokens is not None and self.target_ratio is not None:
            raise ConfigError(
                f"give max_tokens or target_ratio, not both (got max_tokens={self.max_tokens}, "
                f"target_ratio={self.target_ratio})"
            )

    warm_up_on_first_run: ClassVar[bool] = False  # ``run`` warms the scorer when it has sentences to rank

    def warm_up(self) -> None:
        warm_up_scorers([get_scorer(self.scorer)])

    def prefetch(self, context: TrimContext, *, counter: TokenCounter) -> None:
        """Split the sentences of the chunks as they arrive and tokenize them for BM25 (and, from them, each whole
        chunk, for the relevance stage's BM25: ``prime_tokens``); ``run`` then finds both in the caches. Sentences
        are not counted here: ``run`` counts only the few it can still fit (``count_at_least`` rules out the rest),
        and counting all of them would take the CPU from the model pass beside it on a host with few cores, or delay
        the stages after it where the model pass ends first. Texts with a ``<`` (maybe HTML, which the HTML stage
        would change) are left out."""
        plain = tuple(c for c in context.chunks if "<" not in c.text and not c.pinned)
        scorer = get_scorer(self.scorer)
        if isinstance(scorer, BM25Scorer) and scorer.analyzer == "script":
            for c in plain:
                prime_tokens(c.text, sentence_spans(c.text), stopwords=scorer.stopwords, stem=scorer.stem)
        self._split(plain, counter)

    # -- scoring ------------------------------------------------------------------------------------------------
    def _split(self, chunks: tuple[Chunk, ...], counter: TokenCounter) -> list[_Sentence]:
        out: list[_Sentence] = []
        for ci, c in enumerate(chunks):
            if c.pinned:
                continue
            out.extend(_Sentence(ci, pos, *part) for pos, part in enumerate(_cached_parts(c.text)))
        return out

    def priorities(self, query: str, chunks: tuple[Chunk, ...], sentences: list[_Sentence],
                   deps: list[tuple[int, ...]] | None = None) -> np.ndarray:
        """Each sentence's priority (see the class docstring); higher is kept first. A sentence that depends on
        others (``deps``: a table row on its header and section rows, a clause on its heading) is scored with their
        text before its own: "| FVOCI | 41,578 |" answers "level 1 FVOCI as at 31 December 2018" only together with
        the header "| | Level 1 |" and the section row "| As at 31 December 2018 |"."""
        scorer = get_scorer(self.scorer)
        deps = deps if deps is not None else self._dependencies(chunks, sentences)
        texts = [" ".join([*(sentences[d].text for d in deps[i]), s.text]) if deps[i] else s.text
                 for i, s in enumerate(sentences)]
        raw = np.asarray(scorer.score(query, texts), dtype=np.float64)
        match = min_max(raw)
        own = match
        if self.chunk_weight > 0:
            chunk_scores = [c.score for c in chunks]
            if any(s is None for s in chunk_scores):
                chunk_scores = list(scorer.score(query, [c.text for c in chunks]))
            per_chunk = min_max(np.asarray(chunk_scores, dtype=np.float64))
            own = (1 - self.chunk_weight) * own + self.chunk_weight * per_chunk[[s.chunk for s in sentences]]
        # The answer hint counts as far as the sentence, or its neighbour, matches the query: a year in a sentence
        # that shares nothing with the question must not tie with the sentence that answers it.
        own = self._plus_hint(query, own, self._hint_texts(sentences, texts), self._with_context(match, sentences))
        prio = self._with_context(own, sentences)
        lookup = self._lookup_question(query) if self.lookup_weight > 0 else None
        if lookup is not None:  # the looked-up row's own bonus: it does not spill to its neighbours
            prio += self.lookup_weight * np.asarray(lookup.matches([s.text for s in sentences], texts,
                                                                   [s.chunk for s in sentences]))
        return prio

    def _with_context(self, own: np.ndarray, sentences: list[_Sentence]) -> np.ndarray:
        """Each value raised to ``context_weight`` times the best of its neighbours (within ``context_sentences``,
        in the same chunk), if that is more."""
        prio = own.copy()
        cs = self.context_sentences
        if cs > _WINDOW_LOOP_MAX and self.context_weight > 0:
            # A wide window (up to whole chunks): sliding maxima, linear whatever ``context_sentences`` is.
            for lo, hi in _chunk_ranges(sentences).values():
                vals = [float(v) for v in own[lo:hi]]
                for i, best in enumerate(neighbour_max(vals, cs)):
                    if best is not None:
                        prio[lo + i] = max(prio[lo + i], self.context_weight * best)
        elif cs > 0 and self.context_weight > 0:
            # Python floats: the same double arithmetic as numpy's, without a numpy scalar per access.
            own_l, prio_l, w = own.tolist(), prio.tolist(), self.context_weight
            chunk_of = [s.chunk for s in sentences]
            n = len(sentences)
            for i in range(n):
                for j in range(max(0, i - cs), min(n, i + cs + 1)):
                    if j != i and chunk_of[j] == chunk_of[i]:
                        prio_l[i] = max(prio_l[i], w * own_l[j])
            prio = np.asarray(prio_l, dtype=np.float64)
        return prio

    # -- selection ----------------------------------------------------------------------------------------------
    def _target(self, chunks: tuple[Chunk, ...], counter: TokenCounter) -> int | None:
        if self.max_tokens is not None:
            return self.max_tokens
        if self.target_ratio is not None:
            total = sum(chunk_tokens(c, counter) for c in chunks)
            return math.floor(total / self.target_ratio)
        return None

    def run(self, context: TrimContext, *, counter: TokenCounter) -> StageOutput:
        chunks = context.chunks
        if not chunks or not context.query.strip():
            return StageOutput(context, info={"compressed": 0})
        sentences = self._split(chunks, counter)
        if not sentences:
            return StageOutput(context, info={"compressed": 0})
        warm_up_scorers([get_scorer(self.scorer)])
        deps = self._dependencies(chunks, sentences)
        prio = self.priorities(context.query, chunks, sentences, deps).tolist()
        order = sorted(range(len(sentences)), key=lambda i: (-prio[i], i))
        target = self._target(chunks, counter)
        chosen: set[int] = set()
        truncated: dict[int, str] = {}  # chunk index -> what was cut from its best sentence
        pinned_tokens = 0
        if target is None:
            taken: dict[int, int] = {}
            for i in order:
                ci = sentences[i].chunk
                if taken.get(ci, 0) < self.sentences_per_chunk:
                    taken[ci] = taken.get(ci, 0) + 1
                    chosen.add(i)
                    chosen.update(deps[i])
        else:
            n_pinned = sum(1 for c in chunks if c.pinned)
            pinned_tokens = self._pinned_tokens(chunks, counter)
            sep = counter.count(CHUNK_SEPARATOR)
            room = target - pinned_tokens
            best = order[0]
            top = sentences[best].text
            need_deps = sum(counter.count(sentences[d].text) for d in deps[best])
            if (room - need_deps > 0 and self.truncate and not is_table_row(top)  # a cut row loses its columns
                    and (count_at_least(counter, top) > room - need_deps or counter.count(top) > room - need_deps)):
                cut = self._truncated(context.query, sentences[best], chunks[sentences[best].chunk].text,
                                      room - need_deps, counter)
                if cut is not None:
                    sentences[best] = cut[0]
                    truncated[sentences[best].chunk] = cut[1]
            live: set[int] = set()  # chunks with a chosen sentence: each after the first (pinned ones too) pays a join
            for i in order:  # a sentence is counted only when its lower bound leaves it a chance of fitting
                if i in chosen or count_at_least(counter, sentences[i].text) > room:
                    continue
                group = [i, *(d for d in deps[i] if d not in chosen)]
                ci = sentences[i].chunk
                join = sep if ci not in live and (live or n_pinned) else 0
                n = join + sum(counter.count(sentences[k].text) for k in group)
                if n <= room:
                    chosen.update(group)
                    live.add(ci)
                    room -= n
        new_texts = (self._rebuild(chunks, sentences, chosen) if target is None
                     else self._fit(chunks, sentences, chosen, order, target, pinned_tokens, counter, deps))
        return self._output(context, sentences, chosen, order, new_texts, target,
                            {ci: d for ci, d in truncated.items() if any(sentences[i].chunk == ci for i in chosen)})

    @staticmethod
    def _pinned_tokens(chunks: tuple[Chunk, ...], counter: TokenCounter) -> int:
        """The pinned chunks as they will be joined, separators between them included."""
        pinned = [c.text for c in chunks if c.pinned]
        return counter.count(CHUNK_SEPARATOR.join(pinned)) if pinned else 0

    @staticmethod
    def _dependencies(chunks: tuple[Chunk, ...], sentences: list[_Sentence]) -> list[tuple[int, ...]]:
        """For each sentence (by index into ``sentences``), the sentences of its chunk it must be kept with."""
        out: list[tuple[int, ...]] = [()] * len(sentences)
        for ci, (lo, hi) in _chunk_ranges(sentences).items():
            per_chunk = _cached_dependencies(chunks[ci].text)
            for i in range(lo, hi):
                out[i] = tuple(lo + d for d in per_chunk[sentences[i].pos])
        return out

    def _truncated(self, query: str, sentence: _Sentence, chunk_text: str, room: int,
                   counter: TokenCounter) -> tuple[_Sentence, str] | None:
        """The best sentence cut to the run of its clauses that answers best and fits ``room`` tokens: the clause
        ``scorer`` rates highest, then its neighbours (the better first) while they fit. None when it has one clause,
        or no clause fits."""
        offset = chunk_text.find(sentence.text, sentence.start)
        if offset < 0:
            return None
        spans = clause_spans(sentence.text)
        if len(spans) > _MAX_CLAUSES:  # a hostile run of commas: words, not clauses
            spans = [(0, len(sentence.text))]
        if len(spans) < 2:  # one clause: the best window of its words
            return self._word_window(query, sentence, offset, (0, len(sentence.text)), room, counter, "its")
        texts = [sentence.text[a:b] for a, b in spans]
        scores = self._piece_scores(query, texts)
        top = max(range(len(spans)), key=lambda k: (scores[k], -k))
        if counter.count(texts[top]) > room:
            return self._word_window(query, sentence, offset, spans[top], room, counter,
                                     f"clause {top + 1} of {len(spans)} of its")
        lo = hi = top
        while True:
            options = [k for k in (lo - 1, hi + 1) if 0 <= k < len(spans)]
            grown = None
            for k in sorted(options, key=lambda k: (-scores[k], k)):
                a, b = spans[min(lo, k)][0], spans[max(hi, k)][1]
                if counter.count(sentence.text[a:b]) <= room:
                    grown = k
                    break
            if grown is None:
                break
            lo, hi = min(lo, grown), max(hi, grown)
        a, b = spans[lo][0], spans[hi][1]
        cut = _Sentence(sentence.chunk, sentence.pos, offset + a, offset + b, sentence.text[a:b],
                        open_end=b < len(sentence.text))
        return cut, f"cut its best sentence to clauses {lo + 1}-{hi + 1} of {len(spans)} to fit {room} tokens"

    def _piece_scores(self, query: str, pieces: list[str]) -> list[float]:
        """Parts of one sentence rated as sentences are (min-max scaled ``scorer`` score plus the answer hint)."""
        own = min_max(np.asarray(get_scorer(self.scorer).score(query, pieces), dtype=np.float64))
        return [float(x) for x in self._plus_hint(query, own, pieces, own)]

    @staticmethod
    def _hint_texts(sentences: list[_Sentence], with_dependencies: list[str]) -> list[str]:
        """What the answer hint reads of each sentence: the sentence with the units it depends on, as it was
        scored (the years of "| Total | 115.0 | 120.7 |" are in its header row)."""
        return with_dependencies

    @staticmethod
    def _answer_kind(query: str) -> AnswerKind | None:
        """The kind of value the question asks for (``ragtrim.text.answer_kind``)."""
        return answer_kind(query)

    _lookup_question = staticmethod(lookup_question)
    """How the question is read as a table lookup (``ragtrim.text.answer_kind.lookup_question``)."""

    def _plus_hint(self, query: str, own: np.ndarray, texts: list[str], match: np.ndarray) -> np.ndarray:
        """``own`` plus ``answer_hint_weight`` times ``match`` (in [0, 1]: how well the text, or its neighbour,
        matches the query) for each text that holds the kind of value the question asks for."""
        if self.answer_hint_weight <= 0:
            return own
        kind = self._answer_kind(query)  # the query is parsed once, not once per text
        if kind is None:
            return own
        out: np.ndarray = own + self.answer_hint_weight * match * np.array([holds_kind(kind, t) for t in texts])
        return out

    def _word_window(self, query: str, sentence: _Sentence, offset: int, span: tuple[int, int], room: int,
                     counter: TokenCounter, what: str) -> tuple[_Sentence, str] | None:
        """A run of whole words of ``sentence.text[span]`` that fits ``room``: as many words as the span's tokens
        per word allow, placed where ``scorer`` rates it best among at most ``_WINDOW_CANDIDATES`` evenly spaced
        starts, then shortened from the end until it fits. None when no word fits or the text has no spaces.
        Linear in the span's length (a 20,000-word sentence is not tried at every width and start)."""
        text = sentence.text
        words = [(m.start() + span[0], m.end() + span[0]) for m in re.finditer(r"\S+", text[span[0]:span[1]])]
        if len(words) < 2:
            return None
        per_word = max(counter.count(text[span[0]:span[1]]), 1) / len(words)
        width = max(1, min(len(words) - 1, int(room / per_word)))
        last_start = len(words) - width
        step = max(1, -(-(last_start + 1) // _WINDOW_CANDIDATES))
        starts = list(range(0, last_start + 1, step))
        windows = [text[words[i][0]:words[i + width - 1][1]] for i in starts]
        scores = self._piece_scores(query, windows)
        k = max(range(len(starts)), key=lambda j: (scores[j], -j))
        first, end = starts[k], starts[k] + width - 1
        while end >= first and counter.count(text[words[first][0]:words[end][1]]) > room:
            end -= 1
        if end < first:
            return None
        a, b = words[first][0], words[end][1]
        cut = _Sentence(sentence.chunk, sentence.pos, offset + a, offset + b, text[a:b], open_end=b < len(text))
        return cut, (f"cut {what} best sentence to words {first + 1}-{end + 1} of {len(words)} to fit {room} tokens")

    def _rebuild(self, chunks: tuple[Chunk, ...], sentences: list[_Sentence], chosen: set[int]) -> dict[int, str]:
        """Each non-pinned chunk's new text from its chosen sentences (adjacent ones keep their original glue)."""
        out: dict[int, str] = {}
        for ci, (lo, hi) in _chunk_ranges(sentences).items():
            out[ci] = self._rebuild_chunk(chunks[ci].text, sentences, lo, hi, chosen)
        return out

    def _rebuild_chunk(self, text: str, sentences: list[_Sentence], lo: int, hi: int, chosen: set[int]) -> str:
        """One chunk's new text from its chosen sentences among ``sentences[lo:hi]`` (all of that chunk)."""
        runs: list[tuple[int, int, bool]] = []  # start, end, and whether it ends inside a cut sentence
        for i in range(lo, hi):
            if i not in chosen:
                continue
            s = sentences[i]
            if runs and runs[-1][1] == s.start:
                runs[-1] = (runs[-1][0], s.end, s.open_end)
            else:
                runs.append((s.start, s.end, s.open_end))
        if not runs:
            return ""
        # A unit that starts a line (a table row, a list item, a heading) stays on its own line when the separator is
        # blank: "| Plan | Limit |" and "| Pro | 200 GB |" joined by a space would no longer read as a table. So does
        # what follows a sentence cut before its end: "Eps 1.5 units," and "Gamma four." joined by a space would
        # read as one sentence.
        line_sep = "\n" if not self.separator.strip() else self.separator
        parts = [text[runs[0][0]:runs[0][1]].strip()]
        for (_, _, open_end), (a, b, _) in itertools.pairwise(runs):
            parts.append(line_sep if open_end or starts_line(text, a) else self.separator)
            parts.append(text[a:b].strip())
        return "".join(parts)

    def _fit(self, chunks: tuple[Chunk, ...], sentences: list[_Sentence], chosen: set[int], order: list[int],
             target: int, pinned: int, counter: TokenCounter, deps: list[tuple[int, ...]]) -> dict[int, str]:
        """Drop the weakest chosen sentences until the rebuilt texts, joined by ``CHUNK_SEPARATOR`` after ``pinned``
        tokens of pinned chunks, fit ``target`` (joins inside a chunk can add a token); ``chosen`` is updated in place.
        A sentence that a chosen sentence depends on (a table's header, a clause's heading) goes only after every
        sentence that needs it.

        Sentences go one at a time, and only the chunk that lost one is rebuilt and recounted. That is exact and
        cheap on ordinary requests, but a long chunk of thousands of sentences whose joins each add a token (digit-led
        sentences: 72 KiB took 6 s) would be rebuilt once per dropped sentence. So once the rebuilt text passes
        ``_FIT_STEP_WORK`` times the request's sentences, the number of sentences still to drop is found by doubling
        and bisection instead: O(log n) full recounts, and the result still fits ``target``.
        """
        ranges = _chunk_ranges(sentences)
        n_pinned = sum(1 for c in chunks if c.pinned)
        sep = counter.count(CHUNK_SEPARATOR)

        def joined(texts: dict[int, str], total: int) -> int:
            live = sum(1 for t in texts.values() if t) + n_pinned
            return total + pinned + sep * max(0, live - 1)

        texts = self._rebuild(chunks, sentences, chosen)
        counts = {ci: counter.count(t) for ci, t in texts.items()}
        total = sum(counts.values())
        rank = {i: r for r, i in enumerate(reversed(order))}  # 0: the weakest
        needed: dict[int, int] = {}
        for j in chosen:
            for d in deps[j]:
                needed[d] = needed.get(d, 0) + 1
        droppable = [(rank[i], i) for i in chosen if not needed.get(i)]
        heapq.heapify(droppable)
        work_left = _FIT_STEP_WORK * len(sentences) + _FIT_MIN_WORK
        while joined(texts, total) > target and droppable and work_left > 0:
            _, i = heapq.heappop(droppable)
            chosen.discard(i)
            for d in deps[i]:
                needed[d] -= 1
                if needed[d] == 0 and d in chosen:
                    heapq.heappush(droppable, (rank[d], d))
            ci = sentences[i].chunk
            lo, hi = ranges[ci]
            work_left -= hi - lo
            texts[ci] = self._rebuild_chunk(chunks[ci].text, sentences, lo, hi, chosen)
            total += counter.count(texts[ci]) - counts[ci]
            counts[ci] = counter.count(texts[ci])
        if joined(texts, total) <= target or not chosen:
            return texts
        rest = [i for i in reversed(order) if i in chosen]

        def attempt(k: int) -> tuple[bool, dict[int, str], set[int]]:
            trial = closed_under(chosen.difference(rest[:k]), deps)
            got = self._rebuild(chunks, sentences, trial)
            return joined(got, sum(counter.count(t) for t in got.values())) <= target, got, trial

        k_lo, k_hi = 0, 1  # dropping k_lo more does not fit; dropping k_hi more does, or is everything
        fits, best, kept = attempt(k_hi)
        while not fits and k_hi < len(rest):
            k_lo, k_hi = k_hi, min(2 * k_hi, len(rest))
            fits, best, kept = attempt(k_hi)
        while fits and k_hi - k_lo > 1:
            mid = (k_lo + k_hi) // 2
            ok, got, trial = attempt(mid)
            if ok:
                k_hi, best, kept = mid, got, trial
            else:
                k_lo = mid
        chosen.intersection_update(kept)
        return best

    def _output(self, context: TrimContext, sentences: list[_Sentence], chosen: set[int], order: list[int],
                new_texts: dict[int, str], target: int | None, truncated: dict[int, str]) -> StageOutput:
        chunks = context.chunks
        total_per_chunk: dict[int, int] = {}
        kept_per_chunk: dict[int, int] = {}
        best_rank: dict[int, int] = {}
        for rank, i in enumerate(order, start=1):
            ci = sentences[i].chunk
            best_rank.setdefault(ci, rank)
        for i, s in enumerate(sentences):
            total_per_chunk[s.chunk] = total_per_chunk.get(s.chunk, 0) + 1
            if i in chosen:
                kept_per_chunk[s.chunk] = kept_per_chunk.get(s.chunk, 0) + 1
        out: list[Chunk] = []
        removals: list[Removal] = []
        for ci, c in enumerate(chunks):
            if ci not in new_texts:
                out.append(c)
                continue
            kept, total = kept_per_chunk.get(ci, 0), total_per_chunk[ci]
            if kept == 0:
                removals.append(Removal(
                    c.id, self.name, "over_budget", 0,
                    f"no sentence made the {target}-token compression target "
                    f"(best sentence rank {best_rank[ci]} of {len(sentences)})",
                ))
                continue
            if ci in truncated:
                out.append(c.with_text(new_texts[ci]))
                removals.append(Removal(c.id, self.name, "truncated", 0,
                                        f"kept {kept} of {total} sentences; {truncated[ci]}", action="shortened"))
                continue
            if kept == total:
                out.append(c)
                continue
            out.append(c.with_text(new_texts[ci]))
            removals.append(Removal(c.id, self.name, "compressed", 0, f"kept {kept} of {total} sentences",
                                    action="shortened"))
        out = self._drop_repeats(out, removals, {r.chunk_id for r in removals if r.action == "shortened"})
        info: dict[str, Any] = {"sentences_in": len(sentences), "sentences_kept": len(chosen),
                                "target_tokens": target, "truncated": len(truncated)}
        return StageOutput(context.with_chunks(tuple(out)), tuple(removals), info=info)

    def _drop_repeats(self, out: list[Chunk], removals: list[Removal], shortened: set[str]) -> list[Chunk]:
        """Drop a chunk that compression made identical to an earlier one (dedup ran before and saw them differ).

        Identical means the same normalized text (``ragtrim.text.sentences.normalize_text``, as exact dedup compares), and at
        least one of the two was shortened here: chunks that were identical on arrival are the dedup stage's
        business. The later one goes (reason ``duplicate_after_compression``), unless it is pinned and the earlier
        one is not; two pinned chunks both stay."""
        if not shortened:
            return out
        first: dict[str, int] = {}
        doomed: dict[int, int] = {}  # position in out -> position of the chunk it repeats
        for k, c in enumerate(out):
            key = normalize_text(c.text)
            j = first.get(key)
            if j is None:
                first[key] = k
                continue
            if c.id not in shortened and out[j].id not in shortened:
                continue
            if not c.pinned:
                doomed[k] = j
            elif not out[j].pinned:
                doomed[j] = k
                first[key] = k
        for k, j in sorted(doomed.items()):
            # One record per dropped chunk: its "compressed" record, if any, becomes part of the drop's detail.
            was = next((r for r in removals if r.chunk_id == out[k].id and r.action == "shortened"), None)
            if was is not None:
                removals.remove(was)
            removals.append(Removal(
                out[k].id, self.name, "duplicate_after_compression", 0,
                f"same text as chunk {out[j].id} after compression" + (f" ({was.detail})" if was else ""),
                kept_id=out[j].id,
            ))
        return [c for k, c in enumerate(out) if k not in doomed]
