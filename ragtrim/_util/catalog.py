"""Builds ``ragtrim/_catalog.py``, the one table of where things live, from the source itself: the module of each
lazily imported public name of ``ragtrim``, of each registered component type and of each named scorer.

Run ``python -m ragtrim._util.catalog`` after moving or adding one; ``tests/test_catalog.py`` fails while the file is
stale. Reads source text only (``ast``): nothing is imported.
"""

from __future__ import annotations

import ast
import importlib.resources
import json
import sys
from collections.abc import Iterator
from pathlib import Path

from ragtrim.errors import RagtrimError

PACKAGE = Path(str(importlib.resources.files("ragtrim")))
OUTPUT = PACKAGE / "_catalog.py"

_HEADER = '''"""Where ragtrim's lazily loaded names live: generated from the source by ``python -m ragtrim._util.catalog``
(``tests/test_catalog.py`` fails while it is stale). Never edit it by hand.

``PUBLIC``: each name ``ragtrim`` exports lazily -> its module. ``COMPONENTS``: kind -> registered type name -> its
module (``ragtrim.components``). ``NAMED_SCORERS``: scorer name -> the module of its factory
(``ragtrim.scoring.registry``).
"""

'''


def _modules(package: Path) -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(package.rglob("*.py")):
        if path == OUTPUT or "__pycache__" in path.parts:
            continue
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        yield ".".join(parts), ast.parse(path.read_text(encoding="utf-8"), str(path))


def _str_args(call: ast.expr, func: str) -> tuple[str, ...] | None:
    """The string arguments of a decorator call ``func("a", "b")``, or None for another decorator."""
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == func):
        return None
    args = tuple(a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str))
    return args if len(args) == len(call.args) else None


def _class_name_attr(node: ast.ClassDef) -> str | None:
    """The ``name = "..."`` class attribute a ``@register_stage`` class registers under."""
    for stmt in node.body:
        target = stmt.target if isinstance(stmt, ast.AnnAssign) else (
            stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else None)
        value = stmt.value if isinstance(stmt, (ast.AnnAssign, ast.Assign)) else None
        if isinstance(target, ast.Name) and target.id == "name" and isinstance(value, ast.Constant):
            return str(value.value)
    return None


def _top_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def _public_names(init: ast.Module) -> tuple[list[str], set[str]]:
    """``__all__`` of ``ragtrim/__init__.py`` and the names it binds itself (imports, definitions)."""
    exported: list[str] = []
    bound = _top_level_names(init)
    for node in init.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            exported = [str(name) for name in ast.literal_eval(node.value)]
        elif isinstance(node, ast.ImportFrom):
            bound.update(a.asname or a.name for a in node.names)
    return exported, bound


class CatalogError(RagtrimError):
    """The source does not give one unambiguous home for a name."""


def build(package: Path = PACKAGE) -> dict[str, dict[str, object]]:
    """The catalog as data: ``{"PUBLIC": {...}, "COMPONENTS": {...}, "NAMED_SCORERS": {...}}``."""
    modules = dict(_modules(package))
    components: dict[str, dict[str, str]] = {}
    named: dict[str, str] = {}
    defined: dict[str, list[str]] = {}
    for module, tree in modules.items():
        for name in _top_level_names(tree):
            defined.setdefault(name, []).append(module)
        for node in tree.body:
            if not isinstance(node, (ast.ClassDef, ast.FunctionDef)):
                continue
            for deco in node.decorator_list:
                reg = _str_args(deco, "register")
                if reg is not None and len(reg) == 2:
                    components.setdefault(reg[0], {})[reg[1]] = module
                if isinstance(deco, ast.Name) and deco.id == "register_stage" and isinstance(node, ast.ClassDef):
                    stage = _class_name_attr(node)
                    if stage is None:
                        raise CatalogError(f"{module}.{node.name}: @register_stage needs a literal name attribute")
                    components.setdefault("stage", {})[stage] = module
                scorer = _str_args(deco, "named_scorer")
                if scorer is not None and len(scorer) == 1:
                    named[scorer[0]] = module
    exported, bound = _public_names(modules[package.name])
    public: dict[str, str] = {}
    for name in exported:
        if name in bound or name.startswith("__"):
            continue
        homes = defined.get(name, [])
        if len(homes) != 1:
            raise CatalogError(f"ragtrim.__all__ names {name!r}, defined in {homes or 'no module'}; it needs "
                               "exactly one")
        public[name] = homes[0]
    return {
        "PUBLIC": dict(sorted(public.items())),
        "COMPONENTS": {kind: dict(sorted(table.items())) for kind, table in sorted(components.items())},
        "NAMED_SCORERS": dict(sorted(named.items())),
    }


def render(catalog: dict[str, dict[str, object]]) -> str:
    """The text of ``_catalog.py`` for ``catalog``."""
    lines = [_HEADER.rstrip("\n"), "", "from __future__ import annotations", ""]
    types = {"PUBLIC": "dict[str, str]", "COMPONENTS": "dict[str, dict[str, str]]", "NAMED_SCORERS": "dict[str, str]"}
    for key, table in catalog.items():
        lines.append(f"{key}: {types[key]} = {{")
        for name, value in table.items():
            if isinstance(value, dict):
                lines.append(f"    {json.dumps(name)}: {{")
                lines += [f"        {json.dumps(k)}: {json.dumps(v)}," for k, v in value.items()]
                lines.append("    },")
            else:
                lines.append(f"    {json.dumps(name)}: {json.dumps(value)},")
        lines += ["}", ""]
    return "\n".join(lines)


def main() -> int:
    OUTPUT.write_text(render(build()), encoding="utf-8")
    print(f"wrote {OUTPUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
