"""The audit read in shards and merged in order gives the single pass's report, number for number: the partial
aggregates (``ragtrim.audit.state``) that the Ray engine's workers compute, merged in this process."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from ragtrim.audit.breakdown import ConversationGrowth
from ragtrim.audit.config import AuditConfig
from ragtrim.audit.core import build_report, check_not_empty, measure_sample, run_audit
from ragtrim.audit.prefix import PrefixCacheSim
from ragtrim.audit.reader import EmptyLogError, parse_request
from ragtrim.audit.savings import SavingsConfig
from ragtrim.audit.shards import plan_shards
from ragtrim.audit.state import AuditState, HashSeedMismatch, Workspace, audit_shard, merge_in_order
from tests.audit.logs import write_log


def comparable(report: dict[str, Any]) -> dict[str, Any]:
    """The report without what differs between runs by nature: wall times, memory, the engine's description, and
    the counting cache's statistics (each worker counts the texts it sees)."""
    out = json.loads(json.dumps(report))
    out.pop("run")
    if "savings" in out:
        out["savings"].pop("trim_ms_per_request")
    return out


def sharded(paths: list[Path], cfg: AuditConfig, shard_bytes: int | None) -> dict[str, Any]:
    """What the Ray engine does, in this process: a mergeable state per shard, merged in input order."""
    shards = plan_shards(paths, shard_bytes=shard_bytes)
    workspace = Workspace(cfg, AuditState(cfg).documents)
    state = merge_in_order([audit_shard(s, cfg, workspace) for s in shards], cfg)
    check_not_empty(state)
    records = measure_sample(state, workspace.counter, cfg)
    return build_report(state, cfg, records, tokenizer=workspace.counter.name, started=0.0, breakdown_seconds=0.0,
                        savings_seconds=0.0, engine={"engine": "test", "shards": len(shards)})


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_log(tmp_path_factory.mktemp("merge") / "mixed.jsonl", 400, seed=1)


CONFIGS = {
    # a cache that holds a few requests: it evicts all the time, so every shard's head is replayed on a full cache
    "small_cache": AuditConfig(prefix_cache_tokens=600, block_size=4, savings=SavingsConfig(sample=12, seed=3)),
    # the default cache never fills: every shard is all head
    "default": AuditConfig(savings=SavingsConfig(sample=12, seed=3)),
    # fewer followed documents than the log has: the merged table keeps the first ones in log order
    "few_docs": AuditConfig(max_docs=7, savings=None, keep_text=False),
}


