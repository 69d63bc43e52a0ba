"""What every framework adapter shares: the option checks and the pipeline built from them, chunk ids, scores,
per-item token accounting, the mapping of a result back to the framework's objects, and the JSON-ready trim report.

Framework-free, so each adapter imports only its own framework.
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from ragtrim.errors import ConfigError, InputError
from ragtrim.models import Chunk, Removal, TrimResult
from ragtrim.pipeline import Pipeline

METADATA_SCORE = "ragtrim_score"
"""Metadata key: the chunk's score after the pipeline (None when no stage scored it)."""
METADATA_TOKENS = "ragtrim_tokens"
"""Metadata key: tokens of the returned text, under the pipeline's counter."""
METADATA_TOKENS_REMOVED = "ragtrim_tokens_removed"
"""Metadata key: tokens removed from this item (HTML boilerplate, compression, truncation, or all of it if dropped)."""
METADATA_KEYS: tuple[str, ...] = (METADATA_SCORE, METADATA_TOKENS, METADATA_TOKENS_REMOVED)

T = TypeVar("T")


# -- options --------------------------------------------------------------------------------------------------------
def check_options(pipeline: Any, budget: Any, tokenizer: Any, scorer: Any) -> None:
    """The checks of ``trim()``'s options, as every adapter takes them: a ConfigError naming the bad one."""
    from ragtrim._util.validate import check_choice, check_int
    from ragtrim.scoring.registry import SCORER_NAMES, STAGE_SCORER_NAMES

    if pipeline is not None and not isinstance(pipeline, Pipeline):
        raise ConfigError(f"pipeline must be a ragtrim Pipeline or None, got {type(pipeline).__name__}")
    if pipeline is not None and (budget is not None or tokenizer is not None or scorer != "auto"):
        raise ConfigError("pass either pipeline= or budget=/tokenizer=/scorer=, not both; put the budget stage in "
                          "your pipeline")
    check_int("budget", budget, minimum=0, allow_none=True)  # 0 is valid, as in trim(): nothing fits
    check_choice("scorer", scorer, (*STAGE_SCORER_NAMES, *SCORER_NAMES))


def build_pipeline(pipeline: Pipeline | None, budget: int | None, tokenizer: Any, scorer: Any) -> Pipeline:
    """``pipeline`` itself, else ``ragtrim.default_pipeline(budget=, tokenizer=, scorer=)`` (what ``trim()`` runs)."""
    if pipeline is not None:
        return pipeline
    from ragtrim.api import default_pipeline

    return default_pipeline(budget=budget, tokenizer=tokenizer, scorer=scorer)


def options_config(pipeline: Pipeline | None, budget: int | None, tokenizer: Any, scorer: str) -> dict[str, Any]:
    """The options as JSON-ready data, for a framework's own serialisation (Haystack's ``to_dict``, LlamaIndex's
    ``to_dict``): a pipeline as ``Pipeline.to_dict()``, a token counter object as its config (a counter that is not
    a registered component is written as unserializable, and ``options_from_config`` refuses it)."""
    from ragtrim.text.tokens import TokenCounter, counter_config

    if isinstance(tokenizer, os.PathLike):
        tokenizer = f"hf:{os.fspath(tokenizer)}"
    elif isinstance(tokenizer, TokenCounter):
        tokenizer = counter_config(tokenizer)
    return {"pipeline": None if pipeline is None else pipeline.to_dict(), "budget": budget, "tokenizer": tokenizer,
            "scorer": scorer}


def options_from_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """``options_config`` output back as constructor keywords (other keys pass through unchanged). A config is data:
    a tokenizer file it names must lie under a directory of ``$RAGTRIM_TOKENIZER_DIRS`` (``Pipeline.from_dict``)."""
    from ragtrim.text.tokens import counter_from_config

    out = dict(config)
    if isinstance(out.get("pipeline"), Mapping):
        out["pipeline"] = Pipeline.from_dict(out["pipeline"])
    if out.get("tokenizer") is not None:
        out["tokenizer"] = counter_from_config(out["tokenizer"], allowed_dirs=())
    return out


