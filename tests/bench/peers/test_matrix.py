"""The peer comparison's run: configuration, cold measurement, cells, slow rows on a prefix, merging, and the
written JSON, report and plot (fixture requests, rows that load no model)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ragtrim.errors import ConfigError, InputError
from ragtrim_bench.peers.matrix import PeersConfig, main, measure, merge, parse_args, run_peers, write_result
from ragtrim_bench.peers.report import report_text
from ragtrim_bench.peers.rows import PeerOutput, PeerRow
from ragtrim_bench.relevance.columns import Request, Split

PASSAGES = ("the weather is sunny today and the sky is clear over the whole valley",
            "the rollback window closes at 18:00 UTC on Friday after the final review",
            "lunch is served in the main hall at noon for every team on the floor",
            "parking is free on weekends for staff who show a badge at the gate")


def _request(rid: str, column: str = "c", split: Split = "dev") -> Request:
    return Request(column=column, split=split, id=rid, question="when does the rollback window close",
                   answers=("18:00 UTC on Friday",), passages=PASSAGES, gold_index=1)


def _everything(passages: Sequence[str], question: str, budget: int) -> PeerOutput:
    """A peer with no budget of its own: it returns every passage, and the shared cut does the rest."""
    from ragtrim import get_counter
    from ragtrim_bench.peers.rows import cut_to_budget

    return cut_to_budget(passages, budget, get_counter(None))


def _gold_only(passages: Sequence[str], question: str, budget: int) -> PeerOutput:
    """The gold passage whatever the budget (over it at 8x and 16x: a violation the run must report)."""
    return PeerOutput(passages[1], 14)


def _broken(passages: Sequence[str], question: str, budget: int) -> PeerOutput:
    raise ValueError("peer failed")


CLEARED: list[str] = []
ROWS = [PeerRow("default", _gold_only, "the reference"),
        PeerRow("everything", _everything, "no budget of its own", clear=lambda: CLEARED.append("everything")),
        PeerRow("slow", _gold_only, "a slow peer", slow=True),
        PeerRow("broken", _broken, "always fails")]


def _run(tmp_path: Path, **kwargs: Any) -> dict[str, Any]:
    requests: dict[tuple[str, Split], list[Request]] = {("c", "dev"): [_request(f"r{i}") for i in range(4)],
                ("d", "dev"): [_request(f"s{i}", column="d") for i in range(4)]}
    config = PeersConfig(splits=("dev",), columns=("nq-title",), limit=4, slow_limit=2, timed=3, progress=False,
                         output=str(tmp_path / "peers.json"), **kwargs)
    return run_peers(config, requests=requests, rows=ROWS, clear=lambda: None, command="test")


class TestConfig:
    def test_defaults(self) -> None:
        config = PeersConfig()
        assert (config.limit, config.slow_limit, config.ratios) == (100, 100, (4, 8, 16))

    @pytest.mark.parametrize(("kwargs", "message"), [
        ({"limit": 0}, "limit must be >= 1, got 0"),
        ({"slow_limit": 0}, "slow_limit must be >= 1, got 0"),
        ({"timed": -1}, "timed must be >= 0, got -1"),
        ({"splits": ("test",)}, "splits must be among"),
        ({"columns": ("nope",)}, "unknown columns"),
        ({"rows": ()}, "at least one row"),
        ({"ratios": (8, 16)}, "include 4"),
        ({"lingua_device": "tpu"}, "lingua_device must be cpu or cuda"),
    ])
    def test_invalid(self, kwargs: dict[str, Any], message: str) -> None:
        with pytest.raises(ConfigError, match=message):
            PeersConfig(**kwargs)

    def test_parse_args(self) -> None:
        config, parts = parse_args(["--split", "heldout", "--rows", "default,langchain", "--slow-limit", "5"])
        assert (config.splits, config.rows, config.slow_limit, parts) == (("heldout",), ("default", "langchain"), 5,
                                                                          None)


class TestMeasure:
    def test_cold_timed_call_and_overshoot(self) -> None:
        from ragtrim import get_counter

        CLEARED.clear()
        cleared: list[int] = []
        out = measure(ROWS[1], _request("r"), (4, 8), get_counter(None), lambda: cleared.append(1), timed=True)
        assert cleared == [1] and CLEARED == ["everything"]
        assert out.error is None and out.cold_ms is not None and out.cold_cpu_s is not None
        assert all(t <= b for t, b in zip(out.tokens_after, out.budgets))
        assert out.cut == (True, True) and all(p > b for p, b in zip(out.produced_tokens, out.budgets))

    def test_untimed(self) -> None:
        from ragtrim import get_counter

        out = measure(ROWS[0], _request("r"), (4,), get_counter(None), lambda: None, timed=False)
        assert out.cold_ms is None and out.kept == (True,)

    def test_an_error_is_a_record(self) -> None:
        from ragtrim import get_counter

        out = measure(ROWS[3], _request("r"), (4,), get_counter(None), lambda: None, timed=True)
        assert out.error == "ValueError: peer failed" and out.kept == ()


class TestRun:
    def test_cells_records_and_comparisons(self, tmp_path: Path) -> None:
        result = _run(tmp_path)
        cells = {(c["row"], c["column"]): c for c in result["cells"]}
        assert len(cells["slow", "c"]["request_ids"]) == 2  # slow rows: the first --slow-limit requests
        assert len(cells["everything", "c"]["request_ids"]) == 4
        assert cells["everything", "c"]["cold_ms"][3] is None  # only the first --timed are timed
        assert cells["broken", "c"]["kept"]["4"] == "0000"
        totals = result["totals"]
        assert totals["broken"]["errors"] == 8 and totals["everything"]["n_overshoot"] == 24
        assert totals["everything"]["budget_violations"] == 0  # the shared cut holds every budget
        assert totals["default"]["budget_violations"] == 16  # 16 tokens of gold over the 8x and 16x budgets
        slow = [c for c in result["comparisons"] if c["row"] == "slow" and c["column"] == "c"]
        assert {c["n"] for c in slow} == {2}
        assert result["unavailable"][0]["name"] == "llmlingua-2"

    def test_merge_of_disjoint_parts(self, tmp_path: Path) -> None:
        result = _run(tmp_path)
        part_c = {**result, "cells": [c for c in result["cells"] if c["column"] == "c"]}
        part_d = {**result, "cells": [c for c in result["cells"] if c["column"] == "d"]}
        merged = merge([part_c, part_d], command="merged")
        assert merged["records"] == result["records"] and merged["comparisons"] == result["comparisons"]
        assert merged["command"] == "merged" and len(merged["parts"]) == 2
        with pytest.raises(InputError, match="disjoint"):
            merge([part_c, part_c], command="x")

    def test_written_json_report_and_plot(self, tmp_path: Path) -> None:
        result = _run(tmp_path)
        json_path, png = write_result(result, tmp_path / "peers.json")
        assert json.loads(json_path.read_text())["benchmark"] == "peers"
        assert png is not None and png.stat().st_size > 10_000
        text = report_text(result)
        assert "| llmlingua-2 | cannot run offline | cannot run offline |" in text
        assert "everything" in text and "budget violations: 24  errors: 8 " in text


def test_main_reports_a_bad_argument(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--limit", "0"]) == 1
    assert "limit must be >= 1" in capsys.readouterr().err


# -- the GPU run's shell side (gpu/stage_peers.sh, gpu/run_peers.sh) ------------------------------------------
# run_peers.sh takes the staged chunks and refuses an incomplete or corrupt bundle, or a host without the GGUF
# that the vLLM staging writes, before it installs or runs anything.
SCRIPTS = Path(__file__).resolve().parents[3] / "benchmarks" / "ragtrim_bench" / "gpu"
RUN_SCRIPT = SCRIPTS / "run_peers.sh"

def stage_chunks(root: Path, chunks: list[bytes]) -> str:
    """``.gpu/peers/p1 .. pN`` as stage_peers.sh lays them out; the bundle's checksum and count in p1."""
    sha = hashlib.sha256(b"".join(chunks)).hexdigest()
    for k, data in enumerate(chunks, 1):
        folder = root / ".gpu" / "peers" / f"p{k}"
        folder.mkdir(parents=True)
        (folder / f"chunk.{k - 1:02d}").write_bytes(data)
    (root / ".gpu" / "peers" / "p1" / "bundle.sha256").write_text(f"{sha} {len(chunks)}\n")
    return sha


