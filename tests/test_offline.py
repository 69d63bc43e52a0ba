"""Nothing in ragtrim opens a network connection: trim() with every offline encoding, sockets blocked."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

_SCRIPT = r"""
import socket, sys

def refuse(*args, **kwargs):
    raise SystemExit(f"network connection attempted: {args!r}")

socket.socket.connect = refuse
socket.socket.connect_ex = refuse
socket.create_connection = refuse
socket.getaddrinfo = refuse

from ragtrim import trim
from ragtrim.errors import ConfigError
from ragtrim.text.tokens import OFFLINE_ENCODINGS, get_counter

specs = [*OFFLINE_ENCODINGS, *(f"tiktoken:{e}" for e in OFFLINE_ENCODINGS), "approx", "whitespace"]
for spec in specs:
    r = trim(["<p>The tower is 330 metres tall.</p>", "It was built in 1889."], query="How tall is the tower?",
             budget=12, tokenizer=spec, scorer="bm25")
    assert get_counter(spec).count(r.text) <= 12, spec
    print(spec, r.tokens_after)
for spec in ("o200k_base", "tiktoken:o200k_base", "tiktoken:gpt2", "gpt2", "p50k_base", "r50k_base"):
    try:
        trim(["a"], budget=5, tokenizer=spec, scorer="bm25")
    except ConfigError as exc:
        assert "not available offline" in str(exc), exc
    else:
        raise SystemExit(f"{spec} was accepted")
print("ok")
"""


def test_trim_opens_no_connection(tmp_path: Path) -> None:
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(tmp_path), "DATA_GYM_CACHE_DIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", _SCRIPT], check=False, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().endswith("ok")
    assert "cl100k_base_offline" in proc.stdout
