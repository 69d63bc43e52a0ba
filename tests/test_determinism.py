"""Output does not depend on the process: the same input gives the same bytes under any PYTHONHASHSEED."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

_SCRIPT = r"""
import json
from ragtrim import trim
docs = ["metres fair built", "metres tower lattice", "built lattice paris eiffel eiffel gustave",
        "metres paris gustave fair gustave built", "fair tower built fair gustave lattice",
        "The Eiffel Tower in Paris is 330 metres tall and was built for the 1889 fair.",
        "The Eiffel Tower in Paris is 330 metres tall and was built for the 1889 world fair.",
        "<p>Gustave Eiffel's company built the tower. It is made of wrought iron.</p>"]
out = []
for budget in (None, 8, 20, 40):
    r = trim(docs, query="gustave paris fair", budget=budget, scorer="bm25")
    out.append([[c.id, c.text, repr(c.score), c.token_count] for c in r.chunks])
    out.append([[x.chunk_id, x.stage, x.reason, x.tokens_removed, x.detail, x.kept_id] for x in r.removals])
print(json.dumps(out, sort_keys=True))
"""


def _run(seed: str) -> bytes:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    return subprocess.run([sys.executable, "-c", _SCRIPT], env=env, check=True, capture_output=True).stdout


def test_output_bytes_do_not_depend_on_hash_seed() -> None:
    # BM25 summed over a set of query terms: the set's order, and so the last digit of the scores, moved with the
    # hash seed. Four seeds make a collision of orders by chance unlikely.
    outputs = {seed: _run(seed) for seed in ("0", "1", "2", "3")}
    assert len(set(outputs.values())) == 1, outputs
    assert b"gustave" in outputs["0"]


# -- a request's text never depends on what was trimmed before -------------------------------------------------
# The fake embedder's vectors move with the other texts of a model call (``batch_dependent``), as int8 MiniLM's did
# with activations quantized per call. Requests share passages, so under the old per-call batching a passage's
# cached vector depended on the request that first embedded it, and a request's text on what ran before it.

_WORDS = ["tower", "river", "bridge", "paris", "museum", "engine", "castle", "harbor", "winter", "summer", "garden",
          "forest", "valley", "island", "station", "market", "temple", "canal", "library", "theater"]


def history_requests(n: int = 64, pool_size: int = 40, per_request: int = 12) -> list[tuple[str, list[str]]]:
    import random

    rng = random.Random(25)
    pool = [" ".join(rng.choice(_WORDS) for _ in range(rng.randint(12, 30))) + f". Passage {i} ends here."
            for i in range(pool_size)]
    return [(" ".join(rng.sample(_WORDS, 3)), rng.sample(pool, per_request)) for _ in range(n)]


def history_pipeline(embedder: object, budget: int = 60) -> object:
    from ragtrim.api import default_stages
    from ragtrim.pipeline import Pipeline
    from ragtrim.stages.relevance import RelevanceFilter

    stages = [RelevanceFilter(scorer=embedder, top_k=None) if isinstance(s, RelevanceFilter) else s  # type: ignore[arg-type]
              for s in default_stages(budget=budget, scorer="bm25")]
    return Pipeline(stages, tokenizer="whitespace")


def history_texts(order: list[int], *, threads: int = 1, embedder: object = None) -> dict[int, str]:
    """The text of each request in ``order``, through one pipeline and one embedder (shared caches)."""
    from concurrent.futures import ThreadPoolExecutor

    from ragtrim.testing import FakeEmbedder

    requests = history_requests()
    embedder = embedder if embedder is not None else FakeEmbedder(batch_dependent=True, vector_store=None)
    pipeline = history_pipeline(embedder)

    def one(i: int) -> str:
        query, passages = requests[i]
        return str(pipeline.run(passages, query=query).text)  # type: ignore[attr-defined]

    if threads == 1:
        return {i: one(i) for i in order}
    with ThreadPoolExecutor(threads) as pool:
        return dict(zip(order, pool.map(one, order)))


def alone_texts() -> dict[int, str]:
    from ragtrim.testing import FakeEmbedder

    requests = history_requests()
    out = {}
    for i, (query, passages) in enumerate(requests):
        pipeline = history_pipeline(FakeEmbedder(batch_dependent=True, vector_store=None))
        out[i] = str(pipeline.run(passages, query=query).text)  # type: ignore[attr-defined]
    return out


class TestCallHistory:
    def test_requests_share_passages(self) -> None:
        seen: dict[str, int] = {}
        for _, passages in history_requests():
            for p in passages:
                seen[p] = seen.get(p, 0) + 1
        assert min(seen.values()) > 1  # every passage reaches the trimmer in several requests

    def test_after_other_requests_in_any_order(self) -> None:
        import random

        alone = alone_texts()
        assert len(set(alone.values())) > 50  # the requests differ, and the budget cuts them
        assert history_texts(list(range(64))) == alone
        order = list(range(64))
        random.Random(1).shuffle(order)
        assert history_texts(order) == alone
        assert history_texts(order[::-1]) == alone

    def test_under_32_threads(self) -> None:
        alone = alone_texts()
        for _ in range(3):
            assert history_texts(list(range(64)), threads=32) == alone

    def test_under_four_hash_seeds(self) -> None:
        import json

        script = ("import json, random\nfrom tests.test_determinism import history_texts\n"
                  "order = list(range(64)); random.Random(7).shuffle(order)\n"
                  "print(json.dumps(history_texts(order), sort_keys=True))")
        alone = json.dumps(alone_texts(), sort_keys=True)
        for seed in ("0", "1", "2", "3"):
            env = {**os.environ, "PYTHONHASHSEED": seed}
            out = subprocess.run([sys.executable, "-c", script], env=env, check=True, capture_output=True,
                                 cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__)))).stdout
            assert json.loads(out) == json.loads(alone), seed


# -- the same property with the real MiniLM (the auto scorer on this host) ------------------------------------------
def example_requests(n: int = 64, per_request: int = 10) -> list[tuple[str, list[str]]]:
    """``n`` requests over the shipped example corpus: each example query with chunks drawn (seeded) from every
    request's chunks, so requests share chunks."""
    import json
    import random
    from importlib import resources

    lines = resources.files("ragtrim").joinpath("data/example_requests.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    pool = sorted({c["text"] for r in records for c in r["chunks"]})
    rng = random.Random(13)
    return [(records[i % len(records)]["query"], rng.sample(pool, per_request)) for i in range(n)]


def minilm_texts(order: list[int], *, threads: int = 1, fresh_per_request: bool = False,
                 store: str | None = None) -> dict[int, str]:
    from concurrent.futures import ThreadPoolExecutor

    from ragtrim.api import default_stages
    from ragtrim.pipeline import Pipeline
    from ragtrim.scoring.auto import balanced_scorer, choose
    from ragtrim.stages.relevance import RelevanceFilter
    from ragtrim.vectors.index import embedders_of

    def build() -> Pipeline:
        scorer = balanced_scorer(choose().backend, threads=choose().threads)
        for e in embedders_of(scorer):
            e.vector_store = store  # before first use: nothing is resolved yet
        stages = [RelevanceFilter(scorer=scorer, top_k=None) if isinstance(s, RelevanceFilter) else s
                  for s in default_stages(budget=80, scorer="bm25")]
        return Pipeline(stages, tokenizer="whitespace")

    requests = example_requests()
    shared = build()

    def one(i: int) -> str:
        query, passages = requests[i]
        return (build() if fresh_per_request else shared).run(passages, query=query).text

    if threads == 1:
        return {i: one(i) for i in order}
    with ThreadPoolExecutor(threads) as pool:
        return dict(zip(order, pool.map(one, order)))


@pytest.mark.model
class TestCallHistoryWithMiniLM:
    def test_alone_after_others_threads_and_store(self, tmp_path: Path) -> None:
        import random

        from ragtrim.scoring.auto import choose
        from ragtrim.vectors.store import flush_stores

        if choose().scorer == "bm25":
            pytest.skip(f"auto is {choose().scorer} here")
        order = list(range(64))
        alone = minilm_texts(order, fresh_per_request=True)
        assert len(set(alone.values())) > 40
        assert minilm_texts(order) == alone
        random.Random(3).shuffle(order)
        assert minilm_texts(order) == alone
        assert minilm_texts(order, threads=32) == alone
        store = str(tmp_path / "v.sqlite3")
        assert minilm_texts(order[:32], store=store) == {i: alone[i] for i in order[:32]}
        flush_stores(60)
        assert minilm_texts(order, store=store) == alone  # half the passages from the store, half from the model

    def test_under_four_hash_seeds(self) -> None:
        import json

        from ragtrim.scoring.auto import choose

        if choose().scorer == "bm25":
            pytest.skip(f"auto is {choose().scorer} here")
        script = ("import json, random\nfrom tests.test_determinism import minilm_texts\n"
                  "order = list(range(64)); random.Random(5).shuffle(order)\n"
                  "print(json.dumps(minilm_texts(order), sort_keys=True))")
        outputs = set()
        for seed in ("0", "1", "2", "3"):
            env = {**os.environ, "PYTHONHASHSEED": seed}
            outputs.add(subprocess.run([sys.executable, "-c", script], env=env, check=True, capture_output=True,
                                       cwd=Path(__file__).resolve().parents[1]).stdout)
        assert len(outputs) == 1
        assert json.loads(outputs.pop()) == {str(k): v for k, v in minilm_texts(list(range(64)),
                                                                                  fresh_per_request=True).items()}
