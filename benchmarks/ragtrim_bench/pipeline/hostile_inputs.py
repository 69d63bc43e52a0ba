"""Hostile inputs (those that made code super-linear, in English and in every script), as generators, and the
cases that time them.

Each case builds its input at a size ``n`` and returns a zero-argument call that processes it through the code path
the issue measured. ``benchmarks/hostile_growth.py`` times every case at n and 4n; ``tests/test_growth.py`` uses the
same generators at smaller sizes.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Call = Callable[[], object]


def dots(n: int) -> str:
    """A run of ``n`` dots and one letter (sentence splitting backtracked on it)."""
    return "." * n + "x"


def quoted_prose(n_bytes: int) -> str:
    """Short sentences with quoted spans, about ``n_bytes`` long (each boundary scanned every quoted range)."""
    unit = 'He said "yes." Then. '
    return unit * max(1, n_bytes // len(unit))


def fences(n_bytes: int) -> str:
    """Alternating ````` and ``~~~`` fence lines, about ``n_bytes`` long (fence matching and the per-cut fence check
    were quadratic)."""
    unit = "```\n~~~\n"
    return unit * max(1, n_bytes // len(unit))


def digit_led_sentences(n_bytes: int) -> str:
    """``"0 towers. 1 towers. ..."``: each join adds a token the per-sentence counts miss, so compression had to drop
    sentences one at a time, recounting everything per drop."""
    parts: list[str] = []
    size = i = 0
    while size < n_bytes:
        parts.append(f"{i} towers.")
        size += len(parts[-1]) + 1
        i += 1
    return " ".join(parts)


def deep_html_then_unclosed(n_bytes: int, tail: str = "<script>x") -> str:
    """Nesting deeper than the HTML parser holds (so the regex fallback runs), then unclosed ``tail`` blocks; half
    of the bytes each."""
    half = max(1, n_bytes // 2)
    return "<div>" * (half // 5) + tail * (half // len(tail))


def similar_stream(n: int, *, seed: int = 0, words: int = 200, replaced: int = 12) -> list[str]:
    """``n`` copies of one ``words``-word text, each with ``replaced`` words changed: similar (Jaccard about 0.6)
    but never near duplicates at the default 0.8, so LSH made every pair a candidate."""
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(5000)]
    base = [rng.choice(vocab) for _ in range(words)]
    out = []
    for _ in range(n):
        text = list(base)
        for j in rng.sample(range(words), replaced):
            text[j] = rng.choice(vocab)
        out.append(" ".join(text))
    return out


def conversation(n: int, *, seed: int = 0) -> list[dict[str, str]]:
    """``n`` alternating turns, each with a preference and a question, different every turn."""
    rng = random.Random(seed)
    names = ["Alice", "Bob", "Paris", "Berlin", "Tokyo", "Rome"]
    return [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"I prefer {rng.choice(names)} trip number {i} in {rng.choice(names)}. "
                       f"Can we book the {i} hotel near {rng.choice(names)}?",
            "turn_id": f"t{i}",
        }
        for i in range(n)
    ]


_HANGUL_SYLLABLES = "가나다라마바사아자차카타파하한국어서울요금제한도는의를에"
UNPUNCTUATED_CHINESE = "北京是中国的首都它有三千多年的历史香山的红叶每年十月中旬开始变红"


def korean_prose(n_bytes: int, *, seed: int = 0) -> str:
    """Korean-like sentences (words of Hangul syllables, each sentence ending in "다. "), about ``n_bytes`` UTF-8
    bytes: every sentence start is a caseless letter, the case the every-script sentence rules added."""
    rng = random.Random(seed)
    parts: list[str] = []
    size = 0
    while size < n_bytes:
        words = [("".join(rng.choice(_HANGUL_SYLLABLES) for _ in range(rng.randint(2, 5)))) for _ in range(4)]
        parts.append(" ".join(words) + "다.")
        size += len(parts[-1].encode("utf-8")) + 1
    return " ".join(parts)


def japanese_quotes(n_bytes: int) -> str:
    """Japanese sentences with corner-bracket quotes, stops inside them and the quotative と after them."""
    unit = "彼は「明日来ます。待って。」と言った。会議は終わった！"
    return unit * max(1, n_bytes // len(unit.encode("utf-8")))


def unpunctuated_chinese(n_chars: int) -> str:
    """``n_chars`` of Chinese without a space or a stop: one sentence, one run of bigrams, one word for MiniLM's
    tokenizer."""
    return (UNPUNCTUATED_CHINESE * (n_chars // len(UNPUNCTUATED_CHINESE) + 1))[:n_chars]


# -- the cases ------------------------------------------------------------------------------------------------------
def cold_caches() -> None:
    """Empty the per-process caches of sentence spans and BM25 tokens, so a repeated call measures the work and
    not the cache; token counts stay cold by giving each call a fresh counter (``fresh_counter``)."""
    from ragtrim.scoring.bm25 import _tokens
    from ragtrim.text.sentences import _sentence_spans

    _sentence_spans.cache_clear()
    _tokens.cache_clear()


def fresh_counter() -> Any:
    """A cl100k_base counter with an empty count cache (the encoding itself is loaded once per process)."""
    from ragtrim.text.tokens import TiktokenCounter

    return TiktokenCounter(encoding="cl100k_base")


def _split(make_text: Callable[[int], str]) -> Callable[[int], Call]:
    def build(n: int) -> Call:
        from ragtrim.text.sentences import _sentence_spans

        text = make_text(n)

        def call() -> object:
            cold_caches()
            return _sentence_spans(text)

        return call

    return build


def _fit(n_bytes: int) -> Call:
    from ragtrim.pipeline import Pipeline
    from ragtrim.stages.compress import SentenceCompressor

    text = digit_led_sentences(n_bytes)
    budget = text.count(".")  # about a third of the tokens: many sentences must go
    stages = [SentenceCompressor(scorer="bm25", max_tokens=budget)]

    def call() -> object:
        cold_caches()
        return Pipeline(stages, tokenizer=fresh_counter()).run([text], query="How many towers are there?")

    return call


def _html(tail: str) -> Callable[[int], Call]:
    def build(n_bytes: int) -> Call:
        from ragtrim.stages.html import HtmlCleaner

        text = deep_html_then_unclosed(n_bytes, tail)
        cleaner = HtmlCleaner()
        return lambda: cleaner.clean(text)

    return build


def _dedup(n: int) -> Call:
    from ragtrim.pipeline import Pipeline
    from ragtrim.stages.dedup import DuplicateFilter

    chunks = similar_stream(n)
    pipeline = Pipeline([DuplicateFilter()], tokenizer="whitespace")
    return lambda: pipeline.run(chunks)


def _history(n: int) -> Call:
    from ragtrim.history.fold import compress_history

    turns = conversation(n)

    def call() -> object:
        cold_caches()
        return compress_history(turns, counter=fresh_counter(), max_tokens=500)

    return call


def _history_blank_run(n: int) -> Call:
    from ragtrim.history.fold import compress_history

    turns = [{"role": "user", "content": "I like" + " " * n + "green tea"}, {"role": "assistant", "content": "ok"}]

    def call() -> object:
        cold_caches()
        return compress_history(turns, keep_last_turns=0, counter=fresh_counter())

    return call


def deep_page(depth: int) -> str:
    """``depth`` nested divs (within the parser's limit) around a link list and ``4 * depth`` spans."""
    links = "<ul><li><a href=1>x</a></li><li><a href=2>y</a></li><li><a href=3>z</a></li></ul>"
    return "<div>" * depth + links + "<span>w</span>" * (4 * depth) + "</div>" * depth


def _html_page(depth: int) -> Call:
    from ragtrim.stages.html import HtmlCleaner

    text = deep_page(depth)
    cleaner = HtmlCleaner(mode="page")
    return lambda: cleaner.clean(text)


def _compress_wide_window(n_sentences: int) -> Call:
    from ragtrim.pipeline import Pipeline
    from ragtrim.stages.compress import SentenceCompressor

    text = " ".join(f"Sentence {i} about towers." for i in range(n_sentences))
    stages = [SentenceCompressor(context_sentences=10**6, max_tokens=50)]

    def call() -> object:
        cold_caches()
        return Pipeline(stages, tokenizer=fresh_counter()).run([text], query="towers")

    return call


def _bm25_tokens(make_text: Callable[[int], str]) -> Callable[[int], Call]:
    def build(n: int) -> Call:
        from ragtrim.scoring.bm25 import _tokens

        text = make_text(n)

        def call() -> object:
            cold_caches()
            return _tokens(text, True)

        return call

    return build


def _trim_bm25(make_text: Callable[[int], str]) -> Callable[[int], Call]:
    def build(n: int) -> Call:
        from ragtrim.api import default_pipeline

        text = make_text(n)
        query = text[:40]

        def call() -> object:
            cold_caches()
            pipeline = default_pipeline(budget=len(text) // 16, tokenizer=fresh_counter(), scorer="bm25")
            return pipeline.run([text], query=query)

        return call

    return build


def bert_tokenizer(max_tokens: int) -> Any:
    """A BERT tokenizer (its normalizer, pre-tokenizer and WordPiece) over a small vocabulary, as MiniLM's is built,
    without the model (``tokenizers``: the ``hf`` extra)."""
    from tokenizers import Tokenizer, normalizers, pre_tokenizers
    from tokenizers.models import WordPiece

    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", *dict.fromkeys(UNPUNCTUATED_CHINESE)])}
    tok = Tokenizer(WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.enable_truncation(max_tokens)
    return tok


def _lead(n_chars: int) -> Call:
    from ragtrim.scoring.onnx_backend import encode_prefixes

    text = unpunctuated_chinese(n_chars)
    tok = bert_tokenizer(10)
    return lambda: encode_prefixes(tok, [text], 10)


@dataclass(frozen=True)
class HostileCase:
    """One hostile input: how to build the call at size ``n``, the n the benchmark uses, and the time reported before the fix."""

    name: str
    unit: str  # what n counts
    n: int
    build: Callable[[int], Call]
    issue_report: str  # the time of the code before the fix


CASES: tuple[HostileCase, ...] = (
    HostileCase("split_dots", "chars", 20_000, _split(dots), "40k dots 13 s, 80k 52 s"),
    HostileCase("split_quoted", "bytes", 205 * 1024, _split(quoted_prose), "205 KiB 2.1 s, 820 KiB 33 s"),
    HostileCase("split_fences", "bytes", 256 * 1024, _split(fences), "78 KiB 3.8 s, 1 MB > 120 s"),
    HostileCase("compress_fit_digit_led", "bytes", 18 * 1024, _fit, "72 KiB 6.2 s"),
    HostileCase("html_fallback_scripts", "bytes", 45 * 1024, _html("<script>x"), "181 KiB 25-51 s"),
    HostileCase("html_fallback_comments", "bytes", 45 * 1024, _html("<!--x"), "181 KiB 25-51 s"),
    HostileCase("dedup_similar_stream", "chunks", 2_000, _dedup, "4k chunks 34 s, 8k 139 s"),
    HostileCase("history_turns", "turns", 4_000, _history, "1k 0.18 s, 16k 26 s"),
    # Found while fixing the above; the times are from the code before the fix.
    HostileCase("history_blank_run_in_a_turn", "chars", 20_000, _history_blank_run,
                "5k blanks 0.96 s, 20k 15 s"),
    HostileCase("html_deep_page", "levels", 400, _html_page, "not in the issue: 400 levels 0.25 s, 1,600 6.8 s"),
    HostileCase("compress_whole_chunk_window", "sentences", 5_000, _compress_wide_window,
                "not in the issue: context_sentences=10**6 visited every neighbour (n x n)"),
    # Every script. Korean and Japanese take the new sentence rules and the script analyzer; unpunctuated
    # Chinese is one sentence, one bigram run and, for MiniLM's lead, one word.
    HostileCase("split_korean", "bytes", 200 * 1024, _split(korean_prose),
                "new rules (Korean had no sentence boundaries before)"),
    HostileCase("split_japanese_quotes", "bytes", 200 * 1024, _split(japanese_quotes),
                "new rules (「」 quotes, stops without a space)"),
    HostileCase("split_unpunctuated_chinese", "chars", 400_000, _split(unpunctuated_chinese),
                "new rules"),
    HostileCase("bm25_tokens_unpunctuated_chinese", "chars", 400_000, _bm25_tokens(unpunctuated_chinese),
                "new analyzer (the whole run was one token before)"),
    HostileCase("trim_korean_bm25", "bytes", 100 * 1024, _trim_bm25(korean_prose),
                "one chunk was one sentence before"),
    HostileCase("lead_unpunctuated_chinese", "chars", 800_000, _lead,
                "MiniLM's lead tokenized the whole text: 3.2 M chars 30 s, 2.1 GB"),
)

