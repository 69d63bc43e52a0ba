"""Sentence spans: gapless, and never cut inside numbers, abbreviations, quotes or code."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragtrim.text.sentences import (
    _fences,
    _inline_and_quoted,
    normalize_text,
    sentence_spans,
    split_sentences,
)
from tests.text import multilingual_heldout, multilingual_reference
from tests.text.reference_sentence_spans import _fences as old_fences
from tests.text.reference_sentence_spans import _inline_and_quoted as old_inline_and_quoted
from tests.text.reference_sentence_spans import old_sentence_spans

_PROSE = [
    "Dr. Smith paid $3.5 million in 1999. The U.S. Army agreed with J. Doe. It ended.",
    'He said "Stop. Now. Please." and left. Then it rained. “Why? Because.” She smiled!',
    "Intro here.\n\n```python\nx = 1. \ny = 2\n\nz = 3\n```\nAfter code. Done.\n~~~\nunclosed. Fence",
    "Run it:\n    foo(). Bar()\n    baz();\nThen stop. Next.\n\tTabbed. Line\nif x):\n  Ok. Fine.",
    "Steps:\n- first item\n- second item\n1. numbered. Item\n2) other\n\nDone here... Really?! Yes…  No.",
    "Call `a. B()` first. Then go. (See fig. 3.) [Done.] 'Quoted.' Next ’one’. Closing.\" Then.",
    "  Leading blanks. \r\n Windows lines.\r\n\r\nNew para. Mr. X met Mrs. Y at 3 p.m. on Jan. 5. Ok.",
]


class TestSentenceSpans:
    def test_empty(self) -> None:
        assert sentence_spans("") == []
        assert split_sentences("") == []

    def test_simple_split(self) -> None:
        assert split_sentences("One thing. Two things! Three?") == ["One thing.", "Two things!", "Three?"]

    def test_abbreviations_initials_and_decimals(self) -> None:
        text = "Dr. Smith paid $3.5 million in 1999. The U.S. Army agreed with J. Doe. It ended."
        assert split_sentences(text) == [
            "Dr. Smith paid $3.5 million in 1999.",
            "The U.S. Army agreed with J. Doe.",
            "It ended.",
        ]

    def test_numbers_are_never_cut(self) -> None:
        text = "It cost 1,000.50 dollars. Version 2.0.1 shipped. See No. 5 for details."
        assert split_sentences(text) == ["It cost 1,000.50 dollars.", "Version 2.0.1 shipped.",
                                         "See No. 5 for details."]

    def test_quoted_span_is_not_split(self) -> None:
        text = 'He said "Stop. Now. Please." and left. Then it rained.'
        assert split_sentences(text) == ['He said "Stop. Now. Please." and left.', "Then it rained."]

    def test_lowercase_continuation_is_not_a_boundary(self) -> None:
        assert split_sentences("See e.g. the appendix. Fine.") == ["See e.g. the appendix.", "Fine."]

    def test_list_items_and_blank_lines(self) -> None:
        text = "Steps:\n- first item\n- second item\n\nDone here."
        assert split_sentences(text) == ["Steps:", "- first item", "- second item", "Done here."]

    def test_fenced_code_block_is_one_unit(self) -> None:
        text = "Intro here.\n\n```python\nx = 1. \ny = 2\n\nz = 3\n```\nAfter code. Done."
        assert split_sentences(text) == ["Intro here.", "```python\nx = 1. \ny = 2\n\nz = 3\n```", "After code.",
                                         "Done."]

    def test_code_lines_are_whole_units(self) -> None:
        text = "Run it:\n    foo(). Bar()\n    baz();\nThen stop. Next."
        assert split_sentences(text) == ["Run it:", "foo(). Bar()", "baz();", "Then stop.", "Next."]

    def test_inline_code_is_not_split(self) -> None:
        assert split_sentences("Call `a. B()` first. Then go.") == ["Call `a. B()` first.", "Then go."]

    def test_trailing_whitespace_belongs_to_sentence(self) -> None:
        assert sentence_spans("Ab cd.  Ef gh.") == [(0, 8), (8, 14)]

    @settings(max_examples=100, deadline=None)
    @given(st.text(alphabet=st.sampled_from(list("ab AB.!?\n\"`;{}1,2:-*\t")), max_size=120))
    def test_spans_are_gapless_and_ordered(self, text: str) -> None:
        spans = sentence_spans(text)
        assert "".join(text[a:b] for a, b in spans) == text
        assert all(a < b for a, b in spans)
        assert all(spans[i][1] == spans[i + 1][0] for i in range(len(spans) - 1))


class TestLinearSplitterMatchesReference:
    """The linear rewrite gives exactly the spans of the former regex splitter on ordinary text."""

    def test_varied_prose(self) -> None:
        for text in _PROSE:
            assert sentence_spans(text) == list(old_sentence_spans(text)), text

    @settings(max_examples=400, deadline=None)
    @given(st.lists(st.sampled_from(list("ab AB.!?\n\"`;{}1,2:-*\t“”~)'’…") + [
        "```", "~~~", "\n```\n", "    ", "Dr.", " e.g. ", "\n- ", "\n\n"]), max_size=60).map("".join))
    def test_tricky_alphabet(self, text: str) -> None:
        assert_refines_reference(text)
        if "\n" not in text:
            assert sentence_spans(text) == list(old_sentence_spans(text)) if text else sentence_spans(text) == []
        assert _fences(text) == old_fences(text)
        assert sorted(_inline_and_quoted(text)) == sorted(old_inline_and_quoted(text))

    @settings(max_examples=200, deadline=None)
    @given(st.lists(st.sampled_from(['"', "“", "”", "\n", "a" * 97, "a" * 150, "a", ". B", "```\n", " ~~~", "`"]),
                    max_size=30).map("".join))
    def test_quotes_near_the_400_character_limit(self, text: str) -> None:
        assert sorted(_inline_and_quoted(text)) == sorted(old_inline_and_quoted(text))
        assert_refines_reference(text)
        if "\n" not in text:
            assert sentence_spans(text) == list(old_sentence_spans(text)) if text else sentence_spans(text) == []

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.sampled_from(list("ab AB.!?\"`;{}1,2:-*\t“”~)'’…") + ["Dr.", " e.g. ", "    ", "3.5", "U.S."]),
                    max_size=60).map("".join))
    def test_one_line_text_keeps_its_old_spans_exactly(self, text: str) -> None:
        """Without a line break none of the line rules applies: ASCII text is split exactly as before."""
        assert sentence_spans(text) == list(old_sentence_spans(text)) if text else sentence_spans(text) == []


def _cuts(spans: list[tuple[int, int]] | tuple[tuple[int, int], ...]) -> set[int]:
    return {a for a, _ in spans if a > 0}


def assert_refines_reference(text: str) -> None:
    """The rules for every script and for line units only add boundaries: every cut of the reference splitter is
    still a cut, and each new one starts a line (a table row, the line after a list item or a short line)."""
    if not text:
        return
    new, old = _cuts(sentence_spans(text)), _cuts(old_sentence_spans(text))
    assert old <= new, (text, sorted(old - new))
    for cut in new - old:
        before = text[:cut]
        assert "\n" in before[len(before.rstrip()):], (text, cut)


class TestHostileInputs:
    """Inputs that were quadratic: each took seconds (quadratic); sized here to run in milliseconds after the fix."""

    def test_run_of_dots(self) -> None:
        text = "." * 40_000 + "x"
        assert sentence_spans(text) == [(0, len(text))]

    def test_runs_of_mixed_marks_and_closers(self) -> None:
        text = "Hi" + "!?" * 20_000 + '"' * 20_000 + " end. Next one."
        assert split_sentences(text)[-1] == "Next one."

    def test_many_quoted_spans(self) -> None:
        text = 'He said "yes." Then. ' * 10_000
        spans = sentence_spans(text)
        assert len(spans) == 10_000
        assert text[spans[0][0]:spans[0][1]] == 'He said "yes." Then. '

    def test_many_fences(self) -> None:
        text = "```\n~~~\n" * 10_000 + "x"
        assert "".join(text[a:b] for a, b in sentence_spans(text)) == text
        assert len(_fences(text)) == 6_667  # opener, one line inside, closer

    def test_run_of_curly_openers(self) -> None:
        assert _inline_and_quoted("“" * 100_000) == []


def test_normalize_text() -> None:
    assert normalize_text("  Hello\n  WORLD ") == "hello world"


def test_normalize_text_fast_path_matches_regex_version() -> None:
    import re
    import unicodedata

    def old(text: str) -> str:  # the previous implementation
        return re.sub(r"\s+", " ", unicodedata.normalize("NFKC", text)).strip().lower()

    samples = [
        "Ｃａｆé naïve — 東京 タワー　は 高い ; ΣΊΣΥΦΟΣ façade ﬁ ½ İstanbul Straße",
        "\u00a0lead\u2003em\u2028line\u2029para\x1c\x1d\x1e\x1f\x85next\u180e\u200b\ufeff end\t\r\n",
        "  MiXeD\v\fcase  \n\n  ",
        "",
    ]
    for text in samples:
        assert normalize_text(text) == old(text)
    chars = [chr(c) for c in range(0x3000 + 1) if unicodedata.category(chr(c)) != "Cs"]
    assert normalize_text(" ".join(chars)) == old(" ".join(chars))


_OLD_BOUNDARY = r"""(?<![.!?…])[.!?…]++["'”’)\]]*+(?=\s)|\n\s*\n|\n(?=[ \t]*(?:[-*•]|\d+[.)])\s)"""


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(list("aB1 .!?…\n\t\"'”’)]-*•") + ["..", "\n\n", " \n ", "2)", "3.", "\n- "]),
                max_size=40).map("".join))
