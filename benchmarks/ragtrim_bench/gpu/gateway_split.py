"""Where each gateway arm's single requests spent their time, read from ``gpu gateway_e2e``'s result files.

For every arm with a request log (``single.<arm>.requests``), per request: the client's time to first token, the
gateway's preparation (the trim inside it), the upstream's time to its first byte as the gateway saw it, and what is
left (``rest``: the client's time less those two, which is the hops between client, gateway and upstream). A request
whose ``rest`` is large lost its time where neither the gateway nor the upstream timed it. From the same log: the
stages' prefetches (``trim_prefetch_ms``, from the ``prefetch:<stage>`` entries where the log has them), and what of
the trim neither its stages nor those entries account for (``trim_outside_stages_ms``: the final checks, and the
prefetch in logs without its entries). The direct arm (the upstream alone) has only the client's times.

Beside the measured gain over the direct arm, each logged arm reports ``free_preparation``: the client's time less the
gateway's preparation, request by request, and the gain at p50 and p99 that would leave, which is the most any
cheaper trim of the same prompts could give; with ``--target ARM=GAIN``, also the preparation p50 that would still
reach that p50 gain (negative where even a free preparation would not). A file that is not such a result is an
InputError naming it.

Run: ragtrim-bench gpu gateway_split FILE [FILE ...] [--over-ms 20] [--target gpu-4x=2.6 ...] [-o OUT.json]
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ragtrim.errors import InputError
from ragtrim_bench.common.results import command_line
from ragtrim_bench.common.stats import percentile

OVER_MS = 20.0


def _spread(values: Sequence[float], over_ms: float | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"p50": percentile(values, 50), "max": max(values)}
    if over_ms is not None:
        out[f"over_{over_ms:g}_ms"] = sum(v > over_ms for v in values)
    return out


def arm_split(body: Mapping[str, Any], *, over_ms: float = OVER_MS, direct: Sequence[float] = (),
              target_gain: float | None = None) -> dict[str, Any]:
    """One arm's split (``body``: ``single.<arm>`` of a ``gpu gateway_e2e`` result; ``direct``: the direct arm's
    times to first token, for the gains a free preparation would give; ``target_gain``: the p50 gain whose
    preparation budget to report)."""
    ttft = [float(x) for x in body["ttft_ms_in_order"]]
    out: dict[str, Any] = {"n": len(ttft), "ttft_ms": _spread(ttft), "p99_ttft_ms": body.get("p99_ttft_ms")}
    for key in ("p50_ttft_gain", "p99_ttft_gain"):
        if body.get(key) is not None:
            out[key] = body[key]
    logged = [(t, r) for t, r in zip(ttft, body.get("requests") or [])
              if r.get("trim_ms") is not None and r.get("upstream_ttft_ms") is not None]
    if not logged:
        return out
    prep = [r["trim_ms"] for _, r in logged]
    upstream = [r["upstream_ttft_ms"] for _, r in logged]
    rest = [t - r["trim_ms"] - r["upstream_ttft_ms"] for t, r in logged]
    stages = [r.get("trim_stages_ms") or {} for _, r in logged]
    outside = [s["pipeline"] - sum(v for k, v in s.items() if k != "pipeline") for s in stages if "pipeline" in s]
    prefetch = [sum(v for k, v in s.items() if k.startswith("prefetch:")) for s in stages
                if any(k.startswith("prefetch:") for k in s)]
    out |= {"logged": len(logged), "preparation_ms": _spread(prep), "upstream_first_byte_ms": _spread(upstream),
            "rest_ms": _spread(rest, over_ms)}
    if prefetch:
        out["trim_prefetch_ms"] = _spread(prefetch, over_ms)
    if outside:
        out["trim_outside_stages_ms"] = _spread(outside, over_ms)
    if direct:
        out["free_preparation"] = _free_preparation([t for t, _ in logged], prep, direct, target_gain)
    return out


def _free_preparation(ttft: Sequence[float], prep: Sequence[float], direct: Sequence[float],
                      target_gain: float | None) -> dict[str, Any]:
    """The times to first token less the preparation, and the gains over ``direct`` they would give."""
    left = [t - p for t, p in zip(ttft, prep)]
    out: dict[str, Any] = {"ttft_less_preparation_ms": {"p50": percentile(left, 50), "p99": percentile(left, 99)},
                           "p50_gain": percentile(direct, 50) / percentile(left, 50),
                           "p99_gain": percentile(direct, 99) / percentile(left, 99)}
    if target_gain is not None:
        out["target_p50_gain"] = target_gain
        out["preparation_p50_budget_ms"] = percentile(direct, 50) / target_gain - percentile(left, 50)
    return out


def split(result: Mapping[str, Any], *, over_ms: float = OVER_MS,
          targets: Mapping[str, float] | None = None) -> dict[str, Any]:
    """Every arm's split of one ``gpu gateway_e2e`` result (``targets``: p50 gains by arm name)."""
    single = result.get("single", {})
    direct = [float(x) for x in (single.get("direct") or {}).get("ttft_ms_in_order") or []]
    return {arm: arm_split(body, over_ms=over_ms, direct=direct if arm != "direct" else (),
                           target_gain=(targets or {}).get(arm))
            for arm, body in single.items() if body.get("ttft_ms_in_order")}


