"""Secrets of the gateway config written as references: ``env:NAME`` (an environment variable) or ``file:PATH`` (a
key file, as container platforms mount them), resolved as the config is read, so that no key needs to sit in the TOML.

A reference may stand for every value that is or holds a secret (``SECRET_FIELDS``) and for a client key, the
table name of ``[keys."env:TEAM_A_KEY"]``. A missing variable or an unreadable or empty file is a ConfigError that
names the config key and the variable or file, never a secret; what a reference resolves to is registered with the
redaction before anything else can quote it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ragtrim._util.redact import register_secret, register_url_secrets
from ragtrim.errors import ConfigError

SECRET_FIELDS: dict[str, tuple[str, ...]] = {
    "upstream": ("url", "fallback_url", "api_key", "fallback_api_key"),
    "limits": ("state",), "trim": ("vector_store",), "metrics": ("bearer_token",)}
"""The config's values that are or may hold a secret (a key, a token, a URL with a password), by section."""
URL_FIELDS = frozenset({"url", "fallback_url", "state", "vector_store"})
PREFIXES = ("env:", "file:")


def is_reference(value: object) -> bool:
    return isinstance(value, str) and value.startswith(PREFIXES)


def resolve(name: str, ref: str, *, base_dir: Path | None = None) -> str:
    """The secret ``ref`` stands for; ``name`` is the config key it was written under (for the error)."""
    kind, _, target = ref.partition(":")
    fix = f"or write the value itself under {name}"
    if not target.strip():
        raise ConfigError(f"{name} (written as {ref!r}) names no {'variable' if kind == 'env' else 'file'}: write "
                          f"{kind}:{'NAME' if kind == 'env' else '/path/to/file'}")
    if kind == "env":
        value = os.environ.get(target)
        if value is None:
            raise ConfigError(f"{name} (written as {ref!r}): the environment variable {target} is not set; set it "
                              f"in the gateway's environment, {fix}")
        where = f"the environment variable {target}"
    else:
        path = Path(target).expanduser()
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        try:
            value = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
            raise ConfigError(f"{name} (written as {ref!r}): cannot read the key file {str(path)!r} ({why}); make "
                              f"it readable by the gateway's user, {fix}") from None
        where = f"the key file {str(path)!r}"
    value = value.strip()  # a key file ends with a newline; a secret never starts or ends with a space
    register_url_secrets(value) if name.rpartition(".")[2] in URL_FIELDS else register_secret(value)
    if not value:
        raise ConfigError(f"{name} (written as {ref!r}): {where} is empty")
    return value


def resolve_references(raw: Mapping[str, Any], *, base_dir: Path | None = None) -> dict[str, Any]:
    """``raw`` (a parsed gateway TOML) with every reference in a secret field, and every referenced client key,
    replaced by what it stands for. Nothing else changes; the input is not modified."""
    out = dict(raw)
    for section, names in SECRET_FIELDS.items():
        t = raw.get(section)
        if isinstance(t, Mapping) and any(is_reference(t.get(n)) for n in names):
            out[section] = {k: resolve(f"{section}.{k}", v, base_dir=base_dir)
                            if k in names and is_reference(v) else v for k, v in t.items()}
    keys = raw.get("keys")
    if isinstance(keys, Mapping) and any(is_reference(k) for k in keys):
        resolved: dict[str, Any] = {}
        for position, (k, v) in enumerate(keys.items(), 1):
            key = resolve(f"keys[{position}]", k, base_dir=base_dir) if is_reference(k) else k
            if key in resolved:
                raise ConfigError(f"keys[{position}] (written as {k!r}) is a key already listed under [keys]; list "
                                  "each key once")
            resolved[key] = v
        out["keys"] = resolved
    return out
