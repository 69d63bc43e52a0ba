"""ragtrim's background threads."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest


class TestBackgroundThread:
    def test_a_task_has_started_when_submit_returns_and_busy_tracks_it(self) -> None:
        import threading

        from ragtrim._util.background import background_busy, submit_background

        started, release = threading.Event(), threading.Event()

        def task() -> int:
            started.set()
            release.wait(5)
            return 7

        future = submit_background(task)
        assert started.is_set() and background_busy()  # no interpreter switch interval before it began
        release.set()
        assert future.result(5) == 7
        for _ in range(100):  # the done callback runs right after the result is set
            if not background_busy():
                break
            threading.Event().wait(0.01)
        assert not background_busy()


class TestSwitchInterval:
    """While a model pass or a count is in flight the interpreter switches threads every ``SWITCH_INTERVAL_S``, so
    the task gets the GIL back soon from a caller busy with Python work; the host's interval returns after."""

    @staticmethod
    def _wait_for(condition: Callable[[], bool]) -> None:
        for _ in range(200):
            if condition():
                return
            threading.Event().wait(0.01)

    def test_a_count_in_flight_shortens_it_until_done(self) -> None:
        import sys

        from ragtrim._util.background import SWITCH_INTERVAL_S, submit_count

        host = sys.getswitchinterval()
        assert host > SWITCH_INTERVAL_S
        release = threading.Event()
        future = submit_count(lambda: release.wait(5))
        assert sys.getswitchinterval() == SWITCH_INTERVAL_S
        release.set()
        future.result(5)
        self._wait_for(lambda: sys.getswitchinterval() == host)
        assert sys.getswitchinterval() == host

    def test_a_count_that_cannot_be_submitted_gives_it_back(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import sys

        from ragtrim._util import background

        class Closed:
            def submit(self, *_: object) -> None:
                raise RuntimeError("cannot schedule new futures after interpreter shutdown")

        host = sys.getswitchinterval()
        monkeypatch.setattr(background, "_COUNT", Closed())
        with pytest.raises(RuntimeError, match="cannot schedule"):
            background.submit_count(lambda: None)
        assert sys.getswitchinterval() == host

    def test_a_pass_and_a_count_share_it(self) -> None:
        import sys

        from ragtrim._util.background import SWITCH_INTERVAL_S, submit_background, submit_count

        host = sys.getswitchinterval()
        release_pass, release_count = threading.Event(), threading.Event()
        passing = submit_background(lambda: release_pass.wait(5))
        counting = submit_count(lambda: release_count.wait(5))
        release_pass.set()
        passing.result(5)
        threading.Event().wait(0.05)
        assert sys.getswitchinterval() == SWITCH_INTERVAL_S  # the count still runs
        release_count.set()
        counting.result(5)
        self._wait_for(lambda: sys.getswitchinterval() == host)
        assert sys.getswitchinterval() == host


class TestRunParallel:
    def test_keeps_the_order_and_runs_calls_at_once(self) -> None:
        from ragtrim._util.background import run_parallel

        barrier = threading.Barrier(2, timeout=5)  # broken unless two calls wait at the same time

        def fn(x: int) -> int:
            if x < 2:
                barrier.wait()
            return x * x

        assert run_parallel(fn, list(range(10)), 2) == [x * x for x in range(10)]

    def test_one_worker_runs_on_the_calling_thread(self) -> None:
        from ragtrim._util.background import run_parallel

        seen = run_parallel(lambda _: threading.get_ident(), list(range(5)), 1)
        assert set(seen) == {threading.get_ident()}

    def test_the_first_error_reaches_the_caller(self) -> None:
        from ragtrim._util.background import run_parallel

        def fn(x: int) -> int:
            if x == 3:
                raise ValueError("item 3")
            return x

        with pytest.raises(ValueError, match="item 3"):
            run_parallel(fn, list(range(8)), 4)

    def test_passes_sharing_the_threads_finish(self) -> None:
        from ragtrim._util.background import run_parallel

        results: list[list[int]] = []

        def one_pass(offset: int) -> None:
            results.append(run_parallel(lambda x: x + offset, list(range(200)), 8))

        threads = [threading.Thread(target=one_pass, args=(k * 1000,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert not any(t.is_alive() for t in threads)
        assert sorted(r[0] for r in results) == [0, 1000, 2000, 3000]
