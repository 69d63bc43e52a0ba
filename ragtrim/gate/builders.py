"""Golden sets built from what users have: SQuAD-format files (SQuAD 2.0's unanswerable questions become refusal
items, the article's other paragraphs the distractor documents), and a request log (the gateway's ``log_request``
lines, or any log ``ragtrim audit`` reads) sampled across the audit's request shapes; logged requests have no gold
answer, so the baseline arm's answers become the reference (agreement).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ragtrim.errors import ConfigError, InputError
from ragtrim.gate.golden import GoldenItem, documents_of

JSON_ANSWER_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": ["string", "null"]}},
    "required": ["answer"],
    "additionalProperties": False,
}
"""The answer format of ``--json`` golden sets: ``{"answer": "..."}``, ``{"answer": null}`` to refuse."""


# -- SQuAD ------------------------------------------------------------------------------------------------------
def read_squad(path: str | Path) -> list[Mapping[str, Any]]:
    """The articles of a SQuAD-format JSON file (v1.1 or v2.0)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"SQuAD file {str(path)!r} cannot be read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise InputError(f"SQuAD file {str(path)!r} is not JSON: {exc}") from None
    articles = data.get("data") if isinstance(data, dict) else None
    if not isinstance(articles, list) or not all(isinstance(a, dict) and isinstance(a.get("paragraphs"), list)
                                                 for a in articles):
        raise InputError(f"SQuAD file {str(path)!r} must hold {{\"data\": [{{\"title\", \"paragraphs\": [...]}}]}}")
    return articles


def squad_titles(path: str | Path) -> list[tuple[str, int]]:
    """``(title, questions)`` of every article, in file order."""
    return [(str(a.get("title", i)), sum(len(p.get("qas", [])) for p in a["paragraphs"]))
            for i, a in enumerate(read_squad(path))]


def golden_from_squad(path: str | Path, *, articles: Sequence[str] | None = None,
                      exclude_articles: Sequence[str] = (), limit: int | None = None, documents: int = 5,
                      unanswerable_share: float | None = None, json_answers: bool = False,
                      seed: int = 0) -> list[GoldenItem]:
    """Golden items from a SQuAD file: each question with its paragraph among ``documents - 1`` other paragraphs of
    the same article (at a seeded random place), its answers, ``answerable=False`` for SQuAD 2.0's impossible
    questions, tagged with the article's title. ``articles`` keeps only those titles (``exclude_articles`` drops
    some: keep a training set apart by article); ``limit`` samples that many questions (seeded), with
    ``unanswerable_share`` of them unanswerable when given; ``json_answers`` asks for ``{"answer": ...}`` replies
    (``JSON_ANSWER_SCHEMA``)."""
    if documents < 1:
        raise ConfigError(f"documents must be >= 1 (the gold paragraph), got {documents}")
    if limit is not None and limit < 1:
        raise ConfigError(f"limit must be >= 1, got {limit}")
    if unanswerable_share is not None and not 0 <= unanswerable_share <= 1:
        raise ConfigError(f"unanswerable_share must be in [0, 1], got {unanswerable_share}")
    data = read_squad(path)
    titles = [str(a.get("title", i)) for i, a in enumerate(data)]
    unknown = sorted(set(articles or ()) - set(titles)) + sorted(set(exclude_articles) - set(titles))
    if unknown:
        raise ConfigError(f"no article titled {', '.join(map(repr, unknown))} in {str(path)!r} (titles: "
                          f"{', '.join(titles)})")
    rows: list[tuple[int, str, int, Mapping[str, Any]]] = []  # (article index, title, paragraph index, qa)
    for a_index, (title, article) in enumerate(zip(titles, data, strict=True)):
        if (articles and title not in articles) or title in exclude_articles:
            continue
        for p_index, paragraph in enumerate(article["paragraphs"]):
            for qa in paragraph.get("qas", []):
                rows.append((a_index, title, p_index, qa))
    rng = random.Random(seed)
    if limit is not None and limit < len(rows):
        if unanswerable_share is None:
            rows = rng.sample(rows, limit)
        else:
            unans = [r for r in rows if r[3].get("is_impossible")]
            ans = [r for r in rows if not r[3].get("is_impossible")]
            n_un = round(limit * unanswerable_share)
            if n_un > len(unans) or limit - n_un > len(ans):
                raise ConfigError(f"{limit} questions with {unanswerable_share:.0%} unanswerable need {n_un} "
                                  f"unanswerable and {limit - n_un} answerable; the articles have {len(unans)} and "
                                  f"{len(ans)}")
            rows = rng.sample(unans, n_un) + rng.sample(ans, limit - n_un)
        rows.sort(key=lambda r: (r[0], r[2], str(r[3].get("id"))))
    items = []
    for a_index, title, p_index, qa in rows:
        paragraphs = [p.get("context", "") for p in data[a_index]["paragraphs"]]
        item_rng = random.Random(f"{seed}:{qa.get('id')}")
        others = [i for i in range(len(paragraphs)) if i != p_index]
        chosen = item_rng.sample(others, min(documents - 1, len(others)))
        chosen.insert(item_rng.randrange(len(chosen) + 1), p_index)
        impossible = bool(qa.get("is_impossible"))
        answers = [] if impossible else list(dict.fromkeys(a["text"] for a in qa.get("answers", [])
                                                           if isinstance(a, dict) and a.get("text")))
        items.append(GoldenItem(
            id=str(qa.get("id")), question=str(qa.get("question", "")).strip(),
            documents=tuple(paragraphs[i] for i in chosen), answers=tuple(answers), answerable=not impossible,
            schema=JSON_ANSWER_SCHEMA if json_answers else None, tags=(title,),
            meta={"article": title, "paragraph": p_index, "gold_document": chosen.index(p_index)}))
    return items


