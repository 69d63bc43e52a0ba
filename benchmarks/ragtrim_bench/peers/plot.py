"""The peer comparison's picture: per split, a heat map of answer recall (rows down, columns at 4x / 8x / 16x
across; the peers that cannot run offline as grey rows), each peer cell marked where its paired gap to the default
is significant ("+": the default keeps more, "-": the peer keeps more); beside it, each row's cold p50 cost."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

COLOR_FLOOR = 0.5
"""Recall at or below this gets the darkest red: peers fall far below the default on some columns."""


def plot_peers(result: Mapping[str, Any], path: str | Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.patches import Rectangle

    records: Sequence[Mapping[str, Any]] = result["records"]
    splits = list(dict.fromkeys(str(r["split"]) for r in records))
    columns = list(dict.fromkeys(str(r["column"]) for r in records))
    rows = list(dict.fromkeys(str(r["row"]) for r in records))
    unavailable = [str(u["name"]) for u in result.get("unavailable", [])]
    all_rows = rows + unavailable
    ratios = sorted({int(r["ratio"]) for r in records})
    cells = [(c, k) for c in columns for k in ratios]
    sig = {(c["row"], c["column"], c["split"], int(c["ratio"])): "+" if c["reference_wins_significantly"] else "-"
           for c in result.get("comparisons", []) if c["mcnemar_p"] < 0.05}
    height = 1.0 + (0.42 * len(all_rows) + 1.3) * len(splits)
    fig = plt.figure(figsize=(2.8 + 0.62 * len(cells), height))
    grid = fig.add_gridspec(len(splits), 2, width_ratios=[0.62 * len(cells), 2.2], wspace=0.05)
    image = None
    for i_split, split in enumerate(splits):
        ax = fig.add_subplot(grid[i_split, 0])
        value = {(str(r["row"]), str(r["column"]), int(r["ratio"])): float(r["answer_recall"])
                 for r in records if r["split"] == split}
        n = {c: max((int(r["n"]) for r in records if r["split"] == split and r["column"] == c), default=0)
             for c in columns}
        table = np.array([[value.get((row, c, k), np.nan) for c, k in cells] for row in all_rows])
        image = ax.imshow(np.ma.masked_invalid(table), cmap="RdYlGn", vmin=COLOR_FLOOR, vmax=1.0, aspect="auto")
        for i, row in enumerate(all_rows):
            if row in unavailable:
                ax.axhspan(i - 0.5, i + 0.5, color="0.85")
                ax.text((len(cells) - 1) / 2, i, "cannot run offline (weights only on the model hub)", ha="center",
                        va="center", fontsize=8.5, color="0.3")
                continue
            for j, (c, k) in enumerate(cells):
                v = table[i, j]
                text = "n/a" if np.isnan(v) else f"{v:.2f}" + sig.get((row, c, split, k), "")
                ax.text(j, i, text, ha="center", va="center", fontsize=7.5,
                        color="white" if not np.isnan(v) and v < COLOR_FLOOR + 0.1 else "black")
        ax.set_yticks(range(len(all_rows)), all_rows, fontsize=9)
        ax.set_xticks(range(len(cells)), [f"{k}x" for _, k in cells], fontsize=7.5)
        ax.tick_params(length=0)
        for b in range(1, len(columns)):
            ax.axvline(b * len(ratios) - 0.5, color="white", linewidth=3)
        top = ax.secondary_xaxis("top")
        top.set_xticks([b * len(ratios) + (len(ratios) - 1) / 2 for b in range(len(columns))],
                       [f"{c}\n(n={n[c]})" for c in columns], fontsize=8, fontweight="bold")
        top.tick_params(length=0)
        ax.set_ylabel(split, fontsize=11, fontweight="bold")
        if "default" in all_rows:
            i = all_rows.index("default")
            ax.add_patch(Rectangle((-0.5, i - 0.5), len(cells), 1, fill=False, edgecolor="black", linewidth=2))
    cost = {str(r["row"]): r for r in result.get("cost_by_row", [])}
    bar_ax = fig.add_subplot(grid[:, 1])
    # a run without timed requests (--timed 0) has no positive cost to draw on a log axis
    names = [r for r in rows if r in cost and not _missing(cost[r]["cold_p50_ms"])
             and float(cost[r]["cold_p50_ms"]) > 0]
    p50 = [float(cost[r]["cold_p50_ms"]) for r in names]
    bar_ax.barh(range(len(names)), p50, color=["black" if r == "default" else "0.55" for r in names])
    bar_ax.set_yticks(range(len(names)), names, fontsize=8)
    bar_ax.yaxis.tick_right()  # the names beside the heatmap would run into its bars
    bar_ax.invert_yaxis()
    if p50:
        bar_ax.set_xscale("log")
        bar_ax.set_xlim(right=max(p50) * 8)  # room for the value labels
        bar_ax.set_xlabel("cold p50 ms per request (4x)", fontsize=9)
    else:
        bar_ax.set_xlabel("cold cost not measured (--timed 0)", fontsize=9)
    for y, v in enumerate(p50):
        bar_ax.text(v, y, f" {v:.0f}", va="center", fontsize=7.5)
    if image is not None:
        bar = fig.colorbar(image, ax=fig.axes[:-1], fraction=0.03, pad=0.08, shrink=0.5,
                           location="bottom")  # on the left it covers the row names
        bar.set_label(f"answer recall (<= {COLOR_FLOOR} darkest)")
    fig.suptitle("ragtrim and its peers: answer recall at 4x / 8x / 16x fewer tokens (box: ragtrim's default; "
                 "+/-: paired McNemar p < 0.05, default ahead / peer ahead), and cold cost "
                 f"{str(result.get('date', ''))[:10]}", fontsize=11)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return out


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))
