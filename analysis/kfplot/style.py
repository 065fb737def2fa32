"""Slide-sized figure defaults and saving as PNG + PDF."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display needed
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

SLIDE = (10.0, 5.6)  # inches: 16:9, readable when projected full-screen

plt.rcParams.update({
    "font.size": 14,
    "axes.titlesize": 16,
    "axes.labelsize": 15,
    "legend.fontsize": 12,
    "xtick.labelsize": 13,
    "ytick.labelsize": 13,
    "lines.linewidth": 2.0,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "savefig.dpi": 150,
    "pdf.fonttype": 42,  # embed TrueType: editable text in the PDF
    "svg.hashsalt": "kfplot",
})

# Injected-event shading, by kind.
WINDOW_COLOURS = {"contention": "tab:red", "straggler": "tab:orange", "link": "tab:purple",
                  "fail": "black"}
# Adaptation markers, by kind.
ADAPT_STYLE = {"switch": ("tab:green", "--"), "resize": ("tab:blue", ":"),
               "batch": ("tab:brown", "-."), "lr": ("tab:gray", "-."), "stop": ("black", "-")}


def figure(size: tuple[float, float] = SLIDE) -> tuple[Figure, "matplotlib.axes.Axes"]:
    fig, ax = plt.subplots(figsize=size)
    return fig, ax


def save(fig: Figure, base: Path | str) -> list[Path]:
    """Writes base.png and base.pdf (base without a suffix); returns both paths."""
    base = Path(base)
    base.parent.mkdir(parents=True, exist_ok=True)
    out = []
    fig.tight_layout()
    for ext in ("png", "pdf"):
        p = base.with_name(base.name + "." + ext)
        # Fixed metadata: the same records give the same files.
        meta = {"Software": "kfplot"} if ext == "png" else {"Creator": "kfplot", "CreationDate": None}
        fig.savefig(p, metadata=meta)
        out.append(p)
    plt.close(fig)
    return out
