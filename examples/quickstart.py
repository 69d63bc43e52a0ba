"""Trim one request of the example corpus and show what each stage removed (run: python examples/quickstart.py)."""

import json
import sys

from ragtrim.api import trim
from ragtrim.savings import example_requests

lines = example_requests().read_text(encoding="utf-8").splitlines()
wanted = sys.argv[1] if len(sys.argv) > 1 else "q11"
request = next(r for r in map(json.loads, lines) if r["id"] == wanted)
result = trim(request["chunks"], query=request["query"], budget=2000)

print(f"{request['id']}: {request['query']}")
print(f"tokens: {result.tokens_before} -> {result.tokens_after} ({result.ratio:.1f}x smaller)")
print(f"answer {request['answers'][0]!r} kept: {request['answers'][0] in result.text}")
for r in result.removals:
    print(f"  {r.stage:<8} {r.action:<9} {r.chunk_id:<6} {r.reason:<16} -{r.tokens_removed:<5} {r.detail}")
