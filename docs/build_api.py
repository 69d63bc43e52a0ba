"""Build the API reference (HTML, with pdoc) from ragtrim's docstrings: ``python docs/build_api.py [-o DIR]``.

Every public module of the installed ``ragtrim`` package is documented (private ``_*`` modules and ``__main__`` are
not). A module that cannot be imported because an optional extra is missing is left out and named on stdout; any
other import error, and any pdoc warning (an ``__all__`` name that does not resolve, a docstring pdoc cannot parse),
fails the build with exit code 1. ``make docs`` runs this; ``tests/test_api_docs.py`` runs it in CI.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import warnings
from pathlib import Path

ANNOTATION_AS_TEXT = "Error parsing type annotation"


def public_modules(package: str = "ragtrim") -> tuple[list[str], list[str]]:
    """(importable public modules, "module: missing package" for those an absent optional extra keeps out)."""
    root = importlib.import_module(package)
    found = [package]
    skipped: list[str] = []
    for info in pkgutil.walk_packages(root.__path__, f"{package}.", onerror=lambda name: None):
        if any(part.startswith("_") for part in info.name.split(".")[1:]):
            continue  # private modules and __main__ (which would run the CLI on import)
        try:
            importlib.import_module(info.name)
        except ImportError as exc:
            missing = exc.name or getattr(exc, "package", "")  # ragtrim's MissingDependencyError names .package
            if missing.split(".")[0] == package or not missing:
                raise  # a broken import inside ragtrim is a real error, not a missing extra
            skipped.append(f"{info.name}: needs {missing}")
            continue
        found.append(info.name)
    return found, skipped


def resolve_lazy_exports(package: str = "ragtrim") -> None:
    """Bind the names ``package`` exports lazily (``__getattr__``) so pdoc documents them where users import them."""
    module = importlib.import_module(package)
    for name in getattr(module, "__all__", ()):
        if name not in vars(module) and hasattr(module, name):  # a name that does not resolve: pdoc reports it
            setattr(module, name, getattr(module, name))


def build(output: Path, package: str = "ragtrim") -> list[str]:
    """Write the HTML reference of ``package`` under ``output``; returns the modules left out for missing extras,
    and notes."""
    from pdoc import doc, render

    names, skipped = public_modules(package)
    for name in names:  # ragtrim and any subpackage that exports lazily (ragtrim.gate)
        resolve_lazy_exports(name)
    # No source listings: half the time and size, and the source is in the repository.
    render.configure(docformat="restructuredtext", footer_text=f"{package} API reference", search=True,
                     show_source=False)
    # pdoc.pdoc() would walk each package's submodules itself, and follows a package's __all__ (ragtrim's lists
    # names, not submodules); rendering the list above module by module documents exactly those modules.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        modules = {name: doc.Module.from_name(name) for name in names}
        pages = {name: render.html_module(module, modules) for name, module in modules.items()}
        index, search = render.html_index(modules), render.search_index(modules)
    messages = [str(w.message) for w in caught]
    # An annotation that is valid for mypy but not subscriptable at run time (argparse._SubParsersAction[...]) is
    # shown as its text: harmless. Any other warning is a broken reference: fail rather than ship it.
    notes = [m for m in messages if m.startswith(ANNOTATION_AS_TEXT)]
    fatal = [m for m in messages if not m.startswith(ANNOTATION_AS_TEXT)]
    if fatal:
        raise RuntimeError(f"pdoc warned {len(fatal)} time(s); first: {fatal[0]}")
    for name, html in pages.items():
        path = output / f"{name.replace('.', '/')}.html"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(html, encoding="utf-8")
    (output / "index.html").write_text(index, encoding="utf-8")
    (output / "search.js").write_text(search, encoding="utf-8")
    return skipped + [f"note: {m}" for m in notes]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", default="docs/api", help="output folder (default docs/api, not committed)")
    parser.add_argument("--package", default="ragtrim", help="package to document (default ragtrim)")
    args = parser.parse_args(argv)
    try:
        import pdoc  # noqa: F401
    except ImportError:  # the dev extra has it
        print("building the API reference needs pdoc: pip install -e '.[dev]'", file=sys.stderr)
        return 2
    out = Path(args.output)
    try:
        skipped = build(out, args.package)
    except Exception as exc:  # noqa: BLE001 - one line on stderr, exit 1: the build failed
        print(f"API reference build failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    for line in skipped:
        print(line if line.startswith("note: ") else f"left out (optional extra not installed): {line}")
    print(f"API reference written to {out}/index.html")
    return 0


if __name__ == "__main__":
    sys.exit(main())
