"""Capacity planner: GPU memory, KV cache, ``max_model_len`` and concurrency from a model config and a workload.

Reads a Hugging Face ``config.json``, counts parameters and KV bytes per token (sliding-window layers capped at
their window), and says how many requests of a workload's p95 shape fit, untrimmed and trimmed side by side.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast, get_args

from ragtrim.errors import ConfigError, InputError, RagtrimError

WeightDtype = Literal["bf16", "fp16", "fp32", "fp8", "int8", "int4"]
KVDtype = Literal["bf16", "fp16", "fp32", "fp8"]
MaxLenPercentile = Literal[95, 99]

GIB = 1024**3

_WEIGHT_BITS: dict[str, int] = {"bf16": 16, "fp16": 16, "fp32": 32, "fp8": 8, "int8": 8, "int4": 4}
_KV_BYTES: dict[str, int] = {"bf16": 2, "fp16": 2, "fp32": 4, "fp8": 1}

FULL_ATTENTION = "full_attention"
SLIDING_ATTENTION = "sliding_attention"

# transformers' Gemma3TextConfig defaults. Published multimodal Gemma 3 configs leave these out of text_config.
_GEMMA3_TEXT_DEFAULTS: dict[str, Any] = {
    "vocab_size": 262_208,
    "hidden_size": 2304,
    "intermediate_size": 9216,
    "num_hidden_layers": 26,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "max_position_embeddings": 131_072,
    "sliding_window": 4096,
    "sliding_window_pattern": 6,
    "tie_word_embeddings": True,
}
_GEMMA2_TEXT_DEFAULTS: dict[str, Any] = {"sliding_window_pattern": 2, "tie_word_embeddings": True}

_LLAMA_LIKE = frozenset({"llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text"})


# --------------------------------------------------------------------------------------------------------------
# Model


@dataclass(frozen=True, kw_only=True)
class ParamCount:
    """Parameters by part; ``total`` counts tied embeddings once."""

    embedding: int
    lm_head: int
    attention: int
    mlp: int
    norms: int
    vision: int

    @property
    def total(self) -> int:
        return self.embedding + self.lm_head + self.attention + self.mlp + self.norms + self.vision


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """The numbers of a decoder-only transformer that decide its memory. Build it with ``from_config_file``."""

    name: str
    architecture: str
    num_hidden_layers: int
    hidden_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    max_position_embeddings: int
    tie_word_embeddings: bool
    layer_types: tuple[str, ...]
    sliding_window: int | None = None
    qkv_bias: bool = False
    o_bias: bool = False
    qk_norm: bool = False
    norms_per_layer: int = 2
    vision_params: int = 0
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in (
            "num_hidden_layers",
            "hidden_size",
            "num_attention_heads",
            "num_key_value_heads",
            "head_dim",
            "intermediate_size",
            "vocab_size",
            "max_position_embeddings",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"{name} must be a positive integer, got {value!r} in model {self.name!r}")
        if len(self.layer_types) != self.num_hidden_layers:
            raise ConfigError(
                f"layer_types has {len(self.layer_types)} entries but num_hidden_layers is {self.num_hidden_layers} "
                f"in model {self.name!r}; give one entry per layer"
            )
        bad = sorted({t for t in self.layer_types if t not in (FULL_ATTENTION, SLIDING_ATTENTION)})
        if bad:
            raise ConfigError(
                f"layer_types may hold only {FULL_ATTENTION!r} and {SLIDING_ATTENTION!r}, got {bad!r} "
                f"in model {self.name!r}"
            )
        if self.num_sliding_layers and (self.sliding_window is None or self.sliding_window <= 0):
            raise ConfigError(
                f"model {self.name!r} has {self.num_sliding_layers} sliding-window layers but sliding_window is "
                f"{self.sliding_window!r}; set sliding_window to the window length in tokens"
            )
        if self.num_attention_heads % self.num_key_value_heads:
            raise ConfigError(
                f"num_attention_heads ({self.num_attention_heads}) must be a multiple of num_key_value_heads "
                f"({self.num_key_value_heads}) in model {self.name!r}"
            )

    # -- construction ------------------------------------------------------------------------------------------

    @classmethod
    def from_config_file(cls, path: str | Path, *, name: str | None = None) -> ModelSpec:
        """Read a Hugging Face ``config.json`` (text-only or multimodal with ``text_config``)."""
        p = Path(path)
        try:
            raw = json.loads(p.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(
                f"model config {str(p)!r} does not exist; pass the path of a config.json"
            ) from None
        except json.JSONDecodeError as exc:
            raise ConfigError(f"model config {str(p)!r} is not valid JSON: {exc}") from None
        if not isinstance(raw, dict):
            raise ConfigError(f"model config {str(p)!r} must hold a JSON object, got {type(raw).__name__}")
        default_name = p.stem if p.name != "config.json" else p.parent.name or "model"
        return cls.from_config_dict(raw, name=name or default_name)

    @classmethod
    def from_config_dict(cls, config: Mapping[str, Any], *, name: str = "model") -> ModelSpec:
        """Build from a parsed ``config.json``; missing Gemma 3 fields take transformers' defaults (noted)."""
        notes: list[str] = []
        outer = dict(config)
        text = dict(outer["text_config"]) if isinstance(outer.get("text_config"), Mapping) else outer
        model_type = str(text.get("model_type") or outer.get("model_type") or "")
        if model_type == "gemma3" and text is not outer:
            model_type = "gemma3_text"
        if model_type in ("gemma3", "gemma3_text"):
            model_type = "gemma3_text"
            defaults = _GEMMA3_TEXT_DEFAULTS
        elif model_type == "gemma2":
            defaults = _GEMMA2_TEXT_DEFAULTS
        else:
            defaults = {}
        used = sorted(k for k in defaults if text.get(k) is None and k != "sliding_window_pattern")
        if used:
            notes.append(f"{model_type} defaults used for {', '.join(used)}")
        merged: dict[str, Any] = {**defaults, **{k: v for k, v in text.items() if v is not None}}
        if model_type and model_type not in _LLAMA_LIKE:
            notes.append(
                f"model_type {model_type!r} is not one the planner knows; counted as a Llama-style decoder"
            )

        def need_int(key: str) -> int:
            value = merged.get(key)
            if value is None:
                raise ConfigError(
                    f"model config {name!r} (model_type {model_type or 'unknown'!r}) has no {key!r}; the planner "
                    f"needs it for a decoder-only transformer (Llama, Mistral, Qwen2/3, Gemma 3)"
                )
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"{key} must be a positive integer, got {value!r} in model config {name!r}")
            return value

        layers = need_int("num_hidden_layers")
        hidden = need_int("hidden_size")
        heads = need_int("num_attention_heads")
        kv_heads = int(merged.get("num_key_value_heads") or heads)
        head_dim_raw = merged.get("head_dim")
        if head_dim_raw is None:
            if hidden % heads:
                raise ConfigError(
                    f"hidden_size {hidden} is not a multiple of num_attention_heads {heads} in model config "
                    f"{name!r}; give head_dim explicitly"
                )
            head_dim = hidden // heads
        else:
            head_dim = int(head_dim_raw)
        intermediate = need_int("intermediate_size")
        vocab = need_int("vocab_size")
        max_pos = need_int("max_position_embeddings")
        tie_default = model_type in ("gemma", "gemma2", "gemma3_text")
        tie = bool(merged.get("tie_word_embeddings", outer.get("tie_word_embeddings", tie_default)))

        window_raw = merged.get("sliding_window")
        window = int(window_raw) if isinstance(window_raw, int) and not isinstance(window_raw, bool) else None
        layer_types = _layer_types(merged, model_type, layers, window, notes)
        if SLIDING_ATTENTION not in layer_types:
            window = None

        attention_bias = bool(merged.get("attention_bias", False))
        qkv_bias = attention_bias or model_type == "qwen2"
        o_bias = attention_bias and model_type != "qwen2"
        qk_norm = model_type in ("qwen3", "gemma3_text")
        norms_per_layer = 4 if model_type in ("gemma2", "gemma3_text") else 2

        vision = 0
        vision_cfg = outer.get("vision_config") if text is not outer else None
        if isinstance(vision_cfg, Mapping):
            vision = _siglip_params(vision_cfg, hidden)
            if vision:
                notes.append(f"vision tower and projector: {vision:,} parameters (SigLIP-style count)")
            else:
                notes.append("vision_config present but not understood; vision tower not counted")
        return cls(
            name=name,
            architecture=model_type or "unknown",
            num_hidden_layers=layers,
            hidden_size=hidden,
            num_attention_heads=heads,
            num_key_value_heads=kv_heads,
            head_dim=head_dim,
            intermediate_size=intermediate,
            vocab_size=vocab,
            max_position_embeddings=max_pos,
            tie_word_embeddings=tie,
            layer_types=layer_types,
            sliding_window=window,
            qkv_bias=qkv_bias,
            o_bias=o_bias,
            qk_norm=qk_norm,
            norms_per_layer=norms_per_layer,
            vision_params=vision,
            notes=tuple(notes),
        )

    # -- derived numbers ---------------------------------------------------------------------------------------

    @property
    def num_full_layers(self) -> int:
        return sum(1 for t in self.layer_types if t == FULL_ATTENTION)

    @property
    def num_sliding_layers(self) -> int:
        return sum(1 for t in self.layer_types if t == SLIDING_ATTENTION)

    def linear_shapes(self) -> tuple[tuple[int, int], ...]:
        """(in_features, out_features) of the quantizable matrices of one decoder layer."""
        q = self.num_attention_heads * self.head_dim
        kv = self.num_key_value_heads * self.head_dim
        h, i = self.hidden_size, self.intermediate_size
        return ((h, q), (h, kv), (h, kv), (q, h), (h, i), (h, i), (i, h))

    def param_count(self) -> ParamCount:
        q = self.num_attention_heads * self.head_dim
        kv = self.num_key_value_heads * self.head_dim
        h, n = self.hidden_size, self.num_hidden_layers
        attention = h * q + 2 * h * kv + q * h
        attention += (q + 2 * kv) * self.qkv_bias + h * self.o_bias
        mlp = 3 * h * self.intermediate_size
        norms = self.norms_per_layer * h + (2 * self.head_dim if self.qk_norm else 0)
        embedding = self.vocab_size * h
        return ParamCount(
            embedding=embedding,
            lm_head=0 if self.tie_word_embeddings else embedding,
            attention=n * attention,
            mlp=n * mlp,
            norms=n * norms + h,  # + the final norm
            vision=self.vision_params,
        )

    def kv_bytes_per_token_per_layer(self, kv_dtype: KVDtype) -> int:
        return 2 * self.num_key_value_heads * self.head_dim * _kv_bytes(kv_dtype)

    def kv_bytes_for_tokens(self, tokens: int, kv_dtype: KVDtype) -> int:
        """KV bytes one request of ``tokens`` tokens holds: full layers keep all, sliding layers their window."""
        capped = min(tokens, self.sliding_window) if self.sliding_window else tokens
        per_layer = self.kv_bytes_per_token_per_layer(kv_dtype)
        return per_layer * (self.num_full_layers * tokens + self.num_sliding_layers * capped)


