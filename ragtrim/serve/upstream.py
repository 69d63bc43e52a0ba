"""The model server behind the gateway: one pooled aiohttp session for the primary URL and the optional fallback.

aiohttp rather than httpx on the hot path: a small non-streaming request costs several times less client CPU with
aiohttp (``ragtrim-bench serve upstream_client``, benchmarks/results/serve/upstream_client.json), and the gateway's
throughput is bounded by its CPU per request.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any, Literal

import aiohttp

from ragtrim.errors import ServeError
from ragtrim.serve.config import UpstreamConfig

UpstreamErrorKind = Literal["connect", "timeout", "protocol"]


class UpstreamError(ServeError):
    """The upstream could not be reached (``connect``), was too slow (``timeout``) or broke the protocol."""

    def __init__(self, kind: UpstreamErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def _wrap(exc: BaseException) -> UpstreamError:
    # A connect timeout means the request never reached the upstream, so a fallback may take it.
    connect_timeout = getattr(aiohttp, "ConnectionTimeoutError", ())
    if isinstance(exc, (aiohttp.ClientConnectorError, connect_timeout, aiohttp.ServerDisconnectedError, ConnectionError)):
        return UpstreamError("connect", f"{type(exc).__name__}: {exc}")
    if isinstance(exc, (asyncio.TimeoutError, aiohttp.ServerTimeoutError)):
        return UpstreamError("timeout", f"{type(exc).__name__}: {exc}")
    return UpstreamError("protocol", f"{type(exc).__name__}: {exc}")


class UpstreamResponse:
    """An upstream response whose body is read (``read``) or streamed (``chunks``) by the gateway, then closed."""

    def __init__(self, raw: aiohttp.ClientResponse) -> None:
        self._raw = raw
        self.status = raw.status
        self.content_type = raw.headers.get("content-type", "application/json")

    @property
    def content_length(self) -> int | None:
        """The body's length in bytes as the gateway will read it (None: not declared, or compressed on the wire,
        which aiohttp undoes)."""
        if self._raw.headers.get("content-encoding", "identity").lower() != "identity":
            return None
        return self._raw.content_length

    async def read(self, limit: int | None = None) -> bytes:
        """The whole body; with ``limit``, at most its first ``limit`` bytes (the rest is not read)."""
        try:
            if limit is None:
                return await self._raw.read()
            data = bytearray()
            async for piece in self._raw.content.iter_any():
                data += piece[: limit - len(data)]
                if len(data) >= limit:
                    break
            return bytes(data)
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise _wrap(exc) from exc
        finally:
            if limit is None:
                self._raw.release()
            else:
                self._raw.close()  # the connection may hold an unread rest: not reused

    async def chunks(self) -> AsyncIterator[bytes]:
        """Bytes as they arrive from the socket (no buffering beyond what one read returns)."""
        try:
            async for data in self._raw.content.iter_any():
                yield data
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise _wrap(exc) from exc

    async def close(self) -> None:
        self._raw.close()


class Upstream:
    """Created on first use inside the server's event loop; ``close`` at shutdown."""

    def __init__(self, config: UpstreamConfig) -> None:
        self.config = config
        self._session: aiohttp.ClientSession | None = None

    @property
    def has_fallback(self) -> bool:
        return bool(self.config.fallback_url)

    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            c = self.config
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=c.max_connections, limit_per_host=c.max_connections,
                                               keepalive_timeout=60),
                timeout=aiohttp.ClientTimeout(total=None, connect=c.connect_timeout_s, sock_read=c.timeout_s),
                skip_auto_headers=("User-Agent",),
            )
        return self._session

    async def request(self, method: str, path: str, *, content: bytes | None = None, fallback: bool = False,
                      headers: Mapping[str, str] | None = None) -> UpstreamResponse:
        c = self.config
        base, key = (c.fallback_url, c.fallback_api_key) if fallback else (c.url, c.api_key)
        hdrs: dict[str, Any] = {"content-type": "application/json"} if content is not None else {}
        if key:
            hdrs["authorization"] = f"Bearer {key}"
        if headers:
            hdrs.update(headers)
        try:
            raw = await self.session().request(method, base + path, data=content, headers=hdrs)
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise _wrap(exc) from exc
        return UpstreamResponse(raw)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
