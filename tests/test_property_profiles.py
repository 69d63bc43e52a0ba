"""The property tests' profiles (tests/conftest.py): `make test` draws the same cases on every run, `make
test-property` new ones."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, is_hypothesis_test, settings
from hypothesis import strategies as st


def test_the_default_run_draws_fixed_cases(request: pytest.FixtureRequest) -> None:
    if os.environ.get("HYPOTHESIS_PROFILE") or request.config.getoption("--hypothesis-profile"):
        pytest.skip("a profile was chosen for this run")
    assert settings.get_current_profile_name() == "ci"
    assert settings().derandomize is True
    assert settings().database is None  # nothing of one run changes the next


def test_the_explore_profile_draws_new_cases() -> None:
    explore = settings.get_profile("explore")
    assert explore.derandomize is False


@given(st.integers())
def test_a_property(n: int) -> None:
    assert int(str(n)) == n


def test_every_property_test_is_marked(request: pytest.FixtureRequest) -> None:
    properties = [item for item in request.session.items if is_hypothesis_test(getattr(item, "obj", None))]
    assert properties  # at least test_a_property above
    unmarked = [item.nodeid for item in properties if item.get_closest_marker("property") is None]
    assert unmarked == []
    plain = [item for item in request.session.items if not is_hypothesis_test(getattr(item, "obj", None))]
    assert all(item.get_closest_marker("property") is None for item in plain)
