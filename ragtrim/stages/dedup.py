"""Drop exact duplicates (same normalized text) and near duplicates (shingle Jaccard >= threshold) whose numbers,
dates, versions and amounts agree.

Near-duplicate candidates come from seeded MinHash signatures with LSH banding; every candidate is confirmed with
the exact Jaccard of the two shingle sets, so a chunk is only ever dropped for a measured similarity.

This module is the stage: visit order, exact duplicates, which candidate strategy a batch takes, and the trace. The
engine lives apart, as ``ragtrim.html.extract`` does for ``HtmlCleaner``: ``ragtrim.dedup.shingles`` (words, shingles,
hashes, Jaccard), ``ragtrim.dedup.minhash`` (MinHash signatures, LSH banding) and ``ragtrim.dedup.engine`` (shingle sets
with template lines left out, one class per candidate strategy, the greedy search).

How duplicates are decided:

* Chunks are visited best-first: pinned chunks, then by score (descending, unscored last), ties by input position
  (``keep="first"``: pinned, then input position). A visited chunk is dropped when it duplicates a chunk already
  *kept*; otherwise it is kept. Comparing only against kept chunks means no chaining (A~B and B~C does not drop C
  unless C~A) and the kept set never holds two chunks at or above the threshold (up to LSH misses, see below).
* Exact: the normalized text (``ragtrim.text.sentences.normalize_text``: NFKC, lower case, collapsed whitespace) is equal
  (compared by a 128-bit digest, ``ragtrim.dedup.pieces.exact_key``). Two empty chunks are exact duplicates of each
  other. Template lines (below) play no part here.
* Near: words are ``\\w+`` runs of the normalized text (punctuation is ignored). Shingles never cross a line break:
  each line (``str.splitlines``) is shingled on its own into runs of ``shingle_words`` consecutive words, and a line
  with fewer words contributes one shingle of all its words; a chunk with no words is never a near duplicate. A line
  whose letters are mostly Han or Kana (Japanese, Chinese: no spaces between words) is shingled by
  ``shingle_chars`` characters instead, each Han/Kana character a token.
* Values (``keep_differing_values``): a pair at or above the threshold is not merged when the two chunks hold
  different numbers, dates, versions or amounts in the same context (``ragtrim.dedup.values``); the chunk is matched
  against the next most similar kept chunk, and kept when none agrees. Such chunks are listed in the trace info
  (``value_conflicts``, ``value_conflict_details``).
* Template lines (site-template detection): a line whose words recur verbatim in at least ``template_min_chunks``
  distinct chunks of the batch (distinct normalized texts, so exact copies do not inflate the count) and that has
  at most ``template_max_words`` words is boilerplate ("Read more", "Skip to main content"). Its shingles are left
  out of the sets near-duplicate detection compares (the text itself is untouched), so two copies of a passage
  with different headers and footers from a shared pool are judged on their content. A chunk whose lines are all
  template lines keeps its full shingle set. A line that occurs once in the batch is always content.
* Shingle identity: in small batches (pure Python path) the hash of the word tuple; otherwise a 64-bit vectorized
  hash (FNV-style over per-word hashes). Either way only a 64-bit collision could change a Jaccard value.
* Candidates: for up to ``PAIRWISE_MAX_CHUNKS`` chunks every kept chunk is a candidate (an inverted index gives the
  exact intersection sizes); above it, MinHash (datasketch's ``affine32`` scheme, same permutations for the same
  ``num_perm`` and ``seed``) with ``b`` bands of ``r`` rows, ``r`` the largest value for which a pair at exactly
  ``threshold`` becomes a candidate with probability >= 0.995. Both paths confirm with the exact Jaccard, so they
  differ only in the rare pair LSH misses.
* Caps: with LSH, each bucket remembers at most ``LSH_MAX_BUCKET_CHUNKS`` kept chunks and each chunk is checked
  against at most ``LSH_MAX_CANDIDATES`` of them, so candidate generation stays linear on streams of similar but
  distinct chunks. Ordinary batches never reach the caps; when they bind, pairs go unchecked (the chunks concerned
  are counted in ``info["near_candidates_capped"]``), which can only keep a duplicate, never drop a chunk.
* Pinned chunks are never dropped; unpinned copies of them are.
"""

from __future__ import annotations

from typing import ClassVar, Literal, get_args

