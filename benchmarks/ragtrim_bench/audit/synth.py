"""A synthetic request log for ``ragtrim audit``, built from the shared NQ, LoCoMo and HTML data (read in place from
``$RAGTRIM_DATA``, default ../shared/data; nothing is copied into the repository).

What it mixes, deterministically for a seed: OpenAI chat requests with a few system prompts (one of them dated, so
it changes every day), single-turn RAG questions (NQ) whose documents come as ``documents``, in ``<context>`` blocks
of the user or the system message, or as tool results, with popular passages retrieved again and again, exact and
near duplicates, and HTML fragments cut from real pages; multi-turn conversations (LoCoMo) whose history grows
turn by turn; and some completions requests.
Run: ragtrim-bench audit synth --requests 100000  -> .cache/audit/synth-100k.jsonl.gz (in the working directory,
git-ignored at the repository root: the log holds the data's text)
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragtrim_bench.datasets import dataset_path
from ragtrim_bench.datasets.nq import load_nq_open

DEFAULT_OUT = Path(".cache") / "audit"
"""Where generated logs go, relative to the working directory (the repository root)."""

SYSTEM_PROMPTS = (
    ("You are the support assistant of an online encyclopedia. Answer the user's question from the documents "
    "provided. Quote the passage you rely on, keep the answer under three sentences, and say \"I don't know\" when "
    "the documents do not contain the answer. Never invent citations. Be polite and concise."),
    ("You are a careful research assistant. Use only the retrieved passages to answer. If several passages disagree, "
    "say so and name them by number. Answer in the language of the question. Format dates as YYYY-MM-DD."),
    ("You are a friendly companion that remembers what the user told you in earlier sessions. Keep replies short, "
    "warm and specific to what the user said; ask at most one question back."),
)
DATED_PROMPT = ("You are the help desk of Larkspur Cloud. Today is {date}. Answer from the documents below; when "
                "they are not enough, tell the user to open a ticket. Mention the document title you used. Do not "
                "discuss pricing that is not in the documents. Keep the answer short.")


@dataclass(frozen=True, slots=True)
class SynthConfig:
    requests: int = 100_000
    seed: int = 0
    html_pages: int = 40
    fragment_chars: int = 2500
    docs_min: int = 3
    docs_max: int = 10


def _html_fragments(cfg: SynthConfig, rng: random.Random) -> list[str]:
    """Slices of real pages starting at a block tag, as a careless HTML splitter cuts them."""
    files = sorted((dataset_path("html-extraction") / "html").glob("*.html.gz"))[: cfg.html_pages]
    out: list[str] = []
    for f in files:
        with gzip.open(f, "rt", encoding="utf-8", errors="replace") as stream:
            page = stream.read()
        starts = [m.start() for m in re.finditer(r"<(?:div|p|section|article|nav|footer|ul)\b", page)]
        for s in starts[:: max(1, len(starts) // 12)][:12]:
            frag = page[s: s + cfg.fragment_chars]
            if len(frag) > 500:
                out.append(frag)
    rng.shuffle(out)
    return out


def _locomo_sessions() -> list[list[tuple[str, str]]]:
    sessions = []
    for f in sorted(dataset_path("locomo").glob("*.json")):
        raw = json.loads(f.read_text(encoding="utf-8"))
        conv = raw.get("conversation", raw)
        for key in sorted((k for k in conv if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k.split("_")[1])):
            turns = [(t["speaker"], t["text"]) for t in conv[key] if isinstance(t, dict) and t.get("text")]
            if len(turns) >= 4:
                sessions.append(turns)
    return sessions


def _near_copy(text: str, rng: random.Random) -> str:
    """The same passage republished: a source line added and a couple of words changed."""
    words = text.split()
    for _ in range(2):
        if len(words) > 10:
            words[rng.randrange(len(words))] = rng.choice(["also", "then", "still", "indeed"])
    return " ".join(words) + "\nSource: community mirror"


class Generator:
    def __init__(self, cfg: SynthConfig) -> None:
        self.cfg = cfg
        self.rng = random.Random(cfg.seed)
        self.nq = load_nq_open()
        self.passages = [q.gold.content for q in self.nq]
        self.fragments = _html_fragments(cfg, self.rng)
        self.sessions = _locomo_sessions()
        # Popularity: a few passages are retrieved very often (Zipf-like), as in real traffic.
        self.weights = [1.0 / (i + 1) ** 0.8 for i in range(len(self.passages))]
        self.order = list(range(len(self.passages)))
        self.rng.shuffle(self.order)

    def _docs(self, gold: str, n: int, html: bool) -> list[str]:
        rng = self.rng
        picks = rng.choices(self.order, weights=self.weights, k=n - 1)
        docs = [gold, *(self.passages[i] for i in picks)]
        if html:
            docs += rng.sample(self.fragments, k=min(len(self.fragments), rng.randint(1, 3)))
        if rng.random() < 0.25:
            docs.append(docs[rng.randrange(len(docs))])  # the same passage from two retrievers
        if rng.random() < 0.2:
            docs.append(_near_copy(docs[rng.randrange(min(n, len(docs)))], rng))
        rng.shuffle(docs)
        return docs

    def _system(self, i: int) -> str:
        if self.rng.random() < 0.3:
            return DATED_PROMPT.format(date=f"2026-11-{1 + (i * 30) // self.cfg.requests:02d}")
        return SYSTEM_PROMPTS[self.rng.randrange(2)]

    def rag(self, i: int) -> dict[str, Any]:
        rng = self.rng
        q = self.nq[rng.randrange(len(self.nq))]
        docs = self._docs(q.gold.content, rng.randint(self.cfg.docs_min, self.cfg.docs_max), rng.random() < 0.3)
        system = self._system(i)
        style = rng.random()
        body: dict[str, Any] = {"model": "gemma-3-12b-it", "max_tokens": rng.choice([128, 256, 512])}
        if style < 0.4:
            body["messages"] = [{"role": "system", "content": system}, {"role": "user", "content": q.question}]
            body["documents"] = docs
        elif style < 0.75:
            ctx = "\n\n".join(docs)
            body["messages"] = [{"role": "system", "content": system},
                                {"role": "user", "content": f"<context>\n{ctx}\n</context>\n\nQuestion: {q.question}"}]
        elif style < 0.9:
            ctx = "\n\n".join(docs)
            body["messages"] = [{"role": "system", "content": f"{system}\n\n<context>\n{ctx}\n</context>"},
                                {"role": "user", "content": q.question}]
        else:
            body["messages"] = [
                {"role": "system", "content": system}, {"role": "user", "content": q.question},
                {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
                    "name": "search", "arguments": json.dumps({"query": q.question})}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "\n\n".join(docs)},
                {"role": "user", "content": "Answer from the search results."}]
            body["tools"] = [{"type": "function", "function": {"name": "search", "description": "Search the wiki",
                                                               "parameters": {"type": "object", "properties": {
                                                                   "query": {"type": "string"}}}}}]
        return body

    def conversation(self, i: int, budget: int) -> Iterator[dict[str, Any]]:
        """Requests of one chat, each with every earlier turn: the history grows."""
        rng = self.rng
        turns = self.sessions[rng.randrange(len(self.sessions))]
        start = rng.randrange(max(1, len(turns) - 4))
        system = SYSTEM_PROMPTS[2]
        speaker = turns[start][0]
        history: list[dict[str, Any]] = []
        conv_id = f"conv-{i}"
        for t in range(start, min(len(turns), start + min(budget, 2 * rng.randint(3, 12)))):
            who, text = turns[t]
            if who == speaker:
                body: dict[str, Any] = {"model": "gemma-3-12b-it", "max_tokens": 256,
                                        "metadata": {"conversation_id": conv_id},
                                        "messages": [{"role": "system", "content": system}, *history,
                                                     {"role": "user", "content": text}]}
                if rng.random() < 0.2:
                    q = self.nq[rng.randrange(len(self.nq))]
                    body["documents"] = self._docs(q.gold.content, 3, False)
                yield body
                history.append({"role": "user", "content": text})
            else:
                history.append({"role": "assistant", "content": text})

    def completion(self) -> dict[str, Any]:
        q = self.nq[self.rng.randrange(len(self.nq))]
        ctx = "\n\n".join(self._docs(q.gold.content, self.rng.randint(2, 5), False))
        return {"model": "gemma-3-12b-it", "max_tokens": 64,
                "prompt": f"Answer the question from the context.\n<context>\n{ctx}\n</context>\nQ: {q.question}\nA:"}

    def requests(self) -> Iterator[dict[str, Any]]:
        n = 0
        i = 0
        while n < self.cfg.requests:
            i += 1
            r = self.rng.random()
            # About 55 % single-turn RAG requests, 38 % turns of conversations (5 a conversation on average), 7 %
            # completions.
            if r < 0.8:
                batch = [self.rag(n)]
            elif r < 0.9:
                batch = list(self.conversation(i, self.cfg.requests - n))
            else:
                batch = [self.completion()]
            for body in batch:
                n += 1
                yield {"custom_id": f"req-{n:06d}", "method": "POST",
                       "url": "/v1/completions" if "prompt" in body else "/v1/chat/completions", "body": body}
                if n >= self.cfg.requests:
                    return


def write_log(cfg: SynthConfig, path: Path) -> Path:
    """Write the log as OpenAI batch lines ({custom_id, method, url, body}), gzip when the name ends in .gz."""
    path.parent.mkdir(parents=True, exist_ok=True)
    gz = path.suffix == ".gz"
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=3) if gz else open(path, "w", encoding="utf-8") as f:
        for rec in Generator(cfg).requests():
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    return path


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("-o", "--output", type=Path, default=None)
    args = ap.parse_args(argv)
    cfg = SynthConfig(requests=args.requests, seed=args.seed)
    out = args.output or DEFAULT_OUT / f"synth-{args.requests // 1000}k.jsonl.gz"
    write_log(cfg, out)
    print(f"wrote {cfg.requests:,} requests to {out} ({out.stat().st_size / 2**20:.1f} MiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
