"""Request preparation as pure functions: documents, <context>, budgets, history, fields, output clamps."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from ragtrim.errors import ConfigError
from ragtrim.openai_text import extract_context, split_chunks
from ragtrim.serve.config import parse_config
from ragtrim.serve.render import (
    RequestError,
    document_budget,
    prepare_chat,
    prepare_completion,
    render_documents,
)
from ragtrim.text.tokens import WhitespaceCounter

WS = WhitespaceCounter()


def cfg(**sections: Any) -> Any:
    return parse_config({"upstream": {"url": "http://u/v1", "tokenizer": "whitespace"}, **sections})


def chat(content: str = "hi", **extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": content}], **extra}


class TestHelpers:
    def test_document_budget(self) -> None:
        assert document_budget(100, 0.25, None) == 25
        assert document_budget(101, 0.25, None) == 26
        assert document_budget(100, 40, None) == 40
        assert document_budget(100, 40, 10) == 10
        assert document_budget(100, 40, 1000) == 40  # may lower, never raise
        assert document_budget(100, None, 30) == 30
        assert document_budget(100, None, None) is None
        assert document_budget(100, "lossless", None) is None  # lossless: no budget, the lossless stages only
        assert document_budget(100, "lossless", 30) == 30

    def test_extract_context(self) -> None:
        text, chunks = extract_context("Intro.\n<context>a b\n\nc d</context>\n\nQ? <CONTEXT>e</CONTEXT>")
        assert text == "Intro.\n\nQ?"
        assert chunks == ["a b", "c d", "e"]
        assert split_chunks("  \n\n ") == []

    def test_render_documents(self) -> None:
        assert render_documents([]) == ""
        assert render_documents(["a", "b"]) == "Documents:\n[1] a\n\n[2] b"


class TestLossless:
    """``[trim] budget = "lossless"``: HTML cleaned, duplicate documents dropped, nothing else, order kept."""

    PAGE = ("<html><body><nav>Home | News | Sport | Login</nav><p>The tower is 330 metres tall.</p>"
            "<footer>Copyright Example Media</footer></body></html>")
    DOCS = (PAGE, "Paris is the capital of France.", "The tower is 330 metres tall.", "A b c d e f g h.")

    def test_config(self) -> None:
        assert cfg(trim={"budget": "lossless"}).trim.budget == "lossless"
        with pytest.raises(ConfigError, match='"lossless"'):
            cfg(trim={"budget": "lossy"})

    def test_html_and_duplicates_go_nothing_else(self) -> None:
        p = prepare_chat(chat("How tall is the tower?", documents=list(self.DOCS)), cfg(trim={"budget": "lossless"}),
                         WS)
        content = p.body["messages"][-1]["content"]
        assert content.startswith("Documents:\n[1] The tower is 330 metres tall.\n\n[2] Paris is the capital of "
                                  "France.\n\n[3] A b c d e f g h.\n\nHow tall is the tower?")
        assert (p.documents, p.documents_kept) == (4, 3) and p.document_tokens_after < p.document_tokens_before
        assert "Home" not in content and "Copyright" not in content

    def test_without_budget_documents_pass_untrimmed(self) -> None:
        p = prepare_chat(chat("How tall is the tower?", documents=list(self.DOCS)), cfg(), WS)
        assert (p.documents, p.documents_kept) == (4, 4) and "Home | News" in p.body["messages"][-1]["content"]

    def test_a_request_budget_still_trims_below_it(self) -> None:
        p = prepare_chat(chat("How tall is the tower?", documents=list(self.DOCS), ragtrim={"budget": 8}),
                         cfg(trim={"budget": "lossless"}), WS)
        assert p.document_tokens_after <= 8


class TestPrepareChat:
    def test_plain_request_passes_unchanged(self) -> None:
        body = chat("hello world", temperature=0.2)
        p = prepare_chat(copy.deepcopy(body), cfg(), WS)
        assert p.body == body
        assert p.prompt_tokens == p.prompt_tokens_before == 2 + 4 + 3
        assert p.max_output_tokens == 256 and p.estimated_tokens == 9 + 256

    def test_no_input_mutation(self) -> None:
        body = chat("<context>x y\n\nz</context>q", documents=["d"], ragtrim={"budget": 1})
        before = copy.deepcopy(body)
        prepare_chat(body, cfg(trim={"budget": 5}), WS)
        assert body == before

    def test_unknown_fields_removed_and_listed(self) -> None:
        p = prepare_chat(chat(documents=["a b"], top_k=3, ragtrim={"budget": 50}), cfg(), WS)
        assert set(p.body) == {"model", "messages"}
        assert p.removed_fields == ("documents", "ragtrim", "top_k")

    def test_documents_objects_with_id_and_title(self) -> None:
        p = prepare_chat(chat("q", documents=[{"id": "1", "text": "alpha"}, {"title": "T", "text": "beta"}, " "]),
                         cfg(), WS)
        assert p.body["messages"][-1]["content"] == "Documents:\n[1] alpha\n\n[2] T\nbeta\n\nq"
        assert p.documents == 2 and p.documents_kept == 2

    def test_documents_without_user_message(self) -> None:
        body = {"model": "m", "messages": [{"role": "system", "content": "s"}], "documents": ["a"]}
        p = prepare_chat(body, cfg(), WS)
        assert p.body["messages"][-1] == {"role": "user", "content": "Documents:\n[1] a"}

    def test_multimodal_parts(self) -> None:
        body = {"model": "m", "messages": [{"role": "user", "content": [
            {"type": "text", "text": "<context>a\n\nb</context>what?"}, {"type": "image_url", "image_url": {}}]}]}
        p = prepare_chat(body, cfg(), WS)
        parts = p.body["messages"][0]["content"]
        assert parts[0] == {"type": "text", "text": "Documents:\n[1] a\n\n[2] b"}
        assert parts[1] == {"type": "text", "text": "what?"}

    @pytest.mark.parametrize(("body", "param"), [
        ([], None),
        ({"messages": []}, "messages"),
        ({"messages": [{"content": "x"}]}, "messages[0]"),
        (chat(documents="abc"), "documents"),
        (chat(documents=[5]), "documents[0]"),
        (chat(ragtrim={"budget": -1}), "ragtrim.budget"),
        (chat(ragtrim={"budgt": 1}), "ragtrim"),
        (chat(max_tokens=0), "max_tokens"),
    ])
    def test_invalid_requests(self, body: Any, param: str | None) -> None:
        with pytest.raises(RequestError) as info:
            prepare_chat(body, cfg(), WS)
        assert info.value.param == param

    def test_output_clamp(self) -> None:
        c = cfg(limits={"max_output_tokens": 10})
        assert prepare_chat(chat(max_tokens=50), c, WS).body["max_tokens"] == 10
        p = prepare_chat(chat(max_tokens=50, max_completion_tokens=7), c, WS)
        assert (p.body["max_tokens"], p.body["max_completion_tokens"], p.max_output_tokens) == (10, 7, 7)
        p = prepare_chat(chat(n=3), c, WS)
        assert p.body["max_tokens"] == 10 and p.estimated_tokens == p.prompt_tokens + 30

    def test_stream_options(self) -> None:
        p = prepare_chat(chat(stream=True), cfg(), WS)
        assert p.stream and not p.client_wants_usage
        assert p.body["stream_options"] == {"include_usage": True}
        p = prepare_chat(chat(stream=False, stream_options={"include_usage": True}), cfg(), WS)
        assert "stream_options" not in p.body

    def test_history_not_folded_with_tool_turns(self) -> None:
        msgs = [{"role": "user", "content": "a"}, {"role": "assistant", "content": None, "tool_calls": []},
                {"role": "tool", "content": "r", "tool_call_id": "1"}, {"role": "user", "content": "q"}]
        p = prepare_chat({"model": "m", "messages": msgs}, cfg(trim={"history_turns": 1}), WS)
        assert p.body["messages"] == msgs and p.history_turns_folded == 0

    def test_retention_mode_trims_without_a_budget(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from ragtrim.stages import retention

        table = {"tables": {"bm25": {"all": {"n": 100, "cdf": [0.6] + [0.99] * 19}}}}
        monkeypatch.setattr(retention, "calibration", lambda: table)
        docs = ["Paris is the capital of France."] + [f"Filler passage {i} about rivers and hills." for i in range(19)]
        body = chat("What is the capital of France?", documents=docs)
        p = prepare_chat(copy.deepcopy(body), cfg(trim={"keep": 0.5, "scorer": "bm25"}), WS)
        content = p.body["messages"][-1]["content"]
        assert "Paris is the capital of France." in content and "Filler passage 3" not in content
        assert p.prompt_tokens < p.prompt_tokens_before


class TestMessageRules:
    """The message rules of OpenAI's API, each a 400 naming the message's index and the rule."""

    @pytest.mark.parametrize(("message", "param", "code", "says"), [
        ({"role": "user"}, "messages[1].content", "missing_required_parameter", "(role 'user') has no 'content'"),
        ({"role": "user", "content": None}, "messages[1].content", "missing_required_parameter",
         "(role 'user') has 'content': null"),
        ({"role": "system"}, "messages[1].content", "missing_required_parameter", "a system message needs"),
        ({"role": "assistant"}, "messages[1].content", "missing_required_parameter",
         "has neither 'content' nor 'tool_calls'"),
        ({"role": "user", "content": []}, "messages[1].content", "invalid_value", "is an empty array"),
        ({"role": "user", "content": 42}, "messages[1].content", "invalid_type",
         "must be a string or an array of content parts, got int"),
        ({"role": "user", "content": ["hi"]}, "messages[1].content[0]", "invalid_type",
         "must be an object with a string 'type'"),
        ({"role": "user", "content": [{"type": "text"}]}, "messages[1].content[0].text", "invalid_type",
         "is a text part without a string 'text'"),
        ({"role": "tool", "content": "42"}, "messages[1].tool_call_id", "missing_required_parameter",
         "needs a string 'tool_call_id'"),
        ({"role": "function", "content": "42"}, "messages[1].name", "missing_required_parameter",
         "needs a string 'name'"),
    ])
    def test_refused(self, message: dict[str, Any], param: str, code: str, says: str) -> None:
        body = {"model": "m", "messages": [{"role": "user", "content": "first"}, message]}
        with pytest.raises(RequestError) as info:
            prepare_chat(body, cfg(), WS)
        assert info.value.param == param and info.value.code == code
        assert str(info.value).startswith("messages[1]") and says in str(info.value)

    @pytest.mark.parametrize("message", [
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
                                                               "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "assistant", "tool_calls": []},
        {"role": "assistant", "content": "sure"},
        {"role": "tool", "content": "42", "tool_call_id": "c1"},
        {"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "image_url", "image_url": {"url": "x"}}]},
        {"role": "developer", "content": "be brief"},
        {"role": "critic", "content": None},  # not OpenAI's: left to the upstream's chat template
    ])
    def test_accepted(self, message: dict[str, Any]) -> None:
        prepare_chat({"model": "m", "messages": [message, {"role": "user", "content": "q"}]}, cfg(), WS)


class TestUntrimmedPromptCountedAhead:
    """The untrimmed prompt is counted on the counting threads while its documents are trimmed (where the host has
    threads to spare), with the counts the caller's thread would make."""

    DOCS = tuple(f"Passage {i}: the river town of Example{i} holds a fair every spring, and its bridge is {i}00 "
                 "years old. " * 3 for i in range(30))

    def prepared(self, monkeypatch: pytest.MonkeyPatch, workers: int) -> tuple[Any, Any, list[list[str]]]:
        from ragtrim import get_counter
        from ragtrim.text import counting

        monkeypatch.setattr(counting, "count_workers", lambda: workers)
        started: list[list[str]] = []
        start = counting.start_counts

        def recorded(counter: Any, texts: Any, **options: Any) -> Any:
            pending = start(counter, texts, **options)
            started.append(list(pending.texts) if pending._futures else [])
            return pending

        monkeypatch.setattr("ragtrim.serve.render.start_counts", recorded)
        config = cfg(upstream={"url": "http://u/v1", "tokenizer": "cl100k_base"}, trim={"budget": 0.25,
                                                                                        "scorer": "bm25"})
        question = "How old is the bridge of Example7?"
        prompt = f"Answer from the documents.\n<context>{chr(10).join(self.DOCS)}</context>\nQuestion: {question}"
        completion = prepare_completion({"model": "m", "prompt": prompt}, config, get_counter("cl100k_base"))
        body = chat(question, documents=list(self.DOCS))
        return completion, prepare_chat(body, config, get_counter("cl100k_base")), started

    def test_same_counts_with_and_without_counting_threads(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from ragtrim.caches import clear_caches
        from ragtrim.text import counting

        clear_caches()
        completion, chat_prepared, started = self.prepared(monkeypatch, counting.FAST_PARALLEL_WORKERS)
        assert len(started) == 2 and all(started), "both untrimmed prompts went to the counting threads"
        clear_caches()
        alone_completion, alone_chat, alone = self.prepared(monkeypatch, 1)
        assert alone == [[], []]
        assert completion.prompt_tokens_before == alone_completion.prompt_tokens_before
        assert chat_prepared.prompt_tokens_before == alone_chat.prompt_tokens_before
        assert completion.prompt_tokens < completion.prompt_tokens_before


class TestPrepareCompletion:
    def test_context_replaced_in_place(self) -> None:
        prompt = "Read:\n<context>cats purr loudly\n\ndogs bark at night\n\nfish swim</context>\nDo dogs bark?"
        p = prepare_completion({"model": "m", "prompt": prompt}, cfg(trim={"budget": 4}), WS)
        assert p.body["prompt"] == "Read:\nDocuments:\n[1] dogs bark at night\nDo dogs bark?"
        assert p.documents == 3 and p.documents_kept == 1
        assert p.prompt_tokens < p.prompt_tokens_before

    def test_prompt_forms(self) -> None:
        batch = prepare_completion({"prompt": ["a b", "c"], "max_tokens": 10}, cfg(), WS)
        assert (batch.prompt_tokens, batch.estimated_tokens) == (3, 3 + 2 * 10)
        assert prepare_completion({"prompt": [1, 2, 3]}, cfg(), WS).prompt_tokens == 3
        assert prepare_completion({"prompt": [[1, 2], [3]]}, cfg(), WS).prompt_tokens == 3
        assert prepare_completion({"prompt": ""}, cfg(), WS).prompt_tokens == 0
        with pytest.raises(RequestError):
            prepare_completion({"prompt": []}, cfg(), WS)
        with pytest.raises(RequestError):
            prepare_completion({"prompt": [1, "a"]}, cfg(), WS)


def test_sse_event_boundaries() -> None:
    from ragtrim.serve.relay import event_end

    assert event_end(b"data: a\n\ndata: b") == (7, 2)
    assert event_end(b"data: a\r\n\r\ndata: b\n\n") == (7, 4)
    assert event_end(b"data: a\n") == (-1, 2)


class TestLongTextCounting:
    """Texts past PIECE_CHARS are counted in pieces cut before a word: the sum equals the whole-text count."""

    def _text(self, seed: int) -> str:
        import random

        rng = random.Random(seed)
        vocab = ["alpha", "Beta,", "gamma.", "\n", "  ", "12345", "naïve", "東京は", "emoji🙂", "don't", "x" * 30,
                 "...", "\t", "a-b", "(c)"]
        return "".join(rng.choice(vocab) + rng.choice([" ", " ", "", "\n", "  "]) for _ in range(30_000))

    @pytest.mark.parametrize("spec", ["cl100k_base", "whitespace"])
    def test_pieces_sum_to_the_whole_count(self, spec: str) -> None:
        from ragtrim.serve.render import PIECE_CHARS, count_text
        from ragtrim.text.tokens import get_counter

        counter = get_counter(spec)
        for seed in range(3):
            text = self._text(seed)
            assert len(text) > 2 * PIECE_CHARS
            assert count_text(text, counter) == counter.count(text)

    def test_a_text_without_spaces_is_cut_at_the_piece_size(self) -> None:
        from ragtrim.serve.render import PIECE_CHARS, count_text
        from ragtrim.text.tokens import get_counter

        counter = get_counter("whitespace")
        assert count_text("x" * (3 * PIECE_CHARS), counter) == 3  # three pieces of one "word" each
