"""A faster exact cl100k count: rs-bpe's, used by ``TiktokenCounter`` where it is installed and agrees with tiktoken.

tiktoken splits a text into pieces with a backtracking regular expression and merges each piece; on markup-heavy
text (a raw HTML page) that is most of a trim's time. rs-bpe (``pip install 'ragtrim[fastcount]'``, MIT) counts the
same cl100k tokens faster, in native code without a backtracking pattern. A count is worth something only if it is tiktoken's exactly
(a budget checked with it must hold on the text the model receives), so before rs-bpe counts anything its counts are
compared with tiktoken's on ``PROBES``, strings chosen where a pre-tokenizer is easiest to get wrong (contractions,
runs of whitespace and line breaks, digits, scripts without spaces, combining marks, emoji, control characters). One
difference and ragtrim counts with tiktoken alone, and says so once in the ``ragtrim`` log.

rs-bpe holds the interpreter lock while it counts, so it is used in the caller's thread; where several threads can
count at once (``ragtrim.text.counting``), a long text is still cut into blocks and counted by tiktoken on them.
``RAGTRIM_FAST_COUNT=off`` turns it off.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import cache
from typing import Any

from ragtrim._util.redact import get_logger

logger = get_logger("ragtrim")

ENV = "RAGTRIM_FAST_COUNT"
"""Environment variable: ``off`` (or ``0``, ``false``, ``no``) makes every cl100k count tiktoken's own."""

PROBES: tuple[str, ...] = (
    "Hello, world! It's 2026; they'll've gone.",
    "I'M HERE 'S 'LL 'VE 'RE 'D 'T don't",
    "  leading  and trailing  ",
    "a\n\nb\r\n\r\nc\n  \n\td \t\n",
    "\n\n\n   \n",
    "12345678901234567890 1,234.56 0.5e-10 3/4 ½ ١٢٣",
    "<div class=\"nav-menu\"><a href=\"/x?y=1&amp;z=2\">Home</a></div>\n<p>Text&nbsp;here.</p>",
    "한국어 문장입니다. 가격은 3,000원이에요!",
    "中文的句子，没有空格。第二句话在这里。",
    "日本語の文です。カタカナとひらがな、漢字。",
    "emoji 😀👍🏽 and ZWJ 👨\u200d👩\u200d👧 families",
    "combining a\u0308 e\u0301 \u0915\u094d\u0937 ǅ İ ß ﬁ",
    "control \x00 \x0b \x0c \u2028 \u0085 \u200b \u00a0 \u3000 done",
    "    def f(x):\n        return x  # comment\n\n\n",
    "...!!!???---___===>>><<<",
    "Ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３",
    "x" * 300 + " " + "ab" * 150,
)


def _disabled() -> bool:
    return os.environ.get(ENV, "").strip().lower() in {"off", "0", "false", "no"}


@cache
def _checked_rs_bpe(encoding: Any) -> Callable[[str], int] | None:
    try:
        from rs_bpe.bpe import openai  # type: ignore[import-not-found, import-untyped, unused-ignore]
    except ImportError:
        return None
    try:
        tokenizer: Any = openai.cl100k_base()
        count: Callable[[str], int] = tokenizer.count
        wrong = [p for p in PROBES if count(p) != len(encoding.encode_ordinary(p))]
    except Exception as exc:  # noqa: BLE001 - any failure of the optional package means: do not use it
        logger.warning("ragtrim: rs-bpe is installed but failed its check (%s: %s); counting with tiktoken",
                       type(exc).__name__, exc)
        return None
    if wrong:
        logger.warning("ragtrim: rs-bpe's cl100k counts differ from tiktoken's on %d of %d probe strings; counting "
                       "with tiktoken", len(wrong), len(PROBES))
        return None
    logger.info("ragtrim: counting cl100k tokens with rs-bpe (checked against tiktoken)")
    return count


def fast_cl100k(encoding: Any) -> Callable[[str], int] | None:
    """rs-bpe's count for tiktoken's cl100k ``encoding`` (the caller checks that it is cl100k) when installed,
    switched on and equal to ``encoding``'s count on every probe; otherwise None. Checked once per process and
    encoding."""
    if _disabled():
        return None
    return _checked_rs_bpe(encoding)


def clear() -> None:
    """Forget the check (tests that install or remove rs-bpe, or change ``RAGTRIM_FAST_COUNT``)."""
    _checked_rs_bpe.cache_clear()
