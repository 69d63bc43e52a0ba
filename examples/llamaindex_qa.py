"""Question answering over the example corpus with LlamaIndex and RagtrimPostprocessor, printing tokens saved per query.

Each page is one node holding the raw HTML, as a web reader stores it. A SummaryIndex hands every page to the query
engine; ``RagtrimPostprocessor`` cleans them, drops mirrored copies, ranks them for the question and fits the rest
into a token budget before the response synthesizer builds the prompt.

    python examples/llamaindex_qa.py                  # offline, with llama-index-core's MockLLM
    python examples/llamaindex_qa.py --budget 400 --limit 3

MockLLM answers with the prompt it was given, so "in prompt" below is what a real LLM would have read; pass
``llm=`` your model to ``as_query_engine`` for real answers.
"""

# example: extras=llamaindex args=--limit,2
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from llama_index.core import SummaryIndex
from llama_index.core.llms import MockLLM
from llama_index.core.schema import TextNode

from ragtrim.integrations.llamaindex import RagtrimPostprocessor

CORPUS = Path(__file__).resolve().parent / "corpus"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--budget", type=int, default=800, help="max context tokens after trimming (cl100k)")
    parser.add_argument("--limit", type=int, default=None, help="first N questions only")
    args = parser.parse_args(argv)

    nodes = [TextNode(text=p.read_text(encoding="utf-8"), id_=p.stem, metadata={"source": p.name},
                      excluded_llm_metadata_keys=["source"])
             for p in sorted((CORPUS / "pages").glob("*.html"))]
    lines = (CORPUS / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    questions = [json.loads(line) for line in lines if line.strip()][: args.limit]

    trimmer = RagtrimPostprocessor(budget=args.budget)
    engine = SummaryIndex(nodes).as_query_engine(llm=MockLLM(), node_postprocessors=[trimmer])
    print(f"{len(nodes)} pages, all retrieved; budget {args.budget} cl100k tokens")
    before_total = saved_total = kept = 0
    result = None
    for q in questions:
        prompt = str(engine.query(q["query"]))  # MockLLM's answer is its prompt
        result = trimmer.last_result
        assert result is not None
        in_prompt = any(a.lower() in prompt.lower() for a in q["answers"])
        kept += in_prompt
        before_total += result.tokens_before
        saved_total += result.tokens_saved
        reasons = Counter(r.reason for r in result.removals)
        print(f"{q['id']}: tokens {result.tokens_before:>6} -> {result.tokens_after:>4} (saved {result.tokens_saved}); "
              f"removed: {dict(reasons) or 'nothing'}; answer {q['answers'][0]!r} in prompt: {in_prompt}")
    if questions and result is not None:
        scorer = next(r.info.get("scorer") for r in result.trace if r.stage == "relevance")
        print(f"{len(questions)} questions: {saved_total} of {before_total} context tokens saved "
              f"({saved_total / max(1, before_total):.0%}); gold answer in the prompt for {kept}/{len(questions)}; "
              f"ranked by {scorer}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
