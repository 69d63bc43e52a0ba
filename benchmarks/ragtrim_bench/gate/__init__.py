"""``ragtrim gate``: the example report of docs/gate.md, made against fake upstreams on this machine (``example``),
and the H200 run that judges real serving changes of vLLM one at a time with a fine-tuned Gemma 3 270M reader
(``gpu_arms``; its shell entry point is ``gpu/run_gate.sh``)."""
