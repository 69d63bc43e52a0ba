"""Which units travel together: table rows with their header, caption and section rows; clauses with headings."""

from __future__ import annotations

from ragtrim.text.structure import cells, dependencies, is_heading, is_table_row


class TestTables:
    def test_markdown_table_with_caption(self) -> None:
        units = ["Plans and their limits:", "| Plan | Limit |", "|---|---|", "| Basic | 10 GB |", "| Pro | 200 GB |"]
        assert dependencies(units) == [(), (0, 2), (0, 1), (0, 1, 2), (0, 1, 2)]

    def test_pipe_table_with_two_header_rows_and_sections(self) -> None:
        units = ["|  | Level 1 | Total |", "|  | RMB'Million | RMB'Million |", "| As at 2019 |  |  |",
                 "| FVPL | 14,766 | 135,936 |", "| As at 2018 |  |  |", "| FVPL | 10,875 | 97,877 |"]
        assert dependencies(units) == [(1,), (0,), (0, 1), (0, 1, 2), (0, 1), (0, 1, 4)]

    def test_a_row_of_year_labels_under_the_first_row_is_a_header_row(self) -> None:
        units = ["|  |  | December 31, |  |", "| (in thousands of $) | 2018 | 2017 | Change |",
                 "| Share of net earnings | 7,001 | 17,702 | (10,701) |", "| Impairment | 1 | 2 | 3 |"]
        assert dependencies(units) == [(1,), (0,), (0, 1), (0, 1)]
        # a row with another figure, or without a year, is data
        assert dependencies(["| Plan | Limit | Since |", "| Pro | 200 GB | 2019 |"]) == [(), (0,)]
        assert dependencies(["| Plan | Basic | Pro |", "| Support | Email | Phone |"]) == [(), (0,)]
        assert dependencies(["| € million | 2017/2018 | 2018/2019 |", "| Revenue | FY2019 | FY 2018 |",
                             "| Wages | 2,173 | 2,264 |"]) == [(1,), (0,), (0, 1)]

    def test_a_sentence_is_no_caption_and_tabs_are_rows(self) -> None:
        units = ["Revenue rose in every region.", "Region\tRevenue", "North\t12", "South\t9"]
        assert dependencies(units) == [(), (), (1,), (1,)]
        assert cells("North\t12") == ["North", "12"] and cells("| a |  | c |") == ["a", "", "c"]
        assert is_table_row("| a |") and is_table_row("a\tb") and not is_table_row("a b")

    def test_a_table_in_the_middle_of_text(self) -> None:
        units = ["Intro.", "Fees by year", "| Year | Fee |", "| 2019 | 5 |", "Closing words."]
        assert dependencies(units) == [(), (), (1,), (1, 2), ()]


class TestHeadings:
    def test_is_heading(self) -> None:
        for text in ("10.7 Governing Law.", "ARTICLE 5 - TERM", "# Fees", "GOVERNING LAW", "Section 3 Payment",
                     "IV. Remedies", "Article 12 Miscellaneous"):
            assert is_heading(text), text
        long_line = "10 apples were sold by the company in the north of the country last year to buyers"
        for text in ("This Agreement is governed by the laws of New York.", "| 10.7 | x |", long_line, "OK",
                     "10 apples were sold.", "I. M. Pei drew it.", "J. K. Rowling wrote it."):
            assert not is_heading(text), text

    def test_clause_body_needs_its_heading_and_the_heading_its_first_unit(self) -> None:
        units = ["10.6 Notices.", "Notices are written.", "10.7 Governing Law.", "New York law applies.",
                 "Venue is Manhattan."]
        assert dependencies(units) == [(1,), (0,), (3,), (2,), (2, 3)]

    def test_consecutive_headings_and_empty_input(self) -> None:
        assert dependencies(["1. Services.", "1.1 Scope.", "The provider serves."]) == [(), (2,), (1,)]
        assert dependencies([]) == []