def _layer_types(
    cfg: Mapping[str, Any], model_type: str, layers: int, window: int | None, notes: list[str]
) -> tuple[str, ...]:
    explicit = cfg.get("layer_types")
    if isinstance(explicit, list):
        if len(explicit) != layers:
            raise ConfigError(
                f"layer_types has {len(explicit)} entries but num_hidden_layers is {layers}; fix the config"
            )
        mapped = tuple(
            SLIDING_ATTENTION if t in ("sliding_attention", "local_attention") else str(t) for t in explicit
        )
        return mapped
    if window is None:
        return (FULL_ATTENTION,) * layers
    if model_type in ("gemma2", "gemma3_text"):
        pattern_raw = cfg.get("sliding_window_pattern", cfg.get("_sliding_window_pattern"))
        pattern = int(pattern_raw) if isinstance(pattern_raw, int) and pattern_raw > 0 else 6
        return tuple(SLIDING_ATTENTION if (i + 1) % pattern else FULL_ATTENTION for i in range(layers))
    if model_type in ("qwen2", "qwen3", "qwen2_moe", "qwen3_moe"):
        if not cfg.get("use_sliding_window", False):
            return (FULL_ATTENTION,) * layers
        first = int(cfg.get("max_window_layers", layers))
        notes.append(f"use_sliding_window: layers {first}..{layers - 1} use a {window}-token window")
        return tuple(SLIDING_ATTENTION if i >= first else FULL_ATTENTION for i in range(layers))
    # Mistral v0.1 and other configs with a plain sliding_window: every layer slides.
    return (SLIDING_ATTENTION,) * layers


