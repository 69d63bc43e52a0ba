"""Plots for benchmark results (matplotlib with the Agg backend, imported only when a plot is drawn)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def plot_recall_vs_ratio(rows: Sequence[Mapping[str, Any]], path: str | Path, *, title: str = "") -> Path:
    """Answer recall against compression ratio, one line per method family, one panel per setting."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    settings = list(dict.fromkeys(str(r["setting"]) for r in rows))
    n = max(1, len(settings))
    fig, axes = plt.subplots(1, n, figsize=(5.2 * n, 4.2), squeeze=False, sharey=True)
    for ax, setting in zip(axes[0], settings):
        sub = [r for r in rows if r["setting"] == setting]
        families = list(dict.fromkeys(str(r.get("family") or r["method"]) for r in sub))
        for fam in families:
            pts = sorted(
                (float(r["compression_ratio_cl100k"]), float(r["answer_recall"]))
                for r in sub
                if str(r.get("family") or r["method"]) == fam
                and r.get("compression_ratio_cl100k") is not None
                and r.get("answer_recall") is not None
                and not math.isnan(float(r["answer_recall"]))
                and math.isfinite(float(r["compression_ratio_cl100k"]))
            )
            if not pts:
                continue
            xs, ys = zip(*pts)
            ax.plot(xs, ys, marker="o", label=fam)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("compression ratio (cl100k tokens before / after)")
        ax.set_title(setting, fontsize=10)
        ax.grid(True, alpha=0.3)
    axes[0][0].set_ylabel("answer recall of trimmed context")
    axes[0][-1].legend(fontsize=8, loc="lower left")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
