"""Model side of the planner: a decoder-only transformer's numbers from its Hugging Face ``config.json``
(``ModelSpec``), its parameter count, weight bytes per dtype and KV bytes per token.

``ModelSpec`` is also the type model preparation builds its Gemma 3 shapes on (``ragtrim.bench.model_prep``), and
the dtype names here (``bf16``, ``fp16``, ``fp32``, ...) are the one spelling of both.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ragtrim.errors import ConfigError

FloatDtype = Literal["bf16", "fp16", "fp32"]
"""Unquantized dtypes: weights written by model preparation, and the float choices of the planner."""
WeightDtype = Literal[FloatDtype, "fp8", "int8", "int4"]
KVDtype = Literal[FloatDtype, "fp8"]

TORCH_DTYPE_NAMES: dict[str, str] = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
"""The torch name of each float dtype, for ``config.json``'s ``torch_dtype`` and ``getattr(torch, name)``."""

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
    source: str = ""
    """The config file it was read from (empty when built from a dict)."""

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
        """Read a Hugging Face ``config.json`` (text-only or multimodal with ``text_config``), or the model directory
        that holds it (a downloaded checkpoint). Named (unless ``name`` is given) after the model, not the folder
        that holds the file (``model_name``): the config's ``_name_or_path``, the repository of a Hugging Face cache
        path, a config file's own name (``gemma-3-27b-it.json``), else its architecture and size
        (``Gemma2ForCausalLM 9.2B``); ``source`` keeps the file's path."""
        p = Path(path)
        if p.is_dir():
            if not (p / "config.json").is_file():
                raise ConfigError(
                    f"model directory {str(p)!r} holds no config.json; pass the model's directory or its config.json"
                )
            p = p / "config.json"
        try:
            raw = json.loads(p.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(
                f"model config {str(p)!r} does not exist; pass the path of a config.json or of the model's directory"
            ) from None
        except UnicodeDecodeError as exc:
            raise ConfigError(f"model config {str(p)!r} is not UTF-8 text ({exc.reason}); pass a config.json") from None
        except OSError as exc:
            raise ConfigError(f"model config {str(p)!r} cannot be read: {exc.strerror or exc}") from None
        except json.JSONDecodeError as exc:
            raise ConfigError(f"model config {str(p)!r} is not valid JSON: {exc}") from None
        if not isinstance(raw, dict):
            raise ConfigError(f"model config {str(p)!r} must hold a JSON object, got {type(raw).__name__}")
        given = name or model_name(raw, p)
        spec = cls.from_config_dict(raw, name=given or "model")
        if given is None:  # named by what it is: its architecture class and size
            arch = raw.get("architectures")
            label = arch[0] if isinstance(arch, list) and arch and isinstance(arch[0], str) else spec.architecture
            spec = dataclasses.replace(spec, name=f"{label} {spec.param_count().total / 1e9:.1f}B")
        return dataclasses.replace(spec, source=str(p))

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


def model_name(config: Mapping[str, Any], path: Path) -> str | None:
    """The model's name as its files tell it: ``_name_or_path`` in the config (what transformers saved it from),
    the ``org/name`` of a Hugging Face cache path (``models--org--name/snapshots/<hash>/config.json``), or the name
    of a config file not called ``config.json``; None when only the folder's name is left (``path/``, ``model/``,
    a snapshot hash say nothing about the model)."""
    text = config.get("text_config") if isinstance(config.get("text_config"), Mapping) else {}
    for source in (config, text):
        value = source.get("_name_or_path") if isinstance(source, Mapping) else None
        if isinstance(value, str) and value.strip() and not Path(value).is_absolute():
            return value.strip().rstrip("/")
    for part in reversed(path.resolve().parts):
        if part.startswith("models--") and part.count("--") >= 2:
            return part.removeprefix("models--").replace("--", "/", 1)
    return path.stem if path.name != "config.json" else None


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
