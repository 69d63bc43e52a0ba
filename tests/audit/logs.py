"""A request log that exercises every part of the audit at once, deterministic for a seed: conversations with and
without ids that run across the whole log (so across every shard boundary), system prompts that repeat and one that
changes, documents retrieved again and again, exact copies, near copies and HTML pages, completions prompts, a vLLM-
style tool result, and malformed lines."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path
from typing import Any

WORDS = ["tower", "river", "castle", "harbour", "engine", "garden", "village", "market", "bridge", "library", "museum", "island", "forest", "valley", "station", "theatre", "school", "palace", "temple", "canal", "mountain", "lake", "desert", "winter", "summer", "north", "south", "old", "new", "great", "small", "built", "opened", "closed", "famous", "ancient", "modern", "public", "royal", "central", "eastern", "western"]
SYSTEMS = ("You are a helpful assistant. Answer from the documents and cite them.",
           "You are a careful research assistant; use only the passages given and say when they disagree.")


def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def documents(rng: random.Random, count: int = 40) -> list[str]:
    """Passages, some near copies (one word changed) and some HTML pages of another passage."""
    docs = [" ".join(_sentence(rng, rng.randrange(8, 16)) for _ in range(rng.randrange(2, 5))) for _ in range(count)]
    for i in range(0, count, 5):  # near copies: the same passage with one word changed
        words = docs[i].split()
        words[len(words) // 2] = "zeppelin"
        docs.append(" ".join(words))
    for i in range(1, count, 7):  # the same passage inside a page's chrome
        docs.append(f"<html><body><nav>Home | News | Login</nav><p>{docs[i]}</p><footer>(c) 2024</footer>"
                    "</body></html>")
    return docs


def lines(requests: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    docs = documents(rng)
    popular = docs[:6]
    chats: dict[str, list[dict[str, str]]] = {}
    out: list[str] = []
    for i in range(requests):
        roll = rng.random()
        if roll < 0.03:
            out.append(rng.choice(["{broken", "[1, 2]", '{"messages": "nope"}', ""]))
            continue
        chosen = [rng.choice(popular) if rng.random() < 0.5 else rng.choice(docs) for _ in range(rng.randrange(0, 6))]
        if rng.random() < 0.2 and chosen:
            chosen.append(chosen[0].upper())  # an exact copy after normalization
        question = f"What about the {rng.choice(WORDS)} {rng.choice(WORDS)}? ({i})"
        if roll < 0.1:
            block = "\n\n".join(chosen)
            out.append(json.dumps({"prompt": f"Use the context.\n<context>\n{block}\n</context>\nQ: {question}",
                                   "max_tokens": 16}))
            continue
        system = SYSTEMS[i % 2] if roll < 0.9 else f"Today is day {i // 40}. Answer briefly."
        body: dict[str, Any] = {"model": "m", "messages": [{"role": "system", "content": system}]}
        if roll < 0.55:  # a conversation: explicit id or the same opening, turn after turn
            n = rng.randrange(25)
            cid = f"c{n}"
            turns = chats.setdefault(cid, [])
            if len(turns) > 8 or rng.random() < 0.1:
                turns.clear()  # the chat is over; its id (or opening) starts again
            body["messages"] = [{"role": "system", "content": SYSTEMS[n % 2]}, *turns,
                                {"role": "user", "content": question if turns else f"Hello from {cid}"}]
            if n % 3:
                body["conversation_id"] = cid
            turns += [body["messages"][-1], {"role": "assistant", "content": _sentence(rng, rng.randrange(4, 12))}]
        else:
            body["messages"].append({"role": "user", "content": question})
        if chosen:
            if rng.random() < 0.5:
                body["documents"] = chosen
            else:
                body["messages"][-1]["content"] = "<context>\n" + "\n\n".join(chosen) + "\n</context>\n" + \
                    body["messages"][-1]["content"]
        if rng.random() < 0.3:
            body["max_tokens"] = rng.randrange(16, 200)
        out.append(json.dumps({"custom_id": f"r{i}", "body": body} if i % 3 == 0 else body))
    return out


def write_log(path: Path, requests: int, seed: int = 0, *, gzipped: bool = False) -> Path:
    text = "\n".join(lines(requests, seed)) + "\n"
    if gzipped:
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path
