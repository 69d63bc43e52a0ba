"""One exit for secrets: every URL, key and password that may reach an error message, a log line, an HTTP response or
a CLI message passes through ``redact``, as requests and SQLAlchemy mask a URL's password.

Three layers, each enough for what it covers:

- URLs anywhere in a text: the password of ``scheme://user:password@host`` and the value of every query parameter
  whose name is a secret's (``?password=``, ``token``, ``api_key``, ...);
- ``name=value`` and ``name: value`` pairs outside URLs whose name is a secret's (``password=hunter2``);
- values the process knows to be secret (``register_secret``): an API key from the gateway's config or a password
  taken from a configured URL is masked wherever it appears, whatever a dependency wrapped around it.

``RagtrimError`` passes its message through ``redact``, and every ragtrim logger (``get_logger``) carries
``RedactingFilter``, so neither an exception nor a log line needs to remember to call it. A long-running process
(``ragtrim serve``) also wraps its stdout and stderr in ``RedactingStream``, so what other libraries print (a
traceback from asyncio, a thread's uncaught exception, a warning) is cleaned too.
"""

from __future__ import annotations

import base64
import logging
import re
import threading
from typing import Any, TextIO
from urllib.parse import parse_qsl, quote, unquote, urlsplit

MASK = "***"

# Query and pair names whose value is a secret (compared lower-cased, "-" read as "_").
SECRET_NAMES = frozenset({
    "password", "passwd", "pass", "pwd", "secret", "client_secret", "token", "access_token", "refresh_token",
    "id_token", "auth", "auth_token", "authorization", "api_key", "apikey", "key", "x_api_key", "credential",
    "credentials", "sig", "signature", "x_amz_signature", "x_amz_credential", "x_amz_security_token",
    "session_token", "bearer_token", "fallback_api_key", "private_key",
})

# Shorter values are not registered: masking every "abc" in a message would garble it, and a URL's or a pair's own
# layer still masks a short password where it appears as one.
MIN_REGISTERED_LENGTH = 6

