"""Raw HTTP for the hostile-requests benchmark: one connection per request, so that each hostile shape is exact
(a declared length the body never reaches, a body sent in pieces, HTTP/1.0), and the answers read back as status,
headers, body and error code (``Answer``). ``read_counting`` reads a large answer without keeping it."""

from __future__ import annotations

import json
import select
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

CHAT = "/v1/chat/completions"
KEY = "sk-bench"


@dataclass(slots=True)
class Answer:
    cls: str
    request_id: str
    status: int               # 0: no answer (connection closed or reset before a response)
    code: str | None
    openai_error: bool        # {"error": {"message", "type", "param", "code"}} with a string code
    elapsed_ms: float
    note: str = ""



def raw_request(port: int, head: bytes, pieces: Sequence[bytes] = (), *, gap_s: float = 0.0,
                timeout_s: float = 60.0) -> tuple[int, dict[str, str], bytes]:
    """Send ``head`` then each piece (``gap_s`` apart), stopping early when the server has answered; read the answer
    until the server closes. Returns status (0 when none came), headers and body."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as s:
        s.sendall(head)
        for piece in pieces:
            if select.select([s], [], [], gap_s)[0]:
                break  # an early answer (413, 408): stop sending, as a client reading its socket would
            try:
                s.sendall(piece)
            except (BrokenPipeError, ConnectionResetError):
                break
        data = bytearray()
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline:
                chunk = s.recv(1 << 20)
                if not chunk:
                    break
                data += chunk
        except (TimeoutError, ConnectionResetError):
            pass
    return parse_response(bytes(data))


def parse_response(data: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    if not lines[0].startswith("HTTP/"):
        return 0, {}, b""
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    if headers.get("transfer-encoding") == "chunked":
        body = dechunk(body)
    return int(lines[0].split()[1]), headers, body


def dechunk(body: bytes) -> bytes:
    out, rest = b"", body
    while rest:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out, rest = out + rest[:size], rest[size + 2:]
    return out


def request_head(path: str, request_id: str, *, length: int | None, method: str = "POST", key: str = KEY,
                 version: str = "1.1") -> bytes:
    lines = [f"{method} {path} HTTP/{version}", "host: 127.0.0.1", "content-type: application/json",
             f"authorization: Bearer {key}", f"x-request-id: {request_id}", "connection: close"]
    lines.append(f"content-length: {length}" if length is not None else "transfer-encoding: chunked")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def error_code(status: int, headers: dict[str, str], body: bytes) -> tuple[str | None, bool]:
    """The answer's error code, and whether it is an OpenAI-shaped error with a string code."""
    if not headers.get("content-type", "").startswith("application/json"):
        return None, False
    try:
        err = json.loads(body).get("error")
    except (ValueError, AttributeError):
        return None, False
    if not isinstance(err, dict):
        return None, False
    code = err.get("code")
    shaped = {"message", "type", "param", "code"} <= set(err) and isinstance(code, str) and bool(code)
    return (code if isinstance(code, str) else None), shaped


def send(port: int, cls: str, request_id: str, head: bytes, pieces: Sequence[bytes] = (), *, gap_s: float = 0.0,
         timeout_s: float = 60.0, note: Callable[[int, dict[str, str], bytes], str] | None = None) -> Answer:
    t0 = time.perf_counter()
    try:
        status, headers, body = raw_request(port, head, pieces, gap_s=gap_s, timeout_s=timeout_s)
    except OSError as exc:
        return Answer(cls, request_id, 0, None, False, (time.perf_counter() - t0) * 1000, f"{type(exc).__name__}")
    code, shaped = error_code(status, headers, body)
    return Answer(cls, request_id, status, code, shaped, (time.perf_counter() - t0) * 1000,
                  note(status, headers, body) if note else "")


def json_request(port: int, cls: str, request_id: str, body: bytes, *, path: str = CHAT, key: str = KEY,
                 timeout_s: float = 60.0, note: Callable[[int, dict[str, str], bytes], str] | None = None) -> Answer:
    return send(port, cls, request_id, request_head(path, request_id, length=len(body), key=key) + body,
                timeout_s=timeout_s, note=note)


def read_counting(port: int, cls: str, request_id: str, request: bytes, *, timeout_s: float = 120.0,
                  keep_tail: int = 4096) -> Answer:
    """Send ``request`` and read the answer as it comes, keeping only its head and last ``keep_tail`` bytes (a
    29 MB answer, four at once, must not cost the client its memory). The note gives the body's size and tail."""
    t0 = time.perf_counter()
    head = b""
    size = 0
    tail = b""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as s:
            s.sendall(request)
            while True:
                chunk = s.recv(1 << 20)
                if not chunk:
                    break
                if b"\r\n\r\n" not in head:
                    head += chunk
                    if b"\r\n\r\n" in head:
                        head, _, chunk = head.partition(b"\r\n\r\n")
                        head += b"\r\n\r\n"
                    else:
                        continue
                size += len(chunk)
                tail = (tail + chunk)[-keep_tail:]
    except OSError as exc:
        return Answer(cls, request_id, 0, None, False, (time.perf_counter() - t0) * 1000, type(exc).__name__)
    status, headers, _ = parse_response(head)
    code, shaped = error_code(status, headers, tail) if status != 200 else (None, False)
    chunked = headers.get("transfer-encoding") == "chunked"
    return Answer(cls, request_id, status, code, shaped, (time.perf_counter() - t0) * 1000,
                  f"body_bytes={size}{' (chunked framing included)' if chunked else ''}; "
                  f"usage_at_end={b'usage' in tail}")
