"""Second-stage reranking with the reader itself: how likely is the question, given the passage?

``QueryLikelihoodScorer`` scores a passage by the mean log-probability a causal language model assigns to the query
when it follows the passage and a "write a question" instruction (unsupervised passage reranking, as in UPR, Sachan
et al. 2022). It needs no reranker model: the reader that will answer (any transformers causal LM directory) does
the scoring. ``RerankScorer`` runs a cheap first scorer over all texts and adds a weighted second score to its few
best, so the language model reads ``top_k`` passages per query, not all of them.

Both implement the ``Scorer`` protocol, so ``RelevanceFilter(scorer=RerankScorer(...))`` uses them unchanged.
The transformers model needs the ``embeddings`` extra (``torch``, ``transformers``); it loads from a local directory
only (no model hub).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import field
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ragtrim._util.lru import SizedLRU
from ragtrim._util.validate import Constraints, Interval, Options, Satisfies, Text
from ragtrim.components import Component, Plugin, component, register
from ragtrim.errors import ConfigError, MissingDependencyError
from ragtrim.scoring.base import Scorer, best_first, check_score_inputs, warm_up_scorers
from ragtrim.scoring.registry import get_scorer, scorer_param

DEFAULT_QUESTION_TEMPLATE = "Passage: {text}\nPlease write a question based on this passage.\nQuestion:"
"""The prefix the query is scored after; ``{text}`` is the passage (cut to ``max_text_tokens``)."""


def as_question(query: str) -> str:
    """The query as the model would write a question: stripped, first letter upper-case, ending in "?"."""
    q = " ".join(query.split()).rstrip("?").rstrip()
    return (q[:1].upper() + q[1:] + "?") if q else q


@lru_cache(maxsize=2)
def _load_causal_lm(path: str, device: str, dtype: str) -> tuple[Any, Any]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:
        raise MissingDependencyError("transformers", "torch", "query-likelihood reranking") from exc
    if not (Path(path) / "config.json").is_file():
        raise ConfigError(f"model must be a local transformers model directory with a config.json, got {path!r}")
    try:
        tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
        model: Any = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype), local_files_only=True)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"causal language model {path!r} could not be loaded offline ({exc})") from exc
    return tok, model.to(device).eval()


@register("scorer", "query_likelihood")
@component
class QueryLikelihoodScorer(Component):
    """Mean log-probability per query token of the query given each text, under a local causal LM.

    Parameters:
        model: a local transformers causal-LM directory (e.g. the reader, written by ``ragtrim-bench models
            gemma``).
        template: the prefix before the query; must contain ``{text}``.
        batch_size: passages per forward pass.
        max_text_tokens: each passage is cut to this many model tokens before scoring (bounds the cost).
        device, dtype: torch device and dtype name (``"float32"`` on CPU; ``"bfloat16"`` on a GPU).
        cache_size: (query, text) scores kept in an LRU (``ragtrim._util.lru.SizedLRU``, also bounded in bytes), so
            repeated pipeline runs (budget searches) cost nothing.

    Scores are <= 0 and comparable within one call (one query); higher means the passage makes the question likelier.
    """

    _parameter_constraints: ClassVar[dict[str, Constraints]] = {
        "model": [Satisfies(lambda v: isinstance(v, (str, Path)) and bool(str(v)), "a local causal-LM directory",
                            invalid="")],
        "template": [Satisfies(lambda v: isinstance(v, str) and "{text}" in v, "a string containing '{text}'",
                               invalid="no placeholder")],
        "batch_size": [Interval(int, 1, None)],
        "max_text_tokens": [Interval(int, 1, None)],
        "device": [Text("a torch device string such as 'cpu'")],
        "dtype": [Options(("float32", "bfloat16", "float16"))],
        "cache_size": [Interval(int, 0, None)],
    }

    model: str | Path = field(kw_only=False)
    template: str = DEFAULT_QUESTION_TEMPLATE
    batch_size: int = 8
    max_text_tokens: int = 384
    device: str = "cpu"
    dtype: str = "float32"
    cache_size: int = 4096
    _cache: SizedLRU[tuple[str, str], float] = field(init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.model = str(self.model)
        self._cache = SizedLRU(max_entries=self.cache_size)

    @property
    def name(self) -> str:
        return f"query-likelihood:{Path(self.model).name}"

    def warm_up(self) -> None:
        _load_causal_lm(str(self.model), self.device, self.dtype)

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        check_score_inputs(query, texts)
        if not texts:
            return []
        question = as_question(query)
        if not question:
            return [0.0] * len(texts)
        cached: dict[str, float] = {}
        for t in texts:
            hit = self._cache.get((question, t))
            if hit is not None:
                cached[t] = hit
        todo = list(dict.fromkeys(t for t in texts if t not in cached))
        if todo:
            fresh = self._score_uncached(question, todo)
            cached.update(fresh)
            for t, v in fresh.items():
                self._cache.put((question, t), v)
        return [cached[t] for t in texts]

    def _score_uncached(self, question: str, texts: list[str]) -> dict[str, float]:
        import torch

        tok, model = _load_causal_lm(str(self.model), self.device, self.dtype)
        q_ids = tok(" " + question, add_special_tokens=False)["input_ids"]
        pad = tok.pad_token_id if tok.pad_token_id is not None else (tok.eos_token_id or 0)
        out: dict[str, float] = {}
        for start in range(0, len(texts), self.batch_size):
            batch = texts[start:start + self.batch_size]
            seqs = []
            for t in batch:
                body = tok(t, add_special_tokens=False)["input_ids"][: self.max_text_tokens]
                prefix = tok(self.template.format(text=tok.decode(body)), add_special_tokens=True)["input_ids"]
                seqs.append(prefix + q_ids)
            width = max(map(len, seqs))
            ids = torch.full((len(seqs), width), pad, dtype=torch.long)
            mask = torch.zeros((len(seqs), width), dtype=torch.long)
            for j, s in enumerate(seqs):  # left padding: the query is the last len(q_ids) positions of every row
                ids[j, width - len(s):] = torch.tensor(s)
                mask[j, width - len(s):] = 1
            with torch.no_grad():  # only the query's positions go through the (large-vocabulary) output layer
                positions = (mask.cumsum(dim=1) - 1).clamp(min=0)  # each row counts from its first real token
                logits = model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device),
                               position_ids=positions.to(self.device), logits_to_keep=len(q_ids) + 1).logits.float()
            logp = torch.log_softmax(logits[:, :-1], dim=-1)
            target = torch.tensor(q_ids, device=logp.device).expand(len(seqs), -1).unsqueeze(-1)
            mean_lp = logp.gather(-1, target).squeeze(-1).mean(dim=1)
            out.update(zip(batch, (float(x) for x in mean_lp.cpu())))
        return out


@register("scorer", "rerank")
@component
class RerankScorer(Component):
    """Rescore the ``top_k`` best texts of ``first`` as ``first + weight * second``; the rest keep ``first``'s score.

    The reranked texts stay ahead of all others (their scores are shifted up when needed), so reranking only
    reorders the head, and ``second`` (usually expensive) sees ``top_k`` texts per call. With adaptive relevance
    modes note that the shift changes the score gaps at the head's boundary.
    """

    _parameter_constraints: ClassVar[dict[str, Constraints]] = {
        "first": [scorer_param()],
        "second": [Plugin("scorer", Scorer, describe="an object with name and score(query, texts)",
                          rule="implement score(query, texts) and name")],
        "top_k": [Interval(int, 1, None)],
        "weight": [Interval(float, 0.0, None)],
    }

    first: Scorer | str = field(kw_only=False)
    second: Scorer = field(kw_only=False)
    top_k: int = 2
    weight: float = 0.2
    _first: Scorer | None = field(default=None, init=False)

    @property
    def name(self) -> str:
        return f"rerank({self._first_scorer().name}->{self.second.name}@{self.top_k})"

    def _first_scorer(self) -> Scorer:
        if self._first is None:
            self._first = get_scorer(self.first)
        return self._first

    def warm_up(self) -> None:
        warm_up_scorers((self._first_scorer(), self.second))

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        check_score_inputs(query, texts)
        if not texts:
            return []
        base = np.asarray(self._first_scorer().score(query, texts), dtype=np.float64)
        head = best_first(base.tolist())[: self.top_k]
        second = np.asarray(self.second.score(query, [texts[i] for i in head]), dtype=np.float64)
        combined = base[head] + self.weight * second
        rest = np.delete(base, head)
        if rest.size and combined.min() <= rest.max():
            combined = combined + (rest.max() - combined.min()) + 1e-6
        out = base.copy()
        out[head] = combined
        return [float(x) for x in out]
