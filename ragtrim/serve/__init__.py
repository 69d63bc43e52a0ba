"""``ragtrim serve``: an OpenAI-compatible gateway that trims RAG prompts in flight and enforces operating limits.

Needs the ``serve`` extra (``pip install 'ragtrim[serve]'``); see docs/serve.md. ``ragtrim.serve.app.create_app``
builds the ASGI app from a ``ragtrim.serve.config.GatewayConfig`` (``load_config`` reads the TOML file); the CLI's
arguments are in ``ragtrim.serve.cli``.
"""
