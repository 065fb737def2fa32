"""Unit tests of bench/soak.py's judgement: the verdicts the soak's exit status rests on."""

from __future__ import annotations

import importlib.util
import sys
import unittest
from pathlib import Path
from types import ModuleType

import numpy as np


def load_soak() -> ModuleType:
    """Imports bench/soak.py as a module (it lives outside any package)."""
    path = Path(__file__).resolve().parent.parent / "bench" / "soak.py"
    spec = importlib.util.spec_from_file_location("soak", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["soak"] = module
    spec.loader.exec_module(module)
    return module


soak = load_soak()


def worker(rank: int, rss_kib_per_min: float = 0.0, fd_step_at: float | None = None,
           noise_kib: float = 0.0, minutes: float = 20.0, interval: float = 2.0) -> soak.Worker:
    """A worker sampled every `interval` s: 48 MiB plus a linear trend and spiky noise; 14 fds,
    one more from `fd_step_at` seconds on."""
    rng = np.random.default_rng(rank)
    w = soak.Worker(pid=1000 + rank, rank=rank)
    for t in np.arange(0.0, minutes * 60.0, interval):
        spike = noise_kib if rng.random() < 0.2 else 0.0
        w.t.append(float(t))
        trend = rss_kib_per_min * t / 60.0
        w.rss_kib.append(int(48 * 1024 + trend + spike * rng.standard_normal()))
        w.fds.append(14 + (1 if fd_step_at is not None and t >= fd_step_at else 0))
        w.threads.append(2)
        w.cpu_s.append(0.5 * float(t))  # half a CPU, as a soak worker on a shared machine
    return w


class Judge(unittest.TestCase):
    """judge(): per-worker slopes and the reasons a soak fails."""

    def test_flat_workers_pass_despite_wobble(self) -> None:
        """Spikes of a few MiB, as large payloads come and go, do not make a 20-minute slope."""
        v = soak.judge([worker(r, noise_kib=3000) for r in range(4)], 120.0, 64.0, 1e6, 1200.0)
        self.assertEqual(v["reasons"], [])
        for row in v["workers"]:
            self.assertLess(abs(row["rss_slope_kib_per_min"]), 64.0)
            self.assertIn("rss_slope_of_minute_medians_kib_per_min", row)

    def test_slow_leak_fails(self) -> None:
        """100 KiB/min on one rank is over the 64 KiB/min limit; the others pass."""
        v = soak.judge([worker(0), worker(1, rss_kib_per_min=100)], 120.0, 64.0, None, None)
        self.assertEqual(len(v["reasons"]), 1)
        self.assertIn("rank 1: resident memory grows", v["reasons"][0])
        self.assertAlmostEqual(v["workers"][1]["rss_slope_kib_per_min"], 100.0, delta=1.0)

    def test_growth_during_warmup_is_forgiven(self) -> None:
        """A step up inside the warm-up (buffers reaching their working size) is not judged."""
        w = worker(0)
        w.rss_kib = [r - 30000 if t < 60 else r for t, r in zip(w.t, w.rss_kib)]
        w.fds = [11 if t < 60 else 14 for t in w.t]
        self.assertEqual(soak.judge([w], 120.0, 64.0, None, None)["reasons"], [])

    def test_one_more_descriptor_after_warmup_fails(self) -> None:
        """A descriptor opened 10 minutes in and kept is a failure naming the rank."""
        v = soak.judge([worker(0, fd_step_at=600.0)], 120.0, 64.0, None, None)
        self.assertEqual(v["reasons"],
                         ["rank 0: open descriptors changed after the warm-up (14..15)"])

    def test_exit_after_the_window_is_not_judged(self) -> None:
        """A worker tearing down at the end (fewer fds, less memory) passes when the window ends
        before; judged to the last sample it fails."""
        w = worker(0)
        end = w.t[-1] - 4.0
        w.fds = [10 if t > end else f for t, f in zip(w.t, w.fds)]
        w.rss_kib = [16000 if t > end else r for t, r in zip(w.t, w.rss_kib)]
        self.assertEqual(soak.judge([w], 120.0, 64.0, None, None, end_s=end)["reasons"], [])
        self.assertIn("open descriptors changed",
                      soak.judge([w], 120.0, 64.0, None, None)["reasons"][0])

    def test_too_few_samples_fail(self) -> None:
        """A run that ends inside its warm-up cannot be judged flat: it fails."""
        v = soak.judge([worker(0, minutes=1.0)], 120.0, 64.0, None, None)
        self.assertIn("samples after the warm-up", v["reasons"][0])

    def test_bytes_per_collective(self) -> None:
        """64 KiB/min at 65,536 collectives a minute is 1 byte per collective."""
        v = soak.judge([worker(0, rss_kib_per_min=64)], 120.0, 1e9, 65536 * 20, 1200.0)
        self.assertAlmostEqual(v["workers"][0]["rss_slope_bytes_per_collective"], 1.0, delta=0.02)


class Stall(unittest.TestCase):
    """stalled(): every worker idle for the window is a hang; one busy worker is not."""

    def idle_from(self, w: soak.Worker, t_idle: float) -> None:
        """Freezes the worker's CPU time from `t_idle` seconds on."""
        frozen = next(c for t, c in zip(w.t, w.cpu_s) if t >= t_idle)
        w.cpu_s = [c if t < t_idle else frozen for t, c in zip(w.t, w.cpu_s)]

    def test_busy_workers_are_not_stalled(self) -> None:
        """Workers using CPU all along are running."""
        self.assertFalse(soak.stalled([worker(r, minutes=2) for r in range(4)], 30.0))

    def test_all_idle_is_a_stall(self) -> None:
        """Every worker's CPU time frozen for longer than the window: a hang."""
        workers = [worker(r, minutes=2) for r in range(4)]
        for w in workers:
            self.idle_from(w, 60.0)
        self.assertTrue(soak.stalled(workers, 30.0))

    def test_one_busy_worker_is_not_a_stall(self) -> None:
        """Ranks waiting on one that still computes are not hung."""
        workers = [worker(r, minutes=2) for r in range(4)]
        for w in workers[1:]:
            self.idle_from(w, 60.0)
        self.assertFalse(soak.stalled(workers, 30.0))

    def test_idle_shorter_than_the_window_is_not_a_stall(self) -> None:
        """Idle for 20 s of a 30 s window: not yet."""
        workers = [worker(r, minutes=2) for r in range(4)]
        for w in workers:
            self.idle_from(w, 100.0)
        self.assertFalse(soak.stalled(workers, 30.0))


class Report(unittest.TestCase):
    """kfbench_report(): kfbench soak's JSON line in kfrun's output."""

    def test_reads_the_json_line_behind_kfrun_prefix(self) -> None:
        """kfrun prefixes worker lines with [ip.port::stdout]; the object after it is read."""
        log = ('[127.0.0.1.41200::stdout] {"collective":"soak","wrong":0,"rounds":3}\n'
               "[127.0.0.1.41200::stderr] something else\n")
        self.assertEqual(soak.kfbench_report(log), {"collective": "soak", "wrong": 0, "rounds": 3})

    def test_no_report(self) -> None:
        """A worker that failed before its report leaves None."""
        self.assertIsNone(soak.kfbench_report("kfbench: round 3 (allreduce): timed out\n"))


if __name__ == "__main__":
    unittest.main()
