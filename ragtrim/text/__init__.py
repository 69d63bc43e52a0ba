"""Text primitives every stage shares: ``sentences`` (rule-based sentence spans in every script, normalization),
``analyzer`` (BM25 tokens per script), ``scripts`` (which script a text is in), ``stopwords``, ``korean`` (morphemes
through kiwipiepy, the ``ko`` extra), ``tokens`` (token counters: tiktoken, the reader's own tokenizer, Gemma 3,
approximations), ``gguf`` and ``gemma`` (Gemma 3's tokenizer rebuilt from its GGUF)."""