# -- request logs -----------------------------------------------------------------------------------------------
def _schema_of(body: Mapping[str, Any]) -> Any:
    fmt = body.get("response_format")
    if isinstance(fmt, Mapping) and fmt.get("type") == "json_schema":
        spec = fmt.get("json_schema")
        if isinstance(spec, Mapping):
            return spec.get("schema")
    return None


def _body(obj: Any) -> tuple[Mapping[str, Any] | None, bool]:
    """(the chat body of a log line, whether it is the gateway's forwarded body, trimmed already)."""
    if not isinstance(obj, Mapping):
        return None, False
    for key in ("request", "body"):
        if isinstance(obj.get(key), Mapping):
            return obj[key], False
    if isinstance(obj.get("forwarded"), Mapping):
        return obj["forwarded"], True
    return (obj, False) if "messages" in obj else (None, False)


def shape_of(parts: Mapping[Any, int]) -> str:
    """A request's shape for sampling: which of system, history and context it has, and its prompt size range in
    tokens (powers of two from 256), as ``system+context|512-1024``."""
    total = sum(parts.values())
    size = 256
    while size <= total:
        size *= 2
    low = size // 2 if size > 256 else 0
    present = "+".join(p for p in ("system", "history", "context") if parts.get(p)) or "question"
    return f"{present}|{low}-{size}"


def _allocate(sizes: Mapping[str, int], total: int) -> dict[str, int]:
    """``total`` draws spread over strata in proportion to their sizes, at least one each while draws last
    (largest remainders get the rest)."""
    n = sum(sizes.values())
    if total >= n:
        return dict(sizes)
    out = {k: min(v, 1) for k, v in sizes.items()} if total >= len(sizes) else {}
    left = total - sum(out.values())
    shares = {k: left * v / n for k, v in sizes.items()}
    for k, s in shares.items():
        out[k] = min(sizes[k], out.get(k, 0) + int(s))
    rest = total - sum(out.values())
    for k in sorted(sizes, key=lambda k: (-(shares[k] - int(shares[k])), k)):
        if rest <= 0:
            break
        if out.get(k, 0) < sizes[k]:
            out[k] = out.get(k, 0) + 1
            rest -= 1
    return out


