"""``ragtrim serve``: an OpenAI-compatible gateway that trims RAG prompts in flight and enforces operating limits.

Needs the ``serve`` extra (``pip install 'ragtrim[serve]'``); see docs/serve.md.
"""

from __future__ import annotations

from ragtrim.errors import require

for _package in ("starlette", "uvicorn", "aiohttp", "prometheus_client"):
    require(_package, "serve", "ragtrim serve")

from ragtrim.serve.app import Gateway, create_app
from ragtrim.serve.config import GatewayConfig, load_config, parse_config

__all__ = ["Gateway", "GatewayConfig", "create_app", "load_config", "parse_config"]
