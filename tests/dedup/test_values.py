"""Values (numbers, dates, versions, amounts) and where two texts disagree on them: ``ragtrim.dedup.values``."""

from __future__ import annotations

import random
import time
from collections import Counter

import pytest

from ragtrim.dedup.values import ValueConflict, ValueIndex, number_counts, value_conflict, value_slots


def slots(text: str) -> dict[tuple[str, ...], set[str]]:
    return {k: set(v) for k, v in value_slots(text.splitlines()).items()}


class TestValueSlots:
    def test_empty_and_no_values(self) -> None:
        assert slots("") == {}
        assert slots("no numbers here, only words") == {}

    def test_number_with_both_contexts(self) -> None:
        assert slots("the free plan allows 60 requests per minute") == {
            ("<", "plan", "allows"): {"60"}, (">", "requests", "per"): {"60"}}

    def test_versions_amounts_dates_percentages(self) -> None:
        assert slots("ragtrim v2.5 adds streaming") == {("<", "|", "ragtrim"): {"2.5"}, (">", "adds", "streaming"): {"2.5"}}
        assert slots("it costs €49 per month") == {("<", "it", "costs"): {"€49"}, (">", "per", "month"): {"€49"}}
        # Context tokens are runs of letters and digits: "2024-03-01" is three of them there.
        assert slots("released on 2024-03-01 with 15% off") == {
            ("<", "released", "on"): {"2024-03-01"}, (">", "with", "15"): {"2024-03-01"},
            ("<", "01", "with"): {"15%"}, (">", "off", "|"): {"15%"}}

    def test_a_date_with_a_month_name_is_one_slot(self) -> None:
        assert slots("updated on march 3, 2019 by staff") == {
            ("<", "updated", "on"): {"march 3 2019"}, (">", "by", "staff"): {"march 3 2019"}}

    def test_identifiers_are_words_not_values(self) -> None:
        # "user4821" and "h2o" carry digits but are names; the date after them is the value.
        assert slots("posted by user4821 on 3 march 2019") == {("<", "user4821", "on"): {"3 march 2019"}}
        assert slots("h2o and co2 levels") == {}

    def test_han_and_kana_characters_are_the_context(self) -> None:
        assert slots("予算は3万円以内です。") == {("<", "算", "は"): {"3"}, (">", "万", "円"): {"3"}}

    def test_contexts_never_cross_lines(self) -> None:
        assert slots("limit\n60 requests") == {(">", "requests", "|"): {"60"}}

    def test_long_line_costs_no_more_than_a_scan(self) -> None:
        # Digits inside words ("w12345") start no value: the scan skips them in bulk.
        rng = random.Random(3)
        line = " ".join(f"w{rng.randrange(20000)}" for _ in range(200_000)) + " ends at 42"
        started = time.process_time()
        assert value_slots([line]) == {("<", "ends", "at"): frozenset({"42"})}
        assert time.process_time() - started < 5


class TestValueConflict:
    @pytest.mark.parametrize(
        ("a", "b", "described"),
        [
            ("the pro plan allows 600 requests per minute", "the pro plan allows 60 requests per minute",
             "600 vs 60 (after 'plan allows')"),
            ("ragtrim v2.6 adds streaming", "ragtrim v2.5 adds streaming", "2.6 vs 2.5 (after 'ragtrim')"),
            ("the window closes on 14 may 2025 at noon", "the window closes on 13 may 2025 at noon",
             "14 may 2025 vs 13 may 2025 (after 'closes on')"),
            ("a seat costs $49 per month", "a seat costs $39 per month", "$49 vs $39 (after 'seat costs')"),
            ("締め切りは5日です", "締め切りは6日です", "5 vs 6 (after 'りは')"),
        ],
    )
    def test_substituted_values_conflict(self, a: str, b: str, described: str) -> None:
        found = value_conflict(value_slots([a]), value_slots([b]))
        assert isinstance(found, ValueConflict)
        assert found.describe() == described

    def test_same_values_and_missing_values_do_not_conflict(self) -> None:
        a = value_slots(["in 1990 the city grew, and in 1995 the city shrank"])
        assert value_conflict(a, a) is None
        # A window that starts later lacks the first value: no value of its own in that context, no conflict.
        assert value_conflict(a, value_slots(["city grew, and in 1995 the city shrank"])) is None
        # The number unchanged beside a changed name: the context differs, no conflict.
        assert value_conflict(value_slots(["free: 60 requests"]), value_slots(["pro: 60 requests"])) is None

    def test_changed_name_beside_a_changed_number_still_conflicts(self) -> None:
        found = value_conflict(value_slots(["free: 60 requests per minute"]), value_slots(["pro: 600 requests per minute"]))
        assert found is not None and found.values == ("60", "600")


class TestValueIndex:
    def test_numbers_are_digit_runs_and_month_names(self) -> None:
        assert number_counts(["v2.5 on 3 march, may 2024", "user4821 and march"]) == Counter(
            {"2": 1, "5": 1, "3": 1, "2024": 1, "4821": 1, "march": 2, "may": 1})

    def test_conflict_needs_other_numbers_and_a_replaced_one(self) -> None:
        index = ValueIndex({
            0: ("the free plan allows 60 requests per minute",),
            1: ("the free plan allows 600 requests per minute",),
            2: ("the free plan allows 60 requests per minute",),
            3: ("cost 60 and fee 600",),
            4: ("fee 60 and cost 600",),  # the same numbers, swapped between the words
            5: ("the free plan allows 60 requests per minute, since 2019",),
        })
        found = index.conflict(1, 0)
        assert found is not None and found.describe() == "600 vs 60 (after 'plan allows')"
        assert index.conflict(0, 2) is None  # the same lines
        assert index.conflict(3, 4) is None  # the same numbers: judged by Jaccard alone (a documented limit)
        assert index.conflict(0, 5) is None  # a number only one of them has
