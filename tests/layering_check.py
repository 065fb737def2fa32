#!/usr/bin/env python3
"""Checks that the tree's dependencies point one way (docs/design.md, Layers).

    apps, python -> {sim, real, launch, gpu} -> workloads -> policies -> runtime -> topology

Every `#include "..."` of a C++ or CUDA source is checked against the rules below, and the
world-free layers (topology, runtime, policies, workloads) must not include sockets, ns-3 or
CUDA headers, nor read a clock. Exit 0 when the tree keeps the rules; 1 with one line per
violation, `FILE:LINE: what`, otherwise.

    /usr/bin/python3 tests/layering_check.py [ROOT]
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

# Folder -> the folders its sources may include from (its own always allowed). A folder not
# listed here (tests, bench, apps, python) may include anything.
ALLOWED: dict[str, set[str]] = {
    "topology": set(),
    "runtime": {"topology", "proto"},
    "policies": {"runtime", "topology"},
    "workloads": {"policies", "runtime", "topology"},
    "real": {"runtime", "topology"},
    "launch": {"real", "runtime", "topology", "proto", "policies"},
    "gpu": {"launch", "real", "workloads", "policies", "runtime", "topology"},
    "sim": {"workloads", "policies", "runtime", "topology"},
    "python": {"sim", "real", "launch", "gpu", "workloads", "policies", "runtime", "topology",
               "proto"},
}

# The layers that see no world: no socket, ns-3 or CUDA header and no clock of their own.
WORLD_FREE = {"topology", "runtime", "policies", "workloads"}
FORBIDDEN_HEADERS = re.compile(
    r"#\s*include\s*[<\"]("
    r"sys/socket\.h|sys/un\.h|sys/epoll\.h|netinet/[^>\"]*|arpa/[^>\"]*|netdb\.h|"
    r"ns3/[^>\"]*|cuda[^>\"]*|cublas[^>\"]*|nccl\.h|curand[^>\"]*"
    r")[>\"]"
)
CLOCK_READS = re.compile(
    r"(steady_clock|system_clock|high_resolution_clock|utc_clock)::now\b|"
    r"\bclock_gettime\s*\(|\bgettimeofday\s*\(|\bstd::time\s*\(|\btime\s*\(\s*(nullptr|NULL|0)\s*\)"
)
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
SOURCES = ("*.h", "*.cc", "*.cu", "*.cuh")


def layer_of(relative: Path) -> str:
    return relative.parts[0]


def strip_comment(line: str) -> str:
    return line.split("//", 1)[0]


def check(root: Path) -> list[str]:
    problems: list[str] = []
    for layer in sorted(ALLOWED):
        folder = root / layer
        if not folder.is_dir():
            problems.append(f"{layer}/: missing (the layering rules name it)")
            continue
        files = sorted(f for pattern in SOURCES for f in folder.rglob(pattern))
        for path in files:
            rel = path.relative_to(root)
            allowed = ALLOWED[layer] | {layer}
            for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                where = f"{rel}:{number}"
                if m := INCLUDE.match(line):
                    target = m.group(1)
                    top = target.split("/", 1)[0]
                    if "/" in target and top not in allowed and (root / top).is_dir():
                        problems.append(f'{where}: {layer}/ may not include "{target}" '
                                        f"({layer} -> {top} points up or sideways)")
                if layer in WORLD_FREE:
                    code = strip_comment(line)
                    if m := FORBIDDEN_HEADERS.search(code):
                        problems.append(f"{where}: {layer}/ includes a world's header "
                                        f"({m.group(1)})")
                    if m := CLOCK_READS.search(code):
                        problems.append(f"{where}: {layer}/ reads a clock ({m.group(0)}); "
                                        "time comes from the Executor")
    return problems


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent
    problems = check(root)
    for p in problems:
        print(p)
    if problems:
        print(f"layering_check: {len(problems)} violation(s); the rules are in "
              "tests/layering_check.py and docs/design.md", file=sys.stderr)
        return 1
    print("layering_check: every include points down the layers", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
