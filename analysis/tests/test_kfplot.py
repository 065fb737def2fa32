"""Unit tests of kfplot: loaders accept the records kfsim / kftrain / kfbench write and reject
malformed ones by name; every plot is produced (PNG + PDF). Run: /usr/bin/python3 -m unittest
discover -s analysis/tests"""

from __future__ import annotations

import json
import subprocess
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

from kfplot import busbw, records, report, tcp  # noqa: E402
from kfplot.records import RecordError  # noqa: E402

STEPS_HEADER = ("rank,step,start_s,end_s,compute_s,comm_s,samples,samples_per_s,strategy,cluster_size,"
                "batch,lr,comm_bytes,comm_span_s,comm_Bps,egress_bps,ingress_bps,max_latency_s,"
                "policy_sums,actions,values\n")


def write_run(d: Path, workers: int = 2, steps: int = 6, t0: float = 0.0, accuracy: bool = True,
              ranks: list[int] | None = None, switch_at: int | None = 3) -> Path:
    """A small run directory as kfsim writes it (or one kftrain worker's, given ranks)."""
    d.mkdir(parents=True, exist_ok=True)
    lines = [STEPS_HEADER]
    coll = ["rank,step,name,bytes,start_s,end_s,duration_s,strategy\n"]
    for step in range(steps):
        for rank in ranks if ranks is not None else range(workers):
            start = t0 + step * 1.0
            end = start + (1.5 if 2 <= step < 4 else 0.9) + 0.01 * rank
            strategy = "STAR@1" if switch_at is not None and step >= switch_at else "STAR"
            values = f"accuracy={0.5 + 0.05 * step:.3f};loss={1.0 / (step + 1):.3f}" if accuracy and rank == 0 else ""
            lines.append(f"{rank},{step},{start:.9f},{end:.9f},0.5,{end - start - 0.5:.9f},32,0,{strategy},"
                         f"{workers},32,0.1,1000,0.1,1,1,1,-1,,,{values}\n")
            for i, size in enumerate((4096, 1 << 20, 8 << 20)):
                coll.append(f"{rank},{step},grad/{i},{size},{start + 0.5:.9f},{start + 0.5 + size / 1e8 + 0.001 * rank:.9f},"
                            f"0.1,{strategy}\n")
    (d / "steps.csv").write_text("".join(lines))
    (d / "collectives.csv").write_text("".join(coll))
    (d / "events.csv").write_text(
        "time_s,kind,phase,label,detail\n"
        f"{t0 + 2.0:.9f},contention,start,contention#1 (line 22),\"w0 -> outside, 2 flow(s)\"\n"
        f"{t0 + 4.0:.9f},contention,stop,contention#1 (line 22),\"w0 -> outside, 2 flow(s)\"\n"
        + (f"{t0 + switch_at:.9f},switch,at,step {switch_at},STAR -> STAR@1\n" if switch_at is not None else ""))
    (d / "summary.json").write_text(json.dumps({"scenario": d.name, "throughput_samples_per_s": 1.0,
                                                "target_accuracy": 0.7, "errors": []}))
    return d


