"""CUAD v1 (commercial contracts with expert clause labels) as clause retrieval with same-contract distractors.

A contract is cut into chunks of ``MIN_WORDS``-``MAX_WORDS`` words (``contract_chunks``: its blank-line paragraphs,
long ones cut at sentence ends, packed in order, a new chunk at a paragraph start once ``MIN_WORDS`` are reached;
a paragraph's lines stay lines). A question is CUAD's own, for one category the contract has a clause of:
``Highlight the parts (if any) of this contract related to "<Category>" that should be reviewed by a lawyer.
Details: <Description>``. The gold chunk is the first that holds a whole clause span of that category; the answers
are the spans it holds (kept means one whole span survived). Distractors: the contract's own chunks first, then the
split's other contracts', each best BM25 first, never a chunk that holds or overlaps a span of the category (in its
own contract: another contract's clause of the same category would be a right answer too) or any answer.

Left out: the categories "Document Name" and "Parties", whose spans are names that recur throughout a contract (no
chunk of it lacks them), and spans not found in the text (whitespace aside).
"""

from __future__ import annotations

import ast
import csv
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ragtrim.errors import InputError
from ragtrim_bench.datasets import dataset_path
from ragtrim_bench.datasets.domain import (
    ChunkPool,
    DomainQuestion,
    DomainSplit,
    cap_per_document,
    check_split,
    split_of,
)
from ragtrim_bench.datasets.nq import bm25_tokens

CUAD_FOLDER = "cuad-shared"
MIN_WORDS = 80
MAX_WORDS = 200
SKIPPED_CATEGORIES = frozenset({"Document Name", "Parties"})
QUESTION_FORM = ('Highlight the parts (if any) of this contract related to "{category}" that should be reviewed by '
                 "a lawyer. Details: {description}")
"""The question form of CUAD's SQuAD-style JSON (CUAD_v1.json)."""

_SENTENCE_END = re.compile(r"(?<=[.;:!?])\s+(?=[\"“(\[]?[A-Z0-9])")


@dataclass(frozen=True, slots=True)
class Contract:
    """A contract: its file name (the document key), its chunks, and per category the clause spans found in it as
    ``(start, end)`` offsets into ``flat`` (the chunks joined by single spaces, whitespace collapsed)."""

    name: str
    chunks: tuple[str, ...]
    spans: dict[str, tuple[tuple[str, int, int], ...]]

    @property
    def flat_starts(self) -> list[int]:
        """Where each chunk starts in ``flat``."""
        starts, at = [], 0
        for c in self.chunks:
            starts.append(at)
            at += len(" ".join(c.split())) + 1
        return starts


def _words(text: str) -> int:
    return len(text.split())


def _units(paragraph: str) -> list[str]:
    """A paragraph as pieces of at most ``MAX_WORDS`` words: whole when it fits, else its sentences (a sentence
    longer than that cut into ``MAX_WORDS``-word runs)."""
    if _words(paragraph) <= MAX_WORDS:
        return [paragraph]
    out: list[str] = []
    for sentence in _SENTENCE_END.split(paragraph):
        words = sentence.split()
        out.extend(" ".join(words[i:i + MAX_WORDS]) for i in range(0, len(words), MAX_WORDS))
    return out


def contract_chunks(text: str) -> list[str]:
    """The contract's chunks (see the module docstring). A paragraph's inner line breaks are kept and runs of
    spaces collapsed; paragraphs of one chunk are joined by a line break."""
    paragraphs = [p for p in (re.sub(r"[ \t]+", " ", b).strip() for b in re.split(r"\n\s*\n", text)) if p]
    chunks: list[list[str]] = []
    n = 0
    for paragraph in paragraphs:
        for k, unit in enumerate(_units(paragraph)):
            w = _words(unit)
            if chunks and (n + w > MAX_WORDS or (k == 0 and n >= MIN_WORDS)):
                chunks.append([])
                n = 0
            if not chunks:
                chunks.append([])
            sep = "\n" if k == 0 else " "
            chunks[-1].append(unit if not chunks[-1] else sep + unit)
            n += w
    out = ["".join(c) for c in chunks]
    if len(out) > 1 and _words(out[-1]) < MIN_WORDS and _words(out[-2]) + _words(out[-1]) <= MAX_WORDS:
        out[-2:] = [out[-2] + "\n" + out[-1]]
    return out


def _name_key(name: str) -> str:
    base = re.sub(r"\.(pdf|txt)\W*$", "", name.strip(), flags=re.IGNORECASE)
    return "".join(ch for ch in unicodedata.normalize("NFKD", base).lower() if ch.isascii() and ch.isalnum())


def load_categories(folder: Path) -> dict[str, str]:
    """Category name -> description, from ``category_descriptions.csv`` (labels stripped)."""
    out: dict[str, str] = {}
    with (folder / "category_descriptions.csv").open(encoding="utf-8-sig", newline="") as f:
        for row in csv.DictReader(f):
            name = row["Category (incl. context and answer)"].removeprefix("Category:").strip()
            out[name] = row["Description"].removeprefix("Description:").strip()
    return out


