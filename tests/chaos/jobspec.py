"""A chaos run's elastic job, drawn from the run's seed: the workload (resnet56-sized gradients
checked by -verify, or an MLP trained with S-SGD), the initial size, the steps, the resizes
scheduled_resize makes, the strategy, the config server (kfrun's builtin one or a standalone
kfconfig) and the collective deadline; and the kfrun and kftrain command lines it runs as."""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from typing import Optional

from worlds import World

STRATEGIES = ["AUTO", "STAR", "RING", "BINARY_TREE_STAR", "RING_RS_AG", "CLIQUE"]


@dataclass
class JobSpec:
    """What one run trains and how (every field is drawn from the run's seed)."""

    world: str
    workload: str  # grad: -model resnet56 -verify; mlp: -numeric mlp -sync ssgd
    np: int
    steps: int
    schedule: list[tuple[int, int]]  # (step, workers) for scheduled_resize
    strategy: str
    config: str  # builtin (kfrun -builtin-config-port on host 0) or external (kfconfig)
    timeout_s: float  # kftrain -timeout: every collective's deadline
    compute_ms: int
    fusion: int = 1 << 20

    def describe(self) -> str:
        """One line for the progress log."""
        sched = ",".join(f"{s}:{n}" for s, n in self.schedule)
        return (f"{self.workload} np={self.np} steps={self.steps} resize={sched} "
                f"{self.strategy} config={self.config} deadline={self.timeout_s:g}s")

    def as_dict(self) -> dict:
        """For the run's JSON record."""
        return asdict(self)


def draw_schedule(rng: random.Random, np_: int, steps: int, capacity: int,
                  back_to_back: bool) -> list[tuple[int, int]]:
    """One or two resizes at random steps to sizes in 1..capacity other than the current one;
    `back_to_back`: a shrink by one at step r and the same worker back at r + 1 (the second
    resize is proposed while the dropped worker may still be leaving)."""
    if back_to_back:
        r = rng.randrange(3, steps - 4)
        if np_ > 1:
            return [(r, np_ - 1), (r + 1, np_)]
        return [(r, np_ + 1), (r + 1, np_)]
    count = rng.choice([1, 2, 2])
    at = sorted(rng.sample(range(3, steps - 3), count))
    out, size = [], np_
    for s in at:
        size = rng.choice([n for n in range(1, capacity + 1) if n != size])
        out.append((s, size))
    return out


def draw_job(rng: random.Random, world: World, slow: float, fault_kind: str,
             variant: str) -> JobSpec:
    """A job for `world`; `slow` scales the collective deadline (sanitizer builds);
    kill_config needs the standalone server, and resize_race's policy variant back-to-back
    resizes."""
    capacity = world.capacity()
    np_ = rng.randint(2, capacity - 1) if capacity > 2 else 2
    steps = rng.randint(18, 30)
    config = "external" if fault_kind == "kill_config" else rng.choice(["builtin", "external"])
    back_to_back = fault_kind == "resize_race" and variant == "policy"
    return JobSpec(world=world.name,
                   workload=rng.choice(["grad", "grad", "mlp"]),
                   np=np_,
                   steps=steps,
                   schedule=draw_schedule(rng, np_, steps, capacity, back_to_back),
                   strategy=rng.choice(STRATEGIES),
                   config=config,
                   timeout_s=round(6.0 * slow, 1),
                   compute_ms=rng.choice([20, 40, 60]),
                   fusion=rng.choice([1 << 18, 1 << 20]))


def kftrain_args(job: JobSpec, kftrain: str, records: str) -> list[str]:
    """The worker command every runner starts."""
    args = [kftrain, "-steps", str(job.steps), "-timeout", f"{job.timeout_s:g}s", "-q",
            "-journal", "-out", records, "-compute-ms", str(job.compute_ms)]
    if job.workload == "grad":
        args += ["-model", "resnet56", "-verify", "-fusion", str(job.fusion)]
    else:
        args += ["-numeric", "mlp", "-sync", "ssgd", "-eval-every", "0"]
    return args


def kfrun_args(job: JobSpec, world: World, host: int, kfrun: str, ports: tuple[int, int],
               config_port: int, config_url: Optional[str]) -> list[str]:
    """Host `host`'s runner: kfrun -w with every host, this one as -self, the job's policy;
    the builtin config server on host 0 unless `config_url` names a standalone one."""
    schedule = ",".join(f"{s}:{n}" for s, n in job.schedule)
    args = [kfrun, "-w", "-np", str(job.np), "-H", world.host_list(), "-self", world.hosts[host],
            "-port-range", f"{ports[0]}-{ports[1]}", "-strategy", job.strategy,
            "-detach-timeout", "10s", "-policy", f"scheduled_resize:schedule={schedule}"]
    if config_url is not None:
        args += ["-config-server", config_url]
    elif host == 0:
        args += ["-builtin-config-port", str(config_port)]
    else:
        args += ["-config-server", f"http://{world.hosts[0]}:{config_port}/config"]
    return args
