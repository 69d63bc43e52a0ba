"""The one plugin scheme: every registered stage, scorer, token counter and summarizer is checked here, walking the
registry, with the same cases: its declared constraints match its parameters, it builds, it refuses an invalid value
of each parameter with a ConfigError naming the parameter, and it round-trips through to_dict/from_dict."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, ClassVar, get_args

import pytest

from ragtrim import components
from ragtrim._util.validate import Constraints, Interval
from ragtrim.api import ScorerChoice, default_pipeline
from ragtrim.components import Component, component, from_config, register, registered
from ragtrim.errors import ConfigError
from ragtrim.history.summarizers import OpenAICompatibleSummarizer, RuleBasedSummarizer
from ragtrim.pipeline import Pipeline
from ragtrim.scoring.bm25 import BM25Scorer
from ragtrim.scoring.cascade import CascadeScorer
from ragtrim.scoring.embedding import EmbeddingScorer
from ragtrim.scoring.hybrid import HybridScorer
from ragtrim.scoring.registry import SCORER_NAMES, STAGE_SCORER_NAMES, ScorerName
from ragtrim.stages.compress import SentenceCompressor
from ragtrim.stages.history import HistoryCompressor
from ragtrim.stages.relevance import RelevanceFilter
from ragtrim.testing import FixedScorer

FIXTURES = Path(__file__).parent / "fixtures" / "pipeline_configs"
DOCS = Path(__file__).resolve().parents[1] / "docs"

REQUIRED: dict[tuple[str, str], dict[str, Any]] = {
    ("stage", "budget"): {"max_tokens": 100},
    ("scorer", "fixed"): {"scores": {"a": 1.0}},
    ("scorer", "query_likelihood"): {"model": "models/reader"},
    ("scorer", "rerank"): {"first": "bm25", "second": BM25Scorer()},
    ("counter", "hf"): {"tokenizer": "models/reader/tokenizer.json"},
    ("summarizer", "scripted"): {"script": {"1": [("fact", "It rained.")]}},
    ("summarizer", "openai_compatible"): {"base_url": "http://localhost:8000/v1", "model": "m"},
}
"""Values for the parameters without a default (nothing is loaded at construction, so paths need not exist)."""

EVERY = [(kind, name) for kind in components.KINDS for name in sorted(registered(kind))]


def build(kind: str, name: str, **overrides: Any) -> Component:
    return registered(kind)[name](**{**REQUIRED.get((kind, name), {}), **overrides})  # type: ignore[arg-type]


def no_unwritten(config: Any) -> bool:
    text = json.dumps(config)
    return components.UNSERIALIZABLE not in text and components.REDACTED not in text


@pytest.mark.parametrize(("kind", "name"), EVERY, ids=[f"{k}:{n}" for k, n in EVERY])
class TestEveryRegisteredComponent:
    def test_constraints_declare_exactly_the_parameters(self, kind: str, name: str) -> None:
        cls = registered(kind)[name]
        params = [f.name for f in dataclasses.fields(cls) if f.init]  # type: ignore[arg-type]
        assert sorted(cls.parameter_constraints()) == sorted(params)

    def test_builds_and_reads_its_parameters_back(self, kind: str, name: str) -> None:
        obj = build(kind, name)
        assert obj.get_params().keys() == registered(kind)[name].parameter_constraints().keys()
        assert repr(obj).startswith(f"{type(obj).__name__}(")

    def test_each_invalid_value_is_a_config_error_naming_the_parameter(self, kind: str, name: str) -> None:
        cls = registered(kind)[name]
        for param, allowed in cls.parameter_constraints().items():
            for constraint in allowed:
                if constraint is None:
                    continue
                bad = constraint.invalid_example()
                with pytest.raises(ConfigError, match=rf"^{param}\b"):
                    build(kind, name, **{param: bad})

    def test_round_trips_through_a_config(self, kind: str, name: str) -> None:
        obj = build(kind, name)
        config = json.loads(json.dumps(obj.to_dict()))
        assert config["type"] == name
        if getattr(type(obj), "_not_from_config", ""):
            with pytest.raises(ConfigError, match="never built from a config"):
                from_config(kind, config)  # type: ignore[arg-type]
            return
        assert no_unwritten(config)
        again = type(obj).from_dict(config)
        assert type(again) is type(obj) and again.to_dict() == config


class TestPipelinesRoundTrip:
    @pytest.mark.parametrize("scorer", ["auto", "bm25", "hybrid"])
    def test_the_default_pipeline_exactly(self, scorer: ScorerChoice) -> None:
        config = default_pipeline(budget=500, scorer=scorer).to_dict()
        again = Pipeline.from_dict(json.loads(json.dumps(config)))
        assert again.to_dict() == config
        assert [type(s) for s in again.stages] == [type(s) for s in default_pipeline(budget=500).stages]
        assert components.UNSERIALIZABLE not in json.dumps(config)

    def test_a_hybrid_scorer_pipeline_with_nested_components(self) -> None:
        hybrid = HybridScorer(scorers=(BM25Scorer(k1=1.5), EmbeddingScorer(device="cpu", max_seq_length=128)),
                              method="rrf", rrf_k=30)
        pipeline = Pipeline([
            HistoryCompressor(keep_last_turns=2, summarizer=RuleBasedSummarizer(min_content_words=2)),
            RelevanceFilter(scorer=hybrid, top_k=3),
            SentenceCompressor(scorer=CascadeScorer(first="bm25", second=hybrid, candidates=4), max_tokens=80),
        ], tokenizer="whitespace")
        config = pipeline.to_dict()
        assert no_unwritten(config)
        assert config["stages"][1]["scorer"] == {
            "type": "hybrid", "method": "rrf", "weights": None, "rrf_k": 30, "script_gate": True, "sure_weights": None,
            "sure_gap": [0.5, 0.9],
            "scorers": [{"type": "bm25", "k1": 1.5, "b": 0.75, "stopwords": True, "analyzer": "script", "stem": True},
                        {"type": "embedding", "cache_size": 16384, "vector_store": "default", "scripts": None,
                         "query_adapter": None, "query_adapter_min_length": 0.0, "model": "all-MiniLM-L6-v2", "batch_size": 64, "device": "cpu", "max_seq_length": 128,
                         "threads": None}],
        }
        again = Pipeline.from_dict(json.loads(json.dumps(config)))
        assert again.to_dict() == config
        rebuilt = again.stages[1]
        assert isinstance(rebuilt, RelevanceFilter) and isinstance(rebuilt.scorer, HybridScorer)
        assert isinstance(rebuilt.scorer.scorers[1], EmbeddingScorer) and rebuilt.scorer.scorers[1].max_seq_length == 128

    def test_the_same_results_after_the_round_trip(self) -> None:
        chunks = ["The tower is 330 metres tall.", "Paris is in France.", "The tower opened in 1889."]
        pipeline = Pipeline([RelevanceFilter(scorer=FixedScorer(scores=[0.2, 0.9, 0.5]), top_k=2)],
                            tokenizer="whitespace")
        again = Pipeline.from_dict(pipeline.to_dict())
        assert again.run(chunks, query="q").text == pipeline.run(chunks, query="q").text


class TestUrlPasswordsAreNotWritten:
    """A vector store URL with a password (a shared Redis) never reaches a written config, a repr or a log."""

    URL = "redis://ragtrim:s3cret-store-pw@cache.internal:6379/2"

    def pipeline(self) -> Pipeline:
        return Pipeline([RelevanceFilter(scorer=EmbeddingScorer(device="cpu", vector_store=self.URL), top_k=3)],
                        tokenizer="whitespace")

    def test_to_dict_masks_the_password_and_keeps_the_rest(self) -> None:
        config = self.pipeline().to_dict()
        written = json.dumps(config)
        assert "s3cret-store-pw" not in written
        assert config["stages"][0]["scorer"]["vector_store"] == "redis://ragtrim:***@cache.internal:6379/2"

    def test_repr_masks_it(self) -> None:
        assert "s3cret-store-pw" not in repr(self.pipeline().stages[0])

    def test_the_masked_url_is_refused_not_used(self) -> None:
        with pytest.raises(ConfigError, match=r"parameter 'vector_store' is a URL whose password was masked"):
            Pipeline.from_dict(self.pipeline().to_dict())

    def test_a_url_without_a_password_round_trips(self) -> None:
        p = Pipeline([RelevanceFilter(scorer=EmbeddingScorer(vector_store="redis://cache.internal:6379/2"))],
                     tokenizer="whitespace")
        assert Pipeline.from_dict(p.to_dict()).to_dict() == p.to_dict()


@pytest.fixture
def saved() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / "v0.1.json").read_text())
    return data


class TestConfigsWrittenBeforeTheRegistry:
    """``tests/fixtures/pipeline_configs/v0.1.json`` holds ``Pipeline.to_dict()`` output of the version before this
    scheme; such configs must still load."""

    ADDED_SINCE: ClassVar[dict[str, dict[str, Any]]] = {"dedup": {"shingle_chars": 6, "keep_differing_values": True},
                                                         "compress": {"truncate": True, "lookup_weight": 0.5}}
    """Parameters added after v0.1: an old config gets them at their defaults."""

    @pytest.mark.parametrize("key", ["default_budget_500_with_history", "hybrid_gap_whitespace"])
    def test_load_unchanged(self, saved: dict[str, Any], key: str) -> None:
        pipeline = Pipeline.from_dict(saved[key])
        written = pipeline.to_dict()
        for old, new in zip(saved[key]["stages"], written["stages"]):
            old.pop("auto", None), new.pop("auto", None)  # what "auto" chose is this host's, not the config's
            assert new == {**old, **self.ADDED_SINCE.get(old["type"], {})}
        assert written["tokenizer"] == saved[key]["tokenizer"]

    def test_objects_the_old_version_could_not_write_are_still_refused(self, saved: dict[str, Any]) -> None:
        with pytest.raises(ConfigError, match="parameter 'scorer' held an object"):
            Pipeline.from_dict(saved["object_parameters"])


class TestScorerNamesLiveInOnePlace:
    def test_the_types_and_the_cli_follow_the_registry(self) -> None:
        from ragtrim.cli import build_parser

        assert get_args(ScorerName) == SCORER_NAMES
        assert get_args(ScorerChoice) == (*STAGE_SCORER_NAMES, *SCORER_NAMES)
        trim = build_parser()._subparsers._group_actions[0].choices["trim"]  # type: ignore[union-attr]
        scorer = next(a for a in trim._actions if a.dest == "scorer")
        assert tuple(scorer.choices) == (*STAGE_SCORER_NAMES, *SCORER_NAMES)

    @pytest.mark.parametrize("name", ["auto", *SCORER_NAMES])
    def test_the_gateway_accepts_every_name(self, name: str) -> None:
        from ragtrim.serve.config import parse_config

        assert parse_config({"upstream": {"url": "http://x"}, "trim": {"scorer": name}}).trim.scorer == name

    def test_the_docs_list_every_name_and_type(self) -> None:
        relevance = (DOCS / "relevance.md").read_text()
        for name in SCORER_NAMES:
            assert f'`"{name}"`' in relevance, name
        table = (DOCS / "budget-and-config.md").read_text()
        for kind in components.KINDS:
            for name in registered(kind):
                assert f"| {kind} | `{name}` |" in table, (kind, name)


class TestThePluginScheme:
    def test_a_user_component_registers_and_round_trips(self) -> None:
        @register("scorer", "test-length")
        @component
        class LengthScorer(Component):
            """Longer texts score higher (a toy)."""

            _parameter_constraints: ClassVar[dict[str, Constraints]] = {"per_char": [Interval(float, 0.0, None)]}
            per_char: float = 1.0

            @property
            def name(self) -> str:
                return "length"

            def score(self, query: str, texts: list[str]) -> list[float]:
                return [self.per_char * len(t) for t in texts]

        try:
            config = Pipeline([RelevanceFilter(scorer=LengthScorer(per_char=2.0), top_k=1)],
                              tokenizer="whitespace").to_dict()
            assert config["stages"][0]["scorer"] == {"type": "test-length", "per_char": 2.0}
            again = Pipeline.from_dict(config)
            assert again.run(["a", "bbb"], query="q").text == "bbb"
            with pytest.raises(ConfigError, match="per_char must be >= 0.0, got -1"):
                LengthScorer(per_char=-1)
        finally:
            del components._REGISTRY["scorer"]["test-length"]

    def test_a_name_is_registered_once(self) -> None:
        with pytest.raises(ConfigError, match="scorer type 'bm25' is already registered by BM25Scorer"):
            register("scorer", "bm25")(FixedScorer)

    def test_an_unregistered_object_is_shown_and_refused_at_any_depth(self) -> None:
        class OwnScorer:
            name = "own"

            def score(self, query: str, texts: list[str]) -> list[float]:
                return [0.0] * len(texts)

        own = OwnScorer()
        config = RelevanceFilter(scorer=HybridScorer(scorers=("bm25", own))).to_dict()
        assert config["scorer"]["scorers"] == ["bm25", {"unserializable": repr(own)}]
        with pytest.raises(ConfigError, match="a scorer here held an object"):
            RelevanceFilter.from_dict(config)

    def test_secrets_are_never_written_or_shown(self) -> None:
        summarizer = OpenAICompatibleSummarizer(base_url="http://localhost:8000/v1", model="m", api_key="sk-SECRET")
        assert "SECRET" not in repr(summarizer) and "SECRET" not in json.dumps(summarizer.to_dict())
        stage = HistoryCompressor(summarizer=summarizer)
        with pytest.raises(ConfigError, match="never built from a config .*sends conversation text"):
            Pipeline.from_dict(Pipeline([stage]).to_dict())

    @pytest.mark.parametrize(("config", "message"), [
        ({"type": "nope"}, "unknown scorer type 'nope'; known: \\['bm25'"),
        ({"k1": 1.0}, "a scorer config must be a dict with a 'type' key"),
        ({"type": 3}, "a scorer 'type' must be a scorer name"),
        ({"type": "bm25", "k2": 1.0}, "scorer 'bm25': .*unexpected keyword argument 'k2'"),
        ({"type": "bm25", "k1": -1.0}, "k1 must be >= 0.0, got -1.0"),
    ])
    def test_bad_nested_configs(self, config: dict[str, Any], message: str) -> None:
        with pytest.raises(ConfigError, match=message):
            RelevanceFilter.from_dict({"type": "relevance", "scorer": config})

    def test_a_counter_written_as_a_dict_still_obeys_the_allowed_directories(self, tmp_path: Path) -> None:
        secret = tmp_path / "tokenizer.json"
        secret.write_text("{}")
        with pytest.raises(ConfigError, match="not under a directory the operator allowed"):
            Pipeline.from_dict({"tokenizer": {"type": "hf", "tokenizer": str(secret)}})
        assert Pipeline.from_dict({"tokenizer": {"type": "whitespace"}}).counter.name == "whitespace"
