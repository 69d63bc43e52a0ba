"""``ragtrim-bench serve gc_pauses``: the gateway's requests with the garbage collector's freeze on and off."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragtrim_bench.serve.gc_pauses import GcPausesConfig, main


def test_each_arm_starts_its_own_gateway_process(shared_data: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("starlette", reason="the serve extra is not installed")
    out = tmp_path / "gc_pauses.json"
    assert main(["--scorer", "bm25", "--requests", "3", "--rounds", "1", "-o", str(out)]) == 0
    result = json.loads(out.read_text())["results"]
    on, off = result["arms"]["freeze_gc on"], result["arms"]["freeze_gc off"]
    assert on["n"] == off["n"] == 3
    assert min(on["objects_frozen"]) > 1000 and on["objects_tracked_after_start"] == [0]  # all of them frozen
    assert off["objects_frozen"] == [0] and min(off["objects_tracked_after_start"]) > 1000
    assert [r["arm"] for r in result["runs"]] == ["freeze_gc off", "freeze_gc on"]
    assert "| freeze_gc on | 3 |" in capsys.readouterr().out


def test_config_is_checked() -> None:
    with pytest.raises(ValueError, match="requests"):
        GcPausesConfig(requests=0)
    with pytest.raises(ValueError, match="budget"):
        GcPausesConfig(budget=1.5)
