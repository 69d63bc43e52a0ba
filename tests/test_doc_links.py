"""The docs hold together: every relative link in README.md, CHANGELOG.md, docs/ and the benchmarks' READMEs reaches
a file that exists and, with ``#anchor``, a heading of that page; every ``benchmarks/results/...`` path, test file
(``tests/...py``, with ``::name`` a function or class in it) and repository file a page names in its text exists.

Anchors follow GitHub's rule: the heading's text in lower case, punctuation but ``-`` and ``_`` dropped, each space a
``-``, and ``-1``, ``-2`` ... after a repeated heading.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted({ROOT / "README.md", ROOT / "CHANGELOG.md", *(ROOT / "docs").rglob("*.md"),
                ROOT / "benchmarks" / "README.md", ROOT / "benchmarks" / "results" / "README.md"})
_FENCE = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\((?P<target>[^)\s]+)\)|!\[[^\]]*\]\((?P<image>[^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}\s+(?P<text>.+?)\s*#*\s*$", re.MULTILINE)
# A path a page names in its text: results JSON, a test file, or a top-level file such as DESIGN.md.
_RESULT = re.compile(r"benchmarks/results/[\w./-]*[\w/]")
_TEST = re.compile(r"(?<![\w/])tests/[\w/]+\.py(?:::(?P<name>\w+))?")
_TOP_DOC = re.compile(r"(?<![\w/.-])(?P<name>DESIGN|STYLE|CHANGELOG|CONTRIBUTING)\.md")


def _rel(page: Path) -> str:
    return str(page.relative_to(ROOT))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup and punctuation dropped, lower case, spaces as hyphens."""
    text = re.sub(r"<[^>]+>", "", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link in a heading anchors by its text
    text = text.replace("`", "").replace("*", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    out = set()
    for m in _HEADING.finditer(text):
        base = slug(m.group("text"))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    out |= set(re.findall(r"<a (?:name|id)=\"([^\"]+)\"", text))
    return out


def test_slug_follows_github() -> None:
    assert slug("`trim()` in ten lines") == "trim-in-ten-lines"
    assert slug("Several replicas: Redis") == "several-replicas-redis"
    assert slug("What the gateway does to a request") == "what-the-gateway-does-to-a-request"
    assert slug("[Unreleased]") == "unreleased"


def _links(page: Path) -> list[str]:
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    text = re.sub(r"`[^`\n]*`", "", text)  # code spans are not links
    return [m.group("target") or m.group("image") for m in _LINK.finditer(text)]


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_relative_links_and_anchors_resolve(page: Path) -> None:
    bad = []
    for target in _links(page):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...: not checked offline
            continue
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        if not dest.exists():
            bad.append(f"{target}: no such file {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}")
            continue
        if not dest.resolve().is_relative_to(ROOT):
            bad.append(f"{target}: outside the repository")
            continue
        if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{target}: no heading #{anchor} in {_rel(dest)}")
    assert not bad, f"{_rel(page)}: broken links:\n" + "\n".join(bad)


# Pages edited elsewhere that still name a missing file: strict, so the fix shows up as an XPASS to remove here.
KNOWN_MISSING: dict[str, str] = {}


def _page_param(page: Path) -> object:
    reason = KNOWN_MISSING.get(_rel(page))
    return pytest.param(page, marks=pytest.mark.xfail(strict=True, reason=reason)) if reason else page


@pytest.mark.parametrize("page", [_page_param(p) for p in PAGES], ids=_rel)
def test_named_paths_exist(page: Path) -> None:
    """Paths named in the text (code blocks may name files a command is about to write)."""
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    bad = []
    for m in _RESULT.finditer(text):
        path = m.group(0).rstrip(".")
        if text[m.end():m.end() + 1] in ("{", "<", "*"):  # a pattern (matrix_korquad_{before,after}.json)
            continue
        if not (ROOT / path).exists():
            bad.append(f"{path}: no such results file or folder")
    for m in _TEST.finditer(text):
        path = ROOT / m.group(0).partition("::")[0]
        if not path.exists():
            bad.append(f"{m.group(0)}: no such test file")
        elif m.group("name") and not re.search(rf"^\s*(?:async )?(?:def|class) {m.group('name')}\b",
                                                path.read_text(encoding="utf-8"), re.MULTILINE):
            bad.append(f"{m.group(0)}: no such test in that file")
    for m in _TOP_DOC.finditer(text):
        if not (ROOT / m.group(0)).exists():
            bad.append(f"{m.group(0)}: no such file in the repository")
    assert not bad, f"{_rel(page)} names paths that do not exist:\n" + "\n".join(bad)


def test_every_docs_page_is_in_the_index() -> None:
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    missing = [p.name for p in sorted((ROOT / "docs").glob("*.md")) if p.name != "index.md" and f"({p.name})" not in index]
    assert not missing, f"docs/index.md does not link {missing}"
