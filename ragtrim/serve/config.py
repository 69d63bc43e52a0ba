"""The gateway's TOML config as typed, frozen dataclasses; every error is a ConfigError that names the key.

``load_config(path)`` reads a file, ``parse_config(mapping)`` a dict (tests build configs this way).
"""

from __future__ import annotations

import hashlib
import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from ragtrim._util.redact import get_logger, redact_url, register_secret, register_url_secrets
from ragtrim.api import ScorerChoice
from ragtrim.errors import ConfigError
from ragtrim.serve.secret_refs import SECRET_FIELDS, URL_FIELDS, is_reference, resolve_references

logger = get_logger(__name__)

ScorerName = ScorerChoice


@dataclass(frozen=True, slots=True)
class UpstreamConfig:
    url: str
    fallback_url: str = ""
    tokenizer: str = "cl100k_base"
    api_key: str = ""
    fallback_api_key: str = ""
    timeout_s: float = 600.0
    connect_timeout_s: float = 5.0
    max_connections: int = 1000


@dataclass(frozen=True, slots=True)
class TrimConfig:
    """``budget``: None (documents rendered, not trimmed), ``"lossless"`` (HTML cleaned and duplicate documents
    dropped, nothing else: ``ragtrim.api.lossless_pipeline``), a share in (0, 1] of the documents' tokens (float) or
    a token count (int >= 1). ``vector_store``: where model scorers keep passage vectors (``"default"``: SQLite in
    ragtrim's cache folder, unless ``$RAGTRIM_VECTOR_STORE`` says otherwise; ``"off"``; a file path; a
    ``redis://`` URL, which replicas share), at most ``vector_store_max_mb`` MiB (None: 256). ``keep``: retention
    mode, the probability in (0, 1) that the answer survives (``trim(keep=...)``); ``budget`` is then a cap."""

    budget: float | int | Literal["lossless"] | None = None
    keep: float | None = None
    history_turns: int = 0
    scorer: ScorerName = "bm25"
    context_tag: str = "context"
    vector_store: str = "default"
    vector_store_max_mb: float | None = None
    prefill_ms_per_token: float | None = None  # scorer "auto": the upstream's cost until learned (serve.autotrim)


@dataclass(frozen=True, slots=True)
class LimitsConfig:
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    long_request_tokens: int | None = None
    long_concurrency: int = 1
    queue_timeout_s: float = 10.0
    max_queued: int = 1000
    max_queued_per_user: int | None = None
    default_org_concurrency: int | None = None
    state: str = "memory"
    fail_open: bool = True
    state_timeout_s: float = 0.5
    state_breaker_s: float = 2.0
    window_s: float = 60.0
    max_body_bytes: int = 16 * 1024 * 1024
    body_timeout_s: float = 30.0
    max_json_depth: int = 64
    max_n: int | None = 16


@dataclass(frozen=True, slots=True)
class MetricsConfig:
    """``bearer_token``: when set, ``GET /metrics`` needs ``Authorization: Bearer <token>``."""

    bearer_token: str = ""


@dataclass(frozen=True, slots=True)
class KeyConfig:
    key: str
    user: str
    org: str
    rpm: int | None = None
    tpm: int | None = None
    concurrency: int | None = None


@dataclass(frozen=True, slots=True)
class OrgConfig:
    name: str
    concurrency: int | None = None


@dataclass(frozen=True, slots=True)
class LogConfig:
    path: str = ""
    log_text: bool = False
    log_request: bool = False


@dataclass(frozen=True, slots=True)
class ServeConfig:
    """``drain_timeout_s``: on SIGTERM or SIGINT, how long requests in flight may take to finish (new ones get 503)
    before each unfinished stream is ended with an error event and ``[DONE]`` (``ragtrim.serve.drain``).
    ``freeze_gc``: after the warm-up, move every object the start made (modules, models, tokenizers) out of the
    cyclic garbage collector's reach (``gc.freeze``), so that no full collection walks them in the middle of a
    request; undone when the gateway stops."""

    drain_timeout_s: float = 25.0  # under Kubernetes' default 30 s grace period, so the cut streams end cleanly
    freeze_gc: bool = True


