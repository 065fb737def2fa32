"""Task modules (kungfu.torch.task) in the real world: loading errors, `python3 -m
kungfu.torch.train` under kfrun with every optimizer (replicas agree where they must; S-SGD takes
kfsim's steps: a serial reference on kfsim's sampler and update rule gives the same parameters),
an adaptive-batch policy, the three Fig. 4 arms on Fashion-MNIST, and `python3 -m
kungfu.torch.profile` writing a profile kfsim runs."""

from __future__ import annotations

import csv
import json
import os
import subprocess
from pathlib import Path
from typing import Sequence

import numpy as np
import pytest

from conftest import PYTHON, check_ok, free_port_base, kfrun, worker_env

HERE = Path(__file__).resolve().parent
TINY = HERE / "tasks" / "tiny.py"
ROOT = HERE.parents[1]


def train(np_: int, module: Path, *args: str, timeout: float = 120,
          kfrun_flags: Sequence[str] = ()) -> subprocess.CompletedProcess:
    """`kfrun -np N python3 -m kungfu.torch.train MODULE ARGS`."""
    base = free_port_base(np_)
    cmd = [kfrun(), "-q", "-np", str(np_), "-port-range", f"{base}-{base + np_}", *kfrun_flags,
           PYTHON, "-m", "kungfu.torch.train", str(module), *args]
    return subprocess.run(cmd, env=worker_env(), capture_output=True, text=True, timeout=timeout)


def final(r: subprocess.CompletedProcess) -> dict:
    lines = [l.split("] ", 1)[-1] for l in r.stdout.splitlines() if '"final": true' in l]
    assert len(lines) == 1, r.stdout + r.stderr
    return json.loads(lines[0])


# ---- loading errors ----

BROKEN = {
    "no_model": ("def data(train):\n    return None\n", "defines no function model()"),
    "model_raises": ("def model():\n    raise ValueError('no such layer')\n"
                     "def data(train):\n    pass\n", "model() raised: ValueError: no such layer"),
    "data_raises": ("import torch\ndef model():\n    return torch.nn.Linear(2, 2)\n"
                    "def data(train):\n    return {}['x']\n", "data() raised: KeyError: 'x'"),
    "data_float64": ("import torch\ndef model():\n    return torch.nn.Linear(2, 2)\n"
                     "def data(train):\n    return torch.zeros(4, 2, dtype=torch.float64), "
                     "torch.zeros(4, dtype=torch.int64)\n", "inputs are torch.float64"),
    "labels_2d": ("import torch\ndef model():\n    return torch.nn.Linear(2, 2)\n"
                  "def data(train):\n    return torch.zeros(4, 2), torch.zeros(4, 1, "
                  "dtype=torch.int64)\n", "labels must be a 1-d int64 tensor"),
    "import_fails": ("import no_such_module_kf\n", "No module named 'no_such_module_kf'"),
}


def _use(task_file: Path) -> None:
    from kungfu.torch.task import load
    task = load(str(task_file))
    task.model(1)
    task.data(True)


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_load_errors_name_module_function_and_cause(tmp_path, case):
    from kungfu.torch.task import TaskError
    text, want = BROKEN[case]
    path = tmp_path / f"{case}.py"
    path.write_text(text)
    with pytest.raises(TaskError) as e:
        _use(path)
    assert str(path) in str(e.value) and want in str(e.value), str(e.value)


def test_load_missing_file(tmp_path):
    from kungfu.torch.task import TaskError, load
    with pytest.raises(TaskError, match="no such file"):
        load(str(tmp_path / "nope.py"))


@pytest.mark.parametrize("case", ["model_raises", "data_float64"])
def test_train_exits_2_with_the_task_error(tmp_path, case):
    text, want = BROKEN[case]
    path = tmp_path / f"{case}.py"
    path.write_text(text)
    r = train(2, path, "--steps", "2")
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"kungfu.torch.train: task module {path}" in r.stderr and want in r.stderr, r.stderr


# ---- training ----

