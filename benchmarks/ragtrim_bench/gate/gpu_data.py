"""The data of the H200 gate run: a 300-question golden set from three SQuAD 2.0 articles (30% unanswerable, JSON
answers), and a fine-tuning set that never shares an article with it: the other nine SQuAD articles and the
NQ-open questions whose gold passage comes from another article, a third of them also asked without their gold
passage (unanswerable).

Training prompts are rendered by the gate itself (``ragtrim.gate.prompt``), so the reader learns the exact
instruction, document block and JSON format the golden set is asked in.
"""

from __future__ import annotations

import gzip
import json
import random
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ragtrim.gate.builders import JSON_ANSWER_SCHEMA, golden_from_squad, squad_titles
from ragtrim.gate.golden import GoldenItem

GOLDEN_ARTICLES = ("Warsaw", "Immune_system", "Yuan_dynasty")
"""The golden set's articles (1,389 questions); the other nine SQuAD articles may be trained on."""
GOLDEN_QUESTIONS = 300
GOLDEN_UNANSWERABLE_SHARE = 0.3
GOLDEN_DOCUMENTS = 10
TRAIN_DOCUMENTS = (1, 2, 4, 6, 10)
"""Documents per training prompt, drawn per question: the reader sees short and long prompts."""
NQ_UNANSWERABLE_SHARE = 1 / 3
"""The share of NQ questions also asked without their gold passage: with SQuAD's own, about 40% of the training
prompts are unanswerable (the golden set: 30%)."""
SQUAD_FILE = Path("squad-v2-dev-cs224n") / "dev-v2.0.shared.json"
NQ_FILE = Path("nq-multidoc") / "nq-open-oracle.shared.jsonl.gz"


def _title_key(title: str) -> str:
    return " ".join(title.replace("_", " ").lower().split())


def golden_set(data: Path) -> list[GoldenItem]:
    """The 300 golden questions (seed 0)."""
    return golden_from_squad(data / SQUAD_FILE, articles=list(GOLDEN_ARTICLES), limit=GOLDEN_QUESTIONS,
                             unanswerable_share=GOLDEN_UNANSWERABLE_SHARE, documents=GOLDEN_DOCUMENTS,
                             json_answers=True, seed=0)


def _fewer_documents(item: GoldenItem, k: int, rng: random.Random) -> GoldenItem:
    """``item`` with ``k`` of its documents, its gold paragraph among them (SQuAD items carry its position)."""
    gold = int(item.meta["gold_document"])
    others = [d for i, d in enumerate(item.documents) if i != gold]
    kept = rng.sample(others, min(k - 1, len(others)))
    kept.insert(rng.randrange(len(kept) + 1), item.documents[gold])
    return replace(item, documents=tuple(kept), meta={**item.meta, "gold_document": kept.index(item.documents[gold])})


def squad_training(data: Path, *, seed: int = 1) -> list[GoldenItem]:
    """Every question of the articles outside the golden set, each with 1-10 documents of its article."""
    titles = [t for t, _ in squad_titles(data / SQUAD_FILE) if t not in GOLDEN_ARTICLES]
    rng = random.Random(seed)
    items = golden_from_squad(data / SQUAD_FILE, articles=titles, documents=max(TRAIN_DOCUMENTS),
                              json_answers=True, seed=seed)
    return [_fewer_documents(i, rng.choice(TRAIN_DOCUMENTS), rng) for i in items]


def read_nq(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def nq_training(data: Path, *, seed: int = 2, excluded_titles: Sequence[str] = GOLDEN_ARTICLES
                ) -> tuple[list[GoldenItem], dict[str, int]]:
    """NQ-open questions whose gold passage's article is not a golden article: each once with its gold passage
    among others' passages (answerable), and a third of them also with others' passages only (unanswerable; passages
    holding one of its answers are never drawn). Returns the items and counts."""
    rows = read_nq(data / NQ_FILE)
    banned = {_title_key(t) for t in excluded_titles}
    kept = [r for r in rows if _title_key(r["ctxs"][0]["title"]) not in banned]
    passages = [f"{r['ctxs'][0]['title']}\n{r['ctxs'][0]['text']}" for r in kept]
    rng = random.Random(seed)
    items: list[GoldenItem] = []
    for n, row in enumerate(kept):
        answers = [a for a in row["answers"] if a.strip()]
        if not answers:
            continue
        lowered = [a.lower() for a in answers]
        pool = [p for p in rng.sample(range(len(passages)), 40) if p != n
                and not any(a in passages[p].lower() for a in lowered)]
        k = rng.choice(TRAIN_DOCUMENTS)
        docs = [passages[p] for p in pool[:k - 1]]
        docs.insert(rng.randrange(len(docs) + 1), passages[n])
        items.append(GoldenItem(id=f"nq-{n}", question=row["question"].strip() + "?", documents=tuple(docs),
                                answers=tuple(answers), schema=JSON_ANSWER_SCHEMA, tags=("nq",)))
        if rng.random() >= NQ_UNANSWERABLE_SHARE:
            continue
        k = rng.choice(TRAIN_DOCUMENTS)
        items.append(GoldenItem(id=f"nq-{n}-u", question=row["question"].strip() + "?",
                                documents=tuple(passages[p] for p in pool[k:2 * k]), answerable=False,
                                schema=JSON_ANSWER_SCHEMA, tags=("nq",)))
    return items, {"nq_questions": len(rows), "nq_kept": len(kept), "nq_dropped_golden_titles": len(rows) - len(kept)}


def training_set(data: Path, *, seed: int = 3) -> tuple[list[GoldenItem], dict[str, Any]]:
    """SQuAD and NQ training items, shuffled, with the split's provenance (which articles, how many of each)."""
    squad = squad_training(data)
    nq, nq_counts = nq_training(data)
    items = squad + nq
    random.Random(seed).shuffle(items)
    train_articles = sorted({i.tags[0] for i in squad})
    overlap = sorted(set(train_articles) & set(GOLDEN_ARTICLES))
    if overlap:  # the split's one promise; never train on the golden set's articles
        raise RuntimeError(f"training articles overlap the golden set's: {overlap}")
    info = {"golden_articles": list(GOLDEN_ARTICLES), "training_squad_articles": train_articles,
            "squad_items": len(squad), "squad_unanswerable": sum(not i.answerable for i in squad),
            "nq_items": len(nq), "nq_unanswerable": sum(not i.answerable for i in nq), **nq_counts,
            "documents_per_prompt": list(TRAIN_DOCUMENTS)}
    return items, info


def target_text(item: GoldenItem) -> str:
    """The reply the reader is trained to give: ``{"answer": "<first answer>"}``, ``{"answer": null}`` to refuse."""
    return json.dumps({"answer": item.answers[0] if item.answerable and item.answers else None},
                      ensure_ascii=False)
