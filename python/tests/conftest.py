"""Launching kungfu workers for the tests: under kfrun or Open MPI's mpirun, or with a launcher's
variables set by hand.

The tests run under Debian's /usr/bin/python3 with the built package on PYTHONPATH; ctest sets
KFRUN (the kfrun binary) and KF_PYTHON_DIR (build/<flavour>/python).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional, Sequence

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
import port_lease  # noqa: E402  (tests/port_lease.py, shared with the C++ and shell tests)

HERE = Path(__file__).resolve().parent
WORKERS = HERE / "workers"
# Debian's python3 here; KF_PYTHON names another (a GPU machine's, by bench/gpu_report.sh).
PYTHON = os.environ.get("KF_PYTHON", "/usr/bin/python3")


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
    """The first of n + 1 consecutive ports (p .. p+n) leased to this process until it exits, so
    that no two tests running at once (C++, Python or shell) meet: tests/port_lease.py."""
    return port_lease.lease_ports(n + 1)


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
              kfrun_flags: Sequence[str] = (),
              extra_env: Optional[dict] = None) -> subprocess.CompletedProcess:
    """`kfrun -np N python3 workers/SCRIPT ARGS`; the process's output and exit code."""
    base = free_port_base(np_)
    cmd = [kfrun(), "-q", "-np", str(np_), "-port-range", f"{base}-{base + np_}", *kfrun_flags,
           PYTHON, str(WORKERS / script), *args]
    return subprocess.run(cmd, env=worker_env(extra_env), capture_output=True, text=True,
                          timeout=timeout)


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


def mpirun() -> str:
    """The mpirun on PATH (Debian's openmpi-bin, which ./kf installs); skips the test without."""
    m = shutil.which("mpirun")
    if m is None:
        pytest.skip("mpirun is not on PATH (Debian package openmpi-bin; ./kf setup installs it)")
    return m


def mpirun_command(np_: int, script: str, *args: str) -> list[str]:
    """`mpirun -np N python3 workers/SCRIPT ARGS` as it works on one host in a container: as root
    (--allow-run-as-root, only when root), more processes than cores (--oversubscribe), no
    binding, only the self and TCP transports (the workers never call MPI_Init, but mpirun must
    not probe shared-memory or InfiniBand transports a container lacks), and the environment
    the workers need passed on with -x."""
    cmd = [mpirun(), "-np", str(np_)]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    cmd += ["--oversubscribe", "--bind-to", "none", "--mca", "btl", "self,tcp",
            "-x", "PYTHONPATH", "-x", "PYTHONUNBUFFERED", "-x", "KUNGFU_PORT_BASE"]
    return cmd + [PYTHON, str(WORKERS / script), *args]


def live_session_members(sid: int) -> list[int]:
    """The processes of session `sid` that have not exited yet (zombies, already dead and only
    waiting for their parent, are not counted)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.getsid(int(entry.name)) != sid:
                continue
            # /proc/PID/stat: "pid (comm) STATE ...", comm may itself hold spaces or parentheses
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (ProcessLookupError, PermissionError, FileNotFoundError, IndexError):
            continue
        if state not in ("Z", "X"):
            pids.append(int(entry.name))
    return pids


def kill_session(sid: int, deadline_s: float = 10) -> None:
    """SIGKILLs every process of session `sid` (a launcher started with start_new_session=True,
    and the workers it started: mpirun puts each in a process group of its own, but they stay
    in its session) and returns once none of them runs any more. A SIGKILL is only delivered when
    its target is next scheduled, so on a busy machine a process can still run (and show in
    /proc with its command line) for a while after kill(); a launcher still alive may also fork
    between two scans: hence the loop. Fails after `deadline_s` if anything still runs."""
    end = time.monotonic() + deadline_s
    while True:
        alive = live_session_members(sid)
        if not alive:
            return
        if time.monotonic() > end:
            raise RuntimeError(f"processes {alive} of session {sid} still run {deadline_s} s "
                               "after SIGKILL")
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.01)


def run_mpirun(np_: int, script: str, *args: str,
               timeout: float = 120) -> subprocess.CompletedProcess:
    """Runs mpirun_command(...) with a clean identity (worker_env, and none of an outer Open MPI
    or PMIx job's variables) and KUNGFU_PORT_BASE set to a free range, so that parallel tests do
    not meet; the result carries the port base as `.port_base`.

    mpirun forwards its workers' output in chunks, which can split a line between ranks, so each
    rank's output goes to a file of its own (--output-filename): the result's stdout is the
    ranks' stdout in rank order, its stderr mpirun's own followed by each rank's. On timeout
    mpirun is stopped (SIGTERM: it stops its workers), then anything left in its session is
    killed, before subprocess.TimeoutExpired is raised, so nothing outlives the test."""
    base = free_port_base(np_)
    env = worker_env({"KUNGFU_PORT_BASE": str(base)})
    for k in list(env):
        if k.startswith(("OMPI_", "PMIX_", "PRTE_")):
            del env[k]
    with tempfile.TemporaryDirectory(prefix="kf-mpirun-") as outdir:
        cmd = mpirun_command(np_, script, *args)
        cmd[1:1] = ["--output-filename", outdir]
        with subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, start_new_session=True) as proc:
            try:
                out, err = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGTERM)  # mpirun stops its workers, then exits
                try:
                    out, err = proc.communicate(timeout=10)
                except subprocess.TimeoutExpired:
                    kill_session(proc.pid)
                    out, err = proc.communicate()
                kill_session(proc.pid)  # any worker that outlived mpirun
                raise subprocess.TimeoutExpired(cmd, timeout, output=out, stderr=err)
        ranks = sorted(Path(outdir).glob("*/rank.*"), key=lambda d: int(d.name.split(".")[1]))
        stdout = "".join((d / "stdout").read_text() for d in ranks if (d / "stdout").exists())
        for d in ranks:
            text = (d / "stderr").read_text() if (d / "stderr").exists() else ""
            if text:
                err += f"--- {d.name} stderr\n{text}"
    if not ranks:  # mpirun failed before starting any worker: its own report
        stdout = out
    result = subprocess.CompletedProcess(cmd, proc.returncode, stdout, err)
    result.port_base = base  # type: ignore[attr-defined]
    return result


def check_ok(result: subprocess.CompletedProcess) -> None:
    assert result.returncode == 0, (
        f"exit {result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}")


sys.path.insert(0, str(HERE))
