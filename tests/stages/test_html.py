"""The HTML boilerplate stage (``HtmlCleaner``): parameters, what it removes and records, pages and fragments; the
extraction functions behind it are tested in tests/html/."""

from __future__ import annotations

import sys
import time

import pytest

from ragtrim.errors import ConfigError, MissingDependencyError
from ragtrim.models import Chunk, TrimContext
from ragtrim.pipeline import Pipeline
from ragtrim.stages.base import stage_from_dict
from ragtrim.stages.html import HtmlCleaner
from ragtrim.text.tokens import get_counter
from tests.html.sample_page import ARTICLE_PARAS, PAGE, run

WS = get_counter("whitespace")

class TestHtmlCleaner:
    def test_defaults(self) -> None:
        stage = HtmlCleaner()
        assert stage.get_params() == {
            "mode": "auto", "extractor": "ragtrim", "min_text_chars": 0, "keep_tables": True,
            "page_min_chars": 20_000,
        }
        assert stage.name == "html"

    def test_round_trip_through_registry(self) -> None:
        stage = stage_from_dict({"type": "html", "mode": "fragment", "min_text_chars": 5})
        assert isinstance(stage, HtmlCleaner)
        assert stage.to_dict() == {"type": "html", "mode": "fragment", "extractor": "ragtrim", "min_text_chars": 5,
                                   "keep_tables": True, "page_min_chars": 20_000}

    @pytest.mark.parametrize(("param", "value"), [
        ("mode", "article"), ("extractor", "readability"), ("min_text_chars", -1), ("min_text_chars", "10"),
        ("keep_tables", "yes"), ("page_min_chars", 0), ("page_min_chars", 1.5),
    ])
    def test_invalid_parameter(self, param: str, value: object) -> None:
        with pytest.raises(ConfigError, match=param):
            HtmlCleaner(**{param: value})  # type: ignore[arg-type]

    def test_empty_input(self) -> None:
        out = HtmlCleaner().run(TrimContext(), counter=WS)
        assert out.context.chunks == () and out.removals == ()

    def test_empty_string_chunk_passes(self) -> None:
        texts, removals = run([""])
        assert texts == [""] and removals == []

    def test_single_plain_chunk_untouched(self) -> None:
        texts, removals = run(["a < b and c > d"])
        assert texts == ["a < b and c > d"] and removals == []

    def test_plain_text_with_entities_untouched(self) -> None:
        # Without markup a chunk is not HTML: "&amp;" may be what the source really says.
        assert run(["AT&amp;T and R&D"])[0] == ["AT&amp;T and R&D"]

    def test_fragment_strips_boilerplate_and_keeps_structure(self) -> None:
        html = (
            "<nav><a href='/'>Home</a> <a href='/a'>About</a></nav><script>alert(1)</script>"
            "<style>.x{}</style><h2>Results</h2><p>The trial   met its\n primary endpoint.</p>"
            "<ul><li>Dose: 10 mg</li><li>Arms: 2</li></ul>"
            "<table><tr><th>Group</th><th>n</th></tr><tr><td>A</td><td>120</td></tr></table>"
            "<form><label>Email</label><input name=e></form><footer>© Journal</footer>"
        )
        texts, _ = run([html])
        assert texts == ["Results\nThe trial met its primary endpoint.\nDose: 10 mg\nArms: 2\nGroup\tn\nA\t120"]

    def test_keep_tables_false_drops_tables(self) -> None:
        texts, _ = run(["<p>Intro text.</p><table><tr><td>A</td><td>1</td></tr></table>"], keep_tables=False)
        assert texts == ["Intro text."]

    def test_entities_decoded(self) -> None:
        texts, _ = run(["<p>Fish &amp; chips&nbsp;today, it&#8217;s &lt;fine&gt; &eacute;t&eacute;</p>"])
        assert texts == ["Fish & chips today, it\u2019s <fine> \u00e9t\u00e9"]

    def test_cookie_banner_and_link_dense_block_removed(self) -> None:
        html = (
            "<div class='cookie-consent'>We use cookies. Accept all?</div>"
            "<p>Rates rose by a quarter point, the bank said.</p>"
            "<div><a href=1>One</a> | <a href=2>Two</a> | <a href=3>Three</a> | <a href=4>Four</a></div>"
        )
        texts, removals = run([html])
        assert texts == ["Rates rose by a quarter point, the bank said."]
        assert "cookie-banner" in str(removals[0]["detail"]) and "link-dense" in str(removals[0]["detail"])

    def test_broken_html(self) -> None:
        texts, _ = run(["<div><p>First <b>bold</p><p>Second paragraph<div>tail text"])
        assert texts == ["First bold\nSecond paragraph\ntail text"]

    def test_deeply_nested_html_falls_back_without_recursion_error(self) -> None:
        # Its cost stays linear (the hostile-growth benchmark measures it: speed is no unit test's business).
        html = "<div>" * 100_000 + "deep text &amp; more" + "</div>" * 100_000
        for mode in ("auto", "page", "fragment"):
            assert HtmlCleaner(mode=mode).clean(html).text == "deep text & more"  # type: ignore[arg-type]
        assert HtmlCleaner().clean(html).method == "fallback"

    def test_nesting_within_parser_limit_is_parsed(self) -> None:
        html = "<div>" * 1000 + "<p>inner</p>" + "</div>" * 1000
        result = HtmlCleaner().clean(html)
        assert (result.text, result.method) == ("inner", "fragment")

    def test_ten_megabyte_chunk(self) -> None:
        para = "<p>" + "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 20 + "</p>\n"
        html = "<div>" + para * (10_000_000 // len(para) + 1) + "</div><script>x()</script>"
        assert len(html) >= 10_000_000
        started = time.perf_counter()
        result = HtmlCleaner().clean(html)
        assert time.perf_counter() - started < 60
        assert result.method == "page" and result.text.startswith("Lorem ipsum") and "x()" not in result.text

    def test_already_decoded_non_utf8_text(self) -> None:
        latin1 = "<p>caf\u00e9 na\u00efve \u00fcber</p>".encode("latin-1").decode("latin-1")
        assert run([latin1])[0] == ["caf\u00e9 na\u00efve \u00fcber"]
        escaped = b"<p>bad \xff byte</p>".decode("utf-8", errors="surrogateescape")
        assert run([escaped])[0] == ["bad \ufffd byte"]

    def test_page_main_content_extraction(self) -> None:
        texts, removals = run([PAGE])
        assert texts == ["\n".join([ARTICLE_PARAS[0], ARTICLE_PARAS[1], "What comes next", ARTICLE_PARAS[2]])]
        assert removals[0]["action"] == "shortened"

    def test_fragment_mode_keeps_everything_but_boilerplate(self) -> None:
        text = HtmlCleaner(mode="fragment").clean(PAGE).text
        assert "Council expands bus network" in text and ARTICLE_PARAS[2] in text
        assert "We use cookies" not in text and "Copyright" not in text and "Most read" not in text

    def test_auto_mode_long_fragment_counts_as_page(self) -> None:
        body = PAGE.split("<body>")[1].split("</body>")[0]
        assert HtmlCleaner(page_min_chars=100).clean(body).text == HtmlCleaner(mode="page").clean(body).text
        assert HtmlCleaner().clean(body).method == "fragment"

    def test_trace_shortened_with_exact_tokens(self) -> None:
        result = Pipeline([HtmlCleaner()], tokenizer="whitespace").run(
            ["<p>one two</p><script>x y z</script>", "no html here"]
        )
        assert [c.text for c in result.chunks] == ["one two", "no html here"]
        (rec,) = result.removals
        assert (rec.chunk_id, rec.stage, rec.reason, rec.action, rec.tokens_removed) == (
            "0", "html", "boilerplate", "shortened", 2)
        assert rec.detail == "removed script; 36 -> 7 chars"

    def test_trace_dropped_when_nothing_left(self) -> None:
        texts, removals = run(["<nav><a href='/'>Home</a></nav><script>x</script>", "<p>kept</p>"])
        assert texts == ["kept"]
        assert removals[0]["chunk_id"] == "0" and removals[0]["action"] == "dropped"
        assert removals[0]["reason"] == "boilerplate"
        assert removals[0]["detail"] == "nothing left but boilerplate (nav, script); 49 -> 0 chars"

    def test_min_text_chars_drops_short_leftovers(self) -> None:
        texts, removals = run(["<p>ok</p>", "<p>long enough text</p>"], min_text_chars=5)
        assert texts == ["long enough text"]
        assert removals[0]["chunk_id"] == "0" and removals[0]["action"] == "dropped"

    def test_no_input_mutation_and_order_kept(self) -> None:
        chunks = (Chunk("<p>b</p><script>s</script>", "x", score=0.1), Chunk("plain", "y"), Chunk("<i>a</i>", "z"))
        before = [(c.text, c.id, c.score) for c in chunks]
        out = HtmlCleaner().run(TrimContext(chunks=chunks), counter=WS)
        assert [(c.text, c.id, c.score) for c in chunks] == before
        assert [c.id for c in out.context.chunks] == ["x", "y", "z"]
        assert out.context.chunks[1] is chunks[1]

    def test_info_counts_methods(self) -> None:
        out = HtmlCleaner().run(TrimContext(chunks=(Chunk("<p>a</p>", "1"), Chunk(PAGE, "2"))), counter=WS)
        assert dict(out.info) == {"fragment_chunks": 1, "page_chunks": 1}

    def test_trafilatura_missing_raises_named_extra(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setitem(sys.modules, "trafilatura", None)
        stage = HtmlCleaner(extractor="trafilatura")
        with pytest.raises(MissingDependencyError, match=r"ragtrim\[trafilatura\]"):
            stage.warm_up()
        # fragments never need trafilatura
        assert stage.clean("<p>x</p>").text == "x"

    def test_trafilatura_extractor(self) -> None:
        pytest.importorskip("trafilatura")
        text = HtmlCleaner(extractor="trafilatura").clean(PAGE).text
        assert ARTICLE_PARAS[0] in text and "Most read" not in text
