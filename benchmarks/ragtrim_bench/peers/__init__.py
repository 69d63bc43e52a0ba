"""ragtrim beside its peers on the quality matrix's columns: LongLLMLingua and the compressors LangChain, LlamaIndex
and Haystack ship, each with its documented settings, on the same requests and budgets (``matrix``)."""
