"""CUDA memory through kungfu.allreduce (the GPU paths): checked for real where this process can
use a CUDA device (a lent GPU machine), and as a clear error where it cannot."""

import subprocess

import pytest

from conftest import PYTHON, WORKERS, check_ok, run_kfrun, worker_env


def gpu_unavailable():
    r = subprocess.run([PYTHON, "-c", "import kungfu; print(kungfu._core.gpu_unavailable())"],
                       env=worker_env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    line = r.stdout.strip()
    return None if line == "None" else line


def test_cuda_memory_without_a_device_is_a_clear_error():
    if gpu_unavailable() is None:
        pytest.skip("this machine has a usable CUDA device: test_cuda_memory_allreduce runs")
    r = run_kfrun(2, "gpu_allreduce.py", "no-device")
    check_ok(r)
    assert r.stdout.count("ok") == 2, r.stdout


def torch_has_cuda() -> bool:
    r = subprocess.run([PYTHON, "-c", "import torch; print(torch.cuda.is_available())"],
                       env=worker_env(), capture_output=True, text=True, timeout=120)
    return r.returncode == 0 and r.stdout.strip() == "True"


def cuda_devices() -> int:
    r = subprocess.run([PYTHON, str(WORKERS / "gpu_allreduce.py"), "count"], env=worker_env(),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return int(r.stdout.strip())


# NCCL takes one GPU per rank; STAGED (host-memory stage between the ranks) shares one.
@pytest.mark.parametrize("np_,strategy", [(1, "NCCL"), (2, "NCCL"), (1, "STAGED"), (2, "STAGED")])
def test_cuda_memory_allreduce(np_, strategy):
    why = gpu_unavailable()
    if why is not None:
        pytest.skip(f"no usable CUDA device here: {why}")
    if strategy == "NCCL" and cuda_devices() < np_:
        pytest.skip(f"NCCL needs a GPU per rank: {np_} ranks, {cuda_devices()} GPU(s)")
    r = run_kfrun(np_, "gpu_allreduce.py", "device", strategy, timeout=300)
    check_ok(r)
    assert r.stdout.count("ok") == np_, r.stdout
    if torch_has_cuda():  # then the torch CUDA tensors were allreduced too, not passed over
        assert r.stdout.count("torch CUDA tensors: checked") == np_, r.stdout
