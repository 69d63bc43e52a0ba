"""Screenshots of the committed audit reports for docs/audit.md, taken with headless Chromium.

Each shot is the top of a report's page (``start`` is None) or the page from one section heading on (the part
before it is cut from a temporary copy of the page, so the shot shows that section at the top). The same function
takes them in ``tests/audit/test_audit.py``, which checks them; with ``RAGTRIM_UPDATE_SCREENSHOTS=1`` that test
writes them into docs/audit/, which is how the committed ones were made.
Run from the repository root: ragtrim-bench audit screenshots  -> docs/audit/*.png
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ragtrim_bench.common.results import results_root

DOCS = Path("docs") / "audit"
"""Where docs/audit.md's screenshots live, relative to the working directory (the repository root)."""


@dataclass(frozen=True, slots=True)
class Shot:
    name: str  # the PNG's name in docs/audit
    report: str  # the folder under benchmarks/results/audit
    height: int = 1500
    width: int = 1000
    start: str | None = None  # a heading of the page: the shot starts there


SHOTS = (
    Shot("examples-top.png", "examples"),
    Shot("gateway-rag-top.png", "gateway-rag"),
    Shot("gateway-top.png", "gateway", height=1300),
    Shot("synth-100k-breakdown.png", "synth-100k", height=1800),
    Shot("synth-100k-savings.png", "synth-100k", height=1700, start="<h2>What ragtrim would save</h2>"),
)


def screenshot(html: Path, png: Path, *, width: int = 1000, height: int = 1500, start: str | None = None) -> int:
    """The top of the page at ``html`` (or its part from the heading ``start`` on) in headless Chromium, reduced to
    a 256-colour palette; returns the PNG's size in bytes."""
    chromium = shutil.which("chromium")
    if chromium is None:
        raise SystemExit("chromium is not installed (apt-get install chromium); no screenshot taken")
    from PIL import Image

    with tempfile.TemporaryDirectory() as tmp:
        page = html.resolve()
        if start is not None:
            text = html.read_text(encoding="utf-8")
            head, sep, rest = text.partition("<body>")
            at = rest.find(start)
            if not sep or at < 0:
                raise SystemExit(f"{html} has no {start!r}; no screenshot taken")
            page = Path(tmp) / "page.html"
            page.write_text(head + sep + rest[at:], encoding="utf-8")
        raw = Path(tmp) / "shot.png"
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        f"--screenshot={raw}", f"--window-size={width},{height}", page.as_uri()],
                       check=True, capture_output=True, timeout=120)
        png.parent.mkdir(parents=True, exist_ok=True)
        # Fast octree keeps the few plot colours exact (median cut merged the rare ones: orange came out beige).
        Image.open(raw).convert("RGB").quantize(colors=256, method=Image.Quantize.FASTOCTREE).save(png, optimize=True)
    return png.stat().st_size


def take(shot: Shot, out_dir: Path) -> Path:
    png = out_dir / shot.name
    screenshot(results_root() / "audit" / shot.report / "audit.html", png, width=shot.width, height=shot.height, start=shot.start)
    return png


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DOCS, help="default: docs/audit")
    args = parser.parse_args(argv)
    for shot in SHOTS:
        png = take(shot, args.out)
        print(f"{png}: {png.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
