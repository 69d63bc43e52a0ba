"""The model server behind the gateway: a pooled httpx client for the primary URL and an optional fallback."""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from ragtrim.serve.config import UpstreamConfig


class Upstream:
    """One pooled ``httpx.AsyncClient`` shared by the primary and fallback URLs; created on first use inside the
    server's event loop."""

    def __init__(self, config: UpstreamConfig) -> None:
        self.config = config
        self._client: httpx.AsyncClient | None = None

    @property
    def has_fallback(self) -> bool:
        return bool(self.config.fallback_url)

    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            c = self.config
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(c.timeout_s, connect=c.connect_timeout_s),
                limits=httpx.Limits(max_connections=c.max_connections, max_keepalive_connections=c.max_connections),
            )
        return self._client

    def _target(self, fallback: bool) -> tuple[str, str]:
        c = self.config
        return (c.fallback_url, c.fallback_api_key) if fallback else (c.url, c.api_key)

    def build(self, method: str, path: str, *, content: bytes | None = None, fallback: bool = False,
              extra_headers: Mapping[str, str] | None = None) -> httpx.Request:
        base, key = self._target(fallback)
        headers = {"content-type": "application/json"} if content is not None else {}
        if key:
            headers["authorization"] = f"Bearer {key}"
        if extra_headers:
            headers.update(extra_headers)
        return self.client().build_request(method, base + path, content=content, headers=headers)

    async def send(self, request: httpx.Request, *, stream: bool) -> httpx.Response:
        return await self.client().send(request, stream=stream)

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None
