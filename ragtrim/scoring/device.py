"""Where a model runs: the CUDA probe, ``device="auto"``, and the CPU threads a model gets when not told."""

from __future__ import annotations

import importlib.util
import os


def cuda_available() -> bool:
    """True when torch is installed and sees a CUDA device; checked without importing torch where there is no
    NVIDIA driver, so CPU-only hosts pay nothing."""
    if not (os.path.exists("/dev/nvidiactl") or os.environ.get("CUDA_VISIBLE_DEVICES")):
        return False
    try:
        if importlib.util.find_spec("torch") is None:
            return False
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001 - a broken CUDA install means "no CUDA", not a failed trim
        return False


def resolve_device(device: str) -> str:
    """``auto`` -> ``cuda`` when a CUDA device is usable, else ``cpu``; anything else is passed through."""
    return ("cuda" if cuda_available() else "cpu") if device == "auto" else device


def default_threads() -> int:
    """Intra-op threads for a scorer that was not told: one per two cores, at most 8, at least 1. On a 2-core host
    that is 1, which is never slower than more threads when the host is also serving requests."""
    return max(1, min(8, (os.cpu_count() or 1) // 2))


def onnx_threads() -> int:
    """Model calls an ONNX Runtime scorer that was not told runs at once, each on one thread: one per core, at most
    8. The model pass is a trim's critical path (the CPU stages run beside it on the caller's thread), and calls
    side by side use the cores better than one call's intra-op threads do on inputs of a few hundred word pieces
    (``ragtrim-bench relevance onnx_parallel`` measures both), so a pass on a 2-core host ends in about half the
    time and takes no CPU from the host when it is done."""
    return max(1, min(8, os.cpu_count() or 1))


def installed(*modules: str) -> bool:
    """True when every one of ``modules`` can be imported (found without importing it)."""
    try:
        return all(importlib.util.find_spec(m) is not None for m in modules)
    except (ImportError, ValueError):  # a broken or shadowed install counts as absent
        return False
