"""workload.torch: the user's PyTorch model trained inside kfsim (sim/torch/, kungfu.torch._sim).

A tiny synthetic task (tests/torch/tiny_task.py) in the flow world: identical records from two
runs, another seed differs; every optimizer; the adaptive_batch_size policy; a resize; per-worker
buffers; a broken task exits 2 with one message and no records; and S-SGD's parameters after N
steps equal plain PyTorch's. Skipped when kfsim was built without KF_WITH_TORCH."""

import os
import subprocess
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "torch" / "tiny_task.py"


def kfsim() -> str:
    if os.environ.get("KFSIM"):
        return os.environ["KFSIM"]
    if os.environ.get("KFRUN"):
        return str(Path(os.environ["KFRUN"]).parent / "kfsim")
    pytest.skip("KFSIM is not set (ctest sets it)")


def scenario(tmp_path: Path, torch_keys: str = "", extra: str = "", name: str = "tiny",
             module: str = str(TINY), workers: int = 2, steps: int = 12, batch: int = 8) -> Path:
    f = tmp_path / f"{name}.yaml"
    f.write_text(textwrap.dedent(f"""\
        name: {name}
        seed: 1
        steps: {steps}
        world: flow
        topology: {{kind: star, hosts: {workers}, link: {{bandwidth: 10Gbps, latency: 10us}}}}
        workload:
          model: resnet56
          device: k80
          batch_per_worker: {batch}
          torch:
            module: {module}
            learning_rate: 0.1
            eval_every: 2
        """) + textwrap.indent(textwrap.dedent(torch_keys), "    ") + textwrap.dedent(extra))
    return f


def run(path: Path, out: Path, *args: str, env: dict = None) -> subprocess.CompletedProcess:
    e = dict(os.environ)
    e.update(env or {})
    r = subprocess.run([kfsim(), str(path), "--out", str(out), "-q", *args], capture_output=True,
                       text=True, timeout=300, env=e)
    if "built without KF_WITH_TORCH" in r.stderr:
        pytest.skip("kfsim was built without KF_WITH_TORCH")
    return r


def ok(r: subprocess.CompletedProcess) -> None:
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"


def records(out: Path) -> dict:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and p.name != "perf.json"}


def test_records_are_identical_for_a_seed_and_differ_for_another(tmp_path):
    f = scenario(tmp_path)
    ok(run(f, tmp_path / "a"))
    ok(run(f, tmp_path / "b"))
    a, b = records(tmp_path / "a"), records(tmp_path / "b")
    assert {"steps.csv", "summary.json", "collectives.csv"} <= set(a)
    assert a == b
    ok(run(f, tmp_path / "c", "--seed", "2"))
    assert records(tmp_path / "c")["steps.csv"] != a["steps.csv"]
    import json
    s = json.loads(a["summary.json"])
    assert s["numeric_model"] == "torch" and s["final_accuracy"] is not None
    assert s["final_accuracy"] > 0.5  # four well-separated blobs after 12 steps


@pytest.mark.parametrize("optimizer", ["ssgd", "sma", "pair_avg", "ada_sgd"])
def test_every_optimizer_trains_a_torch_model(tmp_path, optimizer):
    f = scenario(tmp_path, "ada_switch_step: 5\n", f"optimizer: {optimizer}\n", workers=3)
    ok(run(f, tmp_path / "o"))
    steps = (tmp_path / "o" / "steps.csv").read_text().splitlines()
    assert len(steps) == 1 + 3 * 12
    import json
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert s["optimizer"] == optimizer and s["final_accuracy"] is not None


def test_adaptive_batch_size_policy_moves_the_batch(tmp_path):
    # The tiny task's noise scale is small: min_batch above the start makes the policy's first
    # decision a move, whatever the estimate (the policy itself is tested elsewhere; here, that
    # it runs on a torch workload's gns and the batch it sets reaches the model).
    f = scenario(tmp_path, "gns_every: 2\n",
                 "policy: {name: adaptive_batch_size, min_batch: 8, max_batch: 64, "
                 "lr_rule: none, interval: 4}\n", steps=16, workers=4, batch=4)
    r = run(f, tmp_path / "p")
    ok(r)
    import csv
    rows = list(csv.DictReader((tmp_path / "p" / "steps.csv").open()))
    assert any("gns=" in r["values"] for r in rows)
    batches = {int(r["batch"]) for r in rows}
    assert 4 in batches and max(batches) >= 8, sorted(batches)
    assert {int(r["samples"]) for r in rows} == batches


