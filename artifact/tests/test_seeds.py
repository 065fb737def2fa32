"""Unit tests of artifact/lib/seeds.py (reproduce.sh figN --seeds N: a figure's checks over seeds)
and of the checks.json that common.Figure writes for it. Hand-computed values; no kfsim run.
Run: /usr/bin/python3 -m unittest discover -s artifact/tests
(or: /usr/bin/python3 -m pytest -p no:cacheprovider artifact/tests)"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import sys
import tempfile
import unittest
from pathlib import Path
from typing import Any

LIB = Path(__file__).resolve().parents[1] / "lib"
sys.path.insert(0, str(LIB))

import seeds  # noqa: E402

try:
    from scipy.stats import t as student_t
except ImportError:  # pragma: no cover
    student_t = None


def check(text: str, ok: bool = True, value: float | None = None, name: str | None = None) -> dict[str, Any]:
    """One check as figN.checks.json holds it (name from the text unless given)."""
    return {"name": name or seeds.check_name(text), "text": text, "ok": ok, "value": value}


def write_checks(out: Path, fig: str, seed: int, checks: list[dict[str, Any]], claim: str = "The claim.") -> None:
    """OUT/seeds/seed=S/figN.checks.json as common.Figure.finish writes it."""
    d = seeds.seed_dir(out, seed)
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{fig}.checks.json").write_text(json.dumps(
        {"figure": int(fig[3:]), "title": "a title", "claim": claim, "mode": "sim", "quick": True, "seed": seed,
         "passed": all(c["ok"] for c in checks), "checks": checks}))


class TQuantileTest(unittest.TestCase):
    def test_table_by_hand(self) -> None:
        self.assertEqual(seeds.t975(1, use_scipy=False), 12.706205)
        self.assertEqual(seeds.t975(2, use_scipy=False), 4.302653)
        self.assertEqual(seeds.t975(4, use_scipy=False), 2.776445)
        self.assertEqual(seeds.t975(30, use_scipy=False), 2.042272)

    def test_beyond_the_table(self) -> None:
        # The expansion continues the table smoothly and tends to the normal quantile.
        self.assertAlmostEqual(seeds.t975(31, use_scipy=False), 2.039513, places=6)
        self.assertAlmostEqual(seeds.t975(60, use_scipy=False), 2.000298, places=6)
        self.assertAlmostEqual(seeds.t975(120, use_scipy=False), 1.979930, places=6)
        self.assertAlmostEqual(seeds.t975(10 ** 6, use_scipy=False), 1.959966, places=6)
        self.assertLess(seeds.t975(31, use_scipy=False), seeds.t975(30, use_scipy=False))

    def test_no_dof(self) -> None:
        with self.assertRaises(ValueError):
            seeds.t975(0)

    @unittest.skipIf(student_t is None, "scipy not installed")
    def test_against_scipy(self) -> None:
        for dof in [*range(1, 31), 31, 45, 100, 1000, 10 ** 5]:
            self.assertAlmostEqual(seeds.t975(dof, use_scipy=False), float(student_t.ppf(0.975, dof)), places=6,
                                   msg=f"dof {dof}")
            self.assertAlmostEqual(seeds.t975(dof), float(student_t.ppf(0.975, dof)), places=12)


class SummarizeTest(unittest.TestCase):
    def test_three_values_by_hand(self) -> None:
        # 1, 2, 4: mean 7/3; squared deviations 16/9 + 1/9 + 25/9 = 42/9, over n - 1 = 2: sd = sqrt(7/3)
        # = 1.527525; half width t(0.975, 2) sd / sqrt(3) = 4.302653 x sqrt(7) / 3 = 3.794583.
        s = seeds.summarize([1, 2, 4], use_scipy=False)
        self.assertEqual(s.n, 3)
        self.assertAlmostEqual(s.mean, 2.333333, places=6)
        self.assertAlmostEqual(s.sd, 1.527525, places=6)
        self.assertAlmostEqual(s.low, 2.333333 - 3.794583, places=5)   # -1.461250
        self.assertAlmostEqual(s.high, 2.333333 + 3.794583, places=5)  # 6.127916

    def test_two_values_by_hand(self) -> None:
        # 0.9, 1.1: mean 1, sd sqrt(0.02) = 0.141421, half width 12.706205 x 0.141421 / sqrt(2) = 1.2706205.
        s = seeds.summarize([0.9, 1.1], use_scipy=False)
        self.assertAlmostEqual(s.mean, 1.0)
        self.assertAlmostEqual(s.sd, 0.141421, places=6)
        self.assertAlmostEqual(s.low, 1 - 1.2706205, places=6)
        self.assertAlmostEqual(s.high, 1 + 1.2706205, places=6)

    def test_one_value_has_no_interval(self) -> None:
        s = seeds.summarize([3.5])
        self.assertEqual((s.n, s.mean, s.sd, s.low, s.high), (1, 3.5, None, None, None))
        self.assertEqual(seeds.describe_value(s, 1), "value 3.5 (95% CI n/a)")

    def test_missing_values_left_out(self) -> None:
        s = seeds.summarize([None, 2.0, math.inf, 4.0, math.nan], use_scipy=False)
        self.assertEqual(s.n, 2)
        self.assertAlmostEqual(s.mean, 3.0)
        self.assertEqual(seeds.summarize([None, None]), seeds.Stats(0, None, None, None, None))
        self.assertEqual(seeds.describe_value(seeds.summarize([]), 3), "")
        self.assertIn("over 2 of 5 seeds", seeds.describe_value(s, 5))

    def test_equal_values(self) -> None:
        s = seeds.summarize([2.0, 2.0, 2.0])
        self.assertEqual((s.sd, s.low, s.high), (0.0, 2.0, 2.0))


class NameTest(unittest.TestCase):
    def test_numbers_become_hashes(self) -> None:
        self.assertEqual(seeds.check_name("ResNet-50: near-ideal at 2 workers (87% >= 70%)"),
                         "ResNet-#: near-ideal at # workers (#% >= #%)")
        self.assertEqual(seeds.check_name("adaptive recovered 0.953 of its throughput before (>= 0.9)"),
                         "adaptive recovered # of its throughput before (>= #)")
        self.assertEqual(seeds.check_name("gains +12%, -3% (x1.31; 1e-05)"), "gains #%, #% (x#; #)")
        self.assertEqual(seeds.check_name("the adaptive arm reaches the target (inf s)"),
                         "the adaptive arm reaches the target (# s)")

    def test_same_check_same_name_across_seeds(self) -> None:
        a = "MobileNet-v2: the gap to ideal widens with scale (93% at 2 -> 80% at 16)"
        b = "MobileNet-v2: the gap to ideal widens with scale (91% at 2 -> 78% at 16)"
        self.assertEqual(seeds.check_name(a), seeds.check_name(b))


class AggregateTest(unittest.TestCase):
    def runs(self) -> list[seeds.SeedChecks]:
        """Three seeds of one figure: check A holds at 2 (its text's numbers differ by seed), check B
        at all 3, check C only made at seed 1."""
        return [
            seeds.SeedChecks(1, (check("speed-up x1.31 (> 1)", True, 1.0), check("B holds", True, 10.0),
                                 check("C only here", True))),
            seeds.SeedChecks(2, (check("speed-up x0.97 (> 1)", False, 2.0), check("B holds", True, 20.0))),
            seeds.SeedChecks(3, (check("speed-up x1.05 (> 1)", True, 4.0), check("B holds", True, None))),
        ]

    def test_grouped_by_name_and_counted(self) -> None:
        got = {s.name: s for s in seeds.aggregate(self.runs(), use_scipy=False)}
        self.assertEqual(list(got), ["speed-up x# (> #)", "B holds", "C only here"])
        a, b, c = got["speed-up x# (> #)"], got["B holds"], got["C only here"]
        self.assertEqual((a.holding, a.seeds, a.absent, a.holds), (2, 3, 0, False))
        self.assertEqual(a.text, "speed-up x1.31 (> 1)")
        self.assertAlmostEqual(a.stats.mean, 7 / 3)
        self.assertAlmostEqual(a.stats.high, 2.333333 + 3.794583, places=5)
        self.assertEqual((b.holding, b.holds, b.stats.n), (3, True, 2))
        self.assertAlmostEqual(b.stats.mean, 15.0)
        self.assertEqual((c.holding, c.absent, c.holds, c.stats.n), (1, 2, False, 0))

    def test_lines(self) -> None:
        out = seeds.lines("fig7", seeds.aggregate(self.runs(), use_scipy=False))
        self.assertTrue(out[0].startswith("fig7  FAIL 2/3 seeds  speed-up x# (> #)"), out[0])
        self.assertTrue(out[0].endswith("value 2.333 (95% CI -1.461..6.128)"), out[0])
        self.assertTrue(out[1].startswith("fig7  PASS 3/3 seeds  B holds"), out[1])
        self.assertTrue(out[1].endswith("value 15 (95% CI -48.53..78.53) over 2 of 3 seeds"), out[1])
        self.assertEqual(out[2], "fig7  FAIL 1/3 seeds  C only here")

    def test_verdict(self) -> None:
        ok = [seeds.SeedChecks(s, (check("a"), check("b"))) for s in (1, 2)]
        self.assertEqual(seeds.verdict(ok), "claim holds at every seed (2/2)")
        runs = self.runs()
        # Seed 3 made checks A and B and both hold: the run's own claim held; C was not made there.
        self.assertEqual(seeds.verdict(runs), "claim holds at 2/3 seeds; contradicted at seed=2")
        self.assertEqual(seeds.verdict(runs, seeds.aggregate(runs)),
                         "claim holds at 2/3 seeds; contradicted at seed=2; not made at every seed: C only here")
        both = [seeds.SeedChecks(1, (check("a"), check("c"))), seeds.SeedChecks(2, (check("a"),))]
        self.assertEqual(seeds.verdict(both), "claim holds at every seed (2/2)")
        self.assertFalse(seeds.holds(both, seeds.aggregate(both)))
        self.assertEqual(seeds.verdict(both, seeds.aggregate(both)),
                         "claim holds at 2/2 seeds; not made at every seed: c")
        failed = [*ok, seeds.SeedChecks(3, error="no file")]
        self.assertEqual(seeds.verdict(failed), "claim holds at 2/3 seeds; no checks (the run failed) at seed=3")
        self.assertFalse(seeds.SeedChecks(4).passed)  # no checks: nothing was shown

    def test_a_failed_seed_holds_nothing(self) -> None:
        runs = [seeds.SeedChecks(1, (check("a", value=1.0),)), seeds.SeedChecks(2, error="exit 2")]
        (a,) = seeds.aggregate(runs)
        self.assertEqual((a.holding, a.seeds, a.absent, a.stats.n), (1, 2, 0, 1))  # failed, not absent
        self.assertEqual(seeds.verdict(runs, [a]), "claim holds at 1/2 seeds; no checks (the run failed) at seed=2")


class FilesTest(unittest.TestCase):
    def test_run_writes_csv_and_md(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp)
            for seed, (v, ok) in zip((5, 6, 7), ((1.0, True), (2.0, True), (4.0, False))):
                write_checks(out, "fig9", seed, [check(f"efficiency {100 * v:.0f}% >= 70%", ok, v),
                                                 check("no value here", True)])
            with contextlib.redirect_stdout(io.StringIO()) as printed:
                rc = seeds.run("fig9", out, [5, 6, 7], command="artifact/reproduce.sh fig9 --seeds 3")
            self.assertEqual(rc, 1)
            text = printed.getvalue()
            self.assertIn("fig9  FAIL 2/3 seeds  efficiency #% >= #%", text)
            self.assertIn("fig9  claim holds at 2/3 seeds; contradicted at seed=7", text)
            with (out / "fig9.seeds.csv").open() as f:
                rows = list(csv.DictReader(f))
            self.assertEqual(tuple(rows[0]), seeds.CSV_FIELDS)
            self.assertEqual([r["name"] for r in rows], ["efficiency #% >= #%", "no value here"])
            r = rows[0]
            self.assertEqual((r["seeds_holding"], r["seeds"], r["value_n"]), ("2", "3", "3"))
            self.assertAlmostEqual(float(r["value_mean"]), 2.333333, places=5)
            self.assertAlmostEqual(float(r["value_sd"]), 1.527525, places=4)
            self.assertAlmostEqual(float(r["value_ci95_low"]), -1.461250, places=4)
            self.assertAlmostEqual(float(r["value_ci95_high"]), 6.127916, places=4)
            self.assertEqual((rows[1]["seeds_holding"], rows[1]["value_mean"], rows[1]["value_ci95_low"]),
                             ("3", "", ""))
            md = (out / "fig9.seeds.md").read_text()
            self.assertIn("# Figure 9 over 3 seeds (5..7): a title", md)
            self.assertIn("**The paper's claim.** The claim.", md)
            self.assertIn("the claim holds at 2/3 seeds", md)
            self.assertIn("| efficiency #% >= #% | 2/3 | 2.333 | 1.528 | -1.461 .. 6.128 | 3 |", md)
            self.assertIn("`artifact/reproduce.sh fig9 --seeds 3`", md)

    def test_all_hold_and_a_missing_file(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp)
            for seed in (1, 2):
                write_checks(out, "fig5", seed, [check(f"kept {0.5 + seed / 10:.2f}", True, 0.5 + seed / 10)])
            with contextlib.redirect_stdout(io.StringIO()):
                self.assertEqual(seeds.run("fig5", out, [1, 2]), 0)
                self.assertEqual(seeds.run("fig5", out, [1, 2, 3]), 1)  # seed 3 left no checks.json
            with (out / "fig5.seeds.csv").open() as f:
                rows = list(csv.DictReader(f))
            self.assertEqual((rows[0]["seeds_holding"], rows[0]["seeds"], rows[0]["value_n"]), ("2", "3", "2"))
            md = (out / "fig5.seeds.md").read_text()
            self.assertIn("no checks (the run failed) at seed=3", md)
            self.assertIn("seed=3 (no fig5.checks.json: the run ended before its checks)", md)
            self.assertNotIn("not made at every seed", md)

    def test_unnamed_checks_are_named_from_their_text(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "fig4.checks.json"
            path.write_text(json.dumps({"checks": [{"text": "took 3.5 s", "ok": True}]}))
            got = seeds.load_seed(path, 1)
            self.assertEqual(got.checks[0]["name"], "took # s")
            self.assertIsNone(got.checks[0]["value"])
            path.write_text("{")
            self.assertIsNotNone(seeds.load_seed(path, 1).error)

    def test_command_line(self) -> None:
        with contextlib.redirect_stderr(io.StringIO()), self.assertRaises(SystemExit) as e:
            seeds.main(["nine", "/tmp", "1"])
        self.assertEqual(e.exception.code, 2)


class FigureChecksTest(unittest.TestCase):
    """common.Figure.check / finish write figN.checks.json (needs matplotlib: common imports kfplot)."""

    def setUp(self) -> None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:  # pragma: no cover
            self.skipTest("matplotlib missing: apt-get install python3-matplotlib python3-numpy")
        import common
        self.common = common

    def test_checks_json(self) -> None:
        with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(io.StringIO()):
            f = self.common.Figure(9, "a test", ["--quick", "--out", tmp, "--set", "seed=3", "--set", "seed=7"])
            f.check(True, "near-ideal (87% >= 70%)", value=0.87)
            f.check(True, "near-ideal (91% >= 70%)", value=math.inf)  # the same name again
            f.check(False, "grew 1 times (>= 2)", value=1, name="grew at least twice")
            rc = f.finish("The claim.", "config", "result")
            doc = json.loads((Path(tmp) / "fig9.checks.json").read_text())
        self.assertEqual(rc, 1)
        self.assertEqual((doc["figure"], doc["seed"], doc["quick"], doc["passed"], doc["claim"]),
                         (9, 7, True, False, "The claim."))
        self.assertEqual(doc["checks"], [
            {"name": "near-ideal (#% >= #%)", "text": "near-ideal (87% >= 70%)", "ok": True, "value": 0.87},
            {"name": "near-ideal (#% >= #%) (2)", "text": "near-ideal (91% >= 70%)", "ok": True, "value": None},
            {"name": "grew at least twice", "text": "grew 1 times (>= 2)", "ok": False, "value": 1.0},
        ])

    def test_no_seed(self) -> None:
        self.assertIsNone(self.common.seed_of(["steps=3", "seeds_x=1"]))
        self.assertEqual(self.common.seed_of(["seed=4", "steps=3"]), 4)

    def test_stale_checks_json_removed(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            stale = Path(tmp) / "fig5.checks.json"
            stale.write_text("{}")
            self.common.Figure(5, "a test", ["--out", tmp])
            self.assertFalse(stale.exists())


if __name__ == "__main__":
    unittest.main()
