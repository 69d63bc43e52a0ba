"""Keep the public namespace honest: everything in __all__ exists, it is sorted, and nothing public is missing."""

from __future__ import annotations

import ragtrim


def test_all_sorted_and_unique() -> None:
    assert list(ragtrim.__all__) == sorted(set(ragtrim.__all__))


def test_all_members_resolve() -> None:
    for name in ragtrim.__all__:
        assert getattr(ragtrim, name) is not None, name


def test_no_unlisted_public_names() -> None:
    public = {n for n in vars(ragtrim) if not n.startswith("_")}
    modules = {n for n in public if type(getattr(ragtrim, n)).__name__ == "module"}
    extra = public - set(ragtrim.__all__) - modules - {"annotations", "importlib", "Any"}
    assert not extra, f"public names missing from __all__: {sorted(extra)}"
