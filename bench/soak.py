#!/usr/bin/python3
"""Soak: resident memory and open descriptors of workers running mixed collectives for a while.

Starts ``kfrun -np N kfbench soak -duration D -json`` (every collective of kf::Peer, mixed, each
result checked; bench/kfbench_soak.h), samples every worker's VmRSS and Threads
(/proc/PID/status) and its open descriptors (/proc/PID/fd) every few seconds, and judges the
samples taken after a warm-up:

- descriptors: the count must not change at all (a socket or file opened per operation and never
  closed grows it; the workers' connections are opened once, before the first collective);
- resident memory: the least-squares slope per worker must stay at or under --rss-slope-max
  KiB/min. The default, 64 KiB/min, is about 1 MiB over a 20-minute run: far under what any
  leak per operation makes at the soak's rate (each worker runs thousands of collectives a
  minute, so a leak of a few bytes each crosses it; summary.json gives the slope in bytes per
  collective too), and far over the page-level wobble of the allocator once the buffers,
  connections and mailboxes have reached their working size;
- threads: the count must not change either;
- kfbench: exit 0, no wrong element, every rank ran the same number of rounds;
- no hang: when every worker has used under 0.5% of a CPU for --stall seconds (a soak worker never
  idles), each thread's state, kernel stack and gdb backtrace go to stall.txt while the processes
  still exist, and the run fails.

The judged window runs from the warm-up's end to 2 s before the planned end: a worker tearing down
frees its buffers and closes its connections, which is no leak. Writes samples.csv (also each
worker's CPU time), summary.json and soak.png (matplotlib, Agg) into --out and exits 1 when a
judgement fails, 2 when the run could not be started or watched.

    ./kf bench soak [MINUTES]                 # bench/soak.sh BUILD_DIR [MINUTES] [flags]
    /usr/bin/python3 bench/soak.py --build build/release --out out/soak 20
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import platform
import random
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
KIB_PER_MIB = 1024.0
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Worker:
    """One kfbench worker process: its pid, rank (from kfrun's environment) and samples."""

    pid: int
    rank: int
    t: list[float] = field(default_factory=list)
    rss_kib: list[int] = field(default_factory=list)
    fds: list[int] = field(default_factory=list)
    threads: list[int] = field(default_factory=list)
    cpu_s: list[float] = field(default_factory=list)  # user + system time so far


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line; see the module docstring."""
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("minutes", nargs="?", type=float, default=20.0,
                   help="how long kfbench soak runs (default 20; fractions allowed)")
    p.add_argument("--build", type=Path, default=ROOT / "build" / "release",
                   help="build directory holding apps/kfrun and apps/kfbench")
    p.add_argument("--out", type=Path, default=ROOT / "out" / "soak",
                   help="where samples.csv, summary.json, soak.png and kfrun.log go")
    p.add_argument("--np", type=int, default=4, help="workers (default 4)")
    p.add_argument("--interval", type=float, default=2.0,
                   help="seconds between samples (default 2: the resident memory wobbles by a "
                        "few MiB as large payloads come and go, and more samples steady the fit)")
    p.add_argument("--warmup", type=float, default=None,
                   help="seconds left out of the judgement (default: 20%% of the run, at most 120)")
    p.add_argument("--rss-slope-max", type=float, default=64.0,
                   help="largest resident-memory slope allowed after the warm-up, KiB/min "
                        "(64; inf: report it only, as under sanitizers, whose quarantines and "
                        "shadow memory grow for minutes)")
    p.add_argument("--stall", type=float, default=30.0,
                   help="seconds of every worker idle (CPU time) that count as a hang: their "
                        "stacks go to stall.txt (default 30; kfbench's own deadline is 120 s)")
    p.add_argument("--port-base", type=int, default=None,
                   help="first of the workers' ports (default: a free range picked here)")
    p.add_argument("--sizes", default="-b 5 -e 4M -f 5",
                   help="kfbench's size flags, the payload sizes the rounds cycle through "
                        "(default 5 B .. 1.95 MB, 9 sizes; odd, so that pieces split unevenly "
                        "across chunks and ranks, and lent from 64 KiB up)")
    args = p.parse_args(argv)
    if not args.minutes > 0:
        p.error(f"minutes must be positive, not {args.minutes}")
    if args.np < 2:
        p.error("--np must be at least 2: the soak is about collectives between processes")
    if not args.interval > 0:
        p.error("--interval must be positive")
    return args


def free_port_base(count: int) -> int:
    """A base port such that base .. base+count-1 can all be bound on 127.0.0.1 right now.

    For runs by hand; the ctest passes a leased range (tests/port_lease.sh) instead.
    """
    for _ in range(200):
        base = random.randrange(33000, 60000 - count)
        try:
            for port in range(base, base + count):
                with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                    s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
    raise RuntimeError("no free port range found")


def children(pid: int) -> list[int]:
    """Pids of the processes whose parent is `pid` (every thread's children list)."""
    out: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out.extend(int(x) for x in f.read().split())
    except OSError:
        pass
    return out


def worker_rank(pid: int) -> Optional[int]:
    """The worker's rank: the place of KUNGFU_SELF_SPEC in KUNGFU_INIT_PEERS (kfrun's variables)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
    except OSError:
        return None
    me, peers = env.get(b"KUNGFU_SELF_SPEC"), env.get(b"KUNGFU_INIT_PEERS")
    if me is None or peers is None:
        return None
    try:
        return peers.split(b",").index(me)
    except ValueError:
        return None


def find_workers(kfrun: subprocess.Popen[bytes], n: int, limit_s: float) -> list[Worker]:
    """Waits until kfrun has started its n kfbench workers; returns them in rank order."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and kfrun.poll() is None:
        found: list[Worker] = []
        for pid in children(kfrun.pid):
            try:
                comm = Path(f"/proc/{pid}/comm").read_text().strip()
            except OSError:
                continue
            rank = worker_rank(pid) if comm == "kfbench" else None
            if rank is not None:
                found.append(Worker(pid=pid, rank=rank))
        if len(found) == n:
            return sorted(found, key=lambda w: w.rank)
        time.sleep(0.05)
    raise RuntimeError(f"kfrun did not start {n} kfbench workers within {limit_s:.0f} s")


def sample(w: Worker, t: float) -> bool:
    """Appends one sample of VmRSS, Threads and the open descriptors; False once it has gone."""
    try:
        status = Path(f"/proc/{w.pid}/status").read_text()
        fds = len(os.listdir(f"/proc/{w.pid}/fd"))
        stat = Path(f"/proc/{w.pid}/stat").read_text()
    except OSError:
        return False
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    if "VmRSS" not in fields:  # a zombie: exited, not yet reaped
        return False
    w.t.append(t)
    w.rss_kib.append(int(fields["VmRSS"].split()[0]))
    w.threads.append(int(fields["Threads"]))
    # /proc/PID/stat: utime and stime are fields 14 and 15, counted after the ")" ending comm.
    ticks = stat[stat.rindex(")") + 2:].split()
    w.cpu_s.append((int(ticks[11]) + int(ticks[12])) / CLOCK_TICKS)
    w.fds.append(fds)
    return True


def slope_per_min(t: np.ndarray, y: np.ndarray) -> float:
    """Least-squares slope of y against t (seconds), per minute."""
    return float(np.polyfit(t / 60.0, y, 1)[0])


def judge(workers: list[Worker], warmup_s: float, rss_slope_max: float,
          collectives_per_rank: Optional[float], seconds: Optional[float],
          end_s: float = math.inf) -> dict[str, Any]:
    """Per worker: slopes and ranges of the samples from `warmup_s` to `end_s` (the judged
    window), and the reasons the run fails (if any).

    `end_s` keeps out the workers' exit: a worker tearing down closes its connections and frees
    its buffers, which is no leak but would read as a change.
    """
    rows: list[dict[str, Any]] = []
    reasons: list[str] = []
    for w in workers:
        t = np.array(w.t)
        after = (t >= warmup_s) & (t <= end_s)
        row: dict[str, Any] = {"rank": w.rank, "pid": w.pid, "samples": len(t),
                               "samples_judged": int(after.sum())}
        if after.sum() < 3:
            reasons.append(f"rank {w.rank}: {int(after.sum())} samples after the warm-up (need 3)")
            rows.append(row)
            continue
        rss = np.array(w.rss_kib, dtype=float)[after]
        fds = np.array(w.fds)[after]
        threads = np.array(w.threads)[after]
        rss_slope = slope_per_min(t[after], rss)
        row.update({
            "rss_kib_at_warmup_end": int(rss[0]), "rss_kib_last": int(rss[-1]),
            "rss_kib_min_after_warmup": int(rss.min()), "rss_kib_max_after_warmup": int(rss.max()),
            "rss_kib_median_after_warmup": float(np.median(rss)),
            "rss_slope_kib_per_min": round(rss_slope, 3),
            "fd_min": int(fds.min()), "fd_max": int(fds.max()),
            "fd_slope_per_min": round(slope_per_min(t[after], fds.astype(float)), 6),
            "threads_min": int(threads.min()), "threads_max": int(threads.max()),
        })
        # The same fit through each whole minute's median: blind to the wobble of single samples
        # (payloads of up to 2 MB come and go between them); reported, not judged.
        minute = np.floor((t[after] - warmup_s) / 60.0)
        whole = [m for m in np.unique(minute) if np.ptp(t[after][minute == m]) >= 50.0]
        if len(whole) >= 3:
            centers = np.array([t[after][minute == m].mean() for m in whole])
            medians = np.array([np.median(rss[minute == m]) for m in whole])
            row["rss_slope_of_minute_medians_kib_per_min"] = round(
                slope_per_min(centers, medians), 3)
        if collectives_per_rank and seconds:
            per_min = collectives_per_rank / (seconds / 60.0)
            row["rss_slope_bytes_per_collective"] = round(rss_slope * 1024.0 / per_min, 6)
        if fds.min() != fds.max():
            reasons.append(f"rank {w.rank}: open descriptors changed after the warm-up "
                           f"({fds.min()}..{fds.max()})")
        if rss_slope > rss_slope_max:
            reasons.append(f"rank {w.rank}: resident memory grows {rss_slope:.1f} KiB/min after "
                           f"the warm-up (limit {rss_slope_max:g})")
        if threads.min() != threads.max():
            reasons.append(f"rank {w.rank}: thread count changed after the warm-up "
                           f"({threads.min()}..{threads.max()})")
        rows.append(row)
    return {"workers": rows, "reasons": reasons}


def kfbench_report(log: str) -> Optional[dict[str, Any]]:
    """kfbench soak's JSON report from kfrun's output (its lines may carry kfrun's prefix)."""
    for line in log.splitlines():
        i = line.find('{"')
        if i >= 0 and '"soak"' in line:
            try:
                return json.loads(line[i:])
            except json.JSONDecodeError:
                continue
    return None


def write_csv(path: Path, workers: list[Worker]) -> None:
    """One row per sample: t_s, rank, pid, rss_kib, fds, threads, cpu_s."""
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["t_s", "rank", "pid", "rss_kib", "fds", "threads", "cpu_s"])
        rows = [(t, w.rank, w.pid, r, d, th, c) for w in workers
                for t, r, d, th, c in zip(w.t, w.rss_kib, w.fds, w.threads, w.cpu_s)]
        for t, rank, pid, r, d, th, c in sorted(rows):
            out.writerow([f"{t:.2f}", rank, pid, r, d, th, f"{c:.2f}"])


def plot(path: Path, workers: list[Worker], warmup_s: float, end_s: float, title: str) -> None:
    """Resident memory and open descriptors against time, the warm-up shaded, fits drawn.

    Skipped with a note where matplotlib is missing: the judgement needs only numpy.
    """
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("soak: no matplotlib: no plot", file=sys.stderr)
        return

    fig, (ax_rss, ax_fd) = plt.subplots(2, 1, figsize=(9, 7), sharex=True)
    for w in workers:
        t = np.array(w.t) / 60.0
        rss = np.array(w.rss_kib) / KIB_PER_MIB
        (line,) = ax_rss.plot(t, rss, lw=1, label=f"rank {w.rank}")
        after = (t >= warmup_s / 60.0) & (t <= end_s / 60.0)
        if after.sum() >= 3:
            k, c = np.polyfit(t[after], rss[after], 1)
            ax_rss.plot(t[after], k * t[after] + c, ls="--", lw=1, color=line.get_color())
        ax_fd.step(t, w.fds, where="post", lw=1, label=f"rank {w.rank}")
    for ax in (ax_rss, ax_fd):
        ax.axvspan(0, warmup_s / 60.0, color="0.9", label="warm-up")
        ax.grid(alpha=0.3)
    ax_rss.set_ylabel("VmRSS (MiB)")
    ax_fd.set_ylabel("open descriptors")
    ax_fd.set_xlabel("minutes since the workers started")
    ax_rss.legend(loc="lower right", fontsize=8)
    ax_rss.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def stalled(workers: list[Worker], window_s: float) -> bool:
    """True when no worker used more than 0.5% of a CPU over the last `window_s` seconds.

    A soak worker runs collectives back to back and never idles; all of them idle at once means
    every rank waits on the others (a lost message, a deadlock), which kfbench's collective
    deadline only ends later, after which kfrun stops everything.
    """
    for w in workers:
        if not w.t or w.t[-1] < window_s:
            return False
        i = next(k for k, t in enumerate(w.t) if t >= w.t[-1] - window_s)
        if w.cpu_s[-1] - w.cpu_s[i] > 0.005 * (w.t[-1] - w.t[i]):
            return False
    return True


def dump_stacks(workers: list[Worker], path: Path) -> None:
    """Writes every thread's state, kernel stack and (with gdb) user stack of each worker."""
    with open(path, "w") as out:
        for w in workers:
            out.write(f"==== rank {w.rank} pid {w.pid}\n")
            try:
                for tid in sorted(os.listdir(f"/proc/{w.pid}/task"), key=int):
                    task = Path(f"/proc/{w.pid}/task/{tid}")
                    state = (task / "stat").read_text().rsplit(")", 1)[1].split()[0]
                    wchan = (task / "wchan").read_text()
                    try:
                        stack = (task / "stack").read_text()  # root only
                    except OSError:
                        stack = "(kernel stack unreadable)\n"
                    out.write(f"-- tid {tid} state {state} wchan {wchan}\n{stack}")
            except OSError as e:
                out.write(f"(gone: {e})\n")
            out.flush()
            if shutil.which("gdb"):
                try:
                    bt = subprocess.run(
                        ["gdb", "-batch", "-nx", "-p", str(w.pid), "-ex", "thread apply all bt"],
                        capture_output=True, text=True, timeout=60)
                    out.write(bt.stdout)
                except subprocess.TimeoutExpired:
                    out.write("(gdb timed out)\n")
            out.flush()


def watch(kfrun: subprocess.Popen[bytes], n: int, interval: float, stall_s: float,
          out_dir: Path) -> tuple[list[Worker], Optional[float]]:
    """Samples kfrun's n workers every `interval` s until kfrun exits; a line a minute.

    When every worker has idled for `stall_s` seconds, writes their stacks to stall.txt once (a
    hang, caught while the processes still exist) and returns the time it was seen.
    """
    workers = find_workers(kfrun, n, 60.0)
    t0 = time.monotonic()
    next_sample = t0
    next_note = t0 + 60.0
    stall_at: Optional[float] = None
    while kfrun.poll() is None:
        now = time.monotonic()
        if now >= next_sample:
            for w in workers:
                sample(w, now - t0)
            next_sample += interval
            if stall_at is None and stalled(workers, stall_s):
                stall_at = now - t0
                print(f"soak: every worker idle for {stall_s:.0f} s at {stall_at:.0f} s: a hang; "
                      f"stacks in {out_dir / 'stall.txt'}", flush=True)
                dump_stacks(workers, out_dir / "stall.txt")
        if now >= next_note:
            rss = " ".join(f"{w.rss_kib[-1] / KIB_PER_MIB:.1f}" for w in workers if w.rss_kib)
            fds = " ".join(str(w.fds[-1]) for w in workers if w.fds)
            print(f"soak: {(now - t0) / 60:.0f} min, RSS MiB {rss}, fds {fds}", flush=True)
            next_note += 60.0
        time.sleep(max(0.0, min(next_sample, next_note) - time.monotonic()))
    return workers, stall_at


def main(argv: list[str]) -> int:
    """Runs the soak, samples it, writes the records and returns the exit status."""
    args = parse_args(argv)
    kfrun_bin, kfbench_bin = args.build / "apps" / "kfrun", args.build / "apps" / "kfbench"
    for b in (kfrun_bin, kfbench_bin):
        if not os.access(b, os.X_OK):
            print(f"soak: {b} is missing: build kfrun and kfbench first", file=sys.stderr)
            return 2
    seconds = args.minutes * 60.0
    warmup_s = args.warmup if args.warmup is not None else min(120.0, 0.2 * seconds)
    base = args.port_base if args.port_base is not None else free_port_base(args.np + 6)
    args.out.mkdir(parents=True, exist_ok=True)
    # kfrun's -timeout only stops a hung job: the soak ends on its own after `seconds`.
    command = [str(kfrun_bin), "-np", str(args.np), "-q", "-port-range",
               f"{base}-{base + args.np + 5}", "-timeout", f"{int(seconds + 300)}s",
               str(kfbench_bin), "soak", "-duration", f"{seconds:.3f}s",
               *args.sizes.split(), "-json"]
    print("soak: " + " ".join(command), flush=True)
    log_path = args.out / "kfrun.log"
    load_start = os.getloadavg()
    with open(log_path, "wb") as log:
        kfrun = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            workers, stall_at = watch(kfrun, args.np, args.interval, args.stall, args.out)
        except RuntimeError as e:
            print(f"soak: {e}\n{log_path.read_text()}", file=sys.stderr)
            return 2
        finally:
            if kfrun.poll() is None:  # interrupted, or the workers never showed: stop the job
                kfrun.kill()
                kfrun.wait()
    rc = kfrun.returncode
    log_text = log_path.read_text(errors="replace")
    report = kfbench_report(log_text)

    collectives_per_rank = report["collectives"] / args.np if report else None
    # Judged up to 2 s before the soak's end: every rank's deadline is later than that (each
    # counts from its own start, after the workers were found), so the rounds were still running.
    end_s = seconds - 2.0
    verdict = judge(workers, warmup_s, args.rss_slope_max, collectives_per_rank,
                    report["seconds"] if report else None, end_s)
    reasons = verdict["reasons"]
    if rc != 0:
        reasons.insert(0, f"kfrun exited {rc}")
    if stall_at is not None:
        reasons.append(f"every worker idle from about {stall_at - args.stall:.0f} s on: a hang "
                       "(stall.txt has their stacks)")
    if report is None:
        reasons.append("no kfbench soak report in kfrun.log")
    else:
        if report["wrong"] != 0:
            reasons.append(f"kfbench found {report['wrong']} wrong elements: {report['ops']}")
        if len(set(report["rounds_per_rank"])) != 1 or len(report["rounds_per_rank"]) != args.np:
            reasons.append(f"ranks ran different rounds: {report['rounds_per_rank']}")

    write_csv(args.out / "samples.csv", workers)
    summary = {
        "command": command, "np": args.np, "minutes": args.minutes,
        "interval_s": args.interval, "warmup_s": warmup_s, "judged_until_s": end_s,
        "rss_slope_max_kib_per_min": (args.rss_slope_max if math.isfinite(args.rss_slope_max)
                                      else None),
        "kfrun_exit": rc, "stall_seen_at_s": stall_at,
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                    "loadavg_start": load_start, "loadavg_end": os.getloadavg()},
        "kfbench": report, "workers": verdict["workers"],
        "ok": not reasons, "reasons": reasons,
    }
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    title = (f"kfbench soak, {args.np} workers, {args.minutes:g} min"
             + (f", {report['collectives']:,} collectives" if report else ""))
    plot(args.out / "soak.png", workers, warmup_s, end_s, title)

    print(f"soak: {'rank':>4} {'RSS slope KiB/min':>18} {'B/collective':>13} "
          f"{'fds':>7} {'threads':>7}")
    for row in verdict["workers"]:
        if "rss_slope_kib_per_min" in row:
            print(f"soak: {row['rank']:>4} {row['rss_slope_kib_per_min']:>18.2f} "
                  f"{row.get('rss_slope_bytes_per_collective', float('nan')):>13.4f} "
                  f"{row['fd_min']:>3}..{row['fd_max']:<3} "
                  f"{row['threads_min']:>3}..{row['threads_max']:<3}")
    if report:
        print(f"soak: {report['collectives']:,} collectives in {report['seconds']:.0f} s, "
              f"{report['rounds']:,} rounds per rank, {report['wrong']} wrong")
    for r in reasons:
        print(f"soak: FAIL {r}", file=sys.stderr)
    print(f"soak: {'ok' if not reasons else 'FAILED'}; records in {args.out}", flush=True)
    return 0 if not reasons else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
