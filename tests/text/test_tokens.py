from __future__ import annotations

import traceback
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragtrim.errors import ConfigError, InputError
from ragtrim.text.tokens import (
    ApproxCounter,
    TiktokenCounter,
    TokenCounter,
    WhitespaceCounter,
    count_at_least,
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

    @pytest.mark.parametrize(
        "text",
        ["." * 4097, "The quick brown fox jumps over the lazy dog. " * 500, "ab" * 5000 + " x" * 3000, "=" * 9000,
         "special token text counts as text: <|endoftext|> <|fim_prefix|>"],
    )
    def test_long_text_counts_exactly(self, text: str) -> None:
        import tiktoken

        enc = tiktoken.get_encoding("cl100k_base_offline")
        assert TiktokenCounter().count(text) == len(enc.encode(text, disallowed_special=()))
        assert TiktokenCounter().count("." * 4097) == 66  # piecewise counting said 65

    @pytest.mark.parametrize("text", [
        "x" * 60_000,
        "intro text, then a blob: " + "QUJD" * 12_000 + " and prose after it.",
        "." * 41_000,
        "가나다라마바사" * 6_000,
        "ab" * 5_000 + " " + "deadbeef" * 5_000,
    ])
    def test_a_long_run_without_whitespace_is_counted_in_blocks_as_an_upper_bound(self, text: str) -> None:
        """Past LONG_RUN characters without whitespace the count is cut into blocks (bounded memory), one token
        added per cut: never below the exact count, so a budget still holds, and over by at most two tokens a cut."""
        import tiktoken

        exact = len(tiktoken.get_encoding("cl100k_base_offline").encode_ordinary(text))
        c = TiktokenCounter()
        cuts = (len(text) - 1) // c.BLOCK
        assert exact <= c.count(text) <= exact + 2 * cuts

    def test_the_tokenizer_never_sees_a_long_run_whole(self, monkeypatch: pytest.MonkeyPatch) -> None:
        c = TiktokenCounter()
        seen: list[int] = []
        raw = c._count_raw
        monkeypatch.setattr(c, "_count_raw", lambda text: seen.append(len(text)) or raw(text))
        c.count("x" * 100_000)
        assert seen and max(seen) <= c.BLOCK

    def test_text_with_whitespace_every_so_often_is_counted_exactly(self) -> None:
        import tiktoken

        text = ("y" * 19_999 + " ") * 4  # runs just under LONG_RUN: counted whole
        exact = len(tiktoken.get_encoding("cl100k_base_offline").encode_ordinary(text))
        assert TiktokenCounter().count(text) == exact

    def test_unknown_encoding(self) -> None:
        with pytest.raises(ConfigError, match="not available offline"):
            TiktokenCounter(encoding="nope").count("x")

    def test_cache(self) -> None:
        c = TiktokenCounter()
        c.count("cached text")
        assert "cached text" in c._cache

    def test_cache_is_bounded_in_bytes(self) -> None:
        c = ApproxCounter()
        big = "word " * 400_000  # 2 MB: above the per-entry limit, counted but not kept
        assert c.count(big) == 400_000
        assert big not in c._cache
        c._cache.max_bytes = 10_000
        for i in range(200):
            c.count(f"text {i} " * 20)
        assert c._cache.nbytes <= 10_000
        assert 0 < len(c._cache) < 200

    @pytest.mark.parametrize("name", ["o200k_base", "gpt2", "p50k_base", "r50k_base", "nope"])
    def test_only_offline_encodings(self, name: str) -> None:
        for spec in (name, f"tiktoken:{name}"):
            with pytest.raises(ConfigError, match=r"not available offline.*allowed: \['cl100k_base'"):
                get_counter(spec) if spec.startswith("tiktoken:") else TiktokenCounter(encoding=name)


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
        with pytest.raises(ConfigError, match=r"'o200k_base' is not available offline.*allowed: \['cl100k_base'"):
            get_counter("o200k_base")

    @pytest.mark.parametrize("spec", ["hf:/tmp/a\x00b", "a\x00b", "hf:\x00"])
    def test_nul_in_path_is_config_error(self, spec: str) -> None:
        with pytest.raises(ConfigError, match="NUL"):
            get_counter(spec)

    def test_file_errors_never_echo_content(self, tmp_path: Path) -> None:
        pytest.importorskip("tokenizers")
        path = tmp_path / "tokenizer.json"
        path.write_text('{"version":"SECRET"}', encoding="utf-8")
        for spec in (f"hf:{path}", str(path), path):
            with pytest.raises(ConfigError) as info:
                get_counter(spec).count("x")
            assert "SECRET" not in str(info.value) and str(path) in str(info.value)
            assert "SECRET" not in "".join(traceback.format_exception(info.value))  # the cause is suppressed too

    def test_config_paths_need_an_allowed_dir(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        path = tmp_path / "tokenizer.json"
        path.write_text("{}", encoding="utf-8")
        monkeypatch.delenv("RAGTRIM_TOKENIZER_DIRS", raising=False)
        with pytest.raises(ConfigError, match=f"{path}.*not under a directory the operator allowed"):
            get_counter(f"hf:{path}", allowed_dirs=[])
        with pytest.raises(ConfigError, match="not under"):
            get_counter(f"hf:{tmp_path}/../{tmp_path.name}/sub/../tokenizer.json", allowed_dirs=[tmp_path / "x"])
        assert get_counter(f"hf:{path}", allowed_dirs=[tmp_path]).name == "hf:tokenizer.json"
        monkeypatch.setenv("RAGTRIM_TOKENIZER_DIRS", str(tmp_path))
        assert get_counter(f"hf:{path}", allowed_dirs=[]).name == "hf:tokenizer.json"

    def test_bad_type(self) -> None:
        with pytest.raises(ConfigError, match="must be a name"):
            get_counter(42)  # type: ignore[arg-type]

    def test_hf_missing_file(self, tmp_path: object) -> None:
        with pytest.raises(ConfigError, match="does not exist"):
            get_counter("hf:/nonexistent/tokenizer.json").count("x")

    def test_named_counters_are_shared(self) -> None:
        assert get_counter() is get_counter("cl100k_base") is get_counter(None)
        assert get_counter("approx") is get_counter("approx")
        assert get_counter("tiktoken:cl100k_base") is not get_counter("approx")
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


class TestCountAtLeast:
    """``count_at_least`` is a lower bound the compression stage trusts to skip counting: it must never exceed the
    exact count, on any text."""

    _ALPHABET = list("ab Z9.,!?'-\n\t\r") + ["\x1c", "\x1f", "\x85", "\xa0", "\u2028", "\u3000", "é", "\u0301", "東",
                                              "😀", "   ", "...", "''", "\n\n"]

    @settings(max_examples=400, deadline=None)
    @given(st.lists(st.sampled_from(_ALPHABET), max_size=60).map("".join))
    def test_never_above_the_count(self, text: str) -> None:
        for counter in (TiktokenCounter(), ApproxCounter(), WhitespaceCounter()):
            assert count_at_least(counter, text) <= counter.count(text), (counter.name, repr(text))

    def test_words_for_ragtrims_counters(self) -> None:
        text = "The Eiffel Tower is 330 metres tall."
        assert count_at_least(TiktokenCounter(), text) == 7
        assert count_at_least(WhitespaceCounter(), text) == WhitespaceCounter().count(text) == 7

    def test_separator_characters_python_splits_on_give_no_bound(self) -> None:
        # str.split() splits "..\x1f.." in two; tiktoken's pre-tokenizer reads it as one piece, which BPE may encode
        # as fewer tokens than str.split() finds words (here it happens to be 3), so no bound is claimed there.
        assert count_at_least(TiktokenCounter(), "..\x1f..") == 0

    def test_other_counters_get_zero(self) -> None:
        class Custom:
            name = "custom"

            def count(self, text: str) -> int:
                return 1

        assert count_at_least(Custom(), "many words here") == 0
