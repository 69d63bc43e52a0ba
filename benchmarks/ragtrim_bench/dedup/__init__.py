"""Duplicate removal: precision and recall on constructed duplicates of real passages, throughput, and
datasketch beside ours (``near_duplicates``)."""
