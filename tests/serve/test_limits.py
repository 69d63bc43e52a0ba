"""Rate-window arithmetic (pure) and the fair concurrency gate."""

from __future__ import annotations

import asyncio
import math

import pytest

from ragtrim.serve.limits import (
    FairGate,
    QueueFull,
    QueueTimeout,
    WindowState,
    format_reset,
    seconds_until_fits,
    seconds_until_reset,
    weighted_count,
    window_decision,
)
from ragtrim.serve.rate_store import MemoryRateStore


class TestWindowMath:
    def test_weighted_count(self) -> None:
        assert weighted_count(WindowState(10, 4, 0.25)) == 10 * 0.75 + 4
        assert weighted_count(WindowState(0, 0, 0.9)) == 0

    def test_seconds_until_fits(self) -> None:
        assert seconds_until_fits(WindowState(0, 5, 0.5), 10, 1, 60) == 0.0
        # 10 previous, 0 current, limit 10: one more fits once the previous weight is <= 9, at 10% into the window.
        assert seconds_until_fits(WindowState(10, 0, 0.0), 10, 1, 60) == pytest.approx(6.0)
        # Current window full: wait for the next one, where 10 current decays to fit 1 more at 10% in.
        assert seconds_until_fits(WindowState(0, 10, 0.5), 10, 1, 60) == pytest.approx(30 + 6)
        assert math.isinf(seconds_until_fits(WindowState(0, 0, 0.0), 10, 11, 60))

    def test_with_the_charges_times_nothing_waits_longer_than_the_window(self) -> None:
        # 10 charges early in the current window (between 5% and 10% of it), now at 50%, limit 10: the next one fits
        # once the first of them has left, 5.5% into the next window: 33.3 s, not the 36 s of a spread over the
        # whole window.
        burst = WindowState(0, 10, 0.5, current_first=0.05, current_last=0.1)
        assert seconds_until_fits(burst, 10, 1, 60) == pytest.approx(30 + 0.05 * 60 + 0.05 * 0.1 * 60)
        # And back to full when the last charge has left: 10% into the next window.
        assert seconds_until_reset(burst, 60) == pytest.approx(30 + 6)
        # In the next window the same charges weigh fully until 5% in, then fall evenly to nothing at 10%.
        later = WindowState(10, 0, 0.075, previous_first=0.05, previous_last=0.1)
        assert weighted_count(later) == pytest.approx(5)
        assert weighted_count(WindowState(10, 0, 0.1, previous_first=0.05, previous_last=0.1)) == 0

    @pytest.mark.parametrize("now", [0.0, 0.3, 0.999])
    def test_a_full_window_waits_at_most_one_window(self, now: float) -> None:
        for first, last in ((0.0, 0.0), (0.0, now), (now, now), (now / 2, now)):
            w = WindowState(3, 10, now, previous_first=0.0, previous_last=1.0, current_first=first,
                            current_last=last)
            assert seconds_until_fits(w, 10, 1, 4.0) <= 4.0 + 1e-9
            assert seconds_until_reset(w, 4.0) <= 4.0 + 1e-9

    def test_decision_rejects_without_charge(self) -> None:
        d = window_decision(WindowState(0, 3, 0.5), WindowState(0, 0, 0.5), 3, 100, 5, 60)
        assert not d.admitted and d.reason == "requests"
        assert d.requests is not None and d.requests.remaining == 0 and d.retry_after_s > 0
        assert d.tokens is not None and d.tokens.remaining == 100
        d = window_decision(WindowState(0, 0, 0.5), WindowState(0, 96, 0.5), 3, 100, 5, 60)
        assert not d.admitted and d.reason == "tokens"

    def test_format_reset(self) -> None:
        assert format_reset(0.12) == "120ms"
        assert format_reset(1) == "1s"
        assert format_reset(360) == "6m0s"
        assert format_reset(90.25) == "1m30.3s"