def run_script(root: Path, *args: str, gguf: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PEERS_WORK": str(root / "pe"), "OUT": str(root / "out"),
           "PEERS_GGUF": str(gguf or root / "absent.gguf")}
    return subprocess.run(["bash", str(RUN_SCRIPT), *args], cwd=root, env=env, capture_output=True, text=True,
                          timeout=60, check=False)


_BASH = pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")


@_BASH
def test_gpu_scripts_parse() -> None:
    for script in ("stage_peers.sh", "run_peers.sh"):
        assert subprocess.run(["bash", "-n", str(SCRIPTS / script)], check=False).returncode == 0


@_BASH
def test_gpu_take_copies_one_chunk(tmp_path: Path) -> None:
    stage_chunks(tmp_path, [b"a" * 10, b"b" * 5])
    done = run_script(tmp_path, "take", "p2")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "pe" / "p2" / "chunk.01").read_bytes() == b"b" * 5
    assert not (tmp_path / "pe" / "p1").exists()


@_BASH
def test_gpu_run_needs_the_gguf_of_the_vllm_staging(tmp_path: Path) -> None:
    stage_chunks(tmp_path, [b"a"])
    done = run_script(tmp_path, "run")
    assert done.returncode == 2 and "absent.gguf is missing" in done.stdout and "gpu-setup.sh" in done.stdout


@_BASH
def test_gpu_run_refuses_a_missing_chunk(tmp_path: Path) -> None:
    stage_chunks(tmp_path, [b"a" * 10, b"b" * 5])
    shutil.rmtree(tmp_path / ".gpu" / "peers" / "p2")  # carried p1 only
    gguf = tmp_path / "g.gguf"
    gguf.write_bytes(b"GGUF")
    done = run_script(tmp_path, "run", gguf=gguf)
    assert done.returncode == 2 and "chunk p2 of 2 is missing" in done.stdout


@_BASH
def test_gpu_run_refuses_a_corrupt_bundle(tmp_path: Path) -> None:
    stage_chunks(tmp_path, [b"a" * 10, b"b" * 5])
    (tmp_path / ".gpu" / "peers" / "p2" / "chunk.01").write_bytes(b"c" * 5)
    gguf = tmp_path / "g.gguf"
    gguf.write_bytes(b"GGUF")
    done = run_script(tmp_path, "run", gguf=gguf)
    assert done.returncode == 2 and "bundle checksum differs" in done.stdout
    assert not (tmp_path / "pe" / "site").exists()  # nothing installed
