"""Real servers for the gate's end-to-end tests (uvicorn on free ports, as the gateway's tests run them) and a small
golden set whose documents are long enough for a 4x trim to matter."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

pytest.importorskip("httpx", reason="the serve extra is not installed: pip install 'ragtrim[serve]'")

from ragtrim.gate.golden import GoldenItem
from ragtrim.testing import FakeUpstreamConfig, golden_answers
from tests.serve.conftest import ServerThread

WORDS = ("river", "castle", "engine", "harbour", "market", "library", "station", "garden", "bridge", "tower")


def make_items(n_answerable: int = 30, n_unanswerable: int = 10, n_docs: int = 5) -> list[GoldenItem]:
    """Questions about made-up facts: each item's first document holds its answer, the others are filler of the
    same kind (about 60 words each)."""
    items = []
    for i in range(n_answerable + n_unanswerable):
        topic = f"{WORDS[i % 10]} {i}"
        fact = f"The {topic} was built by mason{i} in year {1500 + i}."
        filler = [" ".join(f"The {WORDS[(i + j + k) % 10]} {j}{k} stands near the old road." for k in range(5))
                  for j in range(n_docs - 1)]
        answerable = i < n_answerable
        items.append(GoldenItem(
            id=f"q{i:03d}", question=f"Who built the {topic}?" if answerable else f"Who painted the {topic}?",
            documents=tuple([fact + " " + filler[0], *filler[1:]] if answerable else filler + ["Nothing here."]),
            answers=(f"mason{i}",) if answerable else (), answerable=answerable,
            tags=(f"group{i % 3}",)))
    return items


@pytest.fixture
def servers() -> Iterator[list[ServerThread]]:
    started: list[ServerThread] = []
    yield started
    for s in reversed(started):
        s.stop()


@pytest.fixture
def golden() -> list[GoldenItem]:
    return make_items()


@pytest.fixture
def reader(servers: list[ServerThread], golden: list[GoldenItem]) -> Callable[..., ServerThread]:
    """Start a fake reader of the golden set: ``reader(wrong_share=0.2, base_ms=100)`` (the serve extra)."""
    from ragtrim.testing import create_fake_app
    from tests.serve.conftest import ServerThread

    def start(**kwargs: Any) -> ServerThread:
        cfg = FakeUpstreamConfig(answers=golden_answers(golden), keep_requests=1000, **kwargs)
        s = ServerThread(create_fake_app(cfg)).start()
        servers.append(s)
        return s

    return start
