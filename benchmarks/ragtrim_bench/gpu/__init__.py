"""The serving harness: send the same requests untrimmed, trimmed and oracle to a backend (vLLM in-process, an
OpenAI-compatible server, or transformers on CPU) and measure TTFT, latency, throughput, memory and accuracy.

Nothing here imports vLLM at module import: users bring their own vLLM.
"""
