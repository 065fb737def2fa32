"""kungfu.sim: run a scenario in the simulator (kfsim) and read its records from Python.

    import kungfu.sim as ks
    run = ks.run("scenarios/contention.yaml", set={"steps": 20}, world="flow")
    run.summary["throughput_samples_per_s"], run.steps[0]["duration_s"]
    run.dataframe("steps")              # a pandas DataFrame, where python3-pandas is installed

A sweep or a `variants:` file gives one Records per arm in `Records.arms` (by directory name),
with the experiment's own summary (variants) or sweep table in the parent. A bad scenario raises
ScenarioError with kfsim's message (FILE:LINE:COL).
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Union

__all__ = ["run", "load", "Records", "ScenarioError", "SimulationError", "kfsim_path"]

TABLES = ("steps", "collectives", "events", "peers", "tcp", "sweep", "variants", "compare")


class ScenarioError(ValueError):
    """kfsim refused the scenario (exit code 2); the message names the file, line and column."""


class SimulationError(RuntimeError):
    """kfsim ran but the run failed (exit code 1 or a signal)."""


def kfsim_path() -> str:
    """The kfsim binary: $KFSIM, else the one built beside this package (build/<flavour>/apps),
    else `kfsim` on PATH."""
    if os.environ.get("KFSIM"):
        return os.environ["KFSIM"]
    beside = Path(__file__).resolve().parent.parent.parent / "apps" / "kfsim"
    if beside.exists():
        return str(beside)
    found = shutil.which("kfsim")
    if not found:
        raise FileNotFoundError("kungfu.sim: kfsim not found: set KFSIM, or run ./kf setup")
    return found


def _number(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def _read_csv(path: Path) -> List[Dict[str, Any]]:
    with path.open(newline="") as f:
        return [{k: _number(v) for k, v in row.items()} for row in csv.DictReader(f)]


@dataclass
class Records:
    """One kfsim output directory: its tables as lists of rows (dicts), its JSON documents, and
    the arms of a sweep or of variants."""

    path: Path
    tables: Dict[str, List[Dict[str, Any]]] = field(default_factory=dict)
    summary: Dict[str, Any] = field(default_factory=dict)
    perf: Dict[str, Any] = field(default_factory=dict)
    arms: Dict[str, "Records"] = field(default_factory=dict)

    @property
    def steps(self) -> List[Dict[str, Any]]:
        return self.tables.get("steps", [])

    @property
    def collectives(self) -> List[Dict[str, Any]]:
        return self.tables.get("collectives", [])

    @property
    def events(self) -> List[Dict[str, Any]]:
        return self.tables.get("events", [])

    def dataframe(self, table: str):
        """The table as a pandas DataFrame (python3-pandas)."""
        try:
            import pandas
        except ImportError as e:
            raise ImportError("kungfu.sim: dataframe() needs pandas (apt-get install "
                              "python3-pandas); the rows are in Records.tables") from e
        if table not in self.tables:
            raise KeyError(f"kungfu.sim: no {table}.csv in {self.path} "
                           f"(tables: {', '.join(sorted(self.tables))})")
        return pandas.read_csv(self.path / f"{table}.csv")


def load(path: Union[str, os.PathLike]) -> Records:
    """The records kfsim wrote into `path` (and, for an experiment, into its arms' folders)."""
    root = Path(path)
    if not root.is_dir():
        raise FileNotFoundError(f"kungfu.sim.load: {root} is not a directory")
    rec = Records(root)
    for name in TABLES:
        if (root / f"{name}.csv").exists():
            rec.tables[name] = _read_csv(root / f"{name}.csv")
    if (root / "summary.json").exists():
        rec.summary = json.loads((root / "summary.json").read_text())
    if (root / "perf.json").exists():
        rec.perf = json.loads((root / "perf.json").read_text())
    for sub in sorted(p for p in root.iterdir() if p.is_dir()):
        if (sub / "summary.json").exists() or any(sub.glob("*/summary.json")):
            rec.arms[sub.name] = load(sub)
    if not (rec.tables or rec.summary or rec.arms):
        raise FileNotFoundError(f"kungfu.sim.load: no kfsim records in {root}")
    return rec


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_value(x) for x in v) + "]"
    return str(v)


def run(scenario: Union[str, os.PathLike], out: Optional[Union[str, os.PathLike]] = None,
        set: Optional[Mapping[str, Any]] = None, world: Optional[str] = None,
        seed: Optional[int] = None, compare: Optional[List[str]] = None,
        quiet: bool = True, timeout: Optional[float] = None) -> Records:
    """Runs `scenario` with kfsim and returns its records.

    `set` overrides keys ({"steps": 20, "topology.hosts": 8}, as kfsim --set); `world` is "ns3"
    or "flow"; `compare` a list of worlds to run side by side. Without `out` the records go to a
    fresh temporary directory (Records.path says where).
    """
    out_dir = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="kungfu-sim-"))
    cmd = [kfsim_path(), str(scenario), "--out", str(out_dir)]
    for key, value in (set or {}).items():
        cmd += ["--set", f"{key}={_value(value)}"]
    if world:
        cmd += ["--world", world]
    if seed is not None:
        cmd += ["--seed", str(seed)]
    if compare:
        cmd += ["--compare", ",".join(compare)]
    if quiet:
        cmd.append("--quiet")
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if result.returncode == 2:
        raise ScenarioError(result.stderr.strip())
    if result.returncode != 0:
        raise SimulationError(f"kfsim exited with {result.returncode}: {result.stderr.strip()}")
    return load(out_dir)