def _locate(flat: str, span: str) -> tuple[int, int] | None:
    needle = " ".join(span.split())
    at = flat.find(needle) if needle else -1
    return (at, at + len(needle)) if at >= 0 else None


@lru_cache(maxsize=2)
def load_cuad(path: str | None = None) -> tuple[tuple[Contract, ...], dict[str, str]]:
    """The contracts of ``master_clauses.csv`` with their chunks and located spans, and the category descriptions
    (``path``: the folder, default ``$RAGTRIM_DATA/cuad-shared/``)."""
    folder = Path(path) if path is not None else dataset_path(CUAD_FOLDER)
    if not (folder / "master_clauses.csv").is_file():
        raise InputError(f"CUAD folder {str(folder)!r} has no master_clauses.csv; set RAGTRIM_DATA")
    descriptions = load_categories(folder)
    by_key = {_name_key(p.name): p for p in (folder / "full_contract_txt").glob("*.txt")}
    categories = {c.lower(): c for c in descriptions}
    contracts: list[Contract] = []
    with (folder / "master_clauses.csv").open(encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            file = by_key.get(_name_key(row["Filename"]))
            if file is None:
                raise InputError(f"CUAD: no contract text for {row['Filename']!r} in {folder / 'full_contract_txt'}")
            chunks = contract_chunks(file.read_text(encoding="utf-8"))
            flat = " ".join(" ".join(c.split()) for c in chunks)
            spans: dict[str, tuple[tuple[str, int, int], ...]] = {}
            for column, cell in row.items():
                category = categories.get(column.strip().lower())
                if category is None or category in SKIPPED_CATEGORIES or not cell.strip():
                    continue
                found = []
                for span in ast.literal_eval(cell):
                    where = _locate(flat, str(span))
                    if where is not None:
                        found.append((" ".join(str(span).split()), *where))
                if found:
                    spans[category] = tuple(found)
            contracts.append(Contract(name=file.name, chunks=tuple(chunks), spans=spans))
    return tuple(contracts), descriptions


def gold_chunk(contract: Contract, category: str) -> tuple[str, tuple[str, ...]] | None:
    """The first chunk of ``contract`` that holds a whole span of ``category``, with the spans it holds; None when
    every span crosses a chunk boundary."""
    for text, start in zip(contract.chunks, contract.flat_starts):
        end = start + len(" ".join(text.split()))
        inside = [s for s, a, b in contract.spans.get(category, ()) if start <= a and b <= end]
        if inside:
            return text, tuple(dict.fromkeys(inside))
    return None


def cuad_question(category: str, description: str) -> str:
    return QUESTION_FORM.format(category=category, description=description)


@lru_cache(maxsize=4)
def cuad_questions(split: DomainSplit, seed: int = 0, path: str | None = None) -> tuple[DomainQuestion, ...]:
    """Every usable (contract, category) question of the split's contracts (at most ``PER_DOCUMENT`` per contract,
    a seeded draw), built."""
    split = check_split(split)
    contracts, descriptions = load_cuad(path)
    part = [c for c in contracts if split_of(f"cuad/{c.name}") == split]
    pool = ChunkPool(((c.name, t) for c in part for t in c.chunks), tokens=bm25_tokens)
    # per pool chunk: (contract, start, end) in its contract's flat text, to test overlap with that contract's spans
    where: dict[str, tuple[Contract, int, int]] = {}
    for c in part:
        for t, start in zip(c.chunks, c.flat_starts):
            where.setdefault(t, (c, start, start + len(" ".join(t.split()))))
    items: list[tuple[Contract, str, str, tuple[str, ...]]] = []
    for c in part:
        for category in sorted(c.spans):
            found = gold_chunk(c, category)
            if found is not None:
                items.append((c, category, *found))
    items = cap_per_document(items, lambda x: x[0].name, seed=seed, label="cuad")
    out: list[DomainQuestion] = []
    for contract, category, gold_text, answers in items:

        def overlaps(j: int, category: str = category) -> bool:
            owner, start, end = where[pool.texts[j]]
            return any(a < end and start < b for _, a, b in owner.spans.get(category, ()))

        def own(j: int, contract: Contract = contract) -> bool:
            return pool.documents[j] == contract.name

        qid = f"{contract.name.removesuffix('.txt')}/{category}"
        question = cuad_question(category, descriptions[category])
        distractors, scores, gold_score = pool.hardest(qid, question, answers, gold_text, exclude=overlaps,
                                                       first=own)
        out.append(DomainQuestion(id=qid, document=contract.name, question=question, answers=answers, gold=gold_text,
                                  distractors=tuple(distractors), scores=(gold_score, *scores)))
    return tuple(out)