def report(name: str, arms: Mapping[str, Any], over_ms: float) -> str:
    lines = [name]
    for arm, s in arms.items():
        line = f"  {arm:14s} n={s['n']} TTFT p50 {s['ttft_ms']['p50']:.1f} max {s['ttft_ms']['max']:.1f} ms"
        if "rest_ms" in s:
            r, p, u = s["rest_ms"], s["preparation_ms"], s["upstream_first_byte_ms"]
            line += (f"; preparation p50 {p['p50']:.1f} max {p['max']:.1f}; upstream first byte p50 {u['p50']:.1f} "
                     f"max {u['max']:.1f}; rest p50 {r['p50']:.1f} max {r['max']:.1f} "
                     f"({r[f'over_{over_ms:g}_ms']} over {over_ms:g} ms)")
        if "trim_prefetch_ms" in s:
            line += f"; prefetch p50 {s['trim_prefetch_ms']['p50']:.1f} max {s['trim_prefetch_ms']['max']:.1f}"
        if "trim_outside_stages_ms" in s:
            o = s["trim_outside_stages_ms"]
            line += f"; trim outside its stages p50 {o['p50']:.1f} max {o['max']:.1f}"
        if "free_preparation" in s:
            f = s["free_preparation"]
            line += (f"; with a free preparation p50 {f['ttft_less_preparation_ms']['p50']:.1f} ms "
                     f"({f['p50_gain']:.2f}x, p99 {f['p99_gain']:.2f}x)")
            if "preparation_p50_budget_ms" in f:
                line += f"; {f['target_p50_gain']:g}x at p50 leaves {f['preparation_p50_budget_ms']:.1f} ms to prepare"
        lines.append(line)
    return "\n".join(lines)


def read_result(path: Path) -> dict[str, Any]:
    """A ``gpu gateway_e2e`` result file; InputError naming ``path`` when it cannot be read or holds no single
    requests."""
    try:
        result = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: cannot read a gpu gateway_e2e result ({type(exc).__name__}: {exc})") from None
    if not isinstance(result, dict) or not isinstance(result.get("single"), dict):
        raise InputError(f"{path}: not a gpu gateway_e2e result (no 'single' section of single requests)")
    return result


def _targets(parser: argparse.ArgumentParser, given: Sequence[str]) -> dict[str, float]:
    targets: dict[str, float] = {}
    for item in given:
        arm, sep, gain = item.partition("=")
        try:
            value = float(gain)
        except ValueError:
            value = math.nan
        if not sep or not arm or not value > 1.0 or math.isinf(value):
            parser.error(f"--target {item!r}: expected ARM=GAIN with a finite gain above 1, e.g. gpu-4x=2.6")
        targets[arm] = value
    return targets


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="ragtrim-bench gpu gateway_split", description=__doc__.split("\n\n")[0])
    p.add_argument("files", nargs="+", type=Path, help="gpu_gateway.json files of gpu gateway_e2e")
    p.add_argument("--over-ms", type=float, default=OVER_MS, help="count requests whose rest is above this")
    p.add_argument("--target", action="append", default=[], metavar="ARM=GAIN",
                   help="report the preparation p50 that leaves this p50 gain for this arm (repeatable)")
    p.add_argument("-o", "--output", type=Path, default=None, help="also write the splits as JSON")
    args = p.parse_args(argv)
    targets = _targets(p, args.target)
    out: dict[str, Any] = {"benchmark": "gateway_split", "command": command_line(__name__, argv), "files": {}}
    for path in args.files:
        arms = split(read_result(path), over_ms=args.over_ms, targets=targets)
        out["files"][str(path)] = arms
        print(report(str(path), arms, args.over_ms))
    if args.output is not None:
        args.output.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