def test_a_resize_grows_and_shrinks_a_torch_job(tmp_path):
    f = scenario(tmp_path, "", "elastic: {initial_workers: 2, spawn_delay: 1s}\n"
                 "policy: {name: scheduled_resize, schedule: \"4:4,8:3\"}\n", workers=4)
    ok(run(f, tmp_path / "r"))
    import csv
    rows = list(csv.DictReader((tmp_path / "r" / "steps.csv").open()))
    sizes = {int(r["step"]): int(r["cluster_size"]) for r in rows}
    assert sizes[0] == 2 and sizes[6] == 4 and sizes[11] == 3


def test_a_model_with_buffers_trains_with_a_replica_per_worker(tmp_path):
    f = scenario(tmp_path)
    ok(run(f, tmp_path / "bn", env={"TINY_BN": "1"}))
    ok(run(f, tmp_path / "bn2", env={"TINY_BN": "1"}))
    assert records(tmp_path / "bn") == records(tmp_path / "bn2")


def test_ssgd_parameters_equal_plain_pytorch(tmp_path):
    """2 workers, each batch its whole shard (128 of 256 samples): S-SGD's averaged gradient is
    the full-batch gradient whatever the sampler's order, so N steps of kfsim equal N steps of
    torch.optim.SGD (same momentum form) on the whole set, to float tolerance."""
    steps, lr, momentum = 5, 0.1, 0.9
    f = scenario(tmp_path, f"momentum: {momentum}\nsave_parameters: true\n", steps=steps,
                 batch=128)
    ok(run(f, tmp_path / "s"))
    got = torch.from_numpy(
        __import__("numpy").fromfile(tmp_path / "s" / "parameters.f32", dtype="float32"))
    import importlib.util
    spec = importlib.util.spec_from_file_location("tiny_task_ref", TINY)
    task = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(task)
    torch.manual_seed(1)
    model = task.model()
    x, y = task.data(True)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    for _ in range(steps):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    want = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    assert got.shape == want.shape
    assert torch.allclose(got, want, rtol=1e-5, atol=1e-6), (got - want).abs().max()
    # ... and not merely the initial parameters.
    torch.manual_seed(1)
    start = torch.cat([p.detach().reshape(-1) for p in task.model().parameters()])
    assert (got - start).abs().max() > 1e-3


