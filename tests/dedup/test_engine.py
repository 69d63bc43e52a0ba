"""The near-duplicate engine on its own: each candidate strategy against a brute-force greedy pass."""

from __future__ import annotations

import random
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from ragtrim.dedup.engine import (
    LSH_MAX_CANDIDATES,
    BlockedMatch,
    CandidateStrategy,
    ExactJaccard,
    InvertedIndexCandidates,
    LshCandidates,
    NearDuplicate,
    PrefixFilterCandidates,
    build_shingle_sets,
    candidate_index,
    find_near_duplicates,
)
from ragtrim.dedup.shingles import jaccard, nfkc_lower
from ragtrim.stages.dedup import PAIRWISE_MAX_CHUNKS


def brute_force(sets: dict[int, set[int]], order: list[int], threshold: float,
                protected: frozenset[int] = frozenset()) -> list[NearDuplicate]:
    """Compare each visited set with every kept one: the definition the strategies must meet."""
    kept: list[int] = []
    found: list[NearDuplicate] = []
    for i in order:
        if not sets[i]:
            continue
        best = max(((jaccard(sets[i], sets[j]), -r, j) for r, j in enumerate(kept)), default=(-1.0, 0, -1))
        if best[0] >= threshold and i not in protected:
            found.append(NearDuplicate(i, best[2], best[0]))
        else:
            kept.append(i)
    return found


def random_sets(seed: int, n: int = 60) -> dict[int, set[int]]:
    """Sets drawn from a small universe, a third of them copies of an earlier one with a few elements changed."""
    rng = random.Random(seed)
    sets: dict[int, set[int]] = {}
    for i in range(n):
        if i and rng.random() < 0.35:
            base = list(sets[rng.randrange(i)])
            for _ in range(rng.randrange(0, 4)):
                if base:
                    base[rng.randrange(len(base))] = rng.randrange(10**6)
            sets[i] = set(base)
        else:
            sets[i] = {rng.randrange(10**6) for _ in range(rng.randrange(0, 40))}
    return sets


def as_arrays(sets: dict[int, set[int]]) -> dict[int, np.ndarray]:
    return {i: np.array(sorted(s), dtype=np.uint64) for i, s in sets.items()}


class TestStrategiesAgainstBruteForce:
    @pytest.mark.parametrize("seed", range(5))
    @pytest.mark.parametrize("threshold", [0.5, 0.8, 1.0])
    def test_exact_strategies_equal_brute_force(self, seed: int, threshold: float) -> None:
        sets = random_sets(seed)
        order = list(range(len(sets)))
        random.Random(seed).shuffle(order)
        want = brute_force(sets, order, threshold)
        assert want, "the data must hold duplicates for the test to mean something"
        prefix = find_near_duplicates(sets, order, threshold=threshold, strategy="prefix_filter")
        index = find_near_duplicates(as_arrays(sets), order, threshold=threshold, strategy="inverted_index")
        assert list(prefix.duplicates) == want
        assert list(index.duplicates) == want
        assert prefix.capped == index.capped == 0

    def test_lsh_finds_clear_duplicates(self) -> None:
        rng = np.random.default_rng(0)
        base = [rng.integers(0, 2**63, size=200, dtype=np.uint64) for _ in range(80)]
        copies = [np.concatenate([b[:195], rng.integers(0, 2**63, size=5, dtype=np.uint64)]) for b in base[:20]]
        sets = dict(enumerate(base + copies))
        order = list(range(len(sets)))
        got = find_near_duplicates(sets, order, threshold=0.8, strategy="minhash_lsh", num_perm=128, seed=1)
        assert [(d.index, d.kept) for d in got.duplicates] == [(80 + k, k) for k in range(20)]
        assert all(d.jaccard == pytest.approx(195 / 205) for d in got.duplicates)
        exact = {i: set(a.tolist()) for i, a in sets.items()}
        assert list(got.duplicates) == brute_force(exact, order, 0.8)


