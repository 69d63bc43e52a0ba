"""Streaming the upstream's answer to the client: the SSE response that always runs its close hook (which frees the
slots and settles the charge), and cancelling a request's work when its client disconnects.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from ragtrim.errors import ServeError
from ragtrim.serve.responses import GatewayError, dumps, usage_of
from ragtrim.serve.upstream import UpstreamError

if TYPE_CHECKING:
    from ragtrim.serve.log import Record


class ClientGone(ServeError):
    """The client disconnected before the response started."""


class BodyBroken(ServeError):
    """Raised by a relayed body when its source failed after the response started: the response ends without its
    last message, so the client sees a broken connection rather than a body that looks complete."""


def event_end(buf: bytes) -> tuple[int, int]:
    """Where the first complete SSE event in ``buf`` ends, and the separator's length (-1 when none is complete).
    Events end with a blank line: LF LF, or CR LF CR LF."""
    lf = buf.find(b"\n\n")
    crlf = buf.find(b"\r\n\r\n")
    if crlf >= 0 and (lf < 0 or crlf < lf):
        return crlf, 4
    return lf, 2


async def relay_events(rec: Record, chunks: AsyncIterator[bytes], client_wants_usage: bool,
                       first_event: Callable[[], None], upstream_done: Callable[[], None]) -> AsyncIterator[bytes]:
    """The upstream's SSE events (``chunks``) to the client one by one as they arrive; the usage chunk is read for
    accounting (into ``rec``) and passed on only when the client asked for it. ``first_event`` is called as the
    first piece arrives; ``upstream_done`` as the ``data: [DONE]`` event passes, before the client sees it (and can
    send its next request), or when the pieces end or fail without one."""
    buf = b""
    first = True
    rec.extra["content_events"] = 0
    try:
        async for piece in then_done(chunks, upstream_done):
            if first:
                first = False
                first_event()
            buf += piece
            out = []
            while True:
                end, sep = event_end(buf)
                if end < 0:
                    break
                event, buf = buf[: end + sep], buf[end + sep:]
                if b"[DONE]" in event[:16]:
                    upstream_done()
                if b'"usage"' in event and b'"choices":[]' in event.replace(b" ", b""):
                    usage = usage_of(event.partition(b"data:")[2])
                    if usage is not None:
                        rec.completion_tokens = usage.get("completion_tokens")
                        rec.extra["usage"] = usage
                    if not client_wants_usage:
                        continue
                elif b'"content"' in event or b'"text"' in event:
                    rec.extra["content_events"] += 1
                out.append(event)
            if out:
                yield b"".join(out)
    except UpstreamError as exc:
        # Headers are gone already: tell the client in the stream, OpenAI-style, and end it.
        rec.outcome, rec.error, rec.error_code = "upstream_error", str(exc), "upstream_stream_error"
        err = {"error": {"message": f"upstream failed mid-stream: {exc}", "type": "upstream_error",
                         "param": None, "code": "upstream_stream_error"}}
        yield buf + b"data: " + dumps(err) + b"\n\n"
        return
    if buf:
        yield buf


async def then_done(chunks: AsyncIterator[bytes], done: Callable[[], None]) -> AsyncIterator[bytes]:
    """``chunks``, and ``done()`` once they end or fail."""
    try:
        async for piece in chunks:
            yield piece
    finally:
        done()


async def disconnected(receive: Receive) -> None:
    """Return when the client has gone (the ASGI ``http.disconnect`` message); other messages are ignored."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


async def until_disconnect(receive: Receive, work: Awaitable[Response]) -> Response:
    """Run ``work`` but cancel it when the client disconnects (queued or waiting on a non-streaming upstream), so
    a gone client frees its slot at once."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(disconnected(receive))
    try:
        done, _ = await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        watcher.cancel()
        raise
    if task in done:
        watcher.cancel()
        return task.result()
    task.cancel()
    try:
        result = await task
    except asyncio.CancelledError:
        raise ClientGone() from None
    except GatewayError:
        raise ClientGone() from None
    if isinstance(result, RelayStream):  # finished just as the client left: close it properly
        await result.close()
    raise ClientGone()


class RelayStream(Response):
    """A response relayed piece by piece as the upstream sends it, which always runs ``on_close`` (client gone,
    upstream done or error) to release the slots and settle the token charge: an SSE stream, or (with another
    ``media_type`` and, when the upstream declared it, ``content_length``) a large answer passed through without
    being held whole."""

    media_type = "text/event-stream"

    def __init__(self, events: AsyncIterator[bytes], *, headers: dict[str, str],
                 on_close: Callable[[bool], Awaitable[None]], media_type: str = "text/event-stream",
                 content_length: int | None = None) -> None:
        extra = {"cache-control": "no-cache"} if media_type == "text/event-stream" else {}
        super().__init__(content=None, status_code=200, headers={**headers, **extra}, media_type=media_type)
        self.raw_headers = [(k, v) for k, v in self.raw_headers if k != b"content-length"]
        self.content_length = content_length
        if content_length is not None:
            self.raw_headers.append((b"content-length", str(content_length).encode()))
        self.events = events
        self.on_close = on_close
        self._closed = False
        self.client_gone = False

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            aclose = getattr(self.events, "aclose", None)
            if aclose is not None:
                await aclose()
            await self.on_close(self.client_gone)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # HTTP/1.0 has no chunked framing, and ASGI servers frame a body without a length as chunked: an HTTP/1.0
        # client gets the whole stream as one body with a Content-Length once it is complete.
        one_body = scope.get("http_version") == "1.0" and self.content_length is None
        relay = asyncio.ensure_future(self._relay_whole(send) if one_body else self._relay(send))
        watcher = asyncio.ensure_future(disconnected(receive))
        try:
            done, _ = await asyncio.wait({relay, watcher}, return_when=asyncio.FIRST_COMPLETED)
            if relay in done:
                watcher.cancel()
                relay.result()
            else:
                self.client_gone = True
                relay.cancel()
                # The relay's own error (a send to a closed socket) is moot once the client has gone.
                await asyncio.gather(relay, return_exceptions=True)
        finally:
            watcher.cancel()
            if not relay.done():
                relay.cancel()
            await self._close_shielded()

    async def _close_shielded(self) -> None:
        await asyncio.shield(self.close())

    async def _relay_whole(self, send: Send) -> None:
        try:
            body = b"".join([chunk async for chunk in self.events])
        except BodyBroken:
            return  # nothing sent yet: the server answers 500 and closes
        headers = [*self.raw_headers, (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": self.status_code, "headers": headers})
        await send({"type": "http.response.body", "body": body, "more_body": False})

    async def _relay(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        try:
            async for chunk in self.events:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        except BodyBroken:
            return  # no last message: the server closes the connection, and the client sees it broken
        await send({"type": "http.response.body", "body": b"", "more_body": False})