def golden_from_log(path: str | Path, *, sample: int = 200, seed: int = 0, tokenizer: str | None = None,
                    context_tag: str = "context") -> tuple[list[GoldenItem], dict[str, Any]]:
    """Golden items replaying logged chat requests, sampled across request shapes (``shape_of``) in proportion to
    the log, each shape at least once while the sample lasts. Items keep the request's messages, documents and
    output options, and its JSON Schema when it asked for one; they have no gold answer (agreement). Returns the
    items and what was read: shapes, and every request left out with its reason."""
    from ragtrim.audit.breakdown import part_tokens
    from ragtrim.audit.reader import SkipLog, open_log, read_requests
    from ragtrim.text.tokens import get_counter

    if sample < 1:
        raise ConfigError(f"sample must be >= 1, got {sample}")
    counter = get_counter(tokenizer)
    skipped = SkipLog()
    left_out: Counter[str] = Counter()
    strata: dict[str, list[tuple[int, str]]] = {}
    seen: Counter[str] = Counter()
    rng = random.Random(seed)
    for req in read_requests(path, skipped=skipped, context_tag=context_tag):
        if req.endpoint != "chat":
            left_out[f"{req.endpoint}_not_replayed"] += 1
            continue
        parts = part_tokens(req, [counter.count(s.text) for s in req.segments])
        shape = shape_of(parts)
        seen[shape] += 1
        bucket = strata.setdefault(shape, [])
        if len(bucket) < sample:  # a reservoir per shape: memory stays bounded on any log
            bucket.append((req.line, req.request_id))
        else:
            j = rng.randrange(seen[shape])
            if j < sample:
                bucket[j] = (req.line, req.request_id)
    if not seen:
        raise InputError(f"request log {str(path)!r} holds no chat request to replay ({dict(left_out) or 'empty'}; "
                         f"skipped lines: {skipped.to_dict()['by_reason']})")
    counts = _allocate(seen, sample)
    wanted: dict[int, tuple[str, str]] = {}
    for shape, n in counts.items():
        for line, rid in random.Random(f"{seed}:{shape}").sample(strata[shape], min(n, len(strata[shape]))):
            wanted[line] = (shape, rid)
    items: list[GoldenItem] = []
    forwarded = 0
    ids: Counter[str] = Counter()
    with open_log(path) as stream:
        for n, raw in enumerate(stream, 1):
            if n not in wanted:
                continue
            body, was_forwarded = _body(json.loads(raw.removeprefix(b"\xef\xbb\xbf")))
            shape, rid = wanted[n]
            if body is None:
                left_out["unreadable_body"] += 1
                continue
            forwarded += was_forwarded
            schema = _schema_of(body)
            if schema is not None:
                shape += "|json"
            options = {k: body[k] for k in ("max_tokens", "max_completion_tokens", "stop", "response_format")
                       if k in body}
            ids[rid] += 1
            try:
                items.append(GoldenItem(
                    id=rid if ids[rid] == 1 else f"{rid}#{ids[rid]}", messages=tuple(body["messages"]),
                    documents=documents_of(body.get("documents"), f"{path}:{n}"), schema=schema,
                    tags=(shape,), options=options, meta={"line": n}))
            except (ConfigError, InputError) as exc:
                left_out[f"not_replayable: {str(exc)[:80]}"] += 1
    info = {"requests_read": sum(seen.values()) + sum(left_out.values()), "shapes": dict(seen.most_common()),
            "sampled_by_shape": dict(sorted(counts.items())), "left_out": dict(left_out),
            "skipped_lines": skipped.to_dict()["by_reason"], "forwarded_bodies": forwarded,
            "note": "no gold answers: the baseline arm's answers are the reference (agreement)"
                    + ("; some bodies are the gateway's forwarded ones, already trimmed (log_request = true "
                       "keeps what the client sent)" if forwarded else "")}
    return items, info
