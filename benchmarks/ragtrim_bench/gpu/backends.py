"""Backends behind one interface: vLLM in-process (AsyncLLM), an OpenAI-compatible server over HTTP streaming, and
transformers on CPU for small local runs.

Every backend's ``complete`` returns a RequestRecord with TTFT measured from send to the first generated token and
never raises for a failed request: the error goes into the record.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
import os
import subprocess
import sys
import time
import urllib.parse
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ragtrim.errors import ConfigError, MissingDependencyError
from ragtrim_bench.gpu.records import RequestRecord


class _StreamTimer:
    """TTFT, inter-token gaps and text of one streamed response; ``record`` turns them into a RequestRecord."""

    def __init__(self) -> None:
        self.sent = time.perf_counter()
        self.first: float | None = None
        self.last = self.sent
        self.itl_ms: list[float] = []
        self.parts: list[str] = []

    def mark(self, text: str) -> None:
        """A streamed event that carried new output (``text`` may be empty for a token that decodes to nothing)."""
        now = time.perf_counter()
        if self.first is None:
            self.first = now
        else:
            self.itl_ms.append((now - self.last) * 1000)
        self.last = now
        self.parts.append(text)

    def record(self, request_id: str, arm: str, *, prompt_tokens: int, output_tokens: int,
               empty_error: str) -> RequestRecord:
        end = time.perf_counter()
        return RequestRecord(
            request_id=request_id,
            arm=arm,
            success=self.first is not None,
            prompt_tokens=prompt_tokens,
            output_tokens=output_tokens,
            ttft_ms=((self.first or end) - self.sent) * 1000,
            e2e_ms=(end - self.sent) * 1000,
            itl_ms=tuple(self.itl_ms),
            output_text="".join(self.parts),
            error="" if self.first is not None else empty_error,
        )


class VLLMInProcessBackend:
    """vLLM's AsyncLLM engine in this process (its engine core runs in a child process, started with spawn).

    ``engine_kwargs`` go to ``AsyncEngineArgs`` unchanged (``model``, ``max_model_len``, ``kv_cache_dtype``,
    ``quantization``, ``load_format``, ``enable_prefix_caching``, ``async_scheduling``, ...).
    """

    def __init__(self, *, engine_kwargs: Mapping[str, Any]) -> None:
        self.engine_kwargs = dict(engine_kwargs)
        self._engine: Any = None

    def start(self) -> None:
        try:
            from vllm.engine.arg_utils import AsyncEngineArgs
            from vllm.v1.engine.async_llm import AsyncLLM
        except ImportError as exc:
            raise MissingDependencyError("vllm", "bench", "the vLLM backend (bring your own vLLM)") from exc
        kwargs = dict(self.engine_kwargs)
        if isinstance(kwargs.get("compilation_config"), dict):  # as `vllm.LLM` does; AsyncEngineArgs wants the object
            from vllm.config import CompilationConfig

            kwargs["compilation_config"] = CompilationConfig(**kwargs["compilation_config"])
        self._engine = AsyncLLM.from_engine_args(AsyncEngineArgs(**kwargs))

    async def ready(self, timeout_s: float) -> None:
        if self._engine is None:
            self.start()

    async def complete(self, request_id: str, prompt: str, *, max_tokens: int, arm: str) -> RequestRecord:
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        params = SamplingParams(
            temperature=0.0, max_tokens=max_tokens, ignore_eos=True, output_kind=RequestOutputKind.DELTA
        )
        timer = _StreamTimer()
        n_out = 0
        prompt_tokens = 0
        try:
            async for out in self._engine.generate(request_id=request_id, prompt=prompt, sampling_params=params):
                if out.prompt_token_ids is not None:
                    prompt_tokens = len(out.prompt_token_ids)
                completion = out.outputs[0]
                new = len(completion.token_ids)
                if new:
                    timer.mark(completion.text)
                    n_out += new
        except Exception as exc:  # noqa: BLE001 - recorded per request
            return RequestRecord(request_id, arm, False, error=f"{type(exc).__name__}: {exc}")
        return timer.record(request_id, arm, prompt_tokens=prompt_tokens, output_tokens=n_out,
                            empty_error="no tokens generated")

    def shutdown(self) -> None:
        if self._engine is not None:
            self._engine.shutdown()
            self._engine = None


class OpenAICompletionsBackend:
    """Streams ``/v1/completions`` from an OpenAI-compatible server (e.g. ``vllm serve``), standard library only.

    TTFT runs from just before the request is written to the first SSE event that carries text. ``extra_body`` is
    merged last into every completion request, for a server's own fields or defaults (llama-cpp-python's server:
    ``{"repeat_penalty": 1.0}``, since it defaults to 1.1 where vLLM applies none).
    """

    def __init__(self, *, base_url: str, model: str, timeout_s: float = 600.0,
                 extra_body: Mapping[str, Any] | None = None) -> None:
        parsed = urllib.parse.urlparse(base_url)
        if parsed.scheme != "http" or not parsed.hostname:
            raise ConfigError(f"base_url must be an http://host:port URL, got {base_url!r}")
        self.base_url = base_url
        self.model = model
        self.timeout_s = timeout_s
        self.extra_body = dict(extra_body or {})
        self._host = parsed.hostname
        self._port = parsed.port or 80
        self._prefix = parsed.path.rstrip("/")

    async def _request(self, method: str, path: str, body: bytes | None,
                       headers: dict[str, str] | None = None) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, int]:
        """Send the request and read the status line and headers (into ``headers``, names lower-cased)."""
        reader, writer = await asyncio.open_connection(self._host, self._port)
        head = (
            f"{method} {self._prefix}{path} HTTP/1.1\r\nHost: {self._host}:{self._port}\r\n"
            "Accept: text/event-stream\r\nConnection: close\r\n"
        )
        if body is not None:
            head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        writer.write(head.encode() + b"\r\n" + (body or b""))
        await writer.drain()
        status_line = await reader.readline()
        try:
            status = int(status_line.split()[1])
        except (IndexError, ValueError):
            status = 0
        while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
            if headers is not None:
                name, sep, value = line.decode("latin-1").partition(":")
                if sep:
                    headers[name.strip().lower()] = value.strip()
        return reader, writer, status

    async def ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                _, writer, status = await self._request("GET", "/v1/models", None)
                writer.close()
                if status == 200:
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"server at {self.base_url} not ready after {timeout_s:.0f} s")
            await asyncio.sleep(1.0)

    async def reset_prefix_cache(self) -> bool:
        """``POST /reset_prefix_cache`` (vLLM serves it with ``VLLM_SERVER_DEV_MODE=1``); True when it answered 200."""
        try:
            _, writer, status = await self._request("POST", "/reset_prefix_cache", b"")
            writer.close()
        except OSError:
            return False
        return status == 200

    async def complete(self, request_id: str, prompt: str, *, max_tokens: int, arm: str) -> RequestRecord:
        body = json.dumps(
            {"model": self.model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0.0, "stream": True,
             "ignore_eos": True, "stream_options": {"include_usage": True}} | self.extra_body
        ).encode()
        timer = _StreamTimer()
        usage: dict[str, int] = {}
        headers: dict[str, str] = {}
        try:
            reader, writer, status = await asyncio.wait_for(self._request("POST", "/v1/completions", body, headers),
                                                            self.timeout_s)
            if status != 200:
                detail = (await reader.read(2000)).decode(errors="replace")
                writer.close()
                return RequestRecord(request_id, arm, False, error=f"HTTP {status}: {detail[:300]}")
            async for event in _sse_events(reader):
                if event == "[DONE]":
                    break
                data = json.loads(event)
                if data.get("usage"):
                    usage = data["usage"]
                choices = data.get("choices") or []
                if choices:  # a token, even one that decodes to no text (vLLM sends "" for it): the usage chunk
                    timer.mark(choices[0].get("text") or "")  # has none, and no chunk precedes the first token
            writer.close()
        except Exception as exc:  # noqa: BLE001 - recorded per request
            return RequestRecord(request_id, arm, False, error=f"{type(exc).__name__}: {exc}")
        record = timer.record(request_id, arm, prompt_tokens=int(usage.get("prompt_tokens", 0)),
                              output_tokens=int(usage.get("completion_tokens", len(timer.parts))),
                              empty_error="no tokens streamed")
        return replace(record, recipe=headers.get("x-ragtrim-recipe", ""))


_DEFAULT_ON_SWITCHES = frozenset({"enable_prefix_caching", "enable_chunked_prefill"})


def engine_cli_args(engine_kwargs: Mapping[str, Any]) -> list[str]:
    """``vllm serve`` flags for the same engine the in-process backend builds from ``engine_kwargs`` (``model`` is
    the positional argument and left out): ``max_model_len=4096`` -> ``--max-model-len 4096``, ``True`` -> the bare
    flag, ``None`` -> nothing, dicts and lists as JSON. ``False`` is vLLM's default for most switches and is left
    out, except for those that default to on (``enable_prefix_caching=False`` -> ``--no-enable-prefix-caching``)."""
    out: list[str] = []
    for key, value in engine_kwargs.items():
        if key == "model" or value is None:
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            out.append(flag)
        elif value is False:
            if key in _DEFAULT_ON_SWITCHES:
                out.append("--no-" + key.replace("_", "-"))
        elif isinstance(value, (dict, list)):
            out += [flag, json.dumps(value)]
        else:
            out += [flag, str(value)]
    return out


async def _sse_events(reader: asyncio.StreamReader) -> AsyncIterator[str]:
    """Yield the ``data:`` payloads of a server-sent-event stream (chunked transfer framing tolerated)."""
    while True:
        line = await reader.readline()
        if not line:
            return
        s = line.decode("utf-8", errors="replace").strip()
        if s.startswith("data:"):
            yield s[5:].strip()


def start_vllm_server(
    *, model: str, port: int, extra_args: Sequence[str] = (), log_path: str | None = None, detached: bool = False
) -> subprocess.Popen[bytes]:
    """Start ``vllm serve`` on loopback; the caller waits with ``OpenAICompletionsBackend.ready`` and terminates it.
    ``detached``: in a process session of its own, so that it outlives the command that started it."""
    cmd = [sys.executable, "-m", "vllm.entrypoints.cli.main", "serve", model, "--host", "127.0.0.1",
           "--port", str(port), *extra_args]
    if not log_path:
        return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                                env=dict(os.environ), start_new_session=detached)
    with open(log_path, "wb") as log:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ),
                                start_new_session=detached)


class TransformersBackend:
    """transformers ``generate`` on CPU, one request at a time: for small local runs and for checking prompts.

    TTFT is the time of the first forward pass plus the first token (a streamer marks it).
    """

    def __init__(self, *, model_dir: str, device: str = "cpu") -> None:
        self.model_dir = model_dir
        self.device = device
        self._model: Any = None
        self._tok: Any = None
        self._lock = asyncio.Lock()

    def start(self) -> None:
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as exc:
            raise MissingDependencyError("transformers", "embeddings", "the transformers backend") from exc
        self._tok = AutoTokenizer.from_pretrained(self.model_dir)
        model: Any = AutoModelForCausalLM.from_pretrained(self.model_dir, dtype=torch.float32)
        self._model = model.to(self.device).eval()

    async def ready(self, timeout_s: float) -> None:
        if self._model is None:
            await asyncio.to_thread(self.start)

    def _generate(self, prompt: str, max_tokens: int) -> tuple[int, list[float], int, str, float]:
        import torch

        ids = self._tok(prompt, return_tensors="pt").input_ids.to(self.device)
        times: list[float] = []
        out_ids: list[int] = []
        past = None
        cur = ids
        # transformers names the cache ``cache`` from 5.x on (``past_key_values`` is deprecated there)
        cache_arg = "cache" if "cache" in inspect.signature(self._model.forward).parameters else "past_key_values"
        with torch.no_grad():
            for _ in range(max_tokens):
                res = self._model(input_ids=cur, use_cache=True, **{cache_arg: past})
                past = getattr(res, cache_arg)
                nxt = int(res.logits[0, -1].argmax())
                times.append(time.perf_counter())
                out_ids.append(nxt)
                if nxt == self._tok.eos_token_id:
                    break
                cur = torch.tensor([[nxt]], device=self.device)
        text = self._tok.decode(out_ids, skip_special_tokens=True)
        return ids.shape[1], times, len(out_ids), text, time.perf_counter()

    async def complete(self, request_id: str, prompt: str, *, max_tokens: int, arm: str) -> RequestRecord:
        async with self._lock:
            sent = time.perf_counter()
            try:
                n_prompt, times, n_out, text, end = await asyncio.to_thread(self._generate, prompt, max_tokens)
            except Exception as exc:  # noqa: BLE001 - recorded per request
                return RequestRecord(request_id, arm, False, error=f"{type(exc).__name__}: {exc}")
        itl = tuple((b - a) * 1000 for a, b in itertools.pairwise(times))
        return RequestRecord(request_id, arm, bool(times), n_prompt, n_out, 0.0,
                             ((times[0] if times else end) - sent) * 1000, (end - sent) * 1000, itl, text)
