"""Workers started by Open MPI's mpirun find each other as under kfrun: kungfu's identity from
OMPI_COMM_WORLD_* and KUNGFU_PORT_BASE (launch/worker_env.h), the collectives against their serial
reference, upstream KungFu's names, and the torch.distributed backend (torch's env:// variables
filled in by kungfu.torch). Skipped where mpirun is not on PATH (Debian's openmpi-bin, which ./kf
installs). Also the pure mapping from a launcher's variables to torch's."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Dict, List

import pytest

from conftest import check_ok, mpirun, run_mpirun
from test_distributed import close, params_of


def identities(output: str) -> List[Dict]:
    """The workers' IDENTITY lines (workers/launcher_identity.py), in rank order."""
    rows = [json.loads(line.split(" ", 1)[1]) for line in output.splitlines()
            if line.startswith("IDENTITY ")]
    return sorted(rows, key=lambda row: row["rank"])


# --- under mpirun ---------------------------------------------------------------------------

@pytest.mark.parametrize("np_", [2, 3])
def test_every_collective_matches_the_reference_under_mpirun(np_: int) -> None:
    r = run_mpirun(np_, "collectives.py", timeout=300)
    check_ok(r)
    assert r.stdout.count(f"of {np_}:") == np_ and r.stdout.count("checks passed") == np_, r.stdout


@pytest.mark.parametrize("mode", ["plain", "torch"])
def test_the_identity_under_mpirun_is_open_mpis(mode: str) -> None:
    """kungfu's rank is OMPI_COMM_WORLD_RANK, on one host, with or without kungfu.torch's
    torch variables (which must not move the runtime's ports: KUNGFU_PORT_BASE is kept)."""
    n = 3
    r = run_mpirun(n, "launcher_identity.py", mode, timeout=120)
    check_ok(r)
    rows = identities(r.stdout)
    assert [row["rank"] for row in rows] == list(range(n)), r.stdout
    for row in rows:
        env = row["env"]
        assert env["OMPI_COMM_WORLD_RANK"] == str(row["rank"]), row
        assert env["OMPI_COMM_WORLD_SIZE"] == str(n), row
        assert (row["size"], row["local_rank"], row["local_size"]) == (n, row["rank"], n), row
        assert row["allgathered_ranks"] == list(range(n)), row
        assert env["KUNGFU_PORT_BASE"] == str(r.port_base), row
        if mode == "plain":
            assert env["RANK"] is None and env["MASTER_PORT"] is None, row
        else:
            assert (env["RANK"], env["WORLD_SIZE"]) == (str(row["rank"]), str(n)), row
            assert (env["LOCAL_RANK"], env["LOCAL_WORLD_SIZE"]) == (str(row["rank"]), str(n)), row
            assert env["MASTER_ADDR"] == "127.0.0.1", row
            assert env["MASTER_PORT"] == str(r.port_base + n), row  # after the workers' ports


def test_upstream_kungfu_names_under_mpirun() -> None:
    r = run_mpirun(3, "upstream_names.py")
    check_ok(r)
    assert r.stdout.count("upstream names ok") == 3, r.stdout


def test_async_handles_under_mpirun() -> None:
    r = run_mpirun(3, "handles.py")
    check_ok(r)
    assert r.stdout.count("handles ok") == 3, r.stdout


@pytest.mark.parametrize("np_", [2, 3])
def test_ddp_on_kungfu_matches_gloo_under_mpirun(np_: int) -> None:
    """An unmodified DDP script (workers/ddp.py: init_process_group(backend), nothing else)."""
    runs = {}
    for backend in ("kungfu", "gloo"):
        r = run_mpirun(np_, "ddp.py", backend, "8", timeout=300)
        check_ok(r)
        runs[backend] = params_of(r.stdout)
        assert sorted(runs[backend]) == list(range(np_)), r.stdout
    for rank in range(np_):
        assert close(runs["kungfu"][rank], runs["gloo"][rank]), (rank, runs)
        assert runs["kungfu"][rank] == runs["kungfu"][0]  # replicas identical


def test_a_hung_mpirun_job_is_stopped_at_the_timeout() -> None:
    mpirun()  # skips without mpirun
    with pytest.raises(subprocess.TimeoutExpired) as e:
        run_mpirun(2, "launcher_identity.py", "hang", timeout=5)
    # nothing of the job survives: no process still runs the worker in hang mode
    left = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().split(b"\0")
        except OSError:
            continue
        if b"hang" in cmdline and any(c.endswith(b"launcher_identity.py") for c in cmdline):
            left.append(entry)
    assert not left, (left, e.value)


# --- the mapping itself (no launcher) -------------------------------------------------------

def torch_env_for_launcher(env: Dict[str, str]) -> Dict[str, str]:
    from kungfu.torch.distributed import torch_env_for_launcher as f
    return f(env)


def test_open_mpis_variables_give_torchs() -> None:
    env = {"OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_SIZE": "8",
           "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "4",
           "KUNGFU_HOSTS": "10.0.0.1,10.0.0.2", "KUNGFU_PORT_BASE": "21000"}
    assert torch_env_for_launcher(env) == {
        "RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4",
        "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "21004"}


def test_the_port_base_is_pinned_to_the_runtimes_default() -> None:
    env = {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2"}
    assert torch_env_for_launcher(env) == {
        "RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2",
        "KUNGFU_PORT_BASE": "10000", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "10002"}


def test_slurms_variables_give_torchs_and_set_ones_are_kept() -> None:
    env = {"SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_LOCALID": "1",
           "SLURM_NTASKS_PER_NODE": "2", "MASTER_ADDR": "node0", "MASTER_PORT": "29400",
           "KUNGFU_PORT_BASE": "30000"}
    assert torch_env_for_launcher(env) == {
        "RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}


@pytest.mark.parametrize("env", [
    {},                                                             # no launcher
    {"KUNGFU_SELF_SPEC": "127.0.0.1:10000", "OMPI_COMM_WORLD_RANK": "0",
     "OMPI_COMM_WORLD_SIZE": "1"},                                  # kfrun
    {"RANK": "0", "WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "1",
     "OMPI_COMM_WORLD_SIZE": "2"},                                  # torchrun's already set
    {"OMPI_COMM_WORLD_RANK": "x", "OMPI_COMM_WORLD_SIZE": "2"},     # malformed: init() says so
    {"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "2"},     # out of range
])
def test_nothing_is_added_where_there_is_nothing_to_map(env: Dict[str, str]) -> None:
    assert torch_env_for_launcher(env) == {}
