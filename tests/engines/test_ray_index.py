"""``ragtrim index --engine ray`` on a real Ray instance (2 CPUs, started here): the local engine's vectors under the
local engine's keys, a run that resumes and repairs a damaged vector, a worker killed mid-job, a worker whose recipe
differs, a malformed file, stdin refused."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragtrim.cli import main
from ragtrim.engines.options import RayOptions
from ragtrim.engines.ray_index import run_ray_index
from ragtrim.errors import ConfigError, InputError, VectorStoreError
from ragtrim.testing import FakeEmbedder
from ragtrim.vectors.index import index_passages, read_corpus
from ragtrim.vectors.store import pack
from ragtrim_bench.common.procs import descendants
from tests.engines.helpers import DriverOnlyEmbedder, kill_busy_worker

pytest.importorskip("ray")
pytestmark = [pytest.mark.ray, pytest.mark.filterwarnings("ignore::DeprecationWarning")]
OPTIONS = RayOptions(workers=2)


def corpus(folder: Path, files: int, per_file: int, *, page: bool = True, pad: int = 0) -> Path:
    """``files`` JSONL files of ``per_file`` passages (``pad`` more sentences each: 32 make a 1 KB passage), and an
    HTML page."""
    folder.mkdir()
    more = " The tower stands by the river." * pad
    for k in range(files):
        (folder / f"part{k}.jsonl").write_text("".join(
            json.dumps({"title": f"Doc {k}", "text": f"Passage {k}-{i}: the tower number {i} by river {k}.{more}"})
            + "\n" for i in range(per_file)))
    if page:
        (folder / "page.html").write_text("<html><body><nav>Home | About</nav><article><p>"
                                          + "The tower stands by the river. " * 8 + "</p></article></body></html>")
    return folder


def vectors(path: Path) -> dict[bytes, bytes]:
    """The store's keys and values (none when nothing made its table)."""
    with sqlite3.connect(path) as conn:
        if not conn.execute("SELECT name FROM sqlite_master WHERE name = 'vectors'").fetchall():
            return {}
        return dict(conn.execute("SELECT key, value FROM vectors").fetchall())


def test_same_vectors_under_the_same_keys_and_a_rerun_resumes(ray_instance: Any, tmp_path: Path) -> None:
    docs = corpus(tmp_path / "corpus", 3, 150)
    local = index_passages(read_corpus([docs], title_field="title"),
                           scorer=FakeEmbedder(recipe="fake-v1", vector_store=str(tmp_path / "local.sqlite3")))
    seen: list[int] = []
    store = tmp_path / "ray.sqlite3"
    first = run_ray_index([docs / "part0.jsonl"], store=str(store), scorer=FakeEmbedder(recipe="fake-v1"),
                          options=OPTIONS, batch_size=32, title_field="title", progress=seen.append)
    assert (first.passages, first.stored, first.already) == (150, 150, 0) and sum(seen) == 150
    with sqlite3.connect(store) as conn:  # one stored vector of the wrong width: damaged, computed again
        conn.execute("UPDATE vectors SET value = ? WHERE key = (SELECT min(key) FROM vectors)",
                     (pack(np.ones(10, dtype=np.float32)),))
    conn.close()
    again = run_ray_index([docs], store=str(store), scorer=FakeEmbedder(recipe="fake-v1"), options=OPTIONS,
                          batch_size=32, title_field="title")
    # only what the first run left, and the damaged one repaired
    assert (again.passages, again.stored, again.already, again.repaired) == (451, 301, 149, 1)
    assert again.embedders == local.embedders == ("fake-embedding:fake-v1",)
    assert local.stored == 451 and vectors(store) == vectors(tmp_path / "local.sqlite3")


def test_a_worker_killed_mid_job_and_one_file_spread_over_every_worker(ray_instance: Any, tmp_path: Path) -> None:
    # one file of 6 MB: Ray Data's default would give it to one actor in one task; the engine's 256 KiB blocks
    # spread it over both
    docs = corpus(tmp_path / "corpus", 1, 6000, page=False, pad=32)
    killed: list[str | None] = []
    busy: list[int] = []
    done = [0]

    def kill_once(n: int) -> None:
        done[0] += n
        busy.append(sum(1 for title in descendants().values() if "(BatchIndexer))." in title))
        if done[0] >= 640 and not killed:
            killed.append(kill_busy_worker("BatchIndexer"))

    store = tmp_path / "ray.sqlite3"
    report = run_ray_index([docs], store=str(store), scorer=FakeEmbedder(recipe="fake-v1"), options=OPTIONS,
                           batch_size=16, progress=kill_once)
    assert killed and killed[0] is not None and killed[0].endswith(".submit"), killed
    assert max(busy) == 2, busy
    assert report.passages == 6000 and report.stored + report.already == 6000
    index_passages(read_corpus([docs]), scorer=FakeEmbedder(recipe="fake-v1", vector_store=str(tmp_path / "l.db")))
    assert vectors(store) == vectors(tmp_path / "l.db")


def test_a_worker_with_another_recipe_is_refused(ray_instance: Any, tmp_path: Path) -> None:
    docs = corpus(tmp_path / "corpus", 1, 20)
    with pytest.raises(VectorStoreError, match="recipe 'fake/worker', not the recipe of the host that started the "
                                               "job \\('fake/driver'\\)"):
        run_ray_index([docs], store=str(tmp_path / "v.sqlite3"), scorer=DriverOnlyEmbedder(), options=OPTIONS)
    assert not vectors(tmp_path / "v.sqlite3")


def test_a_malformed_file_fails_as_locally(ray_instance: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                           ) -> None:
    docs = corpus(tmp_path / "corpus", 2, 30)
    (docs / "part1.jsonl").write_text('{"text": "fine"}\n{"text": 3}\n')
    with pytest.raises(InputError, match="part1.jsonl:2: no text field"):
        run_ray_index([docs], store=str(tmp_path / "v.sqlite3"), scorer=FakeEmbedder(recipe="fake-v1"),
                      options=OPTIONS)
    with pytest.raises(ConfigError, match="stdin \\('-'\\) is for --engine local"):
        run_ray_index(["-"], store=str(tmp_path / "v.sqlite3"), scorer=FakeEmbedder(recipe="fake-v1"),
                      options=OPTIONS)
    assert main(["index", str(docs), "--engine", "ray", "--scorer", "bm25", "--store",
                 str(tmp_path / "w.sqlite3")]) == 1
    assert "uses no embedding model" in capsys.readouterr().err
