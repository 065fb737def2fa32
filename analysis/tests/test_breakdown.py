"""kfplot's step breakdown (analysis/kfplot/breakdown.py): compute, the communication hidden under
it and the exposed communication, from steps.csv with and without the exposed_comm_s column.
Run: /usr/bin/python3 -m unittest discover -s analysis/tests"""

from __future__ import annotations

import sys
import tempfile
import unittest
from pathlib import Path

ANALYSIS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ANALYSIS))

try:
    import matplotlib  # noqa: F401
except ImportError:  # pragma: no cover
    raise unittest.SkipTest("matplotlib missing: apt-get install python3-matplotlib python3-numpy")

from kfplot import breakdown, records, report  # noqa: E402
from kfplot.records import RecordError  # noqa: E402

HEADER = ("rank,step,start_s,end_s,compute_s,comm_s,samples,samples_per_s,strategy,cluster_size,"
          "batch,lr,comm_bytes,comm_span_s,comm_Bps,egress_bps,ingress_bps,max_latency_s,"
          "policy_sums,actions,values")


def write_steps(d: Path, overlap: bool, steps: int = 4) -> Path:
    """Two workers. Step k, rank r: compute 0.3 + 0.1 r s; communication 0.2 + 0.1 k s, of which,
    with overlap, 0.05 + 0.05 r s is exposed (the rest hidden); without, all of it."""
    d.mkdir(parents=True, exist_ok=True)
    lines = [HEADER + (",exposed_comm_s" if overlap else "")]
    t = 0.0
    for k in range(steps):
        for r in range(2):
            compute = 0.3 + 0.1 * r
            comm = 0.2 + 0.1 * k
            exposed = 0.05 + 0.05 * r if overlap else comm
            end = t + compute + exposed
            row = (f"{r},{k},{t:.9f},{end:.9f},{compute:.9f},{comm:.9f},32,0,RING_RS_AG,2,32,0.1,"
                   f"1000,0.1,1,1,1,-1,,,")
            lines.append(row + (f",{exposed:.9f}" if overlap else ""))
        t += 1.0
    (d / "steps.csv").write_text("\n".join(lines) + "\n")
    (d / "summary.json").write_text('{"scenario": "t", "errors": []}')
    return d


class BreakdownTest(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = Path(self.tmp.name)

    def tearDown(self) -> None:
        self.tmp.cleanup()

    def test_overlapped_run(self) -> None:
        run = records.load_run(write_steps(self.dir / "ddp", overlap=True))
        rows = breakdown.step_breakdown(run)
        self.assertEqual([b.step for b in rows], [0, 1, 2, 3])
        for k, b in enumerate(rows):
            self.assertAlmostEqual(b.compute_s, 0.35)  # mean of 0.3 and 0.4
            self.assertAlmostEqual(b.exposed_s, 0.075)  # mean of 0.05 and 0.1
            self.assertAlmostEqual(b.overlapped_s, 0.2 + 0.1 * k - 0.075)
            self.assertAlmostEqual(b.compute_only_s, 0.35 - b.overlapped_s)
            self.assertAlmostEqual(b.total_s, 0.425)  # the step's length: compute + exposed
        mean = breakdown.mean_breakdown(run, skip=1)  # steps 1..3: comm 0.3, 0.4, 0.5
        self.assertAlmostEqual(mean.overlapped_s, 0.4 - 0.075)
        written = report.plot_paths([run.path])
        for ext in ("png", "pdf"):
            p = run.path / f"step_breakdown.{ext}"
            self.assertIn(p, written)
            self.assertGreater(p.stat().st_size, 1000)

    def test_missing_exposed_column_means_nothing_hidden(self) -> None:
        # bucketing: none writes no exposed_comm_s: all of comm_s is exposed.
        run = records.load_run(write_steps(self.dir / "none", overlap=False))
        self.assertTrue(all(s.exposed_comm_s == s.comm_s for s in run.steps))
        for k, b in enumerate(breakdown.step_breakdown(run)):
            self.assertAlmostEqual(b.overlapped_s, 0.0)
            self.assertAlmostEqual(b.exposed_s, 0.2 + 0.1 * k)
        report.plot_paths([run.path])
        self.assertTrue((run.path / "step_breakdown.png").is_file())

    def test_sweep_arms_side_by_side(self) -> None:
        sweep = self.dir / "sweep"
        write_steps(sweep / "workload.bucketing=none", overlap=False)
        write_steps(sweep / "workload.bucketing=ddp", overlap=True)
        (sweep / "sweep.csv").write_text(
            "key,value,workers,strategy,throughput_samples_per_s,ideal_samples_per_s,efficiency,"
            "median_step_s,errors\n"
            "workload.bucketing,none,2,R,90,104,0.5,0.7,0\nworkload.bucketing,ddp,2,R,150,208,0.7,0.4,0\n")
        written = report.plot_paths([sweep])
        self.assertIn(sweep / "step_breakdown.png", written)
        self.assertIn(sweep / "step_breakdown.pdf", written)

    def test_exposed_beyond_comm_is_an_error(self) -> None:
        d = write_steps(self.dir / "bad", overlap=True)
        text = (d / "steps.csv").read_text().splitlines()
        text[1] = text[1].rsplit(",", 1)[0] + ",9.0"
        (d / "steps.csv").write_text("\n".join(text) + "\n")
        with self.assertRaisesRegex(RecordError, r"steps.csv:2: exposed_comm_s 9.0 outside"):
            records.load_run(d)


if __name__ == "__main__":
    unittest.main()
