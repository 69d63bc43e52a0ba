"""The one redaction function: URLs, secret-named pairs, registered values, errors and log records."""

from __future__ import annotations

import logging
import re

import pytest

from ragtrim._util.redact import (
    MASK,
    RedactingFilter,
    get_logger,
    redact,
    redact_url,
    register_secret,
    register_url_secrets,
)
from ragtrim.errors import ConfigError, RagtrimError


class TestRedactUrl:
    @pytest.mark.parametrize(("url", "expected"), [
        ("redis://user:s3cret@host:6379/1", "redis://user:***@host:6379/1"),
        ("redis://:s3cret@host/0", "redis://:***@host/0"),
        ("rediss://default:pw%40x@cache.example:6380", "rediss://default:***@cache.example:6380"),
        ("redis://host:6379/0", "redis://host:6379/0"),
        ("redis://host:6379/0?password=s3cret", "redis://host:6379/0?password=***"),
        ("redis://host/0?db=1&Password=s3cret&x=2", "redis://host/0?db=1&Password=***&x=2"),
        ("https://api.example/v1?api_key=abc&model=m", "https://api.example/v1?api_key=***&model=m"),
        ("http://u:p@[::1]:8000/v1", "http://u:***@[::1]:8000/v1"),
        ("unix:///tmp/redis.sock?password=s3cret", "unix:///tmp/redis.sock?password=***"),
    ])
    def test_masks_password_and_secret_query_values(self, url: str, expected: str) -> None:
        assert redact_url(url) == expected

    def test_an_unparsable_url_is_masked_from_its_userinfo_on(self) -> None:
        assert redact_url("redis://user:s3cret@host:notaport/0") == "redis://***"
        assert redact_url("redis://user:s3cret@[::1/0") == "redis://***"

    def test_an_unparsable_url_with_nowhere_to_hide_a_secret_stays(self) -> None:
        assert redact_url("http://host:port") == "http://host:port"  # a placeholder in a message
        assert redact("base_url must be an http://host:port URL") == "base_url must be an http://host:port URL"

    def test_an_unparsable_url_without_userinfo_is_kept(self) -> None:
        assert redact("base_url must be an http://host:port URL") == "base_url must be an http://host:port URL"
        assert redact_url("redis://host:port/0?password=s3cret") == "redis://host:port/0?password=***"

    def test_an_unparsable_url_without_userinfo_keeps_its_host(self) -> None:
        # "http://host:port" in a help text or an error's example has no password to hide.
        assert redact_url("http://host:port") == "http://host:port"
        assert redact_url("http://host:port/v1?password=s3cret#x") == "http://host:port/v1?password=***#x"


class TestRedact:
    def test_urls_inside_a_message(self) -> None:
        text = "redis at redis://:hunter2hunter2@10.0.0.5:6379/0 failed; also see rediss://h/0?password=pw1234"
        out = redact(text)
        assert "hunter2hunter2" not in out and "pw1234" not in out
        assert "redis://:***@10.0.0.5:6379/0" in out

    @pytest.mark.parametrize("text", [
        "Redis(password=hunter2xyz, db=0)", "{'password': 'hunter2xyz'}", '"api_key": "hunter2xyz"',
        "token: hunter2xyz", "Authorization: Bearer hunter2xyzhunter2xyz", "x-api-key=hunter2xyz",
    ])
    def test_secret_named_pairs(self, text: str) -> None:
        assert "hunter2xyz" not in redact(text)

    @pytest.mark.parametrize("text", [
        "max_tokens=100 must be >= 1", "budget: 500 tokens", "a basic check of the keys table", "no url here",
        "top_k must be > 0, got 0", "keys.'sk-1'.rpm must be >= 1",
    ])
    def test_leaves_ordinary_text_alone(self, text: str) -> None:
        assert redact(text) == text

    def test_registered_values_are_masked_anywhere(self) -> None:
        register_secret("Zq9-registered-secret")
        assert redact("connect failed: AUTH Zq9-registered-secret rejected") == f"connect failed: AUTH {MASK} rejected"

    def test_url_secrets_are_registered_in_every_encoding(self) -> None:
        register_url_secrets("redis://:p%40ss-Word-77@host/0?token=tok-Word-77")
        assert redact("auth p@ss-Word-77 / p%40ss-Word-77 / tok-Word-77") == f"auth {MASK} / {MASK} / {MASK}"

    def test_the_basic_auth_form_of_a_url_password_is_registered(self) -> None:
        import base64

        register_url_secrets("http://gw-user:Basic-Pw-4411@upstream:8000/v1")
        token = base64.b64encode(b"gw-user:Basic-Pw-4411").decode()
        assert redact(f"upstream said: bad credentials {token}") == f"upstream said: bad credentials {MASK}"
        assert redact("upstream saw Basic dXNlcjpwYXNzd29yZA== and refused") == f"upstream saw Basic {MASK} and refused"
        assert redact("a Basic understanding") == "a Basic understanding"

    def test_short_values_are_not_registered(self) -> None:
        register_secret("abc")
        assert redact("abc def") == "abc def"


