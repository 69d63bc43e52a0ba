"""Capacity planner: hand-worked parameter, KV and concurrency numbers for several architectures."""

from __future__ import annotations

import argparse
import gzip
import json
import re
from pathlib import Path

import pytest

from ragtrim._util.stats import percentile
from ragtrim.errors import ConfigError, InputError, RagtrimError
from ragtrim.plan import add_cli
from ragtrim.plan.estimate import planner_from_available_kv_memory, vllm_kv_estimate
from ragtrim.plan.logs import parse_vllm_kv_log
from ragtrim.plan.model import GIB, ModelSpec, weight_bytes
from ragtrim.plan.planner import Plan, PlanRequest, plan
from ragtrim.plan.report import format_plan_table
from ragtrim.plan.workload import Workload

CONFIGS = Path(__file__).parents[1] / "fixtures" / "configs"


def load(name: str) -> ModelSpec:
    return ModelSpec.from_config_file(CONFIGS / f"{name}.json")


# ---------------------------------------------------------------------------------------------------------------
# Parsing and parameter counts


class TestModelSpec:
    def test_llama_params(self) -> None:
        m = load("llama-3.1-8b")
        c = m.param_count()
        # embedding 128256*4096 = 525,336,576, untied, so lm_head the same
        assert c.embedding == c.lm_head == 525_336_576
        # per layer attention: q 4096*4096 + k,v 2*4096*1024 + o 4096*4096 = 41,943,040; x32
        assert c.attention == 32 * 41_943_040
        # per layer MLP: 3*4096*14336 = 176,160,768; x32
        assert c.mlp == 32 * 176_160_768
        # 2 RMSNorms of 4096 per layer + final norm
        assert c.norms == 32 * 8192 + 4096
        assert c.total == 8_030_261_248  # the published 8.03B
        assert m.num_full_layers == 32 and m.num_sliding_layers == 0 and m.sliding_window is None

    def test_qwen25_has_qkv_bias_and_no_window(self) -> None:
        m = load("qwen2.5-7b-instruct")
        # layer: q 3584^2 + k,v 2*3584*512 + o 3584^2 = 29,360,128, + q/k/v biases 3584+512+512 = 4,608
        assert m.param_count().attention == 28 * 29_364_736
        # 28*(29,364,736 + 3*3584*18944 + 2*3584) + 2*152064*3584 + 3584
        assert m.param_count().total == 7_615_616_512
        assert m.num_sliding_layers == 0  # use_sliding_window is false

    def test_qwen3_qk_norm(self) -> None:
        m = load("qwen3-8b")
        # per layer norms: 2*4096 + q_norm/k_norm 2*128
        assert m.param_count().norms == 36 * (8192 + 256) + 4096
        assert m.param_count().total == 8_190_735_360

    def test_mistral_all_layers_slide(self) -> None:
        m = load("mistral-7b-v0.1")
        assert (m.num_full_layers, m.num_sliding_layers, m.sliding_window) == (0, 32, 4096)
        # Llama-style layers 32*218,112,000 + 2*32000*4096 + 4096
        assert m.param_count().total == 7_241_732_096

    def test_gemma3_270m_layer_types_and_params(self) -> None:
        m = load("gemma-3-270m")
        # 5 local : 1 global -> layers 5, 11, 17 are full
        assert [i for i, t in enumerate(m.layer_types) if t == "full_attention"] == [5, 11, 17]
        assert m.sliding_window == 512 and m.tie_word_embeddings
        c = m.param_count()
        assert c.embedding == 262_144 * 640 and c.lm_head == 0  # tied, counted once
        # layer: q 640*1024 + k,v 2*640*256 + o 1024*640 = 1,638,400; MLP 3*640*2048 = 3,932,160;
        # norms 4*640 + q/k norms 2*256 = 3,072 -> 5,573,632; x18 + 167,772,160 + final 640
        assert c.total == 268_098_176

    def test_gemma3_12b_multimodal_uses_text_config_and_defaults(self) -> None:
        m = load("gemma-3-12b-it")
        assert m.architecture == "gemma3_text"
        # head_dim 256 and vocab 262208 come from Gemma3TextConfig defaults, and the plan says so
        assert m.head_dim == 256 and m.vocab_size == 262_208 and m.max_position_embeddings == 131_072
        assert any("defaults used for head_dim" in n for n in m.notes)
        assert (m.num_full_layers, m.num_sliding_layers, m.sliding_window) == (8, 40, 1024)
        c = m.param_count()
        # text: 48*(47,185,920 + 176,947,200 + 4*3840 + 2*256) + 262208*3840 + 3840
        assert c.total - c.vision == 11_766_034_176
        # SigLIP: patch 3*14*14*1152+1152, pos 4096*1152, 27 layers of 15,239,504, post-norm 2304,
        # projector 1152*3840 + 1152
        assert c.vision == 678_528 + 4_718_592 + 27 * 15_239_504 + 2304 + 1152 * 3840 + 1152

    def test_gemma3_4b_and_27b(self) -> None:
        m4 = load("gemma-3-4b-it")
        assert (
            m4.num_attention_heads,
            m4.num_key_value_heads,
            m4.num_full_layers,
            m4.num_sliding_layers,
        ) == (
            8,
            4,
            5,
            29,
        )
        assert m4.param_count().total - m4.vision_params == 3_880_263_168
        m27 = load("gemma-3-27b-it")
        assert (m27.head_dim, m27.num_full_layers, m27.num_sliding_layers) == (128, 10, 52)
        assert m27.param_count().total - m27.vision_params == 27_009_346_304

    def test_text_only_and_multimodal_12b_agree_on_text(self) -> None:
        a, b = load("gemma-3-12b-text"), load("gemma-3-12b-it")
        assert a.param_count().total == b.param_count().total - b.vision_params

    def test_qwen_use_sliding_window_marks_upper_layers(self) -> None:
        cfg = json.loads((CONFIGS / "qwen2.5-7b-instruct.json").read_text())
        cfg.update(use_sliding_window=True, max_window_layers=20, sliding_window=4096)
        m = ModelSpec.from_config_dict(cfg, name="qwen-swa")
        assert (m.num_full_layers, m.num_sliding_layers, m.sliding_window) == (20, 8, 4096)

    def test_head_dim_derived(self) -> None:
        cfg = json.loads((CONFIGS / "mistral-7b-v0.1.json").read_text())
        assert "head_dim" not in cfg
        assert ModelSpec.from_config_dict(cfg).head_dim == 4096 // 32

    def test_unknown_architecture_missing_layers(self) -> None:
        with pytest.raises(ConfigError, match="num_hidden_layers"):
            ModelSpec.from_config_dict({"model_type": "mystery", "hidden_size": 8}, name="x")

    def test_bad_values(self, tmp_path: Path) -> None:
        cfg = json.loads((CONFIGS / "llama-3.1-8b.json").read_text())
        with pytest.raises(ConfigError, match="hidden_size must be a positive integer, got 0"):
            ModelSpec.from_config_dict({**cfg, "hidden_size": 0})
        with pytest.raises(ConfigError, match="layer_types has 2 entries"):
            ModelSpec.from_config_dict({**cfg, "layer_types": ["full_attention"] * 2})
        with pytest.raises(ConfigError, match="does not exist"):
            ModelSpec.from_config_file(tmp_path / "nope.json")
        bad = tmp_path / "config.json"
        bad.write_text("{not json")
        with pytest.raises(ConfigError, match="not valid JSON"):
            ModelSpec.from_config_file(bad)

    def test_errors_are_ragtrim_and_value_errors(self) -> None:
        with pytest.raises(RagtrimError):
            ModelSpec.from_config_dict({})
        with pytest.raises(ValueError):
            ModelSpec.from_config_dict({})


