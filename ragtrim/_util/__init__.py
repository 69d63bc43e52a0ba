"""ragtrim's private helpers, below every concept: the background thread, LRU caches, parameter validation,
JSONL reading, percentiles, plain-text tables and the cache directory. They import nothing of ragtrim but its
errors."""
