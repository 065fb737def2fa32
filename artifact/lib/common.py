"""Shared plumbing of the figure scripts: flags, running kfsim, writing figN.{png,pdf,csv,md}.

Each artifact/figN.py builds a Figure, runs what it needs, checks the paper's qualitative claim
against its own numbers (each check with the number it is about and a name stable across seeds)
and calls finish(), which also writes figN.checks.json for artifact/lib/seeds.py. Exit codes: 0
the claim holds, 1 our run contradicts it, 2 a run failed or a bad flag, 77 the figure is not
available yet.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import resource
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence, TypedDict

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from seeds import check_name  # noqa: E402,F401  (the default stable name of a check)

sys.path.insert(0, str(ROOT / "analysis"))

from kfplot.records import RecordError, Run, load_run, load_sweep  # noqa: E402,F401
from kfplot import style  # noqa: E402,F401

NOT_AVAILABLE = 77


class Check(TypedDict):
    """One claim check as figN.checks.json holds it."""

    name: str
    text: str
    ok: bool
    value: float | None


def seed_of(sets: Sequence[str]) -> int | str | None:
    """The seed set by the last `seed=S` among kfsim --set overrides (a later one wins, as in kfsim);
    None when none sets it."""
    seed: int | str | None = None
    for s in sets:
        key, _, value = s.partition("=")
        if key.strip() == "seed":
            value = value.strip()
            seed = int(value) if value.isdigit() else value
    return seed


class FigureError(Exception):
    """A run failed or produced no usable records (exit 2)."""


class Figure:
    def __init__(self, number: int, title: str, argv: Sequence[str] | None = None,
                 options: Callable[[argparse.ArgumentParser], None] | None = None) -> None:
        """Parses the common flags, and the figure's own that `options` adds to the parser."""
        ap = argparse.ArgumentParser(description=f"Reproduce the paper's Fig. {number}: {title}")
        if options is not None:
            options(ap)
        ap.add_argument("--mode", choices=("sim", "real"), default="sim")
        ap.add_argument("--quick", action="store_true", help="CI-sized run (minutes on 2 cores)")
        ap.add_argument("--out", default=os.environ.get("KF_ARTIFACT_OUT", str(ROOT / "artifact" / "out")),
                        help="where figN.{png,pdf,csv,md} go (default artifact/out)")
        ap.add_argument("--build", default=os.environ.get("KF_BUILD", str(ROOT / "build" / "release")),
                        help="the build directory holding apps/kfsim, apps/kfrun, ... ")
        ap.add_argument("--records", help="real mode: records gathered from a cluster run "
                        "(see artifact/README.md); analysed instead of running anything")
        ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="sim mode: one more kfsim --set for every run (e.g. to match a cluster's "
                        "network: topology.link.bandwidth=25Gbps)")
        self.args = ap.parse_args(argv)
        self.number = number
        self.title = title
        self.quick: bool = self.args.quick
        self.mode: str = self.args.mode
        self.out = Path(self.args.out).resolve()
        self.build = Path(self.args.build).resolve()
        self.runs = self.out / "runs" / f"fig{number}{'-quick' if self.quick else ''}"
        self.base = self.out / f"fig{number}"
        self.started = time.monotonic()
        self.commands: list[str] = []
        self.checks: list[Check] = []
        self.out.mkdir(parents=True, exist_ok=True)
        # A stale figN.checks.json must not outlive a run that fails before finish().
        self.base.with_suffix(".checks.json").unlink(missing_ok=True)

    # -- running ------------------------------------------------------------------------------

    def binary(self, name: str) -> Path:
        p = self.build / "apps" / name
        if not p.is_file():
            raise FigureError(f"{p}: not built (./kf setup, or --build DIR / KF_BUILD)")
        return p

    def kfsim(self, scenario: str, name: str, sets: Iterable[str] = ()) -> Path:
        """Runs kfsim on scenarios/<scenario> (or a path from the repository root) into runs/<name>;
        returns that directory."""
        out = self.runs / name
        file = ROOT / scenario if "/" in scenario else ROOT / "scenarios" / scenario
        cmd = [str(self.binary("kfsim")), str(file), "--out", str(out), "--quiet"]
        for s in [*sets, *self.args.set]:
            cmd += ["--set", s]
        self.run(cmd)
        return out

    def run(self, cmd: Sequence[str], env: dict[str, str] | None = None) -> str:
        shown = " ".join(shlex.quote(c.replace(str(ROOT) + "/", "")) for c in cmd)
        self.commands.append(shown)
        print(f"[fig{self.number}] {shown}", flush=True)
        t = time.monotonic()
        p = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           env={**os.environ, **(env or {})})
        print(f"[fig{self.number}]   {time.monotonic() - t:.1f} s wall, exit {p.returncode}", flush=True)
        if p.returncode != 0:
            raise FigureError(f"{shown} exited {p.returncode}:\n{p.stdout[-3000:]}")
        return p.stdout

    # -- outputs ------------------------------------------------------------------------------

    def write_csv(self, rows: Sequence[dict[str, Any]]) -> Path:
        path = self.base.with_suffix(".csv")
        if not rows:
            raise FigureError("no rows for " + str(path))
        with path.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0].keys()), lineterminator="\n")
            w.writeheader()
            for r in rows:
                w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})
        return path

    def save(self, fig) -> list[Path]:
        return style.save(fig, self.base)

    def check(self, ok: bool, text: str, value: float | None = None, name: str | None = None) -> bool:
        """Records one check of the claim: `text` says what was checked with this run's numbers,
        `value` is the measured quantity it is about (a ratio, a fraction, a count; None where there
        is none; inf / nan are kept as None), `name` a stable name, the same at every seed (default:
        the text with every number replaced by '#'; a repeated name gets ' (2)', ' (3)', ...)."""
        name = name or check_name(text)
        taken = {c["name"] for c in self.checks}
        if name in taken:
            k = 2
            while f"{name} ({k})" in taken:
                k += 1
            name = f"{name} ({k})"
        v = float(value) if value is not None else None
        self.checks.append({"name": name, "text": text, "ok": bool(ok),
                            "value": v if v is not None and math.isfinite(v) else None})
        print(f"[fig{self.number}] {'PASS' if ok else 'FAIL'}: {text}", flush=True)
        return bool(ok)

    def write_checks(self, claim: str, passed: bool) -> Path:
        """Writes figN.checks.json: the figure, its claim, the seed it ran at (the last --set seed=S,
        else null), whether every check passed, and the checks [{name, text, ok, value}, ...]."""
        path = self.base.with_suffix(".checks.json")
        dump_json(path, {"figure": self.number, "title": self.title, "claim": claim, "mode": self.mode,
                         "quick": self.quick, "seed": seed_of(self.args.set), "passed": passed,
                         "checks": self.checks})
        return path

    def finish(self, claim: str, config: str, result: str) -> int:
        """Writes figN.md (claim, configuration, what our run shows, the checks) and figN.checks.json,
        and returns the exit code: 0 when every check passed, else 1."""
        wall = time.monotonic() - self.started
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = usage.ru_utime + usage.ru_stime
        passed = all(c["ok"] for c in self.checks) and bool(self.checks)
        verdict = "holds" if passed else "is CONTRADICTED by our run"
        lines = [
            f"# Figure {self.number}: {self.title}",
            "",
            f"**The paper's claim.** {claim} **Configuration ({self.mode} mode"
            f"{', --quick' if self.quick else ''}).** {config} **What our run shows.** {result} "
            f"**Check:** the claim {verdict} "
            f"({'; '.join(('passed: ' if c['ok'] else 'FAILED: ') + c['text'] for c in self.checks)}).",
            "",
            f"![Figure {self.number}](fig{self.number}.png)",
            "",
            f"Produced by `artifact/reproduce.sh fig{self.number} --mode {self.mode}"
            f"{' --quick' if self.quick else ''}` in {wall:.0f} s of wall time ({cpu:.0f} s of CPU time in the runs); records under "
            f"`{self.runs.relative_to(self.out.parent) if self.out.parent in self.runs.parents else self.runs}`. Commands:",
            "",
            *[f"    {c}" for c in self.commands],
            "",
        ]
        self.base.with_suffix(".md").write_text("\n".join(lines))
        self.write_checks(claim, passed)
        print(f"[fig{self.number}] {'PASS' if passed else 'FAIL'}: wrote {self.base}.{{png,pdf,csv,md,checks.json}} "
              f"in {wall:.0f} s wall, {cpu:.0f} s CPU", flush=True)
        return 0 if passed else 1


def main(body) -> None:
    """Runs a figure body (a function returning the exit code), turning errors into exit 2."""
    try:
        code = body()
    except (FigureError, RecordError) as e:
        print(f"error: {e}", file=sys.stderr)
        code = 2
    sys.exit(code)


def ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def steady_throughput(run: Run, skip: int = 1) -> float:
    """Cluster samples/s over the steps after the first `skip` (connection set-up, warm-up)."""
    steps = run.cluster_steps()
    return run.throughput(steps[skip:] if len(steps) > skip else steps)


def dump_json(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(obj, indent=2) + "\n")