# ---------------------------------------------------------------------------------------------------------------
# Weights and KV bytes


class TestBytes:
    def test_weight_bytes_llama(self) -> None:
        m = load("llama-3.1-8b")
        assert weight_bytes(m, "bf16") == 2 * 8_030_261_248
        # linear weights per layer 218,103,808 (x32 = 6,979,321,856); the rest (embeddings, lm_head, norms)
        # 1,050,939,392 stays bf16
        rest_bf16 = 2 * 1_050_939_392
        # fp8: 1 byte per linear weight + one fp32 scale per matrix (7 per layer)
        assert weight_bytes(m, "fp8") == rest_bf16 + 6_979_321_856 + 4 * 7 * 32
        # int8: + one fp16 scale per output channel: 2*(4096+1024+1024+4096+14336+14336+4096) per layer
        assert weight_bytes(m, "int8") == rest_bf16 + 6_979_321_856 + 32 * 2 * 43_008
        # int4 g128: half a byte per weight + fp16 scale per 128 inputs per output channel:
        # q,o 32*4096*2 each, k,v 32*1024*2 each, gate,up 32*14336*2 each, down 112*4096*2 = 3,407,872 per layer
        assert weight_bytes(m, "int4") == rest_bf16 + 6_979_321_856 // 2 + 32 * 3_407_872
        assert weight_bytes(m, "int4") == 5_700_591_616

    def test_kv_bytes_per_token(self) -> None:
        llama = load("llama-3.1-8b")
        # 2 (K,V) * 8 kv heads * 128 head_dim * 2 bytes = 4096 per layer
        assert llama.kv_bytes_per_token_per_layer("bf16") == 4096
        assert llama.kv_bytes_per_token_per_layer("fp8") == 2048
        g12 = load("gemma-3-12b-text")
        # 2 * 8 * 256 * 1 byte (fp8) = 4096 per layer
        assert g12.kv_bytes_per_token_per_layer("fp8") == 4096

    def test_sliding_window_capping(self) -> None:
        g12 = load("gemma-3-12b-text")
        # below the window every layer holds every token: 4096 * 48 * 800
        assert g12.kv_bytes_for_tokens(800, "fp8") == 4096 * 48 * 800
        # above: 8 full layers hold 3032 tokens, 40 sliding layers hold 1024
        assert g12.kv_bytes_for_tokens(3032, "fp8") == 4096 * (8 * 3032 + 40 * 1024) == 267_124_736
        mistral = load("mistral-7b-v0.1")
        # every layer capped at 4096: 4096 B * 32 layers * 4096 tokens
        assert mistral.kv_bytes_for_tokens(10_000, "bf16") == 4096 * 32 * 4096
        llama = load("llama-3.1-8b")
        assert llama.kv_bytes_for_tokens(10_000, "bf16") == 4096 * 32 * 10_000


# ---------------------------------------------------------------------------------------------------------------
# vLLM-compatible accounting and its log


