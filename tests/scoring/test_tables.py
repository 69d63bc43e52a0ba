from __future__ import annotations

import pytest

from ragtrim.errors import ConfigError
from ragtrim.scoring.bm25 import BM25Scorer, tokenize_sentence
from ragtrim.scoring.tables import TableRowsScorer, table_view
from tests.scoring.test_window import Recording

LINES = [
    "|  | Year Ended February 28, |  |  |",
    "|  | 2019 | 2018 | 2017 |",
    "| United States | 268,453 | 265,613 | 259,974 |",
    "| Europe, Middle East and Africa | 49,496 | 45,830 | 49,918 |",
    "| South America | 15,134 | 20,699 | 17,738 |",
    "| Canada | 9,815 | 14,958 | 8,412 |",
    "| Asia and Pacific Rim | 13,958 | 12,873 | 8,913 |",
]
REVENUE = "\n".join(LINES)
QUESTION = "What was the revenue from Canada in 2017?"


def terms(question: str) -> frozenset[str]:
    return frozenset(tokenize_sentence(question))


class TestTableView:
    def test_header_then_the_named_row_then_the_rest(self) -> None:
        view = table_view(terms(QUESTION), REVENUE).split("\n")
        assert view[:3] == [LINES[0], LINES[1], LINES[5]]
        assert sorted(view) == sorted(LINES)  # nothing lost, nothing added

    def test_best_rows_only(self) -> None:
        assert table_view(terms(QUESTION), REVENUE, rest=False).split("\n") == [LINES[0], LINES[1], LINES[5]]

    def test_rows_with_more_query_words_come_first(self) -> None:
        view = table_view(terms("South America and Canada sales in South America"), REVENUE, rest=False)
        assert view.split("\n") == [LINES[0], LINES[1], LINES[4], LINES[5]]
        capped = table_view(terms("South America and Canada"), REVENUE, best_rows=1, rest=False)
        assert capped.split("\n") == [LINES[0], LINES[1], LINES[4]]

    def test_other_texts_unchanged(self) -> None:
        prose = "Revenue from Canada was 8,412 in 2017. | a pipe | in prose |"
        assert table_view(terms(QUESTION), prose) is prose
        assert table_view(frozenset(), REVENUE) is REVENUE
        assert table_view(terms("dividends paid to holders"), REVENUE) is REVENUE  # no row holds a query word

    def test_tab_separated_tables(self) -> None:
        tabbed = "\n".join("\t".join(c.strip() for c in line.strip("|").split("|")) for line in LINES)
        view = table_view(terms(QUESTION), tabbed, rest=False).split("\n")
        assert view[-1].startswith("Canada\t")


class TestTableRowsScorer:
    def test_invalid(self) -> None:
        with pytest.raises(ConfigError, match="best_rows must be >= 1"):
            TableRowsScorer(scorer=Recording(), best_rows=0)  # type: ignore[arg-type]

    def test_score_and_prefetch_read_the_same_views(self) -> None:
        inner = Recording()
        scorer = TableRowsScorer(scorer=inner, rest=False)  # type: ignore[arg-type]
        texts = [REVENUE, "Canada is a country."]
        scorer.prefetch(QUESTION, texts)
        scores = scorer.score(QUESTION, texts)
        assert inner.read == inner.prefetched == [scorer.views(QUESTION, texts)]
        assert inner.read[0] == [table_view(terms(QUESTION), REVENUE, rest=False), texts[1]]
        assert scores == [float(len(v)) for v in inner.read[0]]
        assert scorer.score(QUESTION, []) == []

    def test_delegates_name_and_scripts(self) -> None:
        assert TableRowsScorer(scorer=Recording()).name == "table_rows(recording)"  # type: ignore[arg-type]
        short = TableRowsScorer(scorer=Recording(), rest=False)  # type: ignore[arg-type]
        assert short.name == "table_rows(recording, best only)"
        assert short.scripts_read() == frozenset({"latin"})

    def test_bm25_on_the_best_rows_is_not_diluted_by_the_rest_of_the_table(self) -> None:
        """BM25 over a whole long table weighs its one matching row against every other row (length
        normalisation); over the header and that row it does not."""
        filler = [f"| Segment {i} | {i},000 | {i},100 | {i},200 |" for i in range(40)]
        long_table = "\n".join([*LINES[:2], *filler, LINES[5]])
        short_text = "Sales in Canada were reported with the other regions."
        whole = BM25Scorer().score(QUESTION, [long_table, short_text])
        rows = TableRowsScorer(scorer=BM25Scorer(), rest=False).score(QUESTION, [long_table, short_text])
        assert rows[0] / rows[1] > 1.5 * whole[0] / whole[1]


def test_the_balanced_recipes_read_tables_by_their_rows() -> None:
    from ragtrim.scoring.auto import balanced_scorer
    from ragtrim.vectors.index import embedders_of

    default = balanced_scorer("onnxruntime-int8-cpu")
    assert "table_rows(bm25, best only)" in default.name and "table_rows(onnx-int8" in default.name
    assert "table_rows" not in balanced_scorer("onnxruntime-int8-cpu", tables=False).name
    assert len(embedders_of(default)) == 1  # the model under the view is still found (caches, vector store)
