"""``ragtrim audit``: the synthetic request log (``synth``), wall time and memory at 100k requests (``scale``),
and the gateway's own log of RAG traffic checked against its token counts (``gateway_rag``, harness
``gateway_traffic``)."""
