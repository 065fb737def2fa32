"""Launching kungfu workers for the tests: under kfrun, or with a launcher's variables set by hand.

The tests run under Debian's /usr/bin/python3 with the built package on PYTHONPATH; ctest sets
KFRUN (the kfrun binary) and KF_PYTHON_DIR (build/<flavour>/python).
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
from pathlib import Path
from typing import Optional, Sequence

import pytest

HERE = Path(__file__).resolve().parent
WORKERS = HERE / "workers"
PYTHON = "/usr/bin/python3"


def python_dir() -> str:
    d = os.environ.get("KF_PYTHON_DIR")
    if not d:
        pytest.fail("KF_PYTHON_DIR is not set (ctest sets it to build/<flavour>/python)")
    return d


def kfrun() -> str:
    k = os.environ.get("KFRUN")
    if not k:
        pytest.fail("KFRUN is not set (ctest sets it to the kfrun binary)")
    return k


def free_port_base(n: int) -> int:
    """A base port p such that p .. p+n can be bound on 127.0.0.1 now: random in 20000-37999 or
    38100-49999 (clear of kfrun's runner port), so parallel tests rarely meet; checked by binding."""
    for _ in range(200):
        base = random.choice([random.randint(20000, 37999 - n), random.randint(38100, 49999 - n)])
        sockets = []
        try:
            for p in range(base, base + n + 1):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                sockets.append(s)
                s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
        finally:
            for s in sockets:
                s.close()
    raise RuntimeError("no free port range found")


def worker_env(extra: Optional[dict] = None) -> dict:
    env = dict(os.environ)
    for k in list(env):  # a clean identity: nothing inherited from an outer launcher
        if k.startswith(("KUNGFU_", "OMPI_COMM_WORLD_", "SLURM_")) or k in (
                "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                "MASTER_PORT"):
            del env[k]
    env["PYTHONPATH"] = python_dir() + os.pathsep + str(HERE)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def run_kfrun(np_: int, script: str, *args: str, timeout: float = 120,
              kfrun_flags: Sequence[str] = ()) -> subprocess.CompletedProcess:
    """`kfrun -np N python3 workers/SCRIPT ARGS`; the process's output and exit code."""
    base = free_port_base(np_)
    cmd = [kfrun(), "-q", "-np", str(np_), "-port-range", f"{base}-{base + np_}", *kfrun_flags,
           PYTHON, str(WORKERS / script), *args]
    return subprocess.run(cmd, env=worker_env(), capture_output=True, text=True, timeout=timeout)


def spawn_torchrun_style(np_: int, script: str, *args: str,
                         extra_env: Optional[dict] = None) -> list[subprocess.Popen]:
    """`np_` workers with torchrun's variables set by hand (Debian's torchrun does not start on
    Python 3.11): RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT."""
    base = free_port_base(np_ + 1)
    procs = []
    for r in range(np_):
        env = worker_env({"RANK": str(r), "WORLD_SIZE": str(np_), "LOCAL_RANK": str(r),
                          "LOCAL_WORLD_SIZE": str(np_), "MASTER_ADDR": "127.0.0.1",
                          "MASTER_PORT": str(base), **(extra_env or {})})
        procs.append(subprocess.Popen([PYTHON, str(WORKERS / script), *args], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    return procs


def check_ok(result: subprocess.CompletedProcess) -> None:
    assert result.returncode == 0, (
        f"exit {result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}")


sys.path.insert(0, str(HERE))
