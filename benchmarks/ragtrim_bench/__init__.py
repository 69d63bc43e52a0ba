"""ragtrim's evaluation package: datasets, QA metrics, the QA/GPU/serving harnesses and their reports.

Not part of the ``ragtrim`` wheel; ``pip install -e benchmarks`` (the dev setup, ``make``) installs it. It lives in
ragtrim's repository and uses two of ragtrim's private helpers, ``ragtrim._table`` (plain-text tables) and
``ragtrim._jsonl`` (JSONL reading), as ``ragtrim bench`` does. Measurement, statistics (``stats``) and reporting
(``report``) are kept apart.
"""

import os

# Every benchmark measures cold unless it says otherwise: no passage vector may come from the persistent store an
# earlier run filled (~/.cache/ragtrim/vectors.sqlite3). The vector store benchmark names its own stores.
os.environ.setdefault("RAGTRIM_VECTOR_STORE", "off")