class TestShardedEqualsOnePass:
    @pytest.mark.parametrize("config", sorted(CONFIGS))
    @pytest.mark.parametrize("shard_bytes", [700, 5_000, 40_000])
    def test_byte_range_shards(self, log: Path, config: str, shard_bytes: int) -> None:
        cfg = CONFIGS[config]
        one = run_audit(log, cfg)
        assert len(plan_shards([log], shard_bytes=shard_bytes)) > 1
        assert comparable(sharded([log], cfg, shard_bytes)) == comparable(one)

    def test_the_log_exercises_every_merge(self, log: Path) -> None:
        r = run_audit(log, CONFIGS["small_cache"])
        assert r["input"]["skipped_lines"]["total"] > 0
        assert r["conversations"]["multi_request_conversations"] > 10
        assert r["prefix_cache"]["as_logged"]["evicted_tokens"] > 0
        assert r["prefix_cache"]["as_logged"]["served_tokens"] > 0
        w = r["documents"]["within_request"]
        assert w["exact_duplicate_pieces"] and w["near_duplicate_pieces"] and r["documents"]["html"]["html_pieces"]
        assert r["documents"]["across_requests"]["repeated_tokens"] > 0
        few = run_audit(log, CONFIGS["few_docs"])
        assert few["documents"]["method"]["untracked_pieces"] > 0

    def test_several_files_and_gzip(self, tmp_path: Path) -> None:
        paths = [write_log(tmp_path / "a.jsonl", 120, seed=5), write_log(tmp_path / "b.jsonl.gz", 90, seed=6,
                                                                         gzipped=True),
                 write_log(tmp_path / "c.jsonl", 150, seed=7)]
        cfg = CONFIGS["small_cache"]
        one = run_audit(paths, cfg)
        assert [f["path"] for f in one["input"]["files"]] == [str(p) for p in paths]
        assert sum(f["requests"] for f in one["input"]["files"]) == one["breakdown"]["requests"]
        assert comparable(sharded(paths, cfg, 3_000)) == comparable(one)

    def test_truncated_gzip_file_among_others(self, tmp_path: Path) -> None:
        good = write_log(tmp_path / "good.jsonl", 60, seed=8)
        whole = write_log(tmp_path / "cut.jsonl.gz", 200, seed=9, gzipped=True).read_bytes()
        cut = tmp_path / "cut.jsonl.gz"
        cut.write_bytes(whole[: len(whole) // 2])
        cfg = CONFIGS["default"]
        one = run_audit([good, cut], cfg)
        assert not one["input"]["complete"] and one["input"]["stopped_in"] == str(cut)
        assert one["input"]["files"][0]["complete"] and not one["input"]["files"][1]["complete"]
        assert comparable(sharded([good, cut], cfg, 2_000)) == comparable(one)

    def test_every_file_empty(self, tmp_path: Path) -> None:
        a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl.gz"
        a.write_text("{broken\n")
        with gzip.open(b, "wt") as f:
            f.write("")
        with pytest.raises(EmptyLogError, match="none of the 2 request logs holds a request"):
            run_audit([a, b])


class TestMergePieces:
    def chat(self, turns: list[str], cid: str | None = None, line: int = 1) -> Any:
        msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(turns)]
        body: dict[str, Any] = {"messages": [{"role": "system", "content": "S"}, *msgs]}
        if cid:
            body["conversation_id"] = cid
        return parse_request(body, line)

    def test_a_conversation_across_the_boundary_is_one(self) -> None:
        requests = [(self.chat(["hi"]), 0), (self.chat(["hi", "yo", "next"]), 2),  # first stretch
                    (self.chat(["hi", "yo", "next", "ok", "last"]), 6), (self.chat(["hi"]), 0),  # second
                    (self.chat(["a"], "c1"), 0), (self.chat(["a", "b", "c"], "c1"), 3)]
        one = ConversationGrowth()
        for i, (req, hist) in enumerate(requests):
            one.add(req, hist, (0, i))
        first, second = ConversationGrowth(), ConversationGrowth(mergeable=True)
        for i, (req, hist) in enumerate(requests):
            (first if i < 2 else second).add(req, hist, (0, i))
        first.absorb(second)
        assert first.to_dict() == one.to_dict()
        assert one.to_dict()["requests_per_conversation"]["max"] == 3

    def test_prefix_cache_head_is_replayed(self) -> None:
        requests = [([1, 2, 3], [4, 4, 4]), ([1, 2, 5], [4, 4, 4]), ([1, 2, 3], [4, 4, 4]), ([7, 8], [6, 6]),
                    ([1, 2, 3], [4, 4, 4]), ([7, 8, 9], [6, 6, 6])] * 3
        parts = ["system", "context", "question"]
        one = PrefixCacheSim(capacity_tokens=16, block_size=1)
        for keys, tokens in requests:
            one.serve(keys, tokens, parts[:len(keys)], sum(tokens))
        for cut in range(1, len(requests)):
            head, tail = PrefixCacheSim(capacity_tokens=16, block_size=1), PrefixCacheSim(
                capacity_tokens=16, block_size=1, mergeable=True)
            for i, (keys, tokens) in enumerate(requests):
                (head if i < cut else tail).serve(keys, tokens, parts[:len(keys)], sum(tokens))
            head.absorb(tail)
            assert head.to_dict() == one.to_dict(), cut
        assert one.evicted_tokens > 0 and one.served_tokens > 0

    def test_states_of_different_hash_seeds_are_refused(self) -> None:
        cfg = AuditConfig()
        a, b = AuditState(cfg), AuditState(cfg, mergeable=True)
        b.hash_check = (a.hash_check or 0) + 1
        with pytest.raises(HashSeedMismatch, match="PYTHONHASHSEED"):
            a.absorb(b)
