"""The OpenAI streaming client against a small local fake server on loopback."""

from __future__ import annotations

import asyncio
import json

import pytest

from ragtrim.errors import ConfigError
from ragtrim_bench.gpu.backends import OpenAICompletionsBackend


async def _fake_server(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    request_line = await reader.readline()
    length = 0
    while (line := await reader.readline()) not in (b"\r\n", b""):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    body = json.loads(await reader.readexactly(length)) if length else {}
    if request_line.startswith(b"GET /v1/models"):
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{\"data\": []}")
    elif body.get("prompt") == "fail":
        writer.write(b"HTTP/1.1 400 Bad Request\r\n\r\n{\"error\": \"bad prompt\"}")
    else:
        recipe = b"X-Ragtrim-Recipe: bm25\r\n" if body.get("prompt") == "gateway" else b""
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n" + recipe + b"\r\n")
        # "special": two tokens that decode to no text (a special token, half a character) before the first text
        tokens, gap = (["", "", "Paris"], 0.3) if body.get("prompt") == "special" else (["Pa", "ris", "."], 0.01)
        for tok in tokens:
            writer.write(f"data: {json.dumps({'choices': [{'text': tok}]})}\n\n".encode())
            await writer.drain()
            await asyncio.sleep(gap)
        usage = {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3}}
        writer.write(f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode())
    await writer.drain()
    writer.close()