class TestErrorsAndLogs:
    def test_every_ragtrim_error_is_redacted(self) -> None:
        exc = ConfigError("limits.state must be a redis:// URL, got 'redis://:Xy7-hidden@h:1/0?password=Qw8-hidden'")
        assert "Xy7-hidden" not in str(exc) and "Qw8-hidden" not in str(exc)
        assert isinstance(RagtrimError("plain"), RagtrimError) and str(RagtrimError("plain")) == "plain"

    def test_filter_cleans_message_args_and_traceback(self) -> None:
        record = logging.LogRecord("ragtrim", logging.ERROR, __file__, 1, "store %s failed: %s",
                                   ("redis://:Lk3-hidden@h/0", "AUTH failed"), None)
        try:
            raise OSError("cannot reach redis://:Lk3-hidden@h/0")
        except OSError:
            import sys

            record.exc_info = sys.exc_info()
        RedactingFilter().filter(record)
        formatted = logging.Formatter().format(record)
        assert "Lk3-hidden" not in formatted
        assert "redis://:***@h/0" in formatted and "OSError" in formatted

    def test_get_logger_installs_the_filter_once(self, caplog: pytest.LogCaptureFixture) -> None:
        log = get_logger("ragtrim.test-redact")
        get_logger("ragtrim.test-redact")
        assert sum(isinstance(f, RedactingFilter) for f in log.filters) == 1
        with caplog.at_level(logging.WARNING, logger="ragtrim.test-redact"):
            log.warning("url %s", "redis://u:Mn5-hidden@h/0")
        assert "Mn5-hidden" not in caplog.text and "redis://u:***@h/0" in caplog.text


def test_no_module_makes_a_logger_without_the_filter() -> None:
    """Every ragtrim logger comes from get_logger, so none can skip the redaction."""
    from pathlib import Path

    import ragtrim

    root = Path(ragtrim.__file__).parent
    bare = re.compile(r"(?<!redact_logger\()logging\.getLogger\((?!\))")
    offenders = [str(p.relative_to(root)) for p in root.rglob("*.py")
                 if p.name != "redact.py" and bare.search(p.read_text(encoding="utf-8"))]
    assert offenders == []


class TestRedactingStream:
    def test_whole_lines_are_cleaned_however_they_are_written(self) -> None:
        import io

        from ragtrim._util.redact import RedactingStream

        out = io.StringIO()
        stream = RedactingStream(out)
        register_secret("Stream-Secret-9931")
        for piece in ("Traceback: connect to redis://:pw-Stream-", "77@h/0 failed\nkey Stream-Sec", "ret-9931 ",
                      "refused\npartial "):
            stream.write(piece)
        assert out.getvalue() == f"Traceback: connect to redis://:{MASK}@h/0 failed\nkey {MASK} refused\n"
        stream.flush()
        assert out.getvalue().endswith("partial ")

    def test_a_long_line_goes_out_in_cleaned_pieces(self) -> None:
        import io

        from ragtrim._util.redact import RedactingStream

        out = io.StringIO()
        stream = RedactingStream(out, max_line_chars=100)
        stream.write("x" * 150)
        assert out.getvalue() == "x" * 150
        assert stream.encoding == out.encoding  # everything else is the wrapped stream's
