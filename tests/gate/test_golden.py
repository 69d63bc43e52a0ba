"""ragtrim.gate.golden and ragtrim.gate.builders: reading and writing golden sets, and building them from SQuAD files
and request logs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ragtrim.errors import ConfigError, InputError
from ragtrim.gate.builders import JSON_ANSWER_SCHEMA, golden_from_log, golden_from_squad, shape_of
from ragtrim.gate.golden import GoldenItem, item_from_dict, load_golden, summary, to_dict, write_golden


def _write(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


class TestItems:
    def test_defaults_and_documents(self) -> None:
        item = item_from_dict({"question": "q?", "documents": ["a", {"title": "T", "text": "b"}, "  "],
                               "answers": "x"}, line=7)
        assert item.id == "line-7" and item.documents == ("a", "T\nb") and item.answers == ("x",)
        assert item.answerable and item.reference == "gold" and item.tags == ()

    def test_messages_give_the_question(self) -> None:
        item = item_from_dict({"id": "m", "messages": [{"role": "system", "content": "s"},
                                                       {"role": "user", "content": [{"type": "text", "text": "why?"}]}]})
        assert item.question == "why?" and item.reference == "baseline"

    @pytest.mark.parametrize(("row", "message"), [
        ({"question": "q", "oops": 1}, "unknown key 'oops'"),
        ({"question": "q", "answers": ["a"], "answerable": False}, "unanswerable item accepts only a refusal"),
        ({"messages": [{"role": "system", "content": "s"}]}, "needs a user message"),
        ({"question": ""}, "give a non-empty 'question'"),
        ({"question": "q", "schema": {"$ref": "#/x"}}, "does not support"),
        ({"question": "q", "answers": [1]}, "must be a string or a list of strings"),
        ({"question": "q", "options": {"model": "x"}}, "may not set messages, prompt, model or stream"),
        ({"question": "q", "documents": [3]}, r"documents\[0\] must be a string"),
    ])
    def test_invalid(self, row: dict[str, Any], message: str) -> None:
        with pytest.raises(InputError, match=message):
            item_from_dict(row)

    def test_no_input_mutation_and_fingerprint(self) -> None:
        options = {"max_tokens": 5}
        item = GoldenItem(id="a", question="q?", answers=("x",), options=options, tags=("t",))
        options["max_tokens"] = 6
        assert item.options == {"max_tokens": 5}
        same = GoldenItem(id="a", question="q?", answers=("x",), options={"max_tokens": 5}, tags=("other",))
        assert item.fingerprint() == same.fingerprint()  # tags do not shape the request or its judgement
        assert item.fingerprint() != GoldenItem(id="a", question="q?", answers=("y",)).fingerprint()

    def test_roundtrip_and_duplicates(self, tmp_path: Path) -> None:
        items = [GoldenItem(id="a", question="q?", documents=("d",), answers=("x",), tags=("t",)),
                 GoldenItem(id="b", question="r?", answerable=False, schema=JSON_ANSWER_SCHEMA,
                            options={"max_tokens": 9}, meta={"k": 1})]
        assert write_golden(items, tmp_path / "g.jsonl") == 2
        back = load_golden(tmp_path / "g.jsonl")
        assert [to_dict(i) for i in back] == [to_dict(i) for i in items]
        assert summary(back) == {"items": 2, "answerable": 1, "unanswerable": 1, "with_schema": 1,
                                 "judged_by_agreement": 0, "tags": {"t": 1}}
        _write(tmp_path / "dup.jsonl", [{"id": "a", "question": "q"}, {"id": "a", "question": "r"}])
        with pytest.raises(InputError, match=r"dup.jsonl:2: id 'a' is already used at line 1"):
            load_golden(tmp_path / "dup.jsonl")

    def test_empty_file_is_empty(self, tmp_path: Path) -> None:
        (tmp_path / "e.jsonl").write_text("\n", encoding="utf-8")
        assert load_golden(tmp_path / "e.jsonl") == []


def _squad(tmp_path: Path) -> Path:
    def para(article: str, p: int) -> dict[str, Any]:
        return {"context": f"{article} paragraph {p}.", "qas": [
            {"id": f"{article}-{p}-a", "question": f"What about {article} {p}?", "is_impossible": False,
             "answers": [{"text": f"{article} {p}", "answer_start": 0}, {"text": f"{article} {p}", "answer_start": 0}]},
            {"id": f"{article}-{p}-u", "question": f"Who else in {article} {p}?", "is_impossible": True,
             "answers": [], "plausible_answers": [{"text": "x", "answer_start": 0}]}]}
    data = {"version": "v2.0", "data": [{"title": t, "paragraphs": [para(t, p) for p in range(4)]}
                                        for t in ("Alpha", "Beta", "Gamma")]}
    path = tmp_path / "squad.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


class TestSquad:
    def test_every_question(self, tmp_path: Path) -> None:
        items = golden_from_squad(_squad(tmp_path), documents=3)
        assert len(items) == 24
        first = items[0]
        assert first.id == "Alpha-0-a" and first.answers == ("Alpha 0",) and first.tags == ("Alpha",)
        assert len(first.documents) == 3 and "Alpha paragraph 0." in first.documents
        assert first.documents[first.meta["gold_document"]] == "Alpha paragraph 0."
        assert all(d.startswith("Alpha") for d in first.documents)  # distractors from the same article
        unanswerable = items[1]
        assert not unanswerable.answerable and unanswerable.answers == ()

    def test_articles_limit_share_json(self, tmp_path: Path) -> None:
        path = _squad(tmp_path)
        items = golden_from_squad(path, exclude_articles=["Gamma"], limit=6, unanswerable_share=0.5,
                                  json_answers=True, seed=3)
        assert len(items) == 6 and sum(not i.answerable for i in items) == 3
        assert {i.tags[0] for i in items} <= {"Alpha", "Beta"} and all(i.schema == JSON_ANSWER_SCHEMA for i in items)
        again = golden_from_squad(path, exclude_articles=["Gamma"], limit=6, unanswerable_share=0.5,
                                  json_answers=True, seed=3)
        assert [to_dict(i) for i in again] == [to_dict(i) for i in items]
        only = golden_from_squad(path, articles=["Beta"])
        assert {i.tags[0] for i in only} == {"Beta"}

    def test_invalid(self, tmp_path: Path) -> None:
        path = _squad(tmp_path)
        with pytest.raises(ConfigError, match="no article titled 'Delta'"):
            golden_from_squad(path, articles=["Delta"])
        with pytest.raises(ConfigError, match="need 6 unanswerable"):
            golden_from_squad(path, articles=["Alpha"], limit=6, unanswerable_share=1.0)
        with pytest.raises(InputError, match="must hold"):
            golden_from_squad(_write(tmp_path / "bad.json", [1]))

    @pytest.mark.data
    def test_the_shared_squad_file(self, shared_data: Path) -> None:
        path = shared_data / "squad-v2-dev-cs224n" / "dev-v2.0.shared.json"
        items = golden_from_squad(path, articles=["Warsaw"], limit=40, unanswerable_share=0.25)
        assert len(items) == 40 and sum(not i.answerable for i in items) == 10
        assert all(i.tags == ("Warsaw",) and len(i.documents) == 5 for i in items)


def _log_line(rid: str, messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"ts": 1.0, "request_id": rid, "outcome": "ok", "status": 200,
            "request": {"model": "m", "messages": messages, **extra}}


class TestLog:
    def test_shapes_and_sampling(self, tmp_path: Path) -> None:
        rows = []
        for i in range(30):  # 30 short questions
            rows.append(_log_line(f"s{i}", [{"role": "user", "content": f"short question {i}?"}]))
        for i in range(10):  # 10 with a system prompt and documents, one asking for JSON
            extra: dict[str, Any] = {"documents": ["doc " * 300]}
            if i == 0:
                extra["response_format"] = {"type": "json_schema", "json_schema": {"name": "a",
                                                                                   "schema": JSON_ANSWER_SCHEMA}}
            rows.append(_log_line(f"d{i}", [{"role": "system", "content": "be brief"},
                                            {"role": "user", "content": f"doc question {i}?"}], **extra))
        rows.append({"ts": 1.0, "request_id": "x", "outcome": "ok", "tokens": {}})  # a line without text
        rows.append({"model": "m", "prompt": "a completions body"})
        items, info = golden_from_log(_write(tmp_path / "log.jsonl", rows), sample=8, tokenizer="whitespace")
        assert info["shapes"] == {"question|0-256": 30, "system+context|256-512": 10}
        assert info["sampled_by_shape"] == {"question|0-256": 6, "system+context|256-512": 2}
        assert info["left_out"] == {"completions_not_replayed": 1}
        assert len(items) == 8 and all(i.reference == "baseline" for i in items)
        with_docs = [i for i in items if i.documents]
        assert len(with_docs) == 2 and with_docs[0].messages is not None
        again, _ = golden_from_log(tmp_path / "log.jsonl", sample=8, tokenizer="whitespace")
        assert [to_dict(i) for i in again] == [to_dict(i) for i in items]
        everything, _ = golden_from_log(tmp_path / "log.jsonl", sample=100, tokenizer="whitespace")
        json_items = [i for i in everything if i.schema is not None]
        assert len(json_items) == 1 and json_items[0].tags == ("system+context|256-512|json",)
        assert json_items[0].options["response_format"]["type"] == "json_schema"

    def test_a_log_without_chat_requests(self, tmp_path: Path) -> None:
        with pytest.raises(InputError, match="no chat request to replay"):
            golden_from_log(_write(tmp_path / "log.jsonl", [{"model": "m", "prompt": "p"}]))

    def test_shape_names(self) -> None:
        assert shape_of({"system": 10, "history": 0, "context": 0, "question": 5}) == "system|0-256"
        assert shape_of({"context": 700, "question": 5}) == "context|512-1024"
        assert shape_of({"question": 300}) == "question|256-512"
