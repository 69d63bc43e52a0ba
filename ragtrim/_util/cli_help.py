"""What every ``ragtrim`` subcommand's ``--help`` shares: each option's default beside its text, the description kept
as written, and an epilog of examples that ends with where the full guide is (``ragtrim docs <topic>``)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and epilogs as written (line breaks kept); every option that has a default says it, unless its
    own text already does."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if "default" in text or action.default in (None, False, argparse.SUPPRESS) or not action.option_strings:
            return text
        if isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            return text
        return f"{text} (default: %(default)s)" if text else "(default: %(default)s)"


def epilog(examples: Sequence[str], *, topic: str | None = None, extra: str = "") -> str:
    """An epilog: ``examples:`` (one command a line), then ``extra`` (e.g. exit codes), then the guide's topic."""
    parts = ["examples:\n" + "\n".join(f"  {line}" for line in examples)]
    if extra:
        parts.append(extra)
    if topic is not None:
        parts.append(f"full guide: ragtrim docs {topic}")
    return "\n\n".join(parts)
