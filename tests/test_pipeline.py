from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest

from ragtrim.errors import ConfigError, ContractError, InputError, StageError
from ragtrim.models import Removal, StageOutput, TrimContext
from ragtrim.pipeline import Pipeline
from ragtrim.stages.base import Stage, stage_from_dict
from ragtrim.stages.budget import TokenBudget
from ragtrim.text.tokens import TokenCounter, WhitespaceCounter


class DropFirst(Stage):
    name = "drop_first_test"

    def __init__(self, *, record: bool = True) -> None:
        self.record = record

    def run(self, context: TrimContext, *, counter: TokenCounter) -> StageOutput:
        if not context.chunks:
            return StageOutput(context)
        first, rest = context.chunks[0], context.chunks[1:]
        removals = (Removal(first.id, self.name, "below_top_k", 0, "test"),) if self.record else ()
        return StageOutput(context.with_chunks(rest), removals)


class Shorten(Stage):
    name = "shorten_test"

    def __init__(self, *, record: bool = True) -> None:
        self.record = record

    def run(self, context: TrimContext, *, counter: TokenCounter) -> StageOutput:
        chunks = tuple(c.with_text(" ".join(c.text.split()[:1])) for c in context.chunks)
        removals = tuple(Removal(c.id, self.name, "compressed", 0, action="shortened") for c in context.chunks)
        return StageOutput(context.with_chunks(chunks), removals if self.record else ())


class Broken(Stage):
    name = "broken_test"

    def __init__(self, *, mode: str = "raise") -> None:
        self.mode = mode

    def run(self, context: TrimContext, *, counter: TokenCounter) -> StageOutput:
        if self.mode == "raise":
            raise ZeroDivisionError("boom")
        if self.mode == "type":
            return context  # type: ignore[return-value]
        if self.mode == "invent":
            return StageOutput(context.with_chunks((dataclasses.replace(context.chunks[0], id="new"),)))
        if self.mode == "twice":
            return StageOutput(context.with_chunks(context.chunks * 2))
        if self.mode == "ghost":
            return StageOutput(context, (Removal("nope", self.name, "empty", 0),))
        if self.mode == "dropped_but_kept":
            return StageOutput(context, (Removal(context.chunks[0].id, self.name, "empty", 0),))
        raise AssertionError(self.mode)


class CountingCounter(WhitespaceCounter):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def count(self, text: str) -> int:
        self.calls.append(text)
        return super().count(text)


class TestPipeline:
    def test_empty_pipeline_passes_through(self) -> None:
        r = Pipeline(tokenizer="whitespace").run(["a b", "c"])
        assert [c.text for c in r.chunks] == ["a b", "c"]
        assert (r.tokens_before, r.tokens_after, r.trace) == (3, 3, ())

    def test_empty_input(self) -> None:
        r = Pipeline([TokenBudget(max_tokens=3)], tokenizer="whitespace").run([])
        assert r.chunks == () and r.tokens_before == 0 and r.ratio == 1.0

    def test_report_numbers(self) -> None:
        r = Pipeline([DropFirst()], tokenizer="whitespace").run(["a b c", "d e"])
        (rep,) = r.trace
        assert (rep.stage, rep.chunks_in, rep.chunks_out, rep.tokens_in, rep.tokens_out) == ("drop_first_test", 2, 1, 5, 2)
        assert rep.removals[0].tokens_removed == 3  # filled in exactly by the pipeline
        assert rep.seconds >= 0

    def test_shortened_records_get_exact_tokens(self) -> None:
        r = Pipeline([Shorten()], tokenizer="whitespace").run(["a b c", "d e"])
        assert [x.tokens_removed for x in r.removals] == [2, 1]
        assert r.tokens_after == 2

    def test_counts_once_per_text(self) -> None:
        counter = CountingCounter()
        Pipeline([DropFirst(), TokenBudget(max_tokens=100)], tokenizer=counter).run(["a b", "c d", "e f"])
        # each chunk text once; the budget also counts the separator and the joined output, which are new texts
        assert sorted(c for c in counter.calls if "\n\n" not in c) == ["a b", "c d", "e f"]
        assert set(counter.calls) == {"\n\n", "a b", "c d", "c d\n\ne f", "e f"}

    def test_untraced_drop_is_contract_error(self) -> None:
        with pytest.raises(ContractError, match="vanished without a 'dropped' removal record"):
            Pipeline([DropFirst(record=False)], tokenizer="whitespace").run(["a", "b"])

    def test_untraced_shortening_is_contract_error(self) -> None:
        with pytest.raises(ContractError, match="shortened without a removal record"):
            Pipeline([Shorten(record=False)], tokenizer="whitespace").run(["a b"])

    @pytest.mark.parametrize(
        ("mode", "error", "message"),
        [
            ("raise", StageError, "stage 'broken_test' failed: ZeroDivisionError: boom"),
            ("type", ContractError, "must return StageOutput"),
            ("invent", ContractError, "unknown id 'new'"),
            ("twice", ContractError, "twice"),
            ("ghost", ContractError, "unknown chunk id 'nope'"),
            ("dropped_but_kept", ContractError, "still in the output"),
        ],
    )
    def test_broken_stages(self, mode: str, error: type[Exception], message: str) -> None:
        with pytest.raises(error, match=message):
            Pipeline([Broken(mode=mode)], tokenizer="whitespace").run(["a b"])

    def test_stage_error_keeps_cause(self) -> None:
        with pytest.raises(StageError) as info:
            Pipeline([Broken()], tokenizer="whitespace").run(["a"])
        assert isinstance(info.value.__cause__, ZeroDivisionError)
        assert info.value.stage == "broken_test"

    def test_duplicate_ids(self) -> None:
        with pytest.raises(InputError, match="'x' appears twice"):
            Pipeline(tokenizer="whitespace").run([{"text": "a", "id": "x"}, {"text": "b", "id": "x"}])

    def test_not_a_stage(self) -> None:
        with pytest.raises(ConfigError, match=r"stages\[0\] must be a ragtrim Stage"):
            Pipeline([object()])  # type: ignore[list-item]

    def test_bad_query(self) -> None:
        with pytest.raises(ConfigError, match="query must be a str"):
            Pipeline().run([], query=5)  # type: ignore[arg-type]

    def test_does_not_mutate_input(self) -> None:
        chunks = [{"text": "a b c", "id": "1"}, {"text": "d", "id": "2"}]
        snapshot = [dict(c) for c in chunks]
        Pipeline([Shorten(), DropFirst()], tokenizer="whitespace").run(chunks)
        assert chunks == snapshot


