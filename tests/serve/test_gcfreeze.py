"""The gateway freezes its start-up objects out of the garbage collector's reach while it serves, and only then."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import httpx

from ragtrim._util import gcfreeze


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