async def _with_server(coro_fn):  # type: ignore[no-untyped-def]
    server = await asyncio.start_server(_fake_server, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        return await coro_fn(OpenAICompletionsBackend(base_url=f"http://127.0.0.1:{port}", model="m"))
    finally:
        server.close()
        await server.wait_closed()


def test_streaming_ttft_and_tokens() -> None:
    async def go(b: OpenAICompletionsBackend):  # type: ignore[no-untyped-def]
        await b.ready(5)
        return await b.complete("r1", "The capital of France is", max_tokens=3, arm="a")

    rec = asyncio.run(_with_server(go))
    assert rec.success and rec.output_text == "Paris."
    assert (rec.prompt_tokens, rec.output_tokens) == (7, 3)
    assert 0 < rec.ttft_ms < rec.e2e_ms
    assert len(rec.itl_ms) == 2 and all(x > 5 for x in rec.itl_ms)


def test_ttft_is_the_first_token_even_when_it_decodes_to_no_text() -> None:
    """vLLM streams a chunk for every token, with empty text for one that decodes to nothing; the first such chunk is
    the first token (as vLLM's own benchmark counts it), not the first chunk with text, which comes decode steps
    later."""
    async def go(b: OpenAICompletionsBackend):  # type: ignore[no-untyped-def]
        return await b.complete("s", "special", max_tokens=3, arm="a")

    rec = asyncio.run(_with_server(go))
    assert rec.success and rec.output_text == "Paris"
    assert len(rec.itl_ms) == 2 and rec.ttft_ms < min(rec.itl_ms)


def test_the_gateways_recipe_header_is_recorded() -> None:
    async def go(b: OpenAICompletionsBackend):  # type: ignore[no-untyped-def]
        return await b.complete("g", "gateway", max_tokens=3, arm="a"), await b.complete("v", "vllm", max_tokens=3,
                                                                                            arm="a")

    from_gateway, from_vllm = asyncio.run(_with_server(go))
    assert from_gateway.success and from_gateway.recipe == "bm25"
    assert from_vllm.success and from_vllm.recipe == ""


def test_http_error_is_recorded_not_raised() -> None:
    async def go(b: OpenAICompletionsBackend):  # type: ignore[no-untyped-def]
        return await b.complete("r2", "fail", max_tokens=3, arm="a")

    rec = asyncio.run(_with_server(go))
    assert not rec.success and rec.error.startswith("HTTP 400")


def test_connection_refused_is_recorded() -> None:
    b = OpenAICompletionsBackend(base_url="http://127.0.0.1:9", model="m")
    rec = asyncio.run(b.complete("r3", "x", max_tokens=1, arm="a"))
    assert not rec.success and rec.error


def test_bad_url() -> None:
    with pytest.raises(ConfigError, match="http://host:port"):
        OpenAICompletionsBackend(base_url="ftp://x", model="m")


def test_engine_cli_args_mirror_the_engine_kwargs() -> None:
    from ragtrim_bench.gpu.backends import engine_cli_args

    args = engine_cli_args({"model": "/m", "max_model_len": 4096, "kv_cache_dtype": "fp8", "enforce_eager": True,
                            "seed": 0, "quantization": None, "enable_prefix_caching": False,
                            "async_scheduling": False, "compilation_config": {"level": 3}})
    assert args == ["--max-model-len", "4096", "--kv-cache-dtype", "fp8", "--enforce-eager", "--seed", "0",
                    "--no-enable-prefix-caching", "--compilation-config", '{"level": 3}']


def test_reset_prefix_cache_reports_the_status() -> None:
    async def go(b: OpenAICompletionsBackend):  # type: ignore[no-untyped-def]
        return await b.reset_prefix_cache()

    assert asyncio.run(_with_server(go)) is True  # the fake server answers 200 to any POST
    assert asyncio.run(OpenAICompletionsBackend(base_url="http://127.0.0.1:9", model="m").reset_prefix_cache()) is False


def test_in_process_backend_builds_the_compilation_config(monkeypatch: pytest.MonkeyPatch) -> None:
    """A dict ``compilation_config`` (as JSON specs carry it) becomes vLLM's CompilationConfig (fake vLLM modules)."""
    import sys
    import types

    from ragtrim_bench.gpu.backends import VLLMInProcessBackend

    seen: dict[str, object] = {}

    class CompilationConfig:
        def __init__(self, **kw: object) -> None:
            self.kw = kw

    class AsyncEngineArgs:
        def __init__(self, **kw: object) -> None:
            seen.update(kw)

    class AsyncLLM:
        @staticmethod
        def from_engine_args(args: object) -> str:
            return "engine"

    modules = {"vllm": {}, "vllm.config": {"CompilationConfig": CompilationConfig},
               "vllm.engine": {}, "vllm.engine.arg_utils": {"AsyncEngineArgs": AsyncEngineArgs},
               "vllm.v1": {}, "vllm.v1.engine": {}, "vllm.v1.engine.async_llm": {"AsyncLLM": AsyncLLM}}
    for name, attrs in modules.items():
        mod = types.ModuleType(name)
        for k, v in attrs.items():
            setattr(mod, k, v)
        monkeypatch.setitem(sys.modules, name, mod)
    backend = VLLMInProcessBackend(engine_kwargs={"model": "m", "compilation_config": {"cudagraph_mode": "PIECEWISE"}})
    backend.start()
    assert backend._engine == "engine" and seen["model"] == "m"
    cc = seen["compilation_config"]
    assert isinstance(cc, CompilationConfig) and cc.kw == {"cudagraph_mode": "PIECEWISE"}
    assert backend.engine_kwargs["compilation_config"] == {"cudagraph_mode": "PIECEWISE"}  # the spec is unchanged


def test_extra_body_is_merged_last_into_the_request() -> None:
    """Server-specific fields reach the server and override the defaults (ignore_eos here)."""
    seen: list[dict[str, object]] = []

    async def server(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readline()
        length = 0
        while (line := await reader.readline()) not in (b"\r\n", b""):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        seen.append(json.loads(await reader.readexactly(length)))
        writer.write(b"HTTP/1.1 200 OK\r\n\r\ndata: " + json.dumps({"choices": [{"text": "x"}]}).encode()
                     + b"\n\ndata: [DONE]\n\n")
        await writer.drain()
        writer.close()

    async def go() -> bool:
        srv = await asyncio.start_server(server, "127.0.0.1", 0)
        port = srv.sockets[0].getsockname()[1]
        try:
            backend = OpenAICompletionsBackend(base_url=f"http://127.0.0.1:{port}", model="m",
                                               extra_body={"ignore_eos": False, "repeat_penalty": 1.0})
            return (await backend.complete("r", "p", max_tokens=2, arm="a")).success
        finally:
            srv.close()
            await srv.wait_closed()

    assert asyncio.run(go())
    assert seen[0]["ignore_eos"] is False and seen[0]["repeat_penalty"] == 1.0 and seen[0]["max_tokens"] == 2
