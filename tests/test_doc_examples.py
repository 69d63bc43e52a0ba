"""Every Python block of README.md and docs/*.md, and every script in examples/, runs under the extras it names and
nothing else: a fresh interpreter in which every installed package outside ragtrim's core, the named extras (with
what they pull in) and the packages a block says it needs cannot be imported.

A block says what it runs with in an HTML comment on the line before its fence (invisible on the rendered page):

    <!-- example: extras=langchain needs=langchain-classic given=base,docs,query -->
    <!-- example: continues -->          (runs after the page's previous block, in the same process)
    <!-- example: not run (why) -->      (a sketch: a config to fill in, a model you do not have)

``given`` names what the reader already has (``docs``, ``vectorstore``, ...): the test defines it (``GIVEN``) before
the block. No comment: the core install, nothing given. An example script says the same in a comment line
``# example: extras=... args=...``.
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import re
import subprocess
import sys
import textwrap
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
EXAMPLES = sorted(p for p in (ROOT / "examples").glob("*.py") if p.name != "build_corpus.py")
_FENCE = re.compile(r"^(?P<indent>[ \t]*)```python\n(?P<code>.*?)^(?P=indent)```", re.DOTALL | re.MULTILINE)
_MARK = re.compile(r"<!-- example: (?P<spec>.*?) -->\s*$")

GIVEN: dict[str, str] = {
    "chunks": 'chunks = ["<p>The Eiffel Tower is 330 metres tall.</p>", "The Eiffel Tower is 330 metres tall.", '
              '"Gustave Eiffel\'s company built it in 1889.", "Paris is the capital of France."]',
    "messages": 'messages = [{"role": "user" if i % 2 == 0 else "assistant", "turn_id": f"t{i}", "content": '
                'f"Turn {i}: I prefer short answers; the deadline is Friday {i}."} for i in range(12)]',
    "messages_now": 'messages_now = messages + [{"role": "user", "turn_id": "t12", "content": "And now?"}]',
    "q": 'q = "When is the deadline?"',
    "previous_state": "previous_state = None",
    "query": 'query = "How often are lifecycle rules evaluated?"',
    "lc_docs": ("from langchain_core.documents import Document\n"
                'docs = [Document(page_content=t, id=f"d{i}") for i, t in enumerate(["<nav>Home</nav><p>Lifecycle '
                'rules are evaluated once a day.</p>", "Lifecycle rules are evaluated once a day.", '
                '"Buckets hold objects."])]'),
    "vectorstore": ("from langchain_core.documents import Document\n"
                    "from langchain_core.embeddings import DeterministicFakeEmbedding\n"
                    "from langchain_core.vectorstores import InMemoryVectorStore\n"
                    "vectorstore = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))\n"
                    'vectorstore.add_documents([Document(page_content=t) for t in ["Lifecycle rules are evaluated '
                    'once a day.", "Buckets hold objects.", "Lifecycle rules are evaluated once a day."]])\n'
                    "store = vectorstore"),
    "base": "base = vectorstore.as_retriever()",
    "lc_retriever": ("from ragtrim.integrations.langchain import RagtrimRetriever\n"
                     "retriever = RagtrimRetriever(base_retriever=vectorstore.as_retriever(), budget=1500)"),
    "li_index": ("from llama_index.core import Document, SummaryIndex, Settings\n"
                 "from llama_index.core.llms import MockLLM\n"
                 "Settings.llm = MockLLM()\n"
                 'index = SummaryIndex.from_documents([Document(text=t) for t in ["Lifecycle rules are evaluated '
                 'once a day.", "Buckets hold objects."]])\n'
                 "nodes = index.as_retriever().retrieve('lifecycle')"),
    "hs_store": ("from haystack import Document\n"
                 "from haystack.document_stores.in_memory import InMemoryDocumentStore\n"
                 "store = InMemoryDocumentStore()\n"
                 'docs = [Document(content=t) for t in ["<p>Lifecycle rules are evaluated once a day.</p>", '
                 '"Buckets hold objects.", "Lifecycle rules are evaluated once a day."]]\n'
                 "store.write_documents(docs)\n"
                 'template = "{% for d in documents %}{{ d.content }}\\n{% endfor %}Question: {{ query }}"'),
    "config_json": "import shutil; shutil.copy(GEMMA_CONFIG, 'config.json')",
}


@dataclass
class Block:
    where: str
    code: str
    extras: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()
    given: tuple[str, ...] = ()
    skip: str = ""
    continues: bool = False
    args: tuple[str, ...] = ()
    before: list[Block] = field(default_factory=list)


def _spec(block: Block, spec: str) -> None:
    if spec.startswith("not run"):
        block.skip = spec.removeprefix("not run").strip(" ()") or "not meant to run"
        return
    for item in spec.split():
        key, _, value = item.partition("=")
        if key == "continues":
            block.continues = True
        elif key in ("extras", "needs", "given", "args"):
            setattr(block, key, tuple(v for v in value.split(",") if v))
        else:
            raise AssertionError(f"{block.where}: unknown example spec {item!r}")


def page_blocks() -> list[Block]:
    blocks: list[Block] = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        previous: Block | None = None
        for m in _FENCE.finditer(text):
            line = text[: m.start()].count("\n") + 1
            block = Block(f"{page.relative_to(ROOT)}:{line}", textwrap.dedent(m.group("code")))
            before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
            mark = _MARK.search(before)
            if mark:
                _spec(block, mark.group("spec"))
            if block.continues:
                assert previous is not None, f"{block.where}: 'continues' needs a block before it"
                block.before = [*previous.before, previous]
            blocks.append(block)
            previous = block
    return blocks


def example_scripts() -> list[Block]:
    out = []
    for path in EXAMPLES:
        block = Block(str(path.relative_to(ROOT)), "")
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("# example: "):
                _spec(block, line.removeprefix("# example: "))
        out.append(block)
    return out


# -- what an install of some extras can import ------------------------------------------------------------------------
def _closure(names: list[str]) -> set[str]:
    """The installed distributions ``names`` stand for, with everything they require (their own extras left out)."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        req = Requirement(todo.pop())
        name = canonicalize_name(req.name)
        if name in seen:
            continue
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        seen.add(name)
        for raw in dist.requires or ():
            sub = Requirement(raw)
            if sub.marker is None or sub.marker.evaluate({"extra": ""}):
                todo.append(raw)
        for extra in req.extras:
            todo.extend(r for r in dist.requires or () if Requirement(r).marker is not None
                        and Requirement(r).marker.evaluate({"extra": extra}))  # type: ignore[union-attr]
    return seen