def test_boundary_pattern_matches_like_its_three_branch_form(text: str) -> None:
    """``_BOUNDARY`` matches its first character before telling the branches apart (5x faster); the matches must be
    those of the plain three-branch pattern its comment gives."""
    import re

    from ragtrim.text.sentences import _BOUNDARY

    assert [m.span() for m in _BOUNDARY.finditer(text)] == [m.span() for m in re.finditer(_OLD_BOUNDARY, text)]


# -- every script ---------------------------------------------------------------------------------------------------
def _starts(text: str) -> list[int]:
    return [a for a, _ in sentence_spans(text)]


def _exact_sentences(text: str, starts: list[int]) -> int:
    """Reference sentences whose start and end are both cuts of ``sentence_spans`` (the end: the next start)."""
    got = set(_starts(text)) | {len(text)}
    bounds = [*starts, len(text)]
    return sum(1 for a, b in pairwise(bounds) if a in got and b in got and not any(a < c < b for c in got))


class TestEveryScript:
    @pytest.mark.parametrize(("lang", "text", "starts"), multilingual_reference.cases())
    def test_dev_reference(self, lang: str, text: str, starts: list[int]) -> None:
        """The hand-checked reference the rules were tuned on: every sentence exact."""
        assert _starts(text) == starts, [text[a:b] for a, b in sentence_spans(text)]

    def test_heldout_reference(self) -> None:
        """Written after the rules were tuned, never tuned on: 20 of 21 texts and 47 of 49 sentences exact; the miss
        is French "8 h. Élodie", where a lone cased letter before a full stop reads as an initial."""
        cases = multilingual_heldout.cases()
        missed = [lang for lang, text, starts in cases if _starts(text) != starts]
        exact = sum(_exact_sentences(text, starts) for _, text, starts in cases)
        assert (missed, exact, multilingual_heldout.n_sentences()) == (["fr"], 47, 49)

    def test_korean_sentences_start_with_a_caseless_letter(self) -> None:
        assert split_sentences("서울은 수도이다. 인구는 940만 명이다! 정말? 그렇다.") == [
            "서울은 수도이다.", "인구는 940만 명이다!", "정말?", "그렇다."]

    def test_a_syllable_before_a_full_stop_is_not_an_initial(self) -> None:
        assert split_sentences("결정했다. 다. 그래서 떠났다.") == ["결정했다.", "다.", "그래서 떠났다."]
        assert split_sentences("We met J. Smith. He left.") == ["We met J. Smith.", "He left."]

    def test_cased_letters_of_every_script_start_a_sentence(self) -> None:
        assert split_sentences("Ankara başkenttir. İstanbul büyüktür.") == ["Ankara başkenttir.", "İstanbul büyüktür."]
        assert split_sentences("Byli jsme v Krakowie. Łódź też.") == ["Byli jsme v Krakowie.", "Łódź też."]
        assert split_sentences("Это, т. е. столица, город. Да.") == ["Это, т. е. столица, город.", "Да."]

    def test_stops_without_a_space(self) -> None:
        assert split_sentences("北京是中国的首都。它有三千多年的历史。你去过吗？去过！") == [
            "北京是中国的首都。", "它有三千多年的历史。", "你去过吗？", "去过！"]
        assert split_sentences("भारत एक देश है।इसकी राजधानी दिल्ली है।") == ["भारत एक देश है।", "इसकी राजधानी दिल्ली है।"]
        assert split_sentences("価格は１．５万円です。本当!そうだ。") == ["価格は１．５万円です。", "本当!", "そうだ。"]

    def test_corner_bracket_quotes_are_protected(self) -> None:
        assert split_sentences("彼は「明日来ます。待って。」と言った。会議は終わった。") == [
            "彼は「明日来ます。待って。」と言った。", "会議は終わった。"]
        assert split_sentences("「行きます。」彼は出た。") == ["「行きます。」", "彼は出た。"]

    def test_an_ellipsis_is_a_pause_before_a_caseless_letter(self) -> None:
        assert split_sentences("글쎄... 잘 모르겠다. 내일 보자.") == ["글쎄... 잘 모르겠다.", "내일 보자."]
        assert split_sentences("Well... Maybe not.") == ["Well...", "Maybe not."]

    def test_thai_units_are_separated_by_spaces(self) -> None:
        assert split_sentences("ภาษาไทยไม่มีการเว้นวรรค แต่เว้นวรรคระหว่างประโยค") == [
            "ภาษาไทยไม่มีการเว้นวรรค", "แต่เว้นวรรคระหว่างประโยค"]

    def test_other_scripts_spaced_stops(self) -> None:
        assert split_sentences("هل زرتها؟ نعم.") == ["هل زرتها؟", "نعم."]
        assert split_sentences("Την έχετε επισκεφθεί\u037e Ναι.") == ["Την έχετε επισκεφθεί\u037e", "Ναι."]

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.sampled_from(list("가나다 AB.!?。！？।「」“”\"\n`;1,2|\t") + ["Łódź", "İstanbul", "Dr.", "…", "ก ข",
                                                                             "\n- ", "\n| a |"]),
                    max_size=60).map("".join))
    def test_spans_are_gapless_in_every_script(self, text: str) -> None:
        spans = sentence_spans(text)
        assert "".join(text[a:b] for a, b in spans) == text
        assert all(a < b for a, b in spans)


