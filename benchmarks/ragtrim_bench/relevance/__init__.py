"""Relevance benchmarks: the quality matrix (``matrix``: answer recall of every ranking recipe on every chunk shape at
4x / 8x / 16x fewer tokens, with its cold cost; ``report`` prints a written one), how much of a QA prompt each trimming
method removes and whether the answer survives (``qa_savings``, its harness ``qa``), the cold cost of each
relevance path against the answers it keeps (``net_latency``), and what keeping passage vectors costs and saves
(``vector_store``: cold, warm and partly seen stores; ``batch_invariance``: whether a passage's vector depends on its
batch, and the cost of making it not)."""