# -- into chunks ----------------------------------------------------------------------------------------------------
def chunk_ids(ids: Sequence[object]) -> list[str]:
    """Chunk ids for items whose own ids are ``ids``: those ids when every one is a distinct non-empty str, else
    positions "0", "1"... All-or-nothing, so a position id can never collide with a real id."""
    if all(isinstance(i, str) and i for i in ids) and len(set(ids)) == len(ids):
        return [str(i) for i in ids]
    return [str(i) for i in range(len(ids))]


def as_score(value: object, where: str, source: str) -> float | None:
    """A framework score as a chunk score: None stays None, any real number (numpy's too) becomes a float; anything
    else is an InputError naming ``where`` (e.g. "node at index 3") and ``source`` (the attribute read)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InputError(f"{where}: {source} must be a number or None, got {value!r}")
    return float(value)


# -- back out -------------------------------------------------------------------------------------------------------
def original_tokens(result: TrimResult) -> dict[str, int]:
    """Token count of each chunk as it entered the pipeline: kept tokens plus every recorded removal."""
    totals = {c.id: c.token_count or 0 for c in result.chunks}
    for r in result.removals:
        totals[r.chunk_id] = totals.get(r.chunk_id, 0) + r.tokens_removed
    return totals


def kept_items(result: TrimResult, items: Sequence[T], ids: Sequence[str]) -> list[tuple[T, Chunk, dict[str, Any]]]:
    """Each kept chunk of ``result`` with the input item it came from (``ids[i]`` is item i's chunk id) and the
    metadata ragtrim adds to it (``METADATA_KEYS``), in the pipeline's output order."""
    by_id = dict(zip(ids, items))
    totals = original_tokens(result)
    out: list[tuple[T, Chunk, dict[str, Any]]] = []
    for chunk in result.chunks:
        if chunk.id not in by_id:  # the pipeline contract forbids new ids; guard against custom pipelines anyway
            raise InputError(f"pipeline returned chunk {chunk.id!r}, which matches no input item")
        tokens = chunk.token_count or 0
        added = {
            METADATA_SCORE: chunk.score,
            METADATA_TOKENS: tokens,
            METADATA_TOKENS_REMOVED: max(0, totals.get(chunk.id, tokens) - tokens),
        }
        out.append((by_id[chunk.id], chunk, added))
    return out


def dropped_items(result: TrimResult, items: Sequence[T], ids: Sequence[str]) -> list[tuple[T, Removal, int]]:
    """Each input item that left the context: the item, the removal that dropped it and all the tokens it had, in
    input order."""
    dropped = {r.chunk_id: r for r in result.removals if r.action == "dropped"}
    totals = original_tokens(result)
    return [(item, dropped[cid], totals.get(cid, 0)) for item, cid in zip(items, ids) if cid in dropped]


def trim_report(result: TrimResult, ids: Sequence[object], *, noun: str) -> dict[str, Any]:
    """The JSON-ready summary of one trim that every adapter reports (event, callback, output socket).

    ``ids`` are the input items' own ids (a framework's document or node ids, None where missing), in input order.
    Each removal carries ``<noun>_index`` (the position in the input list) and ``<noun>_id`` (that item's own id),
    and the counts are ``<noun>s_in`` / ``<noun>s_out``.
    """
    index_of = {cid: i for i, cid in enumerate(chunk_ids(ids))}
    removals = []
    for r in result.removals:
        i = index_of.get(r.chunk_id)
        removals.append({**r.to_dict(), f"{noun}_index": i, f"{noun}_id": None if i is None else ids[i]})
    return {
        "query": result.context.query,
        "tokenizer": result.tokenizer,
        f"{noun}s_in": len(ids),
        f"{noun}s_out": len(result.chunks),
        "tokens_before": result.tokens_before,
        "tokens_after": result.tokens_after,
        "tokens_saved": result.tokens_saved,
        "removals": removals,
        "stages": [
            {k: v for k, v in report.to_dict().items() if k not in ("removals", "info")} for report in result.trace
        ],
    }