def _siglip_params(vision: Mapping[str, Any], text_hidden: int) -> int:
    """SigLIP vision tower + Gemma 3 projector. Returns 0 if the config lacks the numbers."""
    try:
        h = int(vision["hidden_size"])
        inter = int(vision["intermediate_size"])
        layers = int(vision["num_hidden_layers"])
        patch = int(vision["patch_size"])
        image = int(vision["image_size"])
    except (KeyError, TypeError, ValueError):
        return 0
    channels = int(vision.get("num_channels", 3))
    patch_embed = channels * patch * patch * h + h
    positions = (image // patch) ** 2 * h
    per_layer = 4 * (h * h + h) + (h * inter + inter) + (inter * h + h) + 4 * h
    post_norm = 2 * h
    projector = h * text_hidden + h  # mm_input_projection_weight + mm_soft_emb_norm
    return patch_embed + positions + layers * per_layer + post_norm + projector


def _kv_bytes(kv_dtype: str) -> int:
    if kv_dtype not in _KV_BYTES:
        raise ConfigError(f"kv_dtype must be one of {sorted(_KV_BYTES)}, got {kv_dtype!r}")
    return _KV_BYTES[kv_dtype]


def weight_bytes(model: ModelSpec, weight_dtype: WeightDtype, *, group_size: int = 128) -> int:
    """Bytes of the weights. Quantized dtypes quantize the decoder's linear layers only.

    Embeddings, lm_head, norms, biases and the vision tower stay in bf16 (fp32 when ``weight_dtype`` is fp32), as
    vLLM's fp8 and the usual int8/int4 checkpoints keep them. Scale overhead: fp8 one fp32 scale per matrix;
    int8 one fp16 scale per output channel; int4 one fp16 scale per ``group_size`` inputs of each output channel.
    """
    if weight_dtype not in _WEIGHT_BITS:
        raise ConfigError(f"weight_dtype must be one of {sorted(_WEIGHT_BITS)}, got {weight_dtype!r}")
    if group_size <= 0:
        raise ConfigError(f"group_size must be > 0, got {group_size}")
    counts = model.param_count()
    if weight_dtype in ("bf16", "fp16", "fp32"):
        return counts.total * _WEIGHT_BITS[weight_dtype] // 8
    linear = 0
    scales = 0
    for n_in, n_out in model.linear_shapes():
        linear += n_in * n_out
        if weight_dtype == "fp8":
            scales += 4
        elif weight_dtype == "int8":
            scales += 2 * n_out
        else:
            scales += 2 * n_out * math.ceil(n_in / group_size)
    linear *= model.num_hidden_layers
    scales *= model.num_hidden_layers
    rest = counts.total - linear
    return rest * 2 + linear * _WEIGHT_BITS[weight_dtype] // 8 + scales


# --------------------------------------------------------------------------------------------------------------
# Workload


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default). ``q`` in [0, 100]; empty input is an error."""
    if not values:
        raise InputError("percentile of an empty sequence is undefined; give at least one value")
    if not 0 <= q <= 100:
        raise ConfigError(f"percentile q must be in [0, 100], got {q}")
    from ragtrim.bench.stats import percentile as linear_percentile

    return linear_percentile(values, q)


def _ptok(values: Sequence[int], q: float) -> int:
    return math.ceil(percentile(values, q) - 1e-9)


@dataclass(frozen=True, kw_only=True)
class Workload:
    """Token-length distribution of a workload. ``total_*`` are percentiles of input+output per request, when known."""

    name: str
    input_p50_tokens: int
    input_p95_tokens: int
    output_p50_tokens: int
    output_p95_tokens: int
    input_p99_tokens: int | None = None
    output_p99_tokens: int | None = None
    total_p95_tokens: int | None = None
    total_p99_tokens: int | None = None
    requests: int | None = None

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "name" or value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(
                    f"{f.name} must be a non-negative integer, got {value!r} in workload {self.name!r}"
                )
        if self.input_p95_tokens < self.input_p50_tokens:
            raise ConfigError(
                f"input_p95_tokens ({self.input_p95_tokens}) must be >= input_p50_tokens ({self.input_p50_tokens}) "
                f"in workload {self.name!r}"
            )
        if self.output_p95_tokens < self.output_p50_tokens:
            raise ConfigError(
                f"output_p95_tokens ({self.output_p95_tokens}) must be >= output_p50_tokens "
                f"({self.output_p50_tokens}) in workload {self.name!r}"
            )
        if self.input_p95_tokens + self.output_p95_tokens == 0:
            raise ConfigError(f"workload {self.name!r} has zero tokens at p95; give real token counts")

    @property
    def request_p95_tokens(self) -> int:
        """The p95 request shape: input p95 + output p95 (a conservative pairing)."""
        return self.input_p95_tokens + self.output_p95_tokens

    def total_tokens_at(self, pct: MaxLenPercentile) -> tuple[int, str]:
        """Input+output at the percentile, and how it was obtained (per-request sums beat summed percentiles)."""
        if pct == 99:
            if self.total_p99_tokens is not None:
                return self.total_p99_tokens, "p99 of per-request input+output"
            if self.input_p99_tokens is not None and self.output_p99_tokens is not None:
                return self.input_p99_tokens + self.output_p99_tokens, "input p99 + output p99"
        if self.total_p95_tokens is not None:
            return self.total_p95_tokens, "p95 of per-request input+output"
        return self.request_p95_tokens, "input p95 + output p95"

    @classmethod
    def from_percentiles(
        cls,
        *,
        name: str,
        input_p50_tokens: int,
        input_p95_tokens: int,
        output_p95_tokens: int,
        output_p50_tokens: int | None = None,
        input_p99_tokens: int | None = None,
        output_p99_tokens: int | None = None,
    ) -> Workload:
        return cls(
            name=name,
            input_p50_tokens=input_p50_tokens,
            input_p95_tokens=input_p95_tokens,
            output_p50_tokens=output_p95_tokens if output_p50_tokens is None else output_p50_tokens,
            output_p95_tokens=output_p95_tokens,
            input_p99_tokens=input_p99_tokens,
            output_p99_tokens=output_p99_tokens,
        )

    @classmethod
    def from_requests(cls, pairs: Sequence[tuple[int, int]], *, name: str) -> Workload:
        """From per-request (input_tokens, output_tokens) pairs."""
        if not pairs:
            raise InputError(f"workload {name!r} has no requests; give at least one (input, output) pair")
        ins = [p[0] for p in pairs]
        outs = [p[1] for p in pairs]
        totals = [a + b for a, b in pairs]
        return cls(
            name=name,
            input_p50_tokens=_ptok(ins, 50),
            input_p95_tokens=_ptok(ins, 95),
            input_p99_tokens=_ptok(ins, 99),
            output_p50_tokens=_ptok(outs, 50),
            output_p95_tokens=_ptok(outs, 95),
            output_p99_tokens=_ptok(outs, 99),
            total_p95_tokens=_ptok(totals, 95),
            total_p99_tokens=_ptok(totals, 99),
            requests=len(pairs),
        )

    @classmethod
    def from_jsonl(
        cls,
        path: str | Path,
        *,
        input_field: str = "prompt_tokens",
        output_field: str = "output_tokens",
        name: str | None = None,
    ) -> Workload:
        """One JSON object per line with integer ``input_field`` and ``output_field``; blank lines are skipped."""
        p = Path(path)
        pairs: list[tuple[int, int]] = []
        for lineno, line in enumerate(_read_text(p).splitlines(), start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"{p}:{lineno} is not valid JSON: {exc}") from None
            where = f"{p}:{lineno}"
            pairs.append((_int_field(rec, input_field, where), _int_field(rec, output_field, where)))
        return cls.from_requests(pairs, name=name or p.stem)

    @classmethod
    def from_qa_results(
        cls,
        path: str | Path,
        *,
        before_field: str = "tokens_before",
        after_field: str = "tokens_after",
        output_field: str = "output_tokens",
        default_output_tokens: int = 32,
        records_key: str | None = None,
    ) -> tuple[Workload, Workload]:
        """(untrimmed, trimmed) workloads from the QA savings benchmark's per-request records.

        The file is a list of records, or an object holding one (``records_key``, else the first list of objects
        that carries ``before_field``). Output tokens come from ``output_field`` when a record has it, else
        ``default_output_tokens``.
        """
        p = Path(path)
        try:
            raw = json.loads(_read_text(p))
        except json.JSONDecodeError as exc:
            raise InputError(f"QA results {str(p)!r} are not valid JSON: {exc}") from None
        records = _find_records(raw, before_field, records_key, p)
        before: list[tuple[int, int]] = []
        after: list[tuple[int, int]] = []
        for i, rec in enumerate(records):
            where = f"{p} record {i}"
            out = (
                _int_field(rec, output_field, where)
                if isinstance(rec, dict) and output_field in rec
                else None
            )
            out_tokens = default_output_tokens if out is None else out
            before.append((_int_field(rec, before_field, where), out_tokens))
            after.append((_int_field(rec, after_field, where), out_tokens))
        return (
            cls.from_requests(before, name="untrimmed"),
            cls.from_requests(after, name="trimmed"),
        )

    def scaled_input(self, ratio: float, *, name: str) -> Workload:
        """The same workload with every input length divided by ``ratio`` (rounded up), e.g. a 4x trim."""
        if not ratio > 0:
            raise ConfigError(f"trim ratio must be > 0, got {ratio}")

        def s(v: int | None) -> int | None:
            return None if v is None else math.ceil(v / ratio)

        return dataclasses.replace(
            self,
            name=name,
            input_p50_tokens=math.ceil(self.input_p50_tokens / ratio),
            input_p95_tokens=math.ceil(self.input_p95_tokens / ratio),
            input_p99_tokens=s(self.input_p99_tokens),
            total_p95_tokens=None,  # per-request sums are unknown after scaling; fall back to summed percentiles
            total_p99_tokens=None,
        )


def _read_text(p: Path) -> str:
    try:
        return p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"workload file {str(p)!r} does not exist") from None


def _int_field(rec: Any, key: str, where: str) -> int:
    if not isinstance(rec, dict):
        raise InputError(f"{where} must be a JSON object, got {type(rec).__name__}")
    if key not in rec:
        raise InputError(f"{where} has no field {key!r} (fields: {sorted(rec)[:10]}); name the field to read")
    value = rec[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or value != int(value):
        raise InputError(f"{where} field {key!r} must be a non-negative whole number, got {value!r}")
    return int(value)


def _find_records(raw: Any, field_name: str, records_key: str | None, p: Path) -> list[Any]:
    if records_key is not None:
        if not isinstance(raw, dict) or not isinstance(raw.get(records_key), list):
            raise InputError(f"QA results {str(p)!r} have no list under {records_key!r}")
        return cast(list[Any], raw[records_key])
    if isinstance(raw, list):
        return raw
    if isinstance(raw, dict):
        for value in raw.values():
            if isinstance(value, list) and value and isinstance(value[0], dict) and field_name in value[0]:
                return value
    raise InputError(
        f"QA results {str(p)!r} hold no list of records with {field_name!r}; pass records_key or the field names"
    )


# --------------------------------------------------------------------------------------------------------------
# vLLM-compatible KV accounting


@dataclass(frozen=True, kw_only=True)
class VllmKVEstimate:
    """What vLLM's V1 engine would log for this KV memory (``kv_cache_utils._report_kv_cache_config``)."""

    num_blocks: int
    num_groups: int
    layers_per_group: int
    page_size_bytes: int
    kv_cache_tokens: int
    max_model_len: int
    max_concurrency: float
    blocks_per_request: int


