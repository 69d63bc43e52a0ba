"""A request coming in: its body read under a size cap and a deadline (``read_body``), then parsed, checked,
trimmed, counted and encoded (``parse_and_prepare``, which the gateway runs in a worker thread).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from starlette.requests import Request

from ragtrim.serve.config import GatewayConfig, LimitsConfig
from ragtrim.serve.render import Prepared, RequestError
from ragtrim.serve.responses import GatewayError, dumps, loads
from ragtrim.text.tokens import TokenCounter

if TYPE_CHECKING:
    from ragtrim.serve.autotrim import AutoTrim

Prepare = Callable[..., Prepared]  # (body, config, counter, *, auto: AutoTrim | None) -> Prepared


def json_too_deep(obj: Any, limit: int) -> bool:
    """Whether ``obj`` nests objects and arrays more than ``limit`` levels deep (iterative: no recursion limit)."""
    stack: list[tuple[Any, int]] = [(obj, 1)]
    while stack:
        o, depth = stack.pop()
        children = o.values() if isinstance(o, dict) else o if isinstance(o, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


async def read_body(request: Request, lim: LimitsConfig) -> bytearray:
    """The body, refused with 413 past ``limits.max_body_bytes`` (by its Content-Length before reading any of it)
    and with 408 when it has not all arrived within ``limits.body_timeout_s``. Both close the connection, since the
    rest of the body is never read."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.strip().isdigit() and int(declared) > lim.max_body_bytes:
        raise too_large(int(declared), lim.max_body_bytes)
    body = bytearray()  # one buffer (a list of chunks joined at the end held the body twice)
    size = 0
    try:
        async with asyncio.timeout(lim.body_timeout_s):
            async for chunk in request.stream():
                size += len(chunk)
                if size > lim.max_body_bytes:
                    raise too_large(size, lim.max_body_bytes)
                body += chunk
    except TimeoutError:
        raise GatewayError(408, f"the request body did not arrive within {lim.body_timeout_s:g} s "
                           f"(limits.body_timeout_s); {size} bytes came", type_="invalid_request_error",
                           code="request_timeout", outcome="body_timeout", headers={"connection": "close"}) from None
    return body


def too_large(size: int, cap: int) -> GatewayError:
    return GatewayError(413, f"the request body has {'at least ' if size <= cap * 2 else ''}{size} bytes, over "
                        f"this gateway's limit of {cap} (limits.max_body_bytes)", type_="invalid_request_error",
                        code="request_too_large", outcome="too_large", headers={"connection": "close"})


def parse_and_prepare(raw: bytearray, prepare: Prepare, config: GatewayConfig, counter: TokenCounter,
                      auto: AutoTrim | None = None) -> tuple[Prepared, bytes, GatewayError | None]:
    """The request parsed, checked, trimmed and counted; its encoding for the upstream (empty when it is over
    ``max_input_tokens``, which the third item then says). ``auto``: the gateway's cost-based recipe choice, passed
    to ``prepare`` only when given (``trim.scorer = "auto"``)."""
    try:
        body = loads(raw)
    except ValueError:  # orjson also refuses nesting past 1,024 levels here
        raise RequestError("the request body is not valid JSON", code="invalid_json") from None
    depth = config.limits.max_json_depth
    if json_too_deep(body, depth):
        raise RequestError(f"the request body nests objects and arrays more than {depth} levels deep "
                           "(limits.max_json_depth)", code="json_too_deep")
    prepared = prepare(body, config, counter) if auto is None else prepare(body, config, counter, auto=auto)
    too_many = size_error(prepared, config)
    return prepared, b"" if too_many else dumps(prepared.body), too_many


def size_error(p: Prepared, config: GatewayConfig) -> GatewayError | None:
    """The 400 for a request over ``limits.max_input_tokens`` (each input, for embeddings), else None."""
    cap = config.limits.max_input_tokens
    if cap is None:
        return None
    if p.largest_input_tokens is not None:
        if p.largest_input_tokens > cap:
            return GatewayError(
                400, f"an input has {p.largest_input_tokens} tokens, over this gateway's limit of {cap}; "
                "split it", type_="invalid_request_error", param="input", code="context_length_exceeded",
                outcome="too_large")
    elif p.prompt_tokens > cap:
        return GatewayError(
            400, f"this request has {p.prompt_tokens} prompt tokens after trimming "
            f"({p.prompt_tokens_before} before), over this gateway's limit of {cap}; send fewer or shorter "
            "documents or messages", type_="invalid_request_error", param="messages",
            code="context_length_exceeded", outcome="too_large")
    return None
