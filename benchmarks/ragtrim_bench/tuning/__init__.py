"""Tuning experiments, not benchmarks: what was tried while choosing defaults (relevance recipes, the fast
scorer's pieces and weights, reranking, reader arms), run on the development questions only. Their numbers
informed choices recorded in the code and docs; the held-out measurements are the benchmarks of the other folders."""
