"""Unit tests of the chaos judge (invariants.py) on hand-made runs: a good run passes, and each
kind of broken invariant is reported, so that a campaign with no violations means something.
    /usr/bin/python3 -m unittest -v invariants_test   (from tests/chaos)"""

from __future__ import annotations

import tempfile
import unittest
from pathlib import Path

from faults import FaultOutcome, FaultPlan
from invariants import judge
from run import Ended

W0, W1 = "127.0.0.1:100", "127.0.0.1:101"


class FakeRun:
    """The parts of run.Run the judge reads: two workers under one runner, 3 steps."""

    def __init__(self, root: Path, runners: int = 1) -> None:
        self.dir = root
        self.steps = 3
        self.runners = runners

    def logs(self) -> list[Path]:
        """Each runner's log."""
        return [self.dir / f"runner{i}.log" for i in range(self.runners)]

    def records(self) -> Path:
        """kftrain -out."""
        return self.dir / "records"


class FakeEngine:
    """A fault engine after the fact."""

    def __init__(self, kind: str, applied: bool, target: str = "") -> None:
        self.plan = FaultPlan(kind=kind)
        self.outcome = FaultOutcome(applied=applied, member=applied, target=target)


def write_worker(run: FakeRun, worker: str, pid: int, rank: int, steps: list[int],
                 digests: dict[int, str], summary: bool = True) -> None:
    """A worker's journal (and records, when it exited by itself)."""
    host, _, port = worker.rpartition(":")
    d = run.records() / f"{host}.{port}"
    d.mkdir(parents=True, exist_ok=True)
    lines = ["pid,rank,step,cluster_size,digest"]
    lines += [f"{pid},{rank},{s},2,{digests.get(s, f'{s:016x}')}" for s in steps]
    (d / "journal.csv").write_text("\n".join(lines) + "\n")
    if summary:
        (d / "summary.json").write_text(f'{{"pid": {pid}, "errors": []}}\n')
        (d / "steps.csv").write_text("rank,step\n" + "".join(f"{rank},{s}\n" for s in steps))


def log(run: FakeRun, *lines: str) -> None:
    """The runner's log."""
    head = [f"[kfrun] started rank 0 ({W0}) as pid 10", f"[kfrun] started rank 1 ({W1}) as pid 11"]
    run.logs()[0].write_text("\n".join(head + list(lines)) + "\n")


