"""Near duplicates in text without spaces: Japanese, Chinese and English pages under two sites, word against character
shingles.

The same article under two sites' headers and footers against a sibling article on a close topic, in Japanese,
Chinese and English, for word shingles on every line (the earlier rule) and character shingles of several lengths on Han/Kana
lines.

For each split (``dev``: the length was chosen here; ``heldout``: reported only) and language:
* pair Jaccard without template discounting (``ragtrim.dedup.shingles.line_shingles``): the same article under the
  two sites (should be high), an article and its sibling under one site (should be low), an article and the same
  article with its last line dropped (a light edit);
* the ``DuplicateFilter`` stage on one batch holding every article and sibling under both sites (so each site's
  lines recur in enough chunks to be learnt as template lines): how many second copies it drops as duplicates of
  the first (recall) and how many different articles it merges (false merges), at the default threshold 0.8.

Run: ``ragtrim-bench dedup scripts [--split dev]`` (writes ``results/dedup/scripts.json``, a few seconds). The
texts are in ``ragtrim_bench.dedup.script_texts``.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ragtrim.dedup import shingles
from ragtrim.dedup.shingles import jaccard, line_shingles
from ragtrim.models import Chunk, TrimContext
from ragtrim.stages.dedup import DuplicateFilter
from ragtrim.text.scripts import SPACELESS_CHAR
from ragtrim.text.tokens import WhitespaceCounter
from ragtrim_bench.common.results import command_line, result_path, write_result
from ragtrim_bench.dedup.script_texts import SPLITS, LanguageSet

WORDS = "words"
"""The "shingle length" label of the ablation that shingles every line by words, the earlier rule."""


@dataclass(frozen=True)
class ScriptDedupConfig:
    shingle_chars: tuple[int, ...] = (2, 3, 4, 5, 6, 7, 9)
    shingle_words: int = 3
    threshold: float = 0.8


@contextmanager
def words_only() -> Iterator[None]:
    """Every line shingled by words (the earlier rule): the ablation's baseline."""
    # The name the line tokenizer looks up at call time; getattr/setattr because the module does not export it.
    saved = getattr(shingles, "is_spaceless")  # noqa: B009
    setattr(shingles, "is_spaceless", lambda line, **_: False)  # noqa: B010
    try:
        yield
    finally:
        setattr(shingles, "is_spaceless", saved)  # noqa: B010


