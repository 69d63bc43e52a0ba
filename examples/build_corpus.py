"""Build the example requests from the example pages and questions, as a naive retriever would.

The requests ship inside the package as ``ragtrim/data/example_requests.jsonl`` (what ``ragtrim bench`` reads by
default, so that it works after a plain ``pip install``). Standard library only and fully deterministic:
``python examples/build_corpus.py`` rewrites that committed file byte for byte. ``--out PATH`` writes elsewhere (the
tests use it to check the committed file is current).

The simulated retriever indexes the site three ways at once, as a quickly assembled RAG stack often does:
whole pages (an old HTML loader), HTML fragments (a layout splitter that cuts at ``<section>`` and keeps the
menus beside it) and plain-text windows of 160 words with 60 words of overlap (a text splitter run on the naive
text of the whole page, navigation and footer included). A hybrid search runs two rankers over that index, BM25
and query-term coverage, and interleaves their result lists without removing duplicates. So a request holds
whole pages, fragments, overlapping windows, the same chunk twice, near copies from the mirrored and printable
versions of the blog post, and chunks from pages unrelated to the question.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from html.parser import HTMLParser
from pathlib import Path

CORPUS_DIR = Path(__file__).resolve().parent / "corpus"
REQUESTS_FILE = Path(__file__).resolve().parent.parent / "ragtrim" / "data" / "example_requests.jsonl"

PAGES: tuple[tuple[str, str], ...] = (
    ("blog-storage-migration.html", "https://larkspur.example/blog/2024/moving-38-petabytes"),
    (
        "blog-storage-migration-mirror.html",
        "https://inkwell.example/larkspur-engineering/how-we-moved-38-petabytes-without-downtime-5f1c2e",
    ),
    ("blog-storage-migration-print.html", "https://larkspur.example/blog/2024/moving-38-petabytes?print=1"),
    ("docs-access-keys.html", "https://larkspur.example/docs/security/access-keys"),
    ("docs-lifecycle-rules.html", "https://larkspur.example/docs/storage/lifecycle-rules"),
    ("docs-queue-retries.html", "https://larkspur.example/docs/queues/retries-and-dead-letters"),
    (
        "status-incident-eu-central-1.html",
        "https://status.larkspur.example/incidents/2024-05-14-eu-central-1",
    ),
    ("support-billing-faq.html", "https://larkspur.example/support/billing-faq"),
)
"""(file under corpus/pages, the URL the page was crawled from)."""

COPIES: dict[str, tuple[str, ...]] = {
    "https://larkspur.example/blog/2024/moving-38-petabytes": (
        "https://inkwell.example/larkspur-engineering/how-we-moved-38-petabytes-without-downtime-5f1c2e",
        "https://larkspur.example/blog/2024/moving-38-petabytes?print=1",
    ),
}
"""Pages whose article also lives at other URLs (used only for the statistics)."""

WINDOW_WORDS = 160
WINDOW_STEP_WORDS = 100  # 60 words (37.5 %) shared by consecutive windows
MAX_PAGES_PER_REQUEST = 3
MIN_CHUNKS, MAX_CHUNKS = 12, 20

STOPWORDS = frozenset(
    "a about after an and are as at be before by can do does for from how i in is it its many much "  # noqa: SIM905
    "of on or the their this to what when which who why will with".split()
)

_SKIP_TAGS = frozenset({"script", "style", "noscript", "template"})
_BLOCK_TAGS = frozenset(
    "address article aside blockquote br div dd dl dt footer form h1 h2 h3 h4 h5 h6 header hr li "  # noqa: SIM905
    "main nav ol p pre section table td th title tr ul".split()
)


@dataclass(frozen=True)
class Page:
    name: str
    url: str
    html: str


@dataclass(frozen=True)
class Candidate:
    """One entry of the simulated index."""

    key: str
    source: str
    kind: str
    text: str


class _TextExtractor(HTMLParser):
    """Naive text of a page, as generic loaders produce it: every visible string, menus and footer included."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip_depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIP_TAGS:
            self._skip_depth += 1
        elif tag in _BLOCK_TAGS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP_TAGS:
            self._skip_depth = max(0, self._skip_depth - 1)
        elif tag in _BLOCK_TAGS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skip_depth:
            self.parts.append(data)


