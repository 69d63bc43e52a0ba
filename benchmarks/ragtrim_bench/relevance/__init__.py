"""Relevance evaluation: the quality matrix (``python -m ragtrim_bench.relevance.matrix``), answer recall of every
ranking recipe on every chunk shape at 4x / 8x / 16x fewer tokens, with its cold cost."""
