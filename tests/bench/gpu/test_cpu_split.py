import os
import subprocess
import sys
import time

import pytest

from ragtrim_bench.gpu import cpu_split
from ragtrim_bench.gpu.cpu_split import format_cpu_list, parse_cpu_list, physical_cores, split_cores


def test_cpu_lists_read_and_write_ranges():
    assert parse_cpu_list("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]
    assert format_cpu_list([11, 0, 1, 2, 3, 8, 10]) == "0-3,8,10-11"
    assert format_cpu_list([5]) == "5"
    with pytest.raises(ValueError):
        parse_cpu_list("0-")


def test_hyperthread_siblings_stay_on_one_side():
    # 4 physical cores, CPU n and n + 4 on the same core (the usual Linux numbering)
    siblings = {c: f"{c % 4},{c % 4 + 4}" for c in range(8)}
    cores = physical_cores(list(range(8)), siblings)
    assert cores == [(0, 4), (1, 5), (2, 6), (3, 7)]
    first, rest = split_cores(cores)
    assert (first, rest) == ([0, 4, 1, 5], [2, 6, 3, 7])
    assert not set(first) & set(rest)


def test_only_allowed_cpus_are_used_and_missing_topology_is_its_own_core():
    siblings = {0: "0,2", 2: "0,2"}
    assert physical_cores([0, 1, 3], siblings) == [(0,), (1,), (3,)]
    assert split_cores([(0,), (1,), (3,)]) == ([0], [1, 3])


def test_one_core_cannot_be_split():
    with pytest.raises(ValueError, match="1 physical core"):
        split_cores([(0, 1)])


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs Linux CPU affinity")
def test_pins_every_thread_of_a_vllm_serve_session_and_nothing_else(tmp_path, monkeypatch):
    # a stand-in whose command line reads like vLLM's, in a session of its own, with a second thread
    script = tmp_path / "vllm.py"
    script.write_text("import threading, time\nthreading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
                      "time.sleep(60)\n")
    own = os.sched_getaffinity(0)
    fake = subprocess.Popen([sys.executable, str(script), "serve", "model"], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while len(os.listdir(f"/proc/{fake.pid}/task")) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        pids = cpu_split.vllm_processes()
        assert fake.pid in pids and os.getpid() not in pids
        cpus = sorted(os.sched_getaffinity(0))[:1]
        assert cpu_split.pin([fake.pid], cpus) == 2
        for tid in os.listdir(f"/proc/{fake.pid}/task"):
            assert sorted(os.sched_getaffinity(int(tid))) == cpus
        assert os.sched_getaffinity(0) == own  # this process (another session) untouched
    finally:
        fake.kill()
        fake.wait()
