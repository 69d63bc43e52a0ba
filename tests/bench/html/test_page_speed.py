from __future__ import annotations

from ragtrim_bench.html.page_speed import _trafilatura, _trim, rate, report


def test_rate_is_pages_per_second() -> None:
    assert rate([0.5, 0.5]) == 2.0
    assert rate([]) == 0.0


def test_trim_counts_the_raw_page() -> None:
    page = "<html><body><nav>Home | News</nav><article><p>" + "The tower opened in 1889. " * 50 + \
        "</p></article></body></html>"
    result = _trim("")(page)
    assert result.tokens_before > result.tokens_after > 0
    assert "Home" not in result.text
    assert "1889" in (_trafilatura(page) or "")


def test_report_names_both() -> None:
    side = {"pages_per_second": 10.0, "cpu_pages_per_second": 20.0, "p50_ms": 100.0, "p50_cpu_ms": 50.0}
    text = report({"pages": 2, "mean_page_chars": 1000.0, "trim": side, "trafilatura": side,
                   "trim_vs_trafilatura_speed": 1.0, "trim_vs_trafilatura_cpu": 1.0})
    assert "trim() / trafilatura: 1.00x wall" in text
