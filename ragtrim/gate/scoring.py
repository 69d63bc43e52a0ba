"""Judging one reply: the answer it gives (the reply itself, or a field of its JSON), exact match, token F1, contains,
whether it refuses, and whether it follows the item's JSON Schema.

Answers are compared after SQuAD's normalisation (``ragtrim.savings.normalize_answer``); text in Chinese, Japanese or
Korean is compared character by character, as the CJK reading-comprehension sets score it.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ragtrim.gate.golden import GoldenItem
from ragtrim.gate.schema import validate

Metric = Literal["contains", "exact", "f1"]
METRICS: tuple[Metric, ...] = ("contains", "exact", "f1")
REFUSAL_MARKERS: tuple[str, ...] = (
    "unanswerable", "not answerable", "cannot be answered", "can not be answered", "cannot answer", "can't answer",
    "can't be answered", "no answer", "i don't know", "i do not know", "not mentioned", "not in the documents",
    "not in the provided", "documents do not", "do not contain", "does not contain", "doesn't contain",
    "no information", "not enough information", "not provided", "insufficient information",
)
"""Phrases that make a reply a refusal (matched after normalisation, anywhere in the answer); a JSON answer of
``null`` is one too. An empty reply is not: it answers nothing, and refuses nothing either."""

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_CJK}]|[^\s{_CJK}]+")
_HAS_CJK = re.compile(rf"[{_CJK}]")


def normalize_answer(text: str) -> str:
    """SQuAD's normalisation, the library's one (``ragtrim.savings``; imported on first use: it loads numpy)."""
    from ragtrim.savings import normalize_answer as squad_normalize

    return squad_normalize(text)


def tokens(text: str) -> list[str]:
    """The normalised words of ``text``, each CJK character a word of its own."""
    return _TOKEN.findall(normalize_answer(text))


def exact_match(prediction: str, answers: Sequence[str]) -> float:
    """1.0 when the normalised prediction equals a normalised answer."""
    p = normalize_answer(prediction)
    return 1.0 if any(p == normalize_answer(a) for a in answers) else 0.0


def token_f1(prediction: str, answers: Sequence[str]) -> float:
    """The best token F1 of the prediction against any answer (SQuAD's; 0.0 without answers)."""
    pred = tokens(prediction)
    best = 0.0
    for answer in answers:
        gold = tokens(answer)
        if not pred or not gold:
            best = max(best, 1.0 if pred == gold else 0.0)
            continue
        common = sum((Counter(pred) & Counter(gold)).values())
        if common:
            precision, recall = common / len(pred), common / len(gold)
            best = max(best, 2 * precision * recall / (precision + recall))
    return best


def contains(prediction: str, answers: Sequence[str]) -> float:
    """1.0 when some answer occurs in the prediction as whole words (for CJK answers: as characters)."""
    from ragtrim.savings import answer_in_text

    if answer_in_text(answers, prediction):
        return 1.0
    text = normalize_answer(prediction)
    return 1.0 if any(_HAS_CJK.search(a) and normalize_answer(a) and normalize_answer(a) in text
                      for a in answers) else 0.0


def is_refusal(answer: str, markers: Sequence[str] = REFUSAL_MARKERS) -> bool:
    """Whether ``answer`` declines to answer (one of ``markers`` in it, after normalisation)."""
    text = f" {normalize_answer(answer)} "
    return any(f" {normalize_answer(m)} " in text for m in markers if normalize_answer(m))


def _strip_fences(text: str) -> str:
    t = text.strip()
    if t.startswith("```"):
        t = t.split("\n", 1)[1] if "\n" in t else ""
        t = t.rsplit("```", 1)[0]
    return t.strip()


def parse_json_reply(text: str) -> tuple[Any, bool]:
    """``(value, strict)``: the reply's JSON value and whether the reply is that JSON and nothing else; a reply in a
    code fence or with text around one object still gives the object (``strict`` False); no JSON gives ``None``."""
    stripped = text.strip()
    try:
        return json.loads(stripped), True
    except (ValueError, RecursionError):
        pass
    inner = _strip_fences(stripped)
    start = inner.find("{")
    while start >= 0:
        try:
            value, _ = json.JSONDecoder().raw_decode(inner[start:])
            return value, False
        except (ValueError, RecursionError):
            start = inner.find("{", start + 1)
    return None, False


@dataclass(frozen=True, slots=True)
class Judgement:
    """One reply judged. ``answer`` is what was compared (``None``: a JSON ``null``, a refusal); the scores are
    0.0 when there is no reference. ``format_ok`` is ``None`` for items without a schema. ``correct`` applies the
    chosen metric to an answerable item and the refusal test to an unanswerable one; ``None`` when the reply cannot
    be judged (no reference: the baseline failed on an item judged by agreement)."""

    answer: str | None
    exact: float
    f1: float
    contains: float
    refused: bool
    format_ok: bool | None
    format_errors: tuple[str, ...]
    correct: bool | None


def extract_answer(text: str, item: GoldenItem) -> tuple[str | None, bool | None, tuple[str, ...]]:
    """``(answer, format_ok, format_errors)`` of a reply to ``item``: with a schema, the reply must be JSON that
    validates (strictly: nothing around it); the answer is then its ``answer_field`` when it has one."""
    if item.schema is None:
        return text.strip(), None, ()
    value, strict = parse_json_reply(text)
    if value is None and not strict:
        return text.strip(), False, ("the reply is not JSON",)
    errors = tuple(validate(value, item.schema))
    if not strict:
        errors = ("the reply has text around its JSON", *errors)
    if isinstance(value, dict) and item.answer_field in value:
        field_value = value[item.answer_field]
        answer = None if field_value is None else (field_value if isinstance(field_value, str)
                                                   else json.dumps(field_value, ensure_ascii=False))
    else:
        answer = text.strip()
    return answer, not errors, errors


def judge(item: GoldenItem, reply: str | None, references: Sequence[str] | None, *, metric: Metric = "contains",
          f1_threshold: float = 0.5, refusal_markers: Sequence[str] = REFUSAL_MARKERS,
          expect_refusal: bool | None = None) -> Judgement:
    """Judge ``reply`` (``None``: the request failed, which is wrong and not compliant) against ``references``
    (the gold answers, or the baseline's answer; ``None``: nothing to judge against). ``expect_refusal`` overrides
    ``not item.answerable`` (an agreement item whose baseline refused expects a refusal)."""
    refusal_expected = (not item.answerable) if expect_refusal is None else expect_refusal
    if reply is None:
        return Judgement(None, 0.0, 0.0, 0.0, False, False if item.schema is not None else None,
                         ("the request failed",) if item.schema is not None else (), False)
    answer, format_ok, format_errors = extract_answer(reply, item)
    refused = answer is None or is_refusal(answer, refusal_markers)
    text = answer or ""
    refs = list(references or ())
    scores = (exact_match(text, refs), token_f1(text, refs), contains(text, refs)) if refs and not refused \
        else (0.0, 0.0, 0.0)
    if refusal_expected:
        correct: bool | None = refused
    elif references is None:
        correct = None
    else:
        by_metric = {"exact": scores[0] >= 1.0, "f1": scores[1] >= f1_threshold, "contains": scores[2] >= 1.0}
        correct = (not refused) and by_metric[metric]
    return Judgement(answer, *scores, refused, format_ok, format_errors, correct)
