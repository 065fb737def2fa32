"""Unit tests of kfplot.fidelity (artifact/fidelity.sh's report): the loaders read kfbench --json
and kfsim records laid out as the script writes them, errors and the 10% count come out right,
and the CSV, the Markdown and the plot are written. Run: /usr/bin/python3 -m unittest discover -s
analysis/tests"""

from __future__ import annotations

import contextlib
import csv
import gzip
import io
import json
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

try:
    import matplotlib  # noqa: F401
except ImportError:  # pragma: no cover
    raise unittest.SkipTest("matplotlib missing: apt-get install python3-matplotlib python3-numpy")

from kfplot import fidelity  # noqa: E402
from kfplot.records import RecordError  # noqa: E402

MiB = 1 << 20


def fake_out(d: Path, sizes=(MiB, 16 * MiB)) -> Path:
    """Real time = size / 100 MB/s (x2 contended); ns-3 5% slower, flow 20% faster."""
    for s in fidelity.STRATEGIES:
        for c in (0, 1):
            real = lambda size: size / 100e6 * (2 if c else 1)  # noqa: E731
            for rep, jitter in ((1, 1.0), (2, 1.5), (3, 1.0)):  # the median drops run 2
                rows = [{"bytes": z, "time_us": 1.0, "p50_us": real(z) * 1e6 * jitter,
                         "algbw_gbps": 0, "busbw_gbps": 0, "wrong": 0} for z in sizes]
                p = d / "real" / f"{s}_c{c}_r{rep}.json"
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_text("[10.0.0.1.10000::stdout] " + json.dumps({"rows": rows}) + "\n")
            for world, k in (("ns3", 1.05), ("flow", 0.8)):
                for z in sizes:
                    run = d / "sim" / world / f"{s}_c{c}_{fidelity.size_name(z)}"
                    run.mkdir(parents=True)
                    t, lines = 0.0, ["rank,step,name,bytes,start_s,end_s,duration_s,strategy"]
                    for step in range(4):
                        dur = real(z) * k * (3 if step == 0 else 1)  # step 0 is dropped
                        for rank in range(4):
                            lines.append(f"{rank},{step},grad/tensor0,{z},{t},{t + dur},{dur},{s}")
                        t += dur
                    (run / "collectives.csv").write_text("\n".join(lines) + "\n")
    return d


# Two samples of worker 0 as `ss -tinmH` prints it under contention: a ring connection keeping
# three 64 KB GSO packets in the tbf and an iperf3 stream keeping two (measured; to the second
# server, port 5202), a receiving-only connection and iperf3's idle control connection (both left
# out), and a socket of neither class.
SS_SAMPLE = """T 1795363963.396909905
ESTAB 0 0 10.78.0.1:49652 10.78.0.5:5201
\t skmem:(r0,rb131072,t0,tb46080,f0,w0,o0,bl0,d0) cubic wscale:10,10 rto:204 rtt:0.066/0.042 mss:1448 cwnd:10 bytes_sent:166 send 1755151515bps pacing_rate 3490470808bps delivery_rate 1782153840bps app_limited
ESTAB 0 912240 10.78.0.1:49668 10.78.0.5:5202
\t skmem:(r0,rb131072,t131984,tb1193472,f1808,w923888,o0,bl0,d0) cubic wscale:10,10 rto:204 rtt:3.995/0.298 mss:1448 cwnd:259 ssthresh:112 bytes_sent:161520845 pacing_rate 901090520bps delivery_rate 272671632bps unacked:90 notsent:781920
ESTAB 0 740130 10.78.0.1:59262 10.78.0.2:10000
\t skmem:(r0,rb131072,t197976,tb1516032,f3550,w750114,o0,bl0,d0) cubic wscale:10,10 rto:204 rtt:3.813/0.007 mss:1448 cwnd:329 ssthresh:329 pacing_rate 1199138192bps delivery_rate 409382192bps unacked:135 notsent:544650
ESTAB 0 0 10.78.0.1:10000 10.78.0.4:42412
\t skmem:(r0,rb2074456,t0,tb46080,f0,w0,o0,bl0,d0) cubic wscale:10,10 rto:204 rtt:2.048/0.784 mss:1448 cwnd:10 pacing_rate 113083584bps delivery_rate 5471888bps app_limited
ESTAB 0 0 10.78.0.1:22 10.78.0.9:50000
\t skmem:(r0,rb131072,t65992,tb46080,f0,w0,o0,bl0,d0) cubic rtt:1.0/0.5 cwnd:10 unacked:1
T 1795363963.407000000
ESTAB 0 740130 10.78.0.1:59262 10.78.0.2:10000
\t skmem:(r0,rb131072,t131984,tb1516032,f3550,w750114,o0,bl0,d0) cubic wscale:10,10 rto:204 rtt:3.9/0.007 mss:1448 cwnd:329 ssthresh:329 pacing_rate 1180000000bps delivery_rate 420000000bps unacked:135
"""


