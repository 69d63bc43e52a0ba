"""ragtrim's evaluation package: one folder per benchmark topic (relevance, dedup, html, history, serve, audit,
pipeline, integrations, llamacpp, gpu, models, tuning), the shared dataset loaders (``datasets``) and what every
benchmark shares (``common``: the results folder and result writer, host metadata, statistics, answer matching).

Every benchmark starts as ``ragtrim-bench <topic> <name> [args]`` (``cli``), the same as ``python -m
ragtrim_bench.<topic>.<name>``. Not part of the ``ragtrim`` wheel; ``pip install -e benchmarks`` (the dev setup,
``make``) installs it. It uses a few of ragtrim's private helpers (``ragtrim._util``: tables, percentiles), as
``ragtrim bench`` does. Measurement, statistics and reporting are kept apart.
"""

import os

# Every benchmark measures cold unless it says otherwise: no passage vector may come from the persistent store an
# earlier run filled (~/.cache/ragtrim/vectors.sqlite3). The vector store benchmark names its own stores.
os.environ.setdefault("RAGTRIM_VECTOR_STORE", "off")
