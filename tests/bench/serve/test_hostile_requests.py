"""The hostile-requests benchmark (ragtrim_bench.serve.hostile_requests): its pure helpers, then the small version end to end
(a real `ragtrim serve` and fake upstream as subprocesses). Timing targets are the benchmark's; this test checks
what must hold on any machine: every request answered, every error OpenAI-shaped with a code, nothing missing from
the request log or the metrics."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("uvicorn", reason="the serve extra is not installed: pip install 'ragtrim[serve]'")

from ragtrim_bench.serve.hostile_requests import dechunk, error_code, main, nested, parse_response, targets


def test_parse_response_and_dechunk() -> None:
    raw = b"HTTP/1.1 413 Request Entity Too Large\r\ncontent-type: application/json\r\ntransfer-encoding: chunked" \
          b"\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
    status, headers, body = parse_response(raw)
    assert status == 413 and headers["content-type"] == "application/json" and body == b"hello world"
    assert dechunk(b"3\r\nabc\r\n0\r\n\r\n") == b"abc"
    assert parse_response(b"") == (0, {}, b"")


def test_error_code_needs_the_openai_shape() -> None:
    json_h = {"content-type": "application/json"}
    good = json.dumps({"error": {"message": "m", "type": "t", "param": None, "code": "x"}}).encode()
    assert error_code(400, json_h, good) == ("x", True)
    no_code = json.dumps({"error": {"message": "m", "type": "t", "param": None, "code": None}}).encode()
    assert error_code(400, json_h, no_code) == (None, False)
    assert error_code(404, {"content-type": "text/plain"}, b"Not Found") == (None, False)
    assert error_code(400, json_h, b'{"detail": "x"}') == (None, False)


def test_nested_depth() -> None:
    assert nested(2) == {"a": {"a": "leaf"}}


def test_targets() -> None:
    c = {"class": "large_body", "requests": 1, "probe_p99_ms": 10.0, "rss_growth_mb": 5.0, "every_error_openai_shaped": True, "missing_from_log": [],
         "log_status_mismatch": [], "missing_from_metrics": 0, "errors_missing_from_metrics": 0, "statuses": [200]}
    assert all(v is True for k, v in targets({"classes": [c]}).items() if not k.endswith("_max"))
    slow = {**c, "probe_p99_ms": 80.0, "statuses": [0, 400]}
    t = targets({"classes": [c, slow]})
    assert t["probe_p99_le_50ms"] is False and t["no_request_unanswered"] is False and t["probe_p99_ms_max"] == 80
    flood = {**c, "class": "readiness_flood", "requests": 100, "upstream_models_calls": 1}
    assert targets({"classes": [c, flood]})["readiness_probes_share_one_upstream_call"] is True
    flood["upstream_models_calls"] = 100  # one upstream call per probe
    assert targets({"classes": [c, flood]})["readiness_probes_share_one_upstream_call"] is False


def test_quick_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "hostile.json"
    assert main(["--quick", "--output", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["command"].endswith("--quick --output " + str(out))
    classes = {c["class"]: c for c in report["classes"]}
    assert set(classes) == {"idle", "large_body", "large_message", "deep_json", "escaped_keys", "many_documents",
                            "slow_body", "stalled_body", "hidden_text", "bad_types", "unknown_routes",
                            "http10_stream", "never_fits", "huge_answers", "spaceless_documents", "readiness_flood"}
    t = report["targets"]
    assert t["every_error_openai_shaped_with_code"] and t["nothing_missing_from_log"]
    assert t["nothing_missing_from_metrics"] and t["no_request_unanswered"]
    assert classes["large_body"]["codes"] == ["request_too_large"]
    assert classes["stalled_body"]["codes"] == ["request_timeout"] and classes["stalled_body"]["requests"] == 5
    assert classes["deep_json"]["codes"] == ["invalid_json", "json_too_deep"]
    assert classes["hidden_text"]["codes"] == ["context_length_exceeded"]
    assert classes["escaped_keys"]["statuses"] == [200] and classes["many_documents"]["statuses"] == [200]
    http10 = classes["http10_stream"]["answers"][0]
    assert http10["status"] == 200 and "transfer-encoding=none" in http10["note"] and "True" in http10["note"]
    assert classes["never_fits"]["answers"][0]["note"] == "x-should-retry=false"
    huge = classes["huge_answers"]
    assert huge["statuses"] == [200] and huge["requests"] == 2
    assert all("usage_at_end=True" in a["note"] for a in huge["answers"])
    flood = classes["readiness_flood"]
    assert flood["statuses"] == [200] and flood["requests"] == 20 and flood["upstream_models_calls"] == 1
    assert t["readiness_probes_share_one_upstream_call"]
    assert "probe p50" in capsys.readouterr().out
