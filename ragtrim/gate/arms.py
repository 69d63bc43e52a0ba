"""The arms of a gate: each an OpenAI-compatible endpoint with its model and request options, optionally with
ragtrim's trim applied on the client side, or a ragtrim gateway in front (documents sent in the ``documents`` field).

Arms come from a TOML or JSON file (``[[arm]]`` tables, an optional ``baseline`` name and ``[thresholds]``) or from
``--arm NAME=URL`` on the command line. API keys are read from the environment variable an arm names
(``api_key_env``), never from the file, and every URL shown anywhere goes through ``redact_url``.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from ragtrim.errors import ConfigError

Endpoint = Literal["chat", "completions"]
DocumentsMode = Literal["render", "field"]
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_RESERVED_OPTIONS = ("messages", "prompt", "model", "stream", "documents")
DEFAULT_OPTIONS: Mapping[str, Any] = {"temperature": 0, "max_tokens": 128}
"""What every request carries unless the item or the arm says otherwise: greedy decoding, a bounded answer."""


def redact_url(url: str) -> str:
    """``url`` without its password or token query values, for every report, log line and error message."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable url>"
    netloc = parts.netloc
    if parts.password is not None or parts.username:
        host = parts.hostname or ""
        if parts.port is not None:
            host = f"{host}:{parts.port}"
        netloc = f"{parts.username or ''}:***@{host}" if parts.password is not None else f"***@{host}"
    query = re.sub(r"(?i)((?:key|token|secret|password|sig)[^=&]*=)[^&]*", r"\1***", parts.query)
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


_URL_IN_TEXT = re.compile(r"https?://[^\s'\"<>]+")


