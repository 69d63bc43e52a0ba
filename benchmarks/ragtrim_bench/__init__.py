"""Benchmarks: measurement, statistics and reporting kept apart (see ``stats`` and ``report``)."""
