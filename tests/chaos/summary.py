"""The campaign's tables: one row per run (runs.csv) and a summary by fault kind (summary.csv,
summary.md, summary.json): runs, faults applied, late (the job had finished training), missed
(never fired), jobs completed, jobs lost, hangs, runs that broke an invariant, and the
violations themselves."""

from __future__ import annotations

import csv
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

COLUMNS = ["fault", "runs", "applied", "late", "missed", "completed", "lost", "hangs",
           "violating_runs"]


@dataclass
class RunRecord:
    """One run as the tables show it."""

    index: int  # 0-based; runs are numbered from 1 in every table
    seed: int
    world: str
    fault: str
    variant: str
    job: str
    detail: str
    applied: bool
    late: bool
    outcome: str
    codes: list
    seconds: float
    violations: list[str] = field(default_factory=list)
    causes: list[str] = field(default_factory=list)

    def row(self) -> dict:
        """For runs.csv."""
        return {"run": self.index + 1, "seed": self.seed, "world": self.world, "fault": self.fault,
                "variant": self.variant, "job": self.job, "detail": self.detail,
                "applied": int(self.applied), "late": int(self.late), "outcome": self.outcome,
                "exit_codes": " ".join(str(c) for c in self.codes),
                "seconds": f"{self.seconds:.1f}", "violations": " | ".join(self.violations),
                "cause": self.causes[0] if self.causes else ""}


def tally(records: list[RunRecord]) -> list[dict]:
    """The summary rows: one per fault kind (in order of first appearance), then `all`."""
    kinds: list[str] = []
    for r in records:
        if r.fault not in kinds:
            kinds.append(r.fault)
    out = []
    for kind in kinds + ["all"]:
        rs = [r for r in records if kind in ("all", r.fault)]
        out.append({"fault": kind, "runs": len(rs),
                    "applied": sum(r.applied for r in rs),
                    "late": sum(r.applied and r.late for r in rs),
                    "missed": sum(not r.applied and r.fault != "none" for r in rs),
                    "completed": sum(r.outcome == "completed" for r in rs),
                    "lost": sum(r.outcome == "lost" for r in rs),
                    "hangs": sum(r.outcome == "hang" for r in rs),
                    "violating_runs": sum(bool(r.violations) for r in rs)})
    return out


def markdown(rows: list[dict], records: list[RunRecord], header: str) -> str:
    """The summary as a markdown page: the table, runs per world, the violations."""
    lines = [header, "", "| " + " | ".join(COLUMNS) + " |",
             "|" + "|".join("---" for _ in COLUMNS) + "|"]
    for r in rows:
        lines.append("| " + " | ".join(str(r[c]) for c in COLUMNS) + " |")
    worlds = Counter(r.world for r in records)
    lines += ["", "Runs per world: " + ", ".join(f"{w} {n}" for w, n in sorted(worlds.items()))]
    bad = [r for r in records if r.violations]
    lines += ["", f"Runs that broke an invariant: {len(bad)}"]
    for r in bad:
        lines.append(f"- run {r.index + 1} (seed {r.seed}, {r.world}, {r.fault}"
                     f"{'/' + r.variant if r.variant else ''}: {r.detail}):")
        lines += [f"  - {v}" for v in r.violations]
    return "\n".join(lines) + "\n"


def write(out: Path, records: list[RunRecord], meta: dict) -> list[dict]:
    """Writes runs.csv, summary.csv, summary.md and summary.json into `out`; returns the rows."""
    out.mkdir(parents=True, exist_ok=True)
    rows = tally(records)
    with (out / "runs.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(RunRecord(0, 0, "", "", "", "", "", False, False,
                                                        "", [], 0.0).row()))
        w.writeheader()
        for r in records:
            w.writerow(r.row())
    with (out / "summary.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)
    header = (f"# Chaos campaign: {len(records)} runs, seed {meta.get('seed')}, "
              f"worlds {','.join(meta.get('worlds', []))}")
    (out / "summary.md").write_text(markdown(rows, records, header))
    violations = [{"run": r.index + 1, "seed": r.seed, "world": r.world, "fault": r.fault,
                   "detail": r.detail, "violations": r.violations} for r in records if r.violations]
    (out / "summary.json").write_text(json.dumps(
        {**meta, "by_fault": rows, "violations": violations,
         "runs_per_world": dict(Counter(r.world for r in records))}, indent=2) + "\n")
    return rows
