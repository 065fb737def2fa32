"""One task module, both worlds, the same math: the tiny task (tasks/tiny.py) trained by 4 workers
for 20 steps inside kfsim (workload.torch, the flow world) and under kfrun (`python3 -m
kungfu.torch.train`) ends with the same parameters, bit for bit, for S-SGD, SMA and AdaSGD: the
same initial model, kfsim's sampler, the same collective strategy (STAR, so the same fold
order) and kfsim's local update rule in both. Pair averaging is left out: its peer choices are
drawn by different generators and depend on timing (kungfu.torch.train's docstring)."""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest

from conftest import PYTHON, check_ok, free_port_base, kfrun, worker_env

pytest.importorskip("torch")

TINY = Path(__file__).resolve().parent / "tasks" / "tiny.py"
WORKERS, STEPS, BATCH, SEED, LR = 4, 20, 8, 3, 0.1


def kfsim() -> str:
    if os.environ.get("KFSIM"):
        return os.environ["KFSIM"]
    pytest.skip("KFSIM is not set (ctest sets it)")


# (kfsim's optimizer, kungfu.torch.train's, momentum): AdaSGD switches at step 10 and, as kfsim
# does, hands over rank 0's model but not its momentum, so it runs without momentum here; SMA
# too, to keep each replica's update a plain gradient step.
CASES = [("ssgd", "ssgd", 0.9), ("sma", "sma", 0.0), ("ada_sgd", "adasgd", 0.0)]


@pytest.mark.parametrize("sim_name,real_name,momentum", CASES, ids=[c[0] for c in CASES])
def test_kfsim_and_kfrun_train_the_same_parameters(tmp_path, sim_name, real_name, momentum):
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(textwrap.dedent(f"""\
        name: sim-vs-real
        seed: {SEED}
        steps: {STEPS}
        world: flow
        strategy: STAR
        optimizer: {sim_name}
        topology: {{kind: star, hosts: {WORKERS}, link: {{bandwidth: 10Gbps, latency: 10us}}}}
        workload:
          model: resnet56
          device: k80
          batch_per_worker: {BATCH}
          torch:
            module: {TINY}
            learning_rate: {LR}
            momentum: {momentum}
            sma_alpha: 0.1
            ada_switch_step: 10
            eval_every: 0
            save_parameters: true
        """))
    r = subprocess.run([kfsim(), str(scenario), "--out", str(tmp_path / "sim"), "-q"],
                       capture_output=True, text=True, timeout=300)
    if "built without KF_WITH_TORCH" in r.stderr:
        pytest.skip("kfsim was built without KF_WITH_TORCH")
    assert r.returncode == 0, r.stdout + r.stderr
    simulated = np.fromfile(tmp_path / "sim" / "parameters.f32", dtype=np.float32)

    base = free_port_base(WORKERS)
    cmd = [kfrun(), "-q", "-np", str(WORKERS), "-port-range", f"{base}-{base + WORKERS}",
           "-strategy", "STAR", PYTHON, "-m", "kungfu.torch.train", str(TINY),
           "--optimizer", real_name, "--steps", str(STEPS), "--batch", str(BATCH),
           "--lr", str(LR), "--momentum", str(momentum), "--alpha", "0.1",
           "--change-step", "10", "--seed", str(SEED), "--save-params",
           "--out", str(tmp_path / "real")]
    check_ok(subprocess.run(cmd, env=worker_env(), capture_output=True, text=True, timeout=120))
    real = np.load(tmp_path / "real" / "params.npy")

    assert simulated.shape == real.shape == (676,)
    assert np.array_equal(simulated, real), f"largest difference {np.abs(simulated - real).max()}"
    # ... and the runs trained: not the initial parameters.
    import torch
    from kungfu.torch.task import load
    start = torch.cat([p.detach().reshape(-1) for p in load(str(TINY)).model(SEED).parameters()])
    assert np.abs(real - start.numpy()).max() > 1e-3