class JudgeTest(unittest.TestCase):
    """Each case makes one run and judges it."""

    def setUp(self) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        self.run = FakeRun(Path(self.tmp.name))

    def tearDown(self) -> None:
        self.tmp.cleanup()

    def good(self) -> None:
        write_worker(self.run, W0, 10, 0, [0, 1, 2], {})
        write_worker(self.run, W1, 11, 1, [0, 1, 2], {})
        log(self.run, f"[kfrun] rank 0 ({W0}) exited with code 0",
            f"[kfrun] rank 1 ({W1}) exited with code 0")

    def judge(self, codes: list, engine: FakeEngine, hang: bool = False) -> list[str]:
        return judge(self.run, Ended(codes, 1.0, hang), engine).violations

    def test_a_good_run_passes(self) -> None:
        self.good()
        self.assertEqual(self.judge([0], FakeEngine("none", False)), [])

    def test_divergent_parameters(self) -> None:
        write_worker(self.run, W0, 10, 0, [0, 1, 2], {1: "aaaa"})
        write_worker(self.run, W1, 11, 1, [0, 1, 2], {})
        log(self.run, f"[kfrun] rank 0 ({W0}) exited with code 0",
            f"[kfrun] rank 1 ({W1}) exited with code 0")
        v = self.judge([0], FakeEngine("none", False))
        self.assertTrue(any(x.startswith("divergence: step 1") for x in v), v)

    def test_a_step_missing_from_one_worker(self) -> None:
        write_worker(self.run, W0, 10, 0, [0, 1, 2], {})
        write_worker(self.run, W1, 11, 1, [0, 2], {})
        log(self.run, f"[kfrun] rank 0 ({W0}) exited with code 0",
            f"[kfrun] rank 1 ({W1}) exited with code 0")
        v = self.judge([0], FakeEngine("none", False))
        self.assertTrue(any("step 1 journaled by 1 of 2" in x for x in v), v)
        self.assertTrue(any("with a gap" in x for x in v), v)

    def test_a_loss_without_a_fault(self) -> None:
        self.good()
        v = self.judge([1], FakeEngine("none", False))
        self.assertTrue(any(x.startswith("unexpected loss") for x in v), v)
        self.assertTrue(any(x.startswith("unnamed cause") for x in v), v)

    def test_a_failed_worker_that_says_nothing(self) -> None:
        write_worker(self.run, W0, 10, 0, [0], {})
        write_worker(self.run, W1, 11, 1, [0, 1], {}, summary=False)
        log(self.run, f"[kfrun] rank 0 ({W0}) failed with exit code 1",
            f"[kfrun] rank 1 ({W1}) exited with code 143")
        v = self.judge([1], FakeEngine("kill_worker", True, W1))
        self.assertTrue(any("printed no error" in x for x in v), v)
        self.assertTrue(any(x.startswith("kill not named") for x in v), v)

    def test_a_named_loss_passes(self) -> None:
        write_worker(self.run, W0, 10, 0, [0, 1], {})
        write_worker(self.run, W1, 11, 1, [0], {}, summary=False)
        log(self.run, f"[kfrun] rank 1 ({W1}) failed with exit code 137 (signal 9)",
            "[127.0.0.1.100::stderr] kftrain: peer_lost: allreduce 'g' on rank 0: lost rank 1",
            f"[kfrun] rank 0 ({W0}) failed with exit code 1")
        self.assertEqual(self.judge([137], FakeEngine("kill_worker", True, W1)), [])

    def test_a_hidden_fault(self) -> None:
        self.good()
        engine = FakeEngine("stop_worker", True, W1)
        v = self.judge([0], engine)
        self.assertTrue(any(x.startswith("fault hidden") for x in v), v)
        engine.outcome.late = True  # the job had finished training: nothing to lose
        self.assertEqual(self.judge([0], engine), [])

    def test_a_runner_kill_its_peers_did_not_notice(self) -> None:
        self.run.runners = 2
        self.good()
        self.run.logs()[1].write_text("")
        engine = FakeEngine("kill_runner", True, "runner 1")
        engine.outcome.bystanders = True  # workers of the same cluster ran under runner 0
        v = self.judge([0, -9], engine)
        self.assertTrue(any(x.startswith("fault hidden") for x in v), v)
        engine.outcome.bystanders = False  # runner 1 held every member: nobody else to fail
        self.assertEqual(self.judge([0, -9], engine), [])

    def test_an_early_exit_zero(self) -> None:
        write_worker(self.run, W0, 10, 0, [0, 1, 2], {})
        write_worker(self.run, W1, 11, 1, [0, 1], {})
        log(self.run, f"[kfrun] rank 0 ({W0}) exited with code 0",
            f"[kfrun] rank 1 ({W1}) exited with code 0")
        v = self.judge([0], FakeEngine("none", False))
        self.assertTrue(any(x.startswith("early exit 0") for x in v), v)

    def test_a_wrong_gradient(self) -> None:
        self.good()
        with self.run.logs()[0].open("a") as f:
            f.write("[127.0.0.1.100::stderr] kftrain: protocol: verify: allreduce of g at step "
                    "1 on rank 0 of 2: element 0 is 3, expected 4\n")
        v = self.judge([0], FakeEngine("none", False))
        self.assertTrue(any(x.startswith("wrong gradient") for x in v), v)

    def test_records_that_differ_from_the_journal(self) -> None:
        self.good()
        (self.run.records() / "127.0.0.1.101" / "steps.csv").write_text("rank,step\n1,0\n")
        v = self.judge([0], FakeEngine("none", False))
        self.assertTrue(any(x.startswith("records differ") for x in v), v)

    def test_a_hang(self) -> None:
        self.good()
        v = self.judge([None], FakeEngine("none", False), hang=True)
        self.assertTrue(any(x.startswith("hang") for x in v), v)


if __name__ == "__main__":
    unittest.main()
