"""A simulated world's TCP senders over time: kfsim's tcp.csv (scenario key `tcp_samples`).

Each row is one sender's state at a sample time: its congestion window, slow-start threshold,
smoothed RTT, bytes in flight and bytes acknowledged so far. `tcp_timeline` draws the window and
the RTT of the busiest senders, with the run's injected events shaded; `tcp_overlay` draws the
same senders of several runs on one figure (`kfsim --compare ns3,flow --plot` with
`tcp_samples`: each world's windows beside the other's). (ns-3's CUBIC grows a
window on every ACK, also while the application or the receiver, not the window, limits the
sender; Linux does not, so an idle-ish ns-3 connection's window can climb far above Linux's.)
"""

from __future__ import annotations

import csv
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from .records import RecordError, Run
from .style import SLIDE, plt, save
from .timeline import colours, shade_events

MSS = 1448  # bytes per segment at MTU 1500 with timestamps (the fidelity twin's links)
SHOWN = 8  # senders drawn: the background flows, then the runtime's by bytes acknowledged


@dataclass
class TcpRow:
    time_s: float
    kind: str  # "job" | "background"
    src: str
    dst: str
    flow: int
    cwnd_bytes: int
    ssthresh_bytes: int  # 0: still in slow start
    srtt_s: float  # 0: no RTT sample yet
    in_flight_bytes: int
    acked_bytes: int

    @property
    def sender(self) -> str:
        flow = f" #{self.flow}" if self.kind == "background" else ""
        return f"{self.src}->{self.dst}{flow}"


def load_tcp(path: Path | str) -> list[TcpRow]:
    """tcp.csv's rows; a missing column or a bad number is an error naming the file and line."""
    path = Path(path)
    rows: list[TcpRow] = []
    try:
        with path.open(newline="") as f:
            for n, r in enumerate(csv.DictReader(f), 2):
                try:
                    rows.append(TcpRow(float(r["time_s"]), r["kind"], r["src"], r["dst"],
                                       int(r["flow"]), int(r["cwnd_bytes"]),
                                       int(r["ssthresh_bytes"]), float(r["srtt_s"]),
                                       int(r["in_flight_bytes"]), int(r["acked_bytes"])))
                except (KeyError, TypeError, ValueError) as e:
                    raise RecordError(f"{path}:{n}: {e!r}") from None
    except OSError as e:
        raise RecordError(f"{path}: {e.strerror}") from None
    return rows


def busiest(rows: Sequence[TcpRow], n: int = SHOWN) -> list[str]:
    """The senders worth drawing: every background flow, then the runtime's connections that
    acknowledged the most bytes, `n` in all."""
    acked: dict[str, int] = defaultdict(int)
    background: set[str] = set()
    for r in rows:
        acked[r.sender] = max(acked[r.sender], r.acked_bytes)
        if r.kind == "background":
            background.add(r.sender)
    ranked = sorted(background) + sorted((s for s in acked if s not in background),
                                         key=lambda s: (-acked[s], s))
    return ranked[:n]


def tcp_timeline(run: Run, rows: Sequence[TcpRow], base: Path | str) -> list[Path]:
    """Congestion window (MB) and smoothed RTT (ms) of the busiest senders over time."""
    shown = busiest(rows)
    fig, (cw, rtt) = plt.subplots(2, 1, figsize=SLIDE, sharex=True)
    for sender, c in zip(shown, colours(len(shown))):
        mine = [r for r in rows if r.sender == sender]
        style = "--" if mine and mine[0].kind == "background" else "-"
        cw.plot([r.time_s for r in mine], [r.cwnd_bytes / 1e6 for r in mine], style, color=c,
                lw=1.5, label=sender)
        timed = [r for r in mine if r.srtt_s > 0]
        rtt.plot([r.time_s for r in timed], [r.srtt_s * 1000 for r in timed], style, color=c,
                 lw=1.5)
    for ax in (cw, rtt):
        shade_events(ax, [run], "time")
        ax.set_ylim(bottom=0)
    cw.set_ylabel("cwnd (MB)")
    rtt.set_ylabel("srtt (ms)")
    rtt.set_xlabel("simulated time (s)")
    world = "flow world" if run.summary.get("world") == "flow" else "ns-3"
    cw.set_title(f"TCP senders ({world}, {len(shown)} of {len({r.sender for r in rows})}): "
                 f"{run.label}")
    cw.legend(loc="upper left", fontsize=9, ncol=2, framealpha=0.85)
    return save(fig, base)


RUN_STYLES = ("-", "--", ":", "-.")


def tcp_overlay(runs: Sequence[tuple[Run, Sequence[TcpRow]]], base: Path | str) -> list[Path]:
    """The busiest senders of the first run, their window (MB) and smoothed RTT (ms) in every
    run: one colour per sender, one line style per run."""
    shown = busiest(runs[0][1], SHOWN // 2)
    fig, (cw, rtt) = plt.subplots(2, 1, figsize=SLIDE, sharex=True)
    for (run, rows), style in zip(runs, RUN_STYLES):
        for sender, c in zip(shown, colours(len(shown))):
            mine = [r for r in rows if r.sender == sender]
            first = run is runs[0][0]
            cw.plot([r.time_s for r in mine], [r.cwnd_bytes / 1e6 for r in mine], style, color=c,
                    lw=1.5, label=sender if first else None)
            timed = [r for r in mine if r.srtt_s > 0]
            rtt.plot([r.time_s for r in timed], [r.srtt_s * 1000 for r in timed], style,
                     color=c, lw=1.5)
    for ax in (cw, rtt):
        ax.set_ylim(bottom=0)
    cw.set_ylabel("cwnd (MB)")
    rtt.set_ylabel("srtt (ms)")
    rtt.set_xlabel("simulated time (s)")
    styles = ", ".join(f"{run.label} {style}"
                       for (run, _), style in zip(runs, RUN_STYLES))
    cw.set_title(f"TCP senders, {len(shown)} busiest: {styles}")
    cw.legend(loc="upper left", fontsize=9, ncol=2, framealpha=0.85)
    return save(fig, base)
