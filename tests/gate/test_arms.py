"""ragtrim.gate.arms and ragtrim.gate.prompt: arms from files and flags, redaction, and the request each arm gets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragtrim.errors import ConfigError
from ragtrim.gate.arms import Arm, TrimSpec, check_arms, load_arms, parse_arm_option, redact_url, scrub
from ragtrim.gate.builders import JSON_ANSWER_SCHEMA
from ragtrim.gate.golden import GoldenItem
from ragtrim.gate.prompt import TEXT_INSTRUCTION, build_body, instruction_for, trim_documents

URL = "http://127.0.0.1:8000/v1"


class TestArm:
    def test_defaults(self) -> None:
        arm = Arm(name="base", url=URL, model="m")
        assert (arm.endpoint, arm.documents, arm.trim, arm.options) == ("chat", "render", None, {})

    @pytest.mark.parametrize(("kwargs", "message"), [
        ({"name": "has space"}, "arm name must be"),
        ({"url": "127.0.0.1:8000"}, "url must be an http"),
        ({"model": ""}, "give the model name"),
        ({"endpoint": "embeddings"}, "endpoint must be"),
        ({"documents": "field", "endpoint": "completions"}, "works with the chat endpoint only"),
        ({"options": {"stream": False}}, "may not set stream"),
        ({"api_key_env": "not a var"}, "must name an environment variable"),
        ({"timeout_s": 0}, "timeout_s must be in"),
        ({"cost_weight": -1}, "cost_weight must be a positive number"),
    ])
    def test_invalid(self, kwargs: dict[str, object], message: str) -> None:
        args: dict[str, object] = {"name": "a", "url": URL, "model": "m", **kwargs}
        with pytest.raises(ConfigError, match=message):
            Arm(**args)  # type: ignore[arg-type]

    def test_trim_spec(self) -> None:
        assert TrimSpec(budget=0.25).budget_for(1001) == 251
        assert TrimSpec(budget=300).budget_for(1001) == 300
        for bad in (1.0, 0.0, -1, True):
            with pytest.raises(ConfigError, match="trim.budget must be"):
                TrimSpec(budget=bad)

    def test_fingerprint_ignores_name_and_timeout(self) -> None:
        a = Arm(name="a", url=URL, model="m", options={"temperature": 0})
        assert a.fingerprint() == Arm(name="b", url=URL, model="m", options={"temperature": 0},
                                      timeout_s=5).fingerprint()
        assert a.fingerprint() != Arm(name="a", url=URL, model="m", options={"temperature": 1}).fingerprint()
        assert a.fingerprint() != Arm(name="a", url=URL, model="m", trim=TrimSpec(budget=0.5)).fingerprint()


class TestSecrets:
    def test_redact_url(self) -> None:
        assert redact_url("http://u:pw@host:8000/v1") == "http://u:***@host:8000/v1"
        assert redact_url("https://host/v1?api_key=abc&x=1") == "https://host/v1?api_key=***&x=1"
        assert redact_url(URL) == URL

    def test_scrub(self) -> None:
        text = "upstream http://u:pw@h/v1 said: bad key sk-123"
        assert scrub(text, ["sk-123"]) == "upstream http://u:***@h/v1 said: bad key ***"

    def test_a_bad_url_never_echoes_its_password(self) -> None:
        with pytest.raises(ConfigError) as info:
            Arm(name="a", url="ftp://u:hunter2@h/v1", model="m")
        assert "hunter2" not in str(info.value)


class TestFiles:
    def test_toml(self, tmp_path: Path) -> None:
        path = tmp_path / "arms.toml"
        path.write_text(f'''
baseline = "bf16"
[[arm]]
name = "bf16"
url = "{URL}"
model = "m"
options = {{ temperature = 0, max_tokens = 32 }}

[[arm]]
name = "trim4x"
url = "{URL}"
model = "m"
trim = {{ budget = 0.25, scorer = "bm25" }}

[thresholds]
max_accuracy_drop = 0.02
''', encoding="utf-8")
        f = load_arms(path)
        assert [a.name for a in f.arms] == ["bf16", "trim4x"] and f.baseline == "bf16"
        assert f.arms[1].trim == TrimSpec(budget=0.25, scorer="bm25")
        assert f.thresholds == {"max_accuracy_drop": 0.02}

    def test_json_with_a_flagged_baseline(self, tmp_path: Path) -> None:
        path = tmp_path / "arms.json"
        path.write_text(json.dumps({"arm": [{"name": "a", "url": URL, "model": "m"},
                                            {"name": "b", "url": URL, "model": "m", "baseline": True}]}))
        assert load_arms(path).baseline == "b"

    @pytest.mark.parametrize(("text", "message"), [
        ('[[arm]]\nname = "a"\nurl = "http://h/v1"\n', "missing model"),
        ('[[arm]]\nname = "a"\nurl = "http://h/v1"\nmodel = "m"\nextra = 1\n', "unknown key 'extra'"),
        ('[[arm]]\nname = "a"\nurl = "http://h/v1"\nmodel = "m"\ntrim = { share = 1 }\n', "trim must be a table"),
        ("arms = 3\n", "needs"),
        ("[[arm\n", "not valid TOML"),
    ])
    def test_invalid(self, tmp_path: Path, text: str, message: str) -> None:
        path = tmp_path / "arms.toml"
        path.write_text(text, encoding="utf-8")
        with pytest.raises(ConfigError, match=message):
            load_arms(path)

    def test_flags_and_checks(self) -> None:
        arm = parse_arm_option(f"base={URL}", "m")
        assert (arm.name, arm.url, arm.model) == ("base", URL, "m")
        with pytest.raises(ConfigError, match="needs --model"):
            parse_arm_option(f"base={URL}", None)
        with pytest.raises(ConfigError, match="NAME=URL"):
            parse_arm_option(URL, "m")
        with pytest.raises(ConfigError, match="at least two arms"):
            check_arms([arm], "base")
        with pytest.raises(ConfigError, match="unique"):
            check_arms([arm, arm], "base")
        with pytest.raises(ConfigError, match="baseline 'x' is not an arm"):
            check_arms([arm, Arm(name="b", url=URL, model="m")], "x")


class TestPrompt:
    ITEM = GoldenItem(id="q", question="Who designed it?", documents=("Doc one.", "Doc two."), answers=("x",))

    def test_rendered_as_the_gateway_renders(self) -> None:
        body = build_body(self.ITEM, Arm(name="a", url=URL, model="m"), self.ITEM.documents)
        assert body["model"] == "m" and body["temperature"] == 0 and body["max_tokens"] == 128
        assert body["messages"] == [
            {"role": "system", "content": TEXT_INSTRUCTION},
            {"role": "user", "content": "Documents:\n[1] Doc one.\n\n[2] Doc two.\n\nQuestion: Who designed it?"}]

    def test_documents_in_the_field_for_a_gateway(self) -> None:
        body = build_body(self.ITEM, Arm(name="a", url=URL, model="m", documents="field"), self.ITEM.documents)
        assert body["documents"] == ["Doc one.", "Doc two."]
        assert body["messages"][-1] == {"role": "user", "content": "Question: Who designed it?"}

    def test_precedence_and_completions(self) -> None:
        item = GoldenItem(id="q", question="q?", options={"max_tokens": 10, "stop": ["\n"]})
        arm = Arm(name="a", url=URL, model="m", endpoint="completions", options={"max_tokens": 20})
        body = build_body(item, arm, ())
        assert body["max_tokens"] == 20 and body["stop"] == ["\n"]
        assert body["prompt"] == f"{TEXT_INSTRUCTION}\n\nQuestion: q?\nAnswer:"
        one_limit = build_body(item, Arm(name="a", url=URL, model="m", options={"max_completion_tokens": 7}), ())
        assert "max_tokens" in one_limit and one_limit["max_completion_tokens"] == 7  # the item's own stays
        no_item_limit = build_body(GoldenItem(id="q", question="q?"),
                                   Arm(name="a", url=URL, model="m", options={"max_completion_tokens": 7}), ())
        assert "max_tokens" not in no_item_limit

    def test_json_instruction(self) -> None:
        item = GoldenItem(id="q", question="q?", schema=JSON_ANSWER_SCHEMA)
        text = instruction_for(item)
        assert '"answer":{"type":["string","null"]}' in text and 'set "answer" to null' in text
        assert instruction_for(GoldenItem(id="q", question="q?", instruction="Be terse.")) == "Be terse."

    def test_messages_items_keep_their_chat(self) -> None:
        item = GoldenItem(id="m", messages=({"role": "system", "content": "S"}, {"role": "user", "content": "Q?"}),
                          documents=("D",))
        body = build_body(item, Arm(name="a", url=URL, model="m"), item.documents)
        assert body["messages"] == [{"role": "system", "content": "S"},
                                    {"role": "user", "content": "Documents:\n[1] D\n\nQ?"}]

    def test_client_side_trim(self) -> None:
        docs = ["The tower was designed by Gustave Eiffel's firm.", "Bananas are yellow fruit.",
                "Paris is the capital of France."]
        out = trim_documents(docs, "Who designed the tower?", TrimSpec(budget=10, tokenizer="whitespace"))
        assert out.tokens_before == 18 and out.tokens_after <= 10  # 8 + 4 + 6 words
        assert any("Eiffel" in d for d in out.documents)
        untouched = trim_documents(docs, "q", TrimSpec(budget=100, tokenizer="whitespace"))
        assert untouched.documents == tuple(docs) and untouched.tokens_after == 18
