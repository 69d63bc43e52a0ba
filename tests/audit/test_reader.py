"""The request log reader: every shape it reads, how it cuts a prompt into parts, and what it skips."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from ragtrim.audit.reader import SkipLog, parse_request, read_requests
from ragtrim.errors import InputError


def parts(req: Any) -> list[tuple[str, str]]:
    return [(s.part, s.text) for s in req.segments]


class TestChat:
    def test_roles_become_parts_and_documents_go_before_the_question(self) -> None:
        req = parse_request({"model": "m", "max_tokens": 64, "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello!"},
            {"role": "user", "content": "Who built it?"}],
            "documents": ["Doc one.", {"title": "T", "text": "Doc two."}, "  "]}, 1)
        assert parts(req) == [("system", "Be brief."), ("history", "Hi"), ("history", "Hello!"),
                              ("context", "Doc one."), ("context", "T\nDoc two."), ("question", "Who built it?")]
        assert req.fixed_tokens == 4 * 4 + 3  # OpenAI's framing: 4 a message, 3 for the reply
        assert req.endpoint == "chat" and req.model == "m" and req.output_tokens == 64
        assert req.request_id == "line-1" and req.question == "Who built it?"

    def test_context_blocks_are_cut_out_of_any_message(self) -> None:
        req = parse_request({"messages": [
            {"role": "system", "content": "Rules.\n<context>\nA a.\n\nB b.\n</context>\nMore rules."},
            {"role": "user", "content": [{"type": "text", "text": "<CONTEXT>C c.</CONTEXT> Q?"},
                                         {"type": "image_url", "image_url": {"url": "x"}}]}]}, 3)
        assert parts(req) == [("system", "Rules."), ("context", "A a."), ("context", "B b."), ("system", "More rules."),
                              ("context", "C c."), ("question", "Q?")]
        assert [s.role for s in req.segments][:2] == ["system", "system"]

    @pytest.mark.parametrize("text", [
        "a <context>x\n\ny</context> b <Context>z</CONTEXT> c",
        "<context>one <context>two</context> three</context>",  # the first closing tag ends the block
        "<context>never closed",
        "é <context>café\n\n naïve </context> ü",
        "<contexts>not the tag</contexts><context></context>",
        "no markup at all", "a < b and </context> alone",
    ])
    def test_context_chunks_as_the_gateway_finds_them(self, text: str) -> None:
        from ragtrim.openai_text import extract_context

        req = parse_request({"messages": [{"role": "user", "content": text}]}, 1)
        assert [s.text for s in req.segments if s.part == "context"] == extract_context(text)[1]

    def test_tool_results_are_context_and_tool_calls_history(self) -> None:
        req = parse_request({"tools": [{"type": "function", "function": {"name": "search"}}], "messages": [
            {"role": "user", "content": "Find X"},
            {"role": "assistant", "content": None,
             "tool_calls": [{"function": {"name": "search", "arguments": "{\"q\": \"X\"}"}}]},
            {"role": "tool", "content": "X is Y.", "name": "search"},
            {"role": "user", "content": "So?"}]}, 1)
        got = parts(req)
        assert got[0][0] == "other" and "search" in got[0][1]  # tool definitions
        assert got[1:] == [("history", "Find X"), ("history", "search"), ("history", "{\"q\": \"X\"}"),
                           ("context", "X is Y."), ("other", "search"), ("question", "So?")]

    def test_no_user_message_keeps_documents(self) -> None:
        req = parse_request({"messages": [{"role": "system", "content": "S"}], "documents": ["D"]}, 1)
        assert parts(req) == [("system", "S"), ("context", "D")]


class TestOtherShapes:
    def test_completions_instructions_are_the_system_part(self) -> None:
        req = parse_request({"prompt": "Answer.\n<context>P1\n\nP2</context>\nQ: why?", "max_tokens": 5}, 2)
        assert parts(req) == [("system", "Answer."), ("context", "P1"), ("context", "P2"), ("question", "Q: why?")]
        assert req.endpoint == "completions" and req.fixed_tokens == 0

    def test_completions_without_context_is_all_question(self) -> None:
        assert parts(parse_request({"prompt": ["a", "b"]}, 1)) == [("question", "a"), ("question", "b")]

    def test_ragtrim_request(self) -> None:
        req = parse_request({"id": "q1", "query": "Q", "chunks": [{"id": "c", "text": "T"}, "U"],
                             "history": [{"role": "user", "content": "earlier"}]}, 1)
        assert req.endpoint == "ragtrim" and req.request_id == "q1"
        assert parts(req) == [("history", "earlier"), ("context", "T"), ("context", "U"), ("question", "Q")]

    def test_batch_line_and_conversation_id(self) -> None:
        req = parse_request({"custom_id": "r7", "url": "/v1/chat/completions", "body": {
            "metadata": {"conversation_id": "c9"}, "messages": [{"role": "user", "content": "x"}]}}, 1)
        assert req.request_id == "r7" and req.conversation == "c9"

    def test_gateway_log_lines(self) -> None:
        received = parse_request({"request_id": "g1", "tokens": {"completion": 12}, "outcome": "ok",
                                  "request": {"messages": [{"role": "user", "content": "x"}], "max_tokens": 99}}, 1)
        assert received.request_id == "g1" and received.output_tokens == 12 and not received.pretrimmed
        forwarded = parse_request({"request_id": "g2", "forwarded": {"messages": [{"role": "user", "content": "y"}]}}, 2)
        assert forwarded.pretrimmed


class TestSkipped:
    @pytest.mark.parametrize(("obj", "reason"), [
        ([1, 2], "not_a_request"),
        ({"hello": "world"}, "not_a_request"),
        ({"request_id": "a", "tokens": {}, "outcome": "ok"}, "log_without_text"),
        ({"request_id": "a", "request": "{not json"}, "request_not_json"),
    ])
    def test_reasons(self, obj: Any, reason: str) -> None:
        with pytest.raises(InputError) as info:
            parse_request(obj, 1)
        assert getattr(info.value, "reason", None) == reason

    def test_stream_counts_skips_and_ignores_blank_lines(self, tmp_path: Path) -> None:
        path = tmp_path / "log.jsonl.gz"  # gzip is recognised by its magic bytes
        lines = [json.dumps({"prompt": "a"}), "", "not json", json.dumps({"x": 1}), json.dumps({"prompt": "b"})]
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        skipped = SkipLog()
        got = [r.line for r in read_requests(path, skipped=skipped)]
        assert got == [1, 5]
        assert skipped.to_dict()["by_reason"] == {"not_a_request": 1, "not_json": 1}
        assert [e["line"] for e in skipped.examples] == [3, 4]

    def test_missing_file_and_directory(self, tmp_path: Path) -> None:
        with pytest.raises(InputError, match="does not exist"):
            list(read_requests(tmp_path / "nope.jsonl", skipped=SkipLog()))
        with pytest.raises(InputError, match="is a directory"):
            list(read_requests(tmp_path, skipped=SkipLog()))

    def test_not_utf8_is_an_input_error(self, tmp_path: Path) -> None:
        path = tmp_path / "latin.jsonl"
        path.write_bytes(b'{"prompt": "caf\xe9"}\n')
        with pytest.raises(InputError, match="not UTF-8"):
            list(read_requests(path, skipped=SkipLog()))

    def test_empty_log(self, tmp_path: Path) -> None:
        path = tmp_path / "empty.jsonl"
        path.write_text("")
        assert list(read_requests(path, skipped=SkipLog())) == []
