"""kungfu.sim: kfsim's records as Python structures and DataFrames; its errors as exceptions."""

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def kfsim_env(monkeypatch):
    if os.environ.get("KFSIM"):
        return
    kfrun = os.environ.get("KFRUN")
    if kfrun:
        monkeypatch.setenv("KFSIM", str(Path(kfrun).parent / "kfsim"))


def test_a_run_returns_its_records(tmp_path):
    import kungfu.sim as ks
    rec = ks.run(ROOT / "scenarios/straggler.yaml", out=tmp_path / "s", world="flow",
                 set={"steps": 12})
    assert rec.summary["scenario"] == "straggler" and rec.summary["world"] == "flow"
    steps = {row["step"] for row in rec.steps}
    assert steps == set(range(12))
    assert rec.collectives and rec.events
    assert rec.perf["wall_seconds"] > 0
    frame = rec.dataframe("steps")
    assert len(frame) == len(rec.steps) and "step" in frame.columns


def test_a_sweep_has_one_records_per_arm(tmp_path):
    import kungfu.sim as ks
    rec = ks.run(ROOT / "scenarios/strategies.yaml", out=tmp_path / "sw", world="flow",
                 set={"sweep.values": ["STAR", "RING"]})
    assert set(rec.arms) == {"strategy=STAR", "strategy=RING"}
    assert [row["value"] for row in rec.tables["sweep"]] == ["STAR", "RING"]
    assert rec.arms["strategy=RING"].summary["strategy"] == "RING"


def test_a_bad_scenario_raises_naming_the_place(tmp_path):
    import kungfu.sim as ks
    bad = tmp_path / "bad.yaml"
    bad.write_text("steps: 2\ntopology: {hosts: 2, link: {bandwidth: 1G}}\n")
    with pytest.raises(ks.ScenarioError, match=r"bad.yaml:2:\d+: topology.link.bandwidth"):
        ks.run(bad)
    with pytest.raises(FileNotFoundError):
        ks.load(tmp_path / "nothing-here")