class TestFindNearDuplicates:
    @pytest.mark.parametrize("strategy", ["prefix_filter", "inverted_index", "minhash_lsh"])
    def test_empty_order(self, strategy: CandidateStrategy) -> None:
        got = find_near_duplicates({}, [], threshold=0.8, strategy=strategy)
        assert got.duplicates == () and got.capped == 0

    def test_protected_is_kept_and_still_matched_against(self) -> None:
        sets = {0: {1, 2, 3}, 1: {1, 2, 3}, 2: {1, 2, 3}}
        got = find_near_duplicates(sets, [0, 1, 2], threshold=0.9, strategy="prefix_filter", protected={1})
        assert got.duplicates == (NearDuplicate(2, 0, 1.0),)

    def test_empty_sets_never_match(self) -> None:
        sets: dict[int, set[int]] = {0: set(), 1: set(), 2: {5}}
        assert find_near_duplicates(sets, [0, 1, 2], threshold=0.5, strategy="prefix_filter").duplicates == ()

    def test_ties_go_to_the_earliest_visited(self) -> None:
        sets = {0: {1, 2}, 1: {1, 2}, 2: {1, 2}}
        got = find_near_duplicates(sets, [2, 0, 1], threshold=1.0, strategy="inverted_index",
                                   protected={0})
        assert got.duplicates == (NearDuplicate(1, 2, 1.0),)


    @pytest.mark.parametrize("strategy", ["prefix_filter", "inverted_index"])
    def test_a_refused_match_tries_the_next_and_is_recorded_when_none_is_left(self, strategy: CandidateStrategy) -> None:
        sets = {0: set(range(10)), 1: {*range(8), 100, 101}, 2: {*range(9), 100}, 3: {*range(10), 100}}
        refuse = {(2, 0), (3, 0)}  # 2 may join 1 only (tied with 0 at 9/11); 3 reaches only 0

        def conflict(i: int, j: int) -> str | None:
            return f"{i} differs from {j}" if (i, j) in refuse else None

        data = sets if strategy == "prefix_filter" else as_arrays(sets)
        got = find_near_duplicates(data, [0, 1, 2, 3], threshold=0.8, strategy=strategy, conflict=conflict)
        assert got.duplicates == (NearDuplicate(2, 1, 9 / 11),)
        assert got.blocked == (BlockedMatch(3, 0, 10 / 11, "3 differs from 0"),)
        assert find_near_duplicates(data, [0, 1, 2, 3], threshold=0.8, strategy=strategy).duplicates == (
            NearDuplicate(2, 0, 9 / 11), NearDuplicate(3, 0, 10 / 11))

    def test_protected_texts_are_never_checked(self) -> None:
        calls: list[tuple[int, int]] = []

        def conflict(i: int, j: int) -> str | None:
            calls.append((i, j))
            return "no"

        got = find_near_duplicates({0: {1, 2}, 1: {1, 2}}, [0, 1], threshold=0.5, strategy="prefix_filter",
                                   protected={1}, conflict=conflict)
        assert got.duplicates == () and got.blocked == () and calls == []


class TestCandidateIndexes:
    def test_factory(self) -> None:
        sets = {0: np.array([1, 2], dtype=np.uint64), 1: np.array([1, 2], dtype=np.uint64)}
        similarity = ExactJaccard(sets, 0.8)
        assert isinstance(candidate_index("prefix_filter", similarity, [0, 1], num_perm=16, seed=1),
                          PrefixFilterCandidates)
        assert isinstance(candidate_index("inverted_index", similarity, [0, 1], num_perm=16, seed=1),
                          InvertedIndexCandidates)
        assert isinstance(candidate_index("minhash_lsh", similarity, [0, 1], num_perm=16, seed=1), LshCandidates)

    def test_size_bound_prunes_without_computing(self) -> None:
        similarity = ExactJaccard({0: {1}, 1: set(range(10))}, 0.5)
        assert similarity(0, 1) == 0.0  # 1/10 < 0.5: cannot reach the threshold

    def test_big_sets_use_sorted_arrays_with_the_same_value(self) -> None:
        big = np.arange(60_000, dtype=np.uint64)
        similarity = ExactJaccard({0: big, 1: np.concatenate([big[:59_000], big[:1000] + 10**9])}, 0.5)
        assert isinstance(similarity.shingles(0), np.ndarray)
        assert similarity(0, 1) == pytest.approx(59_000 / 61_000)

    def test_lsh_caps_candidates_and_counts_it(self) -> None:
        rng = np.random.default_rng(1)
        base = rng.integers(0, 2**63, size=200, dtype=np.uint64)
        sets = {}
        for i in range(LSH_MAX_CANDIDATES + 10):  # near copies of one set: they share most LSH buckets
            s = base.copy()
            s[rng.choice(200, 5, replace=False)] = rng.integers(0, 2**63, size=5, dtype=np.uint64)
            sets[i] = s
        order = list(sets)
        index = LshCandidates(ExactJaccard(sets, 0.8), order, num_perm=128, seed=1)
        for i in order[:-1]:
            index.add(i)
        assert index.capped == 0
        assert len(index.candidates(order[-1])) == LSH_MAX_CANDIDATES
        assert index.capped == 1


