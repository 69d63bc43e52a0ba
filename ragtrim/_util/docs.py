"""``ragtrim docs [TOPIC]``: the user guide as installed with the package, printed in the terminal.

A wheel installs the guide's pages (``docs/*.md``) under ``<prefix>/share/doc/ragtrim/`` (pyproject's
``data-files``); an editable install reads them from the checkout it was installed from (its ``direct_url.json``).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from ragtrim._util.cli_help import HelpFormatter, epilog
from ragtrim.errors import ConfigError

DOC_FOLDER = ("share", "doc", "ragtrim")
"""Where a wheel puts the guide, relative to the installation prefix."""
NO_GUIDE = ("this copy of ragtrim has no guide installed (it runs from a source tree without `pip install`); read "
            "docs/ in the repository")


def docs_folder() -> Path | None:
    """The folder holding this installation's guide pages, or None when it has none (a copy of the source tree on
    ``sys.path`` without an installation). Every ``ragtrim`` distribution on the path is asked: a source checkout's
    own ``ragtrim.egg-info`` (left by an editable install) lists no files."""
    for dist in importlib.metadata.distributions(name="ragtrim"):
        folder = _installed_folder(dist) or _editable_folder(dist)
        if folder is not None:
            return folder
    return None


def _installed_folder(dist: importlib.metadata.Distribution) -> Path | None:
    for f in dist.files or ():
        if tuple(f.parts[-4:-1]) == DOC_FOLDER and f.name.endswith(".md"):
            folder = Path(str(dist.locate_file(f))).resolve().parent
            if folder.is_dir():
                return folder
    return None


def _editable_folder(dist: importlib.metadata.Distribution) -> Path | None:
    raw = dist.read_text("direct_url.json")
    try:
        info: Any = json.loads(raw) if raw else None
    except ValueError:
        return None
    if not isinstance(info, dict) or not info.get("dir_info", {}).get("editable"):
        return None
    url = info.get("url", "")
    if not isinstance(url, str) or not url.startswith("file:"):
        return None
    folder = Path(unquote(urlparse(url).path)) / "docs"
    return folder if folder.is_dir() else None


def topics(folder: Path) -> dict[str, str]:
    """Each page's topic (its file name without ``.md``) and its title (first heading), sorted by topic."""
    found: dict[str, str] = {}
    for page in sorted(folder.glob("*.md")):
        first = next((line for line in page.read_text(encoding="utf-8").splitlines() if line.startswith("# ")), "")
        found[page.stem] = first.removeprefix("# ").strip()
    return found


def read(topic: str, folder: Path | None = None) -> str:
    """The page of ``topic``; ConfigError naming the topics there are when it does not exist."""
    folder = folder if folder is not None else docs_folder()
    if folder is None:
        raise ConfigError(NO_GUIDE)
    known = topics(folder)
    if topic not in known:
        raise ConfigError(f"no guide page {topic!r}; topics: {', '.join(known)} (ragtrim docs lists them)")
    return (folder / f"{topic}.md").read_text(encoding="utf-8")


def add_cli(sub: Any) -> None:
    """Add ``docs`` to the ``ragtrim`` command's subparsers."""
    d = sub.add_parser(
        "docs", help="print a page of the user guide (installed with ragtrim); without a topic, list them",
        formatter_class=HelpFormatter,
        description="Print a page of ragtrim's user guide, as installed with the package, in Markdown. Without "
                    "TOPIC, list the topics and their titles.",
        epilog=epilog(["ragtrim docs", "ragtrim docs serve | less", "ragtrim docs relevance > relevance.md"]))
    d.add_argument("topic", nargs="?", default=None, help="a page, e.g. serve, plan, audit, relevance")
    d.set_defaults(func=run_docs)


def run_docs(args: argparse.Namespace) -> int:
    if args.topic is not None:
        sys.stdout.write(read(args.topic))
        return 0
    folder = docs_folder()
    if folder is None:
        raise ConfigError(NO_GUIDE)
    known = topics(folder)
    width = max(map(len, known), default=0)
    print(f"ragtrim's guide ({folder}); print a page with: ragtrim docs TOPIC\n")
    for topic, title in known.items():
        print(f"  {topic.ljust(width)}  {title}")
    return 0