class TestConfig:
    def test_round_trip(self) -> None:
        p = Pipeline([TokenBudget(max_tokens=10, policy="position")], tokenizer="whitespace")
        q = Pipeline.from_dict(p.to_dict())
        assert q.to_dict() == p.to_dict() == {
            "tokenizer": "whitespace",
            "stages": [{"type": "budget", "max_tokens": 10, "policy": "position", "truncate": True,
                        "min_truncated_tokens": 16, "per_chunk_overhead_tokens": 0}],
        }

    @pytest.mark.parametrize(
        ("config", "message"),
        [
            ({"stages": [{"type": "nope"}]}, "unknown stage type 'nope'"),
            ({"stages": [{"max_tokens": 3}]}, "must be a dict with a 'type' key"),
            ({"stages": [{"type": "budget", "max_tokens": 3, "colour": "red"}]}, "unexpected keyword"),
            ({"stages": [{"type": "budget", "max_tokens": -1}]}, "max_tokens must be >= 0, got -1"),
            ({"stages": "budget"}, "'stages' must be a list"),
            ({"stagez": []}, "unknown pipeline config keys"),
        ],
    )
    def test_invalid(self, config: dict[str, object], message: str) -> None:
        with pytest.raises(ConfigError, match=message):
            Pipeline.from_dict(config)

    def test_stage_from_dict(self) -> None:
        assert isinstance(stage_from_dict({"type": "budget", "max_tokens": 5}), TokenBudget)


class OwnScorer:
    """A user's scorer that is not a registered component: it has no config form."""

    name = "own"

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        return [1.0] * len(texts)


def test_object_params_are_shown_and_refused_not_dropped() -> None:
    from ragtrim.errors import ConfigError
    from ragtrim.stages.relevance import RelevanceFilter

    scorer = OwnScorer()
    config = Pipeline([RelevanceFilter(scorer=scorer, top_k=1)]).to_dict()
    stage = config["stages"][0]
    assert stage["scorer"] == {"unserializable": repr(scorer)}  # the config says what was there
    with pytest.raises(ConfigError, match="parameter 'scorer' held an object"):
        Pipeline.from_dict(config)  # instead of silently rebuilding it with the default scorer
    named = Pipeline([RelevanceFilter(scorer="bm25", top_k=1)]).to_dict()
    assert Pipeline.from_dict(named).to_dict() == named


class Lengthen(Stage):
    """A stage after the budget that makes text longer (contract-legal): the final guard must still hold."""

    name = "lengthen_test"

    def run(self, context: TrimContext, *, counter: TokenCounter) -> StageOutput:
        return StageOutput(context.with_chunks(tuple(c.with_text(c.text + " more words") for c in context.chunks)))