class FidelityTest(unittest.TestCase):
    def test_report(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = fake_out(Path(tmp))
            (out / "real" / "tcp.txt").write_text("cubic\n")
            (out / "real" / "host_queue.txt").write_text("fair\n")
            with contextlib.redirect_stdout(io.StringIO()):
                rc = fidelity.main([str(out), "--sizes", "1MiB,16MiB", "--wall", "12"])
            self.assertEqual(rc, 0)
            rows = list(csv.DictReader((out / "fidelity.csv").read_text().splitlines()))
            self.assertEqual(len(rows), 3 * 2 * 2)
            for r in rows:
                self.assertAlmostEqual(float(r["ns3_err_pct"]), 5.0, delta=0.2)
                self.assertAlmostEqual(float(r["flow_err_pct"]), -20.0, delta=0.2)
            md = (out / "fidelity.md").read_text()
            self.assertIn("ns-3: 12 of 12 cells within 10% of real (target met)", md)
            self.assertIn("flow: 0 of 12 cells within 10%", md)
            self.assertIn("Real TCP: cubic (ns-3 runs CUBIC).", md)
            self.assertIn("Host queue: fair.", md)
            self.assertIn("a host's own egress: a per-flow fair queue under the shaper", md)
            self.assertIn("FIFO, of up to 12.76 MB", md)  # no switch_queue.txt: the default
            self.assertNotIn("## Losses", md)  # no nstat files
            for ext in ("png", "pdf"):
                self.assertGreater((out / f"fidelity.{ext}").stat().st_size, 1000)

    def test_sockets(self):
        classes = fidelity.parse_ss(SS_SAMPLE)
        self.assertEqual(sorted(classes), ["flood", "job"])
        self.assertEqual([s["qdisc"] for s in classes["job"]], [197976, 131984])
        self.assertEqual(len(classes["flood"]), 1)  # the idle control connection left out
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp)
            (out / "real").mkdir()
            (out / "real" / "RING_RS_AG_c1_r1.ss.gz").write_bytes(gzip.compress(SS_SAMPLE.encode()))
            stats = fidelity.load_sockets(out)
            job = stats[("RING_RS_AG", True, "job")]
            self.assertEqual((job.samples, job.sockets), (2, 1))
            self.assertAlmostEqual(job.qdisc_kb, (197.976 + 131.984) / 2)
            self.assertAlmostEqual(job.srtt_ms, (3.813 + 3.9) / 2)
            self.assertAlmostEqual(job.pacing_mbps, (1199.138192 + 1180) / 2)
            flood = stats[("RING_RS_AG", True, "flood")]
            self.assertEqual((flood.cwnd, flood.delivery_mbps), (259, 272.671632))
            md = "\n".join(fidelity.sockets_md(stats))
            self.assertIn("| RING_RS_AG | yes | real | job (1) | 2 | 165 | 329 | 329 | 3.9 | "
                          "1190 | 415 |", md)
            # ns-3's senders from kfsim's tcp.csv: worker 0's only, while data is in flight.
            cell = out / "sim" / "ns3" / "RING_RS_AG_c1_1MiB"
            cell.mkdir(parents=True)
            (cell / "tcp.csv").write_text(
                "time_s,kind,src,dst,flow,cwnd_bytes,ssthresh_bytes,srtt_s,in_flight_bytes,"
                "acked_bytes\n"
                "0.1,job,w0,w1,0,144800,0,0.002,0,1000000\n"
                "0.2,job,w0,w1,0,217200,108600,0.004,130000,6000000\n"
                "0.2,job,w1,w2,0,14480,0,0.001,14480,500\n"
                "0.2,background,w0,outside,1,289600,0,0.003,90000,0\n")
            stats = fidelity.load_sockets(out)
            job = stats[("RING_RS_AG", True, "ns3 job")]
            self.assertEqual((job.samples, job.cwnd, job.ssthresh, job.srtt_ms), (1, 150, 75, 4))
            self.assertAlmostEqual(job.delivery_mbps, 400)  # 5 MB in 0.1 s
            self.assertEqual(stats[("RING_RS_AG", True, "ns3 flood")].cwnd, 200)
            md = "\n".join(fidelity.sockets_md(stats))
            self.assertIn("| RING_RS_AG | yes | ns-3 | job (1) | 1 | - | 150 | 75 | 4.0 | - | 400 |",
                          md)
            (cell / "tcp.csv").write_text("time_s,kind\n0.1,job\n")
            with self.assertRaisesRegex(RecordError, "tcp.csv:2: KeyError"):
                fidelity.load_sockets(out)
            (cell / "tcp.csv").unlink()
            (out / "real" / "STAR_c1_r1.ss.gz").write_bytes(b"not gzip")
            with self.assertRaisesRegex(RecordError, "STAR_c1_r1.ss.gz: not a gzip file"):
                fidelity.load_sockets(out)
        with self.assertRaisesRegex(RecordError, "x.ss:2: an ss line without skmem's t field"):
            fidelity.parse_ss("ESTAB 0 0 1.1.1.1:10000 2.2.2.2:40000\n\t skmem:(r0) unacked:1\n",
                              "x.ss")

    def test_losses(self):
        """nstat deltas summed over namespaces and averaged over runs; the worlds' summary.json
        counts summed over sizes; the switch queue named in the header."""
        with tempfile.TemporaryDirectory() as tmp:
            out = fake_out(Path(tmp))
            for rep, timeouts in ((1, 1), (2, 3)):
                (out / "real" / f"STAR_c0_r{rep}.nstat").write_text(
                    f"0 TcpRetransSegs 100\n1 TcpRetransSegs 50\n0 TcpExtTCPTimeouts {timeouts}\n"
                    "1 TcpExtTCPLostRetransmit 7\n2 TcpExtTCPSackRecovery 4\n"
                    "3 TcpExtTCPLossProbes 9\n")
            for size, drops in (("1MiB", 10), ("16MiB", 300)):
                (out / "sim" / "ns3" / f"STAR_c0_{size}" / "summary.json").write_text(json.dumps(
                    {"world_stats": {"dropped_packets": drops, "lost_retransmissions": 2,
                                     "retransmission_timeouts": 1}}))
                (out / "sim" / "flow" / f"STAR_c0_{size}" / "summary.json").write_text(json.dumps(
                    {"world_stats": {"tcp_losses": 4, "tcp_timeouts": 0}}))
            losses = fidelity.load_losses(out)
            self.assertEqual(losses[("STAR", False, "real")],
                             {"retransmitted": 150, "recoveries": 4, "lost retransmissions": 7,
                              "timeouts": 2})
            self.assertEqual(losses[("STAR", False, "ns3")],
                             {"dropped packets": 310, "lost retransmissions": 4, "timeouts": 2})
            self.assertEqual(losses[("STAR", False, "flow")],
                             {"window backoffs": 8, "timeouts": 0})
            (out / "real" / "switch_queue.txt").write_text("524288\n")
            with contextlib.redirect_stdout(io.StringIO()):
                self.assertEqual(fidelity.main([str(out), "--sizes", "1MiB,16MiB"]), 0)
            md = (out / "fidelity.md").read_text()
            self.assertIn("of up to 524,288 B (`--switch-queue`; the simulated ports hold 346 "
                          "full-size packets)", md)
            self.assertIn("| STAR | no | 150 / 4 / 7 / 2 | 310 / 4 / 2 | 8 / 0 |", md)
            (out / "real" / "STAR_c0_r2.nstat").write_text("0 TcpRetransSegs lots\n")
            with self.assertRaisesRegex(RecordError, "STAR_c0_r2.nstat:1: expected"):
                fidelity.load_losses(out)

    def test_missing_and_malformed(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = fake_out(Path(tmp), sizes=(MiB,))
            cells = fidelity.load_cells(out, [MiB, 4 * MiB])  # 4 MiB was never run
            self.assertTrue(all(c.ns3_us is None for c in cells if c.size == 4 * MiB))
            self.assertIsNone(cells[1].err("ns3"))
            (out / "real" / "STAR_c0_r1.json").write_text("{not json")
            with self.assertRaisesRegex(RecordError, "STAR_c0_r1.json: malformed JSON"):
                fidelity.load_real(out)
        self.assertEqual(fidelity.parse_size("64MiB"), 64 * MiB)
        self.assertEqual(fidelity.size_name(64 * MiB), "64MiB")


if __name__ == "__main__":
    unittest.main()