class TestBuildShingleSets:
    def test_python_and_array_forms_agree(self) -> None:
        texts = ["Read more\nthe quick brown fox jumps", "Read more\nthe quick brown fox leaps",
                 "Read more\nsomething else entirely here", "no template line at all"]
        folded = [nfkc_lower(t) for t in texts]
        members = list(range(len(texts)))
        kwargs = {"shingle_words": 3, "template_min_chunks": 3, "template_max_words": 20}
        py = build_shingle_sets(folded, members, members, python_sets=True, **kwargs)
        arr = build_shingle_sets(folded, members, members, python_sets=False, **kwargs)
        assert py.template_lines == arr.template_lines == 1
        assert py.content_lines == arr.content_lines
        assert py.content_lines[0] == ("the quick brown fox jumps",) and py.content_lines[3] == ("no template line at all",)
        assert py.ignored_lines == arr.ignored_lines == {0: 1, 1: 1, 2: 1, 3: 0}
        for i in members:
            for j in members:
                a, b = py.sets[i], py.sets[j]
                x = set(np.asarray(arr.sets[i]).tolist())
                y = set(np.asarray(arr.sets[j]).tolist())
                assert isinstance(a, set) and isinstance(b, set)
                assert jaccard(a, b) == pytest.approx(jaccard(x, y))


    def test_han_kana_lines_go_by_characters_in_both_forms(self) -> None:
        texts = ["京都の紅葉\nthe quick brown fox", "京都の桜\nthe quick brown fox"]
        folded = [nfkc_lower(t) for t in texts]
        kwargs = {"shingle_words": 3, "shingle_chars": 2, "template_min_chunks": None, "template_max_words": 20}
        py = build_shingle_sets(folded, [0, 1], [0, 1], python_sets=True, **kwargs)
        arr = build_shingle_sets(folded, [0, 1], [0, 1], python_sets=False, **kwargs)
        # 京都 都の の紅 紅葉 and 2 word shingles against 京都 都の の桜 and the same two: 4 shared of 7.
        assert jaccard(py.sets[0], py.sets[1]) == pytest.approx(4 / 7)
        assert jaccard(set(arr.sets[0].tolist()), set(arr.sets[1].tolist())) == pytest.approx(4 / 7)

    def test_a_han_kana_template_line_may_have_two_characters_per_allowed_word(self) -> None:
        line = "記事の無断転載を禁じます"  # 12 characters: 6 words' worth
        texts = [f"{line}\n本文その{n}です" for n in "一二三"]
        folded = [nfkc_lower(t) for t in texts]
        for max_words, learnt in ((6, 1), (5, 0)):
            got = build_shingle_sets(folded, [0, 1, 2], [0, 1, 2], shingle_words=3, template_min_chunks=3,
                                     template_max_words=max_words, python_sets=True)
            assert got.template_lines == learnt


def test_dedup_needs_no_datasketch() -> None:
    """datasketch is a dev extra only: the LSH path runs with it blocked in a fresh interpreter."""
    code = textwrap.dedent(
        """
        import importlib.abc, sys
        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] == "datasketch":
                    raise ImportError("blocked: datasketch")
                return None
        sys.meta_path.insert(0, Block())
        from ragtrim.models import Chunk, TrimContext
        from ragtrim.stages.dedup import PAIRWISE_MAX_CHUNKS, DuplicateFilter
        from ragtrim.text.tokens import WhitespaceCounter
        texts = [" ".join(f"w{i}x{j}" for j in range(30)) for i in range(PAIRWISE_MAX_CHUNKS + 5)]
        chunks = tuple(Chunk(t, str(i)) for i, t in enumerate(texts + [texts[0] + " tail"]))
        out = DuplicateFilter().run(TrimContext(chunks=chunks), counter=WhitespaceCounter())
        assert out.info["near_method"] == "minhash_lsh", out.info
        print("ok", [(r.chunk_id, r.kept_id) for r in out.removals])
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"ok [('{PAIRWISE_MAX_CHUNKS + 5}', '0')]"
