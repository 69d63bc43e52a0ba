"""The persistent passage-vector store: a second cache level under ``CachedEmbedder``'s in-memory LRU (memory ->
store -> model), on disk (``sqlite_store``) or in Redis (``redis_store``), and ``index`` (``ragtrim index``), which
fills it ahead of time. ``store`` holds the protocol, the keys and what every store shares."""
