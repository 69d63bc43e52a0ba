"""The audit of the gateway's own RAG log (ragtrim_bench.audit.gateway_traffic): the pure helpers by hand, then a real run of
10 golden NQ requests through ``ragtrim serve`` whose audit must agree with the gateway's own token counts."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from ragtrim.audit.reader import AuditRequest, Segment
from ragtrim.errors import ConfigError
from ragtrim.text.tokens import WhitespaceCounter
from ragtrim_bench.audit.gateway_traffic import (
    GatewayAuditConfig,
    audit_argv,
    gateway_toml,
    log_totals,
    numbering_tokens,
    rag_chat_bodies,
    run,
    token_counters,
)
from ragtrim_bench.datasets.nq import Passage, QAInstance
from ragtrim_bench.gpu.prompts import INSTRUCTION


def instance(i: int) -> QAInstance:
    passages = tuple(Passage(id=f"p{i}-{j}", title=f"T{j}", text=f"passage {j} of {i}") for j in range(3))
    return QAInstance(id=f"nq{i}", question=f"question {i}?", answers=(f"answer {i}",), passages=passages)


class TestConfig:
    def test_defaults(self) -> None:
        cfg = GatewayAuditConfig()
        assert (cfg.requests, cfg.budget, cfg.scorer, cfg.history_every) == (200, 0.25, "bm25", 3)

    @pytest.mark.parametrize(("field", "value", "message"), [
        ("requests", 0, "requests must be an integer >= 1, got 0"),
        ("history_every", True, "history_every must be an integer >= 1, got True"),
        ("offset", -1, "offset must be >= 0, got -1"),
        ("budget", 0.0, "budget must be a share in (0, 1)"),
        ("budget", 2.5, "budget must be a share in (0, 1)"),
    ])
    def test_invalid(self, field: str, value: object, message: str) -> None:
        with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
            GatewayAuditConfig(**{field: value})  # type: ignore[arg-type]


class TestRequests:
    def test_documents_context_blocks_and_history(self) -> None:
        insts = [instance(i) for i in range(6)]
        bodies = rag_chat_bodies(insts, history_every=3, max_tokens=4)
        assert [("documents" in b) for b in bodies] == [True, False, True, False, True, False]
        assert [len(b["messages"]) for b in bodies] == [2, 2, 4, 2, 2, 4]  # every third has an earlier exchange
        assert all(b["messages"][0] == {"role": "system", "content": INSTRUCTION} for b in bodies)
        assert bodies[0]["documents"] == ["T0\npassage 0 of 0", "T1\npassage 1 of 0", "T2\npassage 2 of 0"]
        assert bodies[1]["messages"][-1]["content"] == (
            "<context>\nT0\npassage 0 of 1\n\nT1\npassage 1 of 1\n\nT2\npassage 2 of 1\n</context>\n\nquestion 1?")
        assert bodies[2]["messages"][1:3] == [{"role": "user", "content": "question 1?"},
                                              {"role": "assistant", "content": "answer 1"}]
        assert all(b["max_tokens"] == 4 for b in bodies)

    def test_empty(self) -> None:
        assert rag_chat_bodies([]) == []


class TestGatewaySide:
    def test_toml_turns_on_trimming_and_the_request_log(self, tmp_path: Path) -> None:
        cfg = GatewayAuditConfig(log=tmp_path / "log.jsonl", scorer="bm25", budget=0.25)
        raw = tomllib.loads(gateway_toml(8123, cfg))
        assert raw["upstream"] == {"url": "http://127.0.0.1:8123/v1", "tokenizer": "cl100k_base"}
        assert raw["trim"] == {"budget": 0.25, "scorer": "bm25"}
        assert raw["log"] == {"path": str(tmp_path / "log.jsonl"), "log_request": True}
        assert tomllib.loads(gateway_toml(1, GatewayAuditConfig(budget=1500)))["trim"]["budget"] == 1500

    def test_audit_argv_trims_every_request_like_the_gateway(self) -> None:
        cfg = GatewayAuditConfig(log=Path("a.jsonl"), report_dir=Path("out"), audit_args=("--no-text",))
        assert audit_argv(cfg) == ["audit", "a.jsonl", "--out", "out", "--tokenizer", "cl100k_base", "--budget",
                                   "0.25", "--sample", "0", "--scorer", "bm25", "--no-text"]

    def test_token_counters(self) -> None:
        text = ('# HELP ragtrim_serve_tokens_total Tokens\n# TYPE ragtrim_serve_tokens_total counter\n'
                'ragtrim_serve_tokens_total{kind="prompt_in"} 1234.0\n'
                'ragtrim_serve_tokens_total{kind="prompt_out"} 300.0\n'
                'ragtrim_serve_tokens_created{kind="prompt_in"} 1.7e+09\n'
                'ragtrim_serve_requests_total{endpoint="chat",outcome="ok"} 2.0\n')
        assert token_counters(text) == {"prompt_in": 1234, "prompt_out": 300}
        assert token_counters("") == {}

    def test_log_totals(self) -> None:
        entries = [{"outcome": "ok", "tokens": {"prompt_before": 100, "prompt_after": 40, "saved": 60,
                                                "documents_before": 90, "documents_after": 30}},
                   {"outcome": "ok", "tokens": {"prompt_before": 10, "prompt_after": 10, "saved": 0}},
                   {"outcome": "bad_request"}]
        t = log_totals(entries)
        assert t == {"lines": 3, "outcomes": {"bad_request": 1, "ok": 2}, "prompt_before": 110, "prompt_after": 50,
                     "saved": 60, "documents_before": 90, "documents_after": 30, "history_before": 0,
                     "history_after": 0}
        assert log_totals([])["lines"] == 0

    def test_numbering_tokens(self) -> None:
        pytest.importorskip("starlette", reason="the serve extra is not installed: pip install 'ragtrim[serve]'")
        req = AuditRequest("r", 1, "chat", (Segment("system", "be brief", "system"),
                                            Segment("context", "a b", "", "documents"),
                                            Segment("context", "c", "", "documents"),
                                            Segment("question", "q?", "user")))
        plain = AuditRequest("s", 2, "chat", (Segment("question", "hi", "user"),))
        # "Documents:\n[1] a b\n\n[2] c\n\nq?": 7 words, of which "Documents:", "[1]" and "[2]" are the gateway's.
        assert numbering_tokens([req, plain], WhitespaceCounter()) == 3
        assert numbering_tokens([], WhitespaceCounter()) == 0


@pytest.mark.data
def test_audit_of_the_gateway_log_agrees_with_the_gateway(shared_data: Path, tmp_path: Path) -> None:
    """10 golden requests through a real gateway (processes, as the benchmark runs them)."""
    for extra in ("starlette", "uvicorn", "aiohttp"):
        pytest.importorskip(extra, reason="the serve extra is not installed: pip install 'ragtrim[serve]'")
    cfg = GatewayAuditConfig(requests=10, base_ms=0.0, per_1k_ms=0.0, log=tmp_path / "gateway.jsonl",
                             report_dir=tmp_path / "report")
    r = run(cfg)
    a, g = r["audit"], r["gateway"]
    assert r["requests_ok"] == 10 and g["log"]["lines"] == 10 and a["requests"] == 10
    assert g["metrics"]["prompt_in"] == g["log"]["prompt_before"] and g["metrics"]["prompt_out"] == g["log"][
        "prompt_after"]
    # The audit counts the same prompts as the gateway: the documents to the token, and the whole prompt once the
    # gateway's own "Documents:" / "[i]" numbering (which the client never sent) is added.
    assert a["parts"]["context"] == g["log"]["documents_before"]
    assert a["prompt_tokens"] + g["numbering_tokens"] == g["log"]["prompt_before"]
    assert 0 < g["numbering_tokens"] < 0.05 * a["prompt_tokens"]
    assert a["largest_part"] == "context" and a["context_share"] > 0.9
    assert a["parts"]["history"] > 0 and a["parts"]["system"] > 0
    # The audit's savings at the gateway's budget are what the gateway removed.
    assert a["context_tokens_saved"] == g["documents_saved"] > 0
    assert all(r["match"].values()), r["match"]
    report = json.loads((tmp_path / "report" / "audit.json").read_text(encoding="utf-8"))
    assert report["breakdown"]["prompt_tokens"] == a["prompt_tokens"] and report["savings"]["exact"] is True
    assert max(r["report_bytes"].values()) < 1_000_000
