"""Exact token counts of a request's texts on worker threads, while the caller's thread does other work.

tiktoken counts in native code that releases the interpreter lock, so the pipeline starts counting its input before
the stages run and collects the counts when it needs them: the counting overlaps the sentence splitting of the
prefetch and the HTML stage's extraction (a raw page's markup costs twice its extraction to count). A long text is
cut into blocks where cl100k's pre-tokenizer always ends a piece, so that its blocks are counted in parallel and
their counts add up to the whole text's exactly (``additive_blocks``). Other counters count in the caller's thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future

from ragtrim._util.background import count_workers, submit_count
from ragtrim.text.tokens import TiktokenCounter, TokenCounter, _has_long_run, is_cl100k

BLOCK_CHARS = 16_384
"""Texts longer than this are cut into blocks of about this many characters (a raw page is 100-300 KB)."""
FAST_PARALLEL_WORKERS = 4
"""With rs-bpe counting (``ragtrim.text.fastcount``, faster than tiktoken's, holding the interpreter lock),
texts are counted on worker threads by tiktoken only where at least this many threads count at once, and a
request's passages only when they are a raw page's worth (``FEW_THREADS_MIN_CHARS``)."""
PARALLEL_MIN_CHARS = 4_096
"""Fewer characters than this in all are counted in the caller's thread: handing them over costs more."""
FEW_THREADS_MIN_CHARS = 32_768
"""Fewer characters than this in all are counted in the caller's thread too where the threads would not pay: with
fewer than ``FAST_PARALLEL_WORKERS`` counting threads (a host of two or three cores, where the threads share the
cores with the caller's stages), and a request's passages wherever rs-bpe counts (it counts them in the caller's
thread in less time than the threads' hand-over and their contention for the interpreter lock cost the caller's
stages: ``ragtrim-bench pipeline cost_ab`` on a 16-core GPU host). A raw page's markup is worth the hand-over."""


def splits_additively(counter: TokenCounter) -> bool:
    """True when ``counter`` is tiktoken with cl100k's pre-tokenizer (the rule of ``additive_blocks`` holds)."""
    if not isinstance(counter, TiktokenCounter):
        return False
    return is_cl100k(counter._load())


def additive_blocks(text: str, block_chars: int = BLOCK_CHARS) -> list[str]:
    """``text`` cut into consecutive blocks of at least ``block_chars`` characters (the last may be shorter), each
    cut right after a line break that a character other than whitespace follows.

    There cl100k's pre-tokenizer always ends a piece and starts the next one afresh: whitespace that holds the line
    break ends with it (``\\s*[\\r\\n]``, or ``\\s++$`` at a block's end, the same characters), a run of punctuation
    takes its line breaks along (``[\\r\\n]*+``), and no piece starts with a line break and goes on into letters,
    digits or punctuation. BPE runs on each piece alone, so the blocks' counts sum to the text's count."""
    if len(text) <= block_chars:
        return [text]
    blocks: list[str] = []
    start = 0
    while len(text) - start > block_chars:
        cut = text.find("\n", start + block_chars - 1)
        while cut != -1 and cut + 1 < len(text) and text[cut + 1].isspace():
            cut = text.find("\n", cut + 1)
        if cut == -1 or cut + 1 >= len(text):
            break
        blocks.append(text[start:cut + 1])
        start = cut + 1
    blocks.append(text[start:])
    return blocks


class PendingCounts:
    """The counts of some texts, being made on worker threads (or made already). ``result()`` waits for them and
    puts them in the counter's cache."""

    def __init__(self, counter: TokenCounter, texts: Sequence[str]) -> None:
        self.counter = counter
        self.texts = list(texts)
        self._blocks: list[tuple[int, str]] = []  # (index in texts, block)
        self._futures: list[Future[list[int]]] = []
        self._done: dict[str, int] | None = None

    def _start(self, workers: int) -> None:
        """Hand the texts' blocks to ``workers`` threads, in shares of about equal length (one task each: a task
        per block cost more in hand-overs than a passage costs to count)."""
        enc = self.counter._load() if isinstance(self.counter, TiktokenCounter) else None
        if enc is None:
            return
        self._blocks = [(i, b) for i, text in enumerate(self.texts) if text for b in additive_blocks(text)]
        share = sum(len(b) for _, b in self._blocks) / workers
        group: list[str] = []
        size = 0
        for _, block in self._blocks:
            group.append(block)
            size += len(block)
            if size >= share and len(self._futures) < workers - 1:
                self._futures.append(submit_count(_count_blocks, enc, group))
                group, size = [], 0
        if group:
            self._futures.append(submit_count(_count_blocks, enc, group))

    def result(self) -> dict[str, int]:
        """Each text's count (exactly ``counter.count(text)``)."""
        if self._done is None:
            counts = [n for f in self._futures for n in f.result()]
            totals: dict[int, int] = {}
            for (i, _), n in zip(self._blocks, counts, strict=True):
                totals[i] = totals.get(i, 0) + n
            done = {self.texts[i]: n for i, n in totals.items()}
            remember = getattr(self.counter, "remember", None)
            if callable(remember):
                for text, n in done.items():
                    remember(text, n)
            self._done = done
        return self._done


def _count_blocks(enc: object, blocks: list[str]) -> list[int]:
    return [len(enc.encode_ordinary(b)) for b in blocks]  # type: ignore[attr-defined]


def start_counts(counter: TokenCounter, texts: Sequence[str], *, fast_small_in_caller: bool = True) -> PendingCounts:
    """Start counting ``texts`` on ragtrim's counting threads when that can overlap the caller's work (a tiktoken
    counter with cl100k's pre-tokenizer, texts not in its cache, enough characters to be worth a hand-over:
    ``PARALLEL_MIN_CHARS``, or ``FEW_THREADS_MIN_CHARS`` with fewer than ``FAST_PARALLEL_WORKERS`` threads or, unless
    ``fast_small_in_caller`` is false, with rs-bpe); the rest is counted when ``result()`` or ``counter.count``
    asks."""
    pending = PendingCounts(counter, texts)
    workers = count_workers()
    if workers < 2 or not splits_additively(counter):
        return pending
    fast = getattr(counter, "fast", False)
    if fast and workers < FAST_PARALLEL_WORKERS:
        return pending  # rs-bpe in the caller's thread beats tiktoken on this few threads (ragtrim.text.fastcount)
    cached = getattr(counter, "cached", None)
    # a text with a long run without whitespace is counted by counter.count, in its bounded blocks
    long_run = getattr(counter, "LONG_RUN", None)
    todo = [t for t in dict.fromkeys(texts) if t and not (callable(cached) and cached(t))
            and not (long_run is not None and _has_long_run(t, long_run))]
    few = workers < FAST_PARALLEL_WORKERS or (fast and fast_small_in_caller)
    threshold = FEW_THREADS_MIN_CHARS if few else PARALLEL_MIN_CHARS
    if sum(map(len, todo)) >= threshold:
        pending.texts = todo
        pending._start(workers)
    return pending