BROKEN = {
    "import_raises": ("raise RuntimeError('no GPU here')\n", "importing it failed: RuntimeError: no GPU here"),
    "model_raises": ("import torch\ndef model():\n    raise ValueError('bad width')\n"
                     "def data(train):\n    return torch.zeros(4, 3), torch.zeros(4, dtype=torch.int64)\n",
                     "model() raised: ValueError: bad width"),
    "data_raises": ("import torch\ndef model():\n    return torch.nn.Linear(3, 2)\n"
                    "def data(train):\n    return open('/nonexistent/data')\n",
                    "data() raised: FileNotFoundError"),
    "labels_wrong": ("import torch\ndef model():\n    return torch.nn.Linear(3, 2)\n"
                     "def data(train):\n    return torch.zeros(4, 3), torch.zeros(4)\n",
                     "labels must be a 1-d int64 tensor"),
    "output_wrong": ("import torch\ndef model():\n    return torch.nn.Linear(3, 1)\n"
                     "def data(train):\n    return torch.zeros(4, 3), torch.ones(4, dtype=torch.int64)\n",
                     "model() output for a batch of 2 has shape (2, 1)"),
    "forward_raises": ("import torch\ndef model():\n    return torch.nn.Linear(5, 2)\n"
                       "def data(train):\n    return torch.zeros(4, 3), torch.ones(4, dtype=torch.int64)\n",
                       "the model's forward raised: RuntimeError"),
    "no_data": ("import torch\ndef model():\n    return torch.nn.Linear(3, 2)\n",
                "it defines no function data()"),
    "loss_raises": ("import torch\ndef model():\n    return torch.nn.Linear(3, 2)\n"
                    "def data(train):\n    return torch.zeros(4, 3), torch.ones(4, dtype=torch.int64)\n"
                    "def loss(out, y):\n    raise KeyError('oops')\n",
                    "loss() raised: KeyError: 'oops'"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_task_exits_2_naming_module_and_function(tmp_path, case):
    text, message = BROKEN[case]
    module = tmp_path / f"{case}.py"
    module.write_text(text)
    f = scenario(tmp_path, module=str(module))
    out = tmp_path / "out"
    r = run(f, out)
    assert r.returncode == 2, r.stderr
    assert str(module) in r.stderr and message in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not out.exists() or not any(out.iterdir())


def test_a_broken_task_is_found_before_forking_workers(tmp_path):
    module = tmp_path / "broken.py"
    module.write_text(BROKEN["model_raises"][0])
    f = scenario(tmp_path, module=str(module),
                 extra="variants:\n  a: {steps: 2}\n  b: {steps: 3}\n")
    out = tmp_path / "out"
    r = run(f, out, "--jobs", "2")
    assert r.returncode == 2 and "model() raised: ValueError: bad width" in r.stderr, r.stderr
    assert not out.exists() or not any(out.iterdir())


def test_variants_in_worker_processes_match_a_sequential_run(tmp_path):
    f = scenario(tmp_path, extra="variants:\n  a: {steps: 4}\n  b: {optimizer: sma}\n")
    ok(run(f, tmp_path / "seq"))
    ok(run(f, tmp_path / "par", "--jobs", "2"))
    seq = {k: v for k, v in records(tmp_path / "seq").items() if k.endswith(("steps.csv", "summary.json"))}
    par = {k: v for k, v in records(tmp_path / "par").items() if k.endswith(("steps.csv", "summary.json"))}
    assert seq and seq == par


def test_scenario_errors_point_into_the_file(tmp_path):
    f = scenario(tmp_path, module=str(tmp_path / "missing.py"))
    r = run(f, tmp_path / "out")
    assert r.returncode == 2 and f"{f.name}:" in r.stderr and "no task module file" in r.stderr
    f = scenario(tmp_path, "colour: blue\n")
    r = run(f, tmp_path / "out")
    assert r.returncode == 2 and "workload.torch" in r.stderr and "colour" in r.stderr, r.stderr
    r = run(scenario(tmp_path, module="no_such_module_kf"), tmp_path / "out")
    assert r.returncode == 2 and "task module no_such_module_kf: no such file or module" in r.stderr


def test_the_fashion_scenario_runs_its_three_arms(tmp_path):
    """scenarios/adaptive-batch-fashion.yaml on a few real Fashion-MNIST images and steps."""
    data = Path(os.environ.get("KF_FASHION_MNIST", "/usr/share/datasets/fashion-mnist"))
    if not data.is_dir():
        pytest.skip(f"no Fashion-MNIST in {data} (Debian package dataset-fashion-mnist)")
    r = run(ROOT / "scenarios" / "adaptive-batch-fashion.yaml", tmp_path / "f",
            "--set", "workload.torch.train=256", "--set", "workload.torch.test=32",
            "--set", "steps=4", "--set", "variants.fixed-large.steps=2",
            "--set", "variants.adaptive.steps=6")
    ok(r)
    import csv
    arms = {row["variant"]: row for row in csv.DictReader((tmp_path / "f" / "variants.csv").open())}
    assert set(arms) == {"fixed-small", "fixed-large", "adaptive"}
    assert arms["fixed-large"]["batch_per_worker"] == "256"
    assert int(arms["adaptive"]["final_batch_per_worker"]) != 16  # the policy moved it


def test_a_task_that_fails_mid_run_exits_2_without_records(tmp_path):
    """loss() passes kfsim's first check, then raises in the run's ninth call: kfsim closes the
    workers, reports the task's error and writes nothing."""
    module = tmp_path / "late.py"
    module.write_text(BROKEN["loss_raises"][0].replace(
        "def loss(out, y):\n    raise KeyError('oops')\n",
        "calls = [0]\ndef loss(out, y):\n    calls[0] += 1\n    if calls[0] > 8:\n"
        "        raise RuntimeError('late failure')\n"
        "    return torch.nn.functional.cross_entropy(out, y)\n"))
    out = tmp_path / "out"
    r = run(scenario(tmp_path, module=str(module)), out)
    assert r.returncode == 2 and "loss() raised: RuntimeError: late failure" in r.stderr, r.stderr
    assert not out.exists() or not any(out.iterdir())
