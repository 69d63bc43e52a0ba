"""History rules in Korean, Japanese and Chinese: what the rule-based state keeps of annotated conversations.

Conversations whose facts are annotated (``ragtrim_bench.history.script_texts``), before (English rules only) and
after the CJK rules, dev and held-out apart.

Per conversation, folded whole (``compress_history(turns, keep_last_turns=0)``):
* ``kind_recall``: annotated facts found as an item of the annotated kind, from the annotated turn, holding the
  phrase; ``phrase_recall``: the same, any kind;
* ``silent_turn_items``: items from turns annotated as carrying nothing (greetings, thanks, reactions): should be 0;
* ``empty_turns_noted``: whether every folded turn without an item is listed in ``HistoryResult.empty_turns`` and
  summed up in a note in the result whenever a folded turn yields nothing.

``--english-digest`` also prints a SHA-256 of the English rule-based states on every LoCoMo conversation (the items
of all turns, and ``compress_history``'s state at three budgets): equal digests before and after mean the CJK rules
changed nothing in English; and the CPU time of folding every conversation from scratch (median of 3).

Run: ``ragtrim-bench history scripts [--english-digest]`` (writes ``results/history/scripts.json``). The "before"
digest: ``PYTHONPATH=<a checkout without the CJK rules> ragtrim-bench history scripts --english-digest-only -o
/tmp/before.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ragtrim.history.fold import compress_history
from ragtrim.history.summarizers import RuleBasedSummarizer
from ragtrim.models import Message
from ragtrim_bench.common.results import command_line, result_path, write_result
from ragtrim_bench.history.locomo import load_conversations
from ragtrim_bench.history.script_texts import SPLITS, Conversation


@contextmanager
def english_rules_only() -> Iterator[None]:
    """No sentence goes to the CJK rules: the summarizer without its Korean, Japanese and Chinese rules."""
    from ragtrim.history import cjk  # imported here so that --english-digest-only runs on older checkouts too

    saved = cjk.is_cjk_sentence
    cjk.is_cjk_sentence = lambda sentence: False
    try:
        yield
    finally:
        cjk.is_cjk_sentence = saved


def score(conv: Conversation) -> dict[str, Any]:
    turns = [Message(role=r, content=c, turn_id=str(i)) for i, (r, c) in enumerate(conv.turns, 1)]
    result = compress_history(turns, keep_last_turns=0)
    items = result.state.items
    by_turn: dict[int, list[tuple[str, str]]] = {}
    for it in items:
        for t in it.turn_ids:
            by_turn.setdefault(int(t), []).append((it.kind, it.text))
    kind_hits = sum(any(k in e.kinds and e.phrase in text for k, text in by_turn.get(e.turn, [])) for e in conv.expect)
    phrase_hits = sum(any(e.phrase in text for _, text in by_turn.get(e.turn, [])) for e in conv.expect)
    empty_ids = {t.turn_id for t in result.empty_turns}
    # Turns the extractor gave nothing (an answered question's turn did give an item, which the fold then closed).
    without_items = {m.turn_id for m in turns} - {t for it in RuleBasedSummarizer().extract(turns) for t in it.turn_ids}
    noted = sum(int(n.split(" of ", 1)[0]) for n in result.notes if "yielded no state item" in n)
    return {
        "expected": len(conv.expect),
        "kind_hits": kind_hits,
        "phrase_hits": phrase_hits,
        "silent_turns": len(conv.silent),
        "silent_turn_items": sum(len(by_turn.get(t, [])) for t in conv.silent),
        "items": len(items),
        "empty_turns": len(result.empty_turns),
        "empty_turns_noted": empty_ids == without_items and noted == len(without_items),
        "empty_turn_reasons": sorted({t.reason for t in result.empty_turns}),
        "state": [(it.kind, it.text, list(it.turn_ids)) for it in items],
    }


def summarize(rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    expected = sum(r["expected"] for r in rows.values())
    return {
        "conversations": len(rows),
        "expected_facts": expected,
        "kind_recall": round(sum(r["kind_hits"] for r in rows.values()) / expected, 3),
        "phrase_recall": round(sum(r["phrase_hits"] for r in rows.values()) / expected, 3),
        "silent_turn_items": sum(r["silent_turn_items"] for r in rows.values()),
        "items": sum(r["items"] for r in rows.values()),
        "all_empty_turns_noted": all(r["empty_turns_noted"] for r in rows.values()),
    }


def english_digest() -> dict[str, Any]:
    """SHA-256 of the rule-based state of every LoCoMo conversation (as ``ragtrim-bench history locomo`` loads them)."""
    summarizer = RuleBasedSummarizer()
    digest = hashlib.sha256()
    n_items = 0
    for conv in load_conversations():
        items = summarizer.extract(conv.turns)
        n_items += len(items)
        digest.update(json.dumps([it.to_dict() for it in items], sort_keys=True, ensure_ascii=False).encode())
        for budget in (None, 2000, 500):
            result = compress_history(conv.turns, max_tokens=budget)
            digest.update(result.state_text.encode())
            digest.update(json.dumps(result.state.to_dict(), sort_keys=True).encode())
    # CPU time of a from-scratch fold of every conversation (the default budget-free call), median of 3: compare a
    # before and an after run made one after the other, as a ratio (the machine's load moves both).
    times = []
    for _ in range(3):
        started = time.process_time()
        for conv in load_conversations():
            compress_history(conv.turns, keep_last_turns=4)
        times.append(time.process_time() - started)
    return {"locomo_rule_items": n_items, "locomo_state_sha256": digest.hexdigest(),
            "locomo_fold_cpu_s_median": round(sorted(times)[1], 3)}


def run(splits: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for split in splits:
        for label, rules in (("before", english_rules_only), ("after", None)):
            with rules() if rules else _nothing():
                rows = {conv.name: score(conv) for conv in SPLITS[split]}
            out[f"{split}_{label}"] = {"summary": summarize(rows), "by_language": {
                lang: summarize({k: v for k, v in rows.items() if k.startswith(lang)}) for lang in ("ko", "ja", "zh")},
                "conversations": rows}
    return out


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--split", choices=tuple(SPLITS), action="append", help="only this split (repeatable)")
    parser.add_argument("--english-digest", action="store_true", help="also digest the English states on LoCoMo")
    parser.add_argument("--english-digest-only", action="store_true",
                        help="only the LoCoMo digest (runs on a checkout without the CJK rules: the 'before' digest)")
    parser.add_argument("-o", "--output", type=Path, default=None,
                        help="JSON path (default: results/history/scripts.json)")
    args = parser.parse_args(argv)
    result: dict[str, Any] = {}
    if not args.english_digest_only:
        result.update(run(args.split or tuple(SPLITS)))
    if args.english_digest or args.english_digest_only:
        result["english"] = english_digest()
    out = write_result(args.output or result_path(__spec__.name), result, command=command_line(__spec__.name, argv))
    for key, value in result.items():
        if isinstance(value, dict) and "summary" in value:
            print(f"{key:16s} {value['summary']}")
            for lang, s in value["by_language"].items():
                print(f"  {lang} {s}")
    if "english" in result:
        print("english", result["english"])
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