class LoaderTest(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = Path(self.tmp.name)

    def tearDown(self) -> None:
        self.tmp.cleanup()

    def test_sim_run(self) -> None:
        run = records.load_run(write_run(self.dir / "a"))
        cs = run.cluster_steps()
        self.assertEqual(len(cs), 6)
        self.assertEqual(cs[0].workers, 2)
        self.assertEqual(cs[0].samples, 64)
        self.assertAlmostEqual(cs[0].duration_s, 0.91)
        self.assertEqual(cs[4].strategy, "STAR@1")
        self.assertEqual([w.kind for w in run.windows()], ["contention"])
        self.assertEqual(run.windows()[0].stop_s, 4.0)
        self.assertEqual(run.adaptations()[0].detail, "STAR -> STAR@1")
        self.assertEqual(run.values("accuracy")[-1][2], 0.75)
        self.assertGreater(run.throughput(), 0)

    def test_kfrun_dir_merges_workers(self) -> None:
        d = self.dir / "real"
        # Two hosts with unrelated steady clocks: each shifted to start at 0.
        write_run(d / "10.0.0.1.10000", workers=2, t0=5000.0, ranks=[0])
        write_run(d / "10.0.0.2.10000", workers=2, t0=90.0, ranks=[1])
        run = records.load_run(d)
        self.assertTrue(run.real)
        cs = run.cluster_steps()
        self.assertEqual(len(cs), 6)
        self.assertEqual(cs[0].workers, 2)
        self.assertAlmostEqual(cs[0].start_s, 0.0)
        self.assertLess(cs[-1].end_s, 10)
        self.assertEqual(len(run.adaptations()), 1)  # the same event from both workers, once
        self.assertEqual(run.summary["workers_merged"], 2)

    def test_missing_steps_names_the_directory(self) -> None:
        (self.dir / "empty").mkdir()
        with self.assertRaisesRegex(RecordError, "empty: no steps.csv"):
            records.load_run(self.dir / "empty")
        with self.assertRaisesRegex(RecordError, "nowhere: no such directory"):
            records.load_run(self.dir / "nowhere")

    def test_malformed_steps_rejected(self) -> None:
        d = write_run(self.dir / "bad")
        text = (d / "steps.csv").read_text().splitlines()
        (d / "steps.csv").write_text("\n".join([text[0], text[1].replace(",32,0,", ",thirty,0,", 1)]) + "\n")
        with self.assertRaisesRegex(RecordError, r"steps.csv:2: column samples: bad value 'thirty'"):
            records.load_run(d)
        (d / "steps.csv").write_text("rank,step,start_s\n0,0,0.0\n")
        with self.assertRaisesRegex(RecordError, r"steps.csv: missing column\(s\) end_s"):
            records.load_run(d)
        (d / "steps.csv").write_text("")
        with self.assertRaisesRegex(RecordError, r"steps.csv: empty file"):
            records.load_run(d)
        write_run(d)
        lines = (d / "steps.csv").read_text().splitlines()
        (d / "steps.csv").write_text("\n".join([lines[0], ",".join(lines[1].split(",")[:5])]) + "\n")
        with self.assertRaisesRegex(RecordError, r"steps.csv:2: wrong number of fields"):
            records.load_run(d)

    def test_malformed_values_and_times(self) -> None:
        d = write_run(self.dir / "v")
        lines = (d / "steps.csv").read_text().splitlines()
        (d / "steps.csv").write_text("\n".join([lines[0], lines[1].replace("accuracy=", "accuracy:")]) + "\n")
        with self.assertRaisesRegex(RecordError, "column values"):
            records.load_run(d)
        write_run(d)
        (d / "events.csv").write_text("time_s,kind,phase,label,detail\nsoon,contention,start,x,y\n")
        with self.assertRaisesRegex(RecordError, r"events.csv:2: column time_s"):
            records.load_run(d)

    def test_malformed_summary_rejected(self) -> None:
        d = write_run(self.dir / "s")
        (d / "summary.json").write_text('{"throughput": ')
        with self.assertRaisesRegex(RecordError, r"summary.json:1:\d+: malformed JSON"):
            records.load_run(d)
        (d / "summary.json").write_text("[1, 2]")
        with self.assertRaisesRegex(RecordError, "summary.json: expected a JSON object"):
            records.load_run(d)

    def test_sweep_and_kfbench(self) -> None:
        (self.dir / "sweep.csv").write_text(
            "key,value,workers,strategy,throughput_samples_per_s,ideal_samples_per_s,efficiency,median_step_s,errors\n"
            "topology.hosts,2,2,BINARY_TREE_STAR,90,104,0.86,0.7,0\n"
            "topology.hosts,4,4,BINARY_TREE_STAR,150,208,0.72,0.8,0\n")
        rows = records.load_sweep(self.dir)
        self.assertEqual([r.workers for r in rows], [2, 4])
        self.assertEqual([r.throughput_ci for r in rows], [None, None])
        # At several seeds: the means, and the throughput's interval for the band / error bars.
        stat = lambda f: f"{f},{f}_sd,{f}_ci95_low,{f}_ci95_high"  # noqa: E731
        (self.dir / "seeded.csv").write_text(
            f"key,value,seeds,workers,strategy,{stat('throughput_samples_per_s')},"
            f"{stat('ideal_samples_per_s')},{stat('efficiency')},{stat('median_step_s')},errors\n"
            "strategy,STAR,3,8,STAR,590,93,359,822,2936,0,2936,2936,0.2,0.03,0.12,0.28,0.9,0.2,0.4,1.4,0\n")
        seeded = records.load_sweep(self.dir / "seeded.csv")
        self.assertEqual((seeded[0].seeds, seeded[0].throughput, seeded[0].throughput_ci), (3, 590, (359, 822)))
        (self.dir / "bad.csv").write_text("key,value\nx,1\n")
        with self.assertRaisesRegex(RecordError, "bad.csv: missing column"):
            records.load_sweep(self.dir / "bad.csv")
        bench = {"collective": "allreduce", "ranks": 4, "strategy": "RING_RS_AG", "avg_busbw_gbps": 1.0,
                 "rows": [{"bytes": 1 << k, "count": 1, "type": "float", "redop": "sum", "root": -1,
                           "time_us": 10.0 * k, "p50_us": 1, "p99_us": 1, "algbw_gbps": 0.1 * k,
                           "busbw_gbps": 0.15 * k, "wrong": 0} for k in range(10, 20)]}
        (self.dir / "bench.json").write_text("[127.0.0.1.10000::stdout] " + json.dumps(bench) + "\n")
        b = records.load_kfbench(self.dir / "bench.json")
        self.assertEqual(b[0].ranks, 4)
        self.assertEqual(len(b[0].rows), 10)
        (self.dir / "bench2.json").write_text('{"rows": [{"bytes": 1}]}\n')
        with self.assertRaisesRegex(RecordError, "bench2.json:1: row 0"):
            records.load_kfbench(self.dir / "bench2.json")
        (self.dir / "bench3.json").write_text("no json here\n")
        with self.assertRaisesRegex(RecordError, "bench3.json: no kfbench --json object"):
            records.load_kfbench(self.dir / "bench3.json")


class PlotTest(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = Path(self.tmp.name)

    def tearDown(self) -> None:
        self.tmp.cleanup()

    def assert_plots(self, d: Path, names: list[str]) -> None:
        for n in names:
            for ext in ("png", "pdf"):
                p = d / f"{n}.{ext}"
                self.assertTrue(p.is_file(), p)
                self.assertGreater(p.stat().st_size, 1000, p)

    def test_single_run(self) -> None:
        d = write_run(self.dir / "run")
        written = report.plot_paths([d])
        self.assert_plots(d, ["throughput", "cluster_size", "step_breakdown", "accuracy", "busbw"])
        self.assertEqual(len(written), 10)

    def test_tcp_senders(self) -> None:
        d = write_run(self.dir / "run")
        lines = ["time_s,kind,src,dst,flow,cwnd_bytes,ssthresh_bytes,srtt_s,in_flight_bytes,"
                 "acked_bytes"]
        for i in range(1, 60):
            t = i * 0.1
            for dst, scale in (("w1", 3), ("w2", 1)):
                lines.append(f"{t:.6f},job,w0,{dst},0,{14480 * i},0,0.002,14480,{i * scale * 1000}")
            lines.append(f"{t:.6f},background,w0,outside,1,{28960 * i},144800,0.004,28960,{i}")
        (d / "tcp.csv").write_text("\n".join(lines) + "\n")
        rows = tcp.load_tcp(d / "tcp.csv")
        self.assertEqual(len(rows), 59 * 3)
        self.assertEqual(rows[2].sender, "w0->outside #1")
        # Background flows first, then the runtime's connections by bytes acknowledged.
        self.assertEqual(tcp.busiest(rows), ["w0->outside #1", "w0->w1", "w0->w2"])
        self.assertEqual(tcp.busiest(rows, 2), ["w0->outside #1", "w0->w1"])
        written = report.plot_paths([d])
        self.assert_plots(d, ["tcp"])
        self.assertEqual(len(written), 12)
        (d / "tcp.csv").write_text("time_s,kind,src\n0.1,job,w0\n")
        with self.assertRaisesRegex(RecordError, "tcp.csv:2: KeyError"):
            report.plot_paths([d])

    def test_tcp_senders_of_two_worlds_on_one_figure(self) -> None:
        # kfsim --compare ns3,flow with tcp_samples: OUT/ns3/tcp.csv and OUT/flow/tcp.csv.
        cmp = self.dir / "cmp"
        header = ("time_s,kind,src,dst,flow,cwnd_bytes,ssthresh_bytes,srtt_s,in_flight_bytes,"
                  "acked_bytes")
        for world, scale in (("ns3", 1), ("flow", 2)):
            d = write_run(cmp / world)
            lines = [header] + [f"{i * 0.1:.6f},job,w0,w1,0,{14480 * i * scale},0,0.002,14480,"
                                f"{i * 1000}" for i in range(1, 30)]
            (d / "tcp.csv").write_text("\n".join(lines) + "\n")
        report.plot_paths([cmp])
        self.assert_plots(cmp, ["throughput", "tcp"])
        # One world sampled, the other not: nothing to set side by side.
        (cmp / "flow" / "tcp.csv").unlink()
        (cmp / "tcp.png").unlink()
        report.plot_paths([cmp])
        self.assertFalse((cmp / "tcp.png").exists())

    def test_busbw_from_collectives(self) -> None:
        run = records.load_run(write_run(self.dir / "run"))
        pts = busbw.run_busbw(run)
        self.assertEqual(len(pts), 18)  # 6 steps x 3 collectives
        size, bw = max(pts)
        self.assertEqual(size, 8 << 20)
        self.assertGreater(bw, 0)

    def test_overlay_sweep_variants_and_kfbench(self) -> None:
        a = write_run(self.dir / "adaptive")
        s = write_run(self.dir / "static", switch_at=None)
        real = self.dir / "real"
        write_run(real / "127.0.0.1.10000", ranks=[0])
        write_run(real / "127.0.0.1.10001", ranks=[1])
        out = self.dir / "cmp"
        report.plot_paths([a, s, real], out=out, labels=["adaptive", "static", "real"])
        self.assert_plots(out, ["compare_throughput", "compare_accuracy"])
        self.assert_plots(real, ["throughput"])
        # A directory of variants: overlays in place.
        variants = self.dir / "variants"
        write_run(variants / "fixed-small")
        write_run(variants / "adaptive", workers=3)
        report.plot_paths([variants])
        self.assert_plots(variants, ["throughput", "cluster_size", "accuracy", "step_breakdown"])
        sweep = self.dir / "sweep"
        sweep.mkdir()
        (sweep / "sweep.csv").write_text(
            "key,value,workers,strategy,throughput_samples_per_s,ideal_samples_per_s,efficiency,median_step_s,errors\n"
            "topology.hosts,2,2,B,90,104,0.86,0.7,0\ntopology.hosts,4,4,B,150,208,0.72,0.8,0\n")
        report.plot_paths([sweep])
        self.assert_plots(sweep, ["scaling"])
        strat = self.dir / "strategies"
        strat.mkdir()
        (strat / "sweep.csv").write_text(
            "key,value,workers,strategy,throughput_samples_per_s,ideal_samples_per_s,efficiency,median_step_s,errors\n"
            "strategy,STAR,8,STAR,90,200,0.45,0.7,0\nstrategy,RING,8,RING,150,200,0.75,0.8,0\n")
        report.plot_paths([strat])
        self.assert_plots(strat, ["scaling"])

    def test_cli(self) -> None:
        d = write_run(self.dir / "run")
        plot = str(ANALYSIS / "plot.py")
        p = subprocess.run([sys.executable, plot, str(d), "-q"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assert_plots(d, ["throughput"])
        (d / "summary.json").write_text("{")
        p = subprocess.run([sys.executable, plot, str(d)], capture_output=True, text=True)
        self.assertEqual(p.returncode, 1)
        self.assertIn("summary.json", p.stderr)
        self.assertIn("malformed JSON", p.stderr)
        p = subprocess.run([sys.executable, plot, str(self.dir / "missing")], capture_output=True, text=True)
        self.assertEqual(p.returncode, 1)
        self.assertIn("missing: no such file or directory", p.stderr)
        p = subprocess.run([sys.executable, plot], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)


if __name__ == "__main__":
    unittest.main()
