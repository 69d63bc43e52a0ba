"""``ragtrim audit`` and ``ragtrim index`` on a distributed engine (``--engine ray``): throughput against workers, and
the per-worker rates that docs/scale.md's plan for 100 million requests and passages is made of (``throughput``)."""
