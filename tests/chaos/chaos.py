#!/usr/bin/python3
"""The chaos campaign: elastic `kftrain -verify` jobs (or S-SGD MLPs) under `kfrun -w`, on
loopback and in 4 network namespaces, each with one fault drawn at random from a seed (faults.py:
kill -9 of a worker, a runner or the config server, SIGSTOP of a worker past the collective
deadline, a veth down and up, a resize racing another), judged after every run against the
invariants of invariants.py (bounded, exit code says what happened, workers agree step by step,
no wrong gradient, records complete up to the failure). One line per run on stderr; the tables
(runs.csv, summary.csv, summary.md, summary.json) in --out. Exit 0: no invariant broken; 1: some
run broke one (listed); 77: no requested world can run here; 2: bad arguments.

    /usr/bin/python3 tests/chaos/chaos.py --runs 200 --build build/release --out out/chaos
    /usr/bin/python3 tests/chaos/chaos.py --replay 123456789 --worlds loopback   # one run again

Needs root for the netns world (skipped with a note otherwise). Everything it starts is its
descendant (it is a child subreaper) and is killed by pid after each run; its namespaces are
removed on exit, and a later campaign removes those of a killed one."""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import procs  # noqa: E402
from faults import KINDS, RACE_VARIANTS, draw_plan  # noqa: E402
from invariants import judge  # noqa: E402
from jobspec import draw_job  # noqa: E402
from run import Run  # noqa: E402
from summary import RunRecord, write  # noqa: E402
from worlds import Loopback, Netns, World, sweep_stale_namespaces  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
_created: list[World] = []  # worlds to tear down on the way out


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=20, help="runs to make (default 20)")
    p.add_argument("--seed", type=int, default=None,
                   help="the campaign's seed (default: from the clock, printed)")
    p.add_argument("--replay", type=int, default=None, metavar="RUN_SEED",
                   help="make the one run of this run seed (printed on each run's line)")
    p.add_argument("--build", type=Path, default=ROOT / "build" / "release",
                   help="the build holding apps/kfrun, kftrain, kfconfig")
    p.add_argument("--out", type=Path, default=None,
                   help="tables and kept runs (default: a temporary directory, removed)")
    p.add_argument("--worlds", default="loopback,netns", help="loopback,netns (default both)")
    p.add_argument("--faults", default=",".join(KINDS),
                   help=f"fault kinds to draw from (default all: {','.join(KINDS)})")
    p.add_argument("--cycle", action="store_true",
                   help="take the fault kinds in turn instead of at random")
    p.add_argument("--bound-s", type=float, default=60.0,
                   help="a run still going after this long is a hang (default 60)")
    p.add_argument("--budget-s", type=float, default=None,
                   help="start no run that could end past this many seconds from the start")
    p.add_argument("--slow", type=float, default=None,
                   help="scale the collective deadline (default 1; 3 when KF_SANITIZED is set)")
    p.add_argument("--keep", choices=["failing", "all", "none"], default="failing",
                   help="which runs' directories (logs, records) to keep in --out/runs")
    a = p.parse_args(argv)
    a.worlds = [w for w in a.worlds.split(",") if w]
    a.faults = [f for f in a.faults.split(",") if f]
    bad = [w for w in a.worlds if w not in ("loopback", "netns")] + \
        [f for f in a.faults if f not in KINDS]
    if bad or a.runs < 1 or not a.worlds or not a.faults:
        p.error(f"bad --runs, --worlds or --faults: {bad or a.runs}")
    for tool in ("kfrun", "kftrain", "kfconfig"):
        if not os.access(a.build / "apps" / tool, os.X_OK):
            p.error(f"{a.build}/apps/{tool} is not built")
    if a.slow is None:
        a.slow = 3.0 if os.environ.get("KF_SANITIZED") else 1.0
    return a


def make_worlds(names: list[str]) -> dict[str, World]:
    """The requested worlds that can run here (a note on stderr for each that cannot)."""
    worlds: dict[str, World] = {}
    for name in names:
        if name == "loopback":
            worlds[name] = Loopback()
            continue
        why = Netns.unavailable()
        if why:
            print(f"chaos: netns world skipped: {why}", file=sys.stderr)
            continue
        net = Netns()
        _created.append(net)
        try:
            net.setup()
        except RuntimeError as e:
            print(f"chaos: netns world skipped: {e}", file=sys.stderr)
            continue
        worlds[name] = net
    return worlds


def one_run(index: int, seed: int, args: argparse.Namespace, worlds: dict[str, World],
            port_base: int, runs_dir: Path) -> RunRecord:
    """Draws, makes and judges run `index` from its seed. The world, the fault kind, its
    variant, the job and the plan each come from a stream of their own, so that a replay with
    one world and one fault kind (--replay SEED --worlds W --faults K) makes the same run."""
    def stream(name: str) -> random.Random:
        return random.Random(f"{seed}-{name}")

    world = worlds[stream("world").choice(sorted(worlds))]
    usable = [k for k in args.faults if k != "veth_flap" or world.can_flap()] or ["none"]
    kind = usable[index % len(usable)] if args.cycle else stream("fault").choice(usable)
    variant = stream("variant").choice(RACE_VARIANTS) if kind == "resize_race" else ""
    job = draw_job(stream("job"), world, args.slow, kind, variant)
    plan = draw_plan(stream("plan"), kind, variant, job.steps, job.schedule, job.timeout_s)
    run_dir = runs_dir / f"{index + 1:04d}"
    run = Run(job, plan, world, args.build, run_dir, port_base + 32 * (index % 4))
    ended, engine = run.execute(args.bound_s)
    verdict = judge(run, ended, engine)
    o = engine.outcome
    rec = RunRecord(index, seed, world.name, kind, variant, job.describe(), o.detail, o.applied,
                    o.late, verdict.outcome, ended.codes, ended.seconds, verdict.violations,
                    verdict.causes)
    (run_dir / "verdict.txt").write_text(
        f"seed {seed}\njob {job.as_dict()}\nplan {plan}\nfault {o.as_dict()}\n"
        f"codes {ended.codes}\noutcome {verdict.outcome}\ncauses {verdict.causes}\n"
        + "".join(f"VIOLATION {v}\n" for v in verdict.violations))
    if args.keep == "none" or (args.keep == "failing" and verdict.ok()):
        shutil.rmtree(run_dir, ignore_errors=True)
    return rec


