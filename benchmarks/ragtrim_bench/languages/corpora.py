"""Text in each script for the language benchmarks: English NQ passages and Korean KorQuAD paragraphs from
../shared/data, and Japanese and Chinese generated from a seeded sample of real sentences' characters (no Japanese or
Chinese corpus is available offline here): sentences of 15-45 characters ending in 。, drawn character by character
with the frequencies of the seed passages, so that no two chunks repeat (a repeated text would be cheap through the
caches). ``zh-unpunct`` is the Chinese text with its punctuation removed: one run without a break.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path

from ragtrim.errors import ConfigError
from ragtrim_bench.datasets import dataset_path
from ragtrim_bench.datasets.nq import load_nq_open

LANGUAGES: tuple[str, ...] = ("en", "ko", "ja", "zh", "zh-unpunct")
QUERIES = {"en": "when did the war end", "ko": "헤이그는 어떤 직책을 맡았는가?", "ja": "紅葉の見頃はいつですか？",
           "zh": "香山的红叶什么时候变红？", "zh-unpunct": "香山的红叶什么时候变红"}
_JA_SEED = ("京都の紅葉は例年十一月中旬から十二月上旬にかけて見頃を迎える。特に東福寺の通天橋から眺める渓谷の紅葉は有名で、毎年多くの"
            "観光客が訪れる。混雑を避けるには、平日の早朝に訪れるのがよい。市バスは大変混み合うため、地下鉄を利用すると移動がスムーズ"
            "である。東京は日本の首都であり、人口は約千四百万人だ。会議は午後三時に終わった。締め切りは金曜日です。予算は三百万円です。")
_ZH_SEED = ("北京的秋天是一年中最美的季节。香山的红叶每年十月中旬开始变红，吸引大量游客前来观赏。颐和园的昆明湖在秋日阳光下波光粼粼，"
            "十七孔桥是拍照的好地方。为了避开人群，建议工作日早上出发。上海是中国最大的城市，人口超过两千万。会议定于下午两点开始，"
            "请准时参加。截止日期是下周五，预算不超过五千元。")


def _generated(seed_text: str, chars: int, *, seed: int) -> str:
    rng = random.Random(seed)
    alphabet = [c for c in seed_text if c not in "。、，"]
    out: list[str] = []
    size = 0
    while size < chars:
        n = rng.randint(15, 45)
        sentence = "".join(rng.choice(alphabet) for _ in range(n))
        if n > 25:  # a comma in the longer sentences, as in the seed text
            k = rng.randint(8, n - 8)
            sentence = sentence[:k] + ("、" if "、" in seed_text else "，") + sentence[k:]
        out.append(sentence + "。")
        size += len(out[-1])
    return "".join(out)[:chars]


def text(language: str, chars: int, *, seed: int = 0) -> str:
    """``chars`` characters of ``language`` (see the module docstring); different ``seed``, different text."""
    if language == "en":
        passages = [q.gold.text for q in load_nq_open()]
        return _window(" ".join(passages), chars, seed)
    if language == "ko":
        data = json.loads(Path(dataset_path("korquad-v1-dev") / "KorQuAD_v1.0_dev.shared.json").read_text())
        return _window(" ".join(p["context"] for a in data["data"] for p in a["paragraphs"]), chars, seed)
    if language == "ja":
        return _generated(_JA_SEED, chars, seed=seed)
    if language == "zh":
        return _generated(_ZH_SEED, chars, seed=seed)
    if language == "zh-unpunct":
        raw = _generated(_ZH_SEED, chars * 2, seed=seed)
        return "".join(c for c in raw if c.isalpha())[:chars]
    raise ConfigError(f"language must be one of {list(LANGUAGES)}, got {language!r}")


def _window(source: str, chars: int, seed: int) -> str:
    """``chars`` characters of ``source`` from a seeded start (wrapping around; a source shorter than ``chars``
    repeats)."""
    if not source:
        raise ConfigError("empty corpus")
    start = random.Random(seed).randrange(len(source))
    doubled = source[start:] + " " + source[:start]
    while len(doubled) < chars:
        doubled += " " + source
    return doubled[:chars]


def chunks(language: str, n: int, chars: int, *, seed: int = 0) -> list[str]:
    """``n`` chunks of ``chars`` characters each, cut from one text of ``n x chars`` characters."""
    whole = text(language, n * chars, seed=seed)
    return [whole[i * chars:(i + 1) * chars] for i in range(n)]


def check_languages(names: Sequence[str]) -> tuple[str, ...]:
    unknown = [n for n in names if n not in LANGUAGES]
    if unknown or not names:
        raise ConfigError(f"languages must be among {list(LANGUAGES)}, got {list(names)}")
    return tuple(names)
