"""The CPU-runtime deployment shape: llama-cpp-python's OpenAI-compatible server with the Gemma 3 270M GGUF, and
ragtrim's ``trim()`` run in line before each request. Pure helpers here; the run is ``ragtrim-bench llamacpp cpu``.

e2e TTFT of a request = its trim time (0 when untrimmed) + the time from send to the first streamed token.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ragtrim_bench.common.stats import mean, summarize
from ragtrim_bench.serve.load import free_port

ARMS = ("untrimmed", "trimmed")


@dataclass(frozen=True)
class ABRecord:
    """One request of one arm. ``trim_ms`` covers counting the passages' tokens, ``trim()`` and building the prompt;
    ``ttft_ms`` runs from send to the first streamed token (on failure, to the end of the response)."""

    question_id: str
    arm: str
    success: bool
    trim_ms: float
    ttft_ms: float
    prompt_tokens: int
    """The prompt counted with the reader's tokenizer (no BOS)."""
    correct: float
    prediction: str = ""
    output_text: str = ""
    error: str = ""
    loadavg_1m: float = 0.0

    @property
    def e2e_ttft_ms(self) -> float:
        return self.trim_ms + self.ttft_ms

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"e2e_ttft_ms": self.e2e_ttft_ms}


def answer_line(text: str) -> str:
    """The generated answer up to the first newline: what vLLM's ``stop=["\\n"]`` returns in the GPU harness."""
    return text.split("\n", 1)[0]


def arm_order(index: int) -> tuple[str, str]:
    """Untrimmed first for even questions, trimmed first for odd ones, so neither arm always follows the other."""
    return ARMS if index % 2 == 0 else (ARMS[1], ARMS[0])


def summarize_ab(records: Sequence[ABRecord]) -> dict[str, Any]:
    """Flat per-arm keys (``untrimmed_p50_e2e_ttft_ms``, ``trimmed_accuracy`` ...) and the comparisons:
    ``p50_e2e_ttft_ratio`` (untrimmed / trimmed, > 1 means trimming pays), ``accuracy_delta`` (trimmed - untrimmed).

    Latency percentiles cover successful requests; accuracy covers every request (a failed one scores 0).
    """
    out: dict[str, Any] = {}
    for arm in ARMS:
        rows = [r for r in records if r.arm == arm]
        ok = [r for r in rows if r.success]
        stats: dict[str, Any] = {"requests": len(rows), "failed": len(rows) - len(ok)}
        for name, values in (("trim", [r.trim_ms for r in ok]), ("ttft", [r.ttft_ms for r in ok]),
                             ("e2e_ttft", [r.e2e_ttft_ms for r in ok])):
            stats |= {k: v for k, v in summarize(values, name, "ms").items() if not k.startswith(("p90_", "max_"))}
        stats["mean_prompt_tokens"] = mean([r.prompt_tokens for r in rows])
        stats["accuracy"] = mean([r.correct for r in rows])
        out |= {f"{arm}_{k}": v for k, v in stats.items()}
    for q in ("p50", "p99"):
        for name in ("ttft", "e2e_ttft"):
            trimmed = out[f"trimmed_{q}_{name}_ms"]
            out[f"{q}_{name}_ratio"] = out[f"untrimmed_{q}_{name}_ms"] / trimmed if trimmed else float("nan")
    out["prompt_token_ratio"] = (out["untrimmed_mean_prompt_tokens"] / out["trimmed_mean_prompt_tokens"]
                                 if out["trimmed_mean_prompt_tokens"] else float("nan"))
    out["accuracy_delta"] = out["trimmed_accuracy"] - out["untrimmed_accuracy"]
    return out


def llama_server_command(*, model_path: str, port: int, alias: str, n_threads: int, n_ctx: int, n_batch: int,
                         python: str = sys.executable) -> list[str]:
    """``python -m llama_cpp.server`` on loopback with the prompt cache off (``--cache False``), the same thread
    count for prefill and decode, and logits for the last token only (``--logits_all False``: the server's default
    computes the 262k-vocabulary logits of every prompt token, which made prefill of the 270M model 4x slower here
    and is needed only for ``echo``/prompt logprobs, as in llama.cpp's own server)."""
    return [python, "-m", "llama_cpp.server", "--model", model_path, "--model_alias", alias,
            "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx), "--n_batch", str(n_batch),
            "--n_threads", str(n_threads), "--n_threads_batch", str(n_threads), "--cache", "False",
            "--logits_all", "False"]


__all__ = ["ARMS", "ABRecord", "answer_line", "arm_order", "free_port", "llama_server_command", "summarize_ab"]
