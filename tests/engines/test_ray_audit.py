"""``ragtrim audit --engine ray`` on a real Ray instance (2 CPUs, started here): the local engine's report, number for
number, also when a worker dies mid-job, and malformed or truncated shards counted per file as the local engine
counts them."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from ragtrim.audit.config import AuditConfig
from ragtrim.audit.core import run_audit
from ragtrim.audit.formats import UnsupportedLogFormat
from ragtrim.audit.savings import SavingsConfig
from ragtrim.cli import main
from ragtrim.engines.options import RayOptions
from ragtrim.engines.ray_audit import run_ray_audit
from ragtrim.errors import ConfigError, InputError
from tests.audit.logs import write_log
from tests.audit.test_merge import comparable
from tests.engines.helpers import kill_busy_worker

pytest.importorskip("ray")
pytestmark = [pytest.mark.ray, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

CFG = AuditConfig(prefix_cache_tokens=600, block_size=4, savings=SavingsConfig(sample=12, seed=3))
OPTIONS = RayOptions(workers=2)


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    d = tmp_path_factory.mktemp("ray-audit")
    return [write_log(d / "a.jsonl", 500, seed=11), write_log(d / "b.jsonl.gz", 150, seed=12, gzipped=True),
            write_log(d / "c.jsonl", 200, seed=13)]


def test_the_command_gives_the_local_engines_report(ray_instance: Any, logs: list[Path], tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    def argv(out: str) -> list[str]:
        return ["audit", *map(str, logs), "--out", str(tmp_path / out), "--sample", "12", "--seed", "3",
                "--prefix-cache-tokens", "600", "--block-size", "4"]

    assert main([*argv("ray"), "--engine", "ray", "--workers", "2", "--shard-mb", "0.03"]) == 0
    r = json.loads((tmp_path / "ray" / "audit.json").read_text())
    assert r["run"]["engine"] == "ray" and r["run"]["shards"] > len(logs) and r["run"]["workers"] == 2
    assert f"{r['run']['shards']} of {r['run']['shards']} shards" in capsys.readouterr().err
    assert comparable(r) == comparable(run_audit(logs, CFG))
    assert main(["audit", str(logs[0]), "--out", str(tmp_path / "x"), "--engine", "ray", "--shard-mb", "0"]) == 2


def test_a_worker_killed_mid_job(ray_instance: Any, tmp_path: Path) -> None:
    log = write_log(tmp_path / "big.jsonl", 2500, seed=14)
    killed: list[str | None] = []

    def kill_once(done: int, total: int) -> None:
        if done == 2 and not killed:  # shards 3 and later are still being read
            killed.append(kill_busy_worker("ShardAuditor"))

    r = run_ray_audit(log, CFG, OPTIONS, shard_bytes=40_000, progress=kill_once)
    assert killed and killed[0] is not None and killed[0].endswith(".submit"), killed
    assert r["run"]["shards"] > 10
    assert comparable(r) == comparable(run_audit(log, CFG))


def test_malformed_and_truncated_shards_are_counted_per_file(ray_instance: Any, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Also: the savings sample trimmed on the workers (as a sample over ``LOCAL_TRIM_MAX`` is) gives the same
    savings as in this process."""
    import ragtrim.engines.ray_audit

    monkeypatch.setattr(ragtrim.engines.ray_audit, "LOCAL_TRIM_MAX", 0)
    good = write_log(tmp_path / "good.jsonl", 120, seed=15)
    bad = tmp_path / "bad.jsonl"
    lines = ['{"messages": [{"role": "user", "content": "fine"}]}', "{broken", "[1, 2]", '{"messages": "nope"}',
             '{"messages": []}', "", "not json at all"]
    bad.write_text("".join(f"{line}\n" for line in lines))
    whole = write_log(tmp_path / "cut.jsonl.gz", 150, seed=16, gzipped=True).read_bytes()
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(whole[: len(whole) * 2 // 3])
    paths = [good, bad, cut]
    r = run_ray_audit(paths, CFG, OPTIONS, shard_bytes=8_000)
    files = r["input"]["files"]
    assert files[1]["requests"] == 1 and files[1]["skipped_lines"]["by_reason"] == {
        "bad_messages": 1, "empty_messages": 1, "not_a_request": 1, "not_json": 2}
    assert not files[2]["complete"] and files[2]["stopped_after_line"] > 0 and not r["input"]["complete"]
    assert r["savings"]["sampled_requests"] == 12
    assert comparable(r) == comparable(run_audit(paths, CFG))


def test_refused_and_unreadable_logs_fail_as_locally(ray_instance: Any, tmp_path: Path) -> None:
    good = write_log(tmp_path / "good.jsonl", 50, seed=17)
    gemini = tmp_path / "gemini.jsonl"
    gemini.write_text(json.dumps({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}) + "\n")
    with pytest.raises(UnsupportedLogFormat, match="gemini.jsonl"):
        run_ray_audit([good, gemini], CFG, OPTIONS)
    latin = tmp_path / "latin.jsonl.gz"
    with gzip.open(latin, "wb") as f:
        f.write(json.dumps({"messages": [{"role": "user", "content": "caf"}]}).encode()[:-4] + b"\xe9\"}]}\n")
    with pytest.raises(InputError, match="not UTF-8 at line 1"):
        run_ray_audit([good, latin], CFG, OPTIONS)


def test_stdin_and_a_full_sample_are_refused_before_any_work(tmp_path: Path) -> None:
    good = write_log(tmp_path / "good.jsonl", 5, seed=18)
    with pytest.raises(ConfigError, match="stdin"):
        run_ray_audit(["-"], CFG, OPTIONS)
    with pytest.raises(ConfigError, match="--sample 0"):
        run_ray_audit(good, AuditConfig(savings=SavingsConfig(sample=0)), OPTIONS)
