#!/usr/bin/python3
"""A figure's claim checks over several seeds: `artifact/reproduce.sh figN --seeds N`.

Each seed's run of artifact/figN.py (`--set seed=S --out OUT/seeds/seed=S`) writes
OUT/seeds/seed=S/figN.checks.json (common.Figure.finish): the claim and every check with its name,
text, verdict and measured value. This module groups the checks by name across the seeds, counts the
seeds at which each holds, and summarizes its value: mean, sample standard deviation and the 95%
Student-t interval mean +- t(0.975, n - 1) * sd / sqrt(n) over the n seeds that have one. It prints
one line per check, writes OUT/figN.seeds.csv and OUT/figN.seeds.md, and exits 0 when every check
holds at every seed, 1 otherwise, 2 on bad usage.

    seeds.py figN OUT SEED [SEED ...] [--command TEXT]

No matplotlib here: the unit tests (artifact/tests) and the aggregation need only the standard
library (and scipy's t quantile where installed).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

# A number in a check's text: an optional sign (not after a letter: "ResNet-50" keeps its dash),
# digits, a fraction, an exponent; inf and nan too (an unreached target prints "inf").
_NUMBER = re.compile(r"(?:(?<![\w.])[+-])?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|\b(?:inf|nan)\b")

# t(0.975, dof) for dof = 1..30: the two-sided 95% quantile of Student's t, as tabulated in the
# NIST/SEMATECH e-Handbook of Statistical Methods, section 1.3.6.7.2 ("Critical values of the
# Student's t distribution", column 0.975), here to 6 decimals (scipy.stats.t.ppf(0.975, dof)).
T975_TABLE: tuple[float, ...] = (
    12.706205, 4.302653, 3.182446, 2.776445, 2.570582, 2.446912, 2.364624, 2.306004, 2.262157, 2.228139,
    2.200985, 2.178813, 2.160369, 2.144787, 2.131450, 2.119905, 2.109816, 2.100922, 2.093024, 2.085963,
    2.079614, 2.073873, 2.068658, 2.063899, 2.059539, 2.055529, 2.051831, 2.048407, 2.045230, 2.042272,
)
Z975 = 1.959963984540054  # the standard normal's 0.975 quantile

CSV_FIELDS = ("name", "seeds_holding", "seeds", "value_mean", "value_sd", "value_ci95_low", "value_ci95_high",
              "value_n")


def check_name(text: str) -> str:
    """The default stable name of a check: its text with every number replaced by '#', so that the
    same check has the same name at every seed."""
    return _NUMBER.sub("#", text)


def t975_series(dof: float) -> float:
    """t(0.975, dof) from the Cornish-Fisher expansion of Student's t in the normal quantile
    (Abramowitz & Stegun 26.7.5, terms to 1/dof^4): within 3e-8 of the exact value for dof > 30."""
    x = Z975
    g1 = (x ** 3 + x) / 4
    g2 = (5 * x ** 5 + 16 * x ** 3 + 3 * x) / 96
    g3 = (3 * x ** 7 + 19 * x ** 5 + 17 * x ** 3 - 15 * x) / 384
    g4 = (79 * x ** 9 + 776 * x ** 7 + 1482 * x ** 5 - 1920 * x ** 3 - 945 * x) / 92160
    return x + g1 / dof + g2 / dof ** 2 + g3 / dof ** 3 + g4 / dof ** 4


def t975(dof: int, use_scipy: bool = True) -> float:
    """The 0.975 quantile of Student's t with `dof` degrees of freedom (>= 1): scipy's where it is
    installed (and `use_scipy`), else T975_TABLE for 1..30 and t975_series beyond."""
    if dof < 1:
        raise ValueError(f"t975: dof {dof} < 1")
    if use_scipy:
        try:
            from scipy.stats import t as student_t
        except ImportError:
            pass
        else:
            return float(student_t.ppf(0.975, dof))
    return T975_TABLE[dof - 1] if dof <= len(T975_TABLE) else t975_series(dof)


@dataclass(frozen=True)
class Stats:
    """Mean, sample standard deviation and 95% Student-t interval of n values; sd and the interval
    are None when n < 2, everything is None when n == 0."""

    n: int
    mean: float | None
    sd: float | None
    low: float | None
    high: float | None


def summarize(values: Sequence[float | None], use_scipy: bool = True) -> Stats:
    """Stats over the finite values (None, inf and nan are left out): mean, sd with n - 1, and
    mean +- t(0.975, n - 1) * sd / sqrt(n)."""
    xs = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    n = len(xs)
    if n == 0:
        return Stats(0, None, None, None, None)
    mean = sum(xs) / n
    if n == 1:
        return Stats(1, mean, None, None, None)
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    half = t975(n - 1, use_scipy) * sd / math.sqrt(n)
    return Stats(n, mean, sd, mean - half, mean + half)


@dataclass(frozen=True)
class SeedChecks:
    """What one seed's run left: its checks (name, text, ok, value), the claim, and an error when the
    run left no readable figN.checks.json (it failed before its checks)."""

    seed: int
    checks: tuple[dict[str, Any], ...] = ()
    claim: str = ""
    title: str = ""
    error: str | None = None

    @property
    def passed(self) -> bool:
        """The figure's claim holds at this seed: it has checks and every one holds."""
        return self.error is None and bool(self.checks) and all(c["ok"] for c in self.checks)


