"""What the three framework adapters share (``ragtrim.integrations._common``): the option checks, the extras, the
framework-free helpers; each adapter is checked on its real framework, skipped where that is not installed."""

from __future__ import annotations

import importlib
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

from ragtrim.errors import ConfigError, InputError
from ragtrim.integrations._common import (
    as_score,
    chunk_ids,
    dropped_items,
    kept_items,
    options_config,
    options_from_config,
    trim_report,
)
from ragtrim.pipeline import Pipeline
from ragtrim.text.tokens import WhitespaceCounter
from tests.integrations.conftest import CORPUS, dedup_budget

# adapter -> (framework import name, PyPI package, extra, the class that takes trim()'s options)
ADAPTERS = {
    "langchain": ("langchain_core", "langchain-core", "langchain", "RagtrimCompressor"),
    "llamaindex": ("llama_index", "llama-index-core", "llamaindex", "RagtrimPostprocessor"),
    "haystack": ("haystack", "haystack-ai", "haystack", "RagtrimTrimmer"),
}


def adapter_class(adapter: str) -> Any:
    framework, _, _, name = ADAPTERS[adapter]
    pytest.importorskip(framework)
    return getattr(importlib.import_module(f"ragtrim.integrations.{adapter}"), name)


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
class TestOptions:
    """Every adapter takes trim()'s options, checked the same way before the framework sees them."""

    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            ({"budget": -1}, "budget must be >= 0, got -1"),
            ({"budget": 2.5}, "budget must be an int"),
            ({"pipeline": "default"}, "pipeline must be a ragtrim Pipeline"),
            ({"pipeline": Pipeline([]), "budget": 10}, "pass either pipeline= or budget="),
            ({"pipeline": Pipeline([]), "scorer": "bm25"}, "pass either pipeline= or budget="),
            ({"scorer": "nope"}, "scorer"),
            ({"tokenizer": 12}, "tokenizer must be a name, a path or a TokenCounter, got int"),
        ],
    )
    def test_invalid(self, adapter: str, kwargs: dict[str, Any], message: str) -> None:
        with pytest.raises(ConfigError, match=message):
            adapter_class(adapter)(**kwargs)

    def test_defaults_are_trims(self, adapter: str) -> None:
        made = adapter_class(adapter)()
        assert (made.pipeline, made.budget, made.tokenizer, made.scorer) == (None, None, None, "auto")
        assert [s.name for s in made.trim_pipeline.stages] == ["html", "dedup", "relevance", "order"]
        budgeted = adapter_class(adapter)(budget=50, tokenizer="whitespace", scorer="bm25")
        assert [s.name for s in budgeted.trim_pipeline.stages] == ["html", "dedup", "relevance", "compress", "budget",
                                                                   "order"]
        assert budgeted.trim_pipeline.counter.name == "whitespace"

    def test_missing_framework_names_the_extra(self, adapter: str) -> None:
        framework, package, extra, _ = ADAPTERS[adapter]
        code = (
            f"import sys; sys.modules[{framework!r}] = None\n"
            "from ragtrim.errors import MissingDependencyError\n"
            f"try:\n    import ragtrim.integrations.{adapter}\n"
            "except MissingDependencyError as e:\n    print(e)\n"
        )
        out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
        assert package in out and f"ragtrim[{extra}]" in out


def test_import_ragtrim_imports_no_framework() -> None:
    frameworks = sorted(framework for framework, *_ in ADAPTERS.values())
    code = f"import sys, ragtrim; print([m for m in {frameworks!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "[]"


class TestHelpers:
    def test_chunk_ids_are_all_or_nothing(self) -> None:
        assert chunk_ids(["a", "b"]) == ["a", "b"]
        assert chunk_ids(["a", "a"]) == ["0", "1"]
        assert chunk_ids(["a", None]) == ["0", "1"]
        assert chunk_ids(["a", ""]) == ["0", "1"]
        assert chunk_ids([]) == []

    def test_as_score(self) -> None:
        assert as_score(None, "x", "score") is None
        assert as_score(1, "x", "score") == 1.0
        value = as_score(np.float32(0.25), "x", "score")
        assert value == 0.25 and type(value) is float
        for bad in (True, "0.5", [0.5]):
            with pytest.raises(InputError, match="node at index 2: score must be a number or None"):
                as_score(bad, "node at index 2", "score")

    def test_kept_and_dropped_items(self) -> None:
        items = [f"item-{i}" for i in range(len(CORPUS))]
        ids = ["a", "b", "c", "d", "e"]
        result = dedup_budget(20).run([{"text": t, "id": i} for (t, _), i in zip(CORPUS, ids)])
        assert [(item, chunk.id, added) for item, chunk, added in kept_items(result, items, ids)] == [
            ("item-0", "a", {"ragtrim_score": None, "ragtrim_tokens": 7, "ragtrim_tokens_removed": 0}),
            ("item-2", "c", {"ragtrim_score": None, "ragtrim_tokens": 10, "ragtrim_tokens_removed": 0}),
        ]
        assert [(item, r.reason, tokens) for item, r, tokens in dropped_items(result, items, ids)] == [
            ("item-1", "exact_duplicate", 7), ("item-3", "over_budget", 11), ("item-4", "over_budget", 13)]
        with pytest.raises(InputError, match="pipeline returned chunk 'a', which matches no input item"):
            kept_items(result, items[1:], ids[1:])

    def test_trim_report_names_items_by_their_own_ids(self) -> None:
        result = dedup_budget(9).run([t for t, _ in CORPUS[:3]])  # chunk ids "0", "1", "2"
        report = trim_report(result, [None, None, None], noun="node")
        assert (report["nodes_in"], report["nodes_out"], report["tokens_saved"]) == (3, 1, 17)
        assert [(r["node_index"], r["node_id"], r["reason"]) for r in report["removals"]] == [
            (1, None, "exact_duplicate"), (2, None, "over_budget")]

    def test_options_round_trip(self) -> None:
        config = options_config(dedup_budget(9), None, None, "auto")
        assert config == {"pipeline": dedup_budget(9).to_dict(), "budget": None, "tokenizer": None, "scorer": "auto"}
        back = options_from_config(config)
        assert back["pipeline"].to_dict() == dedup_budget(9).to_dict()
        assert options_config(None, 5, WhitespaceCounter(), "bm25")["tokenizer"] == "whitespace"
        assert options_from_config({"tokenizer": "whitespace", "extra": 1})["extra"] == 1
        with pytest.raises(ConfigError, match="RAGTRIM_TOKENIZER_DIRS"):
            options_from_config({"tokenizer": "hf:/etc/hostname"})
