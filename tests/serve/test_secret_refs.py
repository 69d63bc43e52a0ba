"""Secrets written as ``env:NAME`` or ``file:PATH`` in the gateway config: resolved, registered with the redaction,
and every failure a ConfigError that names the config key and the variable or file, never the secret."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from ragtrim._util.redact import redact
from ragtrim.errors import ConfigError
from ragtrim.serve.config import load_config, parse_config

UPSTREAM_KEY = "sk-upstream-from-env-7f3a9c"
CLIENT_KEY = "sk-client-from-file-41bd20"
REDIS_PW = "redis-pw-from-env-c0ffee"


def config(**sections: Any) -> dict[str, Any]:
    return {"upstream": {"url": "http://u/v1", **sections.pop("upstream", {})}, **sections}


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.setenv("RT_TEST_UPSTREAM_KEY", UPSTREAM_KEY)
    monkeypatch.setenv("RT_TEST_STATE", f"redis://:{REDIS_PW}@127.0.0.1:6390/0")
    monkeypatch.delenv("RT_TEST_MISSING", raising=False)
    return monkeypatch


class TestResolved:
    def test_every_secret_field_and_a_client_key(self, env: Any, tmp_path: Path) -> None:
        (tmp_path / "client.key").write_text(CLIENT_KEY + "\n")  # key files end with a newline
        (tmp_path / "metrics.token").write_text("metrics-token-from-file-99\n")
        path = tmp_path / "gateway.toml"
        path.write_text(f'''
[upstream]
url = "http://127.0.0.1:8000/v1"
api_key = "env:RT_TEST_UPSTREAM_KEY"
fallback_api_key = "file:{tmp_path / 'client.key'}"

[limits]
state = "env:RT_TEST_STATE"

[metrics]
bearer_token = "file:metrics.token"

[keys."file:client.key"]
user = "alice"
''')
        c = load_config(path)
        assert c.upstream.api_key == UPSTREAM_KEY
        assert c.upstream.fallback_api_key == CLIENT_KEY
        assert c.limits.state == f"redis://:{REDIS_PW}@127.0.0.1:6390/0"
        assert c.metrics.bearer_token == "metrics-token-from-file-99"  # relative: next to the config file
        assert list(c.keys) == [CLIENT_KEY] and c.keys[CLIENT_KEY].user == "alice"

    def test_resolved_secrets_are_registered_with_the_redaction(self, env: Any) -> None:
        parse_config(config(upstream={"api_key": "env:RT_TEST_UPSTREAM_KEY"}, limits={"state": "env:RT_TEST_STATE"}))
        said = f"upstream said: bad key {UPSTREAM_KEY}; redis AUTH {REDIS_PW} failed"
        assert UPSTREAM_KEY not in redact(said) and REDIS_PW not in redact(said)

    def test_a_plain_value_is_unchanged(self) -> None:
        assert parse_config(config(upstream={"api_key": "sk-literal-key-123"})).upstream.api_key == "sk-literal-key-123"


class TestRefused:
    def test_a_missing_variable_names_the_key_and_the_variable(self, env: Any) -> None:
        with pytest.raises(ConfigError) as err:
            parse_config(config(upstream={"api_key": "env:RT_TEST_MISSING"}))
        assert str(err.value).startswith("upstream.api_key (written as 'env:RT_TEST_MISSING'): the environment "
                                         "variable RT_TEST_MISSING is not set")

    def test_an_unreadable_file_names_the_key_and_the_file(self, tmp_path: Path) -> None:
        missing = tmp_path / "nope.key"
        with pytest.raises(ConfigError, match=r"metrics.bearer_token \(written as 'file:.*nope.key'\): cannot read "
                                              r"the key file '.*nope.key' \(No such file or directory\)"):
            parse_config(config(metrics={"bearer_token": f"file:{missing}"}))

    @pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
    def test_a_file_without_read_permission(self, tmp_path: Path) -> None:
        locked = tmp_path / "locked.key"
        locked.write_text("sk-locked-secret-value-1")
        locked.chmod(0)
        with pytest.raises(ConfigError, match=r"upstream.api_key .*Permission denied") as err:
            parse_config(config(upstream={"api_key": f"file:{locked}"}))
        assert "sk-locked-secret-value-1" not in str(err.value)

    def test_an_empty_file(self, tmp_path: Path) -> None:
        (tmp_path / "empty.key").write_text("\n")
        with pytest.raises(ConfigError, match=r"upstream.api_key .*the key file '.*empty.key' is empty"):
            parse_config(config(upstream={"api_key": f"file:{tmp_path / 'empty.key'}"}))

    def test_a_client_key_reference_is_named_by_its_place(self, env: Any) -> None:
        with pytest.raises(ConfigError, match=r"^keys\[2\] \(written as 'env:RT_TEST_MISSING'\): the environment"):
            parse_config(config(keys={"sk-first-key-000": {}, "env:RT_TEST_MISSING": {}}))

    def test_a_key_listed_twice_through_a_reference(self, env: Any) -> None:
        with pytest.raises(ConfigError, match=r"keys\[2\] \(written as 'env:RT_TEST_UPSTREAM_KEY'\) is a key "
                                              r"already listed") as err:
            parse_config(config(keys={UPSTREAM_KEY: {}, "env:RT_TEST_UPSTREAM_KEY": {}}))
        assert UPSTREAM_KEY not in str(err.value)

    def test_an_error_after_resolution_never_shows_the_secret(self, env: Any) -> None:
        env.setenv("RT_TEST_BAD_STATE", f"mysql://root:{REDIS_PW}@db/0")
        with pytest.raises(ConfigError, match="limits.state must be") as err:
            parse_config(config(limits={"state": "env:RT_TEST_BAD_STATE"}))
        assert REDIS_PW not in str(err.value)
