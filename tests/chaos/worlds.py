"""Where a chaos run's runners live. `loopback`: two hosts on the machine's loopback
(127.0.0.1 and 127.0.0.2, 2 slots each), one kfrun per host. `netns`: 4 network namespaces on a
bridge in a namespace of its own, built by tests/netns_lib.sh (1 Gbit/s tbf links, the machine's
own network untouched), one slot and one kfrun per namespace; its veths can be taken down and
up. Namespaces are named kfx<driver pid>n<i> (and ...br), so that a later campaign removes those
a killed driver left behind."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Optional

HERE = Path(__file__).resolve().parent
NETNS_LIB = HERE.parent / "netns_lib.sh"


class World:
    """A set of hosts that each run one kfrun. Subclasses say how to run a command on a host."""

    name = ""
    hosts: list[str] = []
    slots = 1

    def setup(self) -> None:
        """Makes the hosts (idempotent)."""

    def teardown(self) -> None:
        """Removes what setup made and kills what still runs there."""

    def prefix(self, host: int) -> list[str]:
        """The argv prefix that runs a command on host `host`."""
        return []

    def can_flap(self) -> bool:
        """Whether link() can take a host's link down."""
        return False

    def link(self, host: int, up: bool) -> None:
        """Takes host `host`'s link down or up."""
        raise NotImplementedError(f"{self.name}: no link to take down")

    def host_list(self) -> str:
        """kfrun's -H for every host."""
        return ",".join(f"{h}:{self.slots}" for h in self.hosts)

    def capacity(self) -> int:
        """Workers the hosts hold."""
        return len(self.hosts) * self.slots


class Loopback(World):
    """Two hosts on loopback: every 127/8 address is this machine's."""

    name = "loopback"
    hosts = ["127.0.0.1", "127.0.0.2"]
    slots = 2


def _ip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True)


def sweep_stale_namespaces() -> list[str]:
    """Deletes kfx<pid>* namespaces whose driver is gone (a campaign killed before its cleanup),
    killing what runs in them; returns their names."""
    out = _ip("netns", "list")
    removed = []
    for line in out.stdout.splitlines():
        m = re.match(r"(kfx(\d+)(?:n\d+|br))\b", line)
        if not m or os.path.exists(f"/proc/{m.group(2)}"):
            continue
        ns = m.group(1)
        pids = _ip("netns", "pids", ns).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), 9)
            except (ProcessLookupError, ValueError):
                pass
        _ip("netns", "del", ns)
        removed.append(ns)
    return removed


class Netns(World):
    """4 namespaces on a bridge (tests/netns_lib.sh), one slot each."""

    name = "netns"
    slots = 1
    subnet = "10.81.0"
    count = 4

    def __init__(self) -> None:
        self.tag = f"kfx{os.getpid()}"
        self.hosts = [f"{self.subnet}.{i + 1}" for i in range(self.count)]
        self.ready = False

    @staticmethod
    def unavailable() -> Optional[str]:
        """Why namespaces cannot be made here, or None."""
        if os.geteuid() != 0:
            return "needs root to create network namespaces"
        for tool in ("ip", "tc"):
            if subprocess.run(["which", tool], capture_output=True).returncode != 0:
                return f"{tool} (iproute2) is not installed"
        return None

    def _lib(self, call: str) -> subprocess.CompletedProcess:
        with tempfile.TemporaryDirectory() as work:
            script = (f'TAG={self.tag}; N={self.count}; SUBNET={self.subnet}; MTU=1500; '
                      f'WORK={work}/w; mkdir -p "$WORK"; source {NETNS_LIB}; {call}')
            return subprocess.run(["bash", "-c", script], capture_output=True, text=True)

    def setup(self) -> None:
        if self.ready:
            return
        sweep_stale_namespaces()
        r = self._lib("netns_setup 1gbit")
        if r.returncode != 0:
            self.teardown()
            raise RuntimeError(f"netns setup failed ({r.returncode}): {r.stdout}{r.stderr}")
        self.ready = True

    def teardown(self) -> None:
        self._lib("netns_cleanup")
        for i in range(self.count):  # a veth a failed setup left in this namespace
            for end in ("v", "p"):
                _ip("link", "del", f"{self.tag}{end}{i}")
        self.ready = False

    def ns(self, host: int) -> str:
        """The namespace of host `host`."""
        return f"{self.tag}n{host}"

    def prefix(self, host: int) -> list[str]:
        return ["ip", "netns", "exec", self.ns(host)]

    def can_flap(self) -> bool:
        return True

    def link(self, host: int, up: bool) -> None:
        r = _ip("-n", self.ns(host), "link", "set", "eth0", "up" if up else "down")
        if r.returncode != 0:
            raise RuntimeError(f"ip link set eth0 in {self.ns(host)}: {r.stderr.strip()}")

    def leftovers(self) -> list[str]:
        """Namespaces of this world still present (after teardown: none)."""
        out = _ip("netns", "list").stdout
        return [line.split()[0] for line in out.splitlines() if line.startswith(self.tag)]