class TestHardBudgetOnResultText:
    """``counter.count(result.text) <= budget``, separators included, whatever the chunks claim."""

    def test_separators_count(self) -> None:
        from ragtrim import trim
        from ragtrim.text.tokens import get_counter

        texts = ["tower height 330", "tower built 1889", "tower iron lattice", "tower in paris"]
        for budget in range(30):
            r = trim(texts, query="tower", budget=budget, scorer="bm25")
            assert get_counter().count(r.text) <= budget  # budget 12 gave 14 tokens before
            assert {c.id for c in r.chunks} | {x.chunk_id for x in r.removals if x.action == "dropped"} == set("0123")

    def test_separator_tokens_are_paid(self) -> None:
        # approx counts "\n\n" as 0, so use a counter where the separator costs one token
        class SepCounter(WhitespaceCounter):
            def count(self, text: str) -> int:
                return super().count(text) + text.count("\n\n")

        r = Pipeline([TokenBudget(max_tokens=5, truncate=False)], tokenizer=SepCounter()).run(["a b", "c d", "e"])
        assert r.text == "a b\n\nc d" and SepCounter().count(r.text) == 5

    def test_claimed_token_count_is_recounted(self) -> None:
        from ragtrim.models import Chunk
        from ragtrim.text.tokens import get_counter

        liar = Chunk(text="word " * 500, id="a", token_count=1)
        r = Pipeline([TokenBudget(max_tokens=10)]).run([liar, Chunk(text="a b c", id="b", token_count=0)])
        assert get_counter().count(r.text) <= 10  # kept 501 real tokens before
        assert [(c.id, c.token_count) for c in r.chunks] == [("b", 3)]
        assert r.tokens_before == 504 and r.removals[0].tokens_removed == 501

    def test_final_guard_after_a_later_stage(self) -> None:
        p = Pipeline([TokenBudget(max_tokens=6, truncate=False), Lengthen()], tokenizer="whitespace")
        r = p.run([{"text": "a b", "score": 1.0}, {"text": "c d", "score": 0.5}])
        assert WhitespaceCounter().count(r.text) <= 6
        assert [c.id for c in r.chunks] == ["0"]
        guard = r.trace[-1]
        assert guard.stage == "final_budget" and guard.chunks_in == 2 and guard.chunks_out == 1
        (removal,) = guard.removals
        assert (removal.chunk_id, removal.reason, removal.action) == ("1", "over_budget", "dropped")
        assert "joined text was 8 tokens" in removal.detail

    def test_final_guard_pinned_alone_over(self) -> None:
        from ragtrim.errors import BudgetError
        from ragtrim.models import Chunk

        p = Pipeline([TokenBudget(max_tokens=3), Lengthen()], tokenizer="whitespace")
        with pytest.raises(BudgetError, match="pinned chunks need 4 tokens joined"):
            p.run([Chunk("a b", "p", pinned=True)])

    def test_guard_absent_when_nothing_to_do(self) -> None:
        r = Pipeline([TokenBudget(max_tokens=6)], tokenizer="whitespace").run(["a b", "c d"])
        assert [t.stage for t in r.trace] == ["budget"]


