"""One chaos run: starts the job's config server (standalone kfconfig, or kfrun's builtin one on
host 0) and one kfrun -w per host of the world, fires the fault, and waits for the runners up to
the run's bound. Past the bound it is a hang: everything still running is listed and killed.
After the runners, any process left (a worker that outlived its runner) is listed and killed too;
the run leaves nothing behind."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import procs
from confreq import request
from faults import FaultEngine, FaultPlan
from jobspec import JobSpec, kfrun_args, kftrain_args
from progress import started_workers
from worlds import World

HERE = Path(__file__).resolve().parent
PYTHON = "/usr/bin/python3"


@dataclass
class Ended:
    """How a run ended, before it is judged."""

    codes: list[Optional[int]]  # per runner (Popen's: -9 for SIGKILL); None: killed at the bound
    seconds: float
    hang: bool
    left_at_bound: list[str] = field(default_factory=list)  # processes alive at the bound
    orphans: list[str] = field(default_factory=list)  # alive after every runner had exited
    error: str = ""  # the run could not be started (no config server, no runner)


def _clean_env(secret: str) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("KUNGFU_", "OMPI_COMM_WORLD_", "SLURM_")) and k not in (
               "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
               "MASTER_PORT")}
    env["KUNGFU_SECRET"] = secret
    return env


def _describe(pid: int) -> str:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        cmd = "?"
    return f"{pid} [{procs.state(pid)}] {cmd[:160]}"


class Run:
    """A job in a world with a fault, in directory `dir` (logs, records, the config server's
    log)."""

    def __init__(self, job: JobSpec, plan: FaultPlan, world: World, build: Path, dir: Path,
                 port_base: int) -> None:
        self.job = job
        self.plan = plan
        self.world = world
        self.build = build
        self.dir = dir
        self.steps = job.steps
        self.first_port = port_base
        self.config_port = port_base + 30
        self.token = secrets.token_hex(16)
        self.runner_procs: list[subprocess.Popen] = []
        self.config_proc: Optional[subprocess.Popen] = None
        self.config_url = f"http://{world.hosts[0]}:{self.config_port}/config"
        self.deleted_config = False
        self.idle_since: Optional[float] = None

    def logs(self) -> list[Path]:
        """Each runner's output (stdout and stderr together)."""
        return [self.dir / f"runner{i}.log" for i in range(len(self.world.hosts))]

    def records(self) -> Path:
        """kftrain -out."""
        return self.dir / "records"

    def config_request(self, method: str, body: Optional[str] = None) -> tuple[int, str]:
        """A request to the job's config server, from host 0 (inside its namespace there)."""
        prefix = self.world.prefix(0)
        if not prefix:
            return request(method, self.config_url, self.token, body)
        cmd = [*prefix, PYTHON, str(HERE / "confreq.py"), method, self.config_url, self.token]
        if body is not None:
            cmd.append(body)
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
        except subprocess.TimeoutExpired:
            return 0, "confreq timed out"
        status, _, text = r.stdout.partition("\t")
        return (int(status), text) if status.isdigit() else (0, r.stderr)

    def _start_config(self, env: dict) -> None:
        kfconfig = str(self.build / "apps" / "kfconfig")
        cmd = [*self.world.prefix(0), kfconfig, "-port", str(self.config_port), "-addr",
               self.world.hosts[0], "-token-env", "KUNGFU_SECRET"]
        log = open(self.dir / "kfconfig.log", "w")
        self.config_proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                            start_new_session=True)
        log.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and self.config_proc.poll() is None:
            status, _ = self.config_request("GET")
            if status in (200, 404):
                return
            time.sleep(0.05)
        raise RuntimeError(f"kfconfig did not start: {(self.dir / 'kfconfig.log').read_text()}")

    def _start_runners(self, env: dict) -> None:
        kfrun = str(self.build / "apps" / "kfrun")
        kftrain = str(self.build / "apps" / "kftrain")
        worker = kftrain_args(self.job, kftrain, str(self.records()))
        url = self.config_url if self.job.config == "external" else None
        ports = (self.first_port, self.first_port + 7)
        for i, log_path in enumerate(self.logs()):
            cmd = [*self.world.prefix(i),
                   *kfrun_args(self.job, self.world, i, kfrun, ports, self.config_port, url),
                   *worker]
            log = open(log_path, "w")
            self.runner_procs.append(
                subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                 start_new_session=True))
            log.close()
        (self.dir / "command.txt").write_text(" ".join(cmd) + "\n")

    def _maybe_clear_config(self, now: float) -> None:
        """With a standalone server, once no worker has run for a moment, clears the config
        (DELETE), as the job's owner would when the job is over: a runner with no worker in the
        latest cluster watches for growth until then (docs/real-clusters.md). A resize is made
        by running workers, so none running means the job has ended."""
        if self.deleted_config or self.config_proc is None:
            return
        started = started_workers(self.logs())
        if not started or any(procs.alive(s.pid) for s in started):
            self.idle_since = None
            return
        if self.idle_since is None:
            self.idle_since = now
        elif now - self.idle_since >= 0.5:
            self.deleted_config = True
            self.config_request("DELETE")

    def execute(self, bound_s: float) -> tuple[Ended, FaultEngine]:
        """Runs the job with its fault for at most `bound_s` seconds."""
        self.dir.mkdir(parents=True, exist_ok=True)
        env = _clean_env(self.token)
        engine = FaultEngine(self.plan, self)
        t0 = time.monotonic()
        hang = False
        left: list[str] = []
        error = ""
        try:
            if self.job.config == "external":
                self._start_config(env)
            self._start_runners(env)
        except (RuntimeError, OSError) as e:
            error = f"{type(e).__name__}: {e}"
        try:
            while not error and any(p.poll() is None for p in self.runner_procs):
                now = time.monotonic()
                if now - t0 > bound_s:
                    hang = True
                    break
                engine.tick(now)
                self._maybe_clear_config(now)
                time.sleep(0.02)
        finally:
            engine.finish()
            seconds = time.monotonic() - t0
            keep = [self.config_proc.pid] if self.config_proc is not None else []
            running_at_bound = [p.poll() is None for p in self.runner_procs]
            if hang:
                left = [_describe(p) for p in procs.descendants()
                        if procs.alive(p) and p not in keep]
            orphans = [] if hang or error else self._orphans(keep)
            self._stop_everything()
        codes = [None if hang and running_at_bound[i] else p.returncode
                 for i, p in enumerate(self.runner_procs)]
        return Ended(codes, seconds, hang, left, orphans, error), engine

    def _orphans(self, keep: list[int]) -> list[str]:
        """Processes other than the config server still alive 2 s after the last runner exited
        (a worker must die with its runner)."""
        left = [p for p in procs.descendants() if p not in keep and procs.alive(p)]
        left = procs.wait_gone(left, 2.0)
        return [_describe(p) for p in left]

    def _stop_everything(self) -> None:
        if self.config_proc is not None and self.config_proc.poll() is None:
            self.config_proc.send_signal(signal.SIGTERM)
            try:
                self.config_proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                pass
        mine = {p.pid for p in self.runner_procs}
        if self.config_proc is not None:
            mine.add(self.config_proc.pid)
        for _ in range(3):
            killed = procs.kill_all()
            procs.wait_gone(killed, 2.0)
            procs.reap_adopted(mine)
            if not killed:
                break
        for p in self.runner_procs + ([self.config_proc] if self.config_proc else []):
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                print(f"chaos: pid {p.pid} survived SIGKILL", file=sys.stderr)