class TestVllmCompatible:
    def test_uniform_full_attention(self) -> None:
        llama = load("llama-3.1-8b")
        # 16 GiB; page = 16 tokens * 4096 B = 65,536; blocks = 16 GiB // 65,536 // 32 layers = 8192
        v = vllm_kv_estimate(llama, 16 * GIB, kv_dtype="bf16", max_model_len=8192)
        assert (v.num_blocks, v.num_groups, v.layers_per_group) == (8192, 1, 32)
        assert v.kv_cache_tokens == 8192 * 16 == 131_072
        assert v.max_concurrency == 8192 / (8192 // 16) == 16.0

    def test_gemma3_hybrid_groups(self) -> None:
        g12 = load("gemma-3-12b-text")
        # 8 full + 40 sliding -> group size 8 (40 >= 1.5*8), 1 full group + 5 sliding groups
        # page = 16 * 4096 = 65,536; blocks = 100 GiB // 65,536 // 8 = 204,800
        v = vllm_kv_estimate(g12, 100 * GIB, kv_dtype="fp8", max_model_len=4096, max_num_batched_tokens=8192)
        assert (v.num_blocks, v.num_groups, v.layers_per_group) == (204_800, 6, 8)
        # logged size counts every token in every group: 204,800 // 6 * 16
        assert v.kv_cache_tokens == 34_133 * 16 == 546_128
        # per request: full 4096/16 = 256 blocks; each sliding group cdiv(min(1023 + 8192, 4096), 16) + 1 = 257
        assert v.blocks_per_request == 256 + 5 * 257
        assert v.max_concurrency == pytest.approx(204_800 / 1541)
        # at 32768 the window pays off: full 2048, sliding cdiv(9215, 16) + 1 = 577
        v32k = vllm_kv_estimate(g12, 100 * GIB, kv_dtype="fp8", max_model_len=32_768,
                                sliding_concurrency="window_plus_batch")
        assert v32k.blocks_per_request == 2048 + 5 * 577
        assert v32k.max_concurrency == pytest.approx(204_800 / 4933)
        # vLLM 0.26 as measured (the default): sliding groups count the full length, cdiv(32768, 16) + 1 = 2049
        v26 = vllm_kv_estimate(g12, 100 * GIB, kv_dtype="fp8", max_model_len=32_768)
        assert v26.blocks_per_request == 2048 + 5 * 2049

    def test_hybrid_disabled_treats_sliding_as_full(self) -> None:
        g12 = load("gemma-3-12b-text")
        v = vllm_kv_estimate(g12, 100 * GIB, kv_dtype="fp8", max_model_len=4096, hybrid_kv_cache=False)
        # one group of 48 layers: 1,638,400 // 48 = 34,133 blocks
        assert (v.num_blocks, v.num_groups) == (34_133, 1)
        assert v.max_concurrency == pytest.approx(34_133 / 256)

    def test_all_sliding_mistral(self) -> None:
        mistral = load("mistral-7b-v0.1")
        v = vllm_kv_estimate(
            mistral, 16 * GIB, kv_dtype="bf16", max_model_len=32_768, max_num_batched_tokens=8192,
            sliding_concurrency="window_plus_batch",
        )
        # one sliding group of 32 layers; per request cdiv(min(4095 + 8192, 32768), 16) + 1 = 769 blocks
        assert (v.num_blocks, v.blocks_per_request) == (8192, 769)

    def test_matches_vllm_026_on_h200(self) -> None:
        # benchmarks/results/gpu/gpu_suite_a.json: vLLM 0.26 logged 124.88 GiB available and 443.64x for 16,384
        # tokens per request (Gemma 3 270M, bf16 KV, max_num_batched_tokens 8192). Page = 16 tokens * 1 KiB;
        # blocks = 124.88 GiB // 16,384 B // 3 layers = 2,728,045; per request 1024 + 5 * 1025 = 6149 -> 443.66x
        m = load("gemma-3-270m")
        v = vllm_kv_estimate(m, int(124.88 * GIB), kv_dtype="bf16", max_model_len=16_384)
        assert v.max_concurrency == pytest.approx(443.64, rel=0.01)

    def test_unknown_sliding_rule(self) -> None:
        with pytest.raises(ConfigError, match="sliding_concurrency must be"):
            vllm_kv_estimate(load("gemma-3-270m"), GIB, kv_dtype="bf16", max_model_len=2048,
                             sliding_concurrency="guess")  # type: ignore[arg-type]

    def test_gemma_270m_groups(self) -> None:
        v = vllm_kv_estimate(load("gemma-3-270m"), GIB, kv_dtype="bf16", max_model_len=2048)
        # 3 full + 15 sliding -> group size 3 -> 1 + 5 groups
        assert (v.num_groups, v.layers_per_group) == (6, 3)
        # page = 16 * 2*1*256*2 = 16,384; blocks = 2^30 // 16,384 // 3 = 21,845
        assert v.num_blocks == 21_845 and v.kv_cache_tokens == 21_845 // 6 * 16

    def test_planner_from_available_kv_memory(self) -> None:
        llama = load("llama-3.1-8b")
        w = Workload.from_percentiles(
            name="w", input_p50_tokens=1000, input_p95_tokens=2000, output_p95_tokens=48
        )
        cap = planner_from_available_kv_memory(16.0, llama, kv_dtype="bf16", max_model_len=8192, workload=w)
        # 16 GiB / 131,072 B per token
        assert cap.kv_capacity_tokens == cap.vllm_kv_cache_tokens == 131_072
        assert cap.max_concurrency_at_max_model_len == 16 and cap.vllm_max_concurrency == 16.0
        # 16 GiB // (131,072 * 2048)
        assert cap.max_concurrency_p95 == 64
        assert json.loads(json.dumps(cap.to_dict())) == cap.to_dict()
        with pytest.raises(ConfigError, match="kv_gib must be > 0"):
            planner_from_available_kv_memory(0, llama, kv_dtype="bf16", max_model_len=8192)

    def test_parse_log(self) -> None:
        log = (
            "INFO 11-29 10:00:01 [gpu_model_runner.py:2653] Model loading took 21.9336 GiB memory and 9.41 seconds\n"
            "INFO 11-29 10:00:20 [gpu_worker.py:298] Available KV cache memory: 98.58 GiB\n"
            "INFO 11-29 10:00:20 [kv_cache_utils.py:1087] GPU KV cache size: 1,076,688 tokens\n"
            "INFO 11-29 10:00:20 [kv_cache_utils.py:1091] Maximum concurrency for 4,096 tokens per request: 262.86x\n"
        )
        assert parse_vllm_kv_log(log) == {
            "model_loading_gib": 21.9336,
            "available_kv_cache_gib": 98.58,
            "kv_cache_tokens": 1_076_688,
            "max_concurrency_len_tokens": 4096,
            "max_concurrency": 262.86,
        }
        assert parse_vllm_kv_log("nothing here") == {}
        # the last occurrence wins (a second engine in the same log)
        two = "GPU KV cache size: 10 tokens\nGPU KV cache size: 20 tokens"
        assert parse_vllm_kv_log(two)["kv_cache_tokens"] == 20


# ---------------------------------------------------------------------------------------------------------------
# Workloads


class TestWorkload:
    def test_percentile(self) -> None:
        assert percentile([1, 2, 3, 4], 50) == 2.5
        assert percentile([5], 99) == 5
        with pytest.raises(InputError):
            percentile([], 50)

    def test_from_requests(self) -> None:
        pairs = [(i * 100, 10) for i in range(1, 101)]  # inputs 100..10000
        w = Workload.from_requests(pairs, name="w")
        # linear interpolation: p50 at index 49.5 -> 5050, p95 at 94.05 -> 9505, p99 at 98.01 -> 9901
        assert (w.input_p50_tokens, w.input_p95_tokens, w.input_p99_tokens) == (5050, 9505, 9901)
        assert (w.total_p95_tokens, w.total_p99_tokens, w.requests) == (9515, 9911, 100)
        assert w.total_tokens_at(99) == (9911, "p99 of per-request input+output")

    def test_jsonl_and_fields(self, tmp_path: Path) -> None:
        f = tmp_path / "req.jsonl"
        f.write_text(
            '{"prompt_tokens": 100, "output_tokens": 5}\n\n{"prompt_tokens": 300, "output_tokens": 7}\n'
        )
        w = Workload.from_jsonl(f)
        assert (w.input_p50_tokens, w.output_p95_tokens, w.requests) == (200, 7, 2)
        g = tmp_path / "other.jsonl"
        g.write_text('{"in": 10, "out": 1}\n')
        assert Workload.from_jsonl(g, input_field="in", output_field="out").input_p95_tokens == 10
        with pytest.raises(InputError, match="has no field 'prompt_tokens'"):
            Workload.from_jsonl(g)
        g.write_text('{"prompt_tokens": -1, "output_tokens": 1}\n')
        with pytest.raises(InputError, match="non-negative whole number"):
            Workload.from_jsonl(g)
        with pytest.raises(InputError, match="no requests"):
            Workload.from_jsonl(_empty(tmp_path))

    def test_jsonl_gzip_and_errors_name_the_line(self, tmp_path: Path) -> None:
        gz = tmp_path / "req.jsonl.gz"
        gz.write_bytes(gzip.compress(b'{"prompt_tokens": 100, "output_tokens": 5}\n'))
        assert Workload.from_jsonl(gz).input_p95_tokens == 100
        bad = tmp_path / "bad.jsonl"
        bad.write_text('{"prompt_tokens": 1, "output_tokens": 1}\n{oops\n')
        with pytest.raises(InputError, match=r"bad\.jsonl:2: not valid JSON"):
            Workload.from_jsonl(bad)
        with pytest.raises(InputError, match="workload file .* does not exist"):
            Workload.from_jsonl(tmp_path / "missing.jsonl")

    def test_qa_results(self, tmp_path: Path) -> None:
        records = [{"tokens_before": 3000 + i, "tokens_after": 750 + i} for i in range(10)]
        f = tmp_path / "qa.json"
        f.write_text(json.dumps({"config": {"x": 1}, "per_request": records}))
        before, after = Workload.from_qa_results(f)
        assert (before.name, after.name) == ("untrimmed", "trimmed")
        assert before.output_p95_tokens == 32 and after.input_p50_tokens == 755  # 754.5 rounded up
        f.write_text(json.dumps([{"b": 10, "a": 5, "out": 3}]))
        b2, a2 = Workload.from_qa_results(f, before_field="b", after_field="a", output_field="out")
        assert (b2.input_p95_tokens, a2.input_p95_tokens, a2.output_p95_tokens) == (10, 5, 3)
        with pytest.raises(InputError, match="no list under 'records'"):
            Workload.from_qa_results(f, records_key="records")

    def test_invalid_workload(self) -> None:
        with pytest.raises(ConfigError, match="input_p95_tokens"):
            Workload.from_percentiles(name="w", input_p50_tokens=10, input_p95_tokens=5, output_p95_tokens=1)
        with pytest.raises(ConfigError, match="non-negative"):
            Workload.from_percentiles(name="w", input_p50_tokens=-1, input_p95_tokens=5, output_p95_tokens=1)

    def test_scaled_input(self) -> None:
        w = Workload.from_percentiles(
            name="w", input_p50_tokens=2401, input_p95_tokens=3000, output_p95_tokens=32
        )
        t = w.scaled_input(4, name="t")
        assert (t.input_p50_tokens, t.input_p95_tokens, t.output_p95_tokens) == (601, 750, 32)


def _empty(tmp_path: Path) -> Path:
    p = tmp_path / "empty.jsonl"
    p.write_text("\n")
    return p


# ---------------------------------------------------------------------------------------------------------------
# The plan


NQ = Workload.from_percentiles(
    name="untrimmed", input_p50_tokens=2400, input_p95_tokens=3000, output_p95_tokens=32
)
NQ_4X = NQ.scaled_input(4, name="trimmed 4x")


class TestPlan:
    def test_llama_by_hand(self) -> None:
        llama = load("llama-3.1-8b")
        req = PlanRequest(gpu_mem_gib=80, gpu_memory_utilization=0.9, non_kv_overhead_gib=4, concurrency=32)
        p = plan(llama, req, NQ)
        assert p.weights_bytes == 16_060_522_496
        # 80 * 0.9 = 72 GiB - weights - 4 GiB reserve
        kv = 68 * GIB - 16_060_522_496
        assert p.kv_capacity_tokens == kv // 131_072
        w = p.workloads[0]
        # p95 request 3000 + 32 = 3032 tokens * 131,072 B
        assert w.kv_bytes_per_request_p95 == 3032 * 131_072
        assert w.max_concurrency_p95 == kv // (3032 * 131_072) == 143
        assert w.fits_target_concurrency is True
        # 3032 * 1.1 = 3335.2 -> next multiple of 256
        assert w.recommended_max_model_len == 3584
        assert w.max_concurrency_at_recommended_len == kv // (3584 * 131_072)
        assert w.max_concurrency_at_model_max_len == kv // (131_072 * 131_072) == 3
        assert w.concurrency_lost_at_model_max_len == w.max_concurrency_at_recommended_len - 3
        # output 32 * 1.1 -> 48 (multiple of 16); the rest of max_model_len is input
        assert (w.max_output_tokens, w.max_input_tokens) == (48, 3584 - 48)
        assert "--max-model-len 3584" in w.vllm_flags and "--kv-cache-dtype auto" in w.vllm_flags

    def test_gemma12b_trimmed_side_by_side(self) -> None:
        g12 = load("gemma-3-12b-text")
        req = PlanRequest(gpu_mem_gib=141, gpu_memory_utilization=0.9, kv_dtype="fp8")
        p = plan(g12, req, [NQ, NQ_4X])
        kv = round(141 * 0.9 * GIB) - 2 * 11_766_034_176 - 4 * GIB
        un, tr = p.workloads
        # untrimmed: 3032 tokens, sliding layers capped at 1024
        assert un.max_concurrency_p95 == kv // (4096 * (8 * 3032 + 40 * 1024))
        # trimmed: 750 + 32 = 782 tokens, below the window: every layer
        assert tr.max_concurrency_p95 == kv // (4096 * 48 * 782)
        assert tr.max_concurrency_p95 > un.max_concurrency_p95
        # 782 * 1.1 = 860.2 -> 1024
        assert tr.recommended_max_model_len == 1024
        assert p.kv_bytes_per_token == 196_608 and p.kv_bytes_per_token_full_attention == 32_768
        assert "--kv-cache-dtype fp8" in tr.vllm_flags

    def test_cap_at_model_max(self) -> None:
        llama = load("llama-3.1-8b")
        huge = Workload.from_percentiles(
            name="h", input_p50_tokens=1, input_p95_tokens=200_000, output_p95_tokens=10
        )
        w = plan(llama, PlanRequest(gpu_mem_gib=141), huge).workloads[0]
        assert w.recommended_max_model_len == 131_072 and w.workload_exceeds_model_max
        assert "capped" in w.max_model_len_basis

    def test_p99_preferred_when_known(self) -> None:
        w = Workload.from_percentiles(
            name="w",
            input_p50_tokens=100,
            input_p95_tokens=1000,
            output_p95_tokens=10,
            input_p99_tokens=2000,
            output_p99_tokens=20,
        )
        p = plan(load("llama-3.1-8b"), PlanRequest(gpu_mem_gib=80), w)
        # 2020 * 1.1 = 2222 -> 2304
        assert p.workloads[0].recommended_max_model_len == 2304
        p95 = plan(load("llama-3.1-8b"), PlanRequest(gpu_mem_gib=80, max_len_percentile=95), w)
        # 1010 * 1.1 = 1111 -> 1280
        assert p95.workloads[0].recommended_max_model_len == 1280

    def test_ttft_and_rate(self) -> None:
        req = PlanRequest(
            gpu_mem_gib=80,
            concurrency=10,
            target_ttft_ms=100,
            prefill_tokens_per_s=30_000,
            decode_ms_per_token=10,
            users=5,
        )
        w = plan(load("llama-3.1-8b"), req, NQ).workloads[0]
        # 3000 / 30,000 tok/s = 100 ms; 10 arriving together = 1000 ms
        assert (w.ttft_p95_single_ms, w.ttft_p95_burst_ms, w.ttft_target_met) == (100.0, 1000.0, True)
        # request lasts 32 * 10 ms + 100 ms = 0.42 s; 10 slots / 0.42 s * 60 / 5 users
        assert w.max_requests_per_user_per_min == round(10 / 0.42 * 60 / 5, 2)

    def test_weights_larger_than_memory(self) -> None:
        with pytest.raises(ConfigError, match=r"weights need .* GiB \(bf16\)"):
            plan(load("gemma-3-27b-it"), PlanRequest(gpu_mem_gib=24), NQ)
        with pytest.raises(ConfigError, match="no memory left for the KV cache"):
            plan(load("llama-3.1-8b"), PlanRequest(gpu_mem_gib=20, non_kv_overhead_gib=4), NQ)

    @pytest.mark.parametrize(
        ("kwargs", "match"),
        [
            ({"gpu_memory_utilization": 0.0}, "gpu_memory_utilization must be in"),
            ({"gpu_memory_utilization": 1.5}, "gpu_memory_utilization must be in"),
            ({"gpu_mem_gib": 0}, "gpu_mem_gib must be a finite number > 0"),
            ({"weight_dtype": "fp4"}, "weight_dtype must be one of"),
            ({"kv_dtype": "int4"}, "kv_dtype must be one of"),
            ({"non_kv_overhead_gib": -1}, "non_kv_overhead_gib"),
            ({"concurrency": 0}, "concurrency must be > 0"),
            ({"max_len_headroom": 0.5}, "max_len_headroom"),
            ({"round_to_tokens": 100}, "multiple of block_size"),
            ({"max_len_percentile": 90}, "95 or 99"),
        ],
    )
    def test_invalid_request(self, kwargs: dict[str, object], match: str) -> None:
        args: dict[str, object] = {"gpu_mem_gib": 80, **kwargs}
        with pytest.raises(ConfigError, match=match):
            PlanRequest(**args)  # type: ignore[arg-type]

    def test_json_round_trip(self) -> None:
        p = plan(load("gemma-3-12b-it"), PlanRequest(gpu_mem_gib=141, kv_dtype="fp8"), [NQ, NQ_4X])
        d = p.to_dict()
        again = json.loads(json.dumps(d))
        assert again == d
        assert Plan.from_dict(again) == p
        for key in ("weights_gib", "kv_bytes_per_token", "kv_capacity_tokens"):
            assert key in d
        assert {"max_concurrency_p95", "recommended_max_model_len"} <= set(d["workloads"][0])

    def test_table(self) -> None:
        p = plan(load("gemma-3-12b-it"), PlanRequest(gpu_mem_gib=141, kv_dtype="fp8"), [NQ, NQ_4X])
        text = format_plan_table(p)
        assert "untrimmed" in text and "trimmed 4x" in text
        assert "8 full + 40 sliding (window 1,024)" in text
        assert "--max-model-len 1024" in text

    def test_one_number_governs_and_the_others_say_what_they_are(self) -> None:
        p = plan(load("gemma-3-12b-it"), PlanRequest(gpu_mem_gib=141, kv_dtype="fp8"), [NQ, NQ_4X])
        lines = format_plan_table(p).splitlines()
        governs = [line for line in lines if "governs" in line]
        assert governs[0].startswith("concurrent p95 requests (governs)")
        assert governs[0].split()[-2:] == [f"{w.max_concurrency_p95:,}" for w in p.workloads]
        assert governs[1].startswith("governs: 'concurrent p95 requests': requests of the workload's p95 shape")
        assert all(f"--max-num-seqs {w.max_num_seqs}" in "\n".join(lines) for w in p.workloads)
        assert all(w.max_num_seqs == min(w.max_concurrency_p95, 1024) for w in p.workloads)
        floors = [line for line in lines if line.startswith("  full-length requests guaranteed")]
        vllm = [line for line in lines if line.startswith("  vLLM's 'max concurrency' log")]
        assert len(floors) == len(vllm) == 2 and all(cell.endswith("x") for cell in vllm[0].split()[-2:])

    def test_one_number_format_and_no_rows_nobody_asked_for(self) -> None:
        p = plan(load("gemma-3-12b-it"), PlanRequest(gpu_mem_gib=141), [NQ])
        table = format_plan_table(p).split("\n\ngoverns:")[0]
        rows = table.split("\n\n", 1)[1]  # the table, below the model and memory lines
        assert not re.search(r" -( |$)", rows, re.MULTILINE), rows
        for absent in ("requests/user/min", "TTFT", "GPUs needed", "target concurrency", "p99", "\nrequests "):
            assert absent not in table, absent
        assert "input p50 / p95                 2,400 / 3,000" in table.replace("  ", " ") or "2,400 / 3,000" in table
        assert not re.search(r"(?<![\d,.])\d{4,}(?![\d,x])", rows), "a count without separators"
        with_all = plan(load("gemma-3-12b-it"), PlanRequest(gpu_mem_gib=141, concurrency=300, users=10,
                                                           prefill_tokens_per_s=20_000, decode_ms_per_token=10), [NQ])
        text = format_plan_table(with_all)
        assert "GPUs needed (replicas x TP)" in text and "requests/user/min" in text and "TTFT p95" in text

    def test_a_vllm_figure_below_one_is_flagged(self) -> None:
        """At the model maximum, the 27B model on one 80 GB GPU holds less than one full-length request: vLLM,
        started without --max-model-len, refuses to start; the plan says so."""
        p = plan(load("gemma-3-27b-it"), PlanRequest(gpu_mem_gib=80), [NQ])
        assert p.workloads[0].vllm_max_concurrency_at_model_max_len < 1
        text = format_plan_table(p)
        assert "(<1!)" in text
        assert any("below 1" in n and "refuses to start" in n for n in p.notes)
        assert "note: vLLM's 'max concurrency' at the model maximum (131,072 tokens" in text


class TestMaxModelLen:
    """``max_model_len`` as the operator gives it, and what it costs in plain words."""

    def test_gemma27b_fp8_at_12000(self) -> None:
        g27 = load("gemma-3-27b-it")
        w = Workload.from_percentiles(name="w", input_p50_tokens=3000, input_p95_tokens=6000, output_p95_tokens=500)
        p = plan(g27, PlanRequest(gpu_mem_gib=141, kv_dtype="fp8", max_model_len=12_000), w)
        kv = round(141 * 0.9 * GIB) - 2 * 27_432_406_640 - 4 * GIB
        r = p.workloads[0]
        # fp8: 2 * 16 KV heads * 128 * 1 B = 4,096 B per token and layer; 10 full layers keep 12,000 tokens,
        # 52 sliding layers 1,024
        assert r.max_concurrency_at_recommended_len == kv // (4096 * (10 * 12_000 + 52 * 1024)) == 108
        assert r.max_concurrency_at_model_max_len == kv // (4096 * (10 * 131_072 + 52 * 1024)) == 13
        assert r.recommended_max_model_len == 12_000 and r.max_model_len_given
        assert "--max-model-len 12000" in r.vllm_flags
        # the p95 request: 6,500 tokens
        assert r.max_concurrency_p95 == kv // (4096 * (10 * 6500 + 52 * 1024))
        s = r.max_model_len_statement
        assert "--max-model-len 12,000 guarantees 108 requests of the full 12,000 tokens at once" in s
        assert f"p95 request (6,500 tokens: input p95 6,000 + output p95 500) fits {r.max_concurrency_p95:,}" in s
        # without the flag the planner recommends 6,500 x 1.1 -> 7,168 (no p99 given: input p95 + output p95)
        assert "The recommended value for this workload, 7,168, guarantees" in s
        assert "At the model maximum (131,072) the guarantee would be 13." in s
        assert "given (--max-model-len 12000)" in r.max_model_len_basis

    def test_shorter_than_the_p95_request_says_requests_are_refused(self) -> None:
        p = plan(load("llama-3.1-8b"), PlanRequest(gpu_mem_gib=80, max_model_len=2048), NQ)
        assert "more than 5 % of requests" in p.workloads[0].max_model_len_statement
        p99 = Workload.from_percentiles(name="w", input_p50_tokens=100, input_p95_tokens=1000, output_p95_tokens=10,
                                        input_p99_tokens=2000, output_p99_tokens=20)
        s = plan(load("llama-3.1-8b"), PlanRequest(gpu_mem_gib=80, max_model_len=1536), p99).workloads[0]
        assert "below the workload's p99 of input+output (2,020" in s.max_model_len_statement
        assert "up to 1 % of requests could be refused" in s.max_model_len_statement

    def test_recommended_value_has_a_statement_too(self) -> None:
        w = plan(load("llama-3.1-8b"), PlanRequest(gpu_mem_gib=80), NQ).workloads[0]
        assert not w.max_model_len_given
        assert w.max_model_len_statement.startswith(
            f"--max-model-len 3,584 guarantees {w.max_concurrency_at_recommended_len} requests")

    def test_above_the_model_maximum_or_the_memory_is_an_error(self) -> None:
        with pytest.raises(ConfigError, match=r"above 'llama-3.1-8b'.s maximum of 131,072"):
            plan(load("llama-3.1-8b"), PlanRequest(gpu_mem_gib=80, max_model_len=200_000), NQ)
        # round(21.6 GiB) - 16,060,522,496 B of weights - 4 GiB = 2,837,333,606 B of KV: 21,646 tokens at
        # 131,072 B a token, 21,632 in whole 16-token blocks
        with pytest.raises(ConfigError, match=r"max_model_len 100,000 does not fit.*at most 21,632"):
            plan(load("llama-3.1-8b"), PlanRequest(gpu_mem_gib=24, max_model_len=100_000), NQ)
        with pytest.raises(ConfigError, match="max_model_len must be a whole number"):
            PlanRequest(gpu_mem_gib=80, max_model_len=0)

    def test_cli_flag(self, capsys: pytest.CaptureFixture[str]) -> None:
        args = _parse(["plan", "--config", str(CONFIGS / "gemma-3-27b-it.json"), "--gpu-mem-gib", "141",
                       "--kv-dtype", "fp8", "--input-p95", "6000", "--output-p95", "500", "--max-model-len", "12000"])
        assert args.func(args) == 0
        out = capsys.readouterr().out
        assert "--max-model-len 12000 " in out and "guarantees 108 requests of the full 12,000 tokens" in out


class TestGpusNeeded:
    def test_replicas_at_one_gpu(self) -> None:
        llama = load("llama-3.1-8b")
        w = plan(llama, PlanRequest(gpu_mem_gib=80, concurrency=300), NQ).workloads[0]
        assert w.max_concurrency_p95 == 143 and not w.fits_target_concurrency
        assert (w.replicas_needed, w.gpus_needed) == (3, 3)  # ceil(300 / 143)

    def test_tensor_parallel_splits_weights_and_kv_heads(self) -> None:
        llama = load("llama-3.1-8b")
        p = plan(llama, PlanRequest(gpu_mem_gib=80, concurrency=300, tensor_parallel_size=2), NQ)
        # per GPU: half the weights, 4 of the 8 KV heads: 2 * 4 * 128 * 2 B * 32 layers = 65,536 B a token
        kv = 68 * GIB - 16_060_522_496 // 2
        assert p.weights_gib_per_gpu == round(16_060_522_496 / 2 / GIB, 3)
        assert p.kv_bytes_per_token_per_gpu == 65_536 and p.kv_bytes_per_token == 131_072
        w = p.workloads[0]
        assert w.max_concurrency_p95 == kv // (3032 * 65_536) == 327
        assert (w.replicas_needed, w.gpus_needed) == (1, 2)
        assert "--tensor-parallel-size 2" in w.vllm_flags

    def test_kv_heads_are_replicated_beyond_their_count(self) -> None:
        # Llama 3.1 8B has 8 KV heads: at TP 16 every GPU keeps one, so a replica holds 16 copies' worth of 8 heads
        p = plan(load("llama-3.1-8b"), PlanRequest(gpu_mem_gib=80, tensor_parallel_size=16), NQ)
        assert p.kv_bytes_per_token_per_gpu == 2 * 1 * 128 * 2 * 32

    def test_unsupported_tensor_parallel_size(self) -> None:
        with pytest.raises(ConfigError, match=r"tensor_parallel_size 3 must divide the 32 attention heads.*\[1, 2, 4"):
            plan(load("llama-3.1-8b"), PlanRequest(gpu_mem_gib=80, tensor_parallel_size=3), NQ)

    def test_weights_too_large_suggests_a_tensor_parallel_size(self) -> None:
        # 51.10 GiB of weights; 24 x 0.9 - 4 = 17.6 GiB room: TP 4 (12.8 GiB a GPU) is the first that fits
        with pytest.raises(ConfigError, match="--tensor-parallel-size 4 fits the weights"):
            plan(load("gemma-3-27b-it"), PlanRequest(gpu_mem_gib=24), NQ)
        p = plan(load("gemma-3-27b-it"), PlanRequest(gpu_mem_gib=24, tensor_parallel_size=4), NQ)
        assert p.workloads[0].max_concurrency_p95 > 0

    def test_json_and_text(self, capsys: pytest.CaptureFixture[str]) -> None:
        base = ["plan", "--config", str(CONFIGS / "llama-3.1-8b.json"), "--gpu-mem-gib", "80", "--input-p95", "3000",
                "--output-p95", "32", "--concurrency", "300"]
        args = _parse([*base, "--json"])
        assert args.func(args) == 0
        d = json.loads(capsys.readouterr().out)
        assert d["workloads"][0]["gpus_needed"] == 3 and d["workloads"][0]["replicas_needed"] == 3
        assert d["tensor_parallel_size"] == 1
        args = _parse(base)
        assert args.func(args) == 0
        out = capsys.readouterr().out
        assert "GPUs needed (replicas x TP)" in out and "3 (3 x 1)" in out
        assert "GPUs needed (workload): 3 = 3 replicas x tensor parallelism 1, for 300 concurrent requests" in out

    def test_without_a_target_there_is_no_count(self) -> None:
        w = plan(load("llama-3.1-8b"), PlanRequest(gpu_mem_gib=80), NQ).workloads[0]
        assert w.gpus_needed is None and w.replicas_needed is None
        assert "GPUs needed" not in format_plan_table(plan(load("llama-3.1-8b"), PlanRequest(gpu_mem_gib=80), NQ))


class TestHowComputed:
    def test_gemma12b_steps_carry_the_plan_numbers(self) -> None:
        p = plan(load("gemma-3-12b-it"), PlanRequest(gpu_mem_gib=141, kv_dtype="fp8"), [NQ, NQ_4X])
        steps = "\n".join(p.how_computed)
        assert f"weights: {p.param_count:,} parameters x 2 B (bf16) = {p.weights_gib:.2f} GiB" in steps
        assert "2 (K and V) x 8 KV heads x head_dim 256 x 1 B (fp8) = 4,096 B" in steps
        assert "8 full-attention layers x T + 40 sliding-window layers x min(T, 1,024)" in steps
        assert "- non-KV reserve 4 GiB" in steps and f"= {p.kv_memory_gib:.2f} GiB for the KV cache" in steps
        assert "x headroom 1.1 (--headroom), rounded up to a multiple of 256" in steps
        text = format_plan_table(p)
        assert "How this was computed:" in text and "sliding-window layers x min(T, 1,024)" in text
        assert p.to_dict()["how_computed"] == list(p.how_computed)

    def test_gemma2_9b_by_hand(self) -> None:
        """The operator's hand computation: 18.48 GB of BF16 weights, 344,064 KV bytes per token."""
        g9 = ModelSpec.from_config_file(CONFIGS / "gemma-2-9b")
        p = plan(g9, PlanRequest(gpu_mem_gib=80), NQ)
        assert p.weights_bytes == 18_483_411_968 and p.kv_bytes_per_token == 344_064
        assert (p.num_full_attention_layers, p.num_sliding_window_layers, p.sliding_window_tokens) == (21, 21, 4096)
        assert "21 full-attention layers x T + 21 sliding-window layers x min(T, 4,096)" in "\n".join(p.how_computed)


class TestModelDirectory:
    def test_a_directory_holding_config_json(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        model_dir = tmp_path / "Llama-3.1-8B-Instruct"
        model_dir.mkdir()
        (model_dir / "config.json").write_text((CONFIGS / "llama-3.1-8b.json").read_text())
        spec = ModelSpec.from_config_file(model_dir)
        assert spec.name == "LlamaForCausalLM 8.0B"  # the model, not the folder (which may be "path" or a hash)
        assert spec.source == str(model_dir / "config.json")
        assert spec.param_count().total == load("llama-3.1-8b").param_count().total
        args = _parse(["plan", "--config", str(model_dir), "--gpu-mem-gib", "80", "--input-p95", "3000",
                       "--output-p95", "32"])
        assert args.func(args) == 0
        out = capsys.readouterr().out
        assert "Capacity plan: LlamaForCausalLM 8.0B (llama)" in out and f"config              {model_dir}" in out

    @pytest.mark.parametrize(("where", "extra", "name"), [
        ("snapshots/abc123", {"_name_or_path": "meta-llama/Llama-3.1-8B-Instruct"}, "meta-llama/Llama-3.1-8B-Instruct"),
        ("hub/models--meta-llama--Llama-3.1-8B/snapshots/0e9e39f2", {}, "meta-llama/Llama-3.1-8B"),
        ("path", {}, "LlamaForCausalLM 8.0B"),
        ("path", {"_name_or_path": "/home/me/checkpoints/run-7"}, "LlamaForCausalLM 8.0B"),
    ])
    def test_named_after_the_model(self, tmp_path: Path, where: str, extra: dict[str, str], name: str) -> None:
        folder = tmp_path / where
        folder.mkdir(parents=True)
        config = {**json.loads((CONFIGS / "llama-3.1-8b.json").read_text()), **extra}
        (folder / "config.json").write_text(json.dumps(config))
        assert ModelSpec.from_config_file(folder / "config.json").name == name

    def test_a_directory_without_config_json(self, tmp_path: Path) -> None:
        with pytest.raises(ConfigError, match="holds no config.json"):
            ModelSpec.from_config_file(tmp_path)

    def test_cli_directory_without_config_is_a_usage_error(self, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
        from ragtrim.cli import main

        assert main(["plan", "--config", str(tmp_path), "--gpu-mem-gib", "80", "--input-p95", "10",
                     "--output-p95", "1"]) == 2
        assert "holds no config.json" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------------------------
# CLI


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="ragtrim")
    add_cli(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(argv)


class TestCli:
    def test_percentiles_with_trim_ratio_json(self, capsys: pytest.CaptureFixture[str]) -> None:
        args = _parse(
            [
                "plan",
                "--config",
                str(CONFIGS / "gemma-3-12b-it.json"),
                "--gpu-mem-gib",
                "141",
                "--kv-dtype",
                "fp8",
                "--input-p50",
                "2400",
                "--input-p95",
                "3000",
                "--output-p95",
                "32",
                "--trim-ratio",
                "4",
                "--json",
            ]
        )
        assert args.func(args) == 0
        d = json.loads(capsys.readouterr().out)
        assert [w["workload"] for w in d["workloads"]] == ["untrimmed", "trimmed 4x"]

    def test_qa_results_table(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        f = tmp_path / "qa.json"
        f.write_text(json.dumps([{"tokens_before": 3000, "tokens_after": 750}] * 3))
        args = _parse(
            [
                "plan",
                "--config",
                str(CONFIGS / "llama-3.1-8b.json"),
                "--gpu-mem-gib",
                "80",
                "--qa-results",
                str(f),
                "--concurrency",
                "32",
            ]
        )
        assert args.func(args) == 0
        assert "trimmed" in capsys.readouterr().out

    def test_error_exit_code(self, capsys: pytest.CaptureFixture[str]) -> None:
        args = _parse(
            [
                "plan",
                "--config",
                str(CONFIGS / "llama-3.1-8b.json"),
                "--gpu-mem-gib",
                "80",
                "--gpu-util",
                "1.2",
                "--input-p95",
                "10",
                "--output-p95",
                "1",
            ]
        )
        assert args.func(args) == 2
        assert "gpu_memory_utilization must be in (0, 1]" in capsys.readouterr().err

    def test_missing_workload(self, capsys: pytest.CaptureFixture[str]) -> None:
        args = _parse(["plan", "--config", str(CONFIGS / "llama-3.1-8b.json"), "--gpu-mem-gib", "80"])
        assert args.func(args) == 2
        assert "give a workload" in capsys.readouterr().err


def test_plan_imports_no_evaluation_code() -> None:
    """The arrow runs one way: the planner (library) never imports ragtrim.bench (evaluation)."""
    import subprocess
    import sys

    code = "import sys, ragtrim.plan; print(sorted(m for m in sys.modules if m.startswith('ragtrim.bench')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"
