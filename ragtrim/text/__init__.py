"""Text primitives every stage shares: ``sentences`` (rule-based sentence spans, normalization), ``tokens`` (token
counters: tiktoken, the reader's own tokenizer, approximations) and ``stopwords``."""
