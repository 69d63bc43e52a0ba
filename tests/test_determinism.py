"""Output does not depend on the process: the same input gives the same bytes under any PYTHONHASHSEED."""

from __future__ import annotations

import os
import subprocess
import sys

_SCRIPT = r"""
import json
from ragtrim import trim
docs = ["metres fair built", "metres tower lattice", "built lattice paris eiffel eiffel gustave",
        "metres paris gustave fair gustave built", "fair tower built fair gustave lattice",
        "The Eiffel Tower in Paris is 330 metres tall and was built for the 1889 fair.",
        "The Eiffel Tower in Paris is 330 metres tall and was built for the 1889 world fair.",
        "<p>Gustave Eiffel's company built the tower. It is made of wrought iron.</p>"]
out = []
for budget in (None, 8, 20, 40):
    r = trim(docs, query="gustave paris fair", budget=budget, scorer="bm25")
    out.append([[c.id, c.text, repr(c.score), c.token_count] for c in r.chunks])
    out.append([[x.chunk_id, x.stage, x.reason, x.tokens_removed, x.detail, x.kept_id] for x in r.removals])
print(json.dumps(out, sort_keys=True))
"""


def _run(seed: str) -> bytes:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    return subprocess.run([sys.executable, "-c", _SCRIPT], env=env, check=True, capture_output=True).stdout


def test_output_bytes_do_not_depend_on_hash_seed() -> None:
    # BM25 summed over a set of query terms: the set's order, and so the last digit of the scores, moved with the
    # hash seed. Four seeds make a collision of orders by chance unlikely.
    outputs = {seed: _run(seed) for seed in ("0", "1", "2", "3")}
    assert len(set(outputs.values())) == 1, outputs
    assert b"gustave" in outputs["0"]