@functools.cache
def blocked_modules(extras: tuple[str, ...], needs: tuple[str, ...]) -> list[str]:
    """Top-level modules of every installed distribution that ragtrim's core, ``extras`` and ``needs`` do not
    bring."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    wanted = list(project["dependencies"]) + list(needs)
    for extra in extras:
        wanted += [r for r in project["optional-dependencies"][extra] if not r.startswith("ragtrim[")]
        wanted += [r2 for r in project["optional-dependencies"][extra] if r.startswith("ragtrim[")
                   for e in Requirement(r).extras for r2 in project["optional-dependencies"][e]]
    allowed = _closure(wanted) | {"ragtrim"}
    blocked = set()
    for module, dists in importlib.metadata.packages_distributions().items():
        if module.isidentifier() and not any(canonicalize_name(d) in allowed for d in dists):
            blocked.add(module)
    return sorted(blocked - {"_distutils_hack", "pkg_resources", "setuptools", "pip", "_virtualenv"})


PRELUDE = '''
import importlib.abc, sys
BLOCKED = frozenset({blocked!r})
class _Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"{{name}} is not installed with these extras", name=name)
        return None
sys.meta_path.insert(0, _Block())
GEMMA_CONFIG = {config!r}
'''


def _script(block: Block) -> str:
    chain = [*block.before, block]
    extras = tuple(dict.fromkeys(e for b in chain for e in b.extras))
    needs = tuple(dict.fromkeys(n for b in chain for n in b.needs))
    given = tuple(dict.fromkeys(g for b in chain for g in b.given))
    parts = [PRELUDE.format(blocked=blocked_modules(extras, needs),
                            config=str(ROOT / "tests/fixtures/configs/gemma-3-12b-text.json"))]
    for name in given:
        assert name in GIVEN, f"{block.where}: nothing to give for {name!r} (add it to GIVEN)"
        parts.append(GIVEN[name])
    for b in chain:
        parts.append(b.code)
    return "\n".join(parts)


def _run_code(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``code`` with top-level ``await`` allowed (a doc may show the async call beside the sync one)."""
    runner = ("import ast, asyncio, sys, types\n"
              "src = open(sys.argv[1], encoding='utf-8').read()\n"
              "code = compile(src, 'example', 'exec', flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)\n"
              "g = {'__name__': '__main__'}\n"
              "result = eval(code, g)\n"
              "if isinstance(result, types.CoroutineType): asyncio.run(result)\n")
    (cwd / "example.py").write_text(code, encoding="utf-8")
    env_keys = ("PATH", "HOME", "LANG", "HF_HUB_OFFLINE", "TMPDIR")
    import os

    env = {k: os.environ[k] for k in env_keys if k in os.environ}
    env.update(HF_HUB_OFFLINE="1", RAGTRIM_VECTOR_STORE="off", RAGTRIM_QUIET="1", PYTHONPATH=str(ROOT / "benchmarks"))
    return subprocess.run([sys.executable, "-c", runner, str(cwd / "example.py")], cwd=cwd, capture_output=True,
                          text=True, timeout=600, check=False, env=env)


