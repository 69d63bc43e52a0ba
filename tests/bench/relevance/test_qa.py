import argparse
import math
from pathlib import Path

import pytest

from ragtrim.errors import ConfigError
from ragtrim.models import Chunk
from ragtrim.text.tokens import WhitespaceCounter
from ragtrim_bench.datasets.nq import Passage, QAInstance
from ragtrim_bench.relevance.qa import (
    Method,
    QABenchConfig,
    Tools,
    add_bench_args,
    aggregate,
    budget_for,
    build_methods,
    config_from_args,
    family_stages,
    fraction_label,
    instance_chunks,
    measure,
    reset_caches,
    run_label,
    top_k_for,
    write_results,
)
from ragtrim_bench.relevance.qa_report import qa_report_text

WS = WhitespaceCounter()
INST = QAInstance(
    id="q1",
    question="who founded rome",
    answers=("Romulus",),
    passages=(
        Passage(id="d0", title="", text="Carthage was founded by Dido. It was a city."),
        Passage(id="g", title="", text="Rome was founded by Romulus. Remus was his brother.", is_gold=True),
        Passage(id="d1", title="", text="Paris is the capital of France. It is large."),
        Passage(id="d2", title="", text="Everest is the tallest mountain on Earth."),
    ),
)
IMPOSSIBLE = QAInstance(id="q2", question="who unfounded rome", answers=(), passages=INST.passages,
                        is_impossible=True, plausible_answers=("Remus",))


def keep_first(inst: QAInstance, chunks: tuple[Chunk, ...], budget: int) -> tuple[Chunk, ...]:
    return chunks[:1]


class TestHelpers:
    def test_budget_for(self) -> None:
        assert budget_for(100, 0.25) == 25
        assert budget_for(3, 0.25) == 1
        assert budget_for(100, None) == 100

    def test_top_k_for(self) -> None:
        assert [top_k_for(20, f) for f in (1 / 2, 1 / 4, 1 / 8, 1 / 16)] == [10, 5, 2, 1]

    def test_fraction_label(self) -> None:
        assert [fraction_label(f) for f in (None, 0.5, 1 / 16, 0.3)] == ["full", "1/2", "1/16", "0.3"]


class TestConfig:
    def test_defaults(self) -> None:
        c = QABenchConfig()
        assert c.dataset == "nq" and c.n_docs == 20 and c.positions == ("first", "middle", "last")
        assert c.fractions == (0.5, 0.25, 0.125, 0.0625)

    @pytest.mark.parametrize("kw, name", [({"dataset": "hotpot"}, "dataset"), ({"n_docs": 1}, "n_docs"),
                                          ({"positions": ("centre",)}, "positions"), ({"limit": 0}, "limit"),
                                          ({"methods": ("magic",)}, "methods"), ({"fractions": (2.0,)}, "fractions"),
                                          ({"latency_sample": -1}, "latency_sample"), ({"offset": -1}, "offset"),
                                          ({"dataset": "squad", "offset": 5}, "offset"),
                                          ({"torch_threads": 0}, "torch_threads")])
    def test_invalid(self, kw: dict[str, object], name: str) -> None:
        with pytest.raises(ConfigError, match=name):
            QABenchConfig(**kw)  # type: ignore[arg-type]

    def test_from_args(self) -> None:
        p = argparse.ArgumentParser()
        add_bench_args(p)
        c = config_from_args(p.parse_args(["--dataset", "squad", "--fractions", "1/4,0.5", "--methods", "none"]))
        assert c.dataset == "squad" and c.fractions == (0.25, 0.5) and c.methods == ("none",)
        with pytest.raises(ConfigError, match="fraction"):
            config_from_args(p.parse_args(["--fractions", "x"]))
        c = config_from_args(p.parse_args(["--offset", "1062", "--limit", "1062", "--torch-threads", "0"]))
        assert c.offset == 1062 and c.torch_threads is None

    def test_run_label(self) -> None:
        assert run_label(QABenchConfig()) == "nq"
        assert run_label(QABenchConfig(n_docs=30)) == "nq-30docs"
        assert run_label(QABenchConfig(offset=1062, limit=1062)) == "nq-q1062-2123"
        assert run_label(QABenchConfig(dataset="squad", n_docs=30)) == "squad"


