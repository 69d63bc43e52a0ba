"""Languages and scripts: what ragtrim costs per input token in Korean, Japanese and Chinese against
English, how it grows, and how cl100k counts compare with Gemma 3's own tokenizer. Results under
``benchmarks/results/languages/``."""
