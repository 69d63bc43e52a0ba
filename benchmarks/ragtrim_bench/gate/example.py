"""The example gate report (docs/gate.md): ``ragtrim gate run`` on a SQuAD 2.0 golden set against fake upstreams,
each standing for one kind of change, and ragtrim's 4x trim on the client side.

The fake upstreams (``ragtrim serve-fake-upstream --answers --needs-evidence``) are readers that answer a question
only when its gold answer is in the prompt, take ``base + per_1k x prompt tokens`` before the first token, and fail
a chosen share of questions; so the trim arm's accuracy is the trim's real answer recall, and its TTFT gain the
prefill it removes against the time the trim takes on this machine. Only the report (``--no-text``: no question or
reply text, the data stays in ../shared/data), the arms file and this run's command go to
``results/gate/example/``; the golden set and the raw results go to ``--work``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragtrim_bench.common.results import command_line, result_path, write_result
from ragtrim_bench.datasets.squad import squad_path
from ragtrim_bench.serve.load import free_port, start_process, stop_process

BASELINE_FLAGS = ("--base-ms", "20", "--per-1k-ms", "37", "--decode-ms", "4")
"""The baseline's timing model: the 12B-shape prefill curve of DESIGN.md (a 19-20 ms floor, 37 ms per 1,000 prompt
tokens), 4 ms per output token."""
CHANGES: dict[str, tuple[tuple[str, ...], str]] = {
    "same": ((), "an exact copy of the baseline: nothing changes"),
    "degraded": (("--wrong-share", "0.06", "--per-1k-ms", "22"),
                 "6% of the questions answered wrong, 40% less prefill per token: the shape of an INT4 model"),
    "slow": (("--base-ms", "60"), "40 ms more before every first token: a slower runtime"),
    "short_context": (("--max-model-len", "MAX_LEN"), ("a max_model_len below the longest prompts (vLLM refuses "
                                                       "those requests with 400)")),
}
TRIM_ARM = "trim_4x"
TRIM_THRESHOLDS = {"min_ttft_gain": 1.5, "max_accuracy_drop": 0.02}
GLOBAL_MIN_TTFT_GAIN = 0.9
"""Every change: no more than about 10% slower to the first token than the baseline."""


def _flags(base: Sequence[str], change: Sequence[str]) -> list[str]:
    """The baseline's flags with a change's on top (a flag given again replaces its value)."""
    merged: dict[str, str | None] = {}
    args = [*base, *change]
    i = 0
    while i < len(args):
        if i + 1 < len(args) and not args[i + 1].startswith("--"):
            merged[args[i]] = args[i + 1]
            i += 2
        else:
            merged[args[i]] = None
            i += 1
    return [x for k, v in merged.items() for x in ((k, v) if v is not None else (k,))]


def max_len_for(golden: Path, share_refused: float = 0.1, max_tokens: int = 128) -> int:
    """A max_model_len that refuses about ``share_refused`` of the golden set's requests (prompt tokens as the fake
    server counts them, characters / 4, plus ``max_tokens``)."""
    from ragtrim._util.stats import percentile
    from ragtrim.gate.arms import Arm
    from ragtrim.gate.golden import load_golden
    from ragtrim.gate.prompt import build_body
    from ragtrim.testing import approx_tokens

    arm = Arm(name="x", url="http://127.0.0.1:1/v1", model="m")
    sizes = []
    for item in load_golden(golden):
        body = build_body(item, arm, item.documents)
        sizes.append(approx_tokens("\n".join(m["content"] for m in body["messages"])) + max_tokens)
    return int(percentile(sizes, 100 * (1 - share_refused)))


def arms_toml(ports: dict[str, int], *, trim: bool = True) -> str:
    """The arms file of the run: the baseline, one arm per fake change, and the trim on the baseline's server."""
    lines = ['baseline = "bf16"', "", "[thresholds]", f"min_ttft_gain = {GLOBAL_MIN_TTFT_GAIN}", ""]
    for name, port in ports.items():
        lines += ["[[arm]]", f'name = "{name}"', f'url = "http://127.0.0.1:{port}/v1"', 'model = "fake"', ""]
    if not trim:
        return "\n".join(lines)
    lines += ["[[arm]]", f'name = "{TRIM_ARM}"', f'url = "http://127.0.0.1:{ports["bf16"]}/v1"', 'model = "fake"',
              'trim = { budget = 0.25, scorer = "bm25" }',
              "thresholds = { " + ", ".join(f"{k} = {v}" for k, v in TRIM_THRESHOLDS.items()) + " }", ""]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    from ragtrim.cli import main as ragtrim_main
    from ragtrim.gate.builders import golden_from_squad
    from ragtrim.gate.golden import write_golden

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--questions", type=int, default=200, help="golden set size (default 200)")
    p.add_argument("--unanswerable-share", type=float, default=0.3)
    p.add_argument("--documents", type=int, default=10, help="paragraphs per question (default 10)")
    p.add_argument("--only", default=None, help="only these changes (comma-separated; default all)")
    p.add_argument("--out", default=None, help="report folder (default results/gate/example/)")
    p.add_argument("--work", default=None, help="folder for the golden set and raw results (default: a temporary "
                                                "one, removed after)")
    p.add_argument("--concurrency", type=int, default=4)
    args = p.parse_args(argv)
    out = Path(args.out) if args.out else result_path(__spec__.name).with_suffix("")
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="ragtrim-gate-example-"))
    changes = args.only.split(",") if args.only else [*CHANGES, TRIM_ARM]
    unknown = set(changes) - {*CHANGES, TRIM_ARM}
    if unknown:
        p.error(f"unknown change(s) {sorted(unknown)}; choose from {[*CHANGES, TRIM_ARM]}")
    work.mkdir(parents=True, exist_ok=True)
    golden = work / "golden.jsonl"
    write_golden(golden_from_squad(squad_path(), limit=args.questions, unanswerable_share=args.unanswerable_share,
                                   documents=args.documents, json_answers=True, seed=0), golden)
    max_len = max_len_for(golden)
    ports = {"bf16": free_port(), **{c: free_port() for c in changes if c != TRIM_ARM}}
    procs: list[Any] = []
    try:
        for name, port in ports.items():
            flags = _flags(BASELINE_FLAGS, CHANGES[name][0] if name in CHANGES else ())
            flags = [str(max_len) if f == "MAX_LEN" else f for f in flags]
            procs.append(start_process(["serve-fake-upstream", "--port", str(port), "--answers", str(golden),
                                        "--needs-evidence", *flags], f"http://127.0.0.1:{port}/health"))
        (work / "arms.toml").write_text(arms_toml(ports, trim=TRIM_ARM in changes), encoding="utf-8")
        code = ragtrim_main(["gate", "run", str(golden), "--arms", str(work / "arms.toml"), "--out", str(work / "out"),
                             "--no-text", "--concurrency", str(args.concurrency), "--no-progress"])
    finally:
        for proc in procs:
            stop_process(proc)
    if code not in (0, 1):
        return code
    out.mkdir(parents=True, exist_ok=True)
    for name in ("gate.json", "gate.html"):
        shutil.copyfile(work / "out" / name, out / name)
    shutil.copyfile(work / "arms.toml", out / "arms.toml")
    report = json.loads((work / "out" / "gate.json").read_text(encoding="utf-8"))
    write_result(out / "example.json", {
        "what": {name: what for name, (_, what) in CHANGES.items() if name in changes}
        | ({TRIM_ARM: "ragtrim's default pipeline at 1/4 of the documents' tokens (BM25), on the client, against the "
                      "baseline's server"} if TRIM_ARM in changes else {}),
        "baseline_flags": list(BASELINE_FLAGS), "short_context_max_model_len": max_len,
        "verdict": report["verdict"], "failed_checks": report["failed_checks"],
        "changes": {n: c["verdict"] for n, c in report["changes"].items()},
        "note": "timings come from the fake servers' model plus this machine's own overhead (client, trim); read "
                "them as an example of the report, not as measurements of any engine",
    }, command=command_line(__spec__.name, argv))
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    print(f"report: {out / 'gate.html'} (verdict {report['verdict']}; ragtrim gate exit code {code})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
