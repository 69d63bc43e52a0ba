"""Near-duplicate detection behind the dedup stage: ``shingles`` (words, shingles, hashes, Jaccard), ``minhash``
(MinHash signatures and LSH banding) and ``engine`` (shingle sets without template lines, candidate strategies, the
greedy search)."""