def progress_line(rec: RunRecord, total: int, args: argparse.Namespace) -> str:
    """The run's line on stderr."""
    fault = rec.fault + (f"/{rec.variant}" if rec.variant else "")
    late = " (late)" if rec.late else ""
    codes = ",".join("-" if c is None else str(c) for c in rec.codes)
    line = (f"[chaos] run {rec.index + 1}/{total} seed={rec.seed} {rec.world} {fault}: "
            f"{rec.detail}{late} -> {rec.outcome} (exit {codes}) {rec.seconds:.1f}s")
    if rec.causes:
        line += f" cause: {rec.causes[0][:100]}"
    if rec.violations:
        line += (f"\n[chaos]   VIOLATED ({len(rec.violations)}): " + rec.violations[0][:300]
                 + f"\n[chaos]   replay: {sys.argv[0]} --replay {rec.seed} --worlds {rec.world}"
                 f" --faults {rec.fault} --build {args.build}")
    return line


def campaign(args: argparse.Namespace) -> int:
    """Runs the campaign; the exit code."""
    worlds = make_worlds(args.worlds)
    if not worlds:
        print("chaos: SKIP: no requested world can run here", file=sys.stderr)
        return 77
    seed = args.seed if args.seed is not None else int(time.time()) % 1_000_000
    out = args.out or _scratch(Path(tempfile.mkdtemp(prefix="kf-chaos-")))
    runs_dir = out / "runs"
    port_base = procs.lease_ports(128)
    seeds = [args.replay] if args.replay is not None else [
        (seed * 1_000_003 + i) % 2**32 for i in range(args.runs)]
    print(f"[chaos] seed {seed}: {len(seeds)} runs in {','.join(sorted(worlds))}, bound "
          f"{args.bound_s:g}s per run, ports {port_base}-{port_base + 127}, out {out}",
          file=sys.stderr)
    t0 = time.monotonic()
    records: list[RunRecord] = []
    for i, s in enumerate(seeds):
        if args.budget_s is not None and time.monotonic() - t0 + args.bound_s > args.budget_s:
            print(f"[chaos] budget of {args.budget_s:g}s reached after {i} runs", file=sys.stderr)
            break
        rec = one_run(i, s, args, worlds, port_base, runs_dir)
        records.append(rec)
        print(progress_line(rec, len(seeds), args), file=sys.stderr, flush=True)
    meta = {"command": " ".join(sys.argv), "seed": seed, "worlds": sorted(worlds),
            "bound_s": args.bound_s, "slow": args.slow, "build": str(args.build),
            "seconds": round(time.monotonic() - t0, 1)}
    rows = write(out, records, meta)
    total = rows[-1]
    print(f"[chaos] {total['runs']} runs: {total['applied']} faults applied, {total['completed']} "
          f"completed, {total['lost']} lost, {total['hangs']} hangs, {total['violating_runs']} "
          f"broke an invariant; tables in {out}{' (temporary)' if args.out is None else ''}",
          file=sys.stderr)
    if args.out is None:
        if total["violating_runs"]:
            print((out / "summary.md").read_text(), file=sys.stderr)
            for d in sorted(runs_dir.glob("*")):
                for f in sorted(d.glob("*.log")) + [d / "verdict.txt"]:
                    print(f"--- {f}\n{f.read_text(errors='replace')[-4000:]}", file=sys.stderr)
    return 1 if total["violating_runs"] else 0


_scratch_dirs: list[Path] = []  # temporary --out directories, removed on the way out


def _scratch(path: Path) -> Path:
    """Notes a temporary directory for removal on exit."""
    _scratch_dirs.append(path)
    return path


def main(argv: list[str]) -> int:
    """Entry point: everything started is killed and every namespace removed on the way out,
    also on SIGTERM or SIGINT."""
    args = parse_args(argv)
    procs.become_subreaper()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: sys.exit(128 + signum))
    sweep_stale_namespaces()
    try:
        return campaign(args)
    finally:
        procs.wait_gone(procs.kill_all(), 3.0)
        procs.reap_adopted(())
        _teardown_all()
        for d in _scratch_dirs:
            shutil.rmtree(d, ignore_errors=True)


def _teardown_all() -> None:
    """Removes every world made (namespaces, veths); says so if any is left."""
    for w in _created:
        w.teardown()
        left = w.leftovers() if isinstance(w, Netns) else []
        if left:
            print(f"chaos: namespaces left after teardown: {left}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
