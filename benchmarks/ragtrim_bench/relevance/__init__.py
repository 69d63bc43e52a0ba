"""Relevance benchmarks: how much of a QA prompt each trimming method removes and whether the answer survives
(``qa_savings``, its harness ``qa``), and the cold cost of each relevance path against the answers it keeps
(``net_latency``)."""
