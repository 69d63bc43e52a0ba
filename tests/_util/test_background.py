"""ragtrim's background thread."""

from __future__ import annotations


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
