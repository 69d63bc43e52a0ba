"""What the GPU runs' raw logs said, summarized for the repository (ragtrim_bench.gpu.engine_logs)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from ragtrim_bench.gpu.engine_logs import cudagraph_max_tokens, log_facts, summarize_logs

ENGINE_LOG = """INFO config: {'mode': 3, 'max_cudagraph_capture_size': 1024, 'x': 1}
INFO [monitor.py:53] torch.compile took 33.89 s in total
INFO [core.py:340] init engine (profile, create kv cache, warmup model) took 50.65 s (compilation: 33.89 s)
ERROR torch.AcceleratorError: CUDA error: an illegal memory access was encountered
"""


def test_log_facts() -> None:
    facts = log_facts(ENGINE_LOG)
    assert facts["max_cudagraph_capture_size"] == 1024 and facts["init_engine_s"] == [50.65]
    assert facts["torch_compile_s"] == [33.89] and facts["lines"] == 4
    assert facts["error_line_count"] == 1 and "illegal memory access" in facts["error_lines"][0]
    assert log_facts("[run_gpu] a: rc=0\nplain\n")["driver_lines"] == ["[run_gpu] a: rc=0"]
    empty = log_facts("")
    assert empty["max_cudagraph_capture_size"] is None and empty["lines"] == 0


def test_archives_and_plain_logs(tmp_path: Path) -> None:
    run = tmp_path / "logs" / "run4"
    run.mkdir(parents=True)
    with tarfile.open(run / "gpu_suite_c_logs.tar.gz", "w:gz") as tar:
        data = ENGINE_LOG.encode()
        info = tarfile.TarInfo("12b_graphs_1024.log")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    (run / "driver.log").write_text("[run_gpu] 12b: rc=0\n", encoding="utf-8")
    summary = summarize_logs([tmp_path / "logs"])
    assert sorted(summary["logs"]) == ["logs/run4/driver.log", "logs/run4/gpu_suite_c_logs.tar.gz:12b_graphs_1024.log"]
    assert cudagraph_max_tokens(summary, "logs/run4/gpu_suite_c_logs.tar.gz:12b_graphs_1024.log") == 1024
    assert cudagraph_max_tokens(summary, "logs/run4/missing.log") is None
