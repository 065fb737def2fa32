"""Unit tests of kfplot.fidelity (artifact/fidelity.sh's report): the loaders read kfbench --json
and kfsim records laid out as the script writes them, errors and the 10% count come out right,
and the CSV, the Markdown and the plot are written. Run: /usr/bin/python3 -m unittest discover -s
analysis/tests"""

from __future__ import annotations

import contextlib
import csv
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


class FidelityTest(unittest.TestCase):
    def test_report(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = fake_out(Path(tmp))
            (out / "real" / "tcp.txt").write_text("cubic\n")
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
            for ext in ("png", "pdf"):
                self.assertGreater((out / f"fidelity.{ext}").stat().st_size, 1000)

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