_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>`]+")
# name=value / name: value / "name": "value" outside URLs; the value runs to whitespace, a quote, a comma or a
# closing bracket.
_PAIR = re.compile(
    r"(?P<name>[A-Za-z_][A-Za-z0-9_\-]*)(?P<sep>['\"]?\s*[=:]\s*['\"]?)(?P<value>[^\s'\",;)}\]&]+)")
_AUTH_HEADER = re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=\-]{8,}")
# "Basic <base64>" as the header writes it (case and a base64 character required: "a basic understanding" stays).
_BASIC_AUTH = re.compile(r"\b(Basic)\s+(?=[A-Za-z0-9+/]*[0-9+/=])[A-Za-z0-9+/]{8,}={0,2}")

_lock = threading.Lock()
_registered: frozenset[str] = frozenset()
_registered_pattern: re.Pattern[str] | None = None


def _is_secret_name(name: str) -> bool:
    return name.lower().replace("-", "_") in SECRET_NAMES


def register_secret(value: str | None) -> None:
    """Mask ``value`` wherever it appears in what ``redact`` cleans from now on (for the life of the process)."""
    global _registered, _registered_pattern
    if not isinstance(value, str) or len(value) < MIN_REGISTERED_LENGTH:
        return
    forms = {value, quote(value, safe=""), unquote(value)} - {""}
    with _lock:
        if forms <= _registered:
            return
        _registered = _registered | {f for f in forms if len(f) >= MIN_REGISTERED_LENGTH}
        # Longest first, so a secret that contains another is masked whole.
        _registered_pattern = re.compile("|".join(re.escape(s) for s in sorted(_registered, key=len, reverse=True)))


def register_url_secrets(url: str | None) -> None:
    """Register the password and the secret query values of ``url`` (a Redis or HTTP URL from a config), and the
    ``Authorization: Basic`` token an HTTP client makes of its user and password (an upstream that quotes the
    header it was sent would otherwise hand the password on in base64)."""
    if not isinstance(url, str) or "://" not in url:
        return
    try:
        parts = urlsplit(url)
        password = parts.password
        username = parts.username
    except ValueError:
        return
    register_secret(password)
    if password is not None:
        pair = f"{unquote(username or '')}:{unquote(password)}".encode("latin-1", "replace")
        register_secret(base64.b64encode(pair).decode())
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if _is_secret_name(name):
            register_secret(value)


def redact_url(url: str) -> str:
    """``url`` with its password and its secret query values replaced by ``***``. An unparsable URL with userinfo
    is masked from its userinfo on, since nothing in it can be trusted to be clean; one without keeps its host
    and path (``http://host:port`` in a message stays as it is) and has its secret query values masked."""
    try:
        parts = urlsplit(url)
        has_password = parts.password is not None
        hostname, port = parts.hostname, parts.port
    except ValueError:
        head, sep, rest = url.partition("://")
        if "@" not in re.split(r"[/?#]", rest, maxsplit=1)[0]:  # no userinfo: "http://host:port" is a placeholder
            return _mask_query_values(url)
        return f"{head}{sep}{MASK}" if sep else MASK
    netloc = parts.netloc
    if has_password or "@" in netloc:
        userinfo, _, hostport = netloc.rpartition("@")
        user = userinfo.split(":", 1)[0] if has_password else userinfo
        host = hostname or ""
        if ":" in host:
            host = f"[{host}]"
        if port is not None:
            host = f"{host}:{port}"
        elif hostport.endswith(":"):
            host += ":"
        netloc = f"{user}:{MASK}@{host}" if has_password else f"{user}@{host}"
    query = _masked_query(parts.query) if parts.query else ""
    return (f"{parts.scheme}://{netloc}{parts.path}" + (f"?{query}" if query else "")
            + (f"#{parts.fragment}" if parts.fragment else ""))


def _masked_query(query: str) -> str:
    fields = []
    for field in query.split("&"):
        name, eq, _ = field.partition("=")
        fields.append(f"{name}={MASK}" if eq and _is_secret_name(unquote(name)) else field)
    return "&".join(fields)


def _mask_query_values(url: str) -> str:
    base, sep, rest = url.partition("?")
    if not sep:
        return url
    query, hash_, fragment = rest.partition("#")
    return f"{base}?{_masked_query(query)}{hash_}{fragment}"


def _mask_pair(m: re.Match[str]) -> str:
    if not _is_secret_name(m.group("name")) or m.group("value") == MASK:
        return m.group(0)
    return f"{m.group('name')}{m.group('sep')}{MASK}"


def redact(value: object) -> str:
    """``str(value)`` with every secret it may carry masked (see the module docstring for what counts)."""
    text = value if isinstance(value, str) else str(value)
    pattern = _registered_pattern
    if pattern is not None:
        text = pattern.sub(MASK, text)
    if "://" in text:
        text = _URL.sub(lambda m: redact_url(m.group(0)), text)
    if " " in text:
        text = _AUTH_HEADER.sub(lambda m: f"{m.group(1)} {MASK}", text)
        text = _BASIC_AUTH.sub(lambda m: f"{m.group(1)} {MASK}", text)
    if "=" in text or ":" in text:
        text = _PAIR.sub(_mask_pair, text)
    return text


class RedactingFilter(logging.Filter):
    """Cleans a record's message, arguments, traceback and stack before any handler formats it."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact(message)
        if clean != message or record.args:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


_FILTER = RedactingFilter()


def get_logger(name: str) -> logging.Logger:
    """The logger ``name`` with the redacting filter on it: the only way ragtrim's modules get a logger."""
    log = logging.getLogger(name)
    if _FILTER not in log.filters:
        log.addFilter(_FILTER)
    return log


def redact_logger(log: logging.Logger) -> None:
    """Put the redacting filter on a logger ragtrim does not own (uvicorn's, in the gateway)."""
    if _FILTER not in log.filters:
        log.addFilter(_FILTER)


class RedactingStream:
    """A text stream that writes whole lines of what it is given, each through ``redact``: the last guard of a
    process's stdout or stderr, for everything that reaches them without a ragtrim logger (uvicorn's and asyncio's
    log lines, tracebacks printed by ``sys.excepthook`` or ``threading.excepthook``, warnings). A secret never spans
    lines, so cleaning line by line misses none; a line longer than ``max_line_chars`` goes out in cleaned pieces."""

    def __init__(self, stream: TextIO, *, max_line_chars: int = 1 << 16) -> None:
        self.stream = stream
        self.max_line_chars = max_line_chars
        self._pending = ""
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        with self._lock:
            pending = self._pending + text
            end = pending.rfind("\n") + 1
            if end:
                self.stream.write("".join(redact(line) for line in pending[:end].splitlines(keepends=True)))
                pending = pending[end:]
            if len(pending) > self.max_line_chars:
                self.stream.write(redact(pending))
                pending = ""
            self._pending = pending
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        with self._lock:
            if self._pending:
                self.stream.write(redact(self._pending))
                self._pending = ""
        self.stream.flush()

    def __getattr__(self, name: str) -> Any:  # fileno, isatty, encoding, ...: the wrapped stream's
        return getattr(self.stream, name)
