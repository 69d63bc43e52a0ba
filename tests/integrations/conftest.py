"""What the framework adapters' tests share: a five-passage corpus whose token counts (whitespace words) can be worked
out by hand, a hand-checkable pipeline, and stages that probe threads or fail."""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
from pathlib import Path
from types import ModuleType

import pytest

from ragtrim.models import StageOutput, TrimContext
from ragtrim.pipeline import Pipeline
from ragtrim.stages.base import Stage
from ragtrim.stages.budget import TokenBudget
from ragtrim.stages.dedup import DuplicateFilter
from ragtrim.text.tokens import TokenCounter

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

# Haystack sends usage telemetry on pipeline runs unless told not to; tests send nothing anywhere.
os.environ["HAYSTACK_TELEMETRY_ENABLED"] = "False"

CORPUS = [
    ("lifecycle rules run once every 24 hours", {"source": "lifecycle", "page": 1}),  # 7 words
    ("lifecycle rules run once every 24 hours", {"source": "lifecycle-mirror", "page": 1}),  # 7, a copy
    ("archive objects have a minimum storage duration of 180 days", {"source": "lifecycle", "page": 2}),  # 10
    ("queue messages are retried six times before the dead letter queue", {"source": "queues", "page": 1}),  # 11
    ("access keys rotate every 90 days and old keys expire after seven days", {"source": "keys", "page": 1}),  # 13
]
SCORES = [0.9, 0.8, 0.7, 0.6, 0.5]
"""Retriever scores for CORPUS, best first (for frameworks whose retrievers score what they return)."""


class ThreadProbe(Stage):
    """Records the thread each run happens on; changes nothing."""

    name = "thread_probe"

    def __init__(self) -> None:
        self.threads: list[int] = []

    def run(self, context: TrimContext, *, counter: TokenCounter) -> StageOutput:
        self.threads.append(threading.get_ident())
        return StageOutput(context)


class Exploding(Stage):
    name = "exploding"

    def run(self, context: TrimContext, *, counter: TokenCounter) -> StageOutput:
        raise ZeroDivisionError("bad stage")


def dedup_budget(max_tokens: int) -> Pipeline:
    """Hand-checkable: exact duplicates out, then whole documents in input order up to max_tokens words."""
    return Pipeline(
        [DuplicateFilter(near=False), TokenBudget(max_tokens=max_tokens, policy="position", truncate=False)],
        tokenizer="whitespace",
    )


def truncating_budget(max_tokens: int) -> Pipeline:
    """A budget that shortens a document at a sentence boundary instead of dropping it."""
    return Pipeline([TokenBudget(max_tokens=max_tokens, truncate=True, min_truncated_tokens=1)], tokenizer="whitespace")


def load_example(name: str) -> ModuleType:
    """examples/<name>.py as a module (skipped when the example corpus is absent), for a test to call its main()."""
    path = EXAMPLES / f"{name}.py"
    if not (EXAMPLES / "corpus" / "questions.jsonl").is_file():
        pytest.skip("example corpus not built")
    spec = importlib.util.spec_from_file_location(f"{name}_example", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # pydantic resolves a model's annotations through sys.modules
    spec.loader.exec_module(module)
    return module