class TestMemoryRateStore:
    def test_rpm_and_adjust(self) -> None:
        async def run() -> None:
            store = MemoryRateStore(window_s=60)
            assert [(await store.acquire("k", 2, None, 0)).admitted for _ in range(3)] == [True, True, False]
            await store.adjust("k", -1, 0)
            assert (await store.acquire("k", 2, None, 0)).admitted
            d = await store.acquire("t", None, 100, 80)
            assert d.tokens is not None and d.tokens.remaining == 20
            await store.adjust("t", 0, -70)
            d = await store.acquire("t", None, 100, 50)
            assert d.admitted and d.tokens is not None and d.tokens.remaining == 40

        asyncio.run(run())

    def test_a_refund_after_the_window_turned_goes_back_to_the_charge_s_window(
            self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Two charges just before a window ends, one refunded just after it turned: the refund leaves the
        previous window, so the next request is admitted (given back to the empty current window it vanished and
        the burst still counted as two)."""
        clock = [1_000 * 60.0 + 59.5]
        monkeypatch.setattr("ragtrim.serve.rate_store.time.time", lambda: clock[0])

        async def run() -> list[bool]:
            store = MemoryRateStore(window_s=60)
            admitted = [(await store.acquire("k", 2, None, 0)).admitted for _ in range(2)]
            clock[0] += 0.7  # the window turns
            await store.adjust("k", -1, 0)
            await store.adjust("k", -5, 0)  # more than was charged: never below zero, never a credit
            admitted.append((await store.acquire("k", 2, None, 0)).admitted)
            admitted.append((await store.acquire("k", 2, None, 0)).admitted)
            admitted.append((await store.acquire("k", 2, None, 0)).admitted)
            return admitted

        assert asyncio.run(run()) == [True, True, True, True, False]


class TestFairGate:
    def test_immediate_and_queue_timeout(self) -> None:
        async def run() -> None:
            gate = FairGate(name="g", capacity=1, max_queued=5)
            loop = asyncio.get_running_loop()
            assert await gate.acquire("a", loop.time() + 1) == 0.0
            with pytest.raises(QueueTimeout):
                await gate.acquire("a", asyncio.get_running_loop().time() + 0.05)
            assert gate.queued == 0 and gate.in_use == 1
            gate.release()
            assert gate.in_use == 0

        asyncio.run(run())

    def test_queue_full(self) -> None:
        async def run() -> None:
            gate = FairGate(name="g", capacity=1, max_queued=0)
            await gate.acquire("a", 1e18)
            with pytest.raises(QueueFull):
                await gate.acquire("b", 1e18)

        asyncio.run(run())

    def test_queue_full_per_user(self) -> None:
        async def run() -> None:
            gate = FairGate(name="g", capacity=1, max_queued=10, max_queued_per_user=1)
            await gate.acquire("a", 1e18)
            waiting = asyncio.ensure_future(gate.acquire("a", 1e18))
            await asyncio.sleep(0)
            with pytest.raises(QueueFull):
                await gate.acquire("a", 1e18)
            other = asyncio.ensure_future(gate.acquire("b", 1e18))
            await asyncio.sleep(0)
            assert gate.queued == 2
            gate.release()
            gate.release()
            await asyncio.gather(waiting, other)

        asyncio.run(run())

    def test_round_robin_across_users_fifo_within(self) -> None:
        async def run() -> list[str]:
            gate = FairGate(name="g", capacity=1, max_queued=100)
            order: list[str] = []
            await gate.acquire("holder", 1e18)

            async def waiter(label: str, user: str) -> None:
                await gate.acquire(user, 1e18)
                order.append(label)
                await asyncio.sleep(0)
                gate.release()

            tasks = [asyncio.ensure_future(waiter(f"noisy{i}", "noisy")) for i in range(4)]
            await asyncio.sleep(0)
            tasks += [asyncio.ensure_future(waiter("quiet0", "quiet")), asyncio.ensure_future(waiter("q1", "quiet"))]
            await asyncio.sleep(0)
            gate.release()
            await asyncio.gather(*tasks)
            assert gate.in_use == 0 and gate.queued == 0
            return order

        assert asyncio.run(run()) == ["noisy0", "quiet0", "noisy1", "q1", "noisy2", "noisy3"]

    def test_cancelled_waiter_leaks_nothing(self) -> None:
        async def run() -> None:
            gate = FairGate(name="g", capacity=1, max_queued=10)
            await gate.acquire("a", 1e18)
            t = asyncio.ensure_future(gate.acquire("b", 1e18))
            await asyncio.sleep(0)
            t.cancel()
            with pytest.raises(asyncio.CancelledError):
                await t
            assert gate.queued == 0
            gate.release()
            assert gate.in_use == 0

        asyncio.run(run())
