"""Relevance benchmarks: the vector store, batch invariance."""
