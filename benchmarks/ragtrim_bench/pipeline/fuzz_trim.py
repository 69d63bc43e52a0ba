"""Fuzz ``trim()`` and ``Pipeline``: generated inputs, counting what must never happen.

Each input mixes HTML, arbitrary Unicode, empty and large chunks, duplicates, str/dict/bytes/Chunk/document-like
items (with lying token counts and string ``pinned`` values), long sentences of clauses (the compressor cuts one
longer than the budget), budgets including 0 and 1, and scorers that need no model (BM25, fixed scores, the default
recipe's BM25 fusion with ``sure_weights`` over a fake embedder whose vectors go through a SQLite vector store),
through ``trim()`` or a custom pipeline (several budget policies and orders, three
counters). Counted: budget violations (``count(result.text)`` plus per-chunk overhead over the budget), exceptions
that are not ragtrim errors (a ``StageError`` wrapping a stage's raw exception counts as one), chunks missing from both the output and the removal records, and runs that differ
when repeated. Typed refusals (``BudgetError`` for pinned chunks over budget, ``InputError`` for duplicate ids)
are expected and tallied by type.
Run: ragtrim-bench pipeline fuzz_trim  -> benchmarks/results/pipeline/fuzz_trim.json
"""

from __future__ import annotations

import argparse
import random
import time
import traceback
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ragtrim import trim
from ragtrim.errors import ContractError, RagtrimError, StageError
from ragtrim.inputs import coerce_chunks
from ragtrim.models import Chunk
from ragtrim.pipeline import Pipeline
from ragtrim.scoring.hybrid import HybridScorer
from ragtrim.stages.base import Stage
from ragtrim.stages.budget import TokenBudget
from ragtrim.stages.compress import SentenceCompressor
from ragtrim.stages.dedup import DuplicateFilter
from ragtrim.stages.html import HtmlCleaner
from ragtrim.stages.order import Reorder
from ragtrim.stages.relevance import RelevanceFilter
from ragtrim.testing import FakeEmbedder, FixedScorer
from ragtrim.text.tokens import get_counter
from ragtrim_bench.common.results import command_line, result_path, write_result

_WORD_TEXT = ("the tower is 330 metres tall and was built in 1889 by Gustave Eiffel's company for the world fair in "
          "Paris it is made of wrought iron Dr. Smith e.g. U.S. 3.5 km")
_WORDS = _WORD_TEXT.split()
_HTML = ["<p>", "</p>", "<div>", "</div>", "<nav>Home | About</nav>", "<script>var x = '<p>';</script>",
         "<style>p{color:red}</style>", "<!-- comment -->", "<!--", "<title>T</title>", "&amp;", "&nbsp;", "&#x1F600;",
         "<br>", "<li>item</li>", "<table><tr><td>1</td></tr></table>", "<footer>(c) 2026</footer>", "<h1>", "</h1>",
         "<a href='x'>link</a>", "<", ">", "</", "<p class=\"a", "<![CDATA[x]]>"]
_ODD = ["\u200b", "e\u0301", "\u202e", "\ufeff", "\x00", "\x0b", "\u2028", "\r\n", "\t", "東京タワー", "🙂👍🏽", "ß",
        "İ", "ﬁ", "\U0001d54f", "…", "“quoted”", "```python\nx = 1;\n```", "    indented code;", "1. item", "- bullet"]
_RANGES = [(0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x6FF), (0x900, 0x97F),
           (0x3040, 0x30FF), (0x4E00, 0x4FFF), (0xAC00, 0xAD00), (0x1F300, 0x1F64F), (0x2000, 0x206F)]


@dataclass(frozen=True)
class FuzzConfig:
    inputs: int = 10_000
    seed: int = 14
    max_chunks: int = 10
    large_chunk_chars: int = 20_000
    large_chunk_rate: float = 0.02
    repeat_every: int = 25  # rerun every n-th input to check it gives the same result


def _sentence(rng: random.Random) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.randint(1, 14))]
    return words[0].capitalize() + " " + " ".join(words[1:]) + rng.choice([".", ".", "!", "?", "", "...", "."]) + " "


def _clauses(rng: random.Random) -> str:
    """One long sentence of clauses joined by commas, semicolons, dashes or CJK commas (never a sentence stop)."""
    marks = [", ", "; ", ": ", " - ", " \u2014 ", "\uff0c", "\u3001"]
    clauses = [" ".join(rng.choice(_WORDS + ["서울", "요금제의", "東京タワー"]) for _ in range(rng.randint(1, 12)))
               for _ in range(rng.randint(1, 9))]
    out = clauses[0]
    for c in clauses[1:]:
        out += rng.choice(marks) + c
    return out + rng.choice([".", "", "。"]) + " "


def _unicode(rng: random.Random, n: int) -> str:
    out = []
    for _ in range(n):
        lo, hi = rng.choice(_RANGES)
        out.append(chr(rng.randint(lo, hi)))
    return "".join(out)


