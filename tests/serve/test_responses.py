"""The gateway's response helpers: ``usage_in_tail`` (a large answer's usage from its last bytes) and
``relay_error`` (an upstream's error passed on, redacted)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("starlette", reason="the serve extra is not installed: pip install 'ragtrim[serve]'")

from ragtrim._util.redact import register_secret
from ragtrim.serve.responses import USAGE_TAIL_BYTES, relay_error, usage_in_tail

USAGE = {"prompt_tokens": 7, "total_tokens": 7}


def answer(**members: object) -> bytes:
    return json.dumps({"object": "list", "data": [{"embedding": [0.5] * 4, "index": 0}], **members}).encode()


class TestUsageInTail:
    def test_usage_last(self) -> None:
        assert usage_in_tail(answer(model="e", usage=USAGE)) == USAGE

    def test_members_after_usage(self) -> None:
        body = answer(usage=USAGE, model="e", id="x-1", created=5, extra={"a": [1, "}"]})
        assert usage_in_tail(body) == USAGE

    def test_whitespace_and_pretty_printing(self) -> None:
        body = json.dumps({"data": [], "usage": USAGE, "model": "e"}, indent=2).encode() + b"\n\n"
        assert usage_in_tail(body) == USAGE

    def test_only_the_tail_is_needed(self) -> None:
        body = answer(data2=["x" * 10] * (USAGE_TAIL_BYTES // 5), model="e", usage=USAGE)
        assert len(body) > 2 * USAGE_TAIL_BYTES
        assert usage_in_tail(body[-USAGE_TAIL_BYTES:]) == USAGE

    @pytest.mark.parametrize("body", [
        b'{"data": [{"usage": {"total_tokens": 1}}]}',                   # a nested object's key
        b'{"data": {"usage": {"total_tokens": 1}}, "model": "e"}',
        b'{"text": "the \\"usage\\": {\\"total_tokens\\": 1}", "model": "e"}',  # inside a string
        b'{"model": "usage", "data": []}',                               # a value, not a key
        b'{"usage": 5}',                                                 # not an object
        b'{"usage": {"total_tokens": 1}',                                # cut short
        b'{"usage": {"total_tokens": 1}} trailing',
        b"",
        b"\xff\xfe}",
    ])
    def test_no_top_level_usage_is_none(self, body: bytes) -> None:
        assert usage_in_tail(body) is None

    def test_the_top_level_one_wins_over_a_nested_one(self) -> None:
        body = b'{"data": [{"usage": {"total_tokens": 99}}], "usage": {"total_tokens": 3}}'
        assert usage_in_tail(body) == {"total_tokens": 3}
        body = b'{"usage": {"total_tokens": 3}, "data": [{"usage": {"total_tokens": 99}}]}'
        assert usage_in_tail(body) == {"total_tokens": 3}


class TestRelayError:
    def test_an_upstream_quoting_our_key_is_redacted(self) -> None:
        key = "up-key-7f3a9c1e5b2d4f60"
        register_secret(key)
        body = json.dumps({"error": {"message": f"Incorrect API key provided: {key}", "type": "auth",
                                     "code": "invalid_api_key"}}).encode()
        r = relay_error(401, body, {})
        assert key not in r.body.decode() and "***" in r.body.decode()
        assert json.loads(r.body)["error"]["code"] == "invalid_api_key"

    def test_a_plain_text_error_is_redacted_before_it_is_cut(self) -> None:
        key = "up-key-c0ffee00c0ffee00"
        register_secret(key)
        text = ("x" * 490 + key).encode()  # the key straddles the 500-character cut
        out = relay_error(500, text, {}).body.decode()
        assert not any(key[i:i + 8] in out for i in range(len(key) - 7))  # not even the part before the cut
        assert json.loads(out)["error"]["code"] == "upstream_500"