class TestFamilies:
    def test_default_is_default_stages(self) -> None:
        from ragtrim.api import default_stages

        assert [s.to_dict() for s in family_stages("ragtrim-default", 50)] == \
            [s.to_dict() for s in default_stages(budget=50)]
        bm25 = [s.to_dict() for s in family_stages("ragtrim-bm25", 50)]
        assert bm25 == [s.to_dict() for s in default_stages(budget=50, scorer="bm25")]
        sent = {s["type"]: s for s in (st.to_dict() for st in family_stages("ragtrim-emb-sent", 50))}
        assert sent["relevance"]["scorer"] == "embedding" and sent["compress"]["scorer"] == "embedding"
        assert sent["compress"]["max_tokens"] == 50
        with pytest.raises(ConfigError, match="family"):
            family_stages("magic", 50)

    def test_reset_caches_without_embedder(self) -> None:
        from ragtrim.scoring.bm25 import tokenize

        tokenize("rome founded")
        reset_caches(None)


class TestMeasure:
    def test_record(self) -> None:
        chunks = instance_chunks(INST, WS)
        rec = measure("s", Method("first", "first", 0.25, keep_first), INST, chunks, WS, gemma=WS)
        assert rec.tokens_before == 34 and rec.budget_tokens == 8
        assert rec.tokens_after == 9 and rec.gemma_tokens_after == 9
        assert rec.answer_kept is False and rec.gold_kept is False and rec.error is None

    def test_error_is_recorded(self) -> None:
        def boom(inst: QAInstance, chunks: tuple[Chunk, ...], budget: int) -> tuple[Chunk, ...]:
            raise RuntimeError("bad")

        rec = measure("s", Method("boom", "boom", None, boom), INST, instance_chunks(INST, WS), WS)
        assert rec.error == "RuntimeError: bad"

    def test_unanswerable(self) -> None:
        m = Method("all", "none", None, lambda i, c, b: c)
        rec = measure("s", m, IMPOSSIBLE, instance_chunks(IMPOSSIBLE, WS), WS)
        assert rec.answer_kept is None and rec.plausible_kept is True


class TestBuiltInMethods:
    def test_bm25_budget_keeps_gold_within_budget(self) -> None:
        cfg = QABenchConfig(methods=("none", "bm25-topk", "bm25-budget", "ragtrim-bm25"), fractions=(0.5,))
        methods = build_methods(cfg, Tools(counter=WS, embedder=None))
        assert [m.name for m in methods] == ["none", "bm25-topk@1/2", "bm25-budget@1/2", "ragtrim-bm25@1/2"]
        chunks = instance_chunks(INST, WS)
        for m in methods:
            rec = measure("s", m, INST, chunks, WS)
            assert rec.error is None, rec.error
            assert rec.answer_kept and rec.gold_kept, m.name
            if m.family in ("bm25-budget", "ragtrim-bm25"):
                assert rec.tokens_after <= rec.budget_tokens


class TestAggregateAndReport:
    def test_rows(self, tmp_path: Path) -> None:
        none = Method("none", "none", None, lambda i, c, b: c)
        first = Method("first@1/4", "first", 0.25, keep_first)
        recs = [measure("s", m, inst, instance_chunks(inst, WS), WS)
                for inst in (INST, IMPOSSIBLE) for m in (none, first)]
        rows = aggregate(recs, [none, first])
        by = {r["method"]: r for r in rows}
        assert by["none"]["answer_recall"] == 1.0 and by["none"]["compression_ratio_cl100k"] == 1.0
        assert by["none"]["unanswerable_plausible_kept_rate"] == 1.0
        assert by["first@1/4"]["answer_recall"] == 0.0
        assert by["first@1/4"]["compression_ratio_cl100k"] == pytest.approx(68 / 18)
        assert by["first@1/4"]["n_unanswerable"] == 1 and by["first@1/4"]["budget_label"] == "1/4"
        assert not math.isnan(by["none"]["p50_trim_ms"])
        result = {"dataset": "tiny", "rows": rows, "latency": [], "notes": ["n"], "wall_s": 1.0}
        text = qa_report_text(result)
        assert "== s (2 requests) ==" in text and "plausible kept" in text
        pytest.importorskip("matplotlib")
        json_path, png = write_results(result, tmp_path)
        assert json_path.name == "qa_savings_tiny.json" and png is not None and png.stat().st_size > 0
