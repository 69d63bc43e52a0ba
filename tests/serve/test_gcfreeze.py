"""The gateway freezes its start-up objects out of the garbage collector's reach while it serves, and only then; it
times the collector's stops and charges each request the ones that fell inside it."""

from __future__ import annotations

import gc
import re
import threading
import time
import weakref
from pathlib import Path
from typing import Any

import httpx

from ragtrim._util import gcclock, gcfreeze
from tests.serve.conftest import read_log


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def test_shared_freeze_is_released_by_its_last_holder() -> None:
    assert gcfreeze.holders() == 0 and gc.get_freeze_count() == 0
    try:
        assert gcfreeze.freeze_start_up() > 0
        assert gcfreeze.freeze_start_up() > 0  # a second gateway in the process shares the freeze
        assert gcfreeze.holders() == 2
        gcfreeze.release()
        assert gcfreeze.holders() == 1 and gc.get_freeze_count() > 0
    finally:
        gcfreeze.release()
    assert gcfreeze.holders() == 0 and gc.get_freeze_count() == 0
    gcfreeze.release()  # one release too many changes nothing
    assert gcfreeze.holders() == 0


def test_objects_made_after_the_freeze_are_still_collected() -> None:
    gcfreeze.freeze_start_up()
    try:
        a, b = _Node(), _Node()
        a.other, b.other = b, a  # a cycle: only the cyclic collector can free it
        gone = weakref.ref(a)
        del a, b
        gc.collect()
        assert gone() is None
    finally:
        gcfreeze.release()


def _served(gateway: Any, fake: Any, serve: dict[str, Any]) -> tuple[int, int]:
    up = fake()
    gw, _ = gateway({"upstream": {"url": up.url + "/v1"}, "serve": serve})
    r = httpx.post(gw.url + "/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 200
    return gcfreeze.holders(), gc.get_freeze_count()


def test_gateway_freezes_while_it_serves(servers: Any, fake: Any, gateway: Any) -> None:
    holders, frozen = _served(gateway, fake, {})
    assert holders == 1 and frozen > 1000  # the modules and the warmed-up trimming code at least
    for s in reversed(servers):
        s.stop()
    servers.clear()
    assert gcfreeze.holders() == 0 and gc.get_freeze_count() == 0


def test_gateway_with_freeze_gc_off_freezes_nothing(fake: Any, gateway: Any) -> None:
    assert _served(gateway, fake, {"freeze_gc": False}) == (0, 0)


def test_gc_clock_times_collections_while_installed() -> None:
    gcclock.install()
    gcclock.install()  # a second gateway in the process shares the hook
    try:
        before, paused = gcclock.totals()[2], gcclock.paused_s()
        gc.collect()
        after = gcclock.totals()[2]
        assert after[1] == before[1] + 1 and after[2] > before[2]  # one more full collection, and its time
        assert after[3] >= after[2] - before[2] > 0 and gcclock.paused_s() > paused
        gcclock.uninstall()
        gc.collect()
        assert gcclock.totals()[2][1] == before[1] + 2  # still timed: one holder is left
    finally:
        gcclock.uninstall()
    counted = gcclock.totals()[2][1]
    gc.collect()
    assert gcclock.totals()[2][1] == counted and gcclock.uninstall() is None  # removed; one more changes nothing


def test_gateway_shows_gc_stops_and_charges_each_request_its_share(fake: Any, gateway: Any, tmp_path: Path) -> None:
    up = fake(base_ms=400)  # the upstream's first token comes 0.4 s after the request reaches it
    path = tmp_path / "requests.jsonl"
    gw, _ = gateway({"upstream": {"url": up.url + "/v1"}, "log": {"path": str(path)}})
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    full = re.compile(r'^ragtrim_serve_gc_collections_total\{generation="2"\} (\S+)$', re.MULTILINE)
    before = float(full.search(httpx.get(gw.url + "/metrics").text).group(1))
    took: list[float] = []

    def collect_while_the_request_waits() -> None:
        time.sleep(0.15)
        started = time.perf_counter()
        for _ in range(3):
            gc.collect()  # the gateway runs in this process: its request waits on these stops too
        took.append(time.perf_counter() - started)

    worker = threading.Thread(target=collect_while_the_request_waits)
    worker.start()
    assert httpx.post(gw.url + "/v1/chat/completions", json=body).status_code == 200
    worker.join()
    assert httpx.post(gw.url + "/v1/chat/completions", json=body).status_code == 200
    metrics = httpx.get(gw.url + "/metrics").text
    assert float(full.search(metrics).group(1)) >= before + 3
    assert 'ragtrim_serve_gc_pause_seconds_total{generation="2"}' in metrics
    waited, quiet = (e["timings_ms"]["gc"] for e in read_log(path, 2))
    assert waited >= 0.5 * took[0] * 1000 > 0  # the three stops fell inside the first request
    assert quiet < waited