def _text(rng: random.Random, cfg: FuzzConfig, earlier: list[str]) -> str:
    kind = rng.random()
    if kind < 0.05:
        return rng.choice(["", " ", "\n\n", "\t \n"])
    if kind < 0.10 and earlier:
        base = rng.choice(earlier)
        return base if rng.random() < 0.5 else base + " " + _sentence(rng)  # exact or near duplicate
    if rng.random() < cfg.large_chunk_rate:
        target = rng.randint(cfg.large_chunk_chars // 4, cfg.large_chunk_chars)
        parts: list[str] = []
        size = 0
        while size < target:
            parts.append(_sentence(rng) if rng.random() < 0.8 else rng.choice(_ODD + _HTML))
            size += len(parts[-1])
        return "".join(parts)
    parts = []
    for _ in range(rng.randint(1, 12)):
        r = rng.random()
        if r < 0.08:  # a long sentence of clauses, the compressor's truncation path
            parts.append(_clauses(rng))
        elif r < 0.5:
            parts.append(_sentence(rng))
        elif r < 0.7:
            parts.append(rng.choice(_HTML))
        elif r < 0.85:
            parts.append(rng.choice(_ODD))
        elif r < 0.95:
            parts.append(_unicode(rng, rng.randint(1, 40)))
        else:
            parts.append(rng.choice(".!?=-_ab") * rng.randint(2, 600))
    return "".join(parts)


def _item(rng: random.Random, text: str, i: int) -> Any:
    form = rng.random()
    if form < 0.35:
        return text
    if form < 0.45:
        return text.encode("utf-8")
    if form < 0.80:
        d: dict[str, Any] = {rng.choice(["text", "text", "page_content", "content"]): text, "id": f"d{i}"}
        if rng.random() < 0.5:
            d["score"] = rng.choice([None, rng.uniform(-5, 5), 0, 1, float("inf"), -0.0])
        if rng.random() < 0.1:
            d["pinned"] = rng.choice([False, "false", "False", True, "true"]) if rng.random() < 0.9 else False
        if rng.random() < 0.2:
            d["metadata"] = {"source": "x", "n": i}
        return d
    if form < 0.95:
        return Chunk(text=text, id=f"c{i}", score=rng.choice([None, rng.uniform(0, 1)]),
                     token_count=rng.choice([None, 0, 1, 10**6]), pinned=rng.random() < 0.03)
    return _Document(text, f"doc{i}" if rng.random() < 0.5 else None)


class _Document:
    """A LangChain-Document look-alike."""

    def __init__(self, page_content: str, doc_id: str | None) -> None:
        self.page_content = page_content
        self.metadata = {"src": "fuzz"}
        self.id = doc_id


def _budget(rng: random.Random) -> int | None:
    return rng.choice([None, 0, 1, 2, 5, 16, rng.randint(0, 80), rng.randint(0, 600)])


_STORE: list[str] = []


def _store_path() -> str:
    """One SQLite vector store for the whole run, in a temporary folder."""
    if not _STORE:
        import tempfile

        _STORE.append(str(Path(tempfile.mkdtemp(prefix="ragtrim-fuzz-")) / "vectors.sqlite3"))
    return _STORE[0]


def _pipeline(rng: random.Random, budget: int, tokenizer: str) -> tuple[Pipeline, int]:
    overhead = rng.choice([0, 0, 1, 3])
    stages: list[Stage] = []
    if rng.random() < 0.7:
        stages.append(HtmlCleaner())
    if rng.random() < 0.7:
        stages.append(DuplicateFilter())
    if rng.random() < 0.7:
        fixed = FixedScorer(scores=[rng.uniform(0, 1) for _ in range(12)])
        # the default recipe's fusion (BM25 deciding when it is sure) over a fake model whose vectors go through a
        # persistent store, with a fake that needs no model download
        fused = HybridScorer(scorers=("bm25", FakeEmbedder(recipe="fuzz", vector_store=_store_path())), method="mix",
                             weights=(0.1, 0.9), sure_weights=(0.8, 0.2))
        scorer: Any = rng.choice(["bm25", fixed, fused])
        stages.append(RelevanceFilter(scorer=scorer, top_k=rng.choice([None, 1, 3, 8])))
    if rng.random() < 0.5:
        stages.append(SentenceCompressor(scorer="bm25", max_tokens=max(1, budget), truncate=rng.random() < 0.8))
    stages.append(TokenBudget(max_tokens=budget, policy=rng.choice(["score", "position"]),
                              truncate=rng.random() < 0.7, min_truncated_tokens=rng.choice([1, 4, 16]),
                              per_chunk_overhead_tokens=overhead))
    if rng.random() < 0.8:
        stages.append(Reorder(strategy=rng.choice(["original", "score", "lost_in_the_middle", "prefix_cache"])))
    return Pipeline(stages, tokenizer=tokenizer), overhead


def run_one(rng: random.Random, cfg: FuzzConfig) -> dict[str, Any]:
    """One generated input: returns what happened (never raises)."""
    earlier: list[str] = []
    items = []
    for i in range(rng.randint(0, cfg.max_chunks)):
        text = _text(rng, cfg, earlier)
        earlier.append(text)
        items.append(_item(rng, text, i))
    query = rng.choice(["", _sentence(rng), _unicode(rng, 8), "How tall is the tower?", "<p>tower</p>"])
    budget = _budget(rng)
    tokenizer = rng.choice(["cl100k_base"] * 6 + ["approx", "whitespace"])
    use_pipeline = budget is not None and rng.random() < 0.35
    overhead = 0
    facts: dict[str, Any] = {"path": "pipeline" if use_pipeline else "trim", "tokenizer": tokenizer,
                             "budget": budget, "chunks": len(items)}

    def call() -> Any:
        nonlocal overhead
        if use_pipeline:
            assert budget is not None
            p, overhead = _pipeline(random.Random(seed_for_pipeline), budget, tokenizer)
            return p.run(items, query=query)
        return trim(items, query=query, budget=budget, tokenizer=tokenizer, scorer="bm25")

    seed_for_pipeline = rng.random()
    try:
        result = call()
    except (StageError, ContractError) as exc:  # typed wrappers around a stage's untyped exception: a bug
        facts["untyped_error"] = f"{type(exc).__name__}: {exc} (cause: {exc.__cause__!r})"[:500]
        facts["traceback"] = "".join(traceback.format_exception(exc))[-2000:]
        return facts
    except RagtrimError as exc:
        facts["typed_error"] = type(exc).__name__
        return facts
    except Exception as exc:  # noqa: BLE001 - this is what the fuzzer counts
        facts["untyped_error"] = f"{type(exc).__name__}: {exc}"[:500]
        facts["traceback"] = traceback.format_exc()[-2000:]
        return facts
    counter = get_counter(tokenizer)
    if budget is not None:
        used = counter.count(result.text) + overhead * len(result.chunks)
        if used > budget:
            facts["budget_violation"] = {"used": used, "budget": budget}
    input_ids = {c.id for c in coerce_chunks(items)}
    dropped = {r.chunk_id for r in result.removals if r.action == "dropped"}
    out_ids = {c.id for c in result.chunks}
    lost = input_ids - out_ids - dropped
    if lost or out_ids - input_ids or out_ids & dropped:
        facts["lost"] = sorted(lost)[:10]
    facts["repeat"] = (result.text, [r.to_dict() for r in result.removals])
    return facts


def fuzz(cfg: FuzzConfig) -> dict[str, Any]:
    started = time.perf_counter()
    counts: Counter[str] = Counter()
    typed: Counter[str] = Counter()
    paths: Counter[str] = Counter()
    examples: list[dict[str, Any]] = []
    for n in range(cfg.inputs):
        facts = run_one(random.Random(f"{cfg.seed}:{n}"), cfg)
        paths[f"{facts['path']}:{facts['tokenizer']}"] += 1
        if "typed_error" in facts:
            typed[facts["typed_error"]] += 1
        for key in ("untyped_error", "budget_violation", "lost"):
            if key in facts:
                counts[key] += 1
                if len(examples) < 20:
                    examples.append({"input": n, **{k: v for k, v in facts.items() if k != "repeat"}})
        if cfg.repeat_every and n % cfg.repeat_every == 0 and "repeat" in facts:
            again = run_one(random.Random(f"{cfg.seed}:{n}"), cfg)
            if again.get("repeat") != facts["repeat"]:
                counts["nondeterministic"] += 1
            counts["repeated"] += 1
    return {
        "config": asdict(cfg),
        "inputs": cfg.inputs,
        "budget_violations": counts["budget_violation"],
        "untyped_exceptions": counts["untyped_error"],
        "lost_chunks": counts["lost"],
        "nondeterministic_reruns": counts["nondeterministic"],
        "reruns_checked": counts["repeated"],
        "typed_errors": dict(sorted(typed.items())),
        "runs_by_path_and_tokenizer": dict(sorted(paths.items())),
        "seconds": round(time.perf_counter() - started, 1),
        "examples": examples,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=FuzzConfig.inputs)
    parser.add_argument("--seed", type=int, default=FuzzConfig.seed)
    parser.add_argument("-o", "--output", type=Path, default=None, help="default: results/pipeline/fuzz_trim.json")
    args = parser.parse_args(argv)
    report = fuzz(FuzzConfig(inputs=args.inputs, seed=args.seed))
    out = write_result(args.output or result_path(__spec__.name), report, command=command_line(__spec__.name, argv))
    print(f"{report['inputs']} inputs in {report['seconds']} s: budget violations {report['budget_violations']}, "
          f"untyped exceptions {report['untyped_exceptions']}, lost chunks {report['lost_chunks']}, "
          f"nondeterministic reruns {report['nondeterministic_reruns']} of {report['reruns_checked']}; "
          f"typed errors {report['typed_errors']}; wrote {out}")
    bad = report["budget_violations"] + report["untyped_exceptions"] + report["lost_chunks"]
    return 1 if bad + report["nondeterministic_reruns"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