class TestLineUnits:
    """Table rows and list items are units the compressor can keep on their own (chunk shapes that trap a sentence splitter)."""

    def test_markdown_table_rows(self) -> None:
        text = "Plans:\n| Plan | Limit |\n|---|---|\n| Basic | 10 GB |\n| Pro | 100 GB |\nThat is all."
        assert split_sentences(text) == ["Plans:", "| Plan | Limit |", "|---|---|", "| Basic | 10 GB |",
                                         "| Pro | 100 GB |", "That is all."]

    def test_tab_separated_rows(self) -> None:
        text = "plan\tlimit\nbasic\t10 GB\npro\t100 GB\nthe end"
        assert split_sentences(text) == ["plan\tlimit", "basic\t10 GB", "pro\t100 GB", "the end"]

    def test_rows_as_the_html_stage_renders_them(self) -> None:
        """One row a line, cells joined by a tab: each row is a unit, as a Markdown row is."""
        from ragtrim.html.markup import clean_fragment

        text = clean_fragment("<p>Plans:</p><table><tr><th>Plan</th><th>Limit</th></tr><tr><td>Basic</td>"
                              "<td>10 GB</td></tr><tr><td>Pro</td><td>100 GB</td></tr></table><p>End.</p>").text
        assert split_sentences(text) == ["Plans:", "Plan\tLimit", "Basic\t10 GB", "Pro\t100 GB", "End."]

    def test_a_title_stays_with_its_first_sentence(self) -> None:
        """One short line before a paragraph (NQ's "title\\ntext", a heading) is not a table: as before, it stays with
        the paragraph's first sentence."""
        text = "Eiffel Tower\nThe Eiffel Tower is a wrought-iron lattice tower in Paris, France. It is 330 m tall."
        first = "Eiffel Tower\nThe Eiffel Tower is a wrought-iron lattice tower in Paris, France."
        assert split_sentences(text) == [first, "It is 330 m tall."]
        assert split_sentences("Name\nAlice\nAge\n42") == ["Name", "Alice", "Age", "42"]

    def test_list_item_without_a_stop_ends_at_its_line(self) -> None:
        text = "Steps:\n- install it\n2) run it\nThen it works. Done."
        assert split_sentences(text) == ["Steps:", "- install it", "2) run it", "Then it works.", "Done."]

    def test_lower_case_continuations_stay_with_their_line(self) -> None:
        assert split_sentences("- a long item that\n  wraps onto a second line\nand prose") == [
            "- a long item that\n  wraps onto a second line\nand prose"]
        wrapped = ("This sentence is hard-wrapped at seventy-two columns like an email would\n"
                   "Be, and a capital after a long line does not end it.")
        assert split_sentences(wrapped) == [wrapped]

    def test_rows_inside_a_fence_stay_in_the_fence(self) -> None:
        text = "See:\n```\n| a | b |\nX\n```\nDone."
        assert split_sentences(text) == ["See:", "```\n| a | b |\nX\n```", "Done."]