class TestConfigSafety:
    """Every config problem is a ConfigError; config strings read no arbitrary files."""

    @staticmethod
    def deep(n: int) -> list[object]:
        out: list[object] = []
        for _ in range(n):
            out = [out]
        return out

    @pytest.mark.parametrize(
        "config",
        [
            {"stages": [{"type": ["budget"]}]},  # TypeError: unhashable
            {"stages": [{"type": {"a": 1}}]},
            {"stages": [{"type": None}]},
            {"stages": [{"type": "budget", "max_tokens": 5, 7: 1}]},
            {"tokenizer": ["cl100k_base"]},
            {"tokenizer": "hf:/tmp/x\x00y"},  # ValueError: embedded null byte
            {"tokenizer": "o200k_base"},  # would download
            {"tokenizer": "tiktoken:gpt2"},
            [1, 2],
        ],
    )
    def test_config_errors_are_typed(self, config: object) -> None:
        with pytest.raises(ConfigError):
            Pipeline.from_dict(config)  # type: ignore[arg-type]

    @pytest.mark.parametrize("where", ["stages", "param", "stage"])
    def test_deep_nesting_is_config_error(self, where: str) -> None:
        deep = self.deep(50_000)
        config = {
            "stages": {"stages": deep, "param": [{"type": "budget", "max_tokens": deep}], "stage": [deep]}[where]
        }
        with pytest.raises(ConfigError):  # RecursionError before
            Pipeline.from_dict(config)

    def test_offline_encoding_names_are_listed(self) -> None:
        with pytest.raises(ConfigError, match=r"'o200k_base' is not available offline.*allowed: \['cl100k_base'"):
            Pipeline.from_dict({"tokenizer": "o200k_base"})

    def test_config_tokenizer_file_needs_an_allowed_dir(self, tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
        from pathlib import Path

        pytest.importorskip("tokenizers")
        secret = Path(str(tmp_path)) / "secret.json"
        secret.write_text('{"version":"SECRET"}', encoding="utf-8")
        monkeypatch.delenv("RAGTRIM_TOKENIZER_DIRS", raising=False)
        for spec in (f"hf:{secret}", str(secret)):
            with pytest.raises(ConfigError, match="not under a directory the operator allowed") as info:
                Pipeline.from_dict({"tokenizer": spec})
            assert "SECRET" not in str(info.value)
        # allowed: it is read, and the error names the path, never the content
        p = Pipeline.from_dict({"tokenizer": f"hf:{secret}"}, tokenizer_dirs=[str(tmp_path)])
        with pytest.raises(ConfigError, match="could not be loaded") as info:
            p.run(["a"])
        assert "SECRET" not in str(info.value) and str(secret) in str(info.value)


class SlowWarmUp(Stage):
    """Counts its warm-ups; each takes a while, so concurrent first runs overlap."""

    name = "slow_warm_up_test"

    def __init__(self) -> None:
        self.warm_ups = 0

    def warm_up(self) -> None:
        import time

        self.warm_ups += 1
        time.sleep(0.05)

    def run(self, context: TrimContext, *, counter: TokenCounter) -> StageOutput:
        return StageOutput(context)


def test_concurrent_first_runs_warm_up_once() -> None:
    """The pipeline owns the one warm-up state (the LangChain classes kept a second, locked copy)."""
    from concurrent.futures import ThreadPoolExecutor

    stage = SlowWarmUp()
    pipeline = Pipeline([stage], tokenizer="whitespace")
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda i: pipeline.run([f"chunk {i}"]).text, range(8)))
    assert results == [f"chunk {i}" for i in range(8)] and stage.warm_ups == 1


def test_scorer_given_keeps_the_callers_scores_and_order() -> None:
    from ragtrim import trim

    chunks = [{"text": "alpha passage about cats", "score": 0.2, "id": "a"},
              {"text": "beta passage about dogs", "score": 0.9, "id": "b"},
              {"text": "gamma passage about birds", "score": 0.5, "id": "c"}]
    result = trim(chunks, query="anything at all", scorer="given", budget=12, tokenizer="whitespace")
    assert result.chunks[0].id == "b"  # the best given score leads
    assert {c.id: c.score for c in result.chunks}["b"] == 0.9
    relevance = next(r for r in result.trace if r.stage == "relevance")
    assert relevance.info["scorer"] == "given"


class ShortenUncounted(Shorten):
    """A first stage that reads no token counts (as the HTML stage): it records what it was given."""

    name = "shorten_uncounted_test"
    reads_token_counts = False

    def run(self, context: TrimContext, *, counter: TokenCounter) -> StageOutput:
        self.seen = [c.token_count for c in context.chunks]
        return super().run(context, counter=counter)


class TestInputCountedBesideTheFirstStage:
    def test_first_stage_runs_on_uncounted_chunks_with_the_same_result(self) -> None:
        texts = ["alpha beta gamma\n" * 400, "delta epsilon\n" * 300, "zeta eta theta"]
        first = ShortenUncounted()
        got = Pipeline([first, TokenBudget(max_tokens=6)]).run(texts)
        want = Pipeline([Shorten(), TokenBudget(max_tokens=6)]).run(texts)
        assert first.seen == [None, None, None]
        assert (got.text, got.tokens_before, got.tokens_after) == (want.text, want.tokens_before, want.tokens_after)
        assert [(r.chunk_id, r.reason, r.tokens_removed) for r in got.trace[0].removals] == [
            (r.chunk_id, r.reason, r.tokens_removed) for r in want.trace[0].removals]
        assert got.trace[0].tokens_in == want.trace[0].tokens_in == got.tokens_before > 0

    def test_a_stage_that_reads_counts_gets_them(self) -> None:
        seen: list[int | None] = []

        class Reads(Shorten):
            name = "reads_test"

            def run(self, context: TrimContext, *, counter: TokenCounter) -> StageOutput:
                seen.extend(c.token_count for c in context.chunks)
                return super().run(context, counter=counter)

        Pipeline([Reads()]).run(["one two\n" * 3000, "three"])
        assert None not in seen and len(seen) == 2
