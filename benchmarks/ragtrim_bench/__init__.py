"""ragtrim's evaluation package: datasets, QA metrics, the QA/GPU/serving harnesses and their reports.

Not part of the ``ragtrim`` wheel; ``pip install -e benchmarks`` (the dev setup, ``make``) installs it. It lives in
ragtrim's repository and uses two of ragtrim's private helpers, ``ragtrim._table`` (plain-text tables) and
``ragtrim._jsonl`` (JSONL reading), as ``ragtrim bench`` does. Measurement, statistics (``stats``) and reporting
(``report``) are kept apart.
"""