def visible_text(html: str) -> str:
    parser = _TextExtractor()
    parser.feed(html)
    parser.close()
    lines = (" ".join(line.split()) for line in "".join(parser.parts).splitlines())
    return "\n".join(line for line in lines if line)


def text_windows(text: str, *, size: int = WINDOW_WORDS, step: int = WINDOW_STEP_WORDS) -> list[str]:
    """Word windows of ``size`` words every ``step`` words; the last one ends at the end of the text."""
    words = text.split()
    if len(words) <= size:
        return [" ".join(words)] if words else []
    starts = list(range(0, len(words) - size + 1, step))
    if starts[-1] + size < len(words):
        starts.append(len(words) - size)
    return [" ".join(words[s : s + size]) for s in starts]


_SECTION_RE = re.compile(r"<section\b.*?</section>", re.DOTALL)
_ID_DIV_RE = re.compile(
    r'<div id="[^"]+">(?:(?!<div).)*?</div>', re.DOTALL
)  # sections of pages built without <section>
_MENU_RE = re.compile(r"<(nav|aside)\b.*?</\1>", re.DOTALL)


def html_fragments(html: str) -> list[str]:
    """Each ``<section>`` (or ``<div id=...>``) with a menu block (nav or aside) beside it, the way a layout splitter cuts a page."""
    menus = [m.group(0) for m in _MENU_RE.finditer(html)]
    fragments = []
    sections = list(_SECTION_RE.finditer(html)) or list(_ID_DIV_RE.finditer(html))
    for i, match in enumerate(sections):
        section = match.group(0)
        if not menus:
            fragments.append(section)
        elif i % 2 == 0:
            fragments.append(f'<div class="layout-main">\n{menus[i % len(menus)]}\n{section}\n</div>')
        else:
            fragments.append(f'<div class="layout-row">\n{section}\n{menus[i % len(menus)]}\n</div>')
    return fragments


def load_pages(corpus_dir: Path) -> list[Page]:
    return [Page(name, url, (corpus_dir / "pages" / name).read_text(encoding="utf-8")) for name, url in PAGES]


def index_pages(pages: Sequence[Page]) -> list[Candidate]:
    out: list[Candidate] = []
    for page in pages:
        stem = page.name.removesuffix(".html")
        out.append(Candidate(f"{stem}/page", page.url, "page", page.html))
        for i, fragment in enumerate(html_fragments(page.html)):
            out.append(Candidate(f"{stem}/fragment-{i:02d}", page.url, "fragment", fragment))
        for i, window in enumerate(text_windows(visible_text(page.html))):
            out.append(Candidate(f"{stem}/window-{i:02d}", page.url, "window", window))
    return out


@cache
def tokenize(text: str) -> tuple[str, ...]:
    return tuple(re.findall(r"[a-z0-9]+", text.lower()))


def query_terms(query: str) -> list[str]:
    return sorted({t for t in tokenize(query) if t not in STOPWORDS})


def bm25_ranking(terms: Sequence[str], candidates: Sequence[Candidate]) -> list[Candidate]:
    """BM25 (k1=1.2, b=0.75) over the raw chunk text, markup included, as a naive keyword index sees it."""
    docs = [Counter(tokenize(c.text)) for c in candidates]
    lengths = [sum(d.values()) for d in docs]
    avg_len = sum(lengths) / len(lengths)
    n = len(docs)
    idf = {
        t: math.log(1 + (n - df + 0.5) / (df + 0.5)) for t in terms for df in [sum(1 for d in docs if t in d)]
    }
    scores = []
    for doc, length in zip(docs, lengths):
        score = 0.0
        for t in terms:
            tf = doc[t]
            if tf:
                score += idf[t] * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * length / avg_len))
        scores.append(score)
    order = sorted(range(n), key=lambda i: (-round(scores[i], 9), candidates[i].key))
    return [candidates[i] for i in order if scores[i] > 0]


def coverage_ranking(terms: Sequence[str], candidates: Sequence[Candidate]) -> list[Candidate]:
    """Share of query terms present, then total query-term hits: the keyword-count leg that favours long pages."""
    term_set = set(terms)

    def key(c: Candidate) -> tuple[float, int, str]:
        counts = Counter(t for t in tokenize(c.text) if t in term_set)
        return (-len(counts) / max(1, len(term_set)), -sum(counts.values()), c.key)

    return [c for c in sorted(candidates, key=key) if key(c)[0] < 0]


