"""The shipped fakes (ragtrim.testing)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ragtrim.errors import ConfigError
from ragtrim.scoring.base import Scorer
from ragtrim.testing import FixedScorer


class TestFixedScorer:
    def test_by_text_and_by_position(self) -> None:
        assert FixedScorer(scores={"a": 2.0}).score("q", ["a", "b"]) == [2.0, 0.0]
        assert FixedScorer(scores=[1.0], default=-1.0).score("q", ["a", "b"]) == [1.0, -1.0]

    def test_is_a_scorer(self) -> None:
        assert isinstance(FixedScorer(scores=[]), Scorer)

    def test_invalid(self) -> None:
        with pytest.raises(ConfigError, match="scores must be"):
            FixedScorer(scores="abc")  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match=r"scores\[0\]"):
            FixedScorer(scores=[float("nan")])


class TestFakeReader:
    """The fake upstream as a reader of a golden set (``answers``), on a real socket."""

    @pytest.fixture
    def serve(self) -> Iterator[Callable[..., Any]]:
        pytest.importorskip("httpx", reason="the serve extra is not installed")
        from ragtrim.testing import FakeUpstreamConfig, create_fake_app
        from tests.serve.conftest import ServerThread

        started: list[ServerThread] = []

        def start(**kwargs: Any) -> ServerThread:
            s = ServerThread(create_fake_app(FakeUpstreamConfig(**kwargs))).start()
            started.append(s)
            return s

        yield start
        for s in started:
            s.stop()

    @staticmethod
    def _reply(server: Any, prompt: str, **extra: Any) -> tuple[int, Any]:
        import httpx

        body = {"model": "m", "messages": [{"role": "user", "content": prompt}], **extra}
        r = httpx.post(server.url + "/v1/chat/completions", json=body)
        return r.status_code, r.json()

    def _text(self, server: Any, prompt: str) -> str:
        return str(self._reply(server, prompt)[1]["choices"][0]["message"]["content"])

    def test_answers_wrong_share_evidence_and_limits(self, serve: Callable[..., Any]) -> None:
        from ragtrim.testing import is_degraded

        questions = [f"Who built tower {i}?" for i in range(40)]
        answers = {q: f"mason {i}" for i, q in enumerate(questions)}
        wrong = [q for q in questions if is_degraded(q, 0.3)]
        assert 5 < len(wrong) < 20  # about 30% of 40
        needs = next(q for q in questions if q not in wrong)
        s = serve(answers=answers, wrong_share=0.3, evidence={needs: answers[needs]}, max_model_len=60)
        right = next(q for q in questions if q not in wrong and q != needs)
        status, body = self._reply(s, f"Question: {right}")
        assert status == 200 and body["choices"][0]["message"]["content"] == answers[right]
        assert body["choices"][0]["finish_reason"] == "stop"
        assert self._text(s, f"Question: {wrong[0]}") == "a mistaken guess"
        assert self._text(s, "Question: something else?") == "unanswerable"
        assert self._text(s, f"Question: {needs}") == "unanswerable"  # its evidence is not in the prompt
        assert self._text(s, f"Documents: {answers[needs]} built it. Question: {needs}") == answers[needs]
        cut = self._reply(s, f"Question: {right}", max_tokens=1)[1]["choices"][0]
        assert cut["message"]["content"] == "mason" and cut["finish_reason"] == "length"
        status, body = self._reply(s, "x" * 400, max_tokens=10)
        assert status == 400 and "maximum context length is 60 tokens" in body["error"]["message"]

    def test_streams_the_reply_word_by_word(self, serve: Callable[..., Any]) -> None:
        import json

        import httpx

        s = serve(answers={"q?": "the answer is here"})
        body = {"model": "m", "stream": True, "stream_options": {"include_usage": True},
                "messages": [{"role": "user", "content": "q?"}]}
        with httpx.stream("POST", s.url + "/v1/chat/completions", json=body) as r:
            events = [line[6:] for line in r.iter_lines() if line.startswith("data: ")]
        chunks = [json.loads(e) for e in events if e != "[DONE]"]
        pieces = [c["choices"][0]["delta"]["content"] for c in chunks if c["choices"]]
        assert pieces == ["the ", "answer ", "is ", "here"] and chunks[-1]["usage"]["completion_tokens"] == 4

    def test_golden_answers(self) -> None:
        from ragtrim.gate.builders import JSON_ANSWER_SCHEMA
        from ragtrim.gate.golden import GoldenItem
        from ragtrim.testing import golden_answers, golden_evidence

        items = [GoldenItem(id="a", question="q1", answers=("x", "y")),
                 GoldenItem(id="b", question="q2", answerable=False),
                 GoldenItem(id="c", question="q3", answers=("z",), schema=JSON_ANSWER_SCHEMA),
                 GoldenItem(id="d", question="q4", answerable=False, schema=JSON_ANSWER_SCHEMA)]
        assert golden_answers(items) == {"q1": "x", "q2": "unanswerable", "q3": '{"answer": "z"}',
                                         "q4": '{"answer": null}'}
        assert golden_evidence(items) == {"q1": "x", "q3": "z"}


def test_a_wrong_json_reply_keeps_its_json() -> None:
    from ragtrim.testing import _wrong_like

    assert _wrong_like('{"answer": "Paris"}', "a guess") == '{"answer": "a guess"}'
    assert _wrong_like('{"answer": null}', "a guess") == '{"answer": "a guess"}'
    assert _wrong_like("Paris", "a guess") == "a guess"
    assert _wrong_like('{"answer": "Paris"}', None) == '{"answer": null}' and _wrong_like("Paris", None) is None