def serial_ssgd(workers: int, steps: int, batch: int, lr: float, seed: int) -> np.ndarray:
    """kfsim's S-SGD in one process: kf::ShardSampler, the gradients' sum x float32(1/n), kfsim's
    LocalOptimizer."""
    import torch
    from kungfu import _core
    from kungfu.torch.task import load
    task = load(str(TINY))
    x, y = task.data(True)
    model = task.model(seed)
    params = list(model.parameters())
    flat = torch.cat([p.detach().reshape(-1) for p in params]).numpy().copy()
    opt = _core.LocalOptimizer("sgd", flat.size, 0.9)
    samplers = [_core.ShardSampler(len(y), r, workers, seed) for r in range(workers)]
    for _ in range(steps):
        total = np.zeros_like(flat)
        for r in range(workers):
            idx = torch.as_tensor(samplers[r].next_batch(batch))
            model.zero_grad()
            task.loss(model(x[idx]), y[idx]).backward()
            total += torch.cat([p.grad.reshape(-1) for p in params]).numpy()
        total *= np.float32(1) / np.float32(workers)
        opt.step(flat, total, lr)
        offset = 0
        with torch.no_grad():
            for p in params:
                p.copy_(torch.from_numpy(flat[offset:offset + p.numel()]).view_as(p))
                offset += p.numel()
    return flat


@pytest.mark.parametrize("np_", [2, 4])
def test_ssgd_takes_kfsims_steps(tmp_path, np_):
    r = train(np_, TINY, "--optimizer", "ssgd", "--steps", "30", "--batch", "8", "--lr", "0.1",
              "--seed", "3", "--out", str(tmp_path), "--save-params")
    check_ok(r)
    f = final(r)
    assert f["agreed"] and f["steps"] == 30 and f["samples"] == 30 * 8 * np_, f
    got = np.load(tmp_path / "params.npy")
    want = serial_ssgd(np_, 30, 8, 0.1, 3)
    if np_ == 2:  # a sum of two is the same in any order: bit for bit
        assert np.array_equal(got, want), np.abs(got - want).max()
    else:  # the fold order of four follows the strategy's graph
        assert np.allclose(got, want, rtol=0, atol=1e-6), np.abs(got - want).max()
    rows = list(csv.DictReader(open(tmp_path / "steps.csv")))
    assert [int(r["step"]) for r in rows] == list(range(30))
    assert {r["cluster_size"] for r in rows} == {str(np_)}


@pytest.mark.parametrize("optimizer", ["ssgd", "sma", "pair", "adasgd"])
def test_every_optimizer_trains(tmp_path, optimizer):
    # AdaSGD with momentum 0: kfsim's switch broadcasts the model, not the momentum, so with
    # momentum the replicas would stay apart (in both worlds).
    momentum = "0" if optimizer == "adasgd" else "0.9"
    r = train(3, TINY, "--optimizer", optimizer, "--steps", "24", "--batch", "8",
              "--momentum", momentum, "--change-step", "10", "--eval-every", "12", "--out", str(tmp_path),
              "--save-params")
    check_ok(r)
    f = final(r)
    evals = [json.loads(l.split("] ", 1)[-1]) for l in r.stdout.splitlines()
             if '"event": "eval"' in l]
    assert [e["step"] for e in evals] == [11, 23], r.stdout
    replicas = [np.load(tmp_path / f"params-rank{i}.npy") for i in range(3)]
    assert all(np.isfinite(p).all() for p in replicas)
    if optimizer in ("ssgd", "adasgd"):  # one model (AdaSGD: S-SGD since step 10)
        assert f["agreed"], f
    elif optimizer == "sma":  # close, not equal: each applies its own gradient after averaging
        assert not f["agreed"]
        spread = max(np.abs(p - replicas[0]).max() for p in replicas)
        assert spread < 0.5, spread
    assert f["accuracy"] > 0.5, f


def test_adaptive_batch_changes_the_batch_on_every_worker_alike(tmp_path):
    policy = "adaptive_batch_size:interval=4,min_batch=4,max_batch=64,scale=1,lr_rule=sqrt"
    r = train(2, TINY, "--steps", "20", "--batch", "4", "--policy", policy, "--out",
              str(tmp_path))
    check_ok(r)
    f = final(r)
    assert f["batches_agreed"] and f["agreed"], f
    assert f["batch_changes"], f
    rows = list(csv.DictReader(open(tmp_path / "steps.csv")))
    batches = [int(r["batch"]) for r in rows]
    assert batches[0] == 4, batches
    for step, before, after in f["batch_changes"]:  # a change takes effect at the next step
        assert batches[step - 1] == before and (step == 20 or batches[step] == after), batches
    assert f["samples"] == sum(b * 2 for b in batches), (f, batches)


# ---- the three Fig. 4 arms for real ----

FASHION = Path(os.environ.get("KF_FASHION_MNIST", "/usr/share/datasets/fashion-mnist"))


