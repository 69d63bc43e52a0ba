"""The GPU worker's tasks against a fake engine: arm selection, per-task prompt files, distinct prompts per ladder
step, and accuracy scoring per set. No vLLM needed (a stand-in ``vllm.SamplingParams`` is injected)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from ragtrim_bench.gpu import worker
from ragtrim_bench.gpu.records import RequestRecord


class FakeBackend:
    def __init__(self) -> None:
        self._engine = FakeEngine()
        self.sent: list[tuple[str, str]] = []

    async def ready(self, timeout_s: float) -> None:
        return None

    async def complete(self, request_id: str, prompt: str, *, max_tokens: int, arm: str) -> RequestRecord:
        self.sent.append((request_id, prompt))
        n = len(prompt.split())
        return RequestRecord(request_id, arm, True, n, 2, 0.0, float(n), float(n) + 1.0, (1.0,), "x")


class FakeEngine:
    resets = 0

    def reset_prefix_cache(self) -> bool:
        FakeEngine.resets += 1
        return True

    async def generate(self, request_id: str, prompt: str, sampling_params: Any) -> Any:
        answer = "Paris" if "Paris" in prompt else "no idea"
        yield types.SimpleNamespace(outputs=[types.SimpleNamespace(text=answer)])


def _rows(arms: dict[str, int]) -> list[dict[str, Any]]:
    return [{"id": f"q{i}", "arm": arm, "prompt": ("Paris " if arm != "untrimmed" else "filler ") * (i + 1),
             "prompt_tokens": i + 1, "answers": ["Paris"], "answer_in_prompt": arm != "untrimmed"}
            for arm, n in arms.items() for i in range(n)]


def test_wanted_matches_names_and_prefixes() -> None:
    task = {"arms": ["untrimmed", "cand_*"]}
    assert worker._wanted("untrimmed", task) and worker._wanted("cand_top1", task)
    assert not worker._wanted("trimmed_4x", task) and not worker._wanted("oracle", task)
    assert worker._wanted("anything", {})


def test_single_runs_arms_in_file_order_after_a_cache_reset() -> None:
    backend = FakeBackend()
    rows = _rows({"untrimmed": 8, "len_64": 8, "len_128": 8})
    before = FakeEngine.resets
    out = asyncio.run(worker.task_single(backend, rows, {"type": "single", "n": 3}))  # type: ignore[arg-type]
    assert list(out["arms"]) == ["untrimmed", "len_64", "len_128"]
    assert FakeEngine.resets - before == 3
    assert all(s["completed"] == 3 for s in out["arms"].values())
    assert len(out["arms"]["untrimmed"]["ttft_ms_each"]) == 3 == len(out["arms"]["len_64"]["prompt_tokens_each"])


def test_ladder_never_repeats_a_prompt_within_a_step() -> None:
    backend = FakeBackend()
    rows = _rows({"untrimmed": 12})
    task = {"type": "ladder", "rates": [50.0, 100.0], "step_seconds": 1, "min_requests": 5, "slo_ms": 500}
    out = asyncio.run(worker.task_ladder(backend, rows, task, deadline=1e12))  # type: ignore[arg-type]
    steps = out["arms"]["untrimmed"]["steps"]
    assert [s["completed"] for s in steps] == [10, 10]  # capped at 12 distinct prompts minus 2 warm-ups
    timed = [p for rid, p in backend.sent if not rid.startswith("warmup")]
    assert len(set(timed[:10])) == 10 and len(set(timed[10:])) == 10


def test_run_spec_accuracy_per_set_with_task_prompt_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_vllm = types.ModuleType("vllm")
    fake_vllm.SamplingParams = lambda **kw: kw  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm", fake_vllm)
    golden, dev = tmp_path / "golden.jsonl", tmp_path / "dev.jsonl"
    golden.write_text("".join(json.dumps(r) + "\n" for r in _rows({"untrimmed": 4, "cand_a": 4, "oracle": 4})))
    dev.write_text("".join(json.dumps(r) + "\n" for r in _rows({"untrimmed": 2, "cand_a": 2, "cand_b": 2})))

    class Backend(FakeBackend):
        def __init__(self, *, engine_kwargs: Any) -> None:
            super().__init__()

        def start(self) -> None:
            return None

        def shutdown(self) -> None:
            return None

    monkeypatch.setattr(worker, "VLLMInProcessBackend", Backend)
    monkeypatch.setattr(worker, "gpu_memory_used_mib", lambda: None)
    spec = {"name": "t", "engine": {}, "prompts_file": str(golden),
            "tasks": [{"type": "accuracy"}, {"type": "accuracy", "set": "dev", "prompts_file": [str(dev)],
                                             "arms": ["untrimmed", "cand_*"]}]}
    partial = tmp_path / "partial.json"
    result = asyncio.run(worker.run_spec(spec, partial=partial))
    assert result["errors"] == []
    written = json.loads(partial.read_text())  # rewritten after every task: a killed worker keeps finished tasks
    assert written["partial"] is True and len(written["tasks"]) == 2
    g, d = result["tasks"]
    assert g["set"] == "golden" and d["set"] == "dev"
    assert g["arms"]["untrimmed"]["accuracy"] == 0.0 and g["arms"]["cand_a"]["accuracy"] == 1.0
    assert set(d["arms"]) == {"untrimmed", "cand_a", "cand_b"} and d["arms"]["cand_b"]["questions"] == 2


def test_run_spec_server_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """backend "server": `vllm serve` (here a fake OpenAI-compatible server) started with the engine's flags."""
    from tests.bench.gpu.test_backends import _fake_server

    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps(r) + "\n" for r in _rows({"untrimmed": 8})))
    started: dict[str, Any] = {}

    class Proc:
        def terminate(self) -> None:
            started["terminated"] = True

        def wait(self, timeout: float) -> int:
            return 0

    def fake_start(*, model: str, port: int, extra_args: Any, log_path: Any) -> Proc:
        started.update(model=model, port=port, args=list(extra_args))
        return Proc()

    monkeypatch.setattr(worker, "start_vllm_server", fake_start)
    monkeypatch.setattr(worker, "gpu_memory_used_mib", lambda: None)
    monkeypatch.setenv("VLLM_SERVER_DEV_MODE", "0")  # the worker sets it to 1; restored after the test

    async def go() -> dict[str, Any]:
        server = await asyncio.start_server(_fake_server, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        spec = {"name": "s", "backend": "server", "port": port, "prompts_file": str(prompts),
                "engine": {"model": "/m", "max_model_len": 4096, "enforce_eager": False},
                "tasks": [{"type": "single", "n": 3}, {"type": "accuracy"}]}
        try:
            return await worker.run_spec(spec)
        finally:
            server.close()
            await server.wait_closed()

    result = asyncio.run(go())
    assert started["model"] == "/m" and started["args"] == ["--max-model-len", "4096"] and started["terminated"]
    assert os.environ["VLLM_SERVER_DEV_MODE"] == "1"
    assert result["tasks"][0]["arms"]["untrimmed"]["completed"] == 3
    assert result["errors"] == [("task accuracy: ValueError: accuracy needs the in-process backend (greedy "
                                 "with a newline stop)")]


def test_accuracy_counts_refusals_and_answer_presence_over_the_right_questions(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_vllm = types.ModuleType("vllm")
    fake_vllm.SamplingParams = lambda **kw: kw  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm", fake_vllm)

    class Refuser(FakeEngine):
        async def generate(self, request_id: str, prompt: str, sampling_params: Any) -> Any:
            text = "Paris" if "Paris" in prompt else "Unanswerable."
            yield types.SimpleNamespace(outputs=[types.SimpleNamespace(text=text)])

    rows = [{"id": "a", "arm": "x", "prompt": "Paris", "prompt_tokens": 1, "answers": ["Paris"],
             "answer_in_prompt": True},
            {"id": "b", "arm": "x", "prompt": "Rome", "prompt_tokens": 1, "answers": ["Rome"],
             "answer_in_prompt": True},
            {"id": "c", "arm": "x", "prompt": "none", "prompt_tokens": 1, "answers": [], "is_impossible": True,
             "answer_in_prompt": False}]
    out = asyncio.run(worker.task_accuracy(Refuser(), rows, {"type": "accuracy"}))
    arm = out["arms"]["x"]
    assert (arm["accuracy"], arm["refusal_accuracy"], arm["answer_in_prompt_rate"]) == (0.5, 1.0, 1.0)
