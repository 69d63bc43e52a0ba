"""HTML boilerplate removal: chunks that contain markup become clean text; plain text passes through untouched.

Whole pages get main-content extraction (``ragtrim.html.extract.extract_main_content``), fragments get boilerplate
tag stripping; a cheap regex decides whether a chunk is HTML at all before anything is parsed.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, get_args

from ragtrim._util.validate import Boolean, Constraints, Interval, Options
from ragtrim.components import component
from ragtrim.errors import MissingDependencyError
from ragtrim.html.extract import extract_main_content
from ragtrim.html.markup import (
    Extraction,
    clean_fragment,
    describe_removed,
    looks_like_html,
    looks_like_page,
    reads_as_markup,
)
from ragtrim.models import Chunk, Removal, StageOutput, TrimContext
from ragtrim.stages.base import Stage, register_stage
from ragtrim.text.tokens import TokenCounter

HtmlMode = Literal["auto", "page", "fragment"]
HtmlExtractor = Literal["ragtrim", "trafilatura"]


@register_stage
@component
class HtmlCleaner(Stage):
    """Turn HTML chunks into text without navigation, ads, banners, forms and other boilerplate.

    Parameters:
        mode: ``"auto"`` treats a chunk with a doctype, ``<html>`` or ``<body>`` tag, or at least ``page_min_chars``
            characters, as a whole page (main-content extraction) and anything else as a fragment (boilerplate tags
            and link-dense blocks stripped, all other text kept); ``"page"`` / ``"fragment"`` force one treatment.
        extractor: main-content extractor for pages. ``"ragtrim"`` (built in) or ``"trafilatura"`` (needs the
            ``trafilatura`` extra; when it finds nothing, ragtrim's extractor is used). Fragments always use
            ragtrim's cleaner.
        min_text_chars: an HTML chunk whose cleaned text is shorter than this is dropped as boilerplate
            (0 drops only chunks that become empty).
        keep_tables: keep table text (cells tab-separated, one row per line); False drops tables.
        page_min_chars: in ``"auto"`` mode, HTML chunks at least this long count as pages.

    A chunk is HTML when it holds markup to render (``ragtrim.html.markup.reads_as_markup``): prose that only
    mentions head or embedded-content tags ("Use the <title> element, e.g. <title>My page</title>, in the head.")
    passes through untouched instead of losing the words between them.

    Every changed chunk gets a ``shortened`` record with reason ``boilerplate`` and a detail such as
    ``"removed nav, footer, 2 scripts; 1830 -> 412 chars"``; a chunk left with no text is ``dropped``.
    """

    name = "html"
    reads_token_counts: ClassVar[bool] = False
    _parameter_constraints: ClassVar[dict[str, Constraints]] = {
        "mode": [Options(get_args(HtmlMode))],
        "extractor": [Options(get_args(HtmlExtractor))],
        "min_text_chars": [Interval(int, 0, None)],
        "keep_tables": [Boolean()],
        "page_min_chars": [Interval(int, 1, None)],
    }

    mode: HtmlMode = "auto"
    extractor: HtmlExtractor = "ragtrim"
    min_text_chars: int = 0
    keep_tables: bool = True
    page_min_chars: int = 20_000

    def warm_up(self) -> None:
        if self.extractor == "trafilatura":
            _import_trafilatura()

    def clean(self, text: str) -> Extraction:
        """The cleaned text of one chunk (``method="plain"`` and the text unchanged when it is not HTML)."""
        if not looks_like_html(text) or not reads_as_markup(text):
            return Extraction(text, "plain")
        if self.mode == "fragment" or (
            self.mode == "auto" and len(text) < self.page_min_chars and not looks_like_page(text)
        ):
            return clean_fragment(text, keep_tables=self.keep_tables)
        if self.extractor == "trafilatura":
            extracted = _trafilatura_extract(text, self.keep_tables)
            if extracted:
                return Extraction(extracted, "page")
        return extract_main_content(text, keep_tables=self.keep_tables)

    def run(self, context: TrimContext, *, counter: TokenCounter) -> StageOutput:
        kept: list[Chunk] = []
        removals: list[Removal] = []
        methods: dict[str, int] = {}
        for chunk in context.chunks:
            result = self.clean(chunk.text)
            if result.method == "plain":
                kept.append(chunk)
                continue
            methods[result.method] = methods.get(result.method, 0) + 1
            new_text = result.text
            if new_text == chunk.text:
                kept.append(chunk)
                continue
            # The pipeline puts the exact numbers into the records (it may still be counting the raw input).
            before = chunk.token_count or 0
            what = describe_removed(result.removed) or "markup"
            if len(new_text) < max(self.min_text_chars, 1):
                removals.append(Removal(
                    chunk.id, self.name, "boilerplate", before,
                    f"nothing left but boilerplate ({what}); {len(chunk.text)} -> {len(new_text)} chars",
                ))
                continue
            after = counter.count(new_text)
            kept.append(chunk.with_text(new_text, token_count=after))
            removals.append(Removal(
                chunk.id, self.name, "boilerplate", max(0, before - after),
                f"removed {what}; {len(chunk.text)} -> {len(new_text)} chars", action="shortened",
            ))
        info: dict[str, Any] = {f"{m}_chunks": n for m, n in sorted(methods.items())}
        return StageOutput(context.with_chunks(tuple(kept)), tuple(removals), info=info)


def _import_trafilatura() -> Any:
    try:
        import trafilatura
    except ImportError as exc:  # trafilatura 2.x also fails to import without lxml_html_clean
        raise MissingDependencyError("trafilatura", "trafilatura", "HtmlCleaner(extractor='trafilatura')") from exc
    return trafilatura


def _trafilatura_extract(text: str, keep_tables: bool) -> str:
    trafilatura = _import_trafilatura()
    out = trafilatura.extract(text, include_tables=keep_tables)
    return out if isinstance(out, str) else ""
