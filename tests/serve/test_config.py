"""Gateway config: defaults, every invalid key named in its ConfigError, the docs' example file."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from ragtrim.errors import ConfigError
from ragtrim.serve.config import load_config, parse_config, restart_only_changes

EXAMPLE = '''
[upstream]
url = "http://127.0.0.1:8000/v1"
fallback_url = ""
tokenizer = "cl100k_base"

[trim]
budget = 0.25
history_turns = 6

[limits]
max_input_tokens = 8192
max_output_tokens = 512
long_request_tokens = 4096
long_concurrency = 2
queue_timeout_s = 10
state = "memory"

[keys."sk-alice"]
user = "alice"
org = "acme"
rpm = 60
tpm = 200000

[orgs.acme]
concurrency = 8
'''


def base(**sections: Any) -> dict[str, Any]:
    return {"upstream": {"url": "http://u/v1"}, **sections}


class TestGatewayConfig:
    def test_issue_example(self, tmp_path: Path) -> None:
        path = tmp_path / "gateway.toml"
        path.write_text(EXAMPLE)
        c = load_config(path)
        assert c.upstream.url == "http://127.0.0.1:8000/v1"
        assert c.trim.budget == 0.25 and c.trim.history_turns == 6
        assert c.limits.long_concurrency == 2 and c.limits.queue_timeout_s == 10.0
        assert c.keys["sk-alice"].rpm == 60 and c.keys["sk-alice"].org == "acme"
        assert c.org_concurrency("acme") == 8 and c.org_concurrency("other") is None
        assert not c.open_mode

    def test_defaults(self) -> None:
        c = parse_config(base())
        assert c.open_mode
        assert c.trim.budget is None and c.trim.scorer == "bm25"
        assert c.limits.state == "memory" and c.limits.fail_open is True
        assert c.limits.max_input_tokens is None and c.log.path == ""

    def test_keep(self) -> None:
        assert parse_config(base()).trim.keep is None
        assert parse_config(base(trim={"keep": 0.95, "scorer": "bm25"})).trim.keep == 0.95

    def test_integer_budget_and_trailing_slash(self) -> None:
        c = parse_config({"upstream": {"url": "http://u/v1/"}, "trim": {"budget": 1500}})
        assert c.trim.budget == 1500 and isinstance(c.trim.budget, int)
        assert c.upstream.url == "http://u/v1"

    @pytest.mark.parametrize(("raw", "message"), [
        ({}, r"\[upstream\] section is required"),
        ({"upstream": {}}, "upstream.url is required"),
        ({"upstream": {"url": "ftp://x"}}, "upstream.url must be an http"),
        ({"upstream": {"url": "http://u", "tokenizr": "x"}}, "unknown config key 'upstream.tokenizr'"),
        ({"upstream": {"url": "http://me:pw@u/v1", "api_key": "k"}},
         "upstream.url carries a user and password and upstream.api_key is set"),
        ({"upstream": {"url": "http://u/v1", "fallback_url": "http://me:pw@f/v1", "fallback_api_key": "k"}},
         "upstream.fallback_url carries a user and password and upstream.fallback_api_key is set"),
        (base(extra={}), "unknown config key 'extra'"),
        (base(trim={"budget": 1.5}), r"trim.budget as a share must be in \(0, 1\]"),
        (base(trim={"budget": 0}), "trim.budget as a token count must be >= 1"),
        (base(trim={"budget": "a"}), "trim.budget must be a share"),
        (base(trim={"history_turns": -1}), "trim.history_turns must be >= 0"),
        (base(trim={"scorer": "magic"}), "trim.scorer must be one of"),
        (base(trim={"keep": 1.0}), "trim.keep must be a probability between 0 and 1"),
        (base(trim={"keep": True}), "trim.keep must be a probability"),
        (base(trim={"keep": 0.9, "scorer": "embedding"}), "trim.keep needs a calibrated scorer"),
        (base(trim={"keep": 0.9, "budget": "lossless"}), 'trim.budget = "lossless" drops none'),
        (base(limits={"max_input_tokens": 0}), "limits.max_input_tokens must be >= 1"),
        (base(limits={"max_output_tokens": "5"}), "limits.max_output_tokens must be an integer"),
        (base(limits={"queue_timeout_s": -1}), "limits.queue_timeout_s must be >= 0"),
        (base(limits={"state": "mysql://x"}), "limits.state must be"),
        (base(limits={"fail_open": "yes"}), "limits.fail_open must be true or false"),
        (base(limits={"long_concurrency": 0}), "limits.long_concurrency must be >= 1"),
        (base(keys={"sk-a": {}, "sk-b": {"rpm": 0}}), (r"keys\[2\].rpm must be >= 1, got 0 \(keys\[2\] is the key "
                                                       r"number 2 under \[keys\], counted in file order")),
        (base(keys={"sk-a": {"tpm": True}}), r"keys\[1\].tpm must be an integer"),
        (base(keys={"sk-a": {"rmp": 5}}), r"unknown config key 'keys\[1\].rmp'"),
        (base(keys={"sk-a": 5}), r"keys\[1\] must be a table"),
        (base(keys={"sk a": {}}), r"keys\[1\]: an API key must be non-empty without spaces"),
        (base(orgs={"acme": {"concurrency": 0}}), "orgs.acme.concurrency must be >= 1"),
        (base(log={"log_text": 1}), "log.log_text must be true or false"),
        (base(log={"log_request": "yes"}), "log.log_request must be true or false"),
    ])
    def test_each_invalid_key_is_named(self, raw: dict[str, Any], message: str) -> None:
        with pytest.raises(ConfigError, match=message):
            parse_config(raw)

    def test_bad_file(self, tmp_path: Path) -> None:
        with pytest.raises(ConfigError, match="cannot read gateway config"):
            load_config(tmp_path / "missing.toml")
        bad = tmp_path / "bad.toml"
        bad.write_text("[upstream\n")
        with pytest.raises(ConfigError, match="not valid TOML"):
            load_config(bad)

    def test_not_utf8_is_a_config_error(self, tmp_path: Path) -> None:
        latin1 = tmp_path / "latin1.toml"
        latin1.write_bytes(b'[upstream]\nurl = "http://u/v1"\n# caf\xe9\n')
        with pytest.raises(ConfigError, match=r"is not valid UTF-8: byte 0xe9 on line 3 \(TOML files are UTF-8"):
            load_config(latin1)

    def test_errors_about_a_key_never_quote_it(self) -> None:
        key = "sk-live-0123456789abcdef"
        for entry in ({"rpm": 0}, {"rmp": 1}, 5, {"user": 7}):
            with pytest.raises(ConfigError) as info:
                parse_config(base(keys={key: entry}))
            assert "keys[1]" in str(info.value)
            assert "0123456789" not in str(info.value) and "sk-live" not in str(info.value)

    def test_the_default_user_holds_no_part_of_the_key(self) -> None:
        c = parse_config(base(keys={"sk-live-0123456789abcdef": {}}))
        user = c.keys["sk-live-0123456789abcdef"].user
        assert user.startswith("key-") and len(user) == 12 and "sk-live" not in user

    def test_config_is_frozen(self) -> None:
        c = parse_config(base())
        with pytest.raises(dataclasses.FrozenInstanceError):
            c.limits.queue_timeout_s = 5  # type: ignore[misc]


class TestDrainTimeout:
    def test_default_and_a_set_value(self) -> None:
        assert parse_config(base()).serve.drain_timeout_s == 25.0
        assert parse_config(base(serve={"drain_timeout_s": 0})).serve.drain_timeout_s == 0.0
        assert parse_config(base(serve={"drain_timeout_s": 7.5})).serve.drain_timeout_s == 7.5

    @pytest.mark.parametrize(("value", "message"), [
        (-1, r"serve.drain_timeout_s must be >= 0.0, got -1"),
        ("30s", r"serve.drain_timeout_s must be a number, got '30s'"),
        (True, r"serve.drain_timeout_s must be a number, got True"),
        (float("nan"), r"serve.drain_timeout_s must be a number, got nan"),
        (7200, r"serve.drain_timeout_s must be at most 3600 seconds, got 7200"),
    ])
    def test_invalid_values_are_named(self, value: Any, message: str) -> None:
        with pytest.raises(ConfigError, match=message):
            parse_config(base(serve={"drain_timeout_s": value}))

    def test_unknown_serve_key(self) -> None:
        with pytest.raises(ConfigError, match=r"unknown config key 'serve.drain_timeout'"):
            parse_config(base(serve={"drain_timeout": 5}))


class TestFreezeGc:
    def test_default_on_and_turned_off(self) -> None:
        assert parse_config(base()).serve.freeze_gc is True
        assert parse_config(base(serve={"freeze_gc": False})).serve.freeze_gc is False

    def test_not_a_boolean_is_named(self) -> None:
        with pytest.raises(ConfigError, match=r"serve.freeze_gc must be"):
            parse_config(base(serve={"freeze_gc": "no"}))

    def test_a_reload_cannot_change_it(self) -> None:
        assert restart_only_changes(parse_config(base()), parse_config(base(serve={"freeze_gc": False}))) == [
            "serve.freeze_gc"]


class TestApiRootWarning:
    """An upstream URL without an API version segment loads, with one warning line that names the likely fix."""

    @pytest.mark.parametrize("url", ["http://127.0.0.1:8000/v1", "https://api.openai.com/v1/",
                                     "https://generativelanguage.googleapis.com/v1beta/openai",
                                     "https://x.openai.azure.com/openai/v1"])
    def test_no_warning_with_a_version(self, url: str, caplog: pytest.LogCaptureFixture) -> None:
        with caplog.at_level("WARNING", logger="ragtrim.serve"):
            parse_config({"upstream": {"url": url}})
        assert caplog.records == []

    def test_one_line_naming_the_fix(self, caplog: pytest.LogCaptureFixture) -> None:
        with caplog.at_level("WARNING", logger="ragtrim.serve"):
            c = parse_config({"upstream": {"url": "http://user:pw-secret-123@127.0.0.1:8000/"}})
        assert c.upstream.url == "http://user:pw-secret-123@127.0.0.1:8000"
        [record] = caplog.records
        line = record.getMessage()
        assert "\n" not in line and "pw-secret-123" not in line
        assert line.startswith("ragtrim serve: config warning: upstream.url 'http://user:***@127.0.0.1:8000' has "
                               "no API version in its path")
        assert line.endswith("if requests get upstream_404, write 'http://user:***@127.0.0.1:8000/v1'")

    def test_the_fallback_url_too(self, caplog: pytest.LogCaptureFixture) -> None:
        with caplog.at_level("WARNING", logger="ragtrim.serve"):
            parse_config({"upstream": {"url": "http://a/v1", "fallback_url": "http://b:8001"}})
        assert [r.getMessage().split(" has ")[0] for r in caplog.records] == [
            "ragtrim serve: config warning: upstream.fallback_url 'http://b:8001'"]
