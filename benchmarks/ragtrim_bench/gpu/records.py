"""Per-request records: success or error, token counts and timings. Backends fill them; metrics read them."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class RequestRecord:
    """One request's outcome. Times are seconds since the run started (``*_s``) or milliseconds (``*_ms``)."""

    request_id: str
    arm: str
    success: bool
    prompt_tokens: int = 0
    output_tokens: int = 0
    send_time_s: float = 0.0
    ttft_ms: float = 0.0
    e2e_ms: float = 0.0
    itl_ms: tuple[float, ...] = field(default=())
    output_text: str = ""
    error: str = ""
    recipe: str = ""
    """What ``ragtrim serve`` chose for the request (its ``x-ragtrim-recipe`` header); empty from other servers."""

    @property
    def tpot_ms(self) -> float:
        """Time per output token after the first: (e2e - ttft) / (output_tokens - 1); 0 for one-token outputs."""
        if self.output_tokens <= 1:
            return 0.0
        return (self.e2e_ms - self.ttft_ms) / (self.output_tokens - 1)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["itl_ms"] = list(self.itl_ms)
        d["tpot_ms"] = self.tpot_ms
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RequestRecord:
        d = {k: v for k, v in d.items() if k != "tpot_ms"}
        d["itl_ms"] = tuple(d.get("itl_ms", ()))
        return cls(**d)
