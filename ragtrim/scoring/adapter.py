"""Query adapters: a fixed linear map applied to a query's embedding before its cosines with the passages
(``CachedEmbedder(query_adapter=...)``). Passages are untouched, so their cached and stored vectors stay valid.

An adapter file is an ``.npz`` holding ``delta``, a square matrix ``D``: the query vector ``q`` becomes
``normalize((I + D) q)``. The bundled one (``BUNDLED_ADAPTER``, ``ragtrim/data/minilm_query_adapter.npz``, for the
bundled all-MiniLM-L6-v2) is rebuilt by ``ragtrim-bench relevance adapter train``; docs/relevance.md says what it
was trained on and what it changes. The default recipe applies it to long queries only (``LONG_QUERY_WORDS``), the
``balanced-qa`` scorer to every query. No randomness at inference: the same query gives the same vector.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from pathlib import Path

import numpy as np

from ragtrim.errors import ConfigError
from ragtrim.text.scripts import query_length

BUNDLED_ADAPTER = "bundled"
"""``query_adapter="bundled"``: the adapter shipped with ragtrim for the bundled MiniLM."""
BUNDLED_FILE = Path(str(resources.files("ragtrim"))) / "data" / "minilm_query_adapter.npz"
"""Where the bundled adapter is installed with ragtrim."""
LONG_QUERY_WORDS = 20.0
"""The default recipe maps a query with the bundled adapter only when it is longer than this
(``ragtrim.text.scripts.query_length``): a request that describes what it wants ("Highlight the parts of this
contract related to ... Details: ..."), which MiniLM's plain query vector matches badly. Shorter questions keep the
plain vector, on which the adapter's held-out gains were nil (docs/relevance.md, "The query adapter")."""


def adapter_file(adapter: str) -> Path:
    """The file behind ``adapter``: the bundled one for ``"bundled"``, else ``adapter`` as a path."""
    return BUNDLED_FILE if adapter == BUNDLED_ADAPTER else Path(adapter)


@lru_cache(maxsize=8)
def load_adapter(adapter: str) -> np.ndarray:
    """The adapter's full map ``I + D`` (float64, read-only), read once per process; ConfigError naming the file
    when it cannot be used."""
    path = adapter_file(adapter)
    try:
        with np.load(path, allow_pickle=False) as data:
            delta = np.asarray(data["delta"], dtype=np.float64)
    except (OSError, ValueError, KeyError) as exc:
        raise ConfigError(f"query_adapter {adapter!r} must be 'bundled' or an .npz file holding a square matrix "
                          f"'delta'; reading {str(path)!r} failed: {exc}") from exc
    if delta.ndim != 2 or delta.shape[0] != delta.shape[1] or not np.isfinite(delta).all():
        raise ConfigError(f"query_adapter {adapter!r}: 'delta' in {str(path)!r} must be a finite square matrix, got "
                          f"shape {delta.shape}; rebuild it with `ragtrim-bench relevance adapter train`")
    full = np.eye(delta.shape[0]) + delta
    full.setflags(write=False)
    return full


def adapt_query(adapter: str, vector: np.ndarray) -> np.ndarray:
    """``normalize((I + D) vector)`` as float32; a map that sends the vector to zero leaves it as it was."""
    full = load_adapter(adapter)
    if vector.shape != (full.shape[1],):
        raise ConfigError(f"query_adapter {adapter!r} maps vectors of width {full.shape[1]}, the model gives "
                          f"{vector.shape[-1]}; use an adapter trained for this model, or none")
    mapped = full @ vector.astype(np.float64)
    norm = float(np.linalg.norm(mapped))
    return (mapped / norm).astype(np.float32) if norm > 0 else vector


def adapts(query: str, min_length: float) -> bool:
    """Whether an adapter that acts on queries longer than ``min_length`` maps ``query`` (0: every query)."""
    return min_length <= 0 or query_length(query) > min_length


def adapter_suffix(adapter: str | None, min_length: float = 0.0) -> str:
    """What a scorer's name gains from its adapter: nothing without one, ``+qa`` with the bundled one, else
    ``+qa:<file name>``; ``>20`` after it when it maps only queries longer than 20 words."""
    if adapter is None:
        return ""
    name = "+qa" if adapter == BUNDLED_ADAPTER else f"+qa:{Path(adapter).name}"
    return f"{name}>{min_length:g}" if min_length > 0 else name