def seed_dir(out: Path, seed: int) -> Path:
    """Where the run at `seed` writes its figN.* and records: OUT/seeds/seed=S."""
    return out / "seeds" / f"seed={seed}"


def load_seed(path: Path, seed: int) -> SeedChecks:
    """Reads one seed's figN.checks.json; a missing or malformed file gives a SeedChecks with an
    error and no checks. A check without a name is named by check_name(text)."""
    if not path.is_file():
        return SeedChecks(seed, error=f"no {path.name}: the run ended before its checks")
    try:
        doc = json.loads(path.read_text())
        checks = tuple({"name": str(c.get("name") or check_name(str(c["text"]))), "text": str(c["text"]),
                        "ok": bool(c["ok"]), "value": c.get("value")} for c in doc["checks"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        return SeedChecks(seed, error=f"{path}: unreadable ({e.__class__.__name__}: {e})")
    return SeedChecks(seed, checks, str(doc.get("claim") or ""), str(doc.get("title") or ""))


@dataclass(frozen=True)
class CheckSummary:
    """One check over the seeds: its name, its text at the first seed that has it, at how many of
    `seeds` seeds it holds, at how many seeds whose run did finish it was not made (`absent`; a
    seed whose run failed has no checks at all), and its value."""

    name: str
    text: str
    holding: int
    seeds: int
    absent: int
    stats: Stats

    @property
    def holds(self) -> bool:
        """It holds at every seed."""
        return self.holding == self.seeds


def aggregate(runs: Sequence[SeedChecks], use_scipy: bool = True) -> list[CheckSummary]:
    """Groups the checks of every seed by name (in the order they first appear) and summarizes each:
    seeds holding out of all len(runs) seeds (a seed without that check, or whose run failed, does not
    hold it) and the value's Stats over the seeds that have a value."""
    order: list[str] = []
    by_name: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        for c in run.checks:
            if c["name"] not in by_name:
                order.append(c["name"])
                by_name[c["name"]] = []
            by_name[c["name"]].append(c)
    out = []
    for name in order:
        cs = by_name[name]
        finished = sum(1 for r in runs if r.error is None)
        out.append(CheckSummary(name, cs[0]["text"], sum(1 for c in cs if c["ok"]), len(runs),
                                finished - len(cs), summarize([c["value"] for c in cs], use_scipy)))
    return out


def fmt(x: float | None) -> str:
    """A number for people: 4 significant digits; 'n/a' for None."""
    return "n/a" if x is None else f"{x:.4g}"


def describe_value(s: Stats, seeds: int) -> str:
    """'value M (95% CI L..H)', with 'over n of N seeds' where some seeds have none; '' for none."""
    if s.n == 0:
        return ""
    ci = "n/a" if s.low is None else f"{fmt(s.low)}..{fmt(s.high)}"
    return f"value {fmt(s.mean)} (95% CI {ci})" + (f" over {s.n} of {seeds} seeds" if s.n < seeds else "")


def lines(fig: str, summaries: Sequence[CheckSummary]) -> list[str]:
    """One line per check: `fig9  PASS 5/5 seeds  NAME  value M (95% CI L..H)`."""
    width = max((len(s.name) for s in summaries), default=0)
    return [f"{fig}  {'PASS' if s.holds else 'FAIL'} {s.holding}/{s.seeds} seeds  "
            f"{s.name:<{width}}  {describe_value(s.stats, s.seeds)}".rstrip() for s in summaries]


def holds(runs: Sequence[SeedChecks], summaries: Sequence[CheckSummary]) -> bool:
    """The claim holds over the seeds: at every seed every check of that run holds, and every check
    (by name) was made, and holds, at every seed."""
    return bool(runs) and all(r.passed for r in runs) and all(s.holds for s in summaries)


def verdict(runs: Sequence[SeedChecks], summaries: Sequence[CheckSummary] = ()) -> str:
    """The figure's result over the seeds: 'claim holds at every seed (N/N)' or 'claim holds at k/N
    seeds' (k: the seeds at which every check the run made holds), naming the seeds that contradict
    it and those whose run failed, and the checks not made at every seed."""
    n = len(runs)
    good = [r for r in runs if r.passed]
    if holds(runs, summaries):
        return f"claim holds at every seed ({n}/{n})"
    text = f"claim holds at {len(good)}/{n} seeds"
    bad = [f"seed={r.seed}" for r in runs if r.error is None and not r.passed]
    failed = [f"seed={r.seed}" for r in runs if r.error is not None]
    if bad:
        text += f"; contradicted at {', '.join(bad)}"
    if failed:
        text += f"; no checks (the run failed) at {', '.join(failed)}"
    partial = [s.name for s in summaries if s.absent]
    if partial:
        text += f"; not made at every seed: {'; '.join(partial)}"
    return text


def csv_cell(x: float | None) -> str:
    """A CSV number: 6 significant digits, empty for None."""
    return "" if x is None else f"{x:.6g}"


def write_csv(path: Path, summaries: Sequence[CheckSummary]) -> None:
    """OUT/figN.seeds.csv: one row per check (CSV_FIELDS)."""
    with path.open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(CSV_FIELDS)
        for s in summaries:
            st = s.stats
            w.writerow([s.name, s.holding, s.seeds, csv_cell(st.mean), csv_cell(st.sd), csv_cell(st.low),
                        csv_cell(st.high), st.n])


def md_escape(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("|", "\\|")


def write_md(path: Path, fig: str, runs: Sequence[SeedChecks], summaries: Sequence[CheckSummary],
             command: str = "") -> None:
    """OUT/figN.seeds.md: the claim, the result over the seeds, the table, how to read it."""
    first = next((r for r in runs if r.error is None), None)
    seeds = [r.seed for r in runs]
    span = f"{seeds[0]}..{seeds[-1]}" if seeds == list(range(seeds[0], seeds[0] + len(seeds))) else \
        ", ".join(map(str, seeds))
    head = f"# Figure {fig.removeprefix('fig')} over {len(runs)} seeds ({span})"
    out = [head + (f": {first.title}" if first and first.title else ""), ""]
    if first and first.claim:
        out += [f"**The paper's claim.** {first.claim}", ""]
    out += [f"**Result:** the {verdict(runs, summaries)}.", "",
            "| check | holds at | value: mean | sd | 95% CI | n |",
            "|---|---:|---:|---:|---|---:|"]
    for s in summaries:
        st = s.stats
        ci = "n/a" if st.low is None else f"{fmt(st.low)} .. {fmt(st.high)}"
        out.append(f"| {md_escape(s.name)} | {s.holding}/{s.seeds} | {fmt(st.mean) if st.n else ''} | "
                   f"{fmt(st.sd) if st.n else ''} | {ci if st.n else ''} | {st.n or ''} |")
    out += ["",
            "A check's name is its text with the numbers of a run replaced by `#` (or a name the figure "
            "gives it), the same at every seed. *holds at*: the seeds at which the check holds, out of all "
            "(a seed whose run failed, or that did not make the check, does not). *value*: the number the "
            "check is about (a ratio, a fraction, a count), over the n seeds that measured it: mean, sample "
            "standard deviation and the 95% Student-t interval mean +- t(0.975, n-1) sd / sqrt(n); n/a for "
            "a single value. Each seed's own figure, numbers and check texts: "
            f"`seeds/seed=S/{fig}.md` (records under `seeds/seed=S/runs/`)."]
    failed = [r for r in runs if r.error is not None]
    if failed:
        out += ["", "Runs that left no checks: " + "; ".join(f"seed={r.seed} ({r.error})" for r in failed) + "."]
    if command:
        out += ["", f"Produced by `{command}`."]
    path.write_text("\n".join(out) + "\n")


def run(fig: str, out: Path, seeds: Sequence[int], command: str = "") -> int:
    """Aggregates figure `fig` (e.g. 'fig9') over `seeds` under OUT: prints the table, writes
    OUT/figN.seeds.{csv,md}; 0 when the claim holds at every seed, else 1."""
    runs = [load_seed(seed_dir(out, s) / f"{fig}.checks.json", s) for s in seeds]
    summaries = aggregate(runs)
    for line in lines(fig, summaries):
        print(line)
    print(f"{fig}  {verdict(runs, summaries)}")
    for r in runs:
        if r.error is not None:
            print(f"{fig}  seed={r.seed}: {r.error}")
    write_csv(out / f"{fig}.seeds.csv", summaries)
    write_md(out / f"{fig}.seeds.md", fig, runs, summaries, command)
    return 0 if holds(runs, summaries) else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: seeds.py figN OUT SEED [SEED ...] [--command TEXT]."""
    ap = argparse.ArgumentParser(description="Aggregate a figure's claim checks over seeds "
                                 "(OUT/seeds/seed=S/figN.checks.json -> OUT/figN.seeds.{csv,md})")
    ap.add_argument("figure", help="figN")
    ap.add_argument("out", type=Path, help="the output directory holding seeds/seed=S/")
    ap.add_argument("seeds", type=int, nargs="+", help="the seeds run")
    ap.add_argument("--command", default="", help="the command line, for figN.seeds.md")
    args = ap.parse_args(argv)
    if not re.fullmatch(r"fig\d+", args.figure):
        ap.error(f"figure '{args.figure}' is not figN")
    return run(args.figure, args.out, args.seeds, args.command)


if __name__ == "__main__":
    sys.exit(main())