class TestLinearInEveryScript:
    """Sized to run in well under a second when linear; each would take minutes if a scan were quadratic."""

    @pytest.mark.parametrize("text", [
        "北京是中国的首都" * 50_000, "。" * 100_000 + "x", "「" * 100_000, "「" + "あ" * 500 + "」" * 50_000,
        "ก ข " * 50_000, "A\n" * 100_000, "| a |\n" * 50_000, "a\tb\n" * 50_000, "- x\n" * 50_000,
        " " * 100_000 + "\nA", "다. " * 50_000,
    ])
    def test_hostile(self, text: str) -> None:
        spans = sentence_spans(text)
        assert "".join(text[a:b] for a, b in spans) == text


@pytest.mark.data
def test_english_corpora_keep_their_spans(shared_data: Path) -> None:
    """No regression on English: every NQ passage and SQuAD context is split exactly as by the reference
    splitter (2,608 texts), apart from a trailing newline now and then, which never moves a cut."""
    from ragtrim_bench.datasets.nq import load_nq_open
    from ragtrim_bench.datasets.squad import load_squad

    texts = [q.gold.text for q in load_nq_open()]
    texts += [c for a in load_squad() for c in a.paragraphs]
    differ = [t for t in texts if sentence_spans(t) != list(old_sentence_spans(t))]
    assert (len(texts), differ) == (2608, [])
