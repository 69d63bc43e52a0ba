"""The reader models the benchmarks use: the Gemma 3 270M GGUF, its rebuilt tokenizer, the Hugging Face model
folder and the dummy 4B/12B/27B configs of the GPU harness (``gemma``; ``ragtrim-bench models gemma``)."""
