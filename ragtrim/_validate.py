"""Parameter checks shared by stages: each error names the parameter, the bad value, the rule and the fix."""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import Any

from ragtrim.errors import ConfigError


def check_int(name: str, value: Any, *, minimum: int | None = None, maximum: int | None = None,
              allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be an int, got {value!r} ({type(value).__name__})")
    if minimum is not None and value < minimum:
        raise ConfigError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ConfigError(f"{name} must be <= {maximum}, got {value}")


def check_float(name: str, value: Any, *, minimum: float | None = None, maximum: float | None = None,
                min_exclusive: bool = False, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise ConfigError(f"{name} must be a number, got {value!r}")
    if minimum is not None:
        if min_exclusive and value <= minimum:
            raise ConfigError(f"{name} must be > {minimum}, got {value}")
        if not min_exclusive and value < minimum:
            raise ConfigError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ConfigError(f"{name} must be <= {maximum}, got {value}")


def check_choice(name: str, value: Any, choices: Collection[str]) -> None:
    if value not in choices:
        raise ConfigError(f"{name} must be one of {sorted(choices)}, got {value!r}")


def check_bool(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise ConfigError(f"{name} must be True or False, got {value!r}")