@pytest.mark.skipif(not FASHION.exists(), reason="no Fashion-MNIST (dataset-fashion-mnist)")
@pytest.mark.parametrize("arm,args", [
    ("fixed-small", ["--batch", "16"]),
    ("fixed-large", ["--batch", "128"]),
    ("adaptive", ["--batch", "16", "--policy",
                  "adaptive_batch_size:interval=2,min_batch=16,max_batch=128,lr_rule=sqrt"]),
])
def test_fig4_arms_on_fashion_cnn(tmp_path, arm, args):
    r = train(2, ROOT / "examples" / "fashion_cnn.py", *args, "--steps", "4", "--lr", "0.05",
              "--limit-train", "2048", "--limit-test", "256", "--eval-every", "4", "--out",
              str(tmp_path / arm), timeout=180)
    check_ok(r)
    f = final(r)
    assert f["steps"] == 4 and f["agreed"] and 0 <= f["accuracy"] <= 1, f
    if arm != "adaptive":
        assert not f["batch_changes"], f


# ---- the profiler, then kfsim on its profile ----

def test_profile_is_a_profile_kfsim_runs(tmp_path):
    profile = tmp_path / "tiny.cpu.yaml"
    p = subprocess.run([PYTHON, "-m", "kungfu.torch.profile", str(TINY), "--device", "cpu",
                        "--batch", "16", "--repeat", "3", "--out", str(profile)],
                       env=worker_env(), capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    import yaml  # noqa: PLC0415 - PyYAML, which Debian's python3 has
    doc = yaml.safe_load(profile.read_text())
    assert doc["name"] == "tiny"
    layers = doc["layers"]
    assert [l["name"] for l in layers] == ["0", "2"]  # the two Linear layers; ReLU folded in
    assert [l["parameters"] for l in layers] == [16 * 32 + 32, 32 * 4 + 4]
    assert all(set(l["times"]) == {"cpu"} and l["forward_gflops"] > 0 for l in layers)
    kfsim = os.environ.get("KFSIM")
    if not kfsim:
        pytest.fail("KFSIM is not set (ctest sets it to the kfsim binary)")
    scenario = tmp_path / "s.yaml"
    scenario.write_text("steps: 3\ntopology: {kind: star, hosts: 2}\n"
                        f"workload: {{profile: {profile.name}, device: cpu, "
                        "batch_per_worker: 16}\n")
    s = subprocess.run([kfsim, str(scenario), "--quiet", "--out", str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=60)
    assert s.returncode == 0, s.stdout + s.stderr
    rows = list(csv.DictReader(open(tmp_path / "out" / "steps.csv")))
    assert len(rows) == 6
    assert {int(r["comm_bytes"]) for r in rows} == {4 * 676}, rows[0]
    assert all(float(r["compute_s"]) > 0 for r in rows)


def test_profile_reports_a_broken_task(tmp_path):
    path = tmp_path / "broken.py"
    path.write_text(BROKEN["model_raises"][0].replace("pass", "return None"))
    p = subprocess.run([PYTHON, "-m", "kungfu.torch.profile", str(path)], env=worker_env(),
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "kungfu.torch.profile: task module" in p.stderr, p.stderr


def test_elastic_resizes_reshard_and_keep_one_model(tmp_path):
    """Under kfrun -w a scheduled_resize policy takes the cluster 2 -> 3 -> 2; every worker of
    each cluster trains the same model."""
    base = free_port_base(4)
    cmd = [kfrun(), "-q", "-w", "-np", "2", "-H", "127.0.0.1:3", "-builtin-config-port",
           str(base + 3), "-port-range", f"{base}-{base + 2}", "-timeout", "100s", PYTHON, "-m",
           "kungfu.torch.train", str(TINY), "--steps", "12", "--batch", "8", "--policy",
           "scheduled_resize:schedule=4:3,8:2", "--out", str(tmp_path)]
    r = subprocess.run(cmd, env=worker_env(), capture_output=True, text=True, timeout=120)
    check_ok(r)
    f = final(r)
    assert f["agreed"] and f["steps"] == 12 and f["workers"] == 2, f
    rows = list(csv.DictReader(open(tmp_path / "steps.csv")))
    assert [int(r["cluster_size"]) for r in rows] == [2] * 4 + [3] * 4 + [2] * 4
    assert f["samples"] == 8 * (2 * 4 + 3 * 4 + 2 * 4), f