def scrub(text: str, secrets: Sequence[str] = ()) -> str:
    """``text`` (an error message, a server's reply to a failed request) with every URL in it redacted and every
    secret in ``secrets`` (the arms' API keys) replaced by ``***``: the one exit for secrets into reports."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return _URL_IN_TEXT.sub(lambda m: redact_url(m.group(0)), text)


@dataclass(frozen=True, kw_only=True)
class TrimSpec:
    """ragtrim's trim on the client side: ``budget`` is a share of the documents' tokens (a float in (0, 1)) or a
    token count (an int >= 0); ``scorer`` ranks the chunks; ``tokenizer`` counts (None: ragtrim's default)."""

    budget: float | int
    scorer: str = "bm25"
    tokenizer: str | None = None

    def __post_init__(self) -> None:
        b = self.budget
        if isinstance(b, bool) or not isinstance(b, (int, float)) or (isinstance(b, float) and not 0 < b < 1) \
                or (isinstance(b, int) and b < 0):
            raise ConfigError(f"trim.budget must be a share in (0, 1) such as 0.25, or a token count >= 0, got {b!r}")
        if not isinstance(self.scorer, str) or not self.scorer:
            raise ConfigError(f"trim.scorer must name a scorer (bm25, auto, ...), got {self.scorer!r}")
        if self.tokenizer is not None and not isinstance(self.tokenizer, str):
            raise ConfigError(f"trim.tokenizer must be a tokenizer name, got {self.tokenizer!r}")

    def budget_for(self, document_tokens: int) -> int:
        """The token budget of a request whose documents count ``document_tokens``."""
        if isinstance(self.budget, float):
            return math.ceil(self.budget * document_tokens)
        return self.budget


@dataclass(frozen=True, kw_only=True)
class Arm:
    """One configuration under test. ``url`` is the OpenAI base URL (``http://host:8000/v1``); ``options`` go into
    every request (over ``DEFAULT_OPTIONS`` and the item's own); ``documents="field"`` sends the documents as the
    ``documents`` field for a ragtrim gateway (or a chat template that takes them) instead of rendering them into
    the prompt; ``cost_weight`` scales the arm's token cost in the report (a cheaper GPU: 0.5); ``thresholds``
    replace the run's thresholds for this change alone (a trim must gain TTFT, a quantization must not lose)."""

    name: str
    url: str
    model: str
    endpoint: Endpoint = "chat"
    options: Mapping[str, Any] = field(default_factory=dict)
    api_key_env: str | None = None
    trim: TrimSpec | None = None
    documents: DocumentsMode = "render"
    timeout_s: float = 120.0
    cost_weight: float = 1.0
    thresholds: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise ConfigError(f"arm name must be 1-64 letters, digits, '.', '_' or '-', got {self.name!r}")
        where = f"arm {self.name!r}"
        parts = urlsplit(self.url) if isinstance(self.url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
            shown = redact_url(self.url) if isinstance(self.url, str) else repr(self.url)
            raise ConfigError(f"{where}: url must be an http(s) base URL such as http://127.0.0.1:8000/v1, got "
                              f"{shown!r}")
        if not isinstance(self.model, str) or not self.model:
            raise ConfigError(f"{where}: give the model name the server serves (model = \"...\")")
        if self.endpoint not in ("chat", "completions"):
            raise ConfigError(f"{where}: endpoint must be 'chat' or 'completions', got {self.endpoint!r}")
        if self.documents not in ("render", "field"):
            raise ConfigError(f"{where}: documents must be 'render' or 'field', got {self.documents!r}")
        if self.documents == "field" and self.endpoint != "chat":
            raise ConfigError(f"{where}: documents = 'field' works with the chat endpoint only")
        if not isinstance(self.options, Mapping):
            raise ConfigError(f"{where}: options must be a table of request fields")
        bad = [k for k in _RESERVED_OPTIONS if k in self.options]
        if bad:
            raise ConfigError(f"{where}: options may not set {', '.join(bad)} (the gate builds them)")
        if self.api_key_env is not None and not (isinstance(self.api_key_env, str)
                                                 and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", self.api_key_env)):
            raise ConfigError(f"{where}: api_key_env must name an environment variable, got {self.api_key_env!r}")
        if isinstance(self.timeout_s, bool) or not isinstance(self.timeout_s, (int, float)) \
                or not 0 < self.timeout_s <= 3600:
            raise ConfigError(f"{where}: timeout_s must be in (0, 3600] seconds, got {self.timeout_s!r}")
        if isinstance(self.cost_weight, bool) or not isinstance(self.cost_weight, (int, float)) \
                or not 0 < self.cost_weight < math.inf:
            raise ConfigError(f"{where}: cost_weight must be a positive number, got {self.cost_weight!r}")
        if not isinstance(self.thresholds, Mapping):
            raise ConfigError(f"{where}: thresholds must be a table of this change's own thresholds")
        object.__setattr__(self, "options", json.loads(json.dumps(dict(self.options))))
        object.__setattr__(self, "thresholds", dict(self.thresholds))

    @property
    def shown_url(self) -> str:
        return redact_url(self.url)

    def describe(self) -> dict[str, Any]:
        """The arm for reports: everything but secrets (the URL redacted, the key's variable name only)."""
        d = asdict(self)
        d["url"] = self.shown_url
        return d

    def fingerprint(self) -> str:
        """A hash of what shapes this arm's requests (not its name, timeout or cost): stored results of an arm with
        another fingerprint are not reused."""
        d = {k: v for k, v in asdict(self).items()
             if k not in ("name", "timeout_s", "cost_weight", "api_key_env", "thresholds")}
        return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


_ARM_KEYS = frozenset({"name", "url", "model", "endpoint", "options", "api_key_env", "trim", "documents",
                       "timeout_s", "cost_weight", "thresholds", "baseline"})


def arm_from_dict(raw: Any, where: str) -> tuple[Arm, bool]:
    """``(arm, is_baseline)`` from a table of the arms file."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where} must be a table, got {type(raw).__name__}")
    unknown = sorted(set(raw) - _ARM_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} "
                          f"(known: {', '.join(sorted(_ARM_KEYS))})")
    missing = [k for k in ("name", "url", "model") if k not in raw]
    if missing:
        raise ConfigError(f"{where}: missing {', '.join(missing)}")
    kw = {k: v for k, v in raw.items() if k != "baseline"}
    trim = kw.get("trim")
    if trim is not None:
        if not isinstance(trim, Mapping) or "budget" not in trim or set(trim) - {"budget", "scorer", "tokenizer"}:
            raise ConfigError(f"{where}: trim must be a table with budget (and optional scorer, tokenizer), "
                              f"got {trim!r}")
        kw["trim"] = TrimSpec(**trim)
    baseline = raw.get("baseline", False)
    if not isinstance(baseline, bool):
        raise ConfigError(f"{where}: baseline must be true or false, got {baseline!r}")
    return Arm(**kw), baseline


def parse_arm_option(text: str, model: str | None) -> Arm:
    """``NAME=URL`` from the command line; every such arm serves ``model``."""
    name, sep, url = text.partition("=")
    if not sep or not name or not url:
        raise ConfigError(f"--arm takes NAME=URL (e.g. base=http://127.0.0.1:8000/v1), got {redact_url(text)!r}")
    if not model:
        raise ConfigError("--arm needs --model (the model name the servers serve), or use an --arms file")
    return Arm(name=name, url=url, model=model)


@dataclass(frozen=True, kw_only=True)
class ArmsFile:
    """What an arms file holds: the arms in order, the baseline's name, and thresholds (``{}`` when none)."""

    arms: tuple[Arm, ...]
    baseline: str
    thresholds: Mapping[str, Any] = field(default_factory=dict)


def read_table_file(path: str | Path, what: str) -> dict[str, Any]:
    """A TOML (``.toml``) or JSON file's top-level table; errors name the file."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{what} {str(p)!r} cannot be read: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8")) if p.suffix == ".toml" else json.loads(raw)
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, ValueError) as exc:
        raise ConfigError(f"{what} {str(p)!r} is not valid {'TOML' if p.suffix == '.toml' else 'JSON'}: "
                          f"{exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{what} {str(p)!r} must hold a table (object), got {type(data).__name__}")
    return data


def load_arms(path: str | Path) -> ArmsFile:
    """Read an arms file: ``[[arm]]`` tables (or a JSON ``"arm"`` list), ``baseline = "name"`` or an arm with
    ``baseline = true`` (default: the first arm), and an optional ``[thresholds]`` table."""
    data = read_table_file(path, "arms file")
    unknown = sorted(set(data) - {"arm", "arms", "baseline", "thresholds"})
    if unknown:
        raise ConfigError(f"arms file {str(path)!r}: unknown key(s) {', '.join(map(repr, unknown))} (known: arm, "
                          "baseline, thresholds)")
    tables = data.get("arm", data.get("arms"))
    if not isinstance(tables, list) or not tables:
        raise ConfigError(f"arms file {str(path)!r} needs [[arm]] tables (at least two: a baseline and a change)")
    arms: list[Arm] = []
    flagged: list[str] = []
    for i, t in enumerate(tables):
        arm, is_base = arm_from_dict(t, f"arms file {str(path)!r}, arm {i + 1}")
        arms.append(arm)
        if is_base:
            flagged.append(arm.name)
    baseline = data.get("baseline")
    if baseline is not None and flagged and flagged != [baseline]:
        raise ConfigError(f"arms file {str(path)!r}: baseline = {baseline!r} disagrees with baseline = true on "
                          f"{flagged}")
    if len(flagged) > 1:
        raise ConfigError(f"arms file {str(path)!r}: only one arm can be the baseline, got {flagged}")
    thresholds = data.get("thresholds", {})
    if not isinstance(thresholds, dict):
        raise ConfigError(f"arms file {str(path)!r}: [thresholds] must be a table")
    name = baseline or (flagged[0] if flagged else arms[0].name)
    return ArmsFile(arms=tuple(arms), baseline=str(name), thresholds=thresholds)


def check_arms(arms: Sequence[Arm], baseline: str) -> None:
    """At least two arms, unique names, and a baseline among them."""
    if len(arms) < 2:
        raise ConfigError(f"a gate needs at least two arms (a baseline and a change), got {len(arms)}")
    names = [a.name for a in arms]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ConfigError(f"arm names must be unique, got {dupes} more than once")
    if baseline not in names:
        raise ConfigError(f"baseline {baseline!r} is not an arm (arms: {', '.join(names)})")
