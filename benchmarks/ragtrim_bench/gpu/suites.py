"""The GPU harness driver: prepare models, then run engine configurations one at a time, each in its own worker
process, and write one JSON per suite (parsed KV-cache capacity from vLLM's logs included).

Suites (one command each on the lent H200; each fits in 10 minutes):
  a  Gemma 3 270M, real weights: accuracy per arm on the golden and dev sets with BF16 KV, FP8 KV and GGUF Q4_K_M
     weights (the INT4 point), SQuAD refusal accuracy (eager engines: accuracy only).
  b  Gemma-3-12B-shaped dummy weights: single-request TTFT per arm and over a prompt-length sweep, Poisson load
     ladders for untrimmed and trimmed 4x (golden + dev prompts, so no step repeats a prompt).
  c  one change at a time on the 12B shape (FP8 weights, async scheduling, 2,048 batched tokens, prefix caching
     off, the OpenAI-compatible server instead of the in-process engine: single requests and one Poisson step),
     and the 27B shape with tensor parallelism 2 (two GPUs; eager and
     without the custom all-reduce, after the first run's CUDA-graph capture crashed with it).
  The first H200 run (results/gpu/run1/) also measured KV capacity at max_model_len 4,096 and
  16,384 with BF16 and FP8 KV for the 270M and 12B shapes; those engine starts are not repeated.
Usage (on the GPU machine, vLLM importable):
  python -m ragtrim_bench.gpu.suites --suite a --prompts .gpu/prompts --out $OUT   (run.sh runs it)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragtrim.plan.logs import parse_vllm_kv_log
from ragtrim_bench.common.results import command_line, write_result

MODEL_DIR = Path(os.environ.get("RAGTRIM_GPU_MODEL_DIR", "/tmp/gemma-hf"))
DUMMY_DIR = Path(os.environ.get("RAGTRIM_GPU_DUMMY_DIR", "/tmp/gemma-dummy"))
GGUF = Path(os.environ.get("RAGTRIM_GGUF", "/tmp/gemma/gemma-3-270m-q4_k_m.gguf"))
ARMS = ["untrimmed", "trimmed_4x", "trimmed_8x", "oracle"]
BATCHED = 8192


def engine(model: Path | str, *, max_model_len: int, kv: str = "auto", eager: bool = False, **extra: Any) -> dict[str, Any]:
    kw: dict[str, Any] = {
        "model": str(model),
        "dtype": "bfloat16",
        "max_model_len": max_model_len,
        "kv_cache_dtype": kv,
        "gpu_memory_utilization": 0.9,
        "max_num_batched_tokens": BATCHED,
        "seed": 0,
        "enforce_eager": eager,
    }
    kw.update(extra)
    return kw


def specs_for(suite: str, prompts: Path) -> list[dict[str, Any]]:
    nq = str(prompts / "nq20_middle.jsonl")
    dev = str(prompts / "nq20_middle_dev.jsonl")
    sweep = str(prompts / "nq20_sweep.jsonl")
    squad = str(prompts / "squad.jsonl")
    m270 = MODEL_DIR
    d12 = DUMMY_DIR / "12b"
    golden_acc = {"type": "accuracy", "set": "golden"}
    dev_acc = {"type": "accuracy", "set": "dev", "prompts_file": dev, "arms": ["untrimmed", "trimmed_4x", "cand_*",
                                                                              "oracle"]}
    if suite == "a":
        return [
            # accuracy only (no timing on these engines), so eager: CUDA-graph capture would cost minutes of starts
            {"name": "270m_bf16kv_len4096", "engine": engine(m270, max_model_len=4096, eager=True),
             "prompts_file": nq, "tasks": [golden_acc, dev_acc]},
            {"name": "270m_fp8kv_len4096", "engine": engine(m270, max_model_len=4096, kv="fp8", eager=True),
             "prompts_file": nq, "tasks": [golden_acc, dev_acc]},
            # needs the vllm-gguf-plugin wheel (gpu/stage_extra.sh): vLLM 0.26 no longer loads GGUF itself
            {"name": "270m_gguf_q4km", "engine": engine(GGUF, max_model_len=4096, eager=True, tokenizer=str(m270),
                                                        hf_config_path=str(m270)),
             "prompts_file": nq, "tasks": [golden_acc, dev_acc], "timeout_s": 150},
            # the reader-reranked top-1 arm (gpu make_prompts --candidates top1,top1_qlm
            # --only-candidates qlm) beside plain top-1, on the same engine as 270m_bf16kv_len4096
            {"name": "270m_bf16kv_qlm", "engine": engine(m270, max_model_len=4096, eager=True),
             "prompts_file": str(prompts / "nq20_middle_qlm.jsonl"),
             "tasks": [golden_acc, {"type": "accuracy", "set": "dev",
                                    "prompts_file": str(prompts / "nq20_middle_qlm_dev.jsonl")}]},
            # the easier setting: random distractors instead of hard ones, same questions
            # (make_prompts.py --distractors random --only-candidates random --candidates top1,top2 --trim-ratios 4)
            {"name": "270m_bf16kv_random", "engine": engine(m270, max_model_len=4096, eager=True),
             "prompts_file": str(prompts / "nq20_middle_random.jsonl"),
             "tasks": [golden_acc, {"type": "accuracy", "set": "dev",
                                    "prompts_file": str(prompts / "nq20_middle_random_dev.jsonl")}]},
            {"name": "270m_bf16kv_len8192_squad", "engine": engine(m270, max_model_len=8192, eager=True),
             "prompts_file": squad, "tasks": [{"type": "accuracy", "set": "squad", "arms": ["untrimmed", "trimmed_4x",
                                                                                          "oracle"]}]},
        ]
    if suite == "b":
        ladder = {"type": "ladder", "arms": ["untrimmed", "trimmed_4x"], "prompts_file": [nq, dev], "slo_ms": 500,
                  "rates": [2, 4, 6, 8, 10, 12, 16, 24, 32, 48, 64, 96], "step_seconds": 5, "min_requests": 24,
                  "stop_p95_ttft_ms": 2000, "reserve_s": 30}
        return [
            {"name": "12b_bf16kv_len4096", "engine": engine(d12, max_model_len=4096, load_format="dummy"),
             "prompts_file": nq,
             "tasks": [{"type": "single", "arms": ["untrimmed", "trimmed_4x", "trimmed_8x", "cand_*", "oracle"],
                        "n": 20},
                       {"type": "single", "prompts_file": sweep, "n": 8},
                       ladder]},
            # run 4: the same ladder on the engine that captures CUDA graphs up to 1,024 tokens (suite c's
            # 12b_graphs_1024), after 100 single requests per arm
            {"name": "12b_graphs_1024_load", "engine": engine(d12, max_model_len=4096, load_format="dummy",
                                                              compilation_config={"max_cudagraph_capture_size": 1024}),
             "prompts_file": nq,
             "tasks": [{"type": "single", "arms": ["untrimmed", "trimmed_4x", "trimmed_8x", "cand_*", "oracle"],
                        "n": 100, "max_tokens": 8}, ladder], "timeout_s": 480},
        ]
    if suite == "c":
        # one change at a time against 12b_baseline (the BF16 engine of suite b, run again beside the knobs): single
        # requests, then one Poisson step at a rate where the untrimmed BF16 baseline is near saturation
        probe = [{"type": "single", "arms": ["untrimmed", "trimmed_4x"], "n": 20},
                 {"type": "ladder", "arms": ["untrimmed", "trimmed_4x"], "prompts_file": [nq, dev], "slo_ms": 500,
                  "rates": [12], "step_seconds": 8, "min_requests": 60, "reserve_s": 20}]
        tp2_ladder = {"type": "ladder", "arms": ["untrimmed", "trimmed_4x"], "prompts_file": [nq, dev],
                      "slo_ms": 500, "rates": [4, 8, 16, 32], "step_seconds": 4, "min_requests": 16,
                      "stop_p95_ttft_ms": 2000, "reserve_s": 10, "max_tokens": 4}
        sweep_task = {"type": "single", "prompts_file": sweep, "n": 8}

        def tp2_27b(name: str, n_single: int, timeout_s: int, **engine_kw: Any) -> dict[str, Any]:
            """The 27B shape on both GPUs (TP=2, no custom all-reduce, NCCL's INFO log), 4 output tokens."""
            return {"name": name, "engine": engine(DUMMY_DIR / "27b", max_model_len=4096, load_format="dummy",
                                                   tensor_parallel_size=2, disable_custom_all_reduce=True, **engine_kw),
                    "prompts_file": nq, "tasks": [{"type": "single", "arms": ["untrimmed", "trimmed_4x"],
                                                   "n": n_single, "max_tokens": 4}, tp2_ladder],
                    "env": {"NCCL_DEBUG": "INFO"}, "needs_gpus": 2, "timeout_s": timeout_s}

        # run 4: 100 single requests per arm, so that p99 is not the maximum of 20 (8 output tokens: with one request
        # at a time the decode length does not touch TTFT)
        single100 = {"type": "single", "arms": ["untrimmed", "trimmed_4x"], "n": 100, "max_tokens": 8}
        probe100 = [single100, probe[1]]
        return [
            # the BF16 baseline of suite b again, so that each knob has its baseline in the same run; with the length
            # sweep, whose per-request TTFTs (kept since run 3) show where the short-prompt TTFT jumps
            {"name": "12b_baseline", "engine": engine(d12, max_model_len=4096, load_format="dummy"),
             "prompts_file": nq, "tasks": [*probe, sweep_task], "timeout_s": 180},
            # the same engine as 12b_baseline, behind `vllm serve`, requests over HTTP streaming
            {"name": "12b_server", "backend": "server", "engine": engine(d12, max_model_len=4096, load_format="dummy"),
             "prompts_file": nq, "tasks": probe, "timeout_s": 180},
            # needs loguru (gpu/stage_extra.sh), which vLLM 0.26's FP8 path imports
            {"name": "12b_fp8_weights", "engine": engine(d12, max_model_len=4096, load_format="dummy",
                                                         quantization="fp8"),
             "prompts_file": nq, "tasks": probe, "timeout_s": 150},
            {"name": "12b_no_prefix_cache", "engine": engine(d12, max_model_len=4096, load_format="dummy",
                                                             enable_prefix_caching=False),
             "prompts_file": nq, "tasks": probe, "timeout_s": 150},
            {"name": "12b_batched_2048", "engine": engine(d12, max_model_len=4096, load_format="dummy",
                                                          max_num_batched_tokens=2048),
             "prompts_file": nq, "tasks": probe, "timeout_s": 150},
            # run 4 (`run.sh graphs`): the CUDA-graph question, each against 12b_baseline_n100 from the same run
            {"name": "12b_baseline_n100", "engine": engine(d12, max_model_len=4096, load_format="dummy"),
             "prompts_file": nq, "tasks": [*probe100, sweep_task], "timeout_s": 300},
            # CUDA graphs up to 1,024 tokens (vLLM 0.26 captured up to 256 here): run 3 put the 4x arm's ~570-token
            # prompts on a ~47-52 ms no-graph plateau; does a larger capture size move them to the graph side?
            {"name": "12b_graphs_1024", "engine": engine(d12, max_model_len=4096, load_format="dummy",
                                                         compilation_config={"max_cudagraph_capture_size": 1024}),
             "prompts_file": nq, "tasks": [*probe100, sweep_task], "timeout_s": 280},
            # CUDA graphs for the attention-free pieces only (vLLM's default adds full graphs)
            {"name": "12b_piecewise", "engine": engine(d12, max_model_len=4096, load_format="dummy",
                                                       compilation_config={"cudagraph_mode": "PIECEWISE"}),
             "prompts_file": nq, "tasks": [*probe100, sweep_task], "timeout_s": 280},
            # no torch.compile and no CUDA graphs: does the non-monotone TTFT of 384-1,024-token prompts go away?
            # (run 3: started, then needed more than 150 s for 40 requests of 32 eager decode steps; so no load step)
            {"name": "12b_eager", "engine": engine(d12, max_model_len=4096, load_format="dummy", eager=True),
             "prompts_file": nq, "tasks": [single100, sweep_task], "timeout_s": 280},
            {"name": "12b_async_scheduling", "engine": engine(d12, max_model_len=4096, load_format="dummy",
                                                              async_scheduling=True),
             "prompts_file": nq, "tasks": probe, "timeout_s": 150},
            # NCCL's INFO log names the transport between the two GPUs (P2P/NVLink or shared memory): run 2's eager
            # TP=2 engine took about 150 ms per 27B decode step
            tp2_27b("27b_tp2_bf16kv_len4096", 10, 240, eager=True),
            # run 4, last device minutes: the same TP=2 engine with torch.compile and CUDA graphs (up to 1,024 tokens,
            # NCCL all-reduce inside the graphs: run 1's graphs crashed with the custom all-reduce, disabled here)
            tp2_27b("27b_tp2_graphs", 20, 300, compilation_config={"max_cudagraph_capture_size": 1024}),
            # run 4's 27b_tp2_graphs crashed in graph capture (illegal memory access in the fused all-reduce + RMSNorm
            # kernel that vLLM 0.26 picks on H200 TP=2, FlashInfer "mnnvl" backend; vllm-project/vllm#34948): the same
            # engine without that fusion. Not run yet.
            tp2_27b("27b_tp2_graphs_nofuse", 20, 420,
                    compilation_config={"max_cudagraph_capture_size": 1024,
                                        "pass_config": {"fuse_allreduce_rms": False}}),
        ]
    raise SystemExit(f"unknown suite {suite!r}; use a, b or c")


def prepare_models() -> dict[str, Any]:
    """Write the 270M HF directory (dequantized from the GGUF) and the dummy-shaped configs, once per machine."""
    from ragtrim_bench.models import gemma as model_prep

    info: dict[str, Any] = {}
    started = time.perf_counter()
    if not (MODEL_DIR / "config.json").exists():
        model_prep.write_hf_model_dir(MODEL_DIR, GGUF)
    info["model_dir_s"] = time.perf_counter() - started
    for size in ("4b", "12b", "27b"):
        if not (DUMMY_DIR / size / "config.json").exists():
            model_prep.write_dummy_config(DUMMY_DIR / size, size, tokenizer_dir=MODEL_DIR)
    info["model_configs"] = {
        "270m": json.loads((MODEL_DIR / "config.json").read_text()),
        **{size: json.loads((DUMMY_DIR / size / "config.json").read_text()) for size in ("4b", "12b", "27b")},
    }
    return info


def visible_gpu_args() -> list[str]:
    """``nvidia-smi`` arguments limiting a query to the GPUs this driver may use (``CUDA_VISIBLE_DEVICES``), so two
    drivers pinned to different GPUs of one machine do not wait for each other's engines."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    if not visible or not all(part.strip().isdigit() for part in visible.split(",")):
        return []
    return ["-i", ",".join(part.strip() for part in visible.split(","))]


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """End the worker's whole process group, then wait (up to 30 s) for the GPU memory to be released."""
    import signal

    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            continue
    for _ in range(30):
        try:
            out = subprocess.run(["nvidia-smi", *visible_gpu_args(), "--query-compute-apps=pid", "--format=csv,noheader"],
                                 capture_output=True, text=True, check=False, timeout=20).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return  # no nvidia-smi: nothing to wait for
        if not out:
            return
        time.sleep(1)


def run_worker(spec: dict[str, Any], workdir: Path, deadline: float) -> dict[str, Any]:
    spec = dict(spec, deadline_unix=deadline)
    server_log = workdir / f"{spec['name']}.server.log"
    if spec.get("backend") == "server":
        spec["server_log"] = str(server_log)
    spec_path = workdir / f"{spec['name']}.spec.json"
    out_path = workdir / f"{spec['name']}.result.json"
    log_path = workdir / f"{spec['name']}.log"
    spec_path.write_text(json.dumps(spec), encoding="utf-8")
    env = dict(os.environ, PYTHONUNBUFFERED="1", VLLM_LOGGING_LEVEL="INFO", **spec.get("env", {}))
    started = time.perf_counter()
    with open(log_path, "wb") as log:
        # its own process group: on a timeout the engine-core and TP worker processes go too (left behind, they
        # hold the GPU memory and the next engines fail to start)
        proc = subprocess.Popen([sys.executable, "-m", "ragtrim_bench.gpu.worker", str(spec_path), str(out_path)],
                                stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            rc: int | str = proc.wait(timeout=max(30.0, min(deadline - time.time(), spec.get("timeout_s", 1e9))))
        except subprocess.TimeoutExpired:
            rc = "timeout"
        _kill_group(proc)
    text = log_path.read_text(encoding="utf-8", errors="replace")
    if server_log.exists():  # `vllm serve` logs the KV capacity in its own log
        text += "\n" + server_log.read_text(encoding="utf-8", errors="replace")
    result: dict[str, Any] = (json.loads(out_path.read_text()) if out_path.exists()
                              else {"name": spec["name"], "engine": spec["engine"], "tasks": [],
                                    "errors": ["worker wrote no result (see returncode and log_tail)"]})
    result["returncode"] = rc
    result["wall_s"] = time.perf_counter() - started
    result["vllm_kv_log"] = parse_vllm_kv_log(text)
    result["log_tail"] = text.splitlines()[-40:]
    print(f"[run_gpu] {spec['name']}: rc={rc} wall={result['wall_s']:.0f}s kv={result['vllm_kv_log']}", flush=True)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="ragtrim GPU harness driver")
    parser.add_argument("--suite", choices=["a", "b", "c"], help="required unless --prepare-only")
    parser.add_argument("--prompts", type=Path, default=Path(".gpu") / "prompts",
                        help="the prompt files of gpu make_prompts (default: .gpu/prompts in the working directory)")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/ragtrim-gpu-out")))
    parser.add_argument("--budget-s", type=float, default=540.0, help="wall-clock budget of this command")
    parser.add_argument("--only", default=None, help="comma-separated spec names")
    parser.add_argument("--tag", default="", help="suffix of the output file and work folder (gpu_suite_<suite><tag>."
                                                   "json), e.g. for two drivers pinned to different GPUs")
    parser.add_argument("--prepare-only", action="store_true", help="write the model folders, then stop")
    args = parser.parse_args(argv)
    t0 = time.time()
    deadline = t0 + args.budget_s
    if args.prepare_only:
        info = prepare_models()
        print(f"[run_gpu] models ready in {info['model_dir_s']:.0f}s", flush=True)
        return 0
    if args.suite is None:
        parser.error("--suite is required (unless --prepare-only)")
    name = f"gpu_suite_{args.suite}{args.tag}"
    command = command_line(__spec__.name, argv)
    args.out.mkdir(parents=True, exist_ok=True)
    workdir = Path("/tmp/ragtrim-gpu-work") / f"{args.suite}{args.tag}"
    workdir.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {"suite": args.suite, "tag": args.tag, "started_unix": t0, "runs": [],
                               "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}
    summary["prepare"] = prepare_models()
    try:
        import torch
        import vllm

        summary["versions"] = {"vllm": vllm.__version__, "torch": torch.__version__,
                               "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}
    except Exception as exc:  # noqa: BLE001 - recorded; the workers will fail visibly too
        summary["versions"] = {"error": repr(exc)}
    specs = specs_for(args.suite, args.prompts)
    if args.only:
        wanted = set(args.only.split(","))
        unknown = wanted - {s["name"] for s in specs}
        if unknown:
            raise SystemExit(f"--only names no spec of suite {args.suite}: {sorted(unknown)}")
        specs = [s for s in specs if s["name"] in wanted]
    try:
        import torch

        gpus = torch.cuda.device_count()
    except Exception:  # noqa: BLE001 - optional probe: no usable torch/CUDA means no GPUs
        gpus = 0
    for spec in specs:
        if spec.get("needs_gpus", 1) > gpus:
            summary["runs"].append({"name": spec["name"], "skipped": f"needs {spec['needs_gpus']} GPUs, found {gpus}"})
            continue
        if time.time() > deadline - 40:
            summary["runs"].append({"name": spec["name"], "skipped": "deadline"})
            continue
        summary["runs"].append(run_worker(spec, workdir, deadline))
        write_result(args.out / f"{name}.json", summary, command=command, packages=["vllm"])
    summary["wall_s"] = time.time() - t0
    write_result(args.out / f"{name}.json", summary, command=command, packages=["vllm"])
    with tarfile.open(args.out / f"{name}_logs.tar.gz", "w:gz") as tar:
        for log in sorted(workdir.glob("*.log")):
            tar.add(log, arcname=log.name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