from ragtrim._util.validate import Boolean, Constraints, Interval, Options
from ragtrim.components import component
from ragtrim.dedup.engine import CandidateStrategy, build_shingle_sets, find_near_duplicates, folded_and_key
from ragtrim.dedup.shingles import SHINGLE_CHARS
from ragtrim.dedup.values import ValueIndex
from ragtrim.errors import ConfigError
from ragtrim.models import Chunk, Removal, StageOutput, TrimContext
from ragtrim.stages.base import Stage, register_stage
from ragtrim.stages.budget import priority_order
from ragtrim.text.tokens import TokenCounter

KeepPolicy = Literal["best", "first"]

PAIRWISE_MAX_CHUNKS = 48
"""Up to this many distinct chunks, compare each one with every kept chunk instead of building MinHash/LSH."""

PYTHON_PATH_MAX_CHARS = 500_000
"""Up to this many characters in a small batch, shingles are Python sets built without numpy (no array set-up cost);
above it, the vectorized 64-bit hashing keeps memory bounded."""


@register_stage
@component
class DuplicateFilter(Stage):
    """Drop exact and near-duplicate chunks, keeping the best-scored (or first) copy.

    Parameters:
        threshold: shingle Jaccard at or above which two chunks are near duplicates (0 < threshold <= 1).
        num_perm: MinHash permutations (more: fewer LSH misses, slower).
        shingle_words: words per shingle.
        shingle_chars: characters per shingle on lines written mostly in Han or Kana (no spaces between words).
        seed: seed of the MinHash permutations and LSH band hashing (same seed, same result).
        exact: drop chunks whose normalized text equals a kept chunk's.
        near: drop chunks whose shingle Jaccard with a kept chunk is >= ``threshold``.
        keep: ``"best"`` keeps the highest-scored copy (unscored count as worst; ties by position);
            ``"first"`` keeps the earliest copy.
        template_min_chunks: a line found in at least this many distinct chunks of the batch (and no longer than
            ``template_max_words``) is a template line, left out of near-duplicate comparison; ``None`` disables.
        template_max_words: longest line (in words) that can be a template line (a Han/Kana line: two characters a
            word).
        keep_differing_values: never merge two chunks whose numbers, dates, versions or amounts differ in the same
            context; ``False`` merges them anyway and says so in the removal's detail.

    Each dropped chunk gets a removal with reason ``exact_duplicate`` or ``near_duplicate``, ``kept_id`` naming the
    chunk it duplicated, and a detail such as ``"jaccard 0.91 with chunk 17"`` (plus ``", 2 template lines not
    compared"`` when template lines of either chunk were left out). A chunk kept only because its values differ is
    counted in ``info["value_conflicts"]`` and described in ``info["value_conflict_details"]`` (``"chunk 4 kept
    beside chunk 3 (jaccard 0.90): 600 vs 60 (after 'plan allows')"``). Output keeps the input order.
    """

    name = "dedup"

    _parameter_constraints: ClassVar[dict[str, Constraints]] = {
        "threshold": [Interval(float, 0.0, 1.0, closed="right")],
        "num_perm": [Interval(int, 8, 4096)],
        "shingle_words": [Interval(int, 1, 32)],
        "shingle_chars": [Interval(int, 1, 64)],
        "seed": [Interval(int, 0, 2**32 - 1)],
        "exact": [Boolean()],
        "near": [Boolean()],
        "keep": [Options(get_args(KeepPolicy))],
        # 2 would call any line shared by a pair of chunks "template": exactly the evidence near-duplicate
        # detection needs, so the smallest useful value is 3.
        "template_min_chunks": [Interval(int, 3, None), None],
        "template_max_words": [Interval(int, 1, None)],
        "keep_differing_values": [Boolean()],
    }

    threshold: float = 0.8
    num_perm: int = 128
    shingle_words: int = 3
    shingle_chars: int = SHINGLE_CHARS
    seed: int = 1
    exact: bool = True
    near: bool = True
    keep: KeepPolicy = "best"
    template_min_chunks: int | None = 3
    template_max_words: int = 20
    keep_differing_values: bool = True

    def _check_params(self) -> None:
        if not self.exact and not self.near:
            raise ConfigError("exact and near are both False, so the stage would do nothing; set one of them True")

    def _visit_order(self, chunks: tuple[Chunk, ...]) -> list[int]:
        order = priority_order(chunks, "score" if self.keep == "best" else "position")
        return sorted(order, key=lambda i: not chunks[i].pinned)  # stable: pinned first, order kept within

    def run(self, context: TrimContext, *, counter: TokenCounter) -> StageOutput:
        chunks = context.chunks
        n = len(chunks)
        order = self._visit_order(chunks)
        dropped: dict[int, Removal] = {}

        # Exact duplicates first: they need no shingles. NFKC + lower once per chunk; lines come from the same form.
        pairs = [folded_and_key(c.text) for c in chunks]  # cached: a passage met again is not folded again
        folded = [f for f, _ in pairs]
        norms = [key for _, key in pairs]
        exact_kept: dict[bytes, int] = {}
        survivors: list[int] = []  # visit order, exact duplicates removed
        distinct: list[int] = []  # one chunk per normalized text: template lines are counted over these
        for i in order:
            first = exact_kept.get(norms[i])
            if first is None:
                exact_kept[norms[i]] = i
                distinct.append(i)
            elif self.exact and not chunks[i].pinned:
                kept = chunks[first]
                dropped[i] = Removal(chunks[i].id, self.name, "exact_duplicate", chunks[i].token_count or 0,
                                     f"same normalized text as chunk {kept.id}", kept_id=kept.id)
                continue
            survivors.append(i)

        method = "none"
        n_template = capped = 0
        conflicts: list[str] = []
        if self.near and len(survivors) > 1:
            method, n_template, capped = self._near(chunks, folded, survivors, distinct, dropped, conflicts)
        out = tuple(c for i, c in enumerate(chunks) if i not in dropped)
        removals = tuple(dropped[i] for i in sorted(dropped))
        exact_n = sum(r.reason == "exact_duplicate" for r in removals)
        return StageOutput(
            context.with_chunks(out),
            removals,
            info={"exact_duplicates": exact_n, "near_duplicates": len(removals) - exact_n,
                  "near_method": method, "template_lines": n_template, "chunks_in": n,
                  "near_candidates_capped": capped, "value_conflicts": len(conflicts),
                  "value_conflict_details": conflicts},
        )

    def _strategy(self, folded: list[str], survivors: list[int]) -> CandidateStrategy:
        # Read at call time, so a benchmark or test can move the switches.
        if len(survivors) > PAIRWISE_MAX_CHUNKS:
            return "minhash_lsh"
        if sum(len(folded[i]) for i in survivors) <= PYTHON_PATH_MAX_CHARS:
            return "prefix_filter"  # no numpy: array set-up costs more than hashing a few thousand word tuples
        return "inverted_index"

    def _near(self, chunks: tuple[Chunk, ...], folded: list[str], survivors: list[int], distinct: list[int],
              dropped: dict[int, Removal], conflicts: list[str]) -> tuple[str, int, int]:
        strategy = self._strategy(folded, survivors)
        shingles = build_shingle_sets(folded, survivors, distinct, shingle_words=self.shingle_words,
                                      shingle_chars=self.shingle_chars,
                                      template_min_chunks=self.template_min_chunks,
                                      template_max_words=self.template_max_words,
                                      python_sets=strategy == "prefix_filter")
        values = ValueIndex(shingles.content_lines)  # read only for chunks in a pair at or above the threshold

        def values_differ(i: int, j: int) -> str | None:
            found = values.conflict(i, j)
            return None if found is None else found.describe()

        search = find_near_duplicates(shingles.sets, survivors, threshold=self.threshold, strategy=strategy,
                                      num_perm=self.num_perm, seed=self.seed,
                                      protected={i for i in survivors if chunks[i].pinned},
                                      conflict=values_differ if self.keep_differing_values else None)
        ignored = shingles.ignored_lines
        for match in search.duplicates:
            i, kept_chunk = match.index, chunks[match.kept]
            detail = f"jaccard {match.jaccard:.2f} with chunk {kept_chunk.id}"
            n_ignored = ignored[i] + ignored[match.kept]
            if n_ignored:
                detail += f", {n_ignored} template line{'s' if n_ignored > 1 else ''} not compared"
            if not self.keep_differing_values:
                differ = values_differ(i, match.kept)
                if differ is not None:
                    detail += f", merged although values differ: {differ}"
            dropped[i] = Removal(chunks[i].id, self.name, "near_duplicate", chunks[i].token_count or 0,
                                 detail, kept_id=kept_chunk.id)
        for block in search.blocked:
            conflicts.append(f"chunk {chunks[block.index].id} kept beside chunk {chunks[block.other].id} "
                             f"(jaccard {block.jaccard:.2f}): values differ, {block.reason}")
        method = "minhash_lsh" if strategy == "minhash_lsh" else "exact_pairwise"
        return method, shingles.template_lines, search.capped