def _wrap(site: tuple[str, str], body: str) -> str:
    return site[0] + body + site[1]


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def change_middle_token(body: str) -> str:
    """Every line with its middle token replaced: the middle word of an English line, the middle Han/Kana character
    of a Japanese or Chinese line (a typo or a variant spelling in each line)."""
    out = []
    for line in body.splitlines():
        words = line.split()
        if len(words) > 2:
            words[len(words) // 2] = "zzz"
            out.append(" ".join(words))
            continue
        spots = [i for i, c in enumerate(line) if SPACELESS_CHAR.match(c)]
        i = spots[len(spots) // 2] if spots else -1
        out.append(line[:i] + "〇" + line[i + 1 :] if i >= 0 else line)
    return "\n".join(out)


def _pair_removed(x: str, y: str, k: int, cfg: ScriptDedupConfig) -> bool:
    stage = DuplicateFilter(threshold=cfg.threshold, shingle_words=cfg.shingle_words, shingle_chars=k)
    out = stage.run(TrimContext(chunks=(Chunk(x, "x"), Chunk(y, "y"))), counter=WhitespaceCounter())
    return bool(out.removals)


def measure(lang: LanguageSet, k: int, cfg: ScriptDedupConfig) -> dict[str, Any]:
    site_a, site_b = lang.sites
    bodies = [body for pair in lang.articles for body in pair]

    def sim(x: str, y: str) -> float:
        return jaccard(line_shingles(x, cfg.shingle_words, k), line_shingles(y, cfg.shingle_words, k))

    same = [sim(_wrap(site_a, b), _wrap(site_b, b)) for b in bodies]
    siblings = [sim(_wrap(s, a), _wrap(s, b)) for a, b in lang.articles for s in (site_a, site_b)]
    edited = [sim(b, b.rsplit("\n", 1)[0]) for b in bodies]
    changed = [sim(b, change_middle_token(b)) for b in bodies]
    # A longer page: every first article of the language in one body, its siblings in the other.
    long_body = "\n".join(a for a, _ in lang.articles)
    long_sibling = "\n".join(b for _, b in lang.articles)

    chunks = tuple(Chunk(_wrap(site, b), f"{name}{i}") for name, site in (("a", site_a), ("b", site_b))
                   for i, b in enumerate(bodies))
    stage = DuplicateFilter(threshold=cfg.threshold, shingle_words=cfg.shingle_words, shingle_chars=k, keep="first")
    out = stage.run(TrimContext(chunks=chunks), counter=WhitespaceCounter())
    correct = sum(r.chunk_id[1:] == (r.kept_id or "")[1:] for r in out.removals)
    return {
        "same_article_two_sites_jaccard_min": round(min(same), 3),
        "same_article_two_sites_jaccard_mean": round(_mean(same), 3),
        "sibling_same_site_jaccard_max": round(max(siblings), 3),
        "sibling_same_site_jaccard_mean": round(_mean(siblings), 3),
        "margin_min_same_minus_max_sibling": round(min(same) - max(siblings), 3),
        "last_line_dropped_jaccard_mean": round(_mean(edited), 3),
        "middle_token_changed_jaccard_mean": round(_mean(changed), 3),
        "long_page_chars": len(long_body),
        "long_page_two_sites_jaccard": round(sim(_wrap(site_a, long_body), _wrap(site_b, long_body)), 3),
        "long_page_sibling_jaccard": round(sim(_wrap(site_a, long_body), _wrap(site_a, long_sibling)), 3),
        "long_page_two_sites_detected": _pair_removed(_wrap(site_a, long_body), _wrap(site_b, long_body), k, cfg),
        "long_page_sibling_merged": _pair_removed(_wrap(site_a, long_body), _wrap(site_a, long_sibling), k, cfg),
        "batch_articles": len(bodies),
        "batch_recall": round(correct / len(bodies), 3),
        "batch_false_merges": len(out.removals) - correct,
        "batch_template_lines": out.info["template_lines"],
    }


CHOICE_MEASURES = ("long_page_two_sites_jaccard", "sibling_same_site_jaccard_max", "middle_token_changed_jaccard_mean")
"""What "behaves like English word shingles" means when the length is chosen: a page under two sites, the closest
sibling article, and a copy with one token changed per line."""


def distance_to_english(rows: dict[str, Any], k: int, languages: Sequence[str] = ("ja", "zh")) -> float:
    """Sum over ``languages`` and ``CHOICE_MEASURES`` of |Jaccard with k-character shingles - English's|."""
    en = rows["en_words"]
    return float(sum(abs(rows[f"{lang}_chars{k}"][m] - en[m]) for lang in languages for m in CHOICE_MEASURES))


def closest_to_english(rows: dict[str, Any], lengths: Sequence[int]) -> int:
    """The shingle length whose Jaccards are closest to English's (ties to the shorter, the more edit-tolerant)."""
    return min(lengths, key=lambda k: (distance_to_english(rows, k), k))


def run(cfg: ScriptDedupConfig, splits: Sequence[str] = tuple(SPLITS)) -> dict[str, Any]:
    result: dict[str, Any] = {"config": asdict(cfg), "splits": {}}
    for split in splits:
        languages = SPLITS[split]
        rows: dict[str, Any] = {}
        for lang in languages:
            with words_only():
                rows[f"{lang.language}_{WORDS}"] = measure(lang, cfg.shingle_words, cfg)
            if lang.language == "en":
                continue  # no Han/Kana line: every length gives the word-shingle numbers
            for k in cfg.shingle_chars:
                rows[f"{lang.language}_chars{k}"] = measure(lang, k, cfg)
        result["splits"][split] = rows
        result[f"{split}_distance_to_english"] = {k: round(distance_to_english(rows, k), 3) for k in cfg.shingle_chars}
        result[f"{split}_closest_to_english"] = closest_to_english(rows, cfg.shingle_chars)
    result["shipped_shingle_chars"] = shingles.SHINGLE_CHARS
    return result


def report(result: dict[str, Any]) -> None:
    for key, value in result.items():
        if key.endswith(("_closest_to_english", "_distance_to_english")) or key == "shipped_shingle_chars":
            print(f"{key}: {value}")
    cols = ("same_article_two_sites_jaccard_min", "sibling_same_site_jaccard_max", "margin_min_same_minus_max_sibling",
            "middle_token_changed_jaccard_mean", "long_page_two_sites_jaccard", "long_page_sibling_jaccard",
            "long_page_two_sites_detected", "long_page_sibling_merged", "batch_recall", "batch_false_merges")
    for split, rows in result["splits"].items():
        print(f"== {split}")
        print(f"{'rule':10s} " + " ".join(f"{c[:11]:>11s}" for c in cols))
        for name, row in rows.items():
            print(f"{name:10s} " + " ".join(f"{row[c]!s:>11}" for c in cols))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--split", choices=tuple(SPLITS), action="append",
                        help="measure only this split (repeatable; default: all)")
    parser.add_argument("-o", "--output", type=Path, default=None, help="JSON path (default: results/dedup/scripts.json)")
    args = parser.parse_args(argv)
    result = run(ScriptDedupConfig(), args.split or tuple(SPLITS))
    out = write_result(args.output or result_path(__spec__.name), result, command=command_line(__spec__.name, argv))
    report(result)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
