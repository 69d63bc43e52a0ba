"""How to audit: ``AuditConfig``, shared by the local and the Ray engine."""

from __future__ import annotations

from dataclasses import dataclass, field

from ragtrim.audit.capacity import PlannerConfig
from ragtrim.audit.duplicates import DEFAULT_MAX_DOCS
from ragtrim.audit.savings import SavingsConfig, TTFTCurve
from ragtrim.errors import ConfigError


@dataclass(frozen=True, kw_only=True)
class AuditConfig:
    """How to audit. ``keep_text=False`` keeps request text (previews of prompts and documents) out of the report;
    ``savings=None`` skips the pipeline run; ``prefix_cache_tokens=None`` uses the planned GPU's KV cache size when
    a planner is given, else ``DEFAULT_CACHE_TOKENS``; ``image_tokens`` is what one image costs the model (0: images
    are counted but not as tokens, and the report says how many there are)."""

    tokenizer: str | None = None
    context_tag: str = "context"
    batch_size: int = 512
    block_size: int = 16
    prefix_cache_tokens: int | None = None
    keep_text: bool = True
    html_share: bool = True
    near_threshold: float = 0.8
    max_docs: int = DEFAULT_MAX_DOCS
    default_output_tokens: int = 256
    savings: SavingsConfig | None = field(default_factory=SavingsConfig)
    planner: PlannerConfig | None = None
    ttft_curve: TTFTCurve | None = None
    num_threads: int = 2
    image_tokens: int = 0

    def __post_init__(self) -> None:
        for name in ("batch_size", "block_size", "max_docs", "num_threads"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")
        if self.prefix_cache_tokens is not None and self.prefix_cache_tokens < 0:
            raise ConfigError(f"prefix_cache_tokens must be >= 0, got {self.prefix_cache_tokens}")
        if not 0 < self.near_threshold <= 1:
            raise ConfigError(f"near_threshold must be in (0, 1], got {self.near_threshold}")
        if self.default_output_tokens < 0:
            raise ConfigError(f"default_output_tokens must be >= 0, got {self.default_output_tokens}")
        if isinstance(self.image_tokens, bool) or not isinstance(self.image_tokens, int) or self.image_tokens < 0:
            raise ConfigError(f"image_tokens must be an integer >= 0 (tokens one image costs the model; Gemma 3: "
                              f"256), got {self.image_tokens!r}")