SlidingConcurrency = Literal["full_length", "window_plus_batch"]


def vllm_kv_estimate(
    model: ModelSpec,
    kv_memory_bytes: int,
    *,
    kv_dtype: KVDtype,
    max_model_len: int,
    block_size: int = 16,
    max_num_batched_tokens: int = 8192,
    hybrid_kv_cache: bool = True,
    sliding_concurrency: SlidingConcurrency = "full_length",
) -> VllmKVEstimate:
    """Mirror vLLM's block accounting (kv_cache_utils.py, V1 engine, one GPU, no context parallelism).

    - page = block_size * 2 * kv_heads * head_dim * dtype bytes (one layer, one block).
    - Uniform models: one group of all layers; num_blocks = memory // page // layers.
    - Hybrid (full + sliding): layers grouped so every group has the same size (the smaller type's count, or the
      larger one's if within 1.5x); num_blocks = memory // page // group_size; the pool is shared by all groups.
    - "GPU KV cache size" = num_blocks // num_groups * block_size: every token counted in every group, so for
      Gemma 3 it equals memory / (all layers' bytes per token), as if no layer slid.
    - "Maximum concurrency" = num_blocks / blocks one max_model_len request may need: cdiv(len, block) per full
      group, and per sliding group cdiv(len, block) + 1 (``sliding_concurrency="full_length"``, what vLLM 0.26
      logged on an H200 for Gemma 3 270M and 12B at max_model_len 4096 and 16384 with max_num_batched_tokens 8192:
      its concurrency line fell 4x from 4096 to 16384, as if sliding layers held the whole request) or
      cdiv(min(window - 1 + max_num_batched_tokens, len), block) + 1 (``"window_plus_batch"``, vLLM main's
      ``SlidingWindowSpec.max_memory_usage_bytes`` as read in its source; it predicted 1.6x too many there).
    """
    if sliding_concurrency not in ("full_length", "window_plus_batch"):
        raise ConfigError(
            f"sliding_concurrency must be 'full_length' or 'window_plus_batch', got {sliding_concurrency!r}"
        )
    if block_size <= 0:
        raise ConfigError(f"block_size must be > 0, got {block_size}")
    if max_model_len <= 0:
        raise ConfigError(f"max_model_len must be > 0, got {max_model_len}")
    page = block_size * model.kv_bytes_per_token_per_layer(kv_dtype)
    full, sliding = model.num_full_layers, model.num_sliding_layers
    window = model.sliding_window or 0
    if not hybrid_kv_cache and full and sliding:
        full, sliding = full + sliding, 0  # vLLM then treats sliding layers as full attention for KV
    sliding_tokens = (
        max_model_len if sliding_concurrency == "full_length"
        else min(window - 1 + max_num_batched_tokens, max_model_len)
    )
    sliding_blocks = math.ceil(sliding_tokens / block_size) + 1
    full_blocks = math.ceil(max_model_len / block_size)
    if full and sliding:
        small, large = min(full, sliding), max(full, sliding)
        group = large if large < small * 1.5 else small
        full_groups, sliding_groups = math.ceil(full / group), math.ceil(sliding / group)
    else:
        group = full + sliding
        full_groups, sliding_groups = (1, 0) if full else (0, 1)
    num_groups = full_groups + sliding_groups
    num_blocks = max(int(kv_memory_bytes // page // group), 0)
    per_request = full_groups * full_blocks + sliding_groups * sliding_blocks
    return VllmKVEstimate(
        num_blocks=num_blocks,
        num_groups=num_groups,
        layers_per_group=group,
        page_size_bytes=page,
        kv_cache_tokens=num_blocks // num_groups * block_size,
        max_model_len=max_model_len,
        max_concurrency=num_blocks / per_request,
        blocks_per_request=per_request,
    )


_KV_SIZE_RE = re.compile(r"GPU KV cache size:\s*([\d,]+)\s*tokens")
_CONCURRENCY_RE = re.compile(r"Maximum concurrency for\s*([\d,]+)\s*tokens per request:\s*([\d.]+)\s*x")
_AVAILABLE_RE = re.compile(r"Available KV cache memory:\s*([\d.]+)\s*GiB")
_LOADING_RE = re.compile(r"Model loading took\s*([\d.]+)\s*GiB")


def parse_vllm_kv_log(text: str) -> dict[str, float | int]:
    """Pull vLLM's KV capacity lines out of engine logs.

    Keys (present only when found; the last occurrence wins): ``kv_cache_tokens``, ``max_concurrency_len_tokens``,
    ``max_concurrency``, ``available_kv_cache_gib``, ``model_loading_gib``.
    """
    out: dict[str, float | int] = {}
    for m in _KV_SIZE_RE.finditer(text):
        out["kv_cache_tokens"] = int(m.group(1).replace(",", ""))
    for m in _CONCURRENCY_RE.finditer(text):
        out["max_concurrency_len_tokens"] = int(m.group(1).replace(",", ""))
        out["max_concurrency"] = float(m.group(2))
    for m in _AVAILABLE_RE.finditer(text):
        out["available_kv_cache_gib"] = float(m.group(1))
    for m in _LOADING_RE.finditer(text):
        out["model_loading_gib"] = float(m.group(1))
    return out


@dataclass(frozen=True, kw_only=True)
class KVCapacity:
    """Capacity from a given KV memory, in the planner's terms and in vLLM's."""

    kv_memory_gib: float
    kv_bytes_per_token: int
    kv_capacity_tokens: int
    max_model_len: int
    max_concurrency_at_max_model_len: int
    vllm_kv_cache_tokens: int
    vllm_max_concurrency: float
    vllm_num_blocks: int
    max_concurrency_p95: int | None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def planner_from_available_kv_memory(
    kv_gib: float,
    model: ModelSpec,
    *,
    kv_dtype: KVDtype,
    max_model_len: int,
    block_size: int = 16,
    max_num_batched_tokens: int = 8192,
    hybrid_kv_cache: bool = True,
    workload: Workload | None = None,
) -> KVCapacity:
    """Token capacity and concurrency from a KV memory figure such as vLLM's "Available KV cache memory"."""
    if not kv_gib > 0:
        raise ConfigError(f"kv_gib must be > 0, got {kv_gib}")
    kv_bytes = round(kv_gib * GIB)
    per_token = model.kv_bytes_per_token_per_layer(kv_dtype) * model.num_hidden_layers
    v = vllm_kv_estimate(
        model,
        kv_bytes,
        kv_dtype=kv_dtype,
        max_model_len=max_model_len,
        block_size=block_size,
        max_num_batched_tokens=max_num_batched_tokens,
        hybrid_kv_cache=hybrid_kv_cache,
    )
    return KVCapacity(
        kv_memory_gib=kv_gib,
        kv_bytes_per_token=per_token,
        kv_capacity_tokens=kv_bytes // per_token,
        max_model_len=max_model_len,
        max_concurrency_at_max_model_len=kv_bytes // model.kv_bytes_for_tokens(max_model_len, kv_dtype),
        vllm_kv_cache_tokens=v.kv_cache_tokens,
        vllm_max_concurrency=v.max_concurrency,
        vllm_num_blocks=v.num_blocks,
        max_concurrency_p95=(
            None
            if workload is None
            else kv_bytes // model.kv_bytes_for_tokens(workload.request_p95_tokens, kv_dtype)
        ),
    )


# --------------------------------------------------------------------------------------------------------------
# The plan


@dataclass(frozen=True, kw_only=True)
class PlanRequest:
    """Hardware and serving choices. ``non_kv_overhead_gib`` is what vLLM's profiling would reserve besides weights.

    vLLM measures that reserve at start-up (peak activation of a ``max_num_batched_tokens`` dummy batch, the
    sampler's logits, CUDA graphs, the CUDA context and NCCL/cuBLAS workspaces). The default of 4 GiB fits a
    7-27B model on one H100/H200 with default batch limits; read the real value off a vLLM log as
    ``gpu_mem * util - model loading - available KV cache memory``.
    """

    gpu_mem_gib: float
    gpu_memory_utilization: float = 0.9
    weight_dtype: WeightDtype = "bf16"
    weight_group_size: int = 128
    kv_dtype: KVDtype = "bf16"
    non_kv_overhead_gib: float = 4.0
    concurrency: int | None = None
    target_ttft_ms: float | None = None
    prefill_tokens_per_s: float | None = None
    decode_ms_per_token: float | None = None
    users: int | None = None
    block_size: int = 16
    max_num_batched_tokens: int = 8192
    max_len_percentile: MaxLenPercentile = 99
    max_len_headroom: float = 1.1
    round_to_tokens: int = 256
    hybrid_kv_cache: bool = True

    def __post_init__(self) -> None:
        if not (isinstance(self.gpu_mem_gib, (int, float)) and self.gpu_mem_gib > 0):
            raise ConfigError(
                f"gpu_mem_gib must be > 0, got {self.gpu_mem_gib!r}; give the GPU memory in GiB"
            )
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ConfigError(
                f"gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization!r}; vLLM's default is 0.9"
            )
        if self.weight_dtype not in get_args(WeightDtype):
            raise ConfigError(
                f"weight_dtype must be one of {list(get_args(WeightDtype))}, got {self.weight_dtype!r}"
            )
        if self.kv_dtype not in get_args(KVDtype):
            raise ConfigError(f"kv_dtype must be one of {list(get_args(KVDtype))}, got {self.kv_dtype!r}")
        if self.weight_group_size <= 0:
            raise ConfigError(f"weight_group_size must be > 0, got {self.weight_group_size}")
        if self.non_kv_overhead_gib < 0:
            raise ConfigError(f"non_kv_overhead_gib must be >= 0, got {self.non_kv_overhead_gib}")
        for name in ("concurrency", "users"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ConfigError(f"{name} must be > 0 when given, got {value}")
        for name in ("target_ttft_ms", "prefill_tokens_per_s", "decode_ms_per_token"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ConfigError(f"{name} must be > 0 when given, got {value}")
        if self.block_size <= 0:
            raise ConfigError(f"block_size must be > 0, got {self.block_size}")
        if self.max_num_batched_tokens <= 0:
            raise ConfigError(f"max_num_batched_tokens must be > 0, got {self.max_num_batched_tokens}")
        if self.max_len_percentile not in (95, 99):
            raise ConfigError(f"max_len_percentile must be 95 or 99, got {self.max_len_percentile!r}")
        if not self.max_len_headroom >= 1:
            raise ConfigError(
                f"max_len_headroom must be >= 1 (1.1 = 10% headroom), got {self.max_len_headroom}"
            )
        if self.round_to_tokens <= 0 or self.round_to_tokens % self.block_size:
            raise ConfigError(
                f"round_to_tokens must be a positive multiple of block_size {self.block_size}, "
                f"got {self.round_to_tokens}"
            )


@dataclass(frozen=True, kw_only=True)
class WorkloadPlan:
    """One workload's column of the plan."""

    workload: str
    requests: int | None
    input_p50_tokens: int
    input_p95_tokens: int
    input_p99_tokens: int | None
    output_p50_tokens: int
    output_p95_tokens: int
    output_p99_tokens: int | None
    request_p95_tokens: int
    kv_bytes_per_request_p95: int
    max_concurrency_p95: int
    target_concurrency: int | None
    fits_target_concurrency: bool | None
    recommended_max_model_len: int
    max_model_len_basis: str
    workload_exceeds_model_max: bool
    max_concurrency_at_recommended_len: int
    max_concurrency_at_model_max_len: int
    concurrency_lost_at_model_max_len: int
    vllm_max_concurrency_at_recommended_len: float
    vllm_max_concurrency_at_model_max_len: float
    max_input_tokens: int
    max_output_tokens: int
    max_num_seqs: int
    max_num_batched_tokens: int
    ttft_p95_single_ms: float | None
    ttft_p95_burst_ms: float | None
    ttft_target_met: bool | None
    max_requests_per_user_per_min: float | None
    vllm_flags: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class Plan:
    """The capacity plan: model and memory numbers, then one ``WorkloadPlan`` per workload."""

    model_name: str
    architecture: str
    num_layers: int
    num_full_attention_layers: int
    num_sliding_window_layers: int
    sliding_window_tokens: int | None
    model_max_len: int
    param_count: int
    vision_param_count: int
    weight_dtype: str
    weights_bytes: int
    weights_gib: float
    kv_dtype: str
    kv_bytes_per_token: int
    kv_bytes_per_token_full_attention: int
    gpu_mem_gib: float
    gpu_memory_utilization: float
    non_kv_overhead_gib: float
    kv_memory_gib: float
    kv_capacity_tokens: int
    block_size: int
    max_num_batched_tokens: int
    vllm_kv_cache_tokens: int
    vllm_num_blocks: int
    workloads: tuple[WorkloadPlan, ...]
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["workloads"] = [dict(w, vllm_flags=list(w["vllm_flags"])) for w in d["workloads"]]
        d["notes"] = list(self.notes)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Plan:
        data = dict(d)
        data["workloads"] = tuple(
            WorkloadPlan(**{**w, "vllm_flags": tuple(w["vllm_flags"])}) for w in data["workloads"]
        )
        data["notes"] = tuple(data.get("notes", ()))
        return cls(**data)


def _round_up(value: float, multiple: int) -> int:
    return int(math.ceil(value / multiple) * multiple)


def plan(model: ModelSpec, request: PlanRequest, workloads: Workload | Sequence[Workload]) -> Plan:
    """Work out memory, KV capacity and serving limits for each workload. Pure; raises ConfigError if nothing fits."""
    items = (workloads,) if isinstance(workloads, Workload) else tuple(workloads)
    if not items:
        raise ConfigError("plan needs at least one workload")
    notes = list(model.notes)
    wbytes = weight_bytes(model, request.weight_dtype, group_size=request.weight_group_size)
    weights_gib = wbytes / GIB
    budget_gib = request.gpu_mem_gib * request.gpu_memory_utilization
    if weights_gib >= budget_gib:
        raise ConfigError(
            f"weights need {weights_gib:.2f} GiB ({request.weight_dtype}) but gpu_mem_gib * gpu_memory_utilization "
            f"= {budget_gib:.2f} GiB; use a smaller weight_dtype (fp8, int4), a larger GPU or tensor parallelism"
        )
    # Whole bytes, so that hand-worked test values come out exact.
    budget_bytes = round(budget_gib * GIB)
    kv_bytes = budget_bytes - wbytes - round(request.non_kv_overhead_gib * GIB)
    kv_gib = kv_bytes / GIB
    if kv_bytes <= 0:
        raise ConfigError(
            f"no memory left for the KV cache: {budget_gib:.2f} GiB budget - {weights_gib:.2f} GiB weights - "
            f"{request.non_kv_overhead_gib:.2f} GiB non_kv_overhead_gib = {kv_gib:.2f} GiB; raise "
            f"gpu_memory_utilization, lower non_kv_overhead_gib or use a smaller weight_dtype"
        )
    per_layer = model.kv_bytes_per_token_per_layer(request.kv_dtype)
    per_token = per_layer * model.num_hidden_layers
    model_max = model.max_position_embeddings
    v_model_max = vllm_kv_estimate(
        model,
        kv_bytes,
        kv_dtype=request.kv_dtype,
        max_model_len=model_max,
        block_size=request.block_size,
        max_num_batched_tokens=request.max_num_batched_tokens,
        hybrid_kv_cache=request.hybrid_kv_cache,
    )
    if model.kv_bytes_for_tokens(model_max, request.kv_dtype) > kv_bytes:
        notes.append(
            f"one request of the model maximum ({model_max:,} tokens) does not fit in the KV cache; vLLM refuses "
            f"to start with --max-model-len {model_max}"
        )
    wplans = tuple(_plan_workload(model, request, w, kv_bytes, v_model_max.max_concurrency) for w in items)
    return Plan(
        model_name=model.name,
        architecture=model.architecture,
        num_layers=model.num_hidden_layers,
        num_full_attention_layers=model.num_full_layers,
        num_sliding_window_layers=model.num_sliding_layers,
        sliding_window_tokens=model.sliding_window,
        model_max_len=model_max,
        param_count=model.param_count().total,
        vision_param_count=model.vision_params,
        weight_dtype=request.weight_dtype,
        weights_bytes=wbytes,
        weights_gib=round(weights_gib, 3),
        kv_dtype=request.kv_dtype,
        kv_bytes_per_token=per_token,
        kv_bytes_per_token_full_attention=per_layer * model.num_full_layers,
        gpu_mem_gib=request.gpu_mem_gib,
        gpu_memory_utilization=request.gpu_memory_utilization,
        non_kv_overhead_gib=request.non_kv_overhead_gib,
        kv_memory_gib=round(kv_gib, 3),
        kv_capacity_tokens=kv_bytes // per_token,
        block_size=request.block_size,
        max_num_batched_tokens=request.max_num_batched_tokens,
        vllm_kv_cache_tokens=v_model_max.kv_cache_tokens,
        vllm_num_blocks=v_model_max.num_blocks,
        workloads=wplans,
        notes=tuple(notes),
    )


def _plan_workload(
    model: ModelSpec, req: PlanRequest, w: Workload, kv_bytes: int, vllm_conc_model_max: float
) -> WorkloadPlan:
    kv_dtype = req.kv_dtype
    model_max = model.max_position_embeddings
    per_request = model.kv_bytes_for_tokens(w.request_p95_tokens, kv_dtype)
    conc_p95 = kv_bytes // per_request

    need, basis = w.total_tokens_at(req.max_len_percentile)
    wanted = _round_up(need * req.max_len_headroom, req.round_to_tokens)
    exceeds = wanted > model_max
    rec_len = min(wanted, model_max)
    basis = f"{basis} = {need} x {req.max_len_headroom:g}, rounded up to a multiple of {req.round_to_tokens}"
    if exceeds:
        basis += f", capped at the model maximum {model_max}"

    conc_rec = kv_bytes // model.kv_bytes_for_tokens(rec_len, kv_dtype)
    conc_max = kv_bytes // model.kv_bytes_for_tokens(model_max, kv_dtype)
    v_rec = vllm_kv_estimate(
        model,
        kv_bytes,
        kv_dtype=kv_dtype,
        max_model_len=rec_len,
        block_size=req.block_size,
        max_num_batched_tokens=req.max_num_batched_tokens,
        hybrid_kv_cache=req.hybrid_kv_cache,
    )

    out_need = (
        w.output_p99_tokens if req.max_len_percentile == 99 and w.output_p99_tokens else w.output_p95_tokens
    )
    max_output = min(_round_up(max(out_need, 1) * req.max_len_headroom, 16), rec_len - 1)
    max_input = rec_len - max_output
    max_num_seqs = max(1, min(conc_p95, 1024))
    batched = max(req.max_num_batched_tokens, _round_up(w.input_p95_tokens, req.round_to_tokens))

    ttft_single = ttft_burst = None
    ttft_met = None
    if req.prefill_tokens_per_s:
        ttft_single = round(w.input_p95_tokens / req.prefill_tokens_per_s * 1000, 1)
        burst_n = req.concurrency or max_num_seqs
        ttft_burst = round(burst_n * w.input_p95_tokens / req.prefill_tokens_per_s * 1000, 1)
        if req.target_ttft_ms:
            ttft_met = ttft_single <= req.target_ttft_ms
    rate = None
    if req.users and req.decode_ms_per_token:
        # Little's law: sustainable arrivals = slots / request duration, shared by the users.
        duration_s = w.output_p95_tokens * req.decode_ms_per_token / 1000 + (ttft_single or 0) / 1000
        slots = min(req.concurrency or max_num_seqs, max_num_seqs)
        rate = round(slots / max(duration_s, 1e-6) * 60 / req.users, 2)

    flags = (
        f"--max-model-len {rec_len}",
        f"--kv-cache-dtype {'fp8' if kv_dtype == 'fp8' else 'auto'}",
        f"--gpu-memory-utilization {req.gpu_memory_utilization:g}",
        f"--max-num-seqs {max_num_seqs}",
        f"--max-num-batched-tokens {batched}",
    ) + (("--quantization fp8",) if req.weight_dtype == "fp8" else ())
    return WorkloadPlan(
        workload=w.name,
        requests=w.requests,
        input_p50_tokens=w.input_p50_tokens,
        input_p95_tokens=w.input_p95_tokens,
        input_p99_tokens=w.input_p99_tokens,
        output_p50_tokens=w.output_p50_tokens,
        output_p95_tokens=w.output_p95_tokens,
        output_p99_tokens=w.output_p99_tokens,
        request_p95_tokens=w.request_p95_tokens,
        kv_bytes_per_request_p95=per_request,
        max_concurrency_p95=conc_p95,
        target_concurrency=req.concurrency,
        fits_target_concurrency=None if req.concurrency is None else conc_p95 >= req.concurrency,
        recommended_max_model_len=rec_len,
        max_model_len_basis=basis,
        workload_exceeds_model_max=exceeds,
        max_concurrency_at_recommended_len=conc_rec,
        max_concurrency_at_model_max_len=conc_max,
        concurrency_lost_at_model_max_len=conc_rec - conc_max,
        vllm_max_concurrency_at_recommended_len=round(v_rec.max_concurrency, 2),
        vllm_max_concurrency_at_model_max_len=round(vllm_conc_model_max, 2),
        max_input_tokens=max_input,
        max_output_tokens=max_output,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=batched,
        ttft_p95_single_ms=ttft_single,
        ttft_p95_burst_ms=ttft_burst,
        ttft_target_met=ttft_met,
        max_requests_per_user_per_min=rate,
        vllm_flags=flags,
    )


# --------------------------------------------------------------------------------------------------------------
# Report


def format_plan_table(p: Plan) -> str:
    """A plain-text table: model and memory first, then one column per workload."""
    swa = (
        f"{p.num_full_attention_layers} full + {p.num_sliding_window_layers} sliding (window {p.sliding_window_tokens})"
        if p.num_sliding_window_layers
        else f"{p.num_full_attention_layers} full attention"
    )
    budget = p.gpu_mem_gib * p.gpu_memory_utilization
    head = [
        f"Capacity plan: {p.model_name} ({p.architecture}), {p.num_layers} layers: {swa}",
        f"  parameters          {p.param_count:,}"
        + (f" (vision {p.vision_param_count:,})" if p.vision_param_count else ""),
        f"  weights             {p.weights_gib:.2f} GiB ({p.weight_dtype})",
        (
            f"  KV per token        {p.kv_bytes_per_token:,} B all layers, {p.kv_bytes_per_token_full_attention:,} B "
            f"full-attention layers ({p.kv_dtype})"
        ),
        (
            f"  memory              {p.gpu_mem_gib:g} GiB x {p.gpu_memory_utilization:g} = {budget:.2f} GiB - weights "
            f"{p.weights_gib:.2f} - non-KV reserve {p.non_kv_overhead_gib:.2f} = KV {p.kv_memory_gib:.2f} GiB"
        ),
        (
            f"  KV capacity         {p.kv_capacity_tokens:,} tokens (vLLM would log {p.vllm_kv_cache_tokens:,}, "
            f"block {p.block_size})"
        ),
        f"  model max length    {p.model_max_len:,}",
    ]

    def opt(v: float | bool | None) -> str:
        if v is None:
            return "-"
        if isinstance(v, bool):
            return "yes" if v else "no"
        return f"{v:,}" if isinstance(v, int) else f"{v:,.2f}"

    rows: list[tuple[str, list[str]]] = [
        ("requests", [opt(w.requests) for w in p.workloads]),
        (
            "input p50 / p95 / p99",
            [f"{w.input_p50_tokens} / {w.input_p95_tokens} / {opt(w.input_p99_tokens)}" for w in p.workloads],
        ),
        (
            "output p50 / p95 / p99",
            [
                f"{w.output_p50_tokens} / {w.output_p95_tokens} / {opt(w.output_p99_tokens)}"
                for w in p.workloads
            ],
        ),
        ("p95 request tokens", [opt(w.request_p95_tokens) for w in p.workloads]),
        ("KV per p95 request (MiB)", [f"{w.kv_bytes_per_request_p95 / 2**20:,.1f}" for w in p.workloads]),
        ("max concurrency at p95", [opt(w.max_concurrency_p95) for w in p.workloads]),
        (
            "fits target concurrency",
            [f"{opt(w.fits_target_concurrency)} ({opt(w.target_concurrency)})" for w in p.workloads],
        ),
        ("recommended max_model_len", [opt(w.recommended_max_model_len) for w in p.workloads]),
        ("concurrency at that len", [opt(w.max_concurrency_at_recommended_len) for w in p.workloads]),
        ("concurrency at model max", [opt(w.max_concurrency_at_model_max_len) for w in p.workloads]),
        ("lost by model max len", [opt(w.concurrency_lost_at_model_max_len) for w in p.workloads]),
        (
            "vLLM 'max concurrency' (rec)",
            [opt(w.vllm_max_concurrency_at_recommended_len) for w in p.workloads],
        ),
        ("vLLM 'max concurrency' (max)", [opt(w.vllm_max_concurrency_at_model_max_len) for w in p.workloads]),
        ("max input / output tokens", [f"{w.max_input_tokens} / {w.max_output_tokens}" for w in p.workloads]),
        (
            "TTFT p95 single / burst ms",
            [f"{opt(w.ttft_p95_single_ms)} / {opt(w.ttft_p95_burst_ms)}" for w in p.workloads],
        ),
        ("requests/user/min", [opt(w.max_requests_per_user_per_min) for w in p.workloads]),
    ]
    label_w = max(len(r[0]) for r in rows) + 2
    col_w = max([len(w.workload) for w in p.workloads] + [len(c) for _, cells in rows for c in cells]) + 2
    lines = head + ["", " " * label_w + "".join(w.workload.rjust(col_w) for w in p.workloads)]
    lines += [label.ljust(label_w) + "".join(c.rjust(col_w) for c in cells) for label, cells in rows]
    for w in p.workloads:
        lines.append("")
        lines.append(f"vLLM flags ({w.workload}): " + " ".join(w.vllm_flags))
    for note in p.notes:
        lines.append(f"note: {note}")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------------------
# CLI


def add_cli(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the ``plan`` subcommand."""
    sp = subparsers.add_parser(
        "plan", help="GPU memory, KV cache, max_model_len and concurrency for a workload"
    )
    sp.add_argument("--config", required=True, help="path of the model's Hugging Face config.json")
    sp.add_argument("--gpu-mem-gib", type=float, required=True, help="GPU memory in GiB (H200: 141)")
    sp.add_argument("--gpu-util", type=float, default=0.9, help="vLLM --gpu-memory-utilization (default 0.9)")
    sp.add_argument("--weight-dtype", default="bf16", choices=list(get_args(WeightDtype)))
    sp.add_argument("--weight-group-size", type=int, default=128, help="int4 quantization group size")
    sp.add_argument("--kv-dtype", default="bf16", choices=list(get_args(KVDtype)))
    sp.add_argument(
        "--non-kv-overhead-gib",
        type=float,
        default=4.0,
        help="activation peak, CUDA graphs and context that vLLM reserves besides weights (GiB)",
    )
    sp.add_argument("--block-size", type=int, default=16)
    sp.add_argument(
        "--max-num-batched-tokens",
        type=int,
        default=8192,
        help="vLLM's value (8192 for the server on an H100/H200, 16384 for the LLM class)",
    )
    sp.add_argument(
        "--no-hybrid-kv-cache",
        action="store_true",
        help="vLLM's --disable-hybrid-kv-cache-manager: sliding layers keep every token",
    )
    src = sp.add_argument_group("workload (give percentiles, --workload or --qa-results)")
    for side in ("input", "output"):
        for pct in (50, 95, 99):
            src.add_argument(f"--{side}-p{pct}", type=int, default=None)
    src.add_argument(
        "--trim-ratio",
        type=float,
        default=None,
        help="add a trimmed column with every input length divided by this ratio",
    )
    src.add_argument("--workload", default=None, help="JSONL of requests with prompt and output token counts")
    src.add_argument("--trimmed-workload", default=None, help="a second JSONL, shown side by side")
    src.add_argument("--input-field", default="prompt_tokens")
    src.add_argument("--output-field", default="output_tokens")
    src.add_argument("--qa-results", default=None, help="QA savings benchmark JSON with per-request records")
    src.add_argument("--before-field", default="tokens_before")
    src.add_argument("--after-field", default="tokens_after")
    src.add_argument("--records-key", default=None)
    src.add_argument("--qa-output-tokens", type=int, default=32, help="output tokens when records lack them")
    sp.add_argument("--concurrency", type=int, default=None, help="concurrent generating requests to fit")
    sp.add_argument("--target-ttft-ms", type=float, default=None)
    sp.add_argument("--prefill-tokens-per-s", type=float, default=None, help="measured prefill throughput")
    sp.add_argument("--decode-ms-per-token", type=float, default=None, help="measured time per output token")
    sp.add_argument("--users", type=int, default=None, help="users sharing the server, for a per-user rate")
    sp.add_argument("--max-len-percentile", type=int, default=99, choices=[95, 99])
    sp.add_argument("--headroom", type=float, default=1.1, help="max_model_len headroom factor")
    sp.add_argument("--json", action="store_true", help="print the plan as JSON")
    sp.set_defaults(func=run_cli)


def _workloads_from_args(args: argparse.Namespace) -> list[Workload]:
    if args.qa_results:
        before, after = Workload.from_qa_results(
            args.qa_results,
            before_field=args.before_field,
            after_field=args.after_field,
            output_field=args.output_field,
            default_output_tokens=args.qa_output_tokens,
            records_key=args.records_key,
        )
        return [before, after]
    if args.workload:
        items = [
            Workload.from_jsonl(args.workload, input_field=args.input_field, output_field=args.output_field)
        ]
        if args.trimmed_workload:
            items.append(
                Workload.from_jsonl(
                    args.trimmed_workload, input_field=args.input_field, output_field=args.output_field
                )
            )
    else:
        if args.input_p95 is None or args.output_p95 is None:
            raise ConfigError(
                "give a workload: --input-p95 and --output-p95 (with --input-p50), or --workload, or --qa-results"
            )
        items = [
            Workload.from_percentiles(
                name="untrimmed" if args.trim_ratio else "workload",
                input_p50_tokens=args.input_p50 if args.input_p50 is not None else args.input_p95,
                input_p95_tokens=args.input_p95,
                input_p99_tokens=args.input_p99,
                output_p50_tokens=args.output_p50,
                output_p95_tokens=args.output_p95,
                output_p99_tokens=args.output_p99,
            )
        ]
    if args.trim_ratio:
        items.append(items[0].scaled_input(args.trim_ratio, name=f"trimmed {args.trim_ratio:g}x"))
    return items


def run_cli(args: argparse.Namespace) -> int:
    """Run ``ragtrim plan``; prints the table (or JSON) and returns the exit code."""
    import sys

    try:
        model = ModelSpec.from_config_file(args.config)
        request = PlanRequest(
            gpu_mem_gib=args.gpu_mem_gib,
            gpu_memory_utilization=args.gpu_util,
            weight_dtype=args.weight_dtype,
            weight_group_size=args.weight_group_size,
            kv_dtype=args.kv_dtype,
            non_kv_overhead_gib=args.non_kv_overhead_gib,
            concurrency=args.concurrency,
            target_ttft_ms=args.target_ttft_ms,
            prefill_tokens_per_s=args.prefill_tokens_per_s,
            decode_ms_per_token=args.decode_ms_per_token,
            users=args.users,
            block_size=args.block_size,
            max_num_batched_tokens=args.max_num_batched_tokens,
            max_len_percentile=args.max_len_percentile,
            max_len_headroom=args.headroom,
            hybrid_kv_cache=not args.no_hybrid_kv_cache,
        )
        result = plan(model, request, _workloads_from_args(args))
    except RagtrimError as exc:
        print(f"ragtrim plan: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(format_plan_table(result))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Stand-alone entry point: ``python -m ragtrim.plan --config ...``."""
    parser = argparse.ArgumentParser(prog="ragtrim")
    add_cli(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["plan", *(argv if argv is not None else __import__("sys").argv[1:])])
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
