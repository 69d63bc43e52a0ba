"""The pipeline and ``trim()`` themselves: per-call overhead (``overhead``, ``trim_call_overhead``), bounded memory
(``memory_bounded``), linear growth on hostile inputs (``hostile_growth``, inputs in ``hostile_inputs``) and a
fuzzer (``fuzz_trim``)."""