DRAIN_TIMEOUT_DEFAULT_S = 25.0
DRAIN_TIMEOUT_MAX_S = 3600.0


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    upstream: UpstreamConfig
    trim: TrimConfig = field(default_factory=TrimConfig)
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    keys: Mapping[str, KeyConfig] = field(default_factory=dict)
    orgs: Mapping[str, OrgConfig] = field(default_factory=dict)
    log: LogConfig = field(default_factory=LogConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    serve: ServeConfig = field(default_factory=ServeConfig)

    @property
    def open_mode(self) -> bool:
        """No ``[keys]``: every request is admitted as user ``anonymous`` of org ``default``."""
        return not self.keys

    def org_concurrency(self, org: str) -> int | None:
        o = self.orgs.get(org)
        if o is not None and o.concurrency is not None:
            return o.concurrency
        return self.limits.default_org_concurrency


_SECTIONS = ("upstream", "trim", "limits", "keys", "orgs", "log", "metrics", "serve")
RESTART_ONLY = ("upstream", "log", "limits.state", "limits.window_s", "limits.state_timeout_s",
                "limits.state_breaker_s", "trim.vector_store", "trim.vector_store_max_mb", "serve.freeze_gc")
"""Config keys a reload cannot change in a running process (a new client, store, tokenizer or log file; the
garbage collector's freeze, made once after the warm-up)."""


def restart_only_changes(old: GatewayConfig, new: GatewayConfig) -> list[str]:
    """The keys of ``RESTART_ONLY`` whose values differ between two configs."""
    changed = []
    for name in RESTART_ONLY:
        section, _, key = name.partition(".")
        a, b = getattr(old, section), getattr(new, section)
        if (getattr(a, key) != getattr(b, key)) if key else a != b:
            changed.append(name)
    return changed


def load_config(path: str | Path) -> GatewayConfig:
    """Read and validate a gateway TOML file."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read gateway config {str(p)!r}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(f"gateway config {str(p)!r} is not valid UTF-8: byte 0x{data[exc.start]:02x} on line "
                          f"{line} (TOML files are UTF-8; save it as UTF-8)") from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"gateway config {str(p)!r} is not valid TOML: {exc}") from None
    return parse_config(raw, base_dir=p.parent)


def parse_config(raw: Mapping[str, Any], *, base_dir: Path | None = None) -> GatewayConfig:
    """Validate a parsed TOML document (a mapping) into a ``GatewayConfig``. Secrets written as ``env:NAME`` or
    ``file:PATH`` are resolved first (``ragtrim.serve.secret_refs``; a relative path is read from ``base_dir``)."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"gateway config must be a table, got {type(raw).__name__}")
    _register_raw_secrets(raw)  # first, so that no error about a bad value can quote a secret
    raw = resolve_references(raw, base_dir=base_dir)
    _no_unknown("", raw, _SECTIONS)
    upstream = _upstream(_table(raw, "upstream", required=True))
    trim = _trim(_table(raw, "trim"))
    limits = _limits(_table(raw, "limits"))
    orgs = {name: _org(name, _sub(f"orgs.{name}", t)) for name, t in _table(raw, "orgs").items()}
    keys = {k: _key(i, k, t) for i, (k, t) in enumerate(_table(raw, "keys").items(), 1)}
    log = _log(_table(raw, "log"))
    metrics = _metrics(_table(raw, "metrics"))
    serve = _serve(_table(raw, "serve"))
    config = GatewayConfig(upstream=upstream, trim=trim, limits=limits, keys=keys, orgs=orgs, log=log,
                           metrics=metrics, serve=serve)
    _register_secrets(config)
    from ragtrim.serve.limiter import shared_redis_problem

    problem = shared_redis_problem(limits.state, trim.vector_store)
    if problem is not None:
        raise ConfigError(problem)
    return config


def _register_raw_secrets(raw: Mapping[str, Any]) -> None:
    """Every string of the config that is or holds a secret, registered before any check can quote it (a SIGHUP
    reload parses a new file whose keys the running process has not seen)."""
    for section, names in SECRET_FIELDS.items():
        t = raw.get(section)
        if isinstance(t, Mapping):
            for name in names:
                value = t.get(name)
                if isinstance(value, str) and not is_reference(value):  # a reference is a name, not a secret
                    register_url_secrets(value) if name in URL_FIELDS else register_secret(value)
    keys = raw.get("keys")
    if isinstance(keys, Mapping):
        for key in keys:
            if not is_reference(key):
                register_secret(str(key))




def _register_secrets(c: GatewayConfig) -> None:
    """Every key, token and URL password of the config is masked in any error, log line or response from now on."""
    for url in (c.upstream.url, c.upstream.fallback_url, c.limits.state, c.trim.vector_store):
        register_url_secrets(url)
    for secret in (c.upstream.api_key, c.upstream.fallback_api_key, c.metrics.bearer_token, *c.keys):
        register_secret(secret)


# -- sections -------------------------------------------------------------------------------------------------------
def _upstream(t: Mapping[str, Any]) -> UpstreamConfig:
    _no_unknown("upstream", t, UpstreamConfig.__slots__)
    if "url" not in t:
        raise ConfigError('upstream.url is required, e.g. url = "http://127.0.0.1:8000/v1"')
    url = _url("upstream.url", t["url"], allow_empty=False)
    fallback = _url("upstream.fallback_url", t.get("fallback_url", ""), allow_empty=True)
    tokenizer = _str("upstream.tokenizer", t.get("tokenizer", "cl100k_base"))
    api_key = _str("upstream.api_key", t.get("api_key", ""))
    fallback_api_key = _str("upstream.fallback_api_key", t.get("fallback_api_key", ""))
    for name, u, key in (("url", url, api_key), ("fallback_url", fallback, fallback_api_key)):
        if key and "@" in u.split("://", 1)[-1].split("/", 1)[0]:
            key_name = "api_key" if name == "url" else "fallback_api_key"
            raise ConfigError(f"upstream.{name} carries a user and password and upstream.{key_name} is set: a "
                              "request has one Authorization header; keep one of them")
        if u and not _has_api_root(u):
            logger.warning("ragtrim serve: config warning: upstream.%s %r has no API version in its path: the "
                           "gateway appends /chat/completions to it, and vLLM, llama.cpp's server and OpenAI serve "
                           "that only under /v1; if requests get upstream_404, write %r", name, redact_url(u),
                           redact_url(u) + "/v1")
    return UpstreamConfig(
        url=url,
        fallback_url=fallback,
        tokenizer=tokenizer,
        api_key=api_key,
        fallback_api_key=fallback_api_key,
        timeout_s=_pos_float("upstream.timeout_s", t.get("timeout_s", 600.0)),
        connect_timeout_s=_pos_float("upstream.connect_timeout_s", t.get("connect_timeout_s", 5.0)),
        max_connections=_int("upstream.max_connections", t.get("max_connections", 1000), minimum=1),
    )


def _trim(t: Mapping[str, Any]) -> TrimConfig:
    _no_unknown("trim", t, TrimConfig.__slots__)
    budget = t.get("budget")
    if budget is not None:
        budget = _budget("trim.budget", budget)
    scorer = t.get("scorer", "bm25")
    from ragtrim.scoring.registry import SCORER_NAMES

    if scorer not in ("auto", *SCORER_NAMES):
        raise ConfigError(f"trim.scorer must be one of {', '.join(map(repr, ('auto', *SCORER_NAMES)))}, got "
                          f"{scorer!r}")
    tag = _str("trim.context_tag", t.get("context_tag", "context"))
    if not tag or not tag.replace("-", "").replace("_", "").isalnum():
        raise ConfigError(f"trim.context_tag must be a plain tag name such as 'context', got {tag!r}")
    store = _str("trim.vector_store", t.get("vector_store", "default"))
    if not store.strip():
        raise ConfigError('trim.vector_store must be "default", "off", a file path or a redis:// URL, got ""')
    max_mb = t.get("vector_store_max_mb")
    if max_mb is not None:
        from ragtrim.vectors.store import store_size_bytes

        if isinstance(max_mb, str):  # a flag or an environment variable is text; a config's value is a number
            raise ConfigError(f"trim.vector_store_max_mb must be a number of MiB, got the string {max_mb!r}")
        store_size_bytes(max_mb, source="trim.vector_store_max_mb")
        max_mb = float(max_mb)
    prefill = t.get("prefill_ms_per_token")
    if prefill is not None:
        prefill = _pos_float("trim.prefill_ms_per_token", prefill)
    keep = t.get("keep")
    if keep is not None and (isinstance(keep, bool) or not isinstance(keep, (int, float)) or not 0 < keep < 1):
        raise ConfigError(f"trim.keep must be a probability between 0 and 1 (exclusive), e.g. 0.95, got {keep!r}")
    if keep is not None and budget == "lossless":
        raise ConfigError(f'trim.keep ({keep!r}) drops chunks and trim.budget = "lossless" drops none; set one of '
                          "them, not both")
    if keep is not None:
        from ragtrim.api import resolve_scorer
        from ragtrim.stages.retention import calibrated_scorers

        if resolve_scorer(scorer) not in calibrated_scorers():
            raise ConfigError(f"trim.keep needs a calibrated scorer ({', '.join(calibrated_scorers())} or 'auto'), "
                              f"got trim.scorer = {scorer!r}")
    return TrimConfig(budget=budget, keep=float(keep) if keep is not None else None,
                      history_turns=_int("trim.history_turns", t.get("history_turns", 0), minimum=0),
                      scorer=scorer, context_tag=tag, vector_store=store, vector_store_max_mb=max_mb,
                      prefill_ms_per_token=prefill)


def _limits(t: Mapping[str, Any]) -> LimitsConfig:
    _no_unknown("limits", t, LimitsConfig.__slots__)
    state = _str("limits.state", t.get("state", "memory"))
    if state != "memory" and not state.startswith(("redis://", "rediss://", "unix://")):
        raise ConfigError(f'limits.state must be "memory" or a redis:// URL, got {state!r}')
    return LimitsConfig(
        max_input_tokens=_opt_int("limits.max_input_tokens", t.get("max_input_tokens"), minimum=1),
        max_output_tokens=_opt_int("limits.max_output_tokens", t.get("max_output_tokens"), minimum=1),
        long_request_tokens=_opt_int("limits.long_request_tokens", t.get("long_request_tokens"), minimum=1),
        long_concurrency=_int("limits.long_concurrency", t.get("long_concurrency", 1), minimum=1),
        queue_timeout_s=_float("limits.queue_timeout_s", t.get("queue_timeout_s", 10.0), minimum=0.0),
        max_queued=_int("limits.max_queued", t.get("max_queued", 1000), minimum=0),
        max_queued_per_user=_opt_int("limits.max_queued_per_user", t.get("max_queued_per_user"), minimum=0),
        default_org_concurrency=_opt_int("limits.default_org_concurrency", t.get("default_org_concurrency"),
                                         minimum=1),
        state=state,
        fail_open=_bool("limits.fail_open", t.get("fail_open", True)),
        state_timeout_s=_pos_float("limits.state_timeout_s", t.get("state_timeout_s", 0.5)),
        state_breaker_s=_float("limits.state_breaker_s", t.get("state_breaker_s", 2.0), minimum=0.0),
        window_s=_pos_float("limits.window_s", t.get("window_s", 60.0)),
        max_body_bytes=_int("limits.max_body_bytes", t.get("max_body_bytes", 16 * 1024 * 1024), minimum=1024),
        body_timeout_s=_pos_float("limits.body_timeout_s", t.get("body_timeout_s", 30.0)),
        max_json_depth=_int("limits.max_json_depth", t.get("max_json_depth", 64), minimum=4),
        max_n=_opt_int("limits.max_n", t.get("max_n", 16), minimum=1),
    )


def _key(position: int, key: str, value: Any) -> KeyConfig:
    """One ``[keys."<key>"]`` entry. Errors name it ``keys[<position>]`` (its place under ``[keys]`` in file order),
    never by the key itself: an error reaches a terminal, a log and, on a reload, the gateway's log."""
    where = f"keys[{position}]"
    try:
        t = _sub(where, value)
        _no_unknown(where, t, ("user", "org", "rpm", "tpm", "concurrency"))
        if not key or any(c.isspace() for c in key):
            raise ConfigError(f"{where}: an API key must be non-empty without spaces")
        user = _str(f"{where}.user", t.get("user", default_user(key)))
        org = _str(f"{where}.org", t.get("org", "default"))
        return KeyConfig(key=key, user=user, org=org, rpm=_opt_int(f"{where}.rpm", t.get("rpm"), minimum=1),
                         tpm=_opt_int(f"{where}.tpm", t.get("tpm"), minimum=1),
                         concurrency=_opt_int(f"{where}.concurrency", t.get("concurrency"), minimum=1))
    except ConfigError as exc:
        raise ConfigError(f"{exc} ({where} is the key number {position} under [keys], counted in file order; "
                          "keys are never printed)") from None


def default_user(key: str) -> str:
    """The user name of a key without ``user``: ``key-`` and a hash prefix, so that no part of the key reaches a
    log line, a metric or an error message."""
    return "key-" + hashlib.sha256(key.encode()).hexdigest()[:8]


def _org(name: str, t: Mapping[str, Any]) -> OrgConfig:
    _no_unknown(f"orgs.{name}", t, ("concurrency",))
    return OrgConfig(name=name, concurrency=_opt_int(f"orgs.{name}.concurrency", t.get("concurrency"), minimum=1))


def _metrics(t: Mapping[str, Any]) -> MetricsConfig:
    _no_unknown("metrics", t, MetricsConfig.__slots__)
    token = _str("metrics.bearer_token", t.get("bearer_token", ""))
    if any(c.isspace() for c in token):
        raise ConfigError("metrics.bearer_token must have no spaces")
    return MetricsConfig(bearer_token=token)


def _log(t: Mapping[str, Any]) -> LogConfig:
    _no_unknown("log", t, LogConfig.__slots__)
    return LogConfig(path=_str("log.path", t.get("path", "")), log_text=_bool("log.log_text", t.get("log_text", False)),
                     log_request=_bool("log.log_request", t.get("log_request", False)))


def _serve(t: Mapping[str, Any]) -> ServeConfig:
    _no_unknown("serve", t, ServeConfig.__slots__)
    drain = _float("serve.drain_timeout_s", t.get("drain_timeout_s", DRAIN_TIMEOUT_DEFAULT_S), minimum=0.0)
    if drain > DRAIN_TIMEOUT_MAX_S:
        raise ConfigError(f"serve.drain_timeout_s must be at most {DRAIN_TIMEOUT_MAX_S:g} seconds, got {drain:g}; "
                          "0 ends streams at once on SIGTERM")
    return ServeConfig(drain_timeout_s=drain, freeze_gc=_bool("serve.freeze_gc", t.get("freeze_gc", True)))


# A path segment that names an API version: /v1, /v1beta, /v2 (Gemini's OpenAI layer is /v1beta/openai).
_API_ROOT = re.compile(r"(^|/)v\d+[a-z0-9]*(/|$)")


def _has_api_root(url: str) -> bool:
    try:
        path = urlsplit(url).path
    except ValueError:  # unparsable: whatever fails with it is reported by the upstream call, not guessed here
        return True
    return _API_ROOT.search(path) is not None


# -- value checks ---------------------------------------------------------------------------------------------------
def _table(raw: Mapping[str, Any], name: str, *, required: bool = False) -> Mapping[str, Any]:
    if name not in raw:
        if required:
            raise ConfigError(f"[{name}] section is required")
        return {}
    return _sub(name, raw[name])


def _sub(where: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where} must be a table ([{where}]), got {value!r}")
    return value


def _no_unknown(where: str, t: Mapping[str, Any], known: tuple[str, ...] | Any) -> None:
    for k in t:
        if k not in known:
            name = f"{where}.{k}" if where else str(k)
            raise ConfigError(f"unknown config key {name!r}; known keys here: {', '.join(sorted(known))}")


def _str(name: str, v: Any) -> str:
    if not isinstance(v, str):
        raise ConfigError(f"{name} must be a string, got {v!r}")
    return v


def _url(name: str, v: Any, *, allow_empty: bool) -> str:
    s = _str(name, v).rstrip("/")
    if not s and allow_empty:
        return ""
    if not s.startswith(("http://", "https://")):
        raise ConfigError(f"{name} must be an http:// or https:// URL ending in the API root (e.g. .../v1), got {v!r}")
    return s


def _int(name: str, v: Any, *, minimum: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ConfigError(f"{name} must be an integer, got {v!r}")
    if v < minimum:
        raise ConfigError(f"{name} must be >= {minimum}, got {v}")
    return v


def _opt_int(name: str, v: Any, *, minimum: int) -> int | None:
    return None if v is None else _int(name, v, minimum=minimum)


def _float(name: str, v: Any, *, minimum: float) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ConfigError(f"{name} must be a number, got {v!r}")
    if v < minimum:
        raise ConfigError(f"{name} must be >= {minimum}, got {v}")
    return float(v)


def _pos_float(name: str, v: Any) -> float:
    f = _float(name, v, minimum=0.0)
    if f == 0:
        raise ConfigError(f"{name} must be > 0, got {v}")
    return f


def _bool(name: str, v: Any) -> bool:
    if not isinstance(v, bool):
        raise ConfigError(f"{name} must be true or false, got {v!r}")
    return v


def _budget(name: str, v: Any) -> float | int | Literal["lossless"]:
    if v == "lossless":
        return "lossless"
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ConfigError(f'{name} must be a share in (0, 1] (e.g. 0.25), a token count (e.g. 1500) or "lossless", '
                          f"got {v!r}")
    if isinstance(v, float):
        if not 0 < v <= 1:
            raise ConfigError(f"{name} as a share must be in (0, 1], got {v}; write an integer for a token count")
        return v
    if v < 1:
        raise ConfigError(f"{name} as a token count must be >= 1, got {v}")
    return v
