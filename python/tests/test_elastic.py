"""Elastic training from Python under kfrun -w: kungfu.resize / propose_new_size and
kungfu.torch.elastic (State, run, ElasticSampler)."""

import random
import re
import subprocess
from pathlib import Path
from typing import Sequence

from conftest import PYTHON, WORKERS, check_ok, free_port_base, kfrun, run_kfrun, worker_env


def run_elastic(np_: int, slots: int, script: str, *args: str,
                timeout: float = 240) -> subprocess.CompletedProcess:
    """`kfrun -w -np N -H 127.0.0.1:SLOTS` with its builtin config server on free ports."""
    base = free_port_base(slots + 1)
    cmd = [kfrun(), "-w", "-np", str(np_), "-H", f"127.0.0.1:{slots}",
           "-builtin-config-port", str(base + slots), "-port-range", f"{base}-{base + slots - 1}",
           "-timeout", f"{int(timeout) - 10}s", PYTHON, str(WORKERS / script), *args]
    return subprocess.run(cmd, env=worker_env(), capture_output=True, text=True, timeout=timeout)


def resized_lines(stdout: str) -> Sequence[tuple]:
    return [(int(m[1]), int(m[2]), int(m[3]), m[4] == "True") for m in re.finditer(
        r"resized (\d+): size (\d+) step (\d+) agreed (\w+)", stdout)]


def test_ten_random_resizes_in_a_row():
    rng = random.Random(2026)
    sizes, current = [], 2
    for _ in range(10):
        current = rng.choice([n for n in range(1, 5) if n != current])
        sizes.append(current)
    r = run_elastic(2, 4, "elastic.py", "--sizes", ",".join(map(str, sizes)), "--every", "2")
    check_ok(r)
    lines = resized_lines(r.stdout)
    # One line per sync on rank 0: the start, then after each resize.
    assert [l[0] for l in lines] == list(range(11)), r.stdout
    assert [l[1] for l in lines] == [2] + sizes, r.stdout
    assert [l[2] for l in lines] == [2 * i for i in range(11)], r.stdout
    assert all(l[3] for l in lines), r.stdout
    assert "done: 22 steps" in r.stdout, r.stdout


def test_propose_new_size_then_adopt():
    r = run_elastic(2, 3, "elastic_calls.py", "adopt")
    check_ok(r)
    assert sorted(re.findall(r"ok rank (\d) of 3", r.stdout)) == ["0", "1", "2"], r.stdout


def test_a_dead_config_server_is_unavailable_on_every_worker():
    """Not "refused the proposal" (invalid_argument): UnavailableError, every rank."""
    kfconfig = str(Path(kfrun()).parent / "kfconfig")
    base = free_port_base(4)
    server = subprocess.Popen([kfconfig, "-port", str(base + 3)], env=worker_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert "serving" in server.stdout.readline()
        cmd = [kfrun(), "-w", "-np", "2", "-H", "127.0.0.1:3", "-config-server",
               f"http://127.0.0.1:{base + 3}/config", "-port-range", f"{base}-{base + 2}",
               "-timeout", "100s", PYTHON, str(WORKERS / "elastic_calls.py"), "unreachable"]
        env = worker_env({"KF_TEST_KFCONFIG_PID": str(server.pid)})
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        check_ok(r)
        assert sorted(re.findall(r"ok rank (\d)", r.stdout)) == ["0", "1"], r.stdout
    finally:
        server.kill()
        server.wait()


def test_resize_outside_kfrun_w_is_a_clear_error():
    r = run_kfrun(2, "elastic_calls.py", "not-elastic")
    check_ok(r)
    assert r.stdout.count("ok") == 2, r.stdout