def retrieve(query: str, candidates: Sequence[Candidate], k: int) -> list[Candidate]:
    """Interleave the two legs without deduplication, keep at most MAX_PAGES_PER_REQUEST whole pages."""
    terms = query_terms(query)
    text_index = [c for c in candidates if c.kind != "page"]
    html_index = [c for c in candidates if c.kind != "window"]
    legs = [bm25_ranking(terms, text_index), coverage_ranking(terms, html_index)]
    merged: list[Candidate] = []
    pages = 0
    for rank in range(max(len(leg) for leg in legs)):
        for leg in legs:
            if rank >= len(leg) or len(merged) >= k:
                continue
            hit = leg[rank]
            if hit.kind == "page":
                if pages >= MAX_PAGES_PER_REQUEST:
                    continue
                pages += 1
            merged.append(hit)
    return merged


def load_questions(corpus_dir: Path) -> list[dict[str, object]]:
    lines = (corpus_dir / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def build_requests(corpus_dir: Path = CORPUS_DIR) -> list[dict[str, object]]:
    candidates = index_pages(load_pages(corpus_dir))
    requests: list[dict[str, object]] = []
    for n, question in enumerate(load_questions(corpus_dir)):
        # Retrievers are configured with different top-k in different apps; spread 12..20 deterministically.
        k = MIN_CHUNKS + (n * 5) % (MAX_CHUNKS - MIN_CHUNKS + 1)
        hits = retrieve(str(question["query"]), candidates, k)
        answers = [str(a) for a in question["answers"]]  # type: ignore[attr-defined]
        if not any(a in hit.text for hit in hits for a in answers):
            raise SystemExit(
                f"{question['id']}: no retrieved chunk contains an answer {answers}; reword the query"
            )
        chunks = [
            {
                "id": f"{question['id']}-{i:02d}",
                "text": hit.text,
                "metadata": {"source": hit.source, "kind": hit.kind},
            }
            for i, hit in enumerate(hits)
        ]
        requests.append(
            {
                "id": question["id"],
                "query": question["query"],
                "answers": answers,
                "source": question["source"],
                "chunks": chunks,
            }
        )
    return requests


def render_jsonl(requests: Sequence[dict[str, object]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in requests)


def corpus_stats(requests: Sequence[dict[str, object]]) -> list[dict[str, object]]:
    """Per request: chunk kinds, exact duplicates, near copies of the source, chunks from unrelated pages."""
    rows: list[dict[str, object]] = []
    for r in requests:
        chunks: list[dict[str, object]] = r["chunks"]  # type: ignore[assignment]
        source = str(r["source"])
        copies = COPIES.get(source, ())
        sources = [str(c["metadata"]["source"]) for c in chunks]  # type: ignore[index]
        kinds = Counter(str(c["metadata"]["kind"]) for c in chunks)  # type: ignore[index]
        texts = [str(c["text"]) for c in chunks]
        rows.append(
            {
                "id": r["id"],
                "chunks": len(chunks),
                "pages": kinds["page"],
                "fragments": kinds["fragment"],
                "windows": kinds["window"],
                "exact_duplicates": len(texts) - len(set(texts)),
                "from_copies": sum(s in copies for s in sources),
                "unrelated": sum(s != source and s not in copies for s in sources),
                "chars": sum(len(t) for t in texts),
            }
        )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=REQUESTS_FILE, help="where to write")
    parser.add_argument("--quiet", action="store_true", help="do not print the per-request statistics")
    args = parser.parse_args(argv)
    requests = build_requests(CORPUS_DIR)
    data = render_jsonl(requests).encode("utf-8")
    args.out.write_bytes(data)
    if not args.quiet:
        rows = corpus_stats(requests)
        cols = list(rows[0])
        print("  ".join(f"{c:>16}" if i else f"{c:<4}" for i, c in enumerate(cols)))
        for row in rows:
            print("  ".join(f"{row[c]!s:>16}" if i else f"{row[c]!s:<4}" for i, c in enumerate(cols)))
        print(f"wrote {len(requests)} requests, {len(data):,} bytes to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
