"""Question answering over the example corpus with a Haystack pipeline and RagtrimTrimmer, printing tokens saved per query.

The document store holds each page's raw HTML, as a fetcher stores it. InMemoryBM25Retriever returns the top ``k``
pages, ``RagtrimTrimmer`` cleans them, drops mirrored copies and fits the rest into a token budget, and PromptBuilder
writes the prompt an LLM would get (connect a generator after it for answers).

    python examples/haystack_qa.py                    # offline: retriever -> trimmer -> prompt builder
    python examples/haystack_qa.py --k 6 --budget 400 --limit 3
    python examples/haystack_qa.py --yaml             # print the pipeline as Pipeline.dumps() writes it
"""

# example: extras=haystack args=--limit,2
from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")  # this example sends nothing anywhere

from haystack import Document, Pipeline
from haystack.components.builders import PromptBuilder
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.document_stores.in_memory import InMemoryDocumentStore

from ragtrim.integrations.haystack import RagtrimTrimmer

CORPUS = Path(__file__).resolve().parent / "corpus"
TEMPLATE = """Answer the question from the context in a few words.
Context:
{% for document in documents %}{{ document.content }}
{% endfor %}
Question: {{ query }}"""


def build_pipeline(k: int, budget: int) -> Pipeline:
    store = InMemoryDocumentStore()
    store.write_documents([Document(id=p.stem, content=p.read_text(encoding="utf-8"), meta={"source": p.name})
                           for p in sorted((CORPUS / "pages").glob("*.html"))])
    pipeline = Pipeline()
    pipeline.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=k))
    pipeline.add_component("trimmer", RagtrimTrimmer(budget=budget))
    pipeline.add_component("prompt", PromptBuilder(template=TEMPLATE, required_variables=["documents", "query"]))
    pipeline.connect("retriever.documents", "trimmer.documents")
    pipeline.connect("trimmer.documents", "prompt.documents")
    return pipeline


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--k", type=int, default=4, help="pages the retriever returns")
    parser.add_argument("--budget", type=int, default=800, help="max context tokens after trimming (cl100k)")
    parser.add_argument("--limit", type=int, default=None, help="first N questions only")
    parser.add_argument("--yaml", action="store_true", help="print the pipeline's YAML and stop")
    args = parser.parse_args(argv)

    pipeline = build_pipeline(args.k, args.budget)
    if args.yaml:
        print(pipeline.dumps())
        return 0
    lines = (CORPUS / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    questions = [json.loads(line) for line in lines if line.strip()][: args.limit]
    print(f"retriever BM25 (k={args.k}), budget {args.budget} cl100k tokens")
    before_total = saved_total = kept = 0
    for q in questions:
        query = q["query"]
        out = pipeline.run({"retriever": {"query": query}, "trimmer": {"query": query}, "prompt": {"query": query}})
        report = out["trimmer"]["trim_report"]  # unconnected sockets come back in the result
        in_prompt = any(a.lower() in out["prompt"]["prompt"].lower() for a in q["answers"])
        kept += in_prompt
        before_total += report["tokens_before"]
        saved_total += report["tokens_saved"]
        reasons = Counter(r["reason"] for r in report["removals"])
        dropped = [d.meta["source"] for d in out["trimmer"]["removed_documents"]]
        print(f"{q['id']}: tokens {report['tokens_before']:>6} -> {report['tokens_after']:>4} "
              f"(saved {report['tokens_saved']}); removed: {dict(reasons) or 'nothing'}; dropped pages {dropped}; "
              f"answer {q['answers'][0]!r} in prompt: {in_prompt}")
    if questions:
        print(f"{len(questions)} questions: {saved_total} of {before_total} context tokens saved "
              f"({saved_total / max(1, before_total):.0%}); gold answer in the prompt for {kept}/{len(questions)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