BLOCKS = page_blocks()


@pytest.mark.parametrize("block", BLOCKS, ids=[b.where for b in BLOCKS])
def test_doc_block_runs_under_the_extras_it_names(block: Block, tmp_path: Path) -> None:
    if block.skip:
        pytest.skip(f"not meant to run: {block.skip}")
    done = _run_code(_script(block), tmp_path)
    assert done.returncode == 0, f"{block.where} (extras: {', '.join(block.extras) or 'core'}):\n{done.stderr}"


SCRIPTS = example_scripts()


@pytest.mark.parametrize("block", SCRIPTS, ids=[b.where for b in SCRIPTS])
def test_example_script_runs_under_the_extras_it_names(block: Block, tmp_path: Path) -> None:
    if block.skip:
        pytest.skip(f"not meant to run: {block.skip}")
    path = ROOT / block.where
    code = (PRELUDE.format(blocked=blocked_modules(block.extras, block.needs), config="")
            + f"import runpy, sys\nsys.argv = {[block.where, *block.args]!r}\n"
            + f"runpy.run_path({str(path)!r}, run_name='__main__')\n")
    done = _run_code(code, tmp_path)
    assert done.returncode == 0, f"{block.where} (extras: {', '.join(block.extras) or 'core'}):\n{done.stderr}"
    assert done.stdout.strip(), f"{block.where} printed nothing"


def test_every_block_says_how_it_runs_or_why_not() -> None:
    """A block that fails only for want of a name the page assumes must say so (given=, or not run)."""
    for block in BLOCKS:
        if block.skip:
            continue
        try:
            ast.parse(block.code, feature_version=(3, 11))
        except SyntaxError:
            if "await" not in block.code:
                raise


def test_a_blocked_extra_cannot_be_imported(tmp_path: Path) -> None:
    """The harness itself: under the core install, an extra's package is not importable."""
    code = PRELUDE.format(blocked=blocked_modules((), ()), config="") + (
        "try:\n    import langchain_core\nexcept ImportError:\n    print('blocked')\n")
    assert _run_code(code, tmp_path).stdout.strip() == "blocked"
