"""kfplot: plots from the KungFu testbed's output records (kfsim and real runs alike).

    records   loaders (steps.csv, collectives.csv, events.csv, summary.json, sweep.csv, kfbench --json)
    timeline  per-step throughput with event windows and adaptations; cluster size over time
    scaling   actual vs ideal throughput over a sweep
    busbw     allreduce bus bandwidth vs size
    accuracy  test accuracy vs time
    report    everything that applies to a set of directories (what analysis/plot.py runs)
    fidelity  real namespace cluster vs ns-3 vs flow allreduce times (artifact/fidelity.sh)
"""

from .records import RecordError, load_kfbench, load_run, load_sweep  # noqa: F401
