"""The quality matrix's picture: one annotated heat map per split, rows (recipes) down, columns (chunk shapes) across
at 4x / 8x / 16x, each cell the answer recall; the best row of each cell column is in bold."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

COLOR_FLOOR = 0.7
"""Recall at or below this gets the darkest red: the differences that matter lie between 0.8 and 1.0."""


def plot_matrix(result: Mapping[str, Any], path: str | Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.patches import Rectangle

    records: Sequence[Mapping[str, Any]] = result["records"]
    splits = list(dict.fromkeys(str(r["split"]) for r in records))
    columns = list(dict.fromkeys(str(r["column"]) for r in records))
    rows = list(dict.fromkeys(str(r["row"]) for r in records))
    ratios = sorted({int(r["ratio"]) for r in records})
    cells = [(c, k) for c in columns for k in ratios]
    fig, axes = plt.subplots(len(splits), 1, figsize=(1.0 + 0.78 * len(cells), 0.9 + (0.48 * len(rows) + 1.2)
                                                       * len(splits)), squeeze=False)
    image = None
    for ax, split in zip(axes[:, 0], splits):
        value = {(str(r["row"]), str(r["column"]), int(r["ratio"])): float(r["answer_recall"])
                 for r in records if r["split"] == split}
        n = {c: max((int(r["n"]) for r in records if r["split"] == split and r["column"] == c), default=0)
             for c in columns}
        grid = np.array([[value.get((row, c, k), np.nan) for c, k in cells] for row in rows])
        image = ax.imshow(np.ma.masked_invalid(grid), cmap="RdYlGn", vmin=COLOR_FLOOR, vmax=1.0, aspect="auto")
        for j in range(len(cells)):
            col = grid[:, j]
            best = np.nanmax(col) if not np.all(np.isnan(col)) else np.nan
            for i in range(len(rows)):
                v = grid[i, j]
                text, weight = ("n/a", "normal") if np.isnan(v) else (f"{v:.3f}", "bold" if v == best else "normal")
                ax.text(j, i, text, ha="center", va="center", fontsize=8.5, fontweight=weight,
                        color="white" if not np.isnan(v) and v < COLOR_FLOOR + 0.1 else "black")
        ax.set_yticks(range(len(rows)), rows, fontsize=10)
        ax.set_xticks(range(len(cells)), [f"{k}x" for _, k in cells], fontsize=9)
        ax.tick_params(length=0)
        for b in range(1, len(columns)):
            ax.axvline(b * len(ratios) - 0.5, color="white", linewidth=4)
        top = ax.secondary_xaxis("top")
        top.set_xticks([b * len(ratios) + (len(ratios) - 1) / 2 for b in range(len(columns))],
                       [f"{c} (n={n[c]})" for c in columns], fontsize=10, fontweight="bold")
        top.tick_params(length=0)
        ax.set_ylabel(split, fontsize=12, fontweight="bold")
        if "default" in rows:
            i = rows.index("default")
            ax.add_patch(Rectangle((-0.5, i - 0.5), len(cells), 1, fill=False, edgecolor="black", linewidth=2))
    if image is not None:
        bar = fig.colorbar(image, ax=axes[:, 0], fraction=0.02, pad=0.01)
        bar.set_label(f"answer recall (<= {COLOR_FLOOR} darkest)")
    fig.suptitle("ragtrim quality matrix: answer recall at 4x / 8x / 16x fewer tokens (bold: best in its column; "
                 f"box: the default) {str(result.get('date', ''))[:10]}", fontsize=12)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return out
