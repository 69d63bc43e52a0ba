"""What the audit reads and what it refuses: malformed requests, the Anthropic Messages format, batch lines, vLLM's
server log, format detection from the first lines, and logs that end early."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from ragtrim.audit.formats import UnsupportedLogFormat, classify, parse_vllm_line, template_turns
from ragtrim.audit.reader import SkipLog, parse_request, read_requests
from ragtrim.errors import InputError


def parts(req: Any) -> list[tuple[str, str]]:
    return [(s.part, s.text) for s in req.segments]


def write(path: Path, objs: list[Any]) -> Path:
    path.write_text("".join((o if isinstance(o, str) else json.dumps(o)) + "\n" for o in objs), encoding="utf-8")
    return path


class TestMalformed:
    @pytest.mark.parametrize(("body", "reason", "message"), [
        ({"messages": [{"role": "user", "content": 42}]}, "bad_content",
         "message 1 (user): content is a number (42); it must be a string or a list of parts"),
        ({"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": {"text": "hi"}}]},
         "bad_content", "message 2 (user): content is an object (keys ['text'])"),
        ({"messages": [{"content": "no role"}]}, "bad_message", "message 1 has no 'role'"),
        ({"messages": [{"role": 7, "content": "x"}]}, "bad_message", "message 1: 'role' is a number (7)"),
        ({"messages": []}, "empty_messages", "'messages' is an empty list"),
        ({"messages": "hello"}, "bad_messages", "'messages' is a string, not a list"),
        ({"messages": ["hello"]}, "bad_message", "message 1 is a string, not an object"),
        ({"messages": [{"role": "user", "content": None}]}, "bad_content", "message 1 (user) has no content"),
        ({"messages": [{"role": "user", "content": [{"text": "no type"}]}]}, "bad_content",
         "part 1 is an object (keys ['text']), not an object with a 'type'"),
        ({"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]}, "bad_content",
         "text part 1 has no text string"),
        ({"messages": [{"role": "user", "content": "q"}], "documents": [42]}, "bad_documents",
         "document 1 is a number (42)"),
        ({"system": 42, "messages": [{"role": "user", "content": "q"}]}, "bad_content", "'system' is a number (42)"),
    ])
    def test_skipped_with_a_reason(self, body: dict[str, Any], reason: str, message: str) -> None:
        with pytest.raises(InputError) as info:
            parse_request(body, 1)
        assert getattr(info.value, "reason", None) == reason
        assert message in str(info.value)

    def test_an_assistant_turn_may_carry_only_tool_calls(self) -> None:
        req = parse_request({"messages": [
            {"role": "user", "content": "Find X"},
            {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "content": "X."}]}, 1)
        assert ("history", "f") in parts(req) and ("context", "X.") in parts(req)

    def test_the_log_counts_them_by_line(self, tmp_path: Path) -> None:
        path = write(tmp_path / "log.jsonl", [
            {"messages": [{"role": "user", "content": "fine"}]},
            {"messages": [{"role": "user", "content": 42}]},
            {"messages": [{"role": "user", "content": {"x": 1}}]},
            {"messages": [{"content": "who?"}]},
            {"messages": []},
            {"messages": [{"role": "user", "content": "fine too"}]},
        ])
        skipped = SkipLog()
        assert [r.line for r in read_requests(path, skipped=skipped)] == [1, 6]
        assert skipped.to_dict()["by_reason"] == {"bad_content": 2, "bad_message": 1, "empty_messages": 1}
        assert [(e["line"], e["reason"]) for e in skipped.examples] == [
            (2, "bad_content"), (3, "bad_content"), (4, "bad_message"), (5, "empty_messages")]


ANTHROPIC = {
    "model": "claude-x", "max_tokens": 300, "anthropic_version": "2023-06-01",
    "system": [{"type": "text", "text": "You answer from the documents."}, {"type": "text", "text": "Be brief."}],
    "tools": [{"name": "search", "description": "Search the web", "input_schema": {"type": "object"}}],
    "messages": [
        {"role": "user", "content": [
            {"type": "document", "title": "Tower", "context": "From the guide",
             "source": {"type": "text", "media_type": "text/plain", "data": "The tower is 330 m tall."}},
            {"type": "document", "source": {"type": "content", "content": [{"type": "text", "text": "Part one."},
                                                                            {"type": "text", "text": "Part two."}]}},
            {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0x"}},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}},
            {"type": "text", "text": "How tall is it?"}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "I should search.", "signature": "abc"},
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": "t1", "name": "search", "input": {"q": "tower height"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": [
                {"type": "text", "text": "Result A.\n\nResult B."},
                {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}}]},
            {"type": "search_result", "source": "https://x", "title": "Guide",
             "content": [{"type": "text", "text": "The tower has three levels."}]}]},
    ],
}


class TestAnthropic:
    def test_every_block_lands_in_its_part(self) -> None:
        req = parse_request(ANTHROPIC, 1)
        assert req.endpoint == "messages" and req.output_tokens == 300
        assert parts(req) == [
            ("other", json.dumps(ANTHROPIC["tools"], ensure_ascii=False, sort_keys=True)),
            ("system", "You answer from the documents.\nBe brief."),
            ("context", "Tower\nFrom the guide\nThe tower is 330 m tall."),
            ("context", "Part one.\nPart two."),
            ("question", "How tall is it?"),  # the last user message with text
            ("history", "I should search."),
            ("history", "Let me check."),
            ("history", "search"), ("history", '{"q": "tower height"}'),
            ("context", "Result A."), ("context", "Result B."),
            ("context", "Guide\nThe tower has three levels."),
        ]
        assert req.images == ("question", "context")
        assert req.uncounted == ("document:application/pdf",)
        assert req.fixed_tokens == 3 + 4 * 4  # three messages and the top-level system prompt

    def test_string_system_and_content(self) -> None:
        req = parse_request({"system": "S.", "messages": [{"role": "user", "content": "Q?"}]}, 1)
        assert parts(req) == [("system", "S."), ("question", "Q?")] and req.endpoint == "messages"

    def test_batch_line(self) -> None:
        req = parse_request({"custom_id": "b1", "params": ANTHROPIC}, 3)
        assert req.request_id == "b1" and req.endpoint == "messages" and req.output_tokens == 300
        assert classify({"custom_id": "b1", "params": ANTHROPIC}) == "anthropic_batch"


class TestOpenAIBatch:
    def test_input_lines(self) -> None:
        chat = {"custom_id": "request-1", "method": "POST", "url": "/v1/chat/completions",
                "body": {"model": "m", "messages": [{"role": "system", "content": "S"},
                                                    {"role": "user", "content": "Q"}], "max_tokens": 10}}
        done = {"custom_id": "request-2", "method": "POST", "url": "/v1/completions",
                "body": {"model": "m", "prompt": "Say hi", "max_tokens": 5}}
        a, b = parse_request(chat, 1), parse_request(done, 2)
        assert (a.request_id, a.endpoint, a.output_tokens) == ("request-1", "chat", 10)
        assert (b.request_id, b.endpoint, parts(b)) == ("request-2", "completions", [("question", "Say hi")])
        assert classify(chat) == classify(done) == "openai_batch"

    def test_embeddings_lines_are_skipped_by_name(self) -> None:
        line = {"custom_id": "e1", "method": "POST", "url": "/v1/embeddings", "body": {"model": "e", "input": "x"}}
        with pytest.raises(InputError) as info:
            parse_request(line, 1)
        assert getattr(info.value, "reason", None) == "unread_format" and "openai_embeddings" in str(info.value)


class TestDetection:
    @pytest.mark.parametrize(("line", "kind", "named"), [
        ({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}, "gemini", "Google Gemini"),
        ({"model": "gpt", "instructions": "Be brief", "input": "hi"}, "openai_responses", "Responses API"),
        ({"modelId": "x", "messages": [{"role": "user", "content": [{"text": "hi"}]}]}, "bedrock_converse",
         "Bedrock Converse"),
        ({"id": "batch_req_1", "custom_id": "r1", "response": {"status_code": 200, "body": {}}, "error": None},
         "openai_batch_output", "Batch API output"),
        ({"id": "chatcmpl-1", "object": "chat.completion", "choices": []}, "model_responses", "model responses"),
        ({"message": "hi", "chat_history": []}, "cohere_chat", "Cohere"),
        ({"request_id": "g", "outcome": "ok", "tokens": {"prompt": 3}}, "gateway_log_without_text",
         "log_request = true"),
    ])
    def test_a_refused_format_is_named(self, tmp_path: Path, line: dict[str, Any], kind: str, named: str) -> None:
        assert classify(line) == kind
        path = write(tmp_path / "log.jsonl", [line] * 5)
        with pytest.raises(UnsupportedLogFormat) as info:
            list(read_requests(path, skipped=SkipLog()))
        assert info.value.format == kind and named in str(info.value) and "does not read" in str(info.value)

    def test_decided_from_the_first_lines(self, tmp_path: Path) -> None:
        chat = {"messages": [{"role": "user", "content": "q"}]}
        gemini = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
        # junk first, then a readable format: read, junk skipped
        path = write(tmp_path / "a.jsonl", ["not json", {"x": 1}, chat, gemini, chat])
        skipped = SkipLog()
        assert [r.line for r in read_requests(path, skipped=skipped)] == [3, 5]
        assert skipped.log_format == "openai_chat" and skipped.counts["unread_format"] == 1
        # a log of another format that carries a few readable lines later on is still that format
        path = write(tmp_path / "b.jsonl", [gemini] * 25 + [chat])
        with pytest.raises(UnsupportedLogFormat):
            list(read_requests(path, skipped=SkipLog()))

    def test_an_anthropic_log_without_markers_on_some_lines(self, tmp_path: Path) -> None:
        plain = {"messages": [{"role": "user", "content": "hi"}]}
        path = write(tmp_path / "log.jsonl", [ANTHROPIC, plain, ANTHROPIC])
        skipped = SkipLog()
        assert [r.endpoint for r in read_requests(path, skipped=skipped)] == ["messages"] * 3
        assert skipped.log_format == "anthropic_messages"


VLLM_OLD = ("INFO 05-13 10:11:12 [logger.py:39] Received request chatcmpl-1: prompt: '<|im_start|>system\\nYou are "
            "helpful.<|im_end|>\\n<|im_start|>user\\nHi<|im_end|>\\n<|im_start|>assistant\\nHello!<|im_end|>\\n"
            "<|im_start|>user\\n<context>\\nDoc A.\\n\\nDoc B.\\n</context>\\nWhat\\'s next?<|im_end|>\\n"
            "<|im_start|>assistant\\n', params: SamplingParams(n=1, temperature=0.7, max_tokens=64), "
            "prompt_token_ids: [1, 2, 3], prompt_embeds shape: None, lora_request: None, prompt_adapter_request: None.")
VLLM_DEBUG = ("(APIServer pid=7) DEBUG 08-01 10:11:12.345 [logger.py:48] Request cmpl-9 details: prompt: "
              "'<bos><start_of_turn>user\\nWho wrote it?<end_of_turn>\\n<start_of_turn>model\\n', "
              "prompt_token_ids: [2, 105], prompt_embeds shape: None.")
VLLM_PARAMS = ("(APIServer pid=7) INFO 08-01 10:11:12 [logger.py:40] Received request cmpl-9: params: "
               "SamplingParams(n=1, max_tokens=32), lora_request: None.")
VLLM_OTHER = "INFO 05-13 10:11:10 [api_server.py:1024] Starting vLLM API server on http://0.0.0.0:8000"


class TestVllmLog:
    def test_old_request_line(self) -> None:
        parsed = parse_vllm_line(VLLM_OLD)
        assert isinstance(parsed, tuple)
        rid, prompt, max_tokens = parsed
        assert (rid, max_tokens) == ("chatcmpl-1", 64) and prompt is not None and "What's next?" in prompt

    def test_template_pieces_rebuild_the_prompt(self) -> None:
        parsed = parse_vllm_line(VLLM_OLD)
        assert isinstance(parsed, tuple) and isinstance(parsed[1], str)
        prompt = parsed[1]
        name, pieces = template_turns(prompt)
        assert name == "chatml" and "".join(text for _, text in pieces) == prompt
        assert [role for role, _ in pieces if role] == ["system", "user", "assistant", "user", "assistant"]
        llama = ("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nS.<|eot_id|><|start_header_id|>user"
                 "<|end_header_id|>\n\nQ?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n")
        name, pieces = template_turns(llama)
        assert name == "llama3" and "".join(t for _, t in pieces) == llama
        assert [(r, t) for r, t in pieces if r] == [("system", "S."), ("user", "Q?"), ("assistant", "")]

    def test_reads_the_request_lines_of_a_server_log(self, tmp_path: Path) -> None:
        path = tmp_path / "vllm.log"
        path.write_text(f"{VLLM_OTHER}\n{VLLM_OLD}\n{VLLM_DEBUG}\n{VLLM_PARAMS}\n", encoding="utf-8")
        skipped = SkipLog()
        reqs = list(read_requests(path, skipped=skipped))
        assert skipped.log_format == "vllm_server_log"
        assert [(r.request_id, r.endpoint, r.line, r.output_tokens) for r in reqs] == [
            ("chatcmpl-1", "vllm_log", 2, 64), ("cmpl-9", "vllm_log", 3, None)]
        content = [(p, t) for p, t in parts(reqs[0]) if p != "other"]
        assert content == [("system", "You are helpful."), ("history", "Hi"), ("history", "Hello!"),
                           ("context", "Doc A."), ("context", "Doc B."), ("question", "What's next?")]
        assert "".join(t for _, t in parts(reqs[0]) if _ == "other").startswith("<|im_start|>system\n")
        assert [(p, t) for p, t in parts(reqs[1]) if p != "other"] == [("question", "Who wrote it?")]
        assert skipped.to_dict()["by_reason"] == {"vllm_other_log_line": 1, "vllm_request_without_prompt": 1}

    def test_a_prompt_in_no_known_template_is_a_completions_prompt(self) -> None:
        line = ("INFO 05-13 10:11:12 [logger.py:39] Received request c-1: prompt: 'Answer.\\n<context>P</context>\\n"
                "Q?', params: SamplingParams(max_tokens=8), prompt_token_ids: [1], lora_request: None.")
        parsed = parse_vllm_line(line)
        assert isinstance(parsed, tuple)
        assert template_turns(str(parsed[1])) == ("none", [])


class TestEndsEarly:
    def test_a_truncated_gzip_stops_and_says_where(self, tmp_path: Path) -> None:
        body = "".join(json.dumps({"messages": [{"role": "user", "content": f"question {i} " * 40}]}) + "\n"
                       for i in range(2000)).encode()
        data = gzip.compress(body)
        path = tmp_path / "cut.jsonl.gz"
        path.write_bytes(data[: len(data) // 2])
        skipped = SkipLog()
        reqs = list(read_requests(path, skipped=skipped))
        assert 0 < len(reqs) < 2000 and skipped.stopped_after_line is not None
        assert reqs[-1].line <= skipped.stopped_after_line
        assert "Compressed file ended before the end-of-stream marker" in str(skipped.stop_reason)
