"""Relevance scoring: every scorer follows one protocol, ``score(query, texts) -> list[float]``.

``base`` (the protocol, the best-first order, warm-up and prefetch hooks), ``registry`` (the named scorers and
``get_scorer``), ``bm25``, ``embedding`` (MiniLM through sentence-transformers, the per-text vector cache),
``onnx_backend`` and ``torch_backend`` (the same model on ONNX Runtime and on torch directly), ``device`` (CUDA probe,
threads), ``scripts`` (which scripts a model reads), ``hybrid`` (score fusion, gated by script), ``cascade`` (cheap first stage, expensive second), ``rerank`` (the reader's query
likelihood) and ``auto`` (the default recipe ``balanced``, the faster preset ``fast`` and what ``scorer="auto"`` picks
on this host).
"""
